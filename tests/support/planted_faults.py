"""Faults planted in converted files, for ``pt2x verify --locate``: one weight scaled, one binary
operator's second operand replaced by its first, one operator replaced by another of the same
arguments. ONNX models are edited as protos; ``.tflite``, ``.pte`` and ``.ptd`` files byte by byte
(the weight's bytes, the operator's inputs vector or name, found in the file by their exact
contents, which the test asserts occur once)."""

from __future__ import annotations

import struct

import numpy as np
import onnx
from onnx import numpy_helper


def scale_onnx_weight(model: onnx.ModelProto, name: str, factor: float) -> onnx.ModelProto:
    m = onnx.ModelProto()
    m.CopyFrom(model)
    for i, init in enumerate(m.graph.initializer):
        if init.name == name:
            m.graph.initializer[i].CopyFrom(numpy_helper.from_array(numpy_helper.to_array(init) * factor, name))
            return m
    raise KeyError(name)


def alias_onnx_operand(model: onnx.ModelProto, output: str) -> onnx.ModelProto:
    """The node making ``output`` reads its first input twice (``Add(a, b)`` -> ``Add(a, a)``)."""
    m = onnx.ModelProto()
    m.CopyFrom(model)
    node = next(n for n in m.graph.node if output in n.output)
    node.input[1] = node.input[0]
    return m


def _tflite_ops(data: bytes):
    from ai_edge_litert.interpreter import Interpreter

    it = Interpreter(model_content=data)
    return it, it._get_ops_details()


def _replace_once(data: bytes, old: bytes, new: bytes) -> bytes:
    assert data.count(old) == 1, f"the pattern occurs {data.count(old)} times"
    return data.replace(old, new)


def scale_tflite_weight(data: bytes, op_name: str, nth: int, factor: float) -> tuple[bytes, str]:
    """The weight (input 1) of the ``nth`` ``op_name`` operator scaled by ``factor``; the name of
    that operator's output tensor."""
    it, ops = _tflite_ops(data)
    op = [o for o in ops if o["op_name"] == op_name][nth]
    weight = it.get_tensor(int(op["inputs"][1]))
    out = it.get_tensor_details()[int(op["outputs"][0])]["name"]
    return _replace_once(data, weight.tobytes(), (weight * np.float32(factor)).astype(weight.dtype).tobytes()), out


def alias_tflite_operand(data: bytes, output: str) -> bytes:
    """The operator making tensor ``output`` reads its first input twice (its inputs vector
    ``[a, b]`` rewritten ``[a, a]`` in place)."""
    it, ops = _tflite_ops(data)
    names = {t["index"]: t["name"] for t in it.get_tensor_details()}
    op = next(o for o in ops if any(names[int(k)] == output for k in o["outputs"]))
    a, b = (int(k) for k in op["inputs"][:2])
    n = len(op["inputs"])
    rest = [int(k) for k in op["inputs"][2:]]
    old = struct.pack(f"<{n + 1}i", n, a, b, *rest)
    new = struct.pack(f"<{n + 1}i", n, a, a, *rest)
    return _replace_once(data, old, new)


def scale_pte_weight(data: bytes, weight: np.ndarray, factor: float) -> bytes:
    """A ``.pte`` or ``.ptd`` whose copy of ``weight`` (float32, as the program holds it) is scaled by ``factor``."""
    w = np.ascontiguousarray(weight, dtype=np.float32)
    return _replace_once(data, w.tobytes(), (w * np.float32(factor)).tobytes())


def rename_pte_operator(data: bytes, old: str, new: str) -> bytes:
    """A ``.pte`` whose operator ``old`` (``aten::relu``) is called as ``new`` (``aten::tanh``, the
    same length and arguments): every call of it now runs the other kernel."""
    assert len(old) == len(new)
    return _replace_once(data, old.encode(), new.encode())
