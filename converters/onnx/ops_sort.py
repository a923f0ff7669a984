"""Lowerings that order or search values: ``msort``, ``kthvalue``, ``median``/``nanmedian``,
``quantile``/``nanquantile``, ``mode`` (0-d only), ``searchsorted``, ``bucketize`` and ``isin``.

Ascending orders come from ONNX's TopK taken largest-first and reversed along the axis (the
TFLite target maps TopK of the largest values for every dtype, of the smallest only for
floats). NaN is placed after +inf as torch does: NaNs are sorted as +inf and the last
``count(NaN)`` places of each row then hold NaN, so no order relies on how a runtime compares
NaN. Indices of tied values may differ from torch's (torch documents no order for them).
"""

from __future__ import annotations

import numpy as np

from ..aten import dtypes
from ..aten.args import bind
from ..aten.dtypes import ST
from ..aten.registry import lowering
from ..errors import Unsupported
from .shapes import axes_const

INT64_MIN = -(2**63)


def _cst(ctx, ref) -> ST:
    """The dtype values are sorted in: the compute type, int32 for bool (TopK takes no bool)."""
    st = ctx.dtype(ref)
    return ctx.compute_type(st) if st != ST.BOOL else ST.INT


def iota(ctx, n: str, rank: int, dim: int) -> str:
    """0..n-1 (``n`` a 1-D int64 of one element) laid along ``dim`` of a rank-``rank`` tensor."""
    r = ctx.op("Range", ctx.const(0, ST.LONG), ctx.op("Squeeze", n, axes_const(ctx, [0])), ctx.const(1, ST.LONG))
    return ctx.op("Reshape", r, ctx.ints([-1] + [1] * (rank - dim - 1)))


def sort_asc(ctx, x: str, rank: int, dim: int, st: ST):
    """``x`` (rank >= 1, dtype ``st``) sorted ascending along ``dim``: (values, indices, n, NaN
    count kept along ``dim`` or None for a non-float)."""
    n = ctx.shape(x, dim, dim + 1)
    nan = None
    key = x
    if dtypes.is_floating(st):
        isnan = ctx.op("IsNaN", x)
        key = ctx.op("Where", isnan, ctx.const(np.inf, st), x)
        nan = ctx.op("ReduceSum", ctx.cast(isnan, ST.BOOL, ST.LONG), axes_const(ctx, [dim]), keepdims=1)
    v, i = ctx.op("TopK", key, n, axis=dim, largest=1, sorted=1, outputs=2)
    rev = (ctx.ints([-1]), ctx.ints([INT64_MIN]), ctx.ints([dim]), ctx.ints([-1]))
    v, i = ctx.op("Slice", v, *rev), ctx.op("Slice", i, *rev)
    if nan is not None:
        tail = ctx.op("GreaterOrEqual", iota(ctx, n, rank, dim), ctx.op("Sub", n, nan))
        v = ctx.op("Where", tail, ctx.const(np.nan, st), v)
    return v, i, n, nan


def _flat_or_dim(ctx, ref, dim, cst):
    """(values in ``cst``, rank, dim): flattened to 1-D for ``dim`` None, [1] for a 0-d input."""
    x = ctx.t(ref, cst)
    r = ctx.rank(ref)
    if dim is None or r == 0:
        return ctx.op("Reshape", x, ctx.ints([-1])), 1, 0
    return x, r, dim % r


def _finish(ctx, y, ref, dim, keepdim):
    """A result gathered with keepdims along ``dim`` back to torch's shape."""
    r = ctx.rank(ref)
    if dim is None:
        return ctx.op("Reshape", y, ctx.ints([1] * r if keepdim else []))
    if r == 0:
        return ctx.op("Reshape", y, ctx.ints([]))
    return y if keepdim else ctx.op("Squeeze", y, axes_const(ctx, [dim % r]))


def _take(ctx, t, pos, dim):
    """``t`` at position ``pos`` (int64 with keepdims along ``dim``) along ``dim``."""
    return ctx.op("GatherElements", t, pos, axis=dim)


@lowering("onnx", "aten.msort.default")
def msort(ctx, node):
    """``sort(self, dim=0).values``."""
    a = bind(node, "self")
    st, cst = ctx.dtype(a.self), _cst(ctx, a.self)
    x, r, dim = _flat_or_dim(ctx, a.self, 0, cst)
    v = sort_asc(ctx, x, r, dim, cst)[0]
    return ctx.cast(_finish(ctx, v, a.self, 0, True), cst, st)


@lowering("onnx", "aten.kthvalue.default")
def kthvalue(ctx, node):
    """The k-th smallest value along ``dim`` (NaN counting as the largest) and its index."""
    a = bind(node, "self", "k", "dim", "keepdim")
    if not isinstance(a.k, int):
        raise Unsupported("kthvalue with k computed at run time")
    st, cst = ctx.dtype(a.self), _cst(ctx, a.self)
    info = ctx.info(a.self)
    n = 1 if info.rank == 0 else info.shape[a.dim % info.rank]
    if isinstance(n, int) and not 1 <= a.k <= n:
        raise Unsupported(f"kthvalue with k={a.k} outside 1..{n} (torch raises)")
    x, r, dim = _flat_or_dim(ctx, a.self, a.dim, cst)
    v, i, _, _ = sort_asc(ctx, x, r, dim, cst)
    pos = ctx.ints([a.k - 1])
    v = ctx.op("Gather", v, pos, axis=dim)
    i = ctx.op("Gather", i, pos, axis=dim)
    return [ctx.cast(_finish(ctx, v, a.self, a.dim, a.keepdim), cst, st), _finish(ctx, i, a.self, a.dim, a.keepdim)]


def _median(ctx, node, ref, dim, keepdim, ignore_nan):
    """The lower median along ``dim`` (all values for None) and its index. ``median``: NaN and
    the first NaN's index where a row holds one; ``nanmedian``: of the row's other values."""
    st, cst = ctx.dtype(ref), _cst(ctx, ref)
    x, r, d = _flat_or_dim(ctx, ref, dim, cst)
    v, i, n, nan = sort_asc(ctx, x, r, d, cst)
    one, zero = ctx.const(1, ST.LONG), ctx.const(0, ST.LONG)
    if nan is not None and ignore_nan:  # per row: (m - 1) // 2 of its m values that are not NaN
        m = ctx.op("Sub", n, nan)
        pos = ctx.op("Max", ctx.op("Div", ctx.op("Sub", m, one), ctx.const(2, ST.LONG)), zero)
        val, idx = _take(ctx, v, pos, d), _take(ctx, i, pos, d)
    else:  # (n - 1) // 2 for every row (an empty row: torch raises)
        pos = ctx.op("Max", ctx.op("Div", ctx.op("Sub", n, one), ctx.const(2, ST.LONG)), zero)
        val, idx = ctx.op("Gather", v, pos, axis=d), ctx.op("Gather", i, pos, axis=d)
    if nan is not None:
        isnan = ctx.op("IsNaN", x)
        first = ctx.op("ArgMax", ctx.cast(isnan, ST.BOOL, ST.INT), axis=d, keepdims=1, select_last_index=0)
        if ignore_nan:  # a row of NaNs only: NaN at index 0 as torch
            all_nan = ctx.op("Equal", ctx.op("Sub", n, nan), ctx.const(0, ST.LONG))
            idx = ctx.op("Where", all_nan, first, idx)
        else:
            some = ctx.op("Greater", nan, ctx.const(0, ST.LONG))
            val = ctx.op("Where", some, ctx.const(np.nan, cst), val)
            idx = ctx.op("Where", some, first, idx)
    return ctx.cast(_finish(ctx, val, ref, dim, keepdim), cst, st), _finish(ctx, idx, ref, dim, keepdim)


@lowering("onnx", "aten.median.default", "aten.nanmedian.default")
def median_all(ctx, node):
    """The lower median of all values (NaN if any for ``median``; ignoring NaNs for ``nanmedian``)."""
    a = bind(node, "self")
    return _median(ctx, node, a.self, None, False, "nanmedian" in node.target)[0]


@lowering("onnx", "aten.median.dim", "aten.nanmedian.dim")
def median_dim(ctx, node):
    """The lower median along ``dim`` and its index (see ``_median``)."""
    a = bind(node, "self", "dim", "keepdim")
    return list(_median(ctx, node, a.self, a.dim, a.keepdim, "nanmedian" in node.target))


_INTERPOLATIONS = ("linear", "lower", "higher", "midpoint", "nearest")


@lowering("onnx", "aten.quantile.scalar", "aten.nanquantile.scalar")
def quantile(ctx, node):
    """The ``q``-quantile along ``dim`` (all values for None) between the sorted values at
    ``floor``/``ceil`` of ``q * (n - 1)``, in the input's float dtype. ``quantile``: NaN for a
    row holding NaN; ``nanquantile``: over the row's other values (NaN when there are none)."""
    a = bind(node, "self", "q", "dim", "keepdim", "interpolation")
    st = ctx.dtype(a.self)
    if not dtypes.is_floating(st):
        raise Unsupported(f"quantile of {st.name} (torch wants a float input)")
    if not isinstance(a.q, (int, float)) or not 0 <= a.q <= 1:
        raise Unsupported(f"quantile q={a.q!r} (static, in [0, 1])")
    if a.interpolation not in _INTERPOLATIONS:
        raise Unsupported(f"quantile interpolation {a.interpolation!r}")
    cst = ctx.compute_type(st)
    x, r, d = _flat_or_dim(ctx, a.self, a.dim, cst)
    v, _, n, nan = sort_asc(ctx, x, r, d, cst)
    m = ctx.op("Sub", n, nan) if "nanquantile" in node.target else n
    m = ctx.op("Expand", m, ctx.op("Shape", nan))  # per row, kept dim
    last = ctx.op("Sub", m, ctx.const(1, ST.LONG))
    rank = ctx.op("Mul", ctx.const(a.q, cst), ctx.cast(last, ST.LONG, cst))
    lo = ctx.op("Floor", rank)
    hi = ctx.op("Ceil", rank)
    safe = ctx.op("Max", last, ctx.const(0, ST.LONG))

    def at(p):  # the sorted value at rank p, clamped into the row
        p = ctx.op("Max", ctx.op("Min", ctx.cast(p, cst, ST.LONG), safe), ctx.const(0, ST.LONG))
        return _take(ctx, v, p, d)

    if a.interpolation == "lower":
        y = at(lo)
    elif a.interpolation == "higher":
        y = at(hi)
    elif a.interpolation == "nearest":
        y = at(ctx.op("Round", rank))
    else:
        below, above = at(lo), at(hi)
        w = ctx.const(0.5, cst) if a.interpolation == "midpoint" else ctx.op("Sub", rank, lo)
        diff = ctx.op("Sub", above, below)  # torch's lerp: from the nearer end
        near_lo = ctx.op("Add", below, ctx.op("Mul", w, diff))
        near_hi = ctx.op("Sub", above, ctx.op("Mul", ctx.op("Sub", ctx.const(1, cst), w), diff))
        y = ctx.op("Where", ctx.op("Less", w, ctx.const(0.5, cst)), near_lo, near_hi)
    if "nanquantile" in node.target:
        bad = ctx.op("Less", m, ctx.const(1, ST.LONG))
    else:
        bad = ctx.op("Greater", nan, ctx.const(0, ST.LONG))
    y = ctx.op("Where", bad, ctx.const(np.nan, cst), y)
    return ctx.cast(_finish(ctx, y, a.self, a.dim, a.keepdim), cst, st)
