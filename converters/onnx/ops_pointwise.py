"""More elementwise lowerings: selu, celu, threshold, soft/hard shrink, isfinite, logaddexp(2),
round with decimals, the modified Bessel functions i0, i0e, i1, i1e.

Each is composed of ONNX ops the TFLite target maps (Where, comparisons, Elu, Exp, Log), in the
output's compute type. NaN follows torch: the shrinks and threshold pass it through (ONNX's
Shrink would give 0). Integer inputs work where torch takes them (threshold, the shrinks,
isfinite); the others are floating in torch.
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


# ------------------------------------------------------------------ modified Bessel functions
# Cephes' Chebyshev coefficients (as torch's ATen/native/Math.h carries them) of exp(-x) I0(x) on
# [0, 8] (A, in y = x/2 - 2) and of exp(-x) sqrt(x) I0(x) on (8, inf) (B, in y = 32/x - 2); the same
# for I1 (A of exp(-x) I1(x) / x). torch's float32 i1/i1e use the last 17 and 7 of I1's tables.
_I0E_A = (
    -4.4153416464793395e-18, 3.3307945188222384e-17, -2.431279846547955e-16, 1.715391285555133e-15,
    -1.1685332877993451e-14, 7.676185498604936e-14, -4.856446783111929e-13, 2.95505266312964e-12,
    -1.726826291441556e-11, 9.675809035373237e-11, -5.189795601635263e-10, 2.6598237246823866e-09,
    -1.300025009986248e-08, 6.046995022541919e-08, -2.670793853940612e-07, 1.1173875391201037e-06,
    -4.4167383584587505e-06, 1.6448448070728896e-05, -5.754195010082104e-05, 0.00018850288509584165,
    -0.0005763755745385824, 0.0016394756169413357, -0.004324309995050576, 0.010546460394594998,
    -0.02373741480589947, 0.04930528423967071, -0.09490109704804764, 0.17162090152220877,
    -0.3046826723431984, 0.6767952744094761,
)
_I0E_B = (
    -7.233180487874754e-18, -4.830504485944182e-18, 4.46562142029676e-17, 3.461222867697461e-17,
    -2.8276239805165836e-16, -3.425485619677219e-16, 1.7725601330565263e-15, 3.8116806693526224e-15,
    -9.554846698828307e-15, -4.150569347287222e-14, 1.54008621752141e-14, 3.8527783827421426e-13,
    7.180124451383666e-13, -1.7941785315068062e-12, -1.3215811840447713e-11, -3.1499165279632416e-11,
    1.1889147107846439e-11, 4.94060238822497e-10, 3.3962320257083865e-09, 2.266668990498178e-08,
    2.0489185894690638e-07, 2.8913705208347567e-06, 6.889758346916825e-05, 0.0033691164782556943,
    0.8044904110141088,
)
_I1E_A = (
    2.7779141127610464e-18, -2.111421214358166e-17, 1.5536319577362005e-16, -1.1055969477353862e-15,
    7.600684294735408e-15, -5.042185504727912e-14, 3.223793365945575e-13, -1.9839743977649436e-12,
    1.1736186298890901e-11, -6.663489723502027e-11, 3.625590281552117e-10, -1.8872497517228294e-09,
    9.381537386495773e-09, -4.445059128796328e-08, 2.0032947535521353e-07, -8.568720264695455e-07,
    3.4702513081376785e-06, -1.3273163656039436e-05, 4.781565107550054e-05, -0.00016176081582589674,
    0.0005122859561685758, -0.0015135724506312532, 0.004156422944312888, -0.010564084894626197,
    0.024726449030626516, -0.05294598120809499, 0.1026436586898471, -0.17641651835783406,
    0.25258718644363365,
)
_I1E_B = (
    7.517296310842105e-18, 4.414348323071708e-18, -4.6503053684893586e-17, -3.209525921993424e-17,
    2.96262899764595e-16, 3.3082023109209285e-16, -1.8803547755107825e-15, -3.8144030724370075e-15,
    1.0420276984128802e-14, 4.272440016711951e-14, -2.1015418427726643e-14, -4.0835511110921974e-13,
    -7.198551776245908e-13, 2.0356285441470896e-12, 1.4125807436613782e-11, 3.2526035830154884e-11,
    -1.8974958123505413e-11, -5.589743462196584e-10, -3.835380385964237e-09, -2.6314688468895196e-08,
    -2.512236237870209e-07, -3.882564808877691e-06, -0.00011058893876262371, -0.009761097491361469,
    0.7785762350182801,
)



def _chbevl(ctx, y, coeffs, cst):
    """Cephes' chbevl: ``b0 = y b1 - b2 + c_i`` over the coefficients, then ``(b0 - b2) / 2``."""
    b0, b1, b2 = ctx.const(coeffs[0], cst), None, None
    for ck in coeffs[1:]:
        b2, b1 = b1, b0
        b0 = ctx.op("Mul", y, b1)
        if b2 is not None:
            b0 = ctx.op("Sub", b0, b2)
        b0 = ctx.op("Add", b0, ctx.const(ck, cst))
    return ctx.op("Mul", ctx.const(0.5, cst), ctx.op("Sub", b0, b2))


_BESSEL = {  # target -> (order, exponentially scaled, float32 takes the truncated I1 tables)
    "aten.i0.default": (0, False, False), "aten.special_i0e.default": (0, True, False),
    "aten.special_i1.default": (1, False, True), "aten.special_i1e.default": (1, True, True),
    "aten.special_modified_bessel_i0.default": (0, False, False),
    "aten.special_modified_bessel_i1.default": (1, False, False),
}


@lowering("onnx", *_BESSEL)
def bessel_i(ctx, node):
    """torch's Cephes method for I0, I1 (odd: the sign of x) and their ``exp(-|x|)`` scaled forms:
    two Chebyshev series, |x| <= 8 and beyond (NaN stays; I0(inf) and I1(inf) are NaN, as
    torch's ``exp(x) c / sqrt(x)`` gives)."""
    order, scaled, short = _BESSEL["aten." + node.target.split("aten.", 1)[-1]]
    out, cst = _io(ctx)
    if not dtypes.is_floating(out):
        raise Unsupported(f"{node.target} with a {out.name} output")
    a, b = (_I0E_A, _I0E_B) if order == 0 else (_I1E_A, _I1E_B)
    if short and cst != ST.DOUBLE:
        a, b = a[-17:], b[-7:]
    x = ctx.t(bind(node, "self").self, cst)
    xa = ctx.op("Abs", x)
    c = lambda v: ctx.const(v, cst)  # noqa: E731
    near = _chbevl(ctx, ctx.op("Sub", ctx.op("Div", xa, c(2.0)), c(2.0)), a, cst)
    far = _chbevl(ctx, ctx.op("Sub", ctx.op("Div", c(32.0), xa), c(2.0)), b, cst)
    if order == 1:
        near = ctx.op("Mul", near, xa)
    if not scaled:
        e = ctx.op("Exp", xa)
        near, far = ctx.op("Mul", e, near), ctx.op("Mul", e, far)
    far = ctx.op("Div", far, ctx.op("Sqrt", xa))
    r = ctx.op("Where", ctx.op("LessOrEqual", xa, c(8.0)), near, far)
    if order == 1:
        r = ctx.op("Where", ctx.op("Less", x, c(0.0)), ctx.op("Neg", r), r)
    return ctx.cast(r, cst, out)
