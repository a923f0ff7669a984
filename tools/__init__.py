"""pt2x.tools: the ``pt2x`` command line.

``cli`` (``pt2x``, also ``python -m pt2x``) with one ``cmd_*`` module per subcommand, and its
helpers ``summary``, ``terminal`` and ``snapshot_sources``; ``scan/`` is ``pt2x scan``, whose
checking children are ``supervised`` child processes (time and memory limits, deaths named,
restart; the fuzzer's too) under ``process_limits``.

The project's workshop is outside the package and the wheel, at the repository root:
``benchmarks/``, ``fuzz/`` and ``scripts/``, run as modules (``python -m benchmarks.bench_load --help``).
"""
