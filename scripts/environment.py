"""Where the workshop (``benchmarks/``, ``fuzz/``, ``scripts/``) finds the repository and the tests'
shared support modules (the model zoo, the tests' programs, PT2E helpers in ``tests/support/``),
without editing ``sys.path``: the workshop runs as packages from the repository root
(``python -m benchmarks.bench_tflite``), and a child process that needs the support modules gets
them on its ``PYTHONPATH`` (``child_env``).
"""

from __future__ import annotations

import importlib.util
import os
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
"""The repository root (the ``pt2x`` package, and the workshop's packages)."""

SUPPORT = os.path.join(REPO, "tests", "support")
"""The tests' shared support modules (``model_zoo``, ``zoo``, ``pt2e``, ``sweep``, ...)."""


def child_env(base: dict | None = None) -> dict:
    """``base`` (default ``os.environ``) with the repository and ``tests/support`` first on ``PYTHONPATH``."""
    env = dict(os.environ if base is None else base)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (REPO, SUPPORT, env.get("PYTHONPATH", "")) if p)
    return env


def ensure_support(module: str) -> None:
    """Re-run this command (``python -m module ...``) with ``child_env()`` when the support modules
    are not importable yet; a no-op when they are (in the tests, and in the re-run)."""
    if importlib.util.find_spec("model_zoo") is None:
        os.execve(sys.executable, [sys.executable, "-m", module, *sys.argv[1:]], child_env())
