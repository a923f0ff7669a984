"""Scatters: index_add, index_copy (rows along one dim, ScatterND), scatter_reduce with every
reduction torch has (sum, prod, amax, amin, mean) with or without ``self``, index_put (also under
a boolean mask) and the masked indexing ``_unsafe_masked_index``/``_unsafe_masked_index_put_accumulate``.

``index_add``/``index_copy`` move ``dim`` first and scatter whole rows (a 0-d tensor as one
element along dim 0). Booleans are computed as int32 0/1 and cast back (nonzero is True).
``scatter_reduce(include_self=False)`` first puts the reduction's identity where anything is
scattered (positions counted by a scatter-add of ones), ``mean`` divides by that count (plus
one for ``self``; floor division for integers, as torch). TFLite's SCATTER_ND adds, so there
``sum``/``mean``/``index_add`` convert and the others are refused naming the reduction (a
one-row ``index_copy``, a KV cache's decode step, converts).
"""

from __future__ import annotations

import numpy as np

from ..aten import dtypes
from ..aten.args import bind
from ..aten.dtypes import ST
from ..aten.registry import lowering
from ..errors import Unsupported
from .ops_index import _index_plan
from .shapes import axes_const, one_d, zero_d


def _io(ctx):
    """The result's dtype and the one computed in: booleans as int32 0/1 (a sum of them cast back
    is an OR, a product an AND, as torch's bool arithmetic)."""
    out = ctx.out_info().dtype
    cst = ctx.compute_type(out)
    return out, ST.INT if cst == ST.BOOL else cst


def _to_front(ctx, name: str, dim: int, rank: int) -> str:
    return name if dim == 0 else ctx.op("Transpose", name, perm=[dim] + [i for i in range(rank) if i != dim])


def _from_front(ctx, name: str, dim: int, rank: int) -> str:
    if dim == 0:
        return name
    perm = [dim] + [i for i in range(rank) if i != dim]
    return ctx.op("Transpose", name, perm=[perm.index(i) for i in range(rank)])


def _rows(ctx, node, reduction: str | None, alpha=1):
    a = bind(node, "self", "dim", "index", "source")
    out, cst = _io(ctx)
    rank = ctx.rank(a.self)
    if ctx.rank(a.source) != rank:
        raise Unsupported(f"{node.target} with a source of rank {ctx.rank(a.source)} into rank {rank}")
    if rank == 0 and a.dim not in (0, -1):
        raise Unsupported(f"{node.target} of a 0-d tensor along dim {a.dim}")
    # a 0-d self and source: one element along dim 0 (torch's index then holds one 0)
    x, src = one_d(ctx, ctx.t(a.self, cst), a.self), one_d(ctx, ctx.t(a.source, cst), a.source)
    dim = a.dim % max(rank, 1)
    r1 = max(rank, 1)
    idx = ctx.op("Reshape", ctx.t(a.index, ST.LONG), ctx.ints([-1, 1]))  # torch refuses negative ones
    src = _to_front(ctx, src, dim, r1)
    if alpha != 1:
        src = ctx.op("Mul", src, ctx.t(alpha, cst))
    r = ctx.op("ScatterND", _to_front(ctx, x, dim, r1), idx, src, reduction=reduction)
    return ctx.cast(zero_d(ctx, _from_front(ctx, r, dim, r1), a.self), cst, out)


@lowering("onnx", "aten.index_add.default")
def index_add(ctx, node):
    """``self`` with ``alpha * source``'s rows added at ``index`` along ``dim`` (repeats add up)."""
    a = bind(node, "self", "dim", "index", "source")
    return _rows(ctx, node, "add", a.alpha)


@lowering("onnx", "aten.index_copy.default")
def index_copy(ctx, node):
    """``self`` with ``source``'s rows written at ``index`` along ``dim``."""
    return _rows(ctx, node, None)


_SCATTER_REDUCTIONS = {"sum": "add", "mean": "add", "prod": "mul", "amax": "max", "amin": "min"}


def _identity(reduce: str, st: ST):
    if reduce in ("sum", "mean"):
        return 0
    if reduce == "prod":
        return 1
    if dtypes.is_floating(st):
        return -np.inf if reduce == "amax" else np.inf
    info = np.iinfo(dtypes.to_numpy(st))
    return int(info.min) if reduce == "amax" else int(info.max)


@lowering("onnx", "aten.scatter_reduce.two")
def scatter_reduce(ctx, node):
    a = bind(node, "self", "dim", "index", "src", "reduce")
    red = _SCATTER_REDUCTIONS.get(a.reduce)
    if red is None:
        raise Unsupported(f"scatter_reduce {a.reduce!r}")
    out, cst = _io(ctx)
    if out == ST.BOOL and a.reduce == "mean":
        raise Unsupported("scatter_reduce 'mean' of bool (torch has no kernel for it)")
    rank = max(ctx.rank(a.self), 1)
    axis = a.dim % rank
    x = one_d(ctx, ctx.t(a.self, cst), a.self)  # 0-d: one element along dim 0 (ScatterElements needs rank >= 1)
    index = one_d(ctx, ctx.t(a.index, ST.LONG), a.index)
    src = one_d(ctx, ctx.t(a.src, cst), a.src)
    if ctx.info(a.src).shape != ctx.info(a.index).shape:  # torch reads the first index.shape elements
        src = ctx.op("Slice", src, ctx.ints([0] * ctx.rank(a.index)), ctx.shape_of(a.index))
    if out == ST.BOOL:
        return ctx.cast(zero_d(ctx, _bool_reduce(ctx, a, x, index, src, axis), a.self), cst, out)
    counts = None
    if not a.include_self or a.reduce == "mean":
        ones = ctx.op("Expand", ctx.const(1, cst), ctx.shape(index))
        counts = ctx.op("ScatterElements", ctx.op("Mul", x, ctx.const(0, cst)), index, ones, axis=axis, reduction="add")
    base = x
    if not a.include_self:
        touched = ctx.op("Greater", counts, ctx.const(0, cst))
        base = ctx.op("Where", touched, ctx.const(_identity(a.reduce, cst), cst), x)
    r = ctx.op("ScatterElements", base, index, src, axis=axis, reduction=red)
    if a.reduce == "mean":
        r = _mean(ctx, r, counts if not a.include_self else ctx.op("Add", counts, ctx.const(1, cst)), cst)
    return ctx.cast(zero_d(ctx, r, a.self), cst, out)


def _bool_reduce(ctx, a, x: str, index: str, src: str, axis: int) -> str:
    """scatter_reduce of booleans (int32 0/1 here): sum and amax are an OR of the sources, prod and
    amin an AND, each from a scatter-add count (of True sources, of False ones), which TFLite's
    SCATTER_ND computes exactly; ``self`` joins the OR/AND with include_self, else stays where
    nothing lands."""
    either = a.reduce in ("sum", "amax")
    one = ctx.const(1, ST.INT)
    zeros = ctx.op("Mul", x, ctx.const(0, ST.INT))
    hits = ctx.op("ScatterElements", zeros, index, src if either else ctx.op("Sub", one, src), axis=axis,
                  reduction="add")
    got = ctx.cast(ctx.op("Greater" if either else "Equal", hits, ctx.const(0, ST.INT)), ST.BOOL, ST.INT)
    if a.include_self:
        return ctx.op("Max" if either else "Min", got, x)
    counts = ctx.op("ScatterElements", zeros, index, ctx.op("Expand", one, ctx.shape(index)), axis=axis,
                    reduction="add")
    return ctx.op("Where", ctx.op("Greater", counts, ctx.const(0, ST.INT)), got, x)


def _mean(ctx, total: str, count: str, cst) -> str:
    """``total / count`` where ``count`` > 0 (else ``total``: nothing was scattered there)."""
    some = ctx.op("Greater", count, ctx.const(0, cst))
    safe = ctx.op("Max", count, ctx.const(1, cst))
    if dtypes.is_floating(cst):
        q = ctx.op("Div", total, safe)
    else:  # torch floors an integer mean
        q = ctx.cast(ctx.op("Floor", ctx.op("Div", ctx.cast(total, cst, ST.DOUBLE), ctx.cast(safe, cst, ST.DOUBLE))),
                     ST.DOUBLE, cst)
    return ctx.op("Where", some, q, total)



# ------------------------------------------------------------------- index_put, masked indexing


def _put(ctx, x, idx: list, values: str, accumulate: bool, cst: ST, prep=None) -> str:
    """``x`` (a program value) with ``values`` (ONNX, in ``cst``) written or added at the integer
    indices ``idx`` (program values or None per axis), in ``cst``: ScatterND on GatherND's layout."""
    r = ctx.rank(x)
    present = [i for i, t in enumerate(idx) if t is not None]
    order = present + [i for i in range(r) if i not in present]
    xt, stacked, perm = _index_plan(ctx, x, idx, prep)
    xt = ctx.cast(xt, ctx.dtype(x), cst)
    # values broadcast to torch's indexing-result layout, then to GatherND's [idx..., others...]
    res_shape = ctx.op("Shape", ctx.op("GatherND", xt, stacked))
    if perm:
        inv = [perm.index(i) for i in range(len(perm))]
        torch_shape = ctx.op("Gather", res_shape, ctx.const(np.asarray(perm, np.int64), ST.LONG))
        values = ctx.op("Transpose", ctx.op("Expand", values, torch_shape), perm=inv)
    else:
        values = ctx.op("Expand", values, res_shape)
    y = ctx.op("ScatterND", xt, stacked, values, reduction="add" if accumulate else None)
    return y if order == list(range(r)) else ctx.op("Transpose", y, perm=[order.index(i) for i in range(r)])


@lowering("onnx", "aten.index_put.default", "aten.index_put_.default", "aten._unsafe_index_put.default")
def index_put(ctx, node):
    """``self`` with ``values`` written (or added, ``accumulate``) at the indexed positions."""
    a = bind(node, "self", "indices", "values")
    idx = list(a.indices)
    out = ctx.out_info()
    present = [i for i, x in enumerate(idx) if x is not None]
    if len(present) == 1 and present[0] == 0 and ctx.dtype(idx[0]) == ST.BOOL and not a.accumulate \
            and ctx.rank(idx[0]) == out.rank:
        return ctx.op("Where", ctx.t(idx[0]), ctx.t(a.values, out.dtype), ctx.t(a.self))
    if len(present) == 1 and ctx.dtype(idx[present[0]]) == ST.BOOL:
        return _put_under_mask(ctx, a.self, present[0], idx[present[0]], a.values, a.accumulate)
    if any(ctx.dtype(idx[i]) == ST.BOOL for i in present):
        raise Unsupported("index_put with a boolean mask among several indices")
    cst = ST.INT if out.dtype == ST.BOOL and a.accumulate else out.dtype  # a bool sum is an OR
    return ctx.cast(_put(ctx, a.self, idx, ctx.t(a.values, cst), a.accumulate, cst), cst, out.dtype)


def _put_under_mask(ctx, x, p: int, mask, values, accumulate) -> str:
    """``x[:, ..., mask] = values`` (mask over axes p .. p+k-1) where ``values`` broadcast to
    the selection without its count axis (or with it of size 1): a Where over the mask, every
    selected position written (or added to) once. Values that run along the count axis need the
    mask's positions in order: refused."""
    out = ctx.out_info()
    r, k, vr = out.rank, ctx.rank(mask), ctx.rank(values)
    post = r - p - k
    cst = ST.INT if out.dtype == ST.BOOL else ctx.compute_type(out.dtype)  # no bool Where in ONNX Runtime
    v = ctx.t(values, cst)
    if vr > post:
        count_axis = vr - post - 1
        if ctx.info(values).shape[count_axis] != 1:
            raise Unsupported("index_put under a boolean mask of values that run along the selection")
        if k != 1:
            v = ctx.op("Unsqueeze", v, axes_const(ctx, list(range(count_axis, count_axis + k - 1))))
    m = ctx.t(mask)
    if post:
        m = ctx.op("Unsqueeze", m, axes_const(ctx, list(range(k, k + post))))
    xs = ctx.t(x, cst)
    if accumulate:
        y = ctx.op("Add", xs, ctx.op("Where", m, v, ctx.const(0, cst)))
        if out.dtype == ST.BOOL:
            y = ctx.cast(ctx.op("Greater", y, ctx.const(0, cst)), ST.BOOL, cst)
    else:
        y = ctx.op("Where", m, v, xs)
    return ctx.cast(y, cst, out.dtype)


def _clamp_into(ctx, x):
    """``prep`` for ``_index_plan``: an index clamped to [-size, size - 1] of its axis of ``x``, then
    counted from 0 (torch's ``_unsafe_masked_index*`` clamp, so masked-off positions read in bounds)."""
    def prep(axis, t):
        size = ctx.dim(x, axis)
        t = ctx.op("Min", ctx.op("Max", t, ctx.op("Neg", size)), ctx.op("Sub", size, ctx.ints([1])))
        return ctx.op("Where", ctx.op("Less", t, ctx.const(0, ST.LONG)), ctx.op("Add", t, size), t)

    return prep


def _masked_indices(ctx, node, x, indices) -> list:
    idx = list(indices)
    if any(t is not None and ctx.dtype(t) not in (ST.LONG, ST.INT) for t in idx):
        raise Unsupported(f"{node.target} with indices that are not int64/int32")
    if ctx.info(x).numel() == 0:  # torch fills the result; there is no element to clamp into
        raise Unsupported(f"{node.target} of an empty tensor")
    return idx


@lowering("onnx", "aten._unsafe_masked_index.default")
def unsafe_masked_index(ctx, node):
    """``where(mask, self[indices], fill)``, the indices clamped into range first (where ``mask`` is
    False they may point anywhere)."""
    a = bind(node, "self", "mask", "indices", "fill")
    out = ctx.out_info()
    idx = _masked_indices(ctx, node, a.self, a.indices)
    cst = ST.INT if out.dtype == ST.BOOL else out.dtype  # no bool Where in ONNX Runtime
    present = [i for i, t in enumerate(idx) if t is not None]
    prep = _clamp_into(ctx, a.self)
    xs = ctx.t(a.self, cst)
    if len(present) == 1:
        g = ctx.op("Gather", xs, prep(present[0], ctx.t(idx[present[0]], ST.LONG)), axis=present[0])
    else:
        xt, stacked, perm = _index_plan(ctx, a.self, idx, prep)
        g = ctx.op("GatherND", ctx.cast(xt, ctx.dtype(a.self), cst), stacked)
        g = ctx.op("Transpose", g, perm=perm) if perm else g
    y = ctx.op("Where", ctx.t(a.mask), g, ctx.t(a.fill, cst))
    return ctx.cast(ctx.op("Expand", y, ctx.ints(list(out.shape))) if out.is_static else y, cst, out.dtype)


@lowering("onnx", "aten._unsafe_masked_index_put_accumulate.default")
def unsafe_masked_index_put_accumulate(ctx, node):
    """``index_put(self, indices, where(mask, values, 0), accumulate=True)``, the indices clamped
    into range first (a masked-off value adds 0 wherever it points)."""
    a = bind(node, "self", "mask", "indices", "values")
    out = ctx.out_info()
    idx = _masked_indices(ctx, node, a.self, a.indices)
    cst = ST.INT if out.dtype == ST.BOOL else out.dtype  # a bool sum is an OR
    vals = ctx.op("Where", ctx.t(a.mask), ctx.t(a.values, cst), ctx.const(0, cst))
    y = _put(ctx, a.self, idx, vals, True, cst, _clamp_into(ctx, a.self))
    if out.dtype == ST.BOOL:
        return ctx.cast(ctx.op("Greater", y, ctx.const(0, cst)), ST.BOOL, ST.BOOL)
    return y
