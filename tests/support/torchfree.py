"""Run code in a subprocess where ``import torch`` fails: the proof a path is torch-free."""

from __future__ import annotations

import subprocess
import sys
import textwrap

_PRELUDE = "import sys\nsys.modules['torch'] = None  # any 'import torch' now raises ImportError\n"


def run_torch_free(code: str, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    """Run ``code`` (a Python snippet) with torch unimportable; returns the completed process."""
    src = _PRELUDE + textwrap.dedent(code)
    return subprocess.run([sys.executable, "-c", src, *args], capture_output=True, text=True, timeout=timeout)


def run_cli_torch_free(*argv: str, timeout: float = 120) -> subprocess.CompletedProcess:
    """Run the ``pt2x`` CLI with torch unimportable."""
    code = "import sys\nfrom pt2x.tools.cli import main\nsys.exit(main(sys.argv[1:]))\n"
    return run_torch_free(code, *argv, timeout=timeout)
