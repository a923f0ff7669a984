"""Reductions, softmax and friends. Opset >= 18: every Reduce* takes axes as an input."""

from __future__ import annotations

import math

import numpy as np

from ..aten import dtypes
from ..aten.args import bind
from ..aten.dtypes import ST
from ..aten.registry import lowering
from ..errors import Unsupported
from .shapes import axes_const, one_d, zero_d


def _axes(ctx, x, dim):
    r = ctx.rank(x)
    if dim is None or dim == [] or dim == ():
        return list(range(r))
    if isinstance(dim, int):
        dim = [dim]
    return [d % max(r, 1) for d in dim]


def reduce(ctx, op, x, dims, keepdim, cst):
    name = ctx.t(x, cst)
    if ctx.rank(x) == 0:
        return name
    if op in ("ReduceMax", "ReduceMin"):
        return extreme(ctx, op, name, axes_const(ctx, dims), int(bool(keepdim)), cst)
    return ctx.op(op, name, axes_const(ctx, dims), keepdims=int(bool(keepdim)))


def _sum_like(op):
    def lower(ctx, node):
        a = bind(node, "self", dim=None, keepdim=False)  # the .default overloads have no dim/keepdim
        a.declare("dtype")  # the output's dtype, computed in (wider for small integers)
        out = ctx.out_info().dtype
        cst = ctx.compute_type(out)
        if cst == ST.BOOL or (op == "ReduceSum" and cst == ST.INT and out != ST.INT):
            cst = ST.LONG
        return ctx.cast(reduce(ctx, op, a.self, _axes(ctx, a.self, a.dim), a.keepdim, cst), cst, out)

    return lower


lowering("onnx", "aten.sum.default", "aten.sum.dim_IntList")(_sum_like("ReduceSum"))
lowering("onnx", "aten.mean.default", "aten.mean.dim")(_sum_like("ReduceMean"))
lowering("onnx", "aten.prod.default", "aten.prod.dim_int")(_sum_like("ReduceProd"))


def _minmax(op):
    def lower(ctx, node):
        a = bind(node, "self", dim=[], keepdim=False)  # max/min.default have no dim/keepdim
        out = ctx.out_info().dtype
        cst = ctx.compute_type(out)
        if cst == ST.BOOL:
            cst = ST.INT
        return ctx.cast(reduce(ctx, op, a.self, _axes(ctx, a.self, a.dim), a.keepdim, cst), cst, out)

    return lower


lowering("onnx", "aten.amax.default", "aten.max.default")(_minmax("ReduceMax"))
lowering("onnx", "aten.amin.default", "aten.min.default")(_minmax("ReduceMin"))


@lowering("onnx", "aten.max.dim", "aten.min.dim")
def max_dim(ctx, node):
    a = bind(node, "self", "dim")
    is_max = ".max." in node.target
    st = ctx.dtype(a.self)
    cst = ctx.compute_type(st) if st != ST.BOOL else ST.INT
    dim = a.dim % max(ctx.rank(a.self), 1)
    x = one_d(ctx, ctx.t(a.self, cst), a.self)
    v = extreme(ctx, "ReduceMax" if is_max else "ReduceMin", x, axes_const(ctx, [dim]), int(a.keepdim), cst)
    i = arg_extreme(ctx, "ArgMax" if is_max else "ArgMin", x, dim, int(a.keepdim), cst)
    return [ctx.cast(zero_d(ctx, v, a.self), cst, st), zero_d(ctx, i, a.self)]


@lowering("onnx", "aten.argmax.default", "aten.argmin.default")
def argmax(ctx, node):
    a = bind(node, "self")
    st = ctx.dtype(a.self)
    cst = ctx.compute_type(st) if st != ST.BOOL else ST.INT
    x = ctx.t(a.self, cst)
    op = "ArgMax" if "argmax" in node.target else "ArgMin"
    if a.dim is None:
        x = ctx.op("Reshape", x, ctx.ints([-1]))
        r = arg_extreme(ctx, op, x, 0, 0, cst)
        if a.keepdim:
            r = ctx.op("Reshape", r, ctx.ints([1] * ctx.rank(a.self)))
        return r
    r = arg_extreme(ctx, op, one_d(ctx, x, a.self), a.dim % max(ctx.rank(a.self), 1), int(a.keepdim), cst)
    return zero_d(ctx, r, a.self)


@lowering("onnx", "aten.any.default", "aten.any.dim", "aten.any.dims", "aten.all.default", "aten.all.dim",
          "aten.all.dims")
def any_all(ctx, node):
    a = bind(node, "self", dim=None, keepdim=False)  # any/all.default have no dim/keepdim
    dims = a.get("dim", a.get("dims"))
    x = ctx.t(a.self, ST.BOOL)
    x = ctx.cast(x, ST.BOOL, ST.INT)
    r = reduce_named(ctx, "ReduceMax" if ".any." in node.target else "ReduceMin", x, a.self, dims, a.keepdim)
    return ctx.cast(r, ST.INT, ST.BOOL)


def reduce_named(ctx, op, name, ref, dims, keepdim):
    if ctx.rank(ref) == 0:
        return name
    return ctx.op(op, name, axes_const(ctx, _axes(ctx, ref, dims)), keepdims=int(bool(keepdim)))


def _nan_in(ctx, x: str, cst: ST, axes, keepdims: int) -> str:
    """Whether a NaN is among the values each reduction of ``x`` over ``axes`` reads (bool)."""
    nan = ctx.cast(ctx.op("IsNaN", x), ST.BOOL, cst)
    return ctx.op("Greater", ctx.op("ReduceMax", nan, axes, keepdims=keepdims), ctx.const(0, cst))


def extreme(ctx, op: str, x: str, axes, keepdims: int, cst: ST) -> str:
    """``ReduceMax``/``ReduceMin`` of ``x`` over ``axes``, NaN where a NaN is reduced, as torch's
    max/min/amax/amin: ONNX Runtime's ReduceMax/ReduceMin skip a NaN or keep it depending on where
    it stands (``[1, nan, 2]`` gives 2). ``cst`` is ``x``'s dtype; integers hold no NaN."""
    r = ctx.op(op, x, axes, keepdims=keepdims)
    if not dtypes.is_floating(cst):
        return r
    return ctx.op("Where", _nan_in(ctx, x, cst, axes, keepdims), ctx.const(np.nan, cst), r)


def arg_extreme(ctx, op: str, x: str, axis: int, keepdims: int, cst: ST) -> str:
    """``ArgMax``/``ArgMin`` of ``x`` along ``axis`` (the first of equal values), the first NaN's
    index where the slice holds one, as torch's argmax/argmin and max/min.dim."""
    i = ctx.op(op, x, axis=axis, keepdims=keepdims, select_last_index=0)
    if not dtypes.is_floating(cst):
        return i
    nan = ctx.cast(ctx.op("IsNaN", x), ST.BOOL, ST.INT)
    first_nan = ctx.op("ArgMax", nan, axis=axis, keepdims=keepdims, select_last_index=0)
    return ctx.op("Where", _nan_in(ctx, x, cst, axes_const(ctx, [axis]), keepdims), first_nan, i)


@lowering("onnx", "aten.var.correction", "aten.var.dim", "aten.std.correction", "aten.std.dim",
          "aten.var_mean.correction", "aten.var_mean.dim", "aten.std_mean.correction", "aten.std_mean.dim",
          "aten.var.default", "aten.std.default", "aten.var_mean.default", "aten.std_mean.default")
def var(ctx, node):
    """Variance (std: its root; *_mean: and the mean) over ``dim`` (all dims when None) divided by
    ``max(n - correction, 0)``: NaN for a count at or below the correction, as torch."""
    # .dim has no correction, .correction no unbiased, .default neither dim nor keepdim
    a = bind(node, "self", correction=None, unbiased=True, dim=None, keepdim=False)
    out = ctx.out_info().dtype
    cst = ctx.compute_type(out)
    corr = a.correction if a.correction is not None else (1 if a.unbiased else 0)
    x = ctx.t(a.self, cst)
    if ctx.rank(a.self) == 0:  # one element: (x - x)^2 / max(1 - correction, 0) (NaN for an infinity), mean x
        if not all(d in (0, -1) for d in ([] if a.dim is None else [a.dim] if isinstance(a.dim, int) else a.dim)):
            raise Unsupported(f"variance of a 0-d tensor over dims {a.dim}")
        d = ctx.op("Sub", x, x)
        v = ctx.op("Div", ctx.op("Mul", d, d), ctx.const(max(1 - corr, 0), cst))
        if ".std." in node.target or ".std_mean." in node.target:
            v = ctx.op("Sqrt", v)
        if "_mean." in node.target:
            return [ctx.cast(v, cst, out), ctx.cast(ctx.op("Identity", x), cst, out)]
        return ctx.cast(v, cst, out)
    dims = _axes(ctx, a.self, a.dim)
    ax = axes_const(ctx, dims)
    info = ctx.info(a.self)
    n = 1
    dyn = False
    for i in dims:
        if isinstance(info.shape[i], int):
            n *= info.shape[i]
        else:
            dyn = True
    if dyn:
        cnt = ctx.cast(ctx.op("ReduceProd", ctx.op("Gather", ctx.shape(x), axes_const(ctx, dims)), keepdims=0),
                       ST.LONG, cst)
        denom = ctx.op("Max", ctx.op("Sub", cnt, ctx.const(corr, cst)), ctx.const(0, cst))  # corr may be a float
    else:
        cnt = ctx.const(n, cst)
        denom = ctx.const(max(n - corr, 0), cst)
    mean = ctx.op("Div", ctx.op("ReduceSum", x, ax, keepdims=1), cnt)  # NaN for no values (ReduceMean gives 0)
    d = ctx.op("Sub", x, mean)
    ss = ctx.op("ReduceSum", ctx.op("Mul", d, d), ax, keepdims=int(a.keepdim))
    v = ctx.op("Div", ss, denom)
    if ".std." in node.target or ".std_mean." in node.target:
        v = ctx.op("Sqrt", v)
    if "_mean." in node.target:
        m = mean if a.keepdim else ctx.op("Squeeze", mean, ax)
        return [ctx.cast(v, cst, out), ctx.cast(m, cst, out)]
    return ctx.cast(v, cst, out)


@lowering("onnx", "aten.logsumexp.default")
def logsumexp(ctx, node):
    a = bind(node, "self", "dim")
    out = ctx.out_info().dtype
    cst = ctx.compute_type(out)
    return ctx.cast(reduce(ctx, "ReduceLogSumExp", a.self, _axes(ctx, a.self, a.dim), a.keepdim, cst), cst, out)


@lowering("onnx", "aten.linalg_vector_norm.default", "aten.norm.ScalarOpt_dim")
def vector_norm(ctx, node):
    """``(sum |x|^p)^(1/p)`` over ``dim``: L1/L2 as ONNX's reductions, inf/-inf as the max/min of
    ``|x|``, 0 as the count of non-zeros, any other order (negative ones too) by its formula.
    Computed in the output's dtype (``dtype`` casts the input to it first, as torch does)."""
    a = bind(node, "self", ord=2, dtype=None, p=None)  # norm has p, linalg_vector_norm ord and dtype
    a.declare("dtype")  # the output's dtype, computed in
    p = a.p if a.p is not None else a.ord
    if not isinstance(p, (int, float)) or isinstance(p, bool):
        raise Unsupported(f"vector norm of order {p!r} computed at run time")
    out = ctx.out_info().dtype
    cst = ctx.compute_type(out)
    x = ctx.op("Abs", ctx.t(a.self, cst))
    op = {1: "ReduceL1", 2: "ReduceL2", math.inf: "ReduceMax", -math.inf: "ReduceMin"}.get(p)
    if op in ("ReduceMax", "ReduceMin") and ctx.rank(a.self):
        axes = axes_const(ctx, _axes(ctx, a.self, a.dim))
        return ctx.cast(extreme(ctx, op, x, axes, int(bool(a.keepdim)), cst), cst, out)
    if op is not None:
        return ctx.cast(reduce_named(ctx, op, x, a.self, a.dim, a.keepdim), cst, out)
    if p == 0:
        nz = ctx.cast(ctx.op("Not", ctx.op("Equal", x, ctx.const(0, cst))), ST.BOOL, cst)
        return ctx.cast(reduce_named(ctx, "ReduceSum", nz, a.self, a.dim, a.keepdim), cst, out)
    s = reduce_named(ctx, "ReduceSum", ctx.op("Pow", x, ctx.const(p, cst)), a.self, a.dim, a.keepdim)
    return ctx.cast(ctx.op("Pow", s, ctx.const(1.0 / p, cst)), cst, out)


def _softmax(op):
    def lower(ctx, node):
        a = bind(node, "self", "dim", half_to_float=False, dtype=None)  # _softmax or softmax.int only
        a.declare("half_to_float", "dtype")  # the output's dtype, computed in
        out = ctx.out_info().dtype
        cst = ctx.compute_type(out)
        if not dtypes.is_floating(cst):
            cst = ST.FLOAT
        dim = a.dim % max(ctx.rank(a.self), 1)
        r = ctx.op(op, one_d(ctx, ctx.t(a.self, cst), a.self), axis=dim)
        return ctx.cast(zero_d(ctx, r, a.self), cst, out)

    return lower


lowering("onnx", "aten._softmax.default", "aten.softmax.int")(_softmax("Softmax"))


@lowering("onnx", "aten._safe_softmax.default")
def safe_softmax(ctx, node):
    """Softmax whose rows that are all -inf give 0 rather than NaN (masked attention rows)."""
    a = bind(node, "self", "dim")
    out = ctx.out_info().dtype
    cst = ctx.compute_type(out)
    dim = a.dim % max(ctx.rank(a.self), 1)
    x = one_d(ctx, ctx.t(a.self, cst), a.self)
    sm = ctx.op("Softmax", x, axis=dim)
    dead = ctx.op("Equal", ctx.op("ReduceMax", x, axes_const(ctx, [dim]), keepdims=1), ctx.const(-np.inf, cst))
    return ctx.cast(zero_d(ctx, ctx.op("Where", dead, ctx.const(0, cst), sm), a.self), cst, out)
lowering("onnx", "aten._log_softmax.default", "aten.log_softmax.int")(_softmax("LogSoftmax"))


@lowering("onnx", "aten.nansum.default")
def nansum(ctx, node):
    """``sum`` over ``dim`` (all dims when None) with NaNs counted as zero."""
    a = bind(node, "self", "dim", "keepdim")
    a.declare("dtype")  # the output's dtype, computed in
    out = ctx.out_info().dtype
    cst = ctx.compute_type(out)
    if cst == ST.BOOL or (cst == ST.INT and out != ST.INT):
        cst = ST.LONG
    x = ctx.t(a.self, cst)
    if dtypes.is_floating(cst):
        x = ctx.op("Where", ctx.op("IsNaN", x), ctx.const(0, cst), x)
    return ctx.cast(reduce_named(ctx, "ReduceSum", x, a.self, a.dim, a.keepdim), cst, out)


@lowering("onnx", "aten.nanmean.default")
def nanmean(ctx, node):
    """The mean over ``dim`` of the values that are not NaN (NaN where there are none)."""
    a = bind(node, "self", "dim", "keepdim")
    a.declare("dtype")  # the output's dtype, computed in
    out = ctx.out_info().dtype
    cst = ctx.compute_type(out)
    if not dtypes.is_floating(cst):
        raise Unsupported(f"nanmean of {out.name} (torch wants a float)")
    x = ctx.t(a.self, cst)
    isnan = ctx.op("IsNaN", x)
    s = reduce_named(ctx, "ReduceSum", ctx.op("Where", isnan, ctx.const(0, cst), x), a.self, a.dim, a.keepdim)
    n = reduce_named(ctx, "ReduceSum", ctx.cast(ctx.op("Not", isnan), ST.BOOL, cst), a.self, a.dim, a.keepdim)
    return ctx.cast(ctx.op("Div", s, n), cst, out)


@lowering("onnx", "aten.count_nonzero.default", "aten.count_nonzero.dim_IntList")
def count_nonzero(ctx, node):
    """The number of values that are not zero (NaN counts) over ``dim`` (all dims when None), int64."""
    a = bind(node, "self", "dim")
    st = ctx.dtype(a.self)
    x = ctx.t(a.self)
    nz = x if st == ST.BOOL else ctx.op("Not", ctx.op("Equal", ctx.t(a.self, ctx.compute_type(st)),
                                                      ctx.const(0, ctx.compute_type(st))))
    return reduce_named(ctx, "ReduceSum", ctx.cast(nz, ST.BOOL, ST.LONG), a.self, a.dim, False)


@lowering("onnx", "aten.aminmax.default")
def aminmax(ctx, node):
    """(``amin``, ``amax``) over ``dim`` (all dims when None)."""
    a = bind(node, "self", "dim", "keepdim")
    st = ctx.dtype(a.self)
    cst = ctx.compute_type(st) if st != ST.BOOL else ST.INT
    if ctx.rank(a.self) == 0 and a.dim not in (None, 0, -1):
        raise Unsupported(f"aminmax of a 0-d tensor over dim {a.dim}")
    x = ctx.t(a.self, cst)
    return [ctx.cast(reduce_named(ctx, op, x, a.self, a.dim, a.keepdim), cst, st) for op in ("ReduceMin", "ReduceMax")]


@lowering("onnx", "aten.bincount.default")
def bincount(ctx, node):
    """Counts (sums of ``weights``) of each value 0..max(self, minlength - 1) of a 1-D int tensor:
    an equality table [n, bins] summed over n (negative values, which torch rejects, count nowhere)."""
    a = bind(node, "self", "weights", "minlength")
    if not isinstance(a.minlength, int):
        raise Unsupported("bincount with minlength computed at run time")
    if ctx.rank(a.self) != 1:
        raise Unsupported("bincount of a tensor that is not 1-D (torch raises)")
    out = ctx.out_info().dtype
    x = ctx.t(a.self, ST.LONG)
    top = ctx.op("ReduceMax", ctx.op("Concat", x, ctx.ints([-1]), axis=0), keepdims=0)  # -1 for no values
    bins = ctx.op("Max", ctx.op("Add", top, ctx.const(1, ST.LONG)), ctx.const(a.minlength, ST.LONG))
    table = ctx.op("Equal", ctx.op("Unsqueeze", x, ctx.ints([1])),
                   ctx.op("Range", ctx.const(0, ST.LONG), bins, ctx.const(1, ST.LONG)))
    if a.weights is None:
        hits = ctx.cast(table, ST.BOOL, ST.LONG)
        cst = ST.LONG
    else:
        cst = ctx.compute_type(out)
        hits = ctx.op("Where", table, ctx.op("Unsqueeze", ctx.t(a.weights, cst), ctx.ints([1])), ctx.const(0, cst))
    return ctx.cast(ctx.op("ReduceSum", hits, ctx.ints([0]), keepdims=0), cst, out)


@lowering("onnx", "aten.histc.default")
def histc(ctx, node):
    """``bins`` equal bins over [min, max] (the values' own range when min == max, widened by 1
    each way when that is one value): bin ``int((x - lo) * bins / (hi - lo))``, ``hi`` in the last
    bin, values outside (and NaN) in none. Counts in the input's float dtype."""
    a = bind(node, "self", "bins", "min", "max")
    st = ctx.dtype(a.self)
    if not dtypes.is_floating(st):
        raise Unsupported(f"histc of {st.name} (torch wants a float)")
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (a.bins, a.min, a.max)):
        raise Unsupported("histc with bins/min/max computed at run time")
    if a.bins <= 0 or a.min > a.max or not (math.isfinite(a.min) and math.isfinite(a.max)):
        raise Unsupported(f"histc with bins={a.bins}, min={a.min}, max={a.max} (torch raises)")
    cst = ctx.compute_type(st)
    x = ctx.op("Reshape", ctx.t(a.self, cst), ctx.ints([-1]))
    lo, hi = ctx.const(a.min, cst), ctx.const(a.max, cst)
    if np.asarray(a.min, dtypes.to_numpy(cst)) == np.asarray(a.max, dtypes.to_numpy(cst)):  # as torch, in its dtype
        if ctx.info(a.self).numel() == 0:
            raise Unsupported("histc of an empty tensor over its own range (torch raises)")
        lo, hi = ctx.op("ReduceMin", x, keepdims=1), ctx.op("ReduceMax", x, keepdims=1)
        same = ctx.op("Equal", lo, hi)
        lo = ctx.op("Where", same, ctx.op("Sub", lo, ctx.const(1, cst)), lo)
        hi = ctx.op("Where", same, ctx.op("Add", hi, ctx.const(1, cst)), hi)
    inside = ctx.op("And", ctx.op("GreaterOrEqual", x, lo), ctx.op("LessOrEqual", x, hi))
    pos = ctx.op("Div", ctx.op("Mul", ctx.op("Sub", x, lo), ctx.const(a.bins, cst)), ctx.op("Sub", hi, lo))
    pos = ctx.op("Where", inside, pos, ctx.const(0, cst))
    pos = ctx.op("Min", ctx.cast(ctx.op("Floor", pos), cst, ST.LONG), ctx.const(a.bins - 1, ST.LONG))
    table = ctx.op("Equal", ctx.op("Unsqueeze", pos, ctx.ints([1])), ctx.const(np.arange(a.bins), ST.LONG))
    table = ctx.op("And", table, ctx.op("Unsqueeze", inside, ctx.ints([1])))
    return ctx.op("ReduceSum", ctx.cast(table, ST.BOOL, cst), ctx.ints([0]), keepdims=0)


_INDEX_REDUCE = {"prod": "ReduceProd", "mean": "ReduceSum", "amax": "ReduceMax", "amin": "ReduceMin"}


@lowering("onnx", "aten.index_reduce.default")
def index_reduce(ctx, node):
    """``self`` with each place ``index[k]`` along ``dim`` combined (``reduce``) with ``source``'s
    slice k, and with its own value when ``include_self``; places no index names are kept.
    Integer means round down (as torch); amax/amin propagate NaN. A hit table [N, K] (index
    values outside 0..N-1, which torch rejects, hit nothing)."""
    a = bind(node, "self", "dim", "index", "source", "reduce", "include_self")
    if a.reduce not in _INDEX_REDUCE:
        raise Unsupported(f"index_reduce with reduce={a.reduce!r}")
    st = ctx.dtype(a.self)
    cst = ctx.compute_type(st) if st != ST.BOOL else ST.INT
    if ctx.rank(a.index) > 1 or ctx.rank(a.source) != ctx.rank(a.self):
        raise Unsupported("index_reduce with an index that is not 1-D or a source of another rank")
    rank = max(ctx.rank(a.self), 1)
    dim = a.dim % rank
    x = one_d(ctx, ctx.t(a.self, cst), a.self)
    src = one_d(ctx, ctx.t(a.source, cst), a.source)
    idx = ctx.op("Reshape", ctx.t(a.index, ST.LONG), ctx.ints([1, -1]))
    n = ctx.shape(x, dim, dim + 1)
    places = ctx.op("Range", ctx.const(0, ST.LONG), ctx.op("Squeeze", n, ctx.ints([0])), ctx.const(1, ST.LONG))
    tail = [1] * (rank - dim - 1)
    hit = ctx.op("Equal", ctx.op("Unsqueeze", places, ctx.ints([1])), idx)  # [N, K]
    hit_b = ctx.op("Reshape", hit, ctx.ints([0, 0] + tail))  # [N, K, 1...] against source [..., 1, K, ...]
    count = ctx.op("Reshape", ctx.op("ReduceSum", ctx.cast(hit, ST.BOOL, cst), ctx.ints([1]), keepdims=0),
                   ctx.ints([-1] + tail))
    is_float = dtypes.is_floating(cst)
    if a.reduce in ("amax", "amin") and is_float:
        fill = ctx.const(-np.inf if a.reduce == "amax" else np.inf, cst)
    elif a.reduce in ("amax", "amin"):  # the source's own min (max): no extreme int64 constant, which TFLite lacks
        fill = ctx.op("ReduceMin" if a.reduce == "amax" else "ReduceMax", src, keepdims=0)
    else:
        fill = ctx.const(1 if a.reduce == "prod" else 0, cst)
    spread = ctx.op("Where", hit_b, ctx.op("Unsqueeze", src, ctx.ints([dim])), fill)
    red = ctx.op(_INDEX_REDUCE[a.reduce], spread, ctx.ints([dim + 1]), keepdims=0)
    if a.reduce == "prod":
        r = ctx.op("Mul", red, x) if a.include_self else red
    elif a.reduce == "mean":
        total = ctx.op("Add", red, x) if a.include_self else red
        cnt = ctx.op("Add", count, ctx.const(1, cst)) if a.include_self else count
        cnt = ctx.op("Max", cnt, ctx.const(1, cst))
        if is_float:
            r = ctx.op("Div", total, cnt)
        else:  # floor division (Div truncates): (a - a mod b) / b, mod with the divisor's sign
            r = ctx.op("Div", ctx.op("Sub", total, ctx.op("Mod", total, cnt, fmod=0)), cnt)
    else:
        r = ctx.op("Max" if a.reduce == "amax" else "Min", red, x) if a.include_self else red
        if is_float:  # NaN from the source slices (and from self when included) wins
            nan = ctx.op("ReduceMax", ctx.cast(ctx.op("And", hit_b, ctx.op("Unsqueeze", ctx.op("IsNaN", src),
                                                                               ctx.ints([dim]))), ST.BOOL, ST.INT),
                         ctx.ints([dim + 1]), keepdims=0)
            nan = ctx.cast(nan, ST.INT, ST.BOOL)
            if a.include_self:
                nan = ctx.op("Or", nan, ctx.op("IsNaN", x))
            r = ctx.op("Where", nan, ctx.const(np.nan, cst), r)
    out = ctx.op("Where", ctx.op("Greater", count, ctx.const(0, cst)), r, x)
    return ctx.cast(zero_d(ctx, out, a.self), cst, st)


_SEGMENT = {"max": ("ReduceMax", -np.inf), "min": ("ReduceMin", np.inf), "sum": ("ReduceSum", 0),
            "mean": ("ReduceSum", 0), "prod": ("ReduceProd", 1)}


@lowering("onnx", "aten.segment_reduce.default")
def segment_reduce(ctx, node):
    """``reduce`` over consecutive segments of ``data``'s dim 0 given by ``lengths`` or ``offsets``
    (1-D): ``initial`` joins each segment's reduction (a mean divides by the length only) and is an
    empty segment's value; without it an empty max/min/mean is -inf/inf/NaN, as torch. NaN
    propagates. A membership table [segments, n]."""
    a = bind(node, "data", "reduce")
    a.declare("unsafe")  # skips torch's checks of the lengths: the values are the same
    st = ctx.dtype(a.data)
    if not dtypes.is_floating(st) or a.reduce not in _SEGMENT:
        raise Unsupported(f"segment_reduce {a.reduce!r} of {st.name}")
    if a.indices is not None or a.axis % max(ctx.rank(a.data), 1) != 0 or ctx.rank(a.data) == 0:
        raise Unsupported("segment_reduce by indices or along a dim other than 0")
    if not (a.initial is None or isinstance(a.initial, (int, float))):
        raise Unsupported(f"segment_reduce with initial={a.initial!r}")
    seg = a.lengths if a.lengths is not None else a.offsets
    if seg is None or ctx.rank(seg) != 1:
        raise Unsupported("segment_reduce without 1-D lengths or offsets")
    cst = ctx.compute_type(st)
    x = ctx.t(a.data, cst)
    big = ctx.ints([2**63 - 1])
    if a.lengths is not None:
        lengths = ctx.t(a.lengths, ST.LONG)
        ends = ctx.op("CumSum", lengths, ctx.const(0, ST.LONG))
        starts = ctx.op("Sub", ends, lengths)
    else:
        offsets = ctx.t(a.offsets, ST.LONG)
        starts = ctx.op("Slice", offsets, ctx.ints([0]), ctx.ints([-1]), ctx.ints([0]))
        ends = ctx.op("Slice", offsets, ctx.ints([1]), big, ctx.ints([0]))
    n = ctx.op("Squeeze", ctx.shape(x, 0, 1), ctx.ints([0]))
    places = ctx.op("Unsqueeze", ctx.op("Range", ctx.const(0, ST.LONG), n, ctx.const(1, ST.LONG)), ctx.ints([0]))
    col = ctx.ints([1])
    inside = ctx.op("And", ctx.op("GreaterOrEqual", places, ctx.op("Unsqueeze", starts, col)),
                    ctx.op("Less", places, ctx.op("Unsqueeze", ends, col)))  # [S, n]
    tail = [1] * (ctx.rank(a.data) - 1)
    inside_b = ctx.op("Reshape", inside, ctx.ints([0, 0] + tail))
    op, fill = _SEGMENT[a.reduce]
    spread = ctx.op("Where", inside_b, ctx.op("Unsqueeze", x, ctx.ints([0])), ctx.const(fill, cst))
    r = ctx.op(op, spread, ctx.ints([1]), keepdims=0)
    if a.reduce in ("max", "min"):  # NaN wins
        nan_in = ctx.op("And", inside_b, ctx.op("Unsqueeze", ctx.op("IsNaN", x), ctx.ints([0])))
        nan = ctx.op("ReduceMax", ctx.cast(nan_in, ST.BOOL, ST.INT), ctx.ints([1]), keepdims=0)
        r = ctx.op("Where", ctx.cast(nan, ST.INT, ST.BOOL), ctx.const(np.nan, cst), r)
    if a.initial is not None:
        init = ctx.const(a.initial, cst)
        r = ctx.op({"max": "Max", "min": "Min", "sum": "Add", "mean": "Add", "prod": "Mul"}[a.reduce], r, init)
        if a.reduce in ("max", "min"):  # Max/Min beside a NaN: keep the NaN
            r = ctx.op("Where", ctx.cast(nan, ST.INT, ST.BOOL), ctx.const(np.nan, cst), r)
    if a.reduce == "mean":
        length = ctx.cast(ctx.op("Sub", ends, starts), ST.LONG, cst)
        length = ctx.op("Reshape", length, ctx.ints([-1] + tail))
        r = ctx.op("Div", r, length)  # an empty segment: 0/0, NaN
        if a.initial is not None:
            r = ctx.op("Where", ctx.op("Equal", length, ctx.const(0, cst)), init, r)
    return ctx.cast(r, cst, st)
