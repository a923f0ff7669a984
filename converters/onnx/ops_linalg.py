"""Small linear-algebra lowerings: cross products, diag, bilinear (and its decomposition, _trilinear).

Built from Gather/Mul/Sub/Where/MatMul/ReduceSum, which the TFLite target maps; integers
work where torch takes them (cross, diag).
"""

from __future__ import annotations

import numpy as np

from ..aten.args import bind
from ..aten.dtypes import ST
from ..aten.registry import lowering
from ..errors import Unsupported
from .shapes import axes_const


def _io(ctx):
    out = ctx.out_info().dtype
    cst = ctx.compute_type(out)
    return out, (ST.INT if cst == ST.BOOL else cst)


@lowering("onnx", "aten.cross.default", "aten.linalg_cross.default")
def cross(ctx, node):
    """``a[i+1] b[i+2] - a[i+2] b[i+1]`` along ``dim`` (of size 3), the operands broadcast.
    ``cross`` without ``dim`` takes the first dim of size 3, as torch (``linalg_cross``: -1)."""
    a = bind(node, "self", "other")
    out_info = ctx.out_info()
    rank = out_info.rank
    if a.dim is None:
        dim = next((i for i, s in enumerate(out_info.shape) if s == 3), None)
        if dim is None:
            raise Unsupported("cross without dim and no dim of size 3 known")
    else:
        dim = a.dim % max(rank, 1)
    if out_info.shape[dim] != 3:
        raise Unsupported(f"cross along dim {dim} of size {out_info.shape[dim]} (3 is needed)")
    out, cst = _io(ctx)
    x1, x2 = _rotations(ctx, a.self, dim, rank, cst)
    y1, y2 = _rotations(ctx, a.other, dim, rank, cst)
    r = ctx.op("Sub", ctx.op("Mul", x1, y2), ctx.op("Mul", x2, y1))
    return ctx.cast(r, cst, out)


def _rotations(ctx, ref, dim: int, rank: int, cst):
    """``ref``'s components (1, 2, 0) and (2, 0, 1) along the output's ``dim`` (the operand's
    own axis there: broadcasting aligns trailing dims)."""
    shape = ctx.info(ref).shape
    axis = dim - (rank - len(shape))
    if axis < 0 or shape[axis] != 3:
        raise Unsupported(f"cross of an operand without size 3 along dim {dim}")
    x = ctx.t(ref, cst)
    return [ctx.op("Gather", x, ctx.const(np.array(p, np.int64), ST.LONG), axis=axis) for p in ([1, 2, 0], [2, 0, 1])]


@lowering("onnx", "aten.diag.default")
def diag(ctx, node):
    """1-D ``v``: the square matrix with ``v`` on diagonal ``k``; 2-D: diagonal ``k`` as a vector.
    Static sizes (the mask is a constant)."""
    a = bind(node, "self", "diagonal")
    k = a.diagonal
    shape = ctx.info(a.self).shape
    out_shape = ctx.out_info().shape
    if not all(isinstance(s, int) for s in (*shape, *out_shape)):
        raise Unsupported("diag of a dynamic size")
    out, cst = _io(ctx)
    x = ctx.t(a.self, cst)
    if len(shape) == 1:
        n = out_shape[0]
        ctx.reserve_array([n, n], 9, "diag mask")
        rows, cols = np.indices((n, n))
        mask = cols - rows == k
        pos = np.clip(rows if k >= 0 else cols, 0, max(shape[0] - 1, 0))
        if shape[0] == 0:
            return ctx.const(np.zeros((n, n)), out)
        picked = ctx.op("Gather", x, ctx.const(pos.astype(np.int64), ST.LONG), axis=0)
        return ctx.cast(ctx.op("Where", ctx.const(mask, ST.BOOL), picked, ctx.const(0, cst)), cst, out)
    if len(shape) != 2:
        raise Unsupported(f"diag of a {len(shape)}-d tensor (1-d or 2-d)")
    n1, n2 = shape
    length = out_shape[0]
    if length == 0:
        return ctx.const(np.zeros((0,)), out)
    start = max(-k, 0)
    ctx.reserve_array([n1, n2], 9, "diag mask")
    mask = np.eye(n1, n2, k=k, dtype=bool)
    rows = ctx.op("ReduceSum", ctx.op("Where", ctx.const(mask, ST.BOOL), x, ctx.const(0, cst)), axes_const(ctx, [1]),
                  keepdims=0)
    r = ctx.op("Slice", rows, ctx.ints([start]), ctx.ints([start + length]), ctx.ints([0]))
    return ctx.cast(r, cst, out)


@lowering("onnx", "aten.bilinear.default")
def bilinear(ctx, node):
    """``y[..., o] = x1[..., i] W[o, i, j] x2[..., j] + b[o]``: x1 (flattened to [n, i]) times W
    laid out [i, o*j], reshaped [n, o, j], times x2 [n, 1, j], summed over j."""
    a = bind(node, "input1", "input2", "weight", "bias")
    wshape = ctx.info(a.weight).shape
    if not all(isinstance(s, int) for s in wshape):
        raise Unsupported("bilinear with a weight of dynamic shape")
    o, i, j = wshape
    out, cst = _io(ctx)
    x1 = ctx.op("Reshape", ctx.t(a.input1, cst), ctx.ints([-1, i]))
    x2 = ctx.op("Reshape", ctx.t(a.input2, cst), ctx.ints([-1, 1, j]))
    w = ctx.op("Reshape", ctx.op("Transpose", ctx.t(a.weight, cst), perm=[1, 0, 2]), ctx.ints([i, o * j]))
    t = ctx.op("Reshape", ctx.op("MatMul", x1, w), ctx.ints([-1, o, j]))
    y = ctx.op("ReduceSum", ctx.op("Mul", t, x2), axes_const(ctx, [2]), keepdims=0)
    if a.bias is not None:
        y = ctx.op("Add", y, ctx.t(a.bias, cst))
    lead = ctx.shape(ctx.t(a.input1), 0, -1)
    y = ctx.op("Reshape", y, ctx.op("Concat", lead, ctx.ints([o]), axis=0))
    return ctx.cast(y, cst, out)


@lowering("onnx", "aten._trilinear.default")
def trilinear(ctx, node):
    """``sum over sumdim of i1 * i2 * i3``, each unsqueezed at its ``expand`` dims (what
    ``bilinear`` decomposes into)."""
    a = bind(node, "i1", "i2", "i3", "expand1", "expand2", "expand3", "sumdim")
    a.declare("unroll_dim")  # which dim torch's kernel loops over: the same sum
    out, cst = _io(ctx)
    terms = []
    for x, dims in ((a.i1, a.expand1), (a.i2, a.expand2), (a.i3, a.expand3)):
        t = ctx.t(x, cst)
        terms.append(ctx.op("Unsqueeze", t, axes_const(ctx, sorted(dims))) if dims else t)
    r = ctx.op("Mul", ctx.op("Mul", terms[0], terms[1]), terms[2])
    if a.sumdim:
        r = ctx.op("ReduceSum", r, axes_const(ctx, sorted(a.sumdim)), keepdims=0)
    return ctx.cast(r, cst, out)
