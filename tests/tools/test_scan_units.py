"""``pt2x scan``'s parts, each on its own: usage errors, missing extras, torch-free runs,
fsspec URLs, the results file and resume's edge cases, the bounded summary, the discovery
walk, the progress bar's switch, and a worker that dies mid-artifact."""

from __future__ import annotations

import json
import os
import signal
import time

import pytest
from paths import PT2_FIXTURES, REPO
from torchfree import run_cli_torch_free, run_torch_free

from pt2x.serde.errors import Pt2UsageError
from pt2x.tools.cli import main
from pt2x.tools.scan.discover import discover
from pt2x.tools.scan.driver import scan
from pt2x.tools.scan.options import ScanOptions
from pt2x.tools.scan.progress import wanted
from pt2x.tools.scan.report import TOP, BoundedCounter, Summary
from pt2x.tools.scan.results import ResultsFile
from pt2x.tools.scan.worker import Worker

RELEASE = os.path.join(PT2_FIXTURES, "torch-2.13.0")
EXAMPLE = os.path.join(REPO, "examples", "mlp_dynamic.pt2")


# ---------------------------------------------------------------- the command line's errors


@pytest.mark.parametrize("argv, says", [
    (["scan", "{empty}"], "no artifacts in"),
    (["scan", "{empty}/*.pt2"], "no artifacts in"),
    (["scan", "{missing}"], "cannot read"),
    (["scan", RELEASE, "--resume"], "--resume needs --out"),
    (["scan", RELEASE, "--convert", "onnx,coreml"], "--convert coreml"),
    (["scan", RELEASE, "--target", "torch==two"], "target"),
    (["scan", RELEASE, "--jobs", "0"], "--jobs 0"),
    (["scan", RELEASE, "--timeout", "0"], "--timeout 0"),
    (["scan", RELEASE, "--out", "{missing}/r.jsonl"], "does not exist"),
])
def test_usage_errors_are_one_line_exit_2(argv, says, tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    argv = [a.format(empty=tmp_path / "empty", missing=tmp_path / "missing") for a in argv]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("pt2x scan: ") and says in err, err


@pytest.mark.parametrize("module, argv, extra", [
    ("ray", [RELEASE, "--ray"], "pt2x[ray]"),
    ("fsspec", ["file://" + RELEASE], "pt2x[fsspec]"),
])
def test_missing_extra_names_it(module, argv, extra):
    code = f"""
        import sys
        sys.modules[{module!r}] = None  # as if not installed
        from pt2x.tools.cli import main
        sys.exit(main(["scan", *sys.argv[1:]]))
    """
    r = run_torch_free(code, *argv, timeout=120)
    assert r.returncode == 2, r.stderr
    assert extra in r.stderr and "Traceback" not in r.stderr


# ---------------------------------------------------------------- torch-free, exit 0, URLs


def test_cli_scan_runs_torch_free_and_exits_0_when_all_ok(tmp_path):
    out = tmp_path / "r.jsonl"
    r = run_cli_torch_free("scan", RELEASE, "--target", "torch==2.13", "--convert", "onnx", "--jobs", "1",
                           "--out", str(out), "--json", timeout=300)
    assert r.returncode == 0, r.stderr
    summary = json.loads(r.stdout)
    assert summary["verdicts"] == {"ok": 9} and summary["conversions"]["onnx"]["results"] == {"ok": 9}
    assert summary["torch_versions"] == {"2.13.0+cpu": 9} and summary["failing_total"] == 0


def test_check_is_torch_free():
    r = run_torch_free(f"""
        from pt2x.tools.scan.check import check_artifact
        from pt2x.tools.scan.options import ScanOptions
        r = check_artifact({EXAMPLE!r}, ScanOptions(target="torch==2.10", convert=("onnx",)))
        assert r["verdict"] == "ok", r
        assert r["conversions"]["onnx"]["model"]["result"] == "ok", r
        print("checked")
    """)
    assert r.returncode == 0 and "checked" in r.stdout, r.stderr


def test_fsspec_url_gives_the_records_of_the_local_paths():
    pytest.importorskip("fsspec")
    opts = ScanOptions(target="torch==2.6", convert=("onnx",))
    local, remote = {}, {}
    scan([os.path.join(PT2_FIXTURES, "torch-2.8.0")], opts, on_record=lambda r: local.update({r["path"]: r}),
         progress=False)
    scan(["file://" + os.path.join(PT2_FIXTURES, "torch-2.8.0", "*.pt2")], opts,
         on_record=lambda r: remote.update({r["path"]: r}), progress=False)
    assert all(p.startswith("file://") for p in remote) and len(remote) == len(local) == 9
    folder_url = "file://" + os.path.join(PT2_FIXTURES, "torch-2.8.0")  # a folder: walked for *.pt2
    assert [a.location for a in discover([folder_url])] == sorted(remote)

    def strip(r):
        return {k: v for k, v in r.items() if k not in ("path", "seconds", "conversions")}

    assert {os.path.basename(p): strip(r) for p, r in remote.items()} == \
           {os.path.basename(p): strip(r) for p, r in local.items()}
    assert all(r["verdict"] == "findings" and r["blockers"] for r in remote.values())  # 2.8 files for 2.6


def test_tflite_conversion_is_recorded_whatever_its_state():
    from pt2x.tools.scan.check import check_artifact

    r = check_artifact(EXAMPLE, ScanOptions(convert=("tflite",)))
    conv = r["conversions"]["tflite"]["model"]
    assert conv["result"] in ("ok", "unsupported", "error")
    assert (r["verdict"] == "ok") == (conv["result"] == "ok")
    if conv["result"] == "error":
        assert conv["error"]["class"] and conv["error"]["message"]


# ---------------------------------------------------------------- the results file


def _line(path: str, verdict: str = "ok") -> bytes:
    return (json.dumps({"path": path, "size": 1, "verdict": verdict}) + "\n").encode()


def test_resume_drops_a_cut_short_last_line(tmp_path):
    out = tmp_path / "r.jsonl"
    out.write_bytes(_line("a") + _line("b") + b'{"path": "c", "ver')
    f = ResultsFile(str(out), resume=True)
    assert [r["path"] for r in f.previous()] == ["a", "b"]
    assert out.read_bytes() == _line("a") + _line("b")
    f.write({"path": "c", "size": 1, "verdict": "ok"})
    f.close()
    assert out.read_bytes() == _line("a") + _line("b") + _line("c")


def test_resume_refuses_a_file_that_is_not_a_scan_output(tmp_path):
    out = tmp_path / "notes.txt"
    out.write_bytes(_line("a") + b"my notes\n" + _line("b"))
    with pytest.raises(Pt2UsageError, match="line 2 is not a pt2x scan record"):
        list(ResultsFile(str(out), resume=True).previous())
    assert out.read_bytes() == _line("a") + b"my notes\n" + _line("b")


# ---------------------------------------------------------------- the summary stays bounded


def test_bounded_counter_keeps_the_most_common():
    c = BoundedCounter(keep=10)
    for i in range(5):
        c.add("frequent", 100)
    for i in range(1000):
        c.add(f"rare{i}")
    assert len(c.counts) <= 20 and c.top(1) == [("frequent", 500)]
    assert c.dropped > 900


def test_summary_lists_are_bounded_and_ordered():
    s = Summary(target="torch==2.10", convert=("onnx",))
    for i in range(200):
        verdict = "ok" if i % 2 else "findings"
        conv = {"model": {"result": "unsupported", "unsupported": {f"my.op{i}.default": 2, "aten.x.default": 1}}}
        s.add({"path": f"p{i:03d}", "size": 10, "verdict": verdict, "seconds": i / 100,
               "models": {"model": {"schema_version": "8.20", "torch_version": None}},
               "blockers": {"target-unknown-field": 1}, "conversions": {"onnx": conv}})
    d = s.as_dict()
    assert d["artifacts"] == 200 and d["verdicts"] == {"findings": 100, "ok": 100}
    assert d["failing_total"] == 100 and [f["path"] for f in d["failing"]] == [f"p{i:03d}" for i in range(0, 2 * TOP, 2)]
    assert [x["path"] for x in d["slowest"]] == [f"p{i:03d}" for i in range(199, 199 - TOP, -1)]
    assert d["conversions"]["onnx"]["unsupported_ops"][0] == {"op": "aten.x.default", "artifacts": 200, "nodes": 200}
    assert len(d["conversions"]["onnx"]["unsupported_ops"]) == TOP
    assert d["blockers"] == [{"code": "target-unknown-field", "artifacts": 200}]
    assert d["torch_versions"] == {"not recorded": 200}
    assert "failing: 100 (first 10 by path)" in s.table()


# ---------------------------------------------------------------- discovery


def test_discovery_walks_folders_for_pt2_only_and_skips_what_is_not_a_file(tmp_path):
    (tmp_path / "a" / "b").mkdir(parents=True)
    os.link(EXAMPLE, tmp_path / "a" / "b" / "m.pt2")
    os.link(EXAMPLE, tmp_path / "a" / "other.bin")
    os.symlink(tmp_path, tmp_path / "a" / "loop")  # a folder loop: not followed
    os.mkfifo(tmp_path / "a" / "pipe.pt2")  # never opened
    found = discover([str(tmp_path), str(tmp_path / "a" / "b" / "m.pt2")])
    assert [a.location for a in found] == [str(tmp_path / "a" / "b" / "m.pt2")]  # once
    assert found[0].size == os.path.getsize(EXAMPLE)
    assert [a.location for a in discover([str(tmp_path / "a" / "*.bin")])] == [str(tmp_path / "a" / "other.bin")]


def test_progress_bar_only_on_a_terminal(monkeypatch):
    master, slave = os.openpty()
    try:
        with os.fdopen(os.dup(slave), "w") as tty, open(os.devnull, "w") as piped:
            monkeypatch.delenv("CI", raising=False)
            assert wanted(tty) and not wanted(piped)
            monkeypatch.setenv("CI", "true")
            assert not wanted(tty)
    finally:
        os.close(master)
        os.close(slave)


# ---------------------------------------------------------------- a worker that dies


@pytest.mark.parametrize("sig, verdict", [(signal.SIGSEGV, "crashed"), (signal.SIGKILL, "oom")])
def test_worker_death_is_that_artifacts_verdict_and_the_worker_is_replaced(sig, verdict):
    w = Worker(ScanOptions(timeout=60))
    try:
        while not w.ready:
            w.on_readable()
        pid = w.proc.pid
        os.kill(pid, signal.SIGSTOP)  # so the signal lands before it can answer
        w.send(EXAMPLE)
        os.kill(pid, sig)
        os.kill(pid, signal.SIGCONT)
        deadline = time.monotonic() + 30
        result = None
        while result is None and time.monotonic() < deadline:
            result = w.on_readable()
        assert result is not None and result["verdict"] == verdict, result
        assert signal.Signals(sig).name in result["error"]["message"]
        assert w.proc.pid != pid
        assert w.run(EXAMPLE)["verdict"] == "ok"  # the replacement works
    finally:
        w.close()
