"""More elementwise lowerings: selu, celu, threshold, soft/hard shrink, isfinite, logaddexp(2),
round with decimals, integer bit shifts (the Bessel family is in ``ops_bessel``).

Each is composed of ONNX ops the TFLite target maps (Where, comparisons, Elu, Exp, Log), in the
output's compute type, except the bit shifts (ONNX's BitShift is unsigned only: they go through
uint64, which the TFLite target does not compute). NaN follows torch: the shrinks and threshold
pass it through (ONNX's Shrink would give 0). Integer inputs work where torch takes them
(threshold, the shrinks, isfinite, shifts); the others are floating in torch.
"""

from __future__ import annotations

import math

from ..aten import dtypes
from ..aten.args import bind
from ..aten.dtypes import ST
from ..aten.registry import lowering
from ..errors import Unsupported

# torch.nn.functional.selu's constants
_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946


def _io(ctx):
    out = ctx.out_info().dtype
    return out, ctx.compute_type(out)


def _static_number(value, what: str) -> float:
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        raise Unsupported(f"{what} computed at run time")
    return value


@lowering("onnx", "aten.selu.default")
def selu(ctx, node):
    out, cst = _io(ctx)
    r = ctx.op("Selu", ctx.t(bind(node, "self").self, cst), alpha=_SELU_ALPHA, gamma=_SELU_SCALE)
    return ctx.cast(r, cst, out)


@lowering("onnx", "aten.celu.default")
def celu(ctx, node):
    """``max(0, x) + min(0, alpha (exp(x / alpha) - 1))`` = ``alpha * elu(x / alpha)`` (ONNX's Celu
    is float32 only)."""
    a = bind(node, "self", "alpha")
    alpha = float(_static_number(a.alpha, "celu's alpha"))
    if alpha == 0:
        raise Unsupported("celu with alpha=0 (torch divides by it)")
    out, cst = _io(ctx)
    x = ctx.t(a.self, cst)
    if alpha == 1:
        return ctx.cast(ctx.op("Elu", x, alpha=1.0), cst, out)
    c = ctx.const(alpha, cst)
    return ctx.cast(ctx.op("Mul", c, ctx.op("Elu", ctx.op("Div", x, c), alpha=1.0)), cst, out)


@lowering("onnx", "aten.threshold.default")
def threshold(ctx, node):
    """``value`` where ``x <= threshold``, else ``x`` (NaN stays)."""
    a = bind(node, "self", "threshold", "value")
    out, cst = _io(ctx)
    x = ctx.t(a.self, cst)
    return ctx.cast(ctx.op("Where", ctx.op("LessOrEqual", x, ctx.t(a.threshold, cst)), ctx.t(a.value, cst), x),
                    cst, out)


@lowering("onnx", "aten.softshrink.default")
def softshrink(ctx, node):
    """``x - l`` above ``l``, ``x + l`` below ``-l``, else 0 (``x * 0``: NaN stays, as torch's kernel)."""
    a = bind(node, "self", "lambd")
    out, cst = _io(ctx)
    x, lam = ctx.t(a.self, cst), ctx.t(a.lambd, cst)
    neg = ctx.op("Neg", lam)
    inner = ctx.op("Where", ctx.op("Less", x, neg), ctx.op("Add", x, lam), ctx.op("Mul", x, ctx.const(0, cst)))
    return ctx.cast(ctx.op("Where", ctx.op("Greater", x, lam), ctx.op("Sub", x, lam), inner), cst, out)


@lowering("onnx", "aten.hardshrink.default")
def hardshrink(ctx, node):
    """0 where ``-l <= x <= l``, else ``x`` (NaN stays)."""
    a = bind(node, "self", "lambd")
    out, cst = _io(ctx)
    x, lam = ctx.t(a.self, cst), ctx.t(a.lambd, cst)
    inside = ctx.op("And", ctx.op("GreaterOrEqual", x, ctx.op("Neg", lam)), ctx.op("LessOrEqual", x, lam))
    return ctx.cast(ctx.op("Where", inside, ctx.const(0, cst), x), cst, out)


@lowering("onnx", "aten.isfinite.default")
def isfinite(ctx, node):
    """Neither infinite nor NaN; every integer and bool is finite."""
    x = bind(node, "self").self
    st = ctx.dtype(x)
    if not dtypes.is_floating(st):
        return ctx.op("Expand", ctx.const(True, ST.BOOL), ctx.shape_of(x))
    xc = ctx.t(x, ctx.compute_type(st))
    return ctx.op("Not", ctx.op("Or", ctx.op("IsInf", xc), ctx.op("IsNaN", xc)))


@lowering("onnx", "aten.logaddexp.default", "aten.logaddexp2.default")
def logaddexp(ctx, node):
    """``max(a, b) + log(1 + exp(-|a - b|))`` (base 2 for logaddexp2), and ``a`` where both are
    the same infinity (``a - b`` is NaN there), as torch."""
    a = bind(node, "self", "other")
    out, cst = _io(ctx)
    if not dtypes.is_floating(cst):
        raise Unsupported(f"{node.target} of {out.name}")
    x, y = ctx.t(a.self, cst), ctx.t(a.other, cst)
    d = ctx.op("Neg", ctx.op("Abs", ctx.op("Sub", x, y)))
    base2 = "logaddexp2" in node.target
    if base2:
        d = ctx.op("Mul", d, ctx.const(math.log(2), cst))
    tail = ctx.op("Log", ctx.op("Add", ctx.const(1, cst), ctx.op("Exp", d)))
    if base2:
        tail = ctx.op("Div", tail, ctx.const(math.log(2), cst))
    r = ctx.op("Add", ctx.op("Max", x, y), tail)
    same_inf = ctx.op("And", ctx.op("IsInf", x), ctx.op("Equal", x, y))
    return ctx.cast(ctx.op("Where", same_inf, x, r), cst, out)


@lowering("onnx", "aten.round.decimals")
def round_decimals(ctx, node):
    """torch's kernel: ``round(x * 10^d) / 10^d`` for d > 0, ``round(x / 10^-d) * 10^-d`` for
    d < 0, ``10^|d|`` in the input's dtype; halves to even (ONNX Round)."""
    a = bind(node, "self", "decimals")
    d = _static_number(a.decimals, "round's decimals")
    out, cst = _io(ctx)
    if not dtypes.is_floating(out):
        raise Unsupported(f"round with decimals of {out.name}")
    x = ctx.t(a.self, cst)
    if d == 0:
        return ctx.cast(ctx.op("Round", x), cst, out)
    p = ctx.const(10.0 ** abs(d), cst)
    if d > 0:
        r = ctx.op("Div", ctx.op("Round", ctx.op("Mul", x, p)), p)
    else:
        r = ctx.op("Mul", ctx.op("Round", ctx.op("Div", x, p)), p)
    return ctx.cast(r, cst, out)


# ------------------------------------------------------------------------------ bit shifts

_WIDTH = {ST.LONG: 64, ST.INT: 32, ST.SHORT: 16, ST.CHAR: 8, ST.BYTE: 8}


def _logical_right(ctx, x, s):
    """int64 ``x`` shifted right by ``s`` in [0, 63] bits, zeros in from the left."""
    r = ctx.op("BitShift", ctx.cast(x, ST.LONG, ST.UINT64), ctx.cast(s, ST.LONG, ST.UINT64), direction="RIGHT")
    return ctx.cast(r, ST.UINT64, ST.LONG)


@lowering("onnx", "aten.bitwise_left_shift.Tensor", "aten.bitwise_left_shift.Tensor_Scalar",
          "aten.bitwise_left_shift.Scalar_Tensor", "aten.__lshift__.Tensor", "aten.__lshift__.Scalar",
          "aten.bitwise_right_shift.Tensor", "aten.bitwise_right_shift.Tensor_Scalar",
          "aten.bitwise_right_shift.Scalar_Tensor", "aten.__rshift__.Tensor", "aten.__rshift__.Scalar")
def bitwise_shift(ctx, node):
    """torch's integer shifts in the output dtype of width w: left, the bits of ``self`` moved up
    (wrapping), 0 for a count < 0 or >= w; right, arithmetic (sign-filling) for signed dtypes,
    and a count < 0 or >= w - signed shifts by w - signed. Computed in int64 through uint64
    BitShift, then cast down (which keeps the low bits)."""
    a = bind(node, "self", "other")
    out = ctx.out_info().dtype
    if out not in _WIDTH:
        raise Unsupported(f"{node.target} of {ST(out).name}")
    w = _WIDTH[out]
    signed = out != ST.BYTE
    x, s = ctx.t(a.self, ST.LONG), ctx.t(a.other, ST.LONG)
    zero = ctx.const(0, ST.LONG)
    left = "left" in node.target or "lshift" in node.target
    limit = w if left else w - int(signed)
    valid = ctx.op("And", ctx.op("GreaterOrEqual", s, zero), ctx.op("Less", s, ctx.const(limit, ST.LONG)))
    if left:
        s_ok = ctx.op("Where", valid, s, zero)
        r = ctx.op("BitShift", ctx.cast(x, ST.LONG, ST.UINT64), ctx.cast(s_ok, ST.LONG, ST.UINT64), direction="LEFT")
        r = ctx.op("Where", valid, ctx.cast(r, ST.UINT64, ST.LONG), zero)
    else:
        s_ok = ctx.op("Where", valid, s, ctx.const(limit, ST.LONG))
        if signed:  # arithmetic: ~((~x) >> s) below 0
            neg = ctx.op("BitwiseNot", _logical_right(ctx, ctx.op("BitwiseNot", x), s_ok))
            r = ctx.op("Where", ctx.op("Less", x, zero), neg, _logical_right(ctx, x, s_ok))
        else:
            r = _logical_right(ctx, x, s_ok)  # uint8: a count of 8 empties it
    return ctx.cast(r, ST.LONG, out)
