"""A bad target, a missing extra or an unreachable Ray cluster is the user's error, not a verdict
about the files: exit 2 with one line, before any file is read, never ``"readable": false`` or
a finding on every artifact, never a minute of Ray's retries."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time

import pytest

from pt2x.tools.cli import main
from paths import PT2_FIXTURES

MLP = os.path.join(PT2_FIXTURES, "torch-2.13.0", "mlp_dynamic.pt2")


def _one_line(capsys) -> tuple[str, str]:
    out = capsys.readouterr()
    lines = out.err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in out.err, out.err
    return out.out, lines[0]


@pytest.mark.parametrize("argv", [
    ["--target", "banana"],
    ["--target", "torch==2.99"],
    ["--target-schema", "8.99"],
    ["--json", "--target", "banana"],
])
def test_validate_bad_target_is_usage(capsys, argv):
    rc = main(["validate", *argv, MLP, MLP])
    out, line = _one_line(capsys)
    assert rc == 2
    assert out == ""  # no per-file verdict, no "readable": false
    assert "2.13" in line and "2.10" in line  # the known releases are named


def test_scan_bad_target_is_usage(capsys, tmp_path):
    rc = main(["scan", MLP, "--target", "torch==2.99", "--jobs", "1", "--out", str(tmp_path / "r.jsonl")])
    _, line = _one_line(capsys)
    assert rc == 2 and "known releases" in line
    assert not (tmp_path / "r.jsonl").exists()


@pytest.mark.parametrize("convert,extra", [("onnx", "onnx"), ("tflite", "tflite")])
def test_scan_convert_without_its_extra_is_usage(tmp_path, convert, extra):
    """In a process where ``import onnx`` fails, as without the extra: exit 2 naming it, before any
    artifact is checked (no results file)."""
    out = tmp_path / "r.jsonl"
    code = (
        "import sys\nsys.modules['onnx'] = None\n"
        "from pt2x.tools.cli import main\nsys.exit(main(sys.argv[1:]))\n"
    )
    t0 = time.monotonic()
    r = subprocess.run([sys.executable, "-c", code, "scan", MLP, "--convert", convert, "--jobs", "1", "--out", str(out)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and f"pt2x[{extra}]" in lines[0], r.stderr
    assert not out.exists()
    assert time.monotonic() - t0 < 30


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("form", ["{}", "ray://{}"])
def test_scan_ray_nothing_listening(capsys, tmp_path, form):
    address = form.format(f"127.0.0.1:{_closed_port()}")
    t0 = time.monotonic()
    rc = main(["scan", MLP, "--ray", address, "--out", str(tmp_path / "r.jsonl")])
    _, line = _one_line(capsys)
    assert rc == 2 and "no Ray cluster reachable" in line and address in line
    assert time.monotonic() - t0 < 10
    assert not (tmp_path / "r.jsonl").exists()


def test_ray_address_forms():
    from pt2x.tools.scan.ray_runner import _host_port

    assert _host_port("127.0.0.1:6379") == ("127.0.0.1", 6379)
    assert _host_port("ray://head:10001") == ("head", 10001)
    assert _host_port("[::1]:6379") == ("::1", 6379)
    assert _host_port("auto") is None and _host_port("local") is None


def test_target_2_15(capsys):
    """torch 2.15 is a known release (schema 8.20): its own files and older ones validate for it."""
    files = [os.path.join(PT2_FIXTURES, "torch-2.15.0", "mlp_dynamic.pt2"), MLP]
    assert main(["validate", "--target", "torch==2.15", *files]) == 0
    assert capsys.readouterr().out.count("valid for torch==2.15") == 2


def test_usage_errors_are_exported():
    import pt2x.serde as serde

    assert {"Pt2UsageError", "MissingExtraError"} <= set(serde.__all__)
    assert issubclass(serde.MissingExtraError, serde.Pt2UsageError) and issubclass(serde.MissingExtraError, ImportError)
