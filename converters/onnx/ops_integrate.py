"""Integration and differences: trapezoid / trapz / cumulative_trapezoid (by sample points or a
spacing) and gradient (torch's second-order central differences with first-order edges)."""

from __future__ import annotations

import numpy as np

from ..aten import dtypes
from ..aten.args import bind
from ..aten.dtypes import ST
from ..aten.registry import lowering
from ..errors import Unsupported
from .ops_linalg import _static_scalar
from .shapes import axes_const


# ------------------------------------------------------------------ integration and differences

_END = 2**63 - 1


def _sl(ctx, x, start: int, end: int, axis: int):
    return ctx.op("Slice", x, ctx.ints([start]), ctx.ints([end]), ctx.ints([axis]))


def _wrapped(ctx, x, c, st):
    """``x`` (computed in ``c``) rounded through the integer type ``st`` it stands for (int8 sums wrap)."""
    return x if c == st else ctx.cast(ctx.cast(x, c, st), st, c)


def _exact_op(ctx, op: str, x, y, st):
    """``x op y`` in torch's dtype ``st`` (computed in its ONNX compute type, wrapped back)."""
    c = ctx.compute_type(st)
    return _wrapped(ctx, ctx.op(op, x, y), c, st), c


def _float_out(ctx, what: str):
    out = ctx.out_info().dtype
    cst = ctx.compute_type(out)
    if not dtypes.is_floating(cst):
        raise Unsupported(f"{what} with a {out.name} result")
    return out, cst


def _y_dim(ctx, a, what: str):
    """``dim`` wrapped for ``y``; refuses booleans (as torch)."""
    rank = ctx.rank(a.y)
    if rank == 0 or ctx.dtype(a.y) == ST.BOOL:
        raise Unsupported(f"{what} of a 0-d or boolean y")
    return a.dim % rank


def _empty_integral(ctx, a, dim):
    """trapezoid over a static size 0: zeros (in y's dtype, as torch), else None."""
    if ctx.info(a.y).shape[dim] != 0:
        return None
    out = ctx.out_info().dtype
    cst = ctx.compute_type(out)
    return ctx.cast(ctx.op("ReduceSum", ctx.t(a.y, cst), axes_const(ctx, [dim]), keepdims=0), cst, out)


@lowering("onnx", "aten.trapezoid.x", "aten.trapz.x", "aten.cumulative_trapezoid.x")
def trapezoid_x(ctx, node):
    """``sum(dx * (y[:-1] + y[1:]) / 2)`` along ``dim``, ``dx = diff(x)`` (a 1-d x lies along
    ``dim``); cumulative_trapezoid: the running sums. Integer steps are exact."""
    a = bind(node, "y", "x")
    dim = _y_dim(ctx, a, "trapezoid")
    cumulative = "cumulative" in node.target
    if not cumulative and (z := _empty_integral(ctx, a, dim)) is not None:
        a.declare("x")
        return z
    out, cst = _float_out(ctx, "trapezoid")
    ry, rx, ty, tx = ctx.rank(a.y), ctx.rank(a.x), ctx.dtype(a.y), ctx.dtype(a.x)
    if tx == ST.BOOL or rx not in (1, ry):
        raise Unsupported(f"trapezoid of a {rx}-d or boolean x and a {ry}-d y")
    xdim = 0 if rx == 1 else dim
    if ctx.info(a.x).shape[xdim] != ctx.info(a.y).shape[dim]:
        raise Unsupported("trapezoid of x and y of sizes along dim not known equal")
    cx, cy = ctx.compute_type(tx), ctx.compute_type(ty)
    x = ctx.t(a.x, cx)
    if rx == 1 and ry > 1:
        x = ctx.op("Unsqueeze", x, axes_const(ctx, [i for i in range(ry) if i != dim]))
    y = ctx.t(a.y, cy)
    dx, cdx = _exact_op(ctx, "Sub", _sl(ctx, x, 1, _END, dim), _sl(ctx, x, 0, -1, dim), tx)
    s, cs = _exact_op(ctx, "Add", _sl(ctx, y, 0, -1, dim), _sl(ctx, y, 1, _END, dim), ty)
    pt = dtypes.promote_types(tx, ty)
    cp = ctx.compute_type(pt)
    prod, _ = _exact_op(ctx, "Mul", ctx.cast(dx, cdx, cp), ctx.cast(s, cs, cp), pt)
    half = ctx.op("Div", ctx.cast(prod, cp, cst), ctx.const(2, cst))
    r = ctx.op("CumSum" if cumulative else "ReduceSum", half, ctx.const(np.array(dim, np.int64), ST.LONG)
               if cumulative else axes_const(ctx, [dim]), **({} if cumulative else {"keepdims": 0}))
    return ctx.cast(r, cst, out)


@lowering("onnx", "aten.trapezoid.dx", "aten.trapz.dx")
def trapezoid_dx(ctx, node):
    """``(sum(y) - (y[0] + y[-1]) / 2) * dx`` along ``dim`` (torch's form for a uniform step)."""
    a = bind(node, "y", "dx")
    dim = _y_dim(ctx, a, "trapezoid")
    dx = _static_scalar(a.dx, "trapezoid's dx")
    if (z := _empty_integral(ctx, a, dim)) is not None:
        return z
    out, cst = _float_out(ctx, "trapezoid")
    ty = ctx.dtype(a.y)
    cy = ctx.compute_type(ty)
    y = ctx.t(a.y, cy)
    ax = axes_const(ctx, [dim])
    st = cy if dtypes.is_floating(cy) else ST.LONG  # torch sums integers in int64
    total = ctx.cast(ctx.op("ReduceSum", ctx.t(a.y, st), ax, keepdims=0), st, cst)
    ends, ce = _exact_op(ctx, "Add", ctx.op("ReduceSum", _sl(ctx, y, 0, 1, dim), ax, keepdims=0),
                         ctx.op("ReduceSum", _sl(ctx, y, -1, _END, dim), ax, keepdims=0), ty)
    r = ctx.op("Sub", total, ctx.op("Mul", ctx.cast(ends, ce, cst), ctx.const(0.5, cst)))
    return ctx.cast(ctx.op("Mul", r, ctx.const(dx, cst)), cst, out)


@lowering("onnx", "aten.cumulative_trapezoid.dx")
def cumulative_trapezoid_dx(ctx, node):
    """Running sums of ``dx / 2 * (y[:-1] + y[1:])`` along ``dim``."""
    a = bind(node, "y", "dx")
    dim = _y_dim(ctx, a, "cumulative_trapezoid")
    dx = _static_scalar(a.dx, "cumulative_trapezoid's dx")
    out, cst = _float_out(ctx, "cumulative_trapezoid")
    ty = ctx.dtype(a.y)
    y = ctx.t(a.y, ctx.compute_type(ty))
    s, cs = _exact_op(ctx, "Add", _sl(ctx, y, 0, -1, dim), _sl(ctx, y, 1, _END, dim), ty)
    r = ctx.op("Mul", ctx.const(dx / 2.0, cst), ctx.cast(s, cs, cst))
    return ctx.cast(ctx.op("CumSum", r, ctx.const(np.array(dim, np.int64), ST.LONG)), cst, out)


@lowering("onnx", "aten.gradient.scalarint", "aten.gradient.scalararray", "aten.gradient.array",
          "aten.gradient.scalarrayint", "aten.gradient.scalarrayarray")
def gradient(ctx, node):
    """Per dim: central differences ``(y[i+1] - y[i-1]) / h / 2`` inside, one-sided ones at the ends
    (``edge_order`` 1 or 2), for a uniform spacing ``h`` (one number, or one per dim)."""
    a = bind(node, "self", spacing=None)  # .array has no spacing (1)
    shape = ctx.info(a.self).shape
    rank, t = len(shape), ctx.dtype(a.self)
    if rank == 0 or t == ST.BOOL:
        raise Unsupported("gradient of a 0-d or boolean tensor")
    dims = list(range(rank)) if a.dim is None else [a.dim] if isinstance(a.dim, int) else list(a.dim)
    dims = [d % rank for d in dims]
    spacing = a.spacing if isinstance(a.spacing, list) else [1.0 if a.spacing is None else a.spacing] * len(dims)
    order = a.edge_order
    if len(spacing) != len(dims) or order not in (1, 2) or not all(
            isinstance(h, (int, float)) and not isinstance(h, bool) for h in spacing):
        raise Unsupported(f"gradient with spacing {a.spacing!r}, dim {a.dim!r}, edge_order {order!r}")
    if any(isinstance(shape[d], int) and shape[d] < order + 1 for d in dims):
        raise Unsupported("gradient along a dim shorter than edge_order + 1")
    c = ctx.compute_type(t)
    x = ctx.t(a.self, c)
    results = []
    for i, (d, h) in enumerate(zip(dims, spacing)):
        out, cst = ctx.out_info(i).dtype, ctx.compute_type(ctx.out_info(i).dtype)
        if not dtypes.is_floating(cst):
            raise Unsupported(f"gradient with a {out.name} result")
        hc = ctx.const(h, cst)

        def diff(s1, e1, s0, e0):  # noqa: B023 - used within the iteration
            return ctx.cast(_exact_op(ctx, "Sub", _sl(ctx, x, s1, e1, d), _sl(ctx, x, s0, e0, d), t)[0], c, cst)

        center = ctx.op("Div", ctx.op("Div", diff(2, _END, 0, -2), hc), ctx.const(2, cst))
        if order == 1:
            first, last = diff(1, 2, 0, 1), diff(-1, _END, -2, -1)
        else:
            xf = ctx.cast(x, c, cst)

            def comb(*terms):  # noqa: B023
                r = None
                for k, (s, e) in terms:
                    v = ctx.op("Mul", ctx.const(k, cst), _sl(ctx, xf, s, e, d))
                    r = v if r is None else ctx.op("Add", r, v)
                return r

            first = comb((-1.5, (0, 1)), (2.0, (1, 2)), (-0.5, (2, 3)))
            last = comb((0.5, (-3, -2)), (-2.0, (-2, -1)), (1.5, (-1, _END)))
        first, last = ctx.op("Div", first, hc), ctx.op("Div", last, hc)
        results.append(ctx.cast(ctx.op("Concat", first, center, last, axis=d), cst, out))
    return results
