"""Norms and distances: linalg_norm, linalg_matrix_norm (Frobenius, 1, inf; the SVD-based ones are
refused), dist, pairwise_distance and renorm."""

from __future__ import annotations

import math

from ..aten import dtypes
from ..aten.args import bind
from ..aten.registry import lowering
from ..errors import Unsupported
from .ops_loss import _diff, _pairwise, _static, vector_norm
from .ops_reduce import extreme
from .shapes import axes_const


# ------------------------------------------------------------------ norms and distances


def _float_io(ctx, what: str):
    out = ctx.out_info().dtype
    cst = ctx.compute_type(out)
    if not dtypes.is_floating(cst):
        raise Unsupported(f"{what} with a {out.name} result")
    return out, cst


def _matrix_norm(ctx, x, ord_, dims, keepdim, cst):
    """'fro' (the 2-norm of the elements) or the max/min of the absolute column (1) or row (inf)
    sums; 'nuc' and +-2 need singular values: refused."""
    if ord_ == "fro":
        return ctx.op("ReduceL2", x, axes_const(ctx, dims), keepdims=int(bool(keepdim)))
    if ord_ not in (1, -1, math.inf, -math.inf) or isinstance(ord_, bool):
        raise Unsupported(f"matrix norm of order {ord_!r} (it needs singular values: no SVD in pt2x)")
    summed, picked = dims if abs(ord_) == 1 else dims[::-1]
    s = ctx.op("ReduceSum", ctx.op("Abs", x), axes_const(ctx, [summed]), keepdims=1)
    r = extreme(ctx, "ReduceMax" if ord_ > 0 else "ReduceMin", s, axes_const(ctx, [picked]), 1, cst)
    return r if keepdim else ctx.op("Squeeze", r, axes_const(ctx, sorted(dims)))


@lowering("onnx", "aten.linalg_norm.default", "aten.linalg_norm.ord_str")
def linalg_norm(ctx, node):
    """A matrix norm when ``ord`` is given with two dims (or none and a 2-d input), else the vector
    norm of order ``ord`` (2 by default) over ``dim`` (all elements when None)."""
    a = bind(node, "self", "ord")
    a.declare("dtype")  # the output's dtype, computed in
    out, cst = _float_io(ctx, "linalg_norm")
    rank = ctx.rank(a.self)
    dims = None if a.dim is None else [d % max(rank, 1) for d in ([a.dim] if isinstance(a.dim, int) else a.dim)]
    x = ctx.t(a.self, cst)
    if a.ord is not None and (len(dims) == 2 if dims is not None else rank == 2):
        return ctx.cast(_matrix_norm(ctx, x, a.ord, dims or [0, 1], a.keepdim, cst), cst, out)
    if isinstance(a.ord, str) or (dims is None and a.ord is not None and rank != 1) or (dims and len(dims) > 2):
        raise Unsupported(f"linalg_norm of order {a.ord!r} over dims {a.dim!r} of a {rank}-d tensor")
    r = vector_norm(ctx, x, 2 if a.ord is None else a.ord, list(range(rank)) if dims is None else dims, a.keepdim, cst)
    return ctx.cast(r, cst, out)


@lowering("onnx", "aten.linalg_matrix_norm.default", "aten.linalg_matrix_norm.str_ord")
def matrix_norm(ctx, node):
    """'fro', 1, -1, inf or -inf norm over the two ``dim``."""
    a = bind(node, "self", "ord", "dim")
    a.declare("dtype")  # the output's dtype, computed in
    out, cst = _float_io(ctx, "matrix_norm")
    rank = ctx.rank(a.self)
    dims = [d % max(rank, 1) for d in a.dim]
    if len(dims) != 2 or dims[0] == dims[1]:
        raise Unsupported(f"matrix_norm over dims {a.dim}")
    return ctx.cast(_matrix_norm(ctx, ctx.t(a.self, cst), a.ord, dims, a.keepdim, cst), cst, out)


@lowering("onnx", "aten.dist.default")
def dist(ctx, node):
    """The p-norm of ``self - other`` (broadcast) over all elements."""
    a = bind(node, "self", "other", "p")
    out, cst = _float_io(ctx, "dist")
    rank = max(ctx.rank(a.self), ctx.rank(a.other))
    return ctx.cast(vector_norm(ctx, _diff(ctx, a.self, a.other, cst), a.p, list(range(rank)), False, cst), cst, out)


@lowering("onnx", "aten.pairwise_distance.default")
def pairwise_distance(ctx, node):
    """``||x1 - x2 + eps||_p`` over the last dim."""
    a = bind(node, "x1", "x2", "p", "eps", "keepdim")
    out, cst = _float_io(ctx, "pairwise_distance")
    return ctx.cast(_pairwise(ctx, a.x1, a.x2, a.p, a.eps, a.keepdim, cst), cst, out)


@lowering("onnx", "aten.renorm.default")
def renorm(ctx, node):
    """Each slice along ``dim`` whose p-norm (over the other dims) passes ``maxnorm`` is scaled by
    ``maxnorm / (norm + 1e-7)``."""
    a = bind(node, "self", "p", "dim", "maxnorm")
    out, cst = _float_io(ctx, "renorm")
    rank = ctx.rank(a.self)
    p, maxnorm = _static(a.p, "renorm's p"), _static(a.maxnorm, "renorm's maxnorm")
    if rank == 0 or p <= 0 or maxnorm < 0:
        raise Unsupported(f"renorm of a {rank}-d tensor with p={p}, maxnorm={maxnorm}")
    x = ctx.t(a.self, cst)
    norm = vector_norm(ctx, x, p, [i for i in range(rank) if i != a.dim % rank], True, cst)
    m = ctx.const(maxnorm, cst)
    factor = ctx.op("Where", ctx.op("Greater", norm, m), ctx.op("Div", m, ctx.op("Add", norm, ctx.const(1e-7, cst))),
                    ctx.const(1, cst))
    return ctx.cast(ctx.op("Mul", x, factor), cst, out)
