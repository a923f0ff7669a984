"""Every script of the workshop (benchmarks/, fuzz/, scripts/) runs as a module
(``python -m benchmarks.bench_load --help``), and ``python -m pt2x`` runs the command line.

The scripts are found by ``support/workshop.py``. Each is run from another folder, with the
repository on ``PYTHONPATH``, so nothing depends on the working directory.
"""

from __future__ import annotations

import subprocess
import sys

import pytest
from workshop import run_script, tool_scripts

from pt2x.tools.cli import COMMANDS

SCRIPTS = tool_scripts()


def _run(argv, cwd):
    return subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=300)


def test_the_scripts_are_found():
    assert {"benchmarks.bench_load", "benchmarks.bench_onnx", "benchmarks.bench_serde", "fuzz.fuzz",
            "scripts.gen_schema_snapshot", "scripts.import_torch_schemas"} <= set(SCRIPTS)


@pytest.mark.parametrize("script", SCRIPTS)
def test_script_runs_as_a_module(script, tmp_path):
    r = run_script(script, "--help", cwd=tmp_path)
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
    r = run_script("benchmarks.bench_tflite", "--models", "convbn,nosuch", "--litert-torch-venv", str(venv),
                   "--out", str(tmp_path / "out"), cwd=tmp_path)
    assert r.returncode == 2, r.stdout + r.stderr
    assert "unknown model(s): nosuch" in r.stderr
    assert not venv.exists() and not (tmp_path / "out").exists()
