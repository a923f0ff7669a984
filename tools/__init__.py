"""pt2x.tools: the ``pt2x`` command line and the project's scripts.

The command: ``cli`` (``pt2x``, also ``python -m pt2x``) with one ``cmd_*`` module per
subcommand, and its helpers ``summary``, ``terminal`` and ``snapshot_sources``. The scripts run
as files (``python tools/bench_load.py --help``): ``bench_*`` (benchmarks against torch),
``fuzz`` (with ``fuzz_mutations``), ``gen_*`` (generated files: the schema snapshot, the
operator signature table) and ``import_torch_schemas``.
"""
