"""pt2x.tools: the ``pt2x`` command line.

``cli`` (``pt2x``, also ``python -m pt2x``) with one ``cmd_*`` module per subcommand, and its
helpers ``summary``, ``terminal`` and ``snapshot_sources``; ``scan/`` is ``pt2x scan``, whose
checking children are ``supervised`` child processes (time and memory limits, deaths named,
restart; the fuzzer's too) under ``process_limits``.

The project's scripts are in ``tools/scripts/``, a plain folder outside the package and the
wheel: they run as files (``python tools/scripts/bench_load.py --help``), import pt2x as the
installed package and each other as plain modules. ``bench_*`` (benchmarks against torch),
``fuzz`` (with ``fuzz_mutations`` and ``fuzz_onnx_mutations``), ``gen_*`` (generated files: the
schema snapshot, the operator signature table, the TFLite schema module),
``import_torch_schemas``, ``model_zoo`` and ``check_old_torch``.
"""
