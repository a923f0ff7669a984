"""The project's scripts: the modules of tools/ that run as files.

A script is a module of tools/ with a ``__main__`` block, other than the command line itself
(``cli.py``, ``__main__.py``; the ``cmd_*.py`` modules are its subcommands).
"""

from __future__ import annotations

import glob
import os

from paths import REPO

TOOLS = os.path.join(REPO, "tools")
"""The tools/ folder."""
NOT_SCRIPTS = {"__init__.py", "__main__.py", "cli.py"}


def tool_scripts() -> list[str]:
    """File names of the scripts in tools/, sorted."""
    found = []
    for path in sorted(glob.glob(os.path.join(TOOLS, "*.py"))):
        name = os.path.basename(path)
        if name in NOT_SCRIPTS or name.startswith("cmd_"):
            continue
        with open(path, encoding="utf-8") as f:
            if 'if __name__ == "__main__":' in f.read():
                found.append(name)
    return found
