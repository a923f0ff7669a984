"""Lowerings that order, select or search values: ``msort``, ``kthvalue``, ``median``/``nanmedian``,
``quantile``/``nanquantile``, ``unique``/``unique_consecutive``, ``argwhere``/``nonzero_numpy``/
``nonzero_static``, ``masked_select``, ``searchsorted``, ``bucketize`` and ``isin``.

Ascending orders come from ONNX's TopK taken largest-first and reversed along the axis (the
TFLite target maps TopK of the largest values for every dtype, of the smallest only for
floats). NaN is placed after +inf as torch does: NaNs are sorted as +inf and the last
``count(NaN)`` places of each row then hold NaN, so no order relies on how a runtime compares
NaN. Equal values keep their input order (a stable sort). The index torch's selection kernels
(kthvalue, median) return among equal values is their own (torch documents none).
"""

from __future__ import annotations

import numpy as np

from ..aten import dtypes
from ..aten.args import bind
from ..aten.dtypes import ST
from ..aten.registry import lowering
from ..errors import Unsupported
from .shapes import axes_const, scalar_attr

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
    # TopK puts equal values lower index first: taken over the reversed input and reversed
    # back, equal values keep their input order (a stable sort, as torch's CPU sort)
    rev = (ctx.ints([-1]), ctx.ints([INT64_MIN]), ctx.ints([dim]), ctx.ints([-1]))
    v, i = ctx.op("TopK", ctx.op("Slice", key, *rev), n, axis=dim, largest=1, sorted=1, outputs=2)
    v, i = ctx.op("Slice", v, *rev), ctx.op("Sub", ctx.op("Sub", n, ctx.const(1, ST.LONG)), ctx.op("Slice", i, *rev))
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


def _median(ctx, ref, dim, keepdim, ignore_nan):
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
    return _median(ctx, a.self, None, False, "nanmedian" in node.target)[0]


@lowering("onnx", "aten.median.dim", "aten.nanmedian.dim")
def median_dim(ctx, node):
    """The lower median along ``dim`` and its index (see ``_median``)."""
    a = bind(node, "self", "dim", "keepdim")
    return list(_median(ctx, a.self, a.dim, a.keepdim, "nanmedian" in node.target))


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


def _nonzero_input(ctx, ref) -> str:
    """``ref`` as NonZero takes it: [1] for 0-d, int32 for int8/int16 (ONNX Runtime has no kernel)
    and uint8 (TFLite's WHERE is not known exact on it)."""
    v = ctx.t(ref)
    if ctx.dtype(ref) in (ST.CHAR, ST.SHORT, ST.BYTE):
        v = ctx.cast(v, ctx.dtype(ref), ST.INT)
    return ctx.op("Reshape", v, ctx.ints([1])) if ctx.rank(ref) == 0 else v


@lowering("onnx", "aten.argwhere.default")
def argwhere(ctx, node):
    """The coordinates [k, rank] of the non-zero values, in row-major order ([k, 0] for 0-d)."""
    x = bind(node, "self").self
    hits = ctx.op("Transpose", ctx.op("NonZero", _nonzero_input(ctx, x)), perm=[1, 0])
    if ctx.rank(x) == 0:
        return ctx.op("Slice", hits, ctx.ints([0]), ctx.ints([0]), ctx.ints([1]))
    return hits


@lowering("onnx", "aten.nonzero_numpy.default")
def nonzero_numpy(ctx, node):
    """One 1-D tensor of the non-zero values' coordinates per dim (one for a 0-d input)."""
    x = bind(node, "self").self
    hits = ctx.op("NonZero", _nonzero_input(ctx, x))
    return [ctx.op("Gather", hits, ctx.const(d, ST.LONG), axis=0) for d in range(max(ctx.rank(x), 1))]


@lowering("onnx", "aten.nonzero_static.default")
def nonzero_static(ctx, node):
    """``argwhere`` cut or padded with ``fill_value`` rows to ``size`` rows."""
    a = bind(node, "self", "size", "fill_value")
    if not isinstance(a.size, int) or a.size < 0:
        raise Unsupported(f"nonzero_static with size {a.size!r} computed at run time")
    r = ctx.rank(a.self)
    if r == 0:  # [size, 0]: no values to find
        return ctx.op("Slice", ctx.const(np.zeros((a.size, 1), np.int64), ST.LONG), ctx.ints([0]), ctx.ints([0]),
                      ctx.ints([1]))
    hits = ctx.op("Transpose", ctx.op("NonZero", _nonzero_input(ctx, a.self)), perm=[1, 0])
    fill = ctx.const(np.full((a.size, r), a.fill_value, np.int64), ST.LONG)
    return ctx.op("Slice", ctx.op("Concat", hits, fill, axis=0), ctx.ints([0]), ctx.ints([a.size]), ctx.ints([0]))


@lowering("onnx", "aten.masked_select.default")
def masked_select(ctx, node):
    """The values of ``self`` where ``mask`` (both broadcast) is true, in row-major order, 1-D."""
    a = bind(node, "self", "mask")
    x, m = ctx.t(a.self), ctx.t(a.mask, ST.BOOL)
    x = ctx.op("Expand", x, ctx.op("Shape", m))
    m = ctx.op("Expand", m, ctx.op("Shape", x))
    flat = ctx.ints([-1])
    return ctx.op("Compress", ctx.op("Reshape", x, flat), ctx.op("Reshape", m, flat), axis=0)


def _unique(ctx, ref, sort, return_inverse, return_counts):
    """(values, inverse, counts) of the flattened ``ref``: runs of equal values (of the sorted
    values for ``sort``) kept once; NaN equals nothing, so each NaN is its own value, as torch.
    ``inverse`` (shaped like ``ref``) and ``counts`` are [0] when not asked for."""
    st, cst = ctx.dtype(ref), _cst(ctx, ref)
    x, _, _ = _flat_or_dim(ctx, ref, None, cst)
    n = ctx.shape(x)
    pos = ctx.op("Range", ctx.const(0, ST.LONG), ctx.op("Squeeze", n, ctx.ints([0])), ctx.const(1, ST.LONG))
    v, perm = sort_asc(ctx, x, 1, 0, cst)[:2] if sort else (x, pos)
    prev = ctx.op("Gather", v, ctx.op("Max", ctx.op("Sub", pos, ctx.const(1, ST.LONG)), ctx.const(0, ST.LONG)), axis=0)
    keep = ctx.op("Or", ctx.op("Equal", pos, ctx.const(0, ST.LONG)), ctx.op("Not", ctx.op("Equal", v, prev)))
    values = ctx.cast(ctx.op("Compress", v, keep, axis=0), cst, st)
    none = ctx.const(np.zeros(0, np.int64), ST.LONG)
    inverse = counts = none
    if return_inverse:
        group = ctx.op("Sub", ctx.op("CumSum", ctx.cast(keep, ST.BOOL, ST.LONG), ctx.const(0, ST.LONG)),
                       ctx.const(1, ST.LONG))
        if sort:  # the group of sorted place p belongs to input place perm[p]
            group = ctx.op("ScatterElements", ctx.op("Mul", pos, ctx.const(0, ST.LONG)), perm, group, axis=0,
                           reduction="add")  # onto zeros, each place once: TFLite maps "add"
        inverse = ctx.op("Reshape", group, ctx.shape_of(ref))
    if return_counts:
        starts = ctx.op("Compress", pos, keep, axis=0)
        ends = ctx.op("Concat", ctx.op("Slice", starts, ctx.ints([1]), ctx.ints([2**63 - 1]), ctx.ints([0])), n, axis=0)
        counts = ctx.op("Sub", ends, starts)
    return [values, inverse, counts]


@lowering("onnx", "aten._unique2.default")
def unique2(ctx, node):
    """The distinct values, sorted (torch's CPU kernel sorts whatever ``sorted`` says), the index
    of each input value among them and their counts."""
    a = bind(node, "self", "sorted", "return_inverse", "return_counts")
    a.declare("sorted")  # sorted either way: what torch's CPU kernel gives for sorted=False too
    return _unique(ctx, a.self, True, a.return_inverse, a.return_counts)


@lowering("onnx", "aten.unique_consecutive.default")
def unique_consecutive(ctx, node):
    """Each run of equal consecutive values once, the run of each input value and the run lengths."""
    a = bind(node, "self", "return_inverse", "return_counts", "dim")
    if a.dim is not None:
        raise Unsupported("unique_consecutive along a dim")
    return _unique(ctx, a.self, False, a.return_inverse, a.return_counts)


def _binary_search(ctx, seq_ref, val_ref, right: bool, sorter=None) -> str:
    """torch's search kernel, step for step: per value, ``start`` and ``end`` over the last dim of
    ``seq_ref``, ``mid = start + (end - start) // 2``, go right while ``!(seq[mid] >= val)``
    (``>`` for ``right``): what torch gives for any input, NaN or unsorted ones too. A static
    length M takes bit_length(M) unrolled steps; a dynamic one an ONNX Loop."""
    from .ops_cumulative import loop_while

    st = dtypes.promote_types(ctx.dtype(seq_ref), ctx.dtype(val_ref))
    if st == ST.BOOL or not (dtypes.is_floating(st) or dtypes.is_integral(st)):
        raise Unsupported(f"searchsorted of {st.name}")
    cst = ctx.compute_type(st)
    seq, val = ctx.t(seq_ref, cst), ctx.t(val_ref, cst)
    r = ctx.rank(seq_ref)
    if r == 0:
        raise Unsupported("searchsorted in a 0-d sequence (torch raises)")
    if r > 1 and ctx.rank(val_ref) != r:
        raise Unsupported("searchsorted of values whose rank is not the sequence's (torch raises)")
    if sorter is not None:
        seq = ctx.op("GatherElements", seq, ctx.t(sorter, ST.LONG), axis=r - 1)
    m_dim = ctx.info(seq_ref).shape[-1]
    m = ctx.shape(seq, r - 1, r)  # [1]
    zero, one = ctx.const(0, ST.LONG), ctx.const(1, ST.LONG)
    start = ctx.op("ConstantOfShape", ctx.op("Shape", val), value=scalar_attr(0, ST.LONG))
    end = ctx.op("Add", start, m)
    last = ctx.op("Max", ctx.op("Sub", m, one), zero)
    vrank = max(ctx.rank(val_ref), 1)
    if ctx.rank(val_ref) == 0:
        val, start, end = (ctx.op("Reshape", t, ctx.ints([1])) for t in (val, start, end))

    def step(c, start, end):
        active = c.op("Less", start, end)
        mid = c.op("Add", start, c.op("Div", c.op("Sub", end, start), c.const(2, ST.LONG)))
        at = c.op("Min", mid, last)
        g = c.op("Gather", seq, at, axis=0) if r == 1 else c.op("GatherElements", seq, at, axis=r - 1)
        stop = c.op("Greater" if right else "GreaterOrEqual", g, val)
        up = c.op("And", active, c.op("Not", stop))
        down = c.op("And", active, stop)
        return [c.op("Where", up, c.op("Add", mid, c.const(1, ST.LONG)), start), c.op("Where", down, mid, end)]

    if isinstance(m_dim, int):
        for _ in range(m_dim.bit_length()):
            start, end = step(ctx, start, end)
    else:
        width = ctx.op("Squeeze", m, ctx.ints([0]))

        def body(c, w, start, end):
            w2 = c.op("Div", w, c.const(2, ST.LONG))
            return c.op("Greater", w2, c.const(0, ST.LONG)), [w2, *step(c, start, end)]

        first = ctx.op("Greater", width, zero)
        start = loop_while(ctx, first, [(width, ST.LONG, 0), (start, ST.LONG, vrank), (end, ST.LONG, vrank)], body)[1]
    return ctx.op("Reshape", start, ctx.ints([])) if ctx.rank(val_ref) == 0 else start


@lowering("onnx", "aten.searchsorted.Tensor")
def searchsorted(ctx, node):
    """For each value, the place in ``sorted_sequence``'s last dim (ordered by ``sorter``) it
    would be inserted at: before equal values, after them for ``right``/``side="right"``."""
    a = bind(node, "sorted_sequence", "self", "out_int32", "right", "side", "sorter")
    if a.side not in (None, "left", "right"):
        raise Unsupported(f"searchsorted side={a.side!r}")
    right = a.right or a.side == "right"
    r = _binary_search(ctx, a.sorted_sequence, a.self, right, a.sorter)
    return ctx.cast(r, ST.LONG, ST.INT) if a.out_int32 else r


@lowering("onnx", "aten.bucketize.Tensor")
def bucketize(ctx, node):
    """The bucket of each value among the 1-D ``boundaries``: ``searchsorted(boundaries, self)``."""
    a = bind(node, "self", "boundaries", "out_int32", "right")
    if ctx.rank(a.boundaries) != 1:
        raise Unsupported("bucketize with boundaries that are not 1-D (torch raises)")
    r = _binary_search(ctx, a.boundaries, a.self, a.right)
    return ctx.cast(r, ST.LONG, ST.INT) if a.out_int32 else r


@lowering("onnx", "aten.isin.Tensor_Tensor", "aten.isin.Tensor_Scalar")
def isin(ctx, node):
    """Whether each element equals one of ``test_elements`` (NaN equals nothing); ``invert``: not."""
    a = bind(node, "elements")
    a.declare("assume_unique")  # a hint for torch's algorithm: the answer is the same
    est = ctx.dtype(a.elements)
    if "Tensor_Scalar" in node.target:
        t = a.test_element
        if isinstance(t, bool) or not isinstance(t, (int, float)) or (
                isinstance(t, float) and not dtypes.is_floating(est)):
            raise Unsupported(f"isin of {est.name} values and the scalar {t!r}")
        st = est
    else:
        t = a.test_elements
        st = dtypes.promote_types(est, ctx.dtype(t))
    cst = ctx.compute_type(st)
    x = ctx.op("Unsqueeze", ctx.t(a.elements, cst), ctx.ints([-1]))
    tests = ctx.op("Reshape", ctx.t(t, cst), ctx.ints([-1]))
    hits = ctx.cast(ctx.op("Equal", x, tests), ST.BOOL, ST.LONG)
    found = ctx.op("Greater", ctx.op("ReduceSum", hits, ctx.ints([-1]), keepdims=0), ctx.const(0, ST.LONG))
    return ctx.op("Not", found) if a.invert else found


@lowering("onnx", "aten.mode.default")
def mode(ctx, node):
    """The most frequent value along ``dim`` (the smallest of equally frequent ones; each NaN
    counts once, NaN only for a row of NaNs) and the index of its last occurrence (of the first
    NaN), as torch's CPU kernel. Counts from an equality table [.., n, n, ..]."""
    a = bind(node, "self", "dim", "keepdim")
    st, cst = ctx.dtype(a.self), _cst(ctx, a.self)
    x, r, d = _flat_or_dim(ctx, a.self, a.dim, cst)
    ax = ctx.ints([d])
    eq = ctx.op("Equal", ctx.op("Unsqueeze", x, ctx.ints([d + 1])), ctx.op("Unsqueeze", x, ax))
    count = ctx.op("Max", ctx.op("ReduceSum", ctx.cast(eq, ST.BOOL, ST.LONG), ctx.ints([d + 1]), keepdims=0),
                   ctx.const(1, ST.LONG))  # a NaN equals nothing, itself included
    best = ctx.op("Equal", count, ctx.op("ReduceMax", count, ax, keepdims=1))
    n = ctx.shape(x, d, d + 1)
    pos = iota(ctx, n, r, d)
    if dtypes.is_floating(cst):
        isnan = ctx.op("IsNaN", x)
        best = ctx.op("And", best, ctx.op("Not", isnan))
        fill = ctx.const(np.inf, cst)
    else:
        fill = ctx.op("ReduceMax", x, ax, keepdims=1)  # no extreme int64 constant (TFLite computes int64 in int32)
    v = ctx.op("ReduceMin", ctx.op("Where", best, x, fill), ax, keepdims=1)
    at = ctx.op("Equal", x, v)
    idx = ctx.op("ReduceMax", ctx.op("Where", at, pos, ctx.const(-1, ST.LONG)), ax, keepdims=1)
    if dtypes.is_floating(cst):
        none = ctx.op("Not", ctx.cast(ctx.op("ReduceMax", ctx.cast(best, ST.BOOL, ST.INT), ax, keepdims=1), ST.INT,
                                      ST.BOOL))
        first_nan = ctx.op("ArgMax", ctx.cast(isnan, ST.BOOL, ST.INT), axis=d, keepdims=1, select_last_index=0)
        v = ctx.op("Where", none, ctx.const(np.nan, cst), v)
        idx = ctx.op("Where", none, first_nan, idx)
    return [ctx.cast(_finish(ctx, v, a.self, a.dim, a.keepdim), cst, st), _finish(ctx, idx, a.self, a.dim, a.keepdim)]
