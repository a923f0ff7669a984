"""Reductions, Softmax/LogSoftmax, ArgMax/ArgMin, TopK and LayerNormalization.

TFLite's SOFTMAX, LOG_SOFTMAX and TOPK_V2 work on the last axis: another axis is moved
there and back with TRANSPOSE. LayerNormalization is decomposed (MEAN, SUB, MUL, RSQRT).
"""

from __future__ import annotations

import numpy as np

from ..errors import Unsupported
from .emit import Emitter, attrs
from .mappers import maps
from .model import TensorType as T
from .ops_shape import _axis, axes_of

_REDUCE = {"ReduceSum": "SUM", "ReduceMean": "MEAN", "ReduceMax": "REDUCE_MAX", "ReduceMin": "REDUCE_MIN",
           "ReduceProd": "REDUCE_PROD", "ReduceSumSquare": "SUM", "ReduceL2": "SUM", "ReduceLogSumExp": "SUM"}
_MUL = ("MulOptions", {"fused_activation_function": 0})
_ADD = ("AddOptions", {"fused_activation_function": 0})


def _reduce_axes(em: Emitter, node) -> list[int] | None:
    """The axes to reduce (normalised); None for "no reduction" (noop_with_empty_axes)."""
    rank = em.rank(node.input[0])
    axes = axes_of(em, node, 1)
    if not axes:
        if attrs(node).get("noop_with_empty_axes", 0):
            return None
        return list(range(rank))
    return sorted({_axis(a, rank) for a in axes})


def _reduce(em: Emitter, code: str, x: int, axes: list[int], keep: bool, out: int) -> None:
    em.op(code, [x, em.const(np.asarray(axes, np.int32))], [out], ("ReducerOptions", {"keep_dims": keep}))


@maps(*_REDUCE)
def reduce(em: Emitter, node) -> None:
    x = em.t(node.input[0])
    axes = _reduce_axes(em, node)
    if axes is None:
        em.bind(node.output[0], x)
        return
    keep = bool(attrs(node).get("keepdims", 1))
    if em.dtype_of(x) == T.BOOL:
        raise Unsupported(f"{node.op_type} of booleans")
    op = node.op_type
    if op in ("ReduceSumSquare", "ReduceL2"):
        x = em.binary("MUL", x, x, options=_MUL)
    elif op == "ReduceLogSumExp":
        x = em.unary("EXP", x)
    if op in ("ReduceL2", "ReduceLogSumExp"):
        s = em.tmp(em.dtype_of(x), em.shape(node.output[0]), "sum")
        _reduce(em, "SUM", x, axes, keep, s)
        em.op("SQRT" if op == "ReduceL2" else "LOG", [s], [em.out()])
        return
    _reduce(em, _REDUCE[op], x, axes, keep, em.out())


def _last_axis(em: Emitter, node, code: str, options) -> None:
    """``code`` over attribute ``axis`` (default -1), transposing it to the end when needed."""
    rank = em.rank(node.input[0])
    axis = _axis(int(attrs(node).get("axis", -1)), rank)
    x = em.t(node.input[0])
    if axis == rank - 1:
        em.op(code, [x], [em.out()], options)
        return
    perm = list(range(rank))
    perm[axis], perm[-1] = perm[-1], perm[axis]
    p = em.const(np.asarray(perm, np.int32))
    xt = em.tmp(em.dtype_of(x), None, "t")
    em.op("TRANSPOSE", [x, p], [xt])
    yt = em.tmp(em.dtype_of(x), None, "t")
    em.op(code, [xt], [yt], options)
    em.op("TRANSPOSE", [yt, p], [em.out()])


@maps("Softmax")
def softmax(em: Emitter, node) -> None:
    _last_axis(em, node, "SOFTMAX", ("SoftmaxOptions", {"beta": 1.0}))


@maps("LogSoftmax")
def log_softmax(em: Emitter, node) -> None:
    _last_axis(em, node, "LOG_SOFTMAX", None)


@maps("ArgMax", "ArgMin")
def arg_max_min(em: Emitter, node) -> None:
    a = attrs(node)
    if a.get("select_last_index", 0):
        raise Unsupported(f"{node.op_type} with select_last_index")
    rank = em.rank(node.input[0])
    axis = _axis(int(a.get("axis", 0)), rank)
    code = "ARG_MAX" if node.op_type == "ArgMax" else "ARG_MIN"
    opt = ("ArgMaxOptions" if code == "ARG_MAX" else "ArgMinOptions", {"output_type": T.INT32})
    x = em.t(node.input[0])
    if not a.get("keepdims", 1):
        em.op(code, [x, em.const(np.array([axis], np.int32))], [em.out()], opt)
        return
    y = em.tmp(T.INT32, None, "arg")
    em.op(code, [x, em.const(np.array([axis], np.int32))], [y], opt)
    em.op("EXPAND_DIMS", [y, em.const(np.array(axis, np.int32))], [em.out()])


@maps("TopK")
def topk(em: Emitter, node) -> None:
    a = attrs(node)
    rank = em.rank(node.input[0])
    axis = _axis(int(a.get("axis", -1)), rank)
    if not a.get("sorted", 1):
        raise Unsupported("TopK with sorted=0")
    x = em.t(node.input[0])
    largest = a.get("largest", 1)
    if not largest:
        if em.dtype_of(x) != T.FLOAT32:
            raise Unsupported("TopK of the smallest integers")
        x = em.unary("NEG", x)
    perm = None
    if axis != rank - 1:
        perm = list(range(rank))
        perm[axis], perm[-1] = perm[-1], perm[axis]
        x = _transpose(em, x, perm)
    k = em.t(node.input[1])
    k = _scalar(em, k)
    vals, idx = em.tmp(em.dtype_of(x), None, "values"), em.tmp(T.INT32, None, "indices")
    em.op("TOPK_V2", [x, k], [vals, idx])
    if not largest:
        vals = em.unary("NEG", vals)
    if perm is not None:
        vals, idx = _transpose(em, vals, perm), _transpose(em, idx, perm)
    em.bind(node.output[0], vals)
    if len(node.output) > 1 and node.output[1]:
        em.bind(node.output[1], idx)


def _transpose(em: Emitter, x: int, perm: list[int]) -> int:
    y = em.tmp(em.dtype_of(x), None, "t")
    em.op("TRANSPOSE", [x, em.const(np.asarray(perm, np.int32))], [y])
    return y


def _scalar(em: Emitter, k: int) -> int:
    """TOPK_V2 takes k as a 0-d int32 tensor; ONNX gives a 1-element 1-D one."""
    s = em.tmp(T.INT32, [], "k")
    em.op("RESHAPE", [k, em.const(np.zeros(0, np.int32))], [s])
    return s


def _normalized(em: Emitter, x: int, axes: list[int], eps: float) -> int:
    """``(x - mean) / sqrt(var + eps)`` over ``axes`` (population variance), as Layer- and
    InstanceNormalization define it; the scale and bias are the caller's."""
    mean = em.tmp(T.FLOAT32, None, "mean")
    _reduce(em, "MEAN", x, axes, True, mean)
    d = em.binary("SUB", x, mean, options=("SubOptions", {"fused_activation_function": 0}))
    var = em.tmp(T.FLOAT32, None, "var")
    _reduce(em, "MEAN", em.binary("MUL", d, d, options=_MUL), axes, True, var)
    inv = em.unary("RSQRT", em.binary("ADD", var, em.const(np.float32(eps)), options=_ADD))
    return em.binary("MUL", d, inv, options=_MUL)


@maps("LayerNormalization")
def layer_norm(em: Emitter, node) -> None:
    if any(o for o in node.output[1:]):
        raise Unsupported("LayerNormalization's mean/inv_std_dev outputs")
    a = attrs(node)
    rank = em.rank(node.input[0])
    axes = list(range(_axis(int(a.get("axis", -1)), rank), rank))
    eps = float(a.get("epsilon", 1e-5))
    y = _normalized(em, em.t(node.input[0]), axes, eps)
    has_bias = len(node.input) > 2 and node.input[2]
    y_out = em.out() if not has_bias else em.tmp(T.FLOAT32, em.shape(node.output[0]), "scaled")
    em.op("MUL", [y, em.t(node.input[1])], [y_out], _MUL)
    if has_bias:
        em.op("ADD", [y_out, em.t(node.input[2])], [em.out()], _ADD)


def _channel_shape(rank: int) -> list[int]:
    return [-1] + [1] * (rank - 2)


@maps("BatchNormalization")
def batch_norm(em: Emitter, node) -> None:
    """Inference BatchNormalization with constant statistics: one MUL and one ADD per channel."""
    if attrs(node).get("training_mode", 0) or any(o for o in node.output[1:]):
        raise Unsupported("BatchNormalization in training mode")
    scale, bias, mean, var = (em.const_value(n) for n in node.input[1:5])
    if any(v is None for v in (scale, bias, mean, var)):
        raise Unsupported("BatchNormalization with statistics computed at run time")
    eps = float(attrs(node).get("epsilon", 1e-5))
    k = scale.astype(np.float64) / np.sqrt(var.astype(np.float64) + eps)
    shift = bias.astype(np.float64) - mean.astype(np.float64) * k
    shape = _channel_shape(em.rank(node.input[0]))
    x = em.t(node.input[0])
    y = em.binary("MUL", x, em.const(k.astype(np.float32).reshape(shape)), options=_MUL)
    em.op("ADD", [y, em.const(shift.astype(np.float32).reshape(shape))], [em.out()], _ADD)


@maps("InstanceNormalization")
def instance_norm(em: Emitter, node) -> None:
    rank = em.rank(node.input[0])
    axes = list(range(2, rank))
    eps = float(attrs(node).get("epsilon", 1e-5))
    y = _normalized(em, em.t(node.input[0]), axes, eps)
    shape = _channel_shape(rank)
    scale, bias = em.const_value(node.input[1]), em.const_value(node.input[2])
    if scale is None or bias is None:
        raise Unsupported("InstanceNormalization with scale/bias computed at run time")
    y = em.binary("MUL", y, em.const(scale.astype(np.float32).reshape(shape)), options=_MUL)
    em.op("ADD", [y, em.const(bias.astype(np.float32).reshape(shape))], [em.out()], _ADD)


@maps("RMSNormalization")
def rms_norm(em: Emitter, node) -> None:
    """x * RSQRT(MEAN(x², axes) + eps) * scale over the axes from ``axis`` to the last."""
    a = attrs(node)
    rank = em.rank(node.input[0])
    axes = list(range(_axis(int(a.get("axis", -1)), rank), rank))
    x = em.t(node.input[0])
    ms = em.tmp(T.FLOAT32, None, "mean_square")
    _reduce(em, "MEAN", em.binary("MUL", x, x, options=_MUL), axes, True, ms)
    inv = em.unary("RSQRT", em.binary("ADD", ms, em.const(np.float32(a.get("epsilon", 1e-5))), options=_ADD))
    em.op("MUL", [em.binary("MUL", x, inv, options=_MUL), em.t(node.input[1])], [em.out()], _MUL)
