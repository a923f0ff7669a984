"""The gamma family: digamma, polygamma of order 1 (trigamma), lgamma and mvlgamma, in float32 —
digamma and trigamma by torch's own methods (Cephes' asymptotic series, recurrence and reflection,
in torch's operation order), lgamma by a Chebyshev fit around the zeros at 1 and 2 (coefficients
fitted with mpmath) and Stirling's series beyond, with reflection below 0."""

from __future__ import annotations

import math

import numpy as np

from ..aten.args import bind
from ..aten.dtypes import ST
from ..aten.registry import lowering
from ..errors import Unsupported
from .ops_special import _c, _clenshaw, _float_out, _polevl


# digamma's asymptotic series in z = 1/x^2 (Cephes' A, highest power first), and psi(10)
_PSI_A = (8.33333333333333333333E-2, -2.10927960927960927961E-2, 7.57575757575757575758E-3,
          -4.16666666666666666667E-3, 3.96825396825396825397E-3, -8.33333333333333333333E-3,
          8.33333333333333333333E-2)
_PSI_10 = 2.25175258906672110764


def _digamma(ctx, x, cst):
    """torch's float digamma: -inf at +0, +inf at -0, NaN at negative integers and -inf;
    ``psi(1 - x) - pi / tan(pi r)`` below 0 (r: x's fractional part, folded to [-1/2, 1/2]; that
    term in float64, as torch's, which LiteRT computes in float32); above, ``psi(x) = psi(x + k) - sum 1/(x + i)``
    up to x >= 10 (ten masked steps), then psi(10) or the asymptotic series."""
    zero, one = _c(ctx, 0.0, cst), _c(ctx, 1.0, cst)
    neg = ctx.op("Less", x, zero)
    v = ctx.op("Where", neg, ctx.op("Sub", one, x), x)
    acc = zero
    ten = _c(ctx, 10.0, cst)
    for _ in range(10):  # v > 0 reaches 10 within ten steps
        m = ctx.op("Less", v, ten)
        acc = ctx.op("Where", m, ctx.op("Sub", acc, ctx.op("Div", one, v)), acc)
        v = ctx.op("Where", m, ctx.op("Add", v, one), v)
    z = ctx.op("Div", one, ctx.op("Mul", v, v))
    y = ctx.op("Where", ctx.op("Less", v, _c(ctx, 1e17, cst)), ctx.op("Mul", z, _polevl(ctx, z, _PSI_A, cst)), zero)
    series = ctx.op("Sub", ctx.op("Sub", ctx.op("Add", acc, ctx.op("Log", v)), ctx.op("Div", _c(ctx, 0.5, cst), v)), y)
    r = ctx.op("Where", ctx.op("Equal", v, ten), ctx.op("Add", acc, _c(ctx, _PSI_10, cst)), series)
    frac = ctx.op("Sub", x, ctx.op("Ceil", x))  # in (-1, 0] below 0, exact
    frac = ctx.cast(ctx.op("Sub", frac, ctx.op("Round", frac)), cst, ST.DOUBLE)  # [-1/2, 1/2]: cot has period pi
    pi = _c(ctx, math.pi, ST.DOUBLE)  # torch takes pi / tan(pi r) in float64 too
    pr = ctx.op("Mul", pi, frac)  # ONNX Runtime has no float64 Tan
    cot = ctx.cast(ctx.op("Div", ctx.op("Mul", pi, ctx.op("Cos", pr)), ctx.op("Sin", pr)), ST.DOUBLE, cst)
    r = ctx.op("Where", neg, ctx.op("Sub", r, cot), r)
    integer = ctx.op("Equal", x, ctx.op("Floor", x))
    r = ctx.op("Where", ctx.op("And", neg, integer), _c(ctx, math.nan, cst), r)
    at0 = ctx.op("Where", ctx.op("Less", ctx.op("Div", one, x), zero), _c(ctx, math.inf, cst), _c(ctx, -math.inf, cst))
    return ctx.op("Where", ctx.op("Equal", x, zero), at0, r)


def _sin2_pi_x(ctx, x):
    """``sin(p)^2`` of torch's float32 ``p = pi_f * x`` (pi_f: pi rounded to float32), kept accurate
    near the poles where runtimes' Sin is not: for |x| < 2^22, ``p - k pi = pi_f r + k (pi_f - pi)
    - e`` (k = round(x), r = x - k exact, e = pi_f x - p exact by Dekker's product), and sin^2
    has period pi; beyond, Sin(p) itself."""
    f = np.float32
    pi_f = f(math.pi)
    c = lambda v: _c(ctx, v, ST.FLOAT)  # noqa: E731
    p = ctx.op("Mul", c(pi_f), x)
    a_big = f(f(4097) * pi_f)
    a_hi = f(a_big - f(a_big - pi_f))
    a_lo = f(pi_f - a_hi)
    big = ctx.op("Less", ctx.op("Abs", x), c(2.0 ** 22))
    xs = ctx.op("Where", big, x, c(0.0))  # keeps 4097 x finite
    t = ctx.op("Mul", c(4097.0), xs)
    b_hi = ctx.op("Sub", t, ctx.op("Sub", t, xs))
    b_lo = ctx.op("Sub", xs, b_hi)
    ps = ctx.op("Mul", c(pi_f), xs)
    e = ctx.op("Add", ctx.op("Sub", ctx.op("Mul", c(a_hi), b_hi), ps), ctx.op("Mul", c(a_hi), b_lo))
    e = ctx.op("Add", ctx.op("Add", e, ctx.op("Mul", c(a_lo), b_hi)), ctx.op("Mul", c(a_lo), b_lo))
    k = ctx.op("Round", xs)
    red = ctx.op("Add", ctx.op("Mul", c(pi_f), ctx.op("Sub", xs, k)), ctx.op("Mul", k, c(float(pi_f) - math.pi)))
    sn = ctx.op("Where", big, ctx.op("Sin", ctx.op("Sub", red, e)), ctx.op("Sin", p))  # pi_f x = p + e
    return ctx.op("Mul", sn, sn)


def _trigamma(ctx, x):
    """torch's float32 trigamma: ``pi^2 / sin^2(pi x) - psi1(1 - x)`` below 1/2 (torch's sinf of
    the rounded pi x: finite at the poles), six steps of ``1/x^2`` up, the asymptotic series."""
    f = np.float32
    c = lambda v: _c(ctx, v, ST.FLOAT)  # noqa: E731
    one = c(1.0)
    low = ctx.op("Less", x, c(0.5))
    acc = ctx.op("Where", low, ctx.op("Neg", ctx.op("Div", c(f(math.pi) * f(math.pi)), _sin2_pi_x(ctx, x))), c(0.0))
    v = ctx.op("Where", low, ctx.op("Sub", one, x), x)
    for _ in range(6):
        acc = ctx.op("Add", acc, ctx.op("Div", one, ctx.op("Mul", v, v)))
        v = ctx.op("Add", v, one)
    ixx = ctx.op("Div", one, ctx.op("Mul", v, v))
    tail = ctx.op("Sub", c(f(1) / f(6)), ctx.op("Mul", ixx, ctx.op("Sub", c(f(1) / f(30)), ctx.op("Mul", ixx, c(f(1) / f(42))))))
    tail = ctx.op("Add", ctx.op("Add", one, ctx.op("Div", one, ctx.op("Mul", c(2.0), v))), ctx.op("Mul", ixx, tail))
    acc = ctx.op("Add", acc, ctx.op("Div", tail, v))
    return ctx.op("Where", low, ctx.op("Neg", acc), acc)


@lowering("onnx", "aten.digamma.default")
def digamma(ctx, node):
    """The logarithmic derivative of gamma (float32)."""
    out, _ = _float_out(ctx, node, f32=True)
    return ctx.cast(_digamma(ctx, ctx.t(bind(node, "self").self, ST.FLOAT), ST.FLOAT), ST.FLOAT, out)


@lowering("onnx", "aten.polygamma.default", "aten.special_polygamma.default")
def polygamma(ctx, node):
    """The n-th derivative of digamma, float32, n = 0 (digamma) and 1 (trigamma); n >= 2 sums a
    Hurwitz zeta series whose length depends on the value: refused."""
    a = bind(node, "n", "self")
    if a.n not in (0, 1):
        raise Unsupported(f"polygamma of order {a.n!r} (orders 0 and 1 are lowered)")
    out, _ = _float_out(ctx, node, f32=True)
    x = ctx.t(a.self, ST.FLOAT)
    return ctx.cast(_digamma(ctx, x, ST.FLOAT) if a.n == 0 else _trigamma(ctx, x), ST.FLOAT, out)


# lgamma on [0.75, 3.5]: (x - 1)(x - 2) R(x), R's Chebyshev coefficients in t = (x - 2.125) / 1.375,
# fitted here by interpolation at 200 Chebyshev nodes of mpmath's loggamma (40 digits), cut at
# degree 18 (next terms below 3e-10); the zeros at 1 and 2 exact, so relative accuracy holds there
_LGAMMA_MID = (
    0.44500366257196744, -0.15387398471563643, 0.03701966416278021, -0.010201443525387805,
    0.0030219688647782996, -0.0009353364836412048, 0.00029799757032352716, -9.688810091254218e-05,
    3.197507114405695e-05, -1.0673620832837294e-05, 3.5952563746910472e-06, -1.2199095812381877e-06,
    4.1645176087401484e-07, -1.429005683517559e-07, 4.9251657023852146e-08, -1.7040282718205903e-08,
    5.9156356480016825e-09, -2.059825495726031e-09, 7.19162331908052e-10,
)
_LGAMMA_LO, _LGAMMA_HI = 0.75, 3.5
# Stirling's series: B_2k / (2k (2k - 1)), k = 1..7 (below 1e-9 from x = 3.5 on)
_STIRLING = tuple(b / ((2 * k) * (2 * k - 1)) for k, b in
                  enumerate((1 / 6, -1 / 30, 1 / 42, -1 / 30, 5 / 66, -691 / 2730, 7 / 6), start=1))


def _lgamma_pos(ctx, x, cst):
    """log Gamma(x) for x > 0 (NaN stays): ``lgamma(x + 1) - log x`` below 0.75, the fitted series
    to 3.5, Stirling's series beyond (+inf at +inf)."""
    one = _c(ctx, 1.0, cst)
    lo = ctx.op("Less", x, _c(ctx, _LGAMMA_LO, cst))
    v = ctx.op("Where", lo, ctx.op("Add", x, one), x)
    t = ctx.op("Div", ctx.op("Sub", v, _c(ctx, (_LGAMMA_LO + _LGAMMA_HI) / 2, cst)),
               _c(ctx, (_LGAMMA_HI - _LGAMMA_LO) / 2, cst))
    mid = ctx.op("Mul", ctx.op("Mul", ctx.op("Sub", v, one), ctx.op("Sub", v, _c(ctx, 2.0, cst))),
                 _clenshaw(ctx, t, _LGAMMA_MID, cst))
    mid = ctx.op("Where", lo, ctx.op("Sub", mid, ctx.op("Log", x)), mid)
    iv = ctx.op("Div", one, x)
    corr = ctx.op("Mul", iv, _polevl(ctx, ctx.op("Mul", iv, iv), _STIRLING[::-1], cst))
    big = ctx.op("Sub", ctx.op("Mul", ctx.op("Sub", x, _c(ctx, 0.5, cst)), ctx.op("Log", x)), x)
    big = ctx.op("Add", ctx.op("Add", big, _c(ctx, 0.5 * math.log(2 * math.pi), cst)), corr)
    big = ctx.op("Where", ctx.op("Equal", x, _c(ctx, math.inf, cst)), x, big)
    return ctx.op("Where", ctx.op("Less", x, _c(ctx, _LGAMMA_HI, cst)), mid, big)


def _lgamma(ctx, x, cst):
    """log |Gamma(x)|: below 0, ``log(pi / |sin(pi x)|) - lgamma(1 - x)`` (sin of x's distance to
    the nearest integer, exact); +inf at 0, -0, the negative integers and +-inf; NaN stays."""
    zero = _c(ctx, 0.0, cst)
    neg = ctx.op("Less", x, zero)
    pos = _lgamma_pos(ctx, ctx.op("Where", neg, ctx.op("Sub", _c(ctx, 1.0, cst), x), x), cst)
    r = ctx.op("Sub", x, ctx.op("Round", x))
    sin = ctx.op("Abs", ctx.op("Sin", ctx.op("Mul", _c(ctx, math.pi, cst), r)))
    refl = ctx.op("Sub", ctx.op("Sub", _c(ctx, math.log(math.pi), cst), ctx.op("Log", sin)), pos)
    out = ctx.op("Where", neg, refl, pos)
    pole = ctx.op("Or", ctx.op("IsInf", x), ctx.op("And", neg, ctx.op("Equal", sin, zero)))  # also past 2^23
    return ctx.op("Where", pole, _c(ctx, math.inf, cst), out)


@lowering("onnx", "aten.lgamma.default")
def lgamma(ctx, node):
    """log |Gamma(x)|, to about 3e-7 relative in float32 (also at the zeros 1 and 2; near the
    negative zeros, about 1e-7 absolute)."""
    out, cst = _float_out(ctx, node, f32=True)
    return ctx.cast(_lgamma(ctx, ctx.t(bind(node, "self").self, cst), cst), cst, out)


@lowering("onnx", "aten.mvlgamma.default")
def mvlgamma(ctx, node):
    """The multivariate log-gamma of order p: ``sum_i lgamma(x - i/2) + p (p - 1) / 4 log(pi)``,
    i = p - 1 .. 0 as torch sums them. torch raises where some x <= (p - 1) / 2; the converted
    model cannot raise: it gives lgamma's values there."""
    a = bind(node, "self", "p")
    if not isinstance(a.p, int) or isinstance(a.p, bool) or a.p < 1:
        raise Unsupported(f"mvlgamma with p={a.p!r}")
    out, cst = _float_out(ctx, node, f32=True)
    x = ctx.t(a.self, cst)
    acc = None
    for i in range(a.p - 1, -1, -1):
        term = _lgamma(ctx, ctx.op("Add", x, _c(ctx, -i / 2, cst)) if i else x, cst)
        acc = term if acc is None else ctx.op("Add", acc, term)
    k = a.p * (a.p - 1) * math.log(math.pi) / 4
    return ctx.cast(ctx.op("Add", acc, _c(ctx, k, cst)) if k else acc, cst, out)
