"""What evaluating one ONNX node while folding costs, estimated from sizes alone, before it runs.

``constant_folding.fold`` evaluates nodes whose inputs are all constants with onnx's reference evaluator.
The size of a node's output does not bound that work: a MaxPool with a 1000x1000 kernel over a
folded 2000x2000 constant is a million outputs of a million compares each, and the reference
evaluator runs pooling, convolution, resizing and sampling as Python loops over the outputs.
``fold_work`` gives an upper estimate in *element operations* (one numpy op on one element);
``constant_folding.fold`` keeps any node over ``converters.limits.MAX_FOLD_WORK`` as a run-time op.

Op classes (each op in one table):

* ``_VECTORISED``: elementwise, data movement and reductions, which the reference evaluator runs
  as whole-array numpy calls: the elements read plus the elements written;
* ``_CONTRACTIONS``: MatMul, Gemm, Einsum: the product of every index's size;
* ``_WINDOWED``: pooling and convolution: each output reads a kernel window (times the input
  channels per group for a convolution), one Python step per element of every window (the
  reference MaxPool loops over the window's rows and columns in Python);
* any other op: one Python step (``PYTHON_STEP``) per element read or written, times the taps
  a sampler reads (``_TAPS``). Unknown ops get this default, which is the conservative one.
"""

from __future__ import annotations

import math

import numpy as np
import onnx

from ...onnx.graph_tools import attrs

__all__ = ["fold_work", "PYTHON_STEP"]

PYTHON_STEP = 10_000
"""Element operations one step of the reference evaluator's Python loops costs: a MaxPool
over a folded 200x200 constant with a 2x2 window (160,000 window elements) took 1.2 s, about
7.5 microseconds per element, where numpy does about a thousand element operations a
microsecond."""

_VECTORISED = frozenset({
    "Abs", "Acos", "Acosh", "Add", "And", "ArgMax", "ArgMin", "Asin", "Asinh", "Atan", "Atanh", "BitShift",
    "BitwiseAnd", "BitwiseNot", "BitwiseOr", "BitwiseXor", "Cast", "CastLike", "Ceil", "Celu", "Clip", "Concat",
    "Constant", "ConstantOfShape", "Cos", "Cosh", "CumSum", "DepthToSpace", "DequantizeLinear", "Div", "Elu",
    "Equal", "Erf", "Exp", "Expand", "EyeLike", "Flatten", "Floor", "Gather", "Gelu", "Greater", "GreaterOrEqual",
    "HardSigmoid", "HardSwish", "Identity", "IsInf", "IsNaN", "LeakyRelu", "Less", "LessOrEqual", "Log",
    "LogSoftmax", "Max", "Mean", "Min", "Mish", "Mod", "Mul", "Neg", "NonZero", "Not", "OneHot", "Or", "Pad", "Pow",
    "QuantizeLinear", "Range", "Reciprocal", "ReduceL1", "ReduceL2", "ReduceLogSum", "ReduceLogSumExp",
    "ReduceMax", "ReduceMean", "ReduceMin", "ReduceProd", "ReduceSum", "ReduceSumSquare", "Relu", "Reshape",
    "Round", "Selu", "Shape", "Shrink", "Sigmoid", "Sign", "Sin", "Sinh", "Size", "Slice", "Softmax", "Softplus",
    "Softsign", "SpaceToDepth", "Split", "Sqrt", "Squeeze", "Sub", "Sum", "Tan", "Tanh", "ThresholdedRelu",
    "Tile", "Transpose", "Trilu", "Unsqueeze", "Where", "Xor",
})
_CONTRACTIONS = frozenset({"MatMul", "MatMulInteger", "Gemm", "Einsum"})
_WINDOWED = frozenset({"MaxPool", "AveragePool", "LpPool", "Conv", "ConvInteger", "ConvTranspose"})
_TAPS = {"GridSample": 16, "Resize": 16, "Upsample": 16, "RoiAlign": 16, "DeformConv": 16}


def _elements(shape) -> float:
    return float(np.prod(np.asarray(shape, dtype=np.float64))) if len(shape) else 1.0


def fold_work(node: onnx.NodeProto, in_shapes: list, out_shapes: list) -> float:
    """Element operations evaluating ``node`` costs at most; ``in_shapes``/``out_shapes`` are the
    inputs' and outputs' dims (an output's None: not known; its size is then taken as the inputs')."""
    read = sum(_elements(s) for s in in_shapes)
    written = sum(read if s is None else _elements(s) for s in out_shapes)
    op = node.op_type
    if op in _VECTORISED:
        return read + written
    if op in _CONTRACTIONS:
        return read + written + _contraction(node, in_shapes, written)
    if op in _WINDOWED:
        return read + PYTHON_STEP * max(written, _windowed(node, in_shapes, written))
    return (read + written) * PYTHON_STEP * _TAPS.get(op, 1)


def _contraction(node: onnx.NodeProto, in_shapes: list, written: float) -> float:
    """Multiply-adds: the outputs times the contracted size (Einsum: every index's size)."""
    if node.op_type == "Einsum":
        sizes: dict[str, int] = {}
        equation = attrs(node).get("equation", b"")
        equation = equation.decode(errors="replace") if isinstance(equation, bytes) else str(equation)
        terms = equation.split("->")[0].replace(" ", "").split(",")
        for term, shape in zip(terms, in_shapes):
            letters = [c for c in term if c.isalpha()]
            dims = list(shape)
            for c, dim in zip(letters[::-1], dims[::-1]):
                sizes[c] = max(sizes.get(c, 1), int(dim))
            for k, dim in enumerate(dims[:max(0, len(dims) - len(letters))][::-1]):  # the ellipsis' dims
                sizes[f"...{k}"] = max(sizes.get(f"...{k}", 1), int(dim))
        return math.prod(float(v) for v in sizes.values()) + written
    if not in_shapes or not in_shapes[0]:
        return written
    a = list(in_shapes[0])
    k = a[0] if node.op_type == "Gemm" and attrs(node).get("transA", 0) else a[-1]
    return written * float(k)


def _windowed(node: onnx.NodeProto, in_shapes: list, written: float) -> float:
    """Reads of every window: outputs (inputs for ConvTranspose) x kernel x channels per group."""
    if not in_shapes:
        return written
    x = list(in_shapes[0])
    if node.op_type in ("MaxPool", "AveragePool", "LpPool"):
        kernel = _elements(attrs(node).get("kernel_shape", []))
        return written * kernel
    w = list(in_shapes[1]) if len(in_shapes) > 1 else []
    kernel = _elements(w[2:]) if len(w) > 2 else 1.0
    if node.op_type == "ConvTranspose":
        per = (w[1] if len(w) > 1 else 1) * kernel
        return _elements(x) * per
    per = (w[1] if len(w) > 1 else 1) * kernel
    return written * per
