"""int8 kernels that move or pool values: Reshape, Transpose, Concat, Pad (RESHAPE, TRANSPOSE,
CONCATENATION, PAD), MaxPool and AveragePool (MAX_POOL_2D, AVERAGE_POOL_2D), GlobalAveragePool
and ReduceMean (MEAN) (``qdq_registry``'s patterns).

The data-movement kernels and LiteRT's int8 pools do not rescale (``reshape.cc``, ``transpose.cc``,
``pad.cc``, ``pooling.cc``; ``concatenation.cc`` requires every int8 input at the output's
parameters): each stays float unless its input and output parameters are the same. MEAN
rescales. Pools run NHWC between TRANSPOSEs the layout pass cancels; MaxPool's pads are a PADV2
of the lowest int8 (never the window's maximum), or a PAD of the zero point where that is no
more (the input came through a fused RELU/RELU6, every value real >= 0, or the zero point is
-128): XNNPACK takes PAD but not PADV2 in int8; AveragePool's a PAD of the zero point (real 0)
when ``count_include_pad`` counts them; AveragePool pads it would not count, ceil mode and
dilation stay float.
"""

from __future__ import annotations

import numpy as np

from ..core.emit import Emitter, attrs
from ..core.window import window_axes
from .qdq_registry import Pattern, append, int8_op, q_input, q_output, qtensor, transpose_q

__all__ = ["same_params_op", "concat", "pool", "mean"]

_VALID = 1


def _same_params(p: Pattern) -> str | None:
    if any(not prm.same(p.out) for prm in p.params.values()):
        return (f"its input and output are quantized differently (LiteRT's int8 {p.node.op_type} does not "
                "rescale)")
    return None


def _constant_int(em: Emitter, name: str) -> np.ndarray | None:
    c = em.const_value(name) if name else None
    return c if c is not None and c.dtype.kind in "iu" else None


def _movement_check(em: Emitter, p: Pattern) -> str | None:
    node = p.node
    if node.op_type == "Reshape" and (_constant_int(em, node.input[1]) is None or em.shape(node.output[0]) is None):
        return "its shape is computed at run time"
    if node.op_type == "Pad":
        ins = list(node.input) + ["", "", ""]
        value = em.const_value(ins[2]) if ins[2] else None
        if attrs(node).get("mode", b"constant") not in (b"constant", "constant"):
            return "it is not a constant-mode Pad"
        if _constant_int(em, ins[1]) is None or ins[3] or (ins[2] and (value is None or np.any(value != 0))):
            return "its pads are computed at run time, it has axes, or it pads with a value other than 0"
    return _same_params(p)


@int8_op("Reshape", "Transpose", "Pad", check=_movement_check)
def same_params_op(em: Emitter, p: Pattern) -> None:
    node, x, y = p.node, q_input(em, p, 0), q_output(em, p)
    if node.op_type == "Reshape":
        shape = [d if d >= 0 else -1 for d in em.shape(node.output[0])]
        if sum(d < 0 for d in shape) > 1:
            shape = [int(v) for v in _constant_int(em, node.input[1])]  # 0 copies, -1 infers, as ONNX
            shape = [(em.shape(node.input[0])[k] if v == 0 else v) for k, v in enumerate(shape)]
        append(em, "RESHAPE", [x, em.const(np.asarray(shape, np.int32))], [y])
    elif node.op_type == "Transpose":
        rank = em.rank(node.input[0])
        perm = list(attrs(node).get("perm", list(range(rank))[::-1]))
        transpose_q(em, x, perm, y)
    else:
        pads = _constant_int(em, node.input[1]).reshape(2, -1).T.astype(np.int32)
        append(em, "PAD", [x, em.const(np.ascontiguousarray(pads))], [y])


def _concat_check(em: Emitter, p: Pattern) -> str | None:
    return _same_params(p)


@int8_op("Concat", all_inputs=True, check=_concat_check)
def concat(em: Emitter, p: Pattern) -> None:
    axis = int(attrs(p.node)["axis"]) % em.rank(p.node.output[0])
    ins = [q_input(em, p, s) for s in sorted(p.dq)]
    append(em, "CONCATENATION", ins, [q_output(em, p)],
           ("ConcatenationOptions", {"axis": axis, "fused_activation_function": 0}))


def _pool_axes(em: Emitter, node):
    a = attrs(node)
    sizes = list(em.shape(node.input[0])[2:])
    return window_axes(a, sizes, list(a.get("kernel_shape", [])), node.op_type)


def _pool_check(em: Emitter, p: Pattern) -> str | None:
    node, a = p.node, attrs(p.node)
    if em.rank(node.input[0]) != 4 or len(a.get("kernel_shape", [])) != 2:
        return "it is not a 2-D pool"
    if int(a.get("ceil_mode", 0)) or any(int(d) != 1 for d in a.get("dilations", [1, 1])):
        return "it has ceil_mode or dilations"
    if any(d < 0 for d in em.shape(node.input[0])[2:]) and a.get("auto_pad", b"NOTSET") not in (b"NOTSET", "NOTSET"):
        return "its auto_pad depends on a spatial size known only at run time"
    padded = any(ax.begin or ax.end for ax in _pool_axes(em, node))
    if node.op_type == "AveragePool" and padded and not int(a.get("count_include_pad", 0)):
        return "it averages over pads it does not count (count_include_pad=0)"
    return _same_params(p)


def _zero_point_is_lowest(p: Pattern, quant) -> bool:
    """Whether padding with the zero point cannot raise a window's maximum."""
    return 0 in p.nonnegative or quant.zero_point[0] == -128


@int8_op("MaxPool", "AveragePool", check=_pool_check)
def pool(em: Emitter, p: Pattern) -> None:
    node = p.node
    axes = _pool_axes(em, node)
    x = transpose_q(em, q_input(em, p, 0), [0, 2, 3, 1])
    if any(ax.begin or ax.end for ax in axes):
        t = em.sub.tensors[x]
        spec = em.const(np.array([[0, 0]] + [[ax.begin, ax.end] for ax in axes] + [[0, 0]], np.int32))
        padded = qtensor(em, None, t.quant, "pad")
        if node.op_type == "MaxPool" and not _zero_point_is_lowest(p, t.quant):
            lowest = qtensor(em, [], t.quant, "lowest")
            em.sub.tensors[lowest].data = np.array(-128, np.int8)
            append(em, "PADV2", [x, spec, lowest], [padded])
        else:
            append(em, "PAD", [x, spec], [padded])
        x = padded
    y = qtensor(em, None, em.sub.tensors[x].quant, "pool")
    code = "MAX_POOL_2D" if node.op_type == "MaxPool" else "AVERAGE_POOL_2D"
    append(em, code, [x], [y], ("Pool2DOptions", {
        "padding": _VALID, "stride_h": axes[0].stride, "stride_w": axes[1].stride,
        "filter_height": axes[0].kernel, "filter_width": axes[1].kernel, "fused_activation_function": 0}))
    transpose_q(em, y, [0, 3, 1, 2], q_output(em, p))


def _mean_axes(em: Emitter, p: Pattern) -> list[int] | None:
    node = p.node
    rank = em.rank(node.input[0])
    if node.op_type == "GlobalAveragePool":
        return list(range(2, rank))
    a = attrs(node)
    axes = a.get("axes")
    if axes is None and len(node.input) > 1 and node.input[1]:
        c = _constant_int(em, node.input[1])
        axes = None if c is None else c.tolist()
    if axes is None or not int(a.get("keepdims", 1)) or int(a.get("noop_with_empty_axes", 0)):
        return None
    return sorted(int(v) % rank for v in axes)


def _mean_check(em: Emitter, p: Pattern) -> str | None:
    if _mean_axes(em, p) is None or not p.params[0].per_tensor:
        return "its axes are computed at run time or empty, or it drops the reduced dims"
    return None


@int8_op("GlobalAveragePool", "ReduceMean", check=_mean_check)
def mean(em: Emitter, p: Pattern) -> None:
    axes, rank = _mean_axes(em, p), em.rank(p.node.input[0])
    x = q_input(em, p, 0)
    if rank == 4 and axes == [2, 3]:  # NHWC, over H and W: the form XNNPACK takes, transposes cancelled
        nhwc = transpose_q(em, x, [0, 2, 3, 1])
        y = qtensor(em, None, em.sub.tensors[q_output(em, p)].quant, "mean")
        append(em, "MEAN", [nhwc, em.const(np.array([1, 2], np.int32))], [y], ("ReducerOptions", {"keep_dims": True}))
        transpose_q(em, y, [0, 3, 1, 2], em.t(p.q.output[0]))
        return
    append(em, "MEAN", [x, em.const(np.asarray(axes, np.int32))], [q_output(em, p)],
           ("ReducerOptions", {"keep_dims": True}))
