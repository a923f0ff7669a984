"""Reductions, Softmax/LogSoftmax, ArgMax/ArgMin, TopK and LayerNormalization.

TFLite's SOFTMAX, LOG_SOFTMAX and TOPK_V2 work on the last axis: another axis is moved
there and back with TRANSPOSE. LayerNormalization is decomposed (MEAN, SUB, MUL, RSQRT).
"""

from __future__ import annotations

import numpy as np

from ...errors import Unsupported
from ..core.emit import Emitter, attrs
from ..core.mappers import maps
from ..core.model import TensorType as T
from .shape import _axis, axes_of, shape_tensor

# ONNX Reduce* = post(REDUCER(pre(x), axes)): the reducer builtin and the elementwise steps
# around it. With noop_with_empty_axes and no axes, only pre and post run (what ONNX Runtime and
# onnx's reference compute: ReduceSumSquare is then x*x, ReduceL2 sqrt(x*x)).
_REDUCE = {"ReduceSum": (None, "SUM", None), "ReduceMean": (None, "MEAN", None),
           "ReduceMax": (None, "REDUCE_MAX", None), "ReduceMin": (None, "REDUCE_MIN", None),
           "ReduceProd": (None, "REDUCE_PROD", None), "ReduceSumSquare": ("SQUARE", "SUM", None),
           "ReduceL1": ("ABS", "SUM", None), "ReduceL2": ("SQUARE", "SUM", "SQRT"),
           "ReduceLogSum": (None, "SUM", "LOG")}


def _reduce_axes(em: Emitter, node) -> int | None:
    """The axes to reduce as an int32 tensor; None for "no reduction" (noop_with_empty_axes and
    no axes). Axes given at run time are passed to the reducer as they are (TFLite's reducers
    take negative axes); their count must be known, as an empty list means "all axes"."""
    rank = em.rank(node.input[0])
    a = attrs(node)
    name = node.input[1] if "axes" not in a and len(node.input) > 1 and node.input[1] else ""
    if name and em.const_value(name) is None:
        n = em.shape(name)
        if n is None or len(n) != 1 or n[0] < 0:
            raise Unsupported(f"{node.op_type} with axes computed at run time whose count is unknown "
                              "(an empty list would mean all axes or none)")
        if n[0] > 0:
            return em.cast(em.t(name), T.INT32)
        axes = []
    else:
        axes = axes_of(em, node, 1) or []
    if not axes:
        if a.get("noop_with_empty_axes", 0):
            return None
        axes = list(range(rank))
    return em.const(np.asarray(sorted({_axis(v, rank) for v in axes}), np.int32))


def _reduce(em: Emitter, code: str, x: int, axes, keep: bool, out: int) -> None:
    """``code`` over ``axes`` (a list of ints, or an int32 tensor)."""
    if not isinstance(axes, (int, np.integer)):
        axes = em.const(np.asarray(axes, np.int32))
    _check_rank(em, code, x, int(axes), keep, out)
    em.op(code, [x, int(axes)], [out], ("ReducerOptions", {"keep_dims": keep}))


def _check_rank(em: Emitter, code: str, x: int, axes: int, keep: bool, out: int) -> None:
    """The output's rank is the reduction's. Axes known only at run time leave shape inference
    nothing to check: an output of unknown rank gets the reduction's (written without a rank,
    LiteRT returned a keepdims reduction over every axis as a scalar), and a model declaring
    another rank is refused."""
    x_shape, a_shape, o_shape = (em.sub.tensors[i].shape for i in (x, axes, out))
    if x_shape is None or a_shape is None or len(a_shape) != 1 or a_shape[0] < 0:
        return
    want = len(x_shape) if keep else len(x_shape) - a_shape[0]
    if o_shape is None:
        em.sub.tensors[out].shape = [-1] * want
    elif len(o_shape) != want:
        raise Unsupported(f"{code}: the output is declared with rank {len(o_shape)}, the reduction of a rank-"
                          f"{len(x_shape)} value over {a_shape[0]} axes gives rank {want}")


def _step(em: Emitter, code: str | None, x: int) -> int:
    if code is None:
        return x
    if code == "SQUARE":
        return em.binary("MUL", x, x)
    if em.dtype_of(x) != T.FLOAT32 and code in ("SQRT", "LOG"):
        raise Unsupported(f"TFLite's {code} computes float32 only")
    return em.unary(code, x)


@maps(*_REDUCE)
def reduce(em: Emitter, node) -> None:
    x = em.t(node.input[0])
    if em.dtype_of(x) == T.BOOL:
        if node.op_type not in ("ReduceMax", "ReduceMin"):
            raise Unsupported(f"{node.op_type} of booleans")
        _bool_any_all(em, node, x)
        return
    pre, code, post = _REDUCE[node.op_type]
    axes = _reduce_axes(em, node)
    keep = bool(attrs(node).get("keepdims", 1))
    y = _step(em, pre, x)
    if axes is not None:
        fill = _EMPTY_FILL.get(code) if em.dtype_of(y) == T.FLOAT32 else None
        r = em.tmp(em.dtype_of(y), em.shape(node.output[0]), "reduced") if post or fill else em.out()
        _reduce(em, code, y, axes, keep, r)
        y = r if fill is None else _fill_if_empty(em, node, x, axes, r, fill, post is None)
    elif post is None:
        em.bind(node.output[0], y)
        return
    if post is not None:
        if em.dtype_of(y) != T.FLOAT32 and post in ("SQRT", "LOG"):
            raise Unsupported(f"{node.op_type} of integers: TFLite's {post} computes float32 only")
        em.op(post, [y], [em.out()])


def _bool_any_all(em: Emitter, node, x: int) -> None:
    """ReduceMax/Min of booleans (any/all) over 0/1 in int32."""
    axes = _reduce_axes(em, node)
    if axes is None:
        em.bind(node.output[0], x)
        return
    r = em.tmp(T.INT32, em.shape(node.output[0]), "reduced")
    _reduce(em, _REDUCE[node.op_type][1], em.cast(x, T.INT32), axes, bool(attrs(node).get("keepdims", 1)), r)
    em.op("CAST", [r], [em.out()], ("CastOptions", {"in_data_type": T.INT32, "out_data_type": T.BOOL}))


# ONNX's max of no elements is -inf (min: +inf); TFLite's REDUCE_MAX gives float32's lowest
_EMPTY_FILL = {"REDUCE_MAX": -np.inf, "REDUCE_MIN": np.inf}


def _fill_if_empty(em: Emitter, node, x: int, axes: int, r: int, value: float, last: bool) -> int:
    """``r`` where the reduced axes hold elements, else ``value``: the element count over the
    axes (a constant when those dims are static, from SHAPE at run time otherwise)."""
    shape = em.shape(node.input[0])
    fixed = len(node.input) < 2 or not node.input[1] or em.const_value(node.input[1]) is not None
    if fixed and all(shape[i] > 0 for i in np.asarray(em.sub.tensors[axes].data).reshape(-1)):
        if last:  # the reduced dims are static and not empty
            em.bind(node.output[0], r)
        return r
    rank = len(shape)
    idx = em.binary("FLOOR_MOD", axes, em.const(np.array(rank, np.int32)))
    dims = em.tmp(T.INT32, None, "dims")
    em.op("GATHER", [shape_tensor(em, x), idx], [dims], ("GatherOptions", {"axis": 0}))
    count = em.tmp(T.INT32, [], "count")
    _reduce(em, "REDUCE_PROD", dims, em.const(np.array([0], np.int32)), False, count)
    empty = em.binary("EQUAL", count, em.const(np.array(0, np.int32)), dtype=T.BOOL)
    out = em.out() if last else em.tmp(T.FLOAT32, em.shape(node.output[0]), "filled")
    em.op("SELECT_V2", [empty, em.const(np.float32(value)), r], [out])
    return out


@maps("ReduceLogSumExp")
def reduce_log_sum_exp(em: Emitter, node) -> None:
    """m + LOG(SUM(EXP(x - m))) with m the max over the axes (0 where it is not finite): no
    overflow for large x, and +-inf maxima come out as ONNX Runtime's (inf, -inf)."""
    x = em.t(node.input[0])
    if em.dtype_of(x) != T.FLOAT32:
        raise Unsupported("ReduceLogSumExp of integers (TFLite's EXP and LOG compute float32 only)")
    axes = _reduce_axes(em, node)
    if axes is None:
        em.bind(node.output[0], x)
        return
    keep = bool(attrs(node).get("keepdims", 1))
    m = em.tmp(T.FLOAT32, None, "max")
    _reduce(em, "REDUCE_MAX", x, axes, True, m)
    finite = em.binary("EQUAL", em.binary("SUB", m, m), em.const(np.float32(0)), dtype=T.BOOL)
    shift = em.tmp(T.FLOAT32, None, "shift")
    em.op("SELECT_V2", [finite, m, em.const(np.float32(0))], [shift])
    s = em.tmp(T.FLOAT32, None, "sum")
    _reduce(em, "SUM", em.unary("EXP", em.binary("SUB", x, shift)), axes, keep, s)
    if not keep:
        shift_r = em.tmp(T.FLOAT32, None, "shift")
        _reduce(em, "REDUCE_MAX", shift, axes, False, shift_r)  # drops the kept axes (all size 1)
        shift = shift_r
    em.op("ADD", [em.unary("LOG", s), shift], [em.out()])


def _last_axis(em: Emitter, node, code: str, options) -> None:
    """``code`` over attribute ``axis`` (default -1), transposing it to the end when needed."""
    rank = em.rank(node.input[0])
    axis = _axis(int(attrs(node).get("axis", -1)), rank)
    x = em.t(node.input[0])
    if code == "SOFTMAX" and 0 in list(em.shape_of(x) or ()):  # XNNPACK's delegate fails to prepare it
        raise Unsupported(f"{node.op_type} of a tensor with no elements (ai-edge-litert 2.3.0's XNNPACK "
                          "delegate fails to prepare it)")
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
    """ARG_MAX/ARG_MIN (the first extreme); ``select_last_index``: the first one of the
    reversed axis, counted back from its end (``dim - 1 - index``)."""
    a = attrs(node)
    rank = em.rank(node.input[0])
    axis = _axis(int(a.get("axis", 0)), rank)
    code = "ARG_MAX" if node.op_type == "ArgMax" else "ARG_MIN"
    x = em.t(node.input[0])
    last = bool(a.get("select_last_index", 0))
    if last:
        x = _reversed(em, x, axis)
    y = _arg(em, code, x, axis)
    if last:
        dim = em.tmp(T.INT32, [], "dim")
        em.op("GATHER", [shape_tensor(em, x), em.const(np.array(axis, np.int32))], [dim], ("GatherOptions", {"axis": 0}))
        top = em.binary("SUB", dim, em.const(np.array(1, np.int32)))
        y = em.binary("SUB", top, y)
    if not a.get("keepdims", 1):
        em.bind(node.output[0], y)
        return
    em.op("EXPAND_DIMS", [y, em.const(np.array(axis, np.int32))], [em.out()])


def _arg(em: Emitter, code: str, x: int, axis: int) -> int:
    y = em.tmp(T.INT32, None, "arg")
    em.op(code, [x, em.const(np.array([axis], np.int32))], [y],
          ("ArgMaxOptions" if code == "ARG_MAX" else "ArgMinOptions", {"output_type": T.INT32}))
    return y


def _reversed(em: Emitter, x: int, axis: int) -> int:
    y = em.tmp(em.dtype_of(x), em.shape_of(x), "reversed")
    em.op("REVERSE_V2", [x, em.const(np.array([axis], np.int32))], [y])
    return y


@maps("Hardmax")
def hardmax(em: Emitter, node) -> None:
    """1 at the first maximum along ``axis`` (default -1), 0 elsewhere: ONE_HOT of ARG_MAX."""
    rank = em.rank(node.input[0])
    axis = _axis(int(attrs(node).get("axis", -1)), rank)
    x = em.t(node.input[0])
    if em.dtype_of(x) != T.FLOAT32:
        raise Unsupported("Hardmax of a non-float tensor")
    dims = shape_tensor(em, x)
    depth = em.tmp(T.INT32, [], "depth")
    em.op("GATHER", [dims, em.const(np.array(axis, np.int32))], [depth], ("GatherOptions", {"axis": 0}))
    em.op("ONE_HOT", [_arg(em, "ARG_MAX", x, axis), depth, em.const(np.float32(1)), em.const(np.float32(0))],
          [em.out()], ("OneHotOptions", {"axis": axis}))


@maps("LpNormalization")
def lp_normalization(em: Emitter, node) -> None:
    """x / ||x||_p along ``axis`` (p = 1: sum of |x|, p = 2: sqrt of the sum of squares); 0
    where the norm is 0."""
    a = attrs(node)
    p = int(a.get("p", 2))
    if p not in (1, 2):
        raise Unsupported(f"LpNormalization with p={p} (ONNX defines 1 and 2)")
    rank = em.rank(node.input[0])
    axis = _axis(int(a.get("axis", -1)), rank)
    x = em.t(node.input[0])
    norm = em.tmp(T.FLOAT32, None, "norm")
    _reduce(em, "SUM", em.unary("ABS", x) if p == 1 else em.binary("MUL", x, x), [axis], True, norm)
    if p == 2:
        norm = em.unary("SQRT", norm)
    # a zero norm divides by 1 (its slice is all zeros: 0, as ONNX Runtime gives, not 0/0)
    zero = em.binary("EQUAL", norm, em.const(np.float32(0)), dtype=T.BOOL)
    safe = em.tmp(T.FLOAT32, None, "norm")
    em.op("SELECT_V2", [zero, em.const(np.float32(1)), norm], [safe])
    em.op("DIV", [x, safe], [em.out()])


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


def _normalized(em: Emitter, x: int, axes: list[int], eps: float, parts: list | None = None) -> int:
    """``(x - mean) / sqrt(var + eps)`` over ``axes`` (population variance), as Layer- and
    InstanceNormalization define it; the scale and bias are the caller's. ``parts``, when
    given, receives the mean and 1 / sqrt(var + eps) (kept dims)."""
    mean = em.tmp(T.FLOAT32, None, "mean")
    _reduce(em, "MEAN", x, axes, True, mean)
    d = em.binary("SUB", x, mean)
    var = em.tmp(T.FLOAT32, None, "var")
    _reduce(em, "MEAN", em.binary("MUL", d, d), axes, True, var)
    inv = em.unary("RSQRT", em.binary("ADD", var, em.const(np.float32(eps))))
    if parts is not None:
        parts.extend([mean, inv])
    return em.binary("MUL", d, inv)


@maps("LayerNormalization")
def layer_norm(em: Emitter, node) -> None:
    """Outputs 1 and 2 (when used) are the mean and 1 / sqrt(var + eps), reduced dims kept."""
    a = attrs(node)
    rank = em.rank(node.input[0])
    axes = list(range(_axis(int(a.get("axis", -1)), rank), rank))
    eps = float(a.get("epsilon", 1e-5))
    parts: list = []
    y = _normalized(em, em.t(node.input[0]), axes, eps, parts)
    for i, part in zip((1, 2), parts):
        if len(node.output) > i and node.output[i]:
            em.bind(node.output[i], part)
    has_bias = len(node.input) > 2 and node.input[2]
    y_out = em.out() if not has_bias else em.tmp(T.FLOAT32, em.shape(node.output[0]), "scaled")
    em.op("MUL", [y, em.t(node.input[1])], [y_out])
    if has_bias:
        em.op("ADD", [y_out, em.t(node.input[2])], [em.out()])


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
    y = em.binary("MUL", x, em.const(k.astype(np.float32).reshape(shape)))
    em.op("ADD", [y, em.const(shift.astype(np.float32).reshape(shape))], [em.out()])


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
    y = em.binary("MUL", y, em.const(scale.astype(np.float32).reshape(shape)))
    em.op("ADD", [y, em.const(bias.astype(np.float32).reshape(shape))], [em.out()])


@maps("RMSNormalization")
def rms_norm(em: Emitter, node) -> None:
    """x * RSQRT(MEAN(x², axes) + eps) * scale over the axes from ``axis`` to the last."""
    a = attrs(node)
    rank = em.rank(node.input[0])
    axes = list(range(_axis(int(a.get("axis", -1)), rank), rank))
    x = em.t(node.input[0])
    ms = em.tmp(T.FLOAT32, None, "mean_square")
    _reduce(em, "MEAN", em.binary("MUL", x, x), axes, True, ms)
    inv = em.unary("RSQRT", em.binary("ADD", ms, em.const(np.float32(a.get("epsilon", 1e-5)))))
    em.op("MUL", [em.binary("MUL", x, inv), em.t(node.input[1])], [em.out()])
