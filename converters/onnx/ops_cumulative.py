"""Cumulative ops as a Hillis-Steele scan (ONNX has CumProd only from opset 26): ``cumprod``,
``logcumsumexp``, ``cummax``/``cummin`` (values and indices).

Along a dim of length n, steps s = 1, 2, 4, ... < n each combine every position i >= s with
position i - s (a Gather along the dim; positions below s keep their value), so after the
steps position i holds the combination of positions 0..i. The combinations are associative;
floats are grouped differently from a left-to-right loop (equal up to rounding, exact for
integers). A static n unrolls ceil(log2 n) steps; a dynamic one runs them in an ONNX Loop
(s doubling while s < n), which the TFLite target maps to a WHILE.
"""

from __future__ import annotations

import math

from onnx import helper

from ..aten import dtypes
from ..aten.args import bind
from ..aten.dtypes import ST
from ..aten.registry import lowering
from ..errors import Unsupported
from .context import onnx_type
from .shapes import one_d, zero_d


def _step(c, ys, dim, rank, s, n, combine):
    """One scan step in ctx ``c``: ``s`` and ``n`` are 0-d int64 names."""
    pos = c.op("Range", c.const(0, ST.LONG), n, c.const(1, ST.LONG))
    src = c.op("Sub", pos, s)
    valid = c.op("Reshape", c.op("GreaterOrEqual", src, c.const(0, ST.LONG)), c.ints([-1] + [1] * (rank - dim - 1)))
    src = c.op("Max", src, c.const(0, ST.LONG))
    earlier = [c.op("Gather", y, src, axis=dim) for y in ys]
    return [c.op("Where", valid, m, y) for m, y in zip(combine(c, earlier, ys), ys)]


def scan(ctx, ys: list[str], types: list[ST], rank: int, dim: int, length, combine) -> list[str]:
    """Inclusive scan of the tensors ``ys`` (same shape, rank >= 1) along ``dim`` of ``length``
    (an int, or None when dynamic) with ``combine(ctx, earlier, later) -> list``."""
    if isinstance(length, int):
        n = ctx.const(length, ST.LONG)
        s = 1
        while s < length:
            ys = _step(ctx, ys, dim, rank, ctx.const(s, ST.LONG), n, combine)
            s *= 2
        return ys
    n = ctx.op("Squeeze", ctx.shape(ys[0], dim, dim + 1), ctx.ints([0]))

    def body(c, s, *ys):
        s2 = c.op("Mul", s, c.const(2, ST.LONG))
        return c.op("Less", s2, n), [s2, *_step(c, list(ys), dim, rank, s, n, combine)]

    first = ctx.op("Less", ctx.const(1, ST.LONG), n)
    return loop_while(ctx, first, [(ctx.const(1, ST.LONG), ST.LONG, 0)] + [(y, t, rank) for y, t in zip(ys, types)],
                      body)[1:]


def loop_while(ctx, cond: str, state: list, body) -> list[str]:
    """An ONNX Loop (TFLite: WHILE) over ``state`` ((name, dtype, rank) each) while ``cond`` (0-d
    bool) holds: ``body(c, *values) -> (cond, new values)`` builds one step in the child ctx ``c``
    (outer values are read by name). Returns the final values."""
    c = ctx.child(ctx.view)
    c.node = ctx.node
    vi = helper.make_tensor_value_info
    it, cond_in = c.names.fresh("loop_iter"), c.names.fresh("loop_cond")
    formals = [c.names.fresh("loop_v") for _ in state]
    more, new = body(c, *formals)
    outs = [c.op("Identity", x) for x in [more, *new]]
    graph = helper.make_graph(
        c.nodes, ctx.names.fresh("loop_body"),
        [vi(it, onnx_type(ST.LONG), []), vi(cond_in, onnx_type(ST.BOOL), [])]
        + [vi(f, onnx_type(t), [None] * r) for f, (_, t, r) in zip(formals, state)],
        [vi(outs[0], onnx_type(ST.BOOL), [])]
        + [vi(o, onnx_type(t), [None] * r) for o, (_, t, r) in zip(outs[1:], state)])
    r = ctx.op("Loop", "", cond, *[v for v, _, _ in state], body=graph, outputs=len(state))
    return r if isinstance(r, list) else [r]


def _prepare(ctx, a, cst):
    """(x in ``cst`` with rank >= 1, rank, dim, static length or None)."""
    x = one_d(ctx, ctx.t(a.self, cst), a.self)
    rank = max(ctx.rank(a.self), 1)
    dim = a.dim % rank
    n = ctx.info(a.self).shape[dim] if ctx.rank(a.self) else 1
    return x, rank, dim, (n if isinstance(n, int) else None)


@lowering("onnx", "aten.cumprod.default")
def cumprod(ctx, node):
    """The running product along ``dim``, in the output's dtype."""
    a = bind(node, "self", "dim")
    a.declare("dtype")  # the output's dtype, computed in
    out = ctx.out_info().dtype
    cst = ctx.compute_type(out)
    if cst in (ST.BOOL, ST.INT) and out != ST.INT:
        cst = ST.LONG
    x, rank, dim, n = _prepare(ctx, a, cst)
    y = scan(ctx, [x], [cst], rank, dim, n, lambda c, e, l: [c.op("Mul", e[0], l[0])])[0]
    return ctx.cast(zero_d(ctx, y, a.self), cst, out)


def _logaddexp(cst):
    """``max + log(1 + exp(min - max))``; the same infinity on both sides gives it, NaN stays NaN."""
    def combine(c, e, l):
        a, b = e[0], l[0]
        hi, lo = c.op("Max", a, b), c.op("Min", a, b)
        r = c.op("Add", hi, c.op("Log", c.op("Add", c.const(1.0, cst), c.op("Exp", c.op("Sub", lo, hi)))))
        r = c.op("Where", c.op("Equal", a, b), c.op("Add", a, c.const(math.log(2), cst)), r)
        nan = c.op("Or", c.op("IsNaN", a), c.op("IsNaN", b))
        return [c.op("Where", nan, c.op("Add", a, b), r)]

    return combine


@lowering("onnx", "aten.logcumsumexp.default")
def logcumsumexp(ctx, node):
    """``log(cumsum(exp(x)))`` along ``dim`` as a scan of ``logaddexp`` (no overflow, no underflow
    of small terms), in the input's float dtype."""
    a = bind(node, "self", "dim")
    out = ctx.out_info().dtype
    if not dtypes.is_floating(out):
        raise Unsupported(f"logcumsumexp of {out.name}")
    cst = ctx.compute_type(out)
    x, rank, dim, n = _prepare(ctx, a, cst)
    y = scan(ctx, [x], [cst], rank, dim, n, _logaddexp(cst))[0]
    return ctx.cast(zero_d(ctx, y, a.self), cst, out)


@lowering("onnx", "aten.cummax.default", "aten.cummin.default")
def cummax(ctx, node):
    """The running max (min) along ``dim`` and the index of the last position holding it; from
    the first NaN on, NaN and the index of the latest NaN (torch's order: NaN above all)."""
    a = bind(node, "self", "dim")
    st = ctx.dtype(a.self)
    is_max = ".cummax." in node.target
    cst = ctx.compute_type(st) if st != ST.BOOL else ST.INT
    x, rank, dim, n = _prepare(ctx, a, cst)
    length = ctx.shape(x, dim, dim + 1) if n is None else ctx.ints([n])
    pos = ctx.op("Range", ctx.const(0, ST.LONG), ctx.op("Squeeze", length, ctx.ints([0])), ctx.const(1, ST.LONG))
    idx = ctx.op("Expand", ctx.op("Reshape", pos, ctx.ints([-1] + [1] * (rank - dim - 1))), ctx.shape(x))
    is_float = dtypes.is_floating(cst)

    def combine(c, e, l):
        """the later pair unless the earlier one is a NaN and the later is not, or wins strictly"""
        (ev, ei), (lv, li) = e, l
        beats = c.op("Greater" if is_max else "Less", ev, lv)  # false beside a NaN
        if is_float:
            beats = c.op("Or", beats, c.op("And", c.op("IsNaN", ev), c.op("Not", c.op("IsNaN", lv))))
        return [c.op("Where", beats, ev, lv), c.op("Where", beats, ei, li)]

    v, i = scan(ctx, [x, idx], [cst, ST.LONG], rank, dim, n, combine)
    return [ctx.cast(zero_d(ctx, v, a.self), cst, st), zero_d(ctx, i, a.self)]
