"""Every file ``pt2x convert`` writes (.onnx, its external data, .tflite, .pt2) goes through the
one atomic writer (``serde.atomic_write``): a write cut short by ``ulimit -f`` (RLIMIT_FSIZE) or
a full disk leaves the old file as it was, a FIFO is refused before any work instead of
blocking, and ``/proc/self/status`` (a file whose folder takes no new file) is one line, exit 2.
Options of another target and an ONNX input to anything but TFLite are usage errors, and a
TFLite refusal says TFLite.

The ``ulimit`` cases run the real ``pt2x`` command in a subprocess with the limit set (Python
ignores SIGXFSZ, so the write fails with EFBIG)."""

from __future__ import annotations

import os
import resource
import stat
import subprocess
import sys
import time

import numpy as np
import pytest

from pt2x.tools.cli import main
from paths import PT2_FIXTURES

MLP = os.path.join(PT2_FIXTURES, "torch-2.13.0", "mlp_dynamic.pt2")
WRITERS = {"onnx": [], "tflite": [], "pt2": ["--target-schema", "torch==2.13"]}
OLD = b"the old file, which a failed write must leave as it is\n" * 4


def _one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


def _run_limited(argv: list[str], fsize: int) -> subprocess.CompletedProcess:
    def limit():
        resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))

    return subprocess.run([sys.executable, "-m", "pt2x", *argv], capture_output=True, text=True, timeout=120,
                          preexec_fn=limit)


@pytest.mark.parametrize("to", sorted(WRITERS))
def test_a_write_cut_short_by_ulimit_leaves_the_old_file(tmp_path, to):
    dst = tmp_path / f"out.{to}"
    dst.write_bytes(OLD)
    os.chmod(dst, 0o640)
    r = _run_limited(["convert", MLP, "--to", to, "-o", str(dst), *WRITERS[to]], fsize=1024)
    assert r.returncode == 2, r.stderr
    assert _one_line(r.stderr) == f"pt2x convert: cannot write {dst}: file too large"
    assert dst.read_bytes() == OLD
    assert sorted(os.listdir(tmp_path)) == [dst.name]  # no temporary file left behind
    # without the limit, the same command replaces it and keeps its mode
    assert main(["convert", MLP, "--to", to, "-o", str(dst), *WRITERS[to]]) == 0
    assert dst.read_bytes() != OLD and stat.S_IMODE(dst.stat().st_mode) == 0o640


@pytest.mark.parametrize("to", sorted(WRITERS))
def test_a_fifo_output_is_refused_at_once(capsys, tmp_path, to):
    fifo = tmp_path / "out.fifo"
    os.mkfifo(fifo)
    t0 = time.monotonic()
    rc = main(["convert", MLP, "--to", to, "-o", str(fifo), *WRITERS[to]])
    err = capsys.readouterr().err
    assert rc == 2 and time.monotonic() - t0 < 10
    assert _one_line(err) == f"pt2x convert: cannot write {fifo}: not a regular file (pt2x replaces the file it writes)"
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)


@pytest.mark.parametrize("to", sorted(WRITERS))
def test_proc_self_status_is_one_line(capsys, to):
    if not os.path.isfile("/proc/self/status"):
        pytest.skip("needs Linux /proc")
    rc = main(["convert", MLP, "--to", to, "-o", "/proc/self/status", *WRITERS[to]])
    err = capsys.readouterr().err
    assert rc == 2
    assert _one_line(err).startswith("pt2x convert: cannot write /proc/self/status: cannot create a file in its folder")


def test_api_writers_refuse_a_fifo(tmp_path):
    """The Python API too: the converters write through the same writer (no hang)."""
    from pt2x.converters import to_onnx, to_tflite
    from pt2x.serde.errors import Pt2UsageError

    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    for convert in (to_onnx, to_tflite):
        with pytest.raises(Pt2UsageError, match="not a regular file"):
            convert(MLP, fifo)


def test_onnx_external_data_written_together_and_atomically(tmp_path):
    """Weights past the threshold go to ``<name>.data`` beside the model; ONNX Runtime runs the
    pair as torch eager runs the module; the caller's ModelProto is left as it was; a failed
    write leaves the old pair."""
    torch = pytest.importorskip("torch")
    import onnxruntime as ort
    from pt2x.converters import to_onnx
    from pt2x.converters.onnx.converter import save

    torch.manual_seed(0)
    module = torch.nn.Sequential(torch.nn.Linear(64, 32), torch.nn.ReLU(), torch.nn.Linear(32, 16)).eval()
    x = torch.randn(3, 64)
    src = tmp_path / "mlp.pt2"
    torch.export.save(torch.export.export(module, (x,)), src)
    m = to_onnx(src)
    before = m.SerializeToString()
    dst = tmp_path / "mlp.onnx"
    save(m, str(dst), external_threshold=100)
    assert m.SerializeToString() == before
    data = tmp_path / "mlp.onnx.data"
    moved = [t for t in m.graph.initializer if len(t.raw_data) >= 1024]
    assert len(moved) == 2 and data.stat().st_size == sum(len(t.raw_data) for t in moved)
    assert dst.stat().st_size < len(before) - data.stat().st_size + 1000
    sess = ort.InferenceSession(str(dst))
    got = sess.run(None, {sess.get_inputs()[0].name: x.numpy()})[0]
    np.testing.assert_allclose(got, module(x).detach().numpy(), rtol=1e-5, atol=1e-6)
    src.unlink()

    old_model, old_data = dst.read_bytes(), data.read_bytes()

    def fail(*_):
        raise OSError(28, "No space left on device")

    from pt2x.serde import atomic_write

    real = atomic_write.os.fsync
    atomic_write.os.fsync = fail  # the second file's sync fails: neither file may change
    try:
        with pytest.raises(OSError) as info:
            save(m, str(dst), external_threshold=100)
    finally:
        atomic_write.os.fsync = real
    assert info.value.filename in (str(dst), str(data))
    assert dst.read_bytes() == old_model and data.read_bytes() == old_data
    assert sorted(os.listdir(tmp_path)) == ["mlp.onnx", "mlp.onnx.data"]


@pytest.mark.parametrize("argv,message", [
    (["--to", "onnx", "--nhwc-io"], "--nhwc-io applies only to --to tflite, not --to onnx"),
    (["--to", "tflite", "--opset", "18"], "--opset applies only to --to onnx, not --to tflite"),
    (["--to", "onnx", "--target-schema", "8.15"], "--target-schema applies only to --to pt2, not --to onnx"),
])
def test_an_option_of_another_target_is_a_usage_error(capsys, tmp_path, argv, message):
    dst = tmp_path / "out"
    rc = main(["convert", MLP, "-o", str(dst), *argv])
    assert rc == 2
    assert _one_line(capsys.readouterr().err) == f"pt2x convert: {message}"
    assert not dst.exists()


@pytest.mark.parametrize("to", ["onnx", "pt2"])
def test_an_onnx_input_converts_only_to_tflite(capsys, tmp_path, to):
    src = tmp_path / "model.onnx"
    assert main(["convert", MLP, "--to", "onnx", "-o", str(src)]) == 0
    capsys.readouterr()
    rc = main(["convert", str(src), "--to", to, "-o", str(tmp_path / "out"), *(WRITERS[to])])
    assert rc == 2
    assert _one_line(capsys.readouterr().err) == (
        f"pt2x convert: cannot convert {src} to {to}: it is an ONNX model, which pt2x converts only to TFLite (--to tflite)")


def test_a_tflite_refusal_names_tflite(tmp_path):
    """A .pt2 operator with no ONNX lowering stops the TFLite conversion (TFLite is written from
    pt2x's ONNX): the report says so, rather than 'cannot convert to onnx'."""
    torch = pytest.importorskip("torch")
    from pt2x.converters import to_tflite
    from pt2x.converters.errors import UnsupportedOpsError

    class Cholesky(torch.nn.Module):
        def forward(self, x):
            return torch.linalg.cholesky(x)

    src = tmp_path / "cholesky.pt2"
    torch.export.save(torch.export.export(Cholesky(), (torch.eye(3),)), src)
    with pytest.raises(UnsupportedOpsError) as info:
        to_tflite(src)
    head = str(info.value).splitlines()[0]
    assert "cannot convert to tflite: 1 unsupported operator(s) in 1 node(s) with no ONNX lowering" in head
    assert "cannot convert to onnx" not in str(info.value)
    assert [p.target for p in info.value.ops] == ["aten.linalg_cholesky.default"]
