"""Pool indices, unpooling and integer pools. torch's max-pool indices name each maximum by its flat position
within its own (n, c) plane; ONNX's MaxPool counts from the start of the whole tensor, so
``plane_indices`` takes the plane's offset off (a Mod by the plane's size). ``max_unpool2d/3d``
writes values back at those positions (ScatterElements, a write: TFLite refuses it, its
SCATTER_ND adds duplicates); ``max_pool2d/3d_with_indices_backward`` adds the gradients there."""

from __future__ import annotations

import numpy as np

from ...schema.walk import value_refs
from ..aten import dtypes
from ..aten.args import bind
from ..aten.dtypes import ST
from ..aten.registry import lowering
from ..errors import Unsupported
from .shapes import axes_const, per_axis, scalar_attr


def _plane_size(ctx, ref, n: int) -> str:
    """The element count of the last ``n`` axes of ``ref`` as a 1-D int64 of length 1."""
    spatial = ctx.info(ref).shape[-n:]
    if all(isinstance(s, int) for s in spatial):
        return ctx.ints([int(np.prod(spatial))])
    r = ctx.rank(ref)
    return ctx.op("ReduceProd", ctx.shape(ctx.t(ref), r - n, r), axes_const(ctx, [0]), keepdims=1)


def output_read(ctx, i: int) -> bool:
    """Whether output ``i`` of the node being lowered is read (by a node or the graph's outputs):
    a max pool's indices are made only then (TFLite refuses MaxPool's indices output)."""
    from ..aten.lower import output_slots

    slots = output_slots(ctx.node)
    name = slots[i] if i < len(slots) else None
    if not isinstance(name, str):
        return False
    return bool(ctx.view.consumers.get(name)) or any(
        ref == name for arg in ctx.view.output_args for _, ref in value_refs(arg))


def plane_indices(ctx, onnx_indices: str, ref, n: int) -> str:
    """ONNX MaxPool's indices (flat over the whole input ``ref``) as torch's: flat within each
    (n, c) plane of the last ``n`` axes."""
    return ctx.op("Mod", onnx_indices, _plane_size(ctx, ref, n))


def _flat(ctx, name: str, ref, n: int, plane: str) -> str:
    """``name`` (shaped like ``ref``) with its last ``n`` axes flattened to one of size ``plane``."""
    r = ctx.rank(ref)
    lead = ctx.shape(ctx.t(ref), 0, r - n) if r > n else None
    shape = plane if lead is None else ctx.op("Concat", lead, plane, axis=0)
    return ctx.op("Reshape", name, shape)


def _unpool(ctx, node, n: int):
    """Zeros of the input's leading dims + ``output_size``, ``self`` written at ``indices`` (flat
    positions within each plane; torch refuses an index outside the plane)."""
    a = bind(node, "self", "indices", "output_size", stride=None, padding=None)  # 2-D has no stride/padding
    a.declare("stride", "padding")  # torch checks them against the sizes; the result does not read them
    out = ctx.out_info()
    r = ctx.rank(a.self)
    if r not in (n + 1, n + 2) or ctx.info(a.indices).shape != ctx.info(a.self).shape:
        raise Unsupported(f"{node.target} with input rank {r} or indices shaped unlike the input")
    sizes = list(a.output_size)
    if all(isinstance(s, int) for s in sizes):
        ctx.reserve_array([int(np.prod(sizes))], 8, "unpool plane")
        plane_out = ctx.ints([int(np.prod(sizes))])
    else:
        plane_out = ctx.op("ReduceProd", ctx.ints(sizes), axes_const(ctx, [0]), keepdims=1)
    lead = ctx.shape(ctx.t(a.self), 0, r - n)
    zeros = ctx.op("ConstantOfShape", ctx.op("Concat", lead, plane_out, axis=0),
                   value=_zero_attr(out.dtype))
    plane_in = _plane_size(ctx, a.self, n)
    vals = _flat(ctx, ctx.t(a.self, out.dtype), a.self, n, plane_in)
    idx = _flat(ctx, ctx.t(a.indices, ST.LONG), a.indices, n, plane_in)
    y = ctx.op("ScatterElements", zeros, idx, vals, axis=-1)
    return ctx.op("Reshape", y, ctx.op("Concat", lead, ctx.ints(sizes), axis=0))


def _zero_attr(st):
    return scalar_attr(0, st)


lowering("onnx", "aten.max_unpool2d.default")(lambda ctx, node: _unpool(ctx, node, 2))
lowering("onnx", "aten.max_unpool3d.default")(lambda ctx, node: _unpool(ctx, node, 3))


def _pool_backward(ctx, node, n: int):
    """The gradient of a max pool: zeros shaped like ``self``, each ``grad_output`` element added at
    the position its index names within its plane (windows that share a maximum add up)."""
    a = bind(node, "grad_output", "self", "kernel_size", "stride", "padding", "dilation", "ceil_mode", "indices")
    a.declare("kernel_size", "stride", "padding", "dilation", "ceil_mode")  # the pool's: the indices say where
    out = ctx.out_info()
    if out.dtype not in (ST.FLOAT, ST.DOUBLE):
        raise Unsupported(f"{node.target} of {out.dtype.name}")
    if ctx.info(a.indices).shape != ctx.info(a.grad_output).shape:
        raise Unsupported(f"{node.target} with indices shaped unlike grad_output")
    zeros = ctx.op("ConstantOfShape", ctx.shape_of(a.self), value=_zero_attr(out.dtype))
    plane_out = _plane_size(ctx, a.grad_output, n)
    flat_zeros = _flat(ctx, zeros, a.self, n, _plane_size(ctx, a.self, n))
    grads = _flat(ctx, ctx.t(a.grad_output, out.dtype), a.grad_output, n, plane_out)
    idx = _flat(ctx, ctx.t(a.indices, ST.LONG), a.indices, n, plane_out)
    y = ctx.op("ScatterElements", flat_zeros, idx, grads, axis=-1, reduction="add")
    return ctx.op("Reshape", y, ctx.shape_of(a.self))


lowering("onnx", "aten.max_pool2d_with_indices_backward.default")(lambda ctx, node: _pool_backward(ctx, node, 2))
lowering("onnx", "aten.max_pool3d_with_indices_backward.default")(lambda ctx, node: _pool_backward(ctx, node, 3))


# ------------------------------------------------------------------ integer pools, by gathering the windows
#
# ONNX's pools take floats. An integer pool (static sizes) gathers each window's elements from the
# flattened planes through a constant [windows, slots] table of flat positions, in row-major order,
# positions outside the input dropped (slots past a window's last element repeat its first, which
# changes neither a max nor which position is found first), then reduces the slot axis: exact.


def _axis_windows(length: int, out: int, k: int, s: int, p: int, d: int, avg: bool):
    """Per output index along one axis: (the input positions its window reads, padded to a common
    width by repeating the first; how many are real; torch's avg divisor with the padding counted)."""
    rows, counts, padded = [], [], []
    for o in range(out):
        start = o * s - p
        if avg:
            end = min(start + k, length + p)
            padded.append(end - start)
            pos = list(range(max(start, 0), min(end, length)))
        else:
            pos = [start + i * d for i in range(k) if 0 <= start + i * d < length]
        rows.append(pos)
        counts.append(len(pos))
    return _padded_rows(rows, out) + (np.asarray(padded),)


def _padded_rows(rows, out: int):
    """(the rows as an [out, width] table, each padded by repeating its first; which slots are real)."""
    width = max([1] + [len(r) for r in rows])
    table = np.asarray([r + [r[0] if r else 0] * (width - len(r)) for r in rows], np.int64).reshape(out, width)
    return table, np.arange(width)[None, :] < np.asarray([len(r) for r in rows]).reshape(out, 1)


def _adaptive_axis(length: int, out: int):
    """``_axis_windows`` of an adaptive pool: window o is [floor(o*L/O), ceil((o+1)*L/O))."""
    rows = [list(range((o * length) // out, -(-(o + 1) * length // out))) for o in range(out)]
    return _padded_rows(rows, out) + (None,)


def _conv_axis(length: int, out: int, k: int, s: int, left: int, d: int):
    """Per output index along one axis: the input position of each of the ``k`` kernel taps (a tap
    in the padding reads position 0, masked off) and which taps are inside the input."""
    pos = np.arange(out)[:, None] * s - left + np.arange(k)[None, :] * d
    inside = (pos >= 0) & (pos < length)
    return np.where(inside, pos, 0).astype(np.int64), inside, None


def integer_pool(ctx, a, n: int, op: str, want_indices: bool):
    """max/avg pool (``a``: the pool's bound arguments) with the windows gathered: integers (ONNX's
    pools take floats), and float max pools whose indices are read (TFLite has no MaxPool indices)."""
    info, oinfo = ctx.info(a.self), ctx.out_info()
    shape, oshape = list(info.shape[-n:]), list(oinfo.shape[-n:])
    if not all(isinstance(v, int) for v in shape + oshape) or 0 in shape:
        raise Unsupported(f"{op} by gathered windows with spatial sizes known only at run time or empty")
    k, p, d = per_axis(a.kernel_size, n), per_axis(a.padding, n), per_axis(a.get("dilation", 1), n)
    s = per_axis(a.stride, n) if a.stride not in (None, [], ()) else k  # torch: the kernel's when left out
    avg = op == "AveragePool"
    per = [_axis_windows(L, o, ki, si, pi, di, avg) for L, o, ki, si, pi, di in zip(shape, oshape, k, s, p, d)]
    if not avg:
        return gathered_max(ctx, a.self, n, per, want_indices)
    table, valid, g, cst, reshape = _gather_windows(ctx, a.self, n, per)
    if not dtypes.is_integral(ctx.dtype(a.self), include_bool=False):
        raise Unsupported(f"{op} of {ctx.dtype(a.self).name} by gathered windows")
    total = ctx.op("ReduceSum", ctx.op("Mul", g, ctx.const(valid, cst)), axes_const(ctx, [-1]), keepdims=0)
    if a.divisor_override is not None:
        div = np.full(table.shape[0], int(a.divisor_override), np.int64)
    else:
        grids = np.meshgrid(*[(pd if a.count_include_pad else v.sum(1)) for _, v, pd in per], indexing="ij")
        div = np.prod(np.stack(grids), axis=0).reshape(-1).astype(np.int64)
    if (div == 0).any():
        raise Unsupported(f"{op} of integers with a window of no elements")
    y = ctx.op("Div", total, ctx.const(div, cst))  # truncates toward zero, as C++
    return ctx.cast(reshape(y), cst, oinfo.dtype), None


def adaptive_max(ctx, x, n: int, want_indices: bool):
    """adaptive_max_pool with the windows gathered (any static sizes, overlapping windows too)."""
    info, oinfo = ctx.info(x), ctx.out_info()
    shape, oshape = list(info.shape[-n:]), list(oinfo.shape[-n:])
    if not all(isinstance(v, int) for v in shape + oshape) or 0 in shape:
        raise Unsupported("adaptive max pool with spatial sizes known only at run time or empty")
    return gathered_max(ctx, x, n, [_adaptive_axis(L, o) for L, o in zip(shape, oshape)], want_indices)


def _gather_windows(ctx, x, n: int, per):
    """(the [windows, slots] table of flat positions, its mask of real slots, the gathered values
    [lead..., windows, slots] in the compute dtype, that dtype, a reshape of [lead..., windows] to
    the output's shape)."""
    shape, oshape = list(ctx.info(x).shape[-n:]), list(ctx.out_info().shape[-n:])
    width = int(np.prod([t.shape[1] for t, _, _ in per]))
    ctx.reserve_array([int(np.prod(oshape)), width, 3], 8, "pool window table")
    strides = [int(np.prod(shape[i + 1:])) for i in range(n)]
    pos, valid = np.zeros([1] * (2 * n), np.int64), np.ones([1] * (2 * n), bool)
    for i, (t, v, _) in enumerate(per):
        view = [1] * (2 * n)
        view[i], view[n + i] = t.shape
        pos = pos + (t * strides[i]).reshape(view)
        valid = valid & v.reshape(view)
    table = pos.reshape(int(np.prod(oshape)), width)  # [windows (row-major), slots (row-major)]
    st = ctx.dtype(x)
    cst = ST.LONG if dtypes.is_integral(st, include_bool=False) else ctx.compute_type(st)
    if st == ST.BOOL or not (cst == ST.LONG or dtypes.is_floating(cst)):
        raise Unsupported(f"a pool of {st.name}")
    r = ctx.rank(x)
    lead = ctx.shape(ctx.t(x), 0, r - n)
    flat = _flat(ctx, ctx.t(x, cst), x, n, ctx.ints([int(np.prod(shape))]))
    g = ctx.op("Gather", flat, ctx.const_array(table, "pool_windows"), axis=-1)
    out_shape = ctx.op("Concat", lead, ctx.ints(oshape), axis=0)
    return table, valid.reshape(table.shape), g, cst, lambda v: ctx.op("Reshape", v, out_shape)


def gathered_max(ctx, x, n: int, per, want_indices: bool):
    """The max of each window and (``want_indices``) its flat position in the plane, as torch's
    kernels pick it: the first maximum in row-major order, or the last NaN where there is one
    (the value is then NaN)."""
    table, valid, g, cst, reshape = _gather_windows(ctx, x, n, per)
    last = axes_const(ctx, [-1])
    m = ctx.op("ReduceMax", g, last, keepdims=1)
    first = ctx.op("ArgMax", ctx.cast(ctx.op("Equal", g, m), ST.BOOL, ST.INT), axis=-1, keepdims=1)
    if dtypes.is_floating(cst):
        nan = ctx.cast(ctx.op("And", ctx.op("IsNaN", g), ctx.const(valid, ST.BOOL)), ST.BOOL, ST.INT)
        any_nan = ctx.op("Greater", ctx.op("ReduceMax", nan, last, keepdims=1), ctx.const(0, ST.INT))
        m = ctx.op("Where", any_nan, ctx.const(np.nan, cst), m)
        # the last NaN slot: the largest of (slot + 1) over the NaN slots
        last_nan = ctx.op("ArgMax", ctx.op("Mul", nan, ctx.const(np.arange(1, table.shape[1] + 1), ST.INT)),
                          axis=-1, keepdims=1)
        first = ctx.op("Where", any_nan, last_nan, first)
    y = ctx.cast(reshape(ctx.op("Squeeze", m, last)), cst, ctx.out_info().dtype)
    if not want_indices:
        return y, None
    idx = ctx.op("GatherElements", ctx.op("Expand", ctx.const_array(table, "pool_windows"), ctx.shape(g)), first,
                 axis=-1)
    return y, reshape(ctx.op("Squeeze", idx, last))


def integer_conv(ctx, x, w, b, stride, padding, dilation, groups):
    """A convolution of integers (static sizes), as torch computes it in int64: each output
    position's input taps gathered ([N, C, positions, taps], taps in the padding masked to 0),
    then a MatMul per group with the weights as [C/g * taps, O/g], plus the bias."""
    n = ctx.rank(w) - 2
    xi, wi, oi = ctx.info(x), ctx.info(w), ctx.out_info()
    unbatched = ctx.rank(x) == n + 1
    shape, oshape, kshape = list(xi.shape[-n:]), list(oi.shape[-n:]), list(wi.shape)
    if not all(isinstance(v, int) for v in shape + oshape + kshape[1:] + [xi.shape[-n - 1]]) or 0 in shape:
        raise Unsupported("integer convolution with sizes known only at run time")
    cg, ks = kshape[1], kshape[2:]  # the output channels may be known only at run time (-1 below)
    s, d = per_axis(stride, n), per_axis(dilation, n)
    if isinstance(padding, str):  # 'same': the total d*(k-1) split with the extra element after
        left = [0] * n if padding == "valid" else [di * (ki - 1) // 2 for di, ki in zip(d, ks)]
    else:
        left = per_axis(padding, n)
    per = [_conv_axis(L, o, ki, si, pi, di) for L, o, ki, si, pi, di in zip(shape, oshape, ks, s, left, d)]
    table, valid, g, cst, reshape = _gather_windows(ctx, x, n, per)
    if cst != ST.LONG:
        raise Unsupported(f"integer convolution of {ctx.dtype(x).name}")
    taps = table.shape[1]
    g = ctx.op("Mul", g, ctx.const(valid, cst))  # [N, C, P, K] ([C, P, K] unbatched)
    if unbatched:
        g = ctx.op("Unsqueeze", g, axes_const(ctx, [0]))
    g = ctx.op("Reshape", g, ctx.ints([0, groups, cg, table.shape[0], taps]))
    g = ctx.op("Transpose", g, perm=[0, 1, 3, 2, 4])  # [N, G, P, C/g, K]
    g = ctx.op("Reshape", g, ctx.ints([0, groups, table.shape[0], cg * taps]))
    wm = ctx.op("Reshape", ctx.t(w, cst), ctx.ints([groups, -1, cg * taps]))
    y = ctx.op("MatMul", g, ctx.op("Transpose", wm, perm=[0, 2, 1]))  # [N, G, P, O/g]
    y = ctx.op("Transpose", y, perm=[0, 1, 3, 2])  # [N, G, O/g, P]
    if b is not None:
        y = ctx.op("Add", y, ctx.op("Reshape", ctx.t(b, cst), ctx.ints([groups, -1, 1])))
    spatial = ctx.op("Concat", ctx.dim(w, 0), ctx.ints(oshape), axis=0)
    out_shape = spatial if unbatched else ctx.op("Concat", ctx.shape(ctx.t(x), 0, 1), spatial, axis=0)
    return ctx.cast(ctx.op("Reshape", y, out_shape), cst, oi.dtype)
