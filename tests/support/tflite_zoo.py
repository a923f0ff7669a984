"""The TFLite parity harness: programs from ``onnx_zoo``/``zoo`` (exported and saved by torch at
test time) -> ``pt2x.converters.to_tflite`` (in a process where ``import torch`` fails) -> ``ai_edge_litert``'s Interpreter, resized to
each input set, compared with torch eager under ``tolerances.py``'s TFLite section."""

from __future__ import annotations

import functools

import numpy as np
import torch

import onnx_zoo
from tolerances import TFLITE_SCALE, assert_close
from torchfree import convert_torch_free


@functools.cache
def converted(name: str, decomposed: bool = False) -> bytes:
    """The .tflite of the saved program, converted where ``import torch`` fails."""
    return convert_torch_free("to_tflite", onnx_zoo.saved(name, decomposed))


def interpreter(model: bytes, *, xnnpack: bool = True):
    from ai_edge_litert.interpreter import Interpreter, OpResolverType

    kind = OpResolverType.AUTO if xnnpack else OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES
    return Interpreter(model_content=model, experimental_op_resolver_type=kind, num_threads=1)


def run(it, inputs: list[np.ndarray]) -> list[np.ndarray]:
    """Resize every input to its array's shape, allocate, invoke; the outputs in order."""
    details = it.get_input_details()
    assert len(details) == len(inputs), f"{len(details)} inputs, {len(inputs)} given"
    for d, x in zip(details, inputs):
        it.resize_tensor_input(d["index"], list(x.shape), strict=True)
    it.allocate_tensors()
    for d, x in zip(details, inputs):
        it.set_tensor(d["index"], np.array(x, dtype=d["dtype"], order="C"))  # 0-d stays 0-d
    it.invoke()
    return [it.get_tensor(d["index"]) for d in it.get_output_details()]


def match_onnx_runtime(m, feeds: list[np.ndarray], rtol: float = 1e-5, atol: float = 1e-6) -> None:
    """``to_tflite(m)`` in LiteRT (XNNPACK as shipped) equals ONNX Runtime on the same ONNX model."""
    import onnxruntime as ort

    from pt2x.converters import to_tflite

    it = interpreter(to_tflite(m))
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    want = sess.run(None, dict(zip([i.name for i in sess.get_inputs()], feeds)))
    got = run(it, feeds)
    assert len(got) == len(want)
    for w, g in zip(want, got):
        assert g.shape == w.shape
        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol)


def _feed(t) -> np.ndarray:
    a = onnx_zoo.to_numpy(t)
    return a.astype(np.float32) if str(a.dtype) == "bfloat16" else a


def check_parity(name: str, decomposed: bool = False, *, xnnpack: bool = True, scale: float = 1.0) -> None:
    """LiteRT vs torch eager on every input set of the case (the second one after a resize)."""
    it = interpreter(converted(name, decomposed), xnnpack=xnnpack)
    for label, args, kwargs in onnx_zoo.input_sets(name):
        expected = onnx_zoo.eager_outputs(name, args, kwargs)
        tensors = [x for x in onnx_zoo._leaves((args, kwargs)) if isinstance(x, torch.Tensor)]
        got = run(it, [_feed(t) for t in tensors])
        assert len(got) >= len(expected), f"{name}: {len(got)} outputs, eager has {len(expected)}"
        for i, (e, g) in enumerate(zip(expected, got)):
            dtype = e.dtype if isinstance(e, torch.Tensor) else np.asarray(e).dtype
            want = _feed(e)
            assert_close(g, want, dtype, what=f"{name}{' (decomposed)' if decomposed else ''} {label} output {i}",
                         scale=scale * TFLITE_SCALE.get(str(dtype).replace("torch.", ""), 1.0))


def op_names(data: bytes) -> list[str]:
    """The builtin operators of a .tflite's main subgraph, in order, read from the flatbuffer."""
    from pt2x.converters.tflite import schema_generated as fb

    names = {v: k for k, v in vars(fb.BuiltinOperator).items() if not k.startswith("_")}
    m = fb.Model.GetRootAs(data, 0)
    g = m.Subgraphs(0)
    return [names[m.OperatorCodes(g.Operators(i).OpcodeIndex()).BuiltinCode()] for i in range(g.OperatorsLength())]


def converted_with_batches(model: torch.nn.Module, x2: torch.Tensor, x3: torch.Tensor, folder) -> tuple:
    """``model`` exported at x2 with a dynamic batch, saved under ``folder`` and converted:
    (the .tflite, [x2, x3] as arrays, torch eager's outputs on each)."""
    from pt2x.converters import to_tflite

    ep = torch.export.export(model, (x2,), dynamic_shapes=({0: torch.export.Dim("batch", min=1, max=8)},))
    path = str(folder / "model.pt2")
    torch.export.save(ep, path)
    with torch.no_grad():
        want = [model(x2).numpy(), model(x3).numpy()]
    return to_tflite(path), [x2.numpy(), x3.numpy()], want
