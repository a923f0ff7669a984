"""The architecture, checked by a tool: the import contracts in pyproject.toml hold.

``[tool.importlinter]`` in pyproject.toml names the rules (layers tools -> converters -> serde ->
schema; schema imports nothing above it; torch only under ``pt2x.serde.torch``; onnx only under
the converters that emit or consume ONNX; no import cycles inside any package). ``lint-imports``
checks them over every import statement of the package, lazy ones inside functions included.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys

from paths import REPO

LINT_IMPORTS = "import sys; from importlinter.cli import lint_imports_command; sys.exit(lint_imports_command())"


def test_import_contracts_hold():
    # This interpreter's import-linter (the `lint-imports` command), without its cache folder
    # (it would be written into the repository).
    r = subprocess.run(
        [sys.executable, "-c", LINT_IMPORTS, "--config", "pyproject.toml", "--no-cache", "--no-logo"],
        cwd=REPO, capture_output=True, text=True, timeout=300,
    )
    assert r.returncode == 0, f"lint-imports exited {r.returncode}:\n{r.stdout}{r.stderr}"
    # every contract in the file was read and checked (a misspelt section would check nothing)
    with open(os.path.join(REPO, "pyproject.toml"), encoding="utf-8") as f:
        declared = f.read().count("[[tool.importlinter.contracts]]")
    assert declared >= 5
    assert re.search(rf"Contracts: {declared} kept, 0 broken", r.stdout), r.stdout
