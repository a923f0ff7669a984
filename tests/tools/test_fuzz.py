"""The structure-aware fuzzer (``fuzz/fuzz.py``) run on every committed fixture.

* A fixed budget of mutated archives through load (every array summed), validate,
  to_onnx, to_tflite and the command line (inspect, validate, convert --to pt2 for a release
  and for the torch 2.8 and 2.6 layouts): nothing may escape pt2x's exception family, run past
  the time limit, blow the memory limit, crash the worker, or execute a payload. The seed is
  fixed under ``CI=true`` and random otherwise; a failure prints it with one replay command per site.
* A smaller budget of mutated ONNX models (``--onnx``) through to_tflite and
  ``pt2x convert --to tflite``, under the same rules.
* Every reproducer saved in ``tests/tools/fuzz_regressions/`` (found by earlier runs; ``.pt2``
  and ``.onnx``) ends in ``ok`` or a ``Pt2Error`` at every stage.
* The fuzzer's own machinery: cases are reproducible from (seed, index), its payloads really
  do run when unpickled / evaluated, and its verdicts (timeout, memory, crash, escape,
  marker) are what happened.
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
from pathlib import Path

import pytest

import paths
from workshop import load_script, run_script

fuzz = load_script("fuzz")
fm = load_script("fuzz_mutations")

REPO = Path(paths.REPO)
REGRESSIONS = Path(__file__).resolve().parent / "fuzz_regressions"
BUDGET = 300
ONNX_BUDGET = 100
CI_SEED = 20261123
CASE_TIMEOUT = 30
"""Seconds per case here. The 10 s bound is what the long runs in the README check on a quiet
machine (the slowest accepted load of 100,000 cases took 6.1 s); a test suite runs on loaded
and slow machines too, and the bug class it guards against (amplification, exponential decode)
takes minutes or never ends, so a wider margin keeps the test exact without making it flaky."""


def _seed() -> int:
    if os.environ.get("PT2X_FUZZ_SEED"):
        return int(os.environ["PT2X_FUZZ_SEED"])
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        return CI_SEED
    return random.SystemRandom().randrange(2**31)


def test_fuzz_budget_finds_nothing():
    seed = _seed()
    config = fuzz.FuzzConfig(n=BUDGET, seed=seed, timeout=CASE_TIMEOUT, memory_mib=2048, max_failures=10)
    report = fuzz.fuzz(config)
    assert len(report.results) == BUDGET or report.bad
    assert all(r.stages for r in report.results)
    bad = len(report.bad) + len(report.late_marker)
    assert bad == 0, (
        f"fuzz seed {seed} (rerun: PT2X_FUZZ_SEED={seed} pytest tests/tools/test_fuzz.py, "
        f"or python -m fuzz.fuzz --n {BUDGET} --seed {seed}):\n{report.summary()}"
    )


def test_onnx_budget_finds_nothing():
    seed = _seed()
    config = fuzz.FuzzConfig(n=ONNX_BUDGET, seed=seed, timeout=CASE_TIMEOUT, memory_mib=2048, max_failures=10,
                             stages=fuzz.ONNX_STAGES, onnx=True)
    report = fuzz.fuzz(config)
    assert len(report.results) == ONNX_BUDGET or report.bad
    assert all(r.stages for r in report.results)
    bad = len(report.bad) + len(report.late_marker)
    assert bad == 0, (
        f"fuzz --onnx seed {seed} (rerun: PT2X_FUZZ_SEED={seed} pytest tests/tools/test_fuzz.py, "
        f"or python -m fuzz.fuzz --onnx --n {ONNX_BUDGET} --seed {seed}):\n{report.summary()}"
    )


def _regressions() -> list[Path]:
    return sorted([*REGRESSIONS.glob("*.pt2"), *REGRESSIONS.glob("*.onnx")])


@pytest.fixture(scope="module")
def regression_results():
    out = {}
    for suffix in (".pt2", ".onnx"):  # run_files takes one kind at a time
        files = [f for f in _regressions() if f.suffix == suffix]
        out.update(zip(files, fuzz.run_files([str(f) for f in files], timeout=CASE_TIMEOUT, memory_mib=2048)))
    return out


def test_regressions_are_present():
    assert _regressions(), "tests/tools/fuzz_regressions/ holds the reproducers of earlier fuzz runs"
    assert any(f.suffix == ".onnx" for f in _regressions()), "and some are ONNX models (fuzz.py --onnx)"
    for f in _regressions():
        assert f.with_suffix(".json").is_file(), f"{f.name} has no .json record"
        assert f.stat().st_size < 50_000


@pytest.mark.parametrize("path", _regressions(), ids=lambda p: p.stem)
def test_regression_ends_in_ok_or_pt2error(path, regression_results):
    r = regression_results[path]
    assert r.stages and r.stages[0].stage == ("tflite-onnx" if path.suffix == ".onnx" else "load")
    bad = "; ".join(f"{s.stage}: {s.outcome} {s.exception or ''} at {s.site}: {s.message}" for s in r.stages
                    if s.kind not in ("ok", "pt2error"))
    marker = ", ".join(r.marker)
    assert bad == "" and marker == "", (
        f"{path.name} (python -m fuzz.fuzz --replay {path.relative_to(REPO)}): {bad} {r.marker}\n{r.traceback or ''}"
    )


def test_cases_are_reproducible_from_seed_and_index():
    fixtures = fuzz.default_fixtures()
    assert any("torch-2.6" in f for f in fixtures) and any("torch-2.13" in f for f in fixtures)
    for index in (0, 1, 17, 123):
        a = fm.make_case(99, index, fixtures)
        b = fm.make_case(99, index, fixtures)
        assert a.data == b.data and a.steps == b.steps and a.steps
    assert fm.make_case(99, 0, fixtures).data != fm.make_case(99, 1, fixtures).data
    assert fm.make_case(99, 0, fixtures).data != fm.make_case(98, 0, fixtures).data


_LIVE = """
import os, pickle, subprocess, sys
sys.path.insert(0, sys.argv[1])
from fuzz import fuzz_mutations as fm
env = {"Symbol": lambda *a, **k: 1, "FloorDiv": lambda a, b: a // b, "s0": 2, "s77": 3}
dead = []
for desc, data in fm.marker_pickles():
    try:
        pickle.loads(data)
    except Exception:
        pass
    if not os.path.exists(fm.MARKER):
        dead.append(desc)
    else:
        os.unlink(fm.MARKER)
for expr in fm.MARKER_EXPRESSIONS:
    try:
        eval(expr, dict(env))
    except Exception:
        pass
    if not os.path.exists(fm.MARKER):
        dead.append(expr)
    else:
        os.unlink(fm.MARKER)
print(dead)
"""


def test_marker_payloads_really_run(tmp_path):
    """Were anything in a file executed, the payloads would create the marker: proven here by a
    real unpickler and a real eval, in an empty directory."""
    out = subprocess.run([sys.executable, "-c", _LIVE, str(paths.REPO)], cwd=tmp_path, capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]", f"payloads that did not create the marker: {out.stdout}"


@pytest.mark.parametrize(
    "stage, kind",
    [("selftest-sleep", "timeout"), ("selftest-alloc", "memory"), ("selftest-crash", "crash"),
     ("selftest-escape", "escape"), ("selftest-marker", "ok")],
)
def test_fuzzer_verdicts(stage, kind):
    fixture = str(REPO / "tests/fixtures/pt2/torch-2.13.0/mlp_dynamic.pt2")
    [r] = fuzz.run_files([fixture], stages=("load", stage), timeout=5, memory_mib=512)
    assert [s.stage for s in r.stages] == ["load", stage]
    assert r.stages[0].outcome == "ok"
    assert r.stages[1].kind == kind, r.stages[1]
    assert r.bad
    assert bool(r.marker) == (stage == "selftest-marker")


def test_command_line_runs_as_a_module(tmp_path):
    run = run_script("fuzz.fuzz", "--n", "8", "--seed", "3", "--stages", "load", "--quiet", "--out",
                     str(tmp_path / "out"), cwd=tmp_path, timeout=120)
    assert run.returncode in (0, 1), run.stderr
    assert "pt2x fuzz: seed 3, 8 cases" in run.stdout
    assert "marker: never created" in run.stdout
    help_ = run_script("fuzz.fuzz", "--help", cwd=tmp_path, timeout=60)
    assert help_.returncode == 0 and "--replay" in help_.stdout
