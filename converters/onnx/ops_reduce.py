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
    v = ctx.op("ReduceMax" if is_max else "ReduceMin", x, axes_const(ctx, [dim]), keepdims=int(a.keepdim))
    i = ctx.op("ArgMax" if is_max else "ArgMin", x, axis=dim, keepdims=int(a.keepdim), select_last_index=0)
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
        r = ctx.op(op, x, axis=0, keepdims=0)
        if a.keepdim:
            r = ctx.op("Reshape", r, ctx.ints([1] * ctx.rank(a.self)))
        return r
    r = ctx.op(op, one_d(ctx, x, a.self), axis=a.dim % max(ctx.rank(a.self), 1), keepdims=int(a.keepdim))
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
    table = ctx.op("And", ctx.op("Equal", ctx.op("Unsqueeze", pos, ctx.ints([1])), ctx.const(np.arange(a.bins), ST.LONG)),
                   ctx.op("Unsqueeze", inside, ctx.ints([1])))
    return ctx.op("ReduceSum", ctx.cast(table, ST.BOOL, cst), ctx.ints([0]), keepdims=0)
