"""The project's workshop: ``benchmarks/``, ``fuzz/`` and ``scripts/`` at the repository root.

They are namespace packages (no ``__init__.py``: the repository root is the ``pt2x`` package, and
a folder with one would be a subpackage of it) outside the wheel, run from the repository root as modules (``python -m benchmarks.bench_load --help``), and import each other by
package (``from fuzz import fuzz_mutations``) and pt2x as the installed package. A script is a
module there with a ``__main__`` block. ``load_script`` imports one into a test by its package
name (pyproject's pytest ``pythonpath`` puts the repository root on the path).
"""

from __future__ import annotations

import glob
import importlib
import os
import subprocess
import sys
from types import ModuleType

from paths import REPO

PACKAGES = ("benchmarks", "fuzz", "scripts")
"""The workshop's packages, each a folder at the repository root."""


def tool_scripts() -> list[str]:
    """``package.module`` of every script in the workshop (a module with a ``__main__`` block), sorted."""
    found = []
    for pkg in PACKAGES:
        for path in sorted(glob.glob(os.path.join(REPO, pkg, "*.py"))):
            with open(path, encoding="utf-8") as f:
                if 'if __name__ == "__main__":' in f.read():
                    found.append(f"{pkg}.{os.path.splitext(os.path.basename(path))[0]}")
    return found


def module_name(name: str) -> str:
    """``package.name`` of the workshop module ``name`` (``bench_llm`` -> ``benchmarks.bench_llm``)."""
    where = [pkg for pkg in PACKAGES if os.path.exists(os.path.join(REPO, pkg, name + ".py"))]
    assert len(where) == 1, f"{name}.py is in {where or 'none'} of the workshop's packages {PACKAGES}"
    return f"{where[0]}.{name}"


def load_script(name: str) -> ModuleType:
    """The workshop module ``name``, imported by its package (``benchmarks.bench_llm``)."""
    module = importlib.import_module(module_name(name))
    where = os.path.dirname(os.path.dirname(os.path.abspath(module.__file__ or "")))
    assert where == str(REPO), f"{name} was imported from {where}, not {REPO}: a name is shadowed"
    return module


def run_script(module: str, *args: str, cwd=None, timeout: float = 300, env: dict | None = None) -> subprocess.CompletedProcess:
    """``python -m module args`` from ``cwd``, with the repository (the workshop's packages) first on
    ``PYTHONPATH``, so that it runs from any folder."""
    env = dict(os.environ if env is None else env)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH", "")) if p)
    return subprocess.run([sys.executable, "-m", module, *args], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, env=env)
