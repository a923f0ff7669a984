"""The project's scripts: benchmarks, fuzzers, generators and the model zoo in tools/scripts/.

tools/scripts/ is a plain folder, not a package (no ``__init__.py``, not in the wheel): a script
runs as a file (``python tools/scripts/fuzz.py``), imports pt2x as the installed package and the
other scripts as plain modules from its own folder. A script is a module there with a
``__main__`` block (``fuzz_mutations.py`` and the other helpers of a script have none).
``load_script`` imports one into a test the way the scripts import each other.
"""

from __future__ import annotations

import glob
import importlib
import os
import sys
from types import ModuleType

from paths import REPO

SCRIPTS = os.path.join(REPO, "tools", "scripts")
"""The tools/scripts/ folder."""


def tool_scripts() -> list[str]:
    """File names of the scripts in tools/scripts/, sorted."""
    found = []
    for path in sorted(glob.glob(os.path.join(SCRIPTS, "*.py"))):
        with open(path, encoding="utf-8") as f:
            if 'if __name__ == "__main__":' in f.read():
                found.append(os.path.basename(path))
    return found


def load_script(name: str) -> ModuleType:
    """The module ``tools/scripts/<name>.py``, imported as the scripts import each other: by its
    plain name, with the folder on ``sys.path`` (appended: tests/support/ keeps its own names)."""
    if SCRIPTS not in sys.path:
        sys.path.append(SCRIPTS)
    module = importlib.import_module(name)
    where = os.path.dirname(os.path.abspath(module.__file__ or ""))
    assert where == SCRIPTS, f"{name} was imported from {where}, not {SCRIPTS}: a name is shadowed"
    return module
