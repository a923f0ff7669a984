"""Cross-release: every .pt2 fixture written by torch 2.6 ... 2.14.1 converts (schema 8.2
flat zips with pickled weights through 8.20 archives) and ONNX Runtime reproduces the
eager outputs torch stored beside it. Needs no torch."""

from __future__ import annotations

import glob
import os

import ml_dtypes
import numpy as np
import onnx
import pytest

from paths import FIXTURES
from tolerances import assert_close

def _session(m):
    """ORT session with bf16 outputs cast to float32 (ORT's Python API has no bf16 arrays)."""
    import onnxruntime as ort

    m = onnx.ModelProto.FromString(m.SerializeToString())
    for o in m.graph.output:
        if o.type.tensor_type.elem_type == onnx.TensorProto.BFLOAT16:
            m.graph.node.append(onnx.helper.make_node("Cast", [o.name], [o.name + ".f32"], to=onnx.TensorProto.FLOAT))
            o.name += ".f32"
            o.type.tensor_type.elem_type = onnx.TensorProto.FLOAT
    return ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])


def _run(sess, arrays):
    import onnxruntime as ort

    feeds = {}
    for vi, a in zip(sess.get_inputs(), arrays):
        if a.dtype == ml_dtypes.bfloat16:
            a = ort.OrtValue.ortvalue_from_numpy_with_onnx_type(a.view(np.uint16), onnx.TensorProto.BFLOAT16)
        else:
            a = ort.OrtValue.ortvalue_from_numpy(np.ascontiguousarray(a))
        feeds[vi.name] = a
    return [v.numpy() for v in sess.run_with_ort_values([o.name for o in sess.get_outputs()], feeds)]


CASES = sorted(glob.glob(os.path.join(FIXTURES, "pt2", "torch-*", "*.pt2")))


@pytest.mark.parametrize("path", CASES, ids=[os.path.relpath(p, os.path.join(FIXTURES, "pt2"))[:-4] for p in CASES])
def test_fixture_converts_and_matches_stored_outputs(path):
    from pt2x.converters import to_onnx

    m = to_onnx(path)
    onnx.checker.check_model(m, full_check=True)
    ref = np.load(path[:-4] + ".npz")
    sess = _session(m)
    inputs = []
    ins = sorted((k for k in ref.files if k.startswith("in_")), key=lambda k: int(k[3:]))
    for i, vi in zip(ins, sess.get_inputs()):
        a = ref[i]
        inputs.append(a.astype(ml_dtypes.bfloat16) if vi.type == "tensor(bfloat16)" else a)
    got = _run(sess, inputs)
    outs = sorted((k for k in ref.files if k.startswith("out_")), key=lambda k: int(k[4:]))
    assert len(got) >= len(outs)
    for k, g in zip(outs, got):
        want = ref[k]
        bf16 = m.graph.output[outs.index(k)].type.tensor_type.elem_type == onnx.TensorProto.BFLOAT16
        assert_close(g, want, "bfloat16" if bf16 else want.dtype, what=f"{path} {k}")
