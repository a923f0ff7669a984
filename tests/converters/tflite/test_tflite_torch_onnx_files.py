"""ONNX from outside pt2x: the files ``torch.onnx.export(ep, dynamo=True)`` writes for zoo programs
(a CNN, a transformer decoder, BERT; the same .pt2 programs the parity suite uses) convert to
TFLite, and LiteRT matches ONNX Runtime on that very file, on the example inputs and after a
resize to the second input set."""

from __future__ import annotations

import importlib.util
import os

import numpy as np
import pytest
import torch

import onnx_zoo
import tflite_zoo
from pt2x.converters import to_tflite

pytestmark = pytest.mark.skipif(importlib.util.find_spec("onnxscript") is None,
                                reason="torch.onnx.export(dynamo=True) needs onnxscript (in the test extra)")

CASES = ["cnn_upsample", "transformer_decoder", "hf_bert"]


def _inputs(args, kwargs) -> list[np.ndarray]:
    return [onnx_zoo.to_numpy(t) for t in onnx_zoo._leaves((args, kwargs)) if isinstance(t, torch.Tensor)]


@pytest.mark.parametrize("name", CASES)
def test_torch_onnx_file_converts_with_parity(tmp_path, name):
    import onnxruntime as ort

    if onnx_zoo.case(name).tags & {"hf"}:
        pytest.importorskip("transformers")
    path = os.path.join(tmp_path, f"{name}.onnx")
    torch.onnx.export(onnx_zoo.exported(name), (), dynamo=True).save(path)
    it = tflite_zoo.interpreter(to_tflite(path))
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    names = [i.name for i in sess.get_inputs()]
    for label, args, kwargs in onnx_zoo.input_sets(name):
        xs = _inputs(args, kwargs)
        assert len(xs) == len(names), f"{name}: {len(xs)} inputs, the ONNX file takes {names}"
        want = sess.run(None, dict(zip(names, xs)))
        got = tflite_zoo.run(it, xs)
        assert len(got) == len(want)
        for i, (g, w) in enumerate(zip(got, want)):
            assert g.shape == w.shape, f"{name} {label} output {i}: {g.shape} vs {w.shape}"
            scale = float(np.max(np.abs(w))) if w.size else 0.0
            np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5 + 1e-4 * scale,
                                       err_msg=f"{name} {label} output {i}")
