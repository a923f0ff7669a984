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
          "aten.var_mean.correction", "aten.var_mean.dim", "aten.std_mean.correction", "aten.std_mean.dim")
def var(ctx, node):
    a = bind(node, "self", correction=None, unbiased=True)  # .dim has no correction, .correction no unbiased
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
    mean = ctx.op("ReduceMean", x, ax, keepdims=1)
    d = ctx.op("Sub", x, mean)
    ss = ctx.op("ReduceSum", ctx.op("Mul", d, d), ax, keepdims=int(a.keepdim))
    info = ctx.info(a.self)
    n = 1
    dyn = False
    for i in dims:
        if isinstance(info.shape[i], int):
            n *= info.shape[i]
        else:
            dyn = True
    if dyn:
        cnt = ctx.op("ReduceProd", ctx.op("Gather", ctx.shape(x), axes_const(ctx, dims)), keepdims=0)
        denom = ctx.cast(ctx.op("Sub", cnt, ctx.const(corr, ST.LONG)), ST.LONG, cst)
    else:
        denom = ctx.const(max(n - corr, 0), cst)
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
