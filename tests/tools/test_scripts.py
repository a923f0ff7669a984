"""Every script in tools/scripts/ runs as a file (``python tools/scripts/bench_load.py --help``),
and ``python -m pt2x`` runs the command line.

The scripts are found by ``support/scripts.py``. Each is run from another folder, so nothing
depends on the working directory.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from scripts import SCRIPTS as SCRIPTS_DIR, tool_scripts

from pt2x.tools.cli import COMMANDS

SCRIPTS = tool_scripts()


def _run(argv, cwd):
    return subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=300)


def test_the_scripts_are_found():
    assert {"bench_load.py", "bench_onnx.py", "bench_serde.py", "fuzz.py",
            "gen_schema_snapshot.py", "import_torch_schemas.py"} <= set(SCRIPTS)


@pytest.mark.parametrize("script", SCRIPTS)
def test_script_runs_as_a_file(script, tmp_path):
    r = _run([sys.executable, os.path.join(SCRIPTS_DIR, script), "--help"], cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "usage:" in r.stdout


@pytest.mark.parametrize("module", ["pt2x", "pt2x.tools"])
def test_python_m_runs_the_command_line(module, tmp_path):
    r = _run([sys.executable, "-m", module, "--help"], cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.startswith("usage: pt2x ")
    for command in COMMANDS:
        assert command in r.stdout


def test_bench_tflite_refuses_an_unknown_model_before_any_work(tmp_path):
    # argument parsing only: no export, no litert-torch venv made (the venv path stays absent)
    venv = tmp_path / "venv"
    r = _run([sys.executable, os.path.join(SCRIPTS_DIR, "bench_tflite.py"), "--models", "convbn,nosuch",
              "--litert-torch-venv", str(venv), "--out", str(tmp_path / "out")], cwd=tmp_path)
    assert r.returncode == 2, r.stdout + r.stderr
    assert "unknown model(s): nosuch" in r.stderr
    assert not venv.exists() and not (tmp_path / "out").exists()
