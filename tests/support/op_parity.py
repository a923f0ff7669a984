"""One operator program against eager on both targets: ``check_both(fn, *args, tmp_path=...)``
exports ``fn(*args)`` with torch, converts it with ``to_onnx`` (run in ONNX Runtime) and
``to_tflite`` (run in LiteRT), and compares every output with eager: dtype and shape equal, values
under ``tolerances.assert_close`` (TFLite at ``TFLITE_SCALE``). Shared by the per-family operator
tests (``tests/converters/test_ops_*.py``) and the OpInfo findings."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
import torch

from pt2x.converters import to_onnx, to_tflite
from pt2x.converters.errors import UnsupportedOpsError
from tolerances import TFLITE_SCALE, assert_close

__all__ = ["Fn", "saved", "eager", "assert_outputs", "run_litert", "check_both"]


class Fn(torch.nn.Module):
    """``fn`` as a module: one tensor, or a tuple of them."""

    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, *xs):
        out = self.fn(*xs)
        return out if isinstance(out, torch.Tensor) else tuple(out)


def saved(fn, args, tmp_path, dynamic: bool = False) -> str:
    """``fn`` exported at ``args`` (``dynamic``: dim 0 of every argument of rank >= 1 left to
    torch, ``Dim.AUTO``) and saved: the path."""
    path = str(tmp_path / "case.pt2")
    shapes = (tuple({0: torch.export.Dim.AUTO} if a.dim() else {} for a in args),) if dynamic else None
    torch.export.save(torch.export.export(Fn(fn), tuple(args), dynamic_shapes=shapes), path)
    return path


def eager(fn, args) -> list[np.ndarray]:
    out = fn(*[a.clone() for a in args])
    return [t.numpy() for t in ([out] if isinstance(out, torch.Tensor) else out)]


def assert_outputs(got, want, what: str, scale: float = 1.0) -> None:
    assert len(got) == len(want), f"{what}: {len(got)} outputs, eager {len(want)}"
    for i, (g, w) in enumerate(zip(got, want)):
        g = np.asarray(g)
        assert g.dtype == w.dtype, f"{what} output {i}: dtype {g.dtype}, eager {w.dtype}"
        assert g.shape == w.shape, f"{what} output {i}: shape {g.shape}, eager {w.shape}"
        assert_close(g, w, w.dtype, what=f"{what} output {i}", scale=scale)


def run_litert(it, feeds) -> list[np.ndarray]:
    """Run a LiteRT interpreter on ``feeds`` (inputs resized to them; an output with no elements
    read as zeros of its shape)."""
    details = it.get_input_details()
    for d, x in zip(details, feeds):
        it.resize_tensor_input(d["index"], list(x.shape), strict=True)
    it.allocate_tensors()
    for d, x in zip(details, feeds):
        it.set_tensor(d["index"], np.array(x, dtype=d["dtype"]))
    it.invoke()
    return [np.zeros(o["shape"], o["dtype"]) if 0 in list(o["shape"]) else it.get_tensor(o["index"])
            for o in it.get_output_details()]


def check_both(fn, *args, tmp_path, tflite_refuses: str = "", dynamic: bool = False, runs=()) -> None:
    """``fn(*args)`` (exported with a dynamic first dim when ``dynamic``), and ``fn`` of each argument
    tuple of ``runs`` (other sizes of that dim), through to_onnx + ONNX Runtime and to_tflite +
    LiteRT equals eager (or, with ``tflite_refuses``, to_tflite refuses it with that message)."""
    import tflite_zoo  # imports ai_edge_litert: the callers skip without it

    path = saved(fn, args, tmp_path, dynamic)
    sess = ort.InferenceSession(to_onnx(path).SerializeToString(), providers=["CPUExecutionProvider"])
    cases = [(eager(fn, xs), [a.numpy() for a in xs]) for xs in (args, *runs)]
    for want, feeds in cases:
        assert_outputs(sess.run(None, dict(zip([i.name for i in sess.get_inputs()], feeds))), want, "onnx")
    if tflite_refuses:
        with pytest.raises(UnsupportedOpsError, match=tflite_refuses):
            to_tflite(path)
        return
    it = tflite_zoo.interpreter(to_tflite(path))
    for want, feeds in cases:
        assert_outputs(run_litert(it, feeds), want, "tflite", TFLITE_SCALE["float32"])
