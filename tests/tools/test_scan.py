"""``pt2x scan`` over a generated fleet: the runners agree, bad artifacts are recorded, resume.

The fleet (``make_fleet`` of ``benchmarks/bench_scan.py``) is 500 artifacts made from the
committed fixtures of every torch release: hard links, files cut short, junk named ``*.pt2`` and hostile archives
from the fuzzer's mutations, plus one real program torch exports here whose ONNX conversion
needs more than the scans' ``--memory 64``: it must end as ``oom`` and nothing else may.

* ``--jobs 1`` and ``--jobs 2`` (the command line, each in its own process) and Ray tasks on a
  real local Ray started once for the module (``num_cpus=2``) give the same record per artifact,
  timings aside, and every artifact has exactly one record.
* A scan killed with SIGKILL mid-run and resumed finishes the rest without checking again what
  the output already held, and ends with the same records.
* A per-artifact timeout kills only that artifact's worker.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
from workshop import load_script

from pt2x.tools.scan.driver import scan
from pt2x.tools.scan.options import ScanOptions

FLEET = 500
TARGET = "torch==2.10"
MEMORY_MB = 64
"""Address space a worker may add after start-up: the fixtures need a few MiB, the big model's
ONNX conversion (its 36 MB of weights mapped, then copied) needs more."""
BIG = "team00/zz-big-linear.pt2"
OPTIONS = ScanOptions(target=TARGET, convert=("onnx",), timeout=120.0, memory_mb=MEMORY_MB)
CLI_ARGS = ["--target", TARGET, "--convert", "onnx", "--timeout", "120", "--memory", str(MEMORY_MB)]


def _big_program(path: Path) -> None:
    torch = pytest.importorskip("torch")
    model = torch.nn.Linear(3000, 3000)
    ep = torch.export.export(model, (torch.randn(2, 3000),))
    torch.export.save(ep, str(path))


@pytest.fixture(scope="module")
def fleet(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("fleet")
    bench_scan = load_script("bench_scan")
    kinds = bench_scan.make_fleet(root, FLEET - 1, seed=14)
    assert kinds["fixture"] == len(bench_scan._fixtures()) >= 63 and kinds["hostile"] > 100 and kinds["truncated"] and kinds["junk"]
    _big_program(root / BIG)
    return root


def _scan_cli(*argv: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pt2x", "scan", *argv], capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, "CI": "true"})


def _without_timings(x):
    if isinstance(x, dict):
        return {k: _without_timings(v) for k, v in x.items() if k != "seconds"}
    if isinstance(x, list):
        return [_without_timings(v) for v in x]
    return x


def _records(path: Path) -> dict[str, dict]:
    records = [json.loads(line) for line in path.read_text().splitlines()]
    by_path = {r["path"]: _without_timings(r) for r in records}
    assert len(by_path) == len(records), "an artifact was recorded twice"
    return by_path


@pytest.fixture(scope="module")
def jobs1(fleet, tmp_path_factory) -> dict[str, dict]:
    out = tmp_path_factory.mktemp("jobs1") / "results.jsonl"
    r = _scan_cli(str(fleet), *CLI_ARGS, "--jobs", "1", "--out", str(out), "--json")
    assert r.returncode == 1, r.stderr  # hostile files among them: findings
    summary = json.loads(r.stdout)
    assert summary["artifacts"] == FLEET
    assert "\r[" not in r.stderr  # no progress bar when piped / CI
    return _records(out)


def test_every_artifact_recorded_and_bad_ones_named(jobs1, fleet):
    assert len(jobs1) == FLEET
    verdicts = Counter(r["verdict"] for r in jobs1.values())
    assert set(verdicts) <= {"ok", "findings", "unreadable", "oom"}, verdicts  # no crash, no timeout
    big = jobs1[str(fleet / BIG)]
    assert big["verdict"] == "oom" and big["error"]["class"] == "OutOfMemory", big
    assert verdicts["oom"] == 1
    for path, r in jobs1.items():
        name = Path(path).name
        if "-fixture-" in name or "-copy-" in name:
            # torch's own files: readable, every model converts; only the target can object
            assert r["verdict"] in ("ok", "findings") and r["readable"], (path, r)
            assert all(c["result"] == "ok" for c in r["conversions"]["onnx"].values()), (path, r)
            assert r["models"] and all(m["schema_version"].startswith("8.") for m in r["models"].values())
        if "-junk-" in name:
            assert r["verdict"] == "unreadable" and r["error"]["class"], (path, r)
    assert verdicts["unreadable"] >= 100  # truncated, junk and most hostile files


def test_jobs2_gives_the_same_records(jobs1, fleet, tmp_path):
    out = tmp_path / "results.jsonl"
    r = _scan_cli(str(fleet), *CLI_ARGS, "--jobs", "2", "--out", str(out))
    assert r.returncode == 1, r.stderr
    assert "oom" in r.stdout and "failing:" in r.stdout  # the table
    assert _records(out) == jobs1


@pytest.fixture(scope="module")
def local_ray():
    ray = pytest.importorskip("ray")
    # CI has no network beyond the package registries: Ray must not try to report usage
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    ray.init(num_cpus=2, include_dashboard=False, logging_level="ERROR", log_to_driver=False)
    try:
        yield ray
    finally:
        ray.shutdown()


def test_ray_gives_the_same_records(jobs1, fleet, local_ray):
    records = {}

    def keep(record):
        assert record["path"] not in records
        records[record["path"]] = _without_timings(record)

    summary = scan([str(fleet)], OPTIONS, jobs=2, ray=True, on_record=keep, progress=False)
    assert records == jobs1
    assert summary.artifacts == FLEET and summary.verdicts["oom"] == 1
    assert local_ray.is_initialized()  # a Ray the caller started is left running


def test_resume_after_kill_finishes_the_rest(jobs1, fleet, tmp_path):
    out = tmp_path / "results.jsonl"
    proc = subprocess.Popen([sys.executable, "-m", "pt2x", "scan", str(fleet), *CLI_ARGS, "--jobs", "2",
                             "--out", str(out)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and proc.poll() is None:
        if out.exists() and out.read_bytes().count(b"\n") >= FLEET // 4:
            break
        time.sleep(0.02)
    assert proc.poll() is None, "the scan ended before it could be killed"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    before = out.read_bytes()
    with open(out, "ab") as f:  # as if the kill had cut a line short
        f.write(b'{"path": "cut short by the kill", "verd')
    done = before.count(b"\n")
    assert FLEET // 4 <= done < FLEET

    r = _scan_cli(str(fleet), *CLI_ARGS, "--jobs", "2", "--out", str(out), "--resume", "--json")
    assert r.returncode == 1, r.stderr
    after = out.read_bytes()
    assert after.startswith(before), "the former run's records were changed"
    # one line per artifact (``_records`` fails on a second line for a path): what was done
    # was not checked again, the rest was, and the line cut short is gone
    assert after.count(b"\n") == FLEET
    assert _records(out) == jobs1
    assert json.loads(r.stdout)["artifacts"] == FLEET  # the summary covers both runs


def test_timeout_kills_only_that_artifact(fleet, tmp_path):
    out = tmp_path / "results.jsonl"
    small = sorted((fleet / "team01").glob("*-fixture-*.pt2"))[:3]
    # the big model's check takes about 0.35 s here (CRC of 36 MB, conversion); the fixtures' 10-15 ms
    r = _scan_cli(str(fleet / BIG), *map(str, small), "--convert", "onnx", "--timeout", "0.1", "--jobs", "1",
                  "--out", str(out))
    assert r.returncode == 1, r.stderr
    records = _records(out)
    assert records[str(fleet / BIG)]["verdict"] == "timeout"
    assert records[str(fleet / BIG)]["error"]["class"] == "Timeout"
    assert [records[str(p)]["verdict"] for p in small] == ["ok"] * 3
