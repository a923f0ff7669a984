"""Special functions and value predicates: ``erfc``, ``erfcx``, ``logit``, ``sinc``, ``xlogy``,
``xlog1py``, the normal distribution's ``ndtr``/``log_ndtr``/``ndtri``, ``entr``, ``erfinv``,
``digamma``/``polygamma`` (orders 0 and 1), ``lgamma``/``mvlgamma``, angle conversions, sign and
infinity tests, ``heaviside``, ``ldexp``, ``isclose``, ``copysign``, ``angle`` of real tensors.

Floating results are computed in the output's compute type (integer and boolean inputs are cast
to it: torch promotes them to the default float dtype first). NaN and the infinities follow
torch's kernels, case by case in each docstring. The functions ONNX lacks are composed of ops
the TFLite target maps: ``erfc`` and ``erfcx`` from a Chebyshev series of the scaled function
(accurate to about 3e-7 relative in float32, also where ``1 - erf`` would be all rounding),
``lgamma`` from a fitted series around its zeros 1 and 2 and Stirling's series, ``log1p`` from a
short series near 0 and ``log(u) * y / (u - 1)`` elsewhere; where torch has an explicit
algorithm (Cephes' ndtri, digamma, trigamma, erfinv) it is followed step for step. A float64
output of the float32 series is refused (and ONNX Runtime has no float64 Erf).
The sign bit of a NaN cannot be read below opset 26 (no BitCast): ``signbit`` and
``copysign`` of a floating sign source are refused.
"""
from __future__ import annotations

import math

from ..aten import dtypes
from ..aten.args import bind
from ..aten.dtypes import ST
from ..aten.registry import lowering
from ..errors import Unsupported

_F32_ONLY = (ST.FLOAT, ST.HALF, ST.BFLOAT16)

# Chebyshev coefficients c_k of g(t) = (x + 2) * erfcx(x), t = (x - 2) / (x + 2), x >= 0 (t in
# [-1, 1)); fitted here by interpolation at 400 Chebyshev nodes of erfcx computed with mpmath
# at 40 digits, cut at degree 16 (the next terms are below 1e-11; g tends to 1/sqrt(pi)).
_ERFCX_K = 2.0
_ERFCX_CHEB = (
    1.1540674772329393, -0.7108738425409967, 0.1301903176575729, -0.007342284791673208,
    -0.002225689486705549, 0.00032151659830772063, 6.556063148352109e-05, -1.0884883290902536e-05,
    -3.0309331106814775e-06, 2.859521637077478e-07, 1.64692176327641e-07, 2.592569972037495e-09,
    -8.309443282339402e-09, -1.2694118822764721e-09, 2.864164327931462e-10, 1.232083413071905e-10,
    4.122142627238645e-12,
)


def _float_out(ctx, node, *, f32: bool = False):
    """The output dtype and its compute type; refuses a non-floating output, and with ``f32`` one
    not computed in float32."""
    out = ctx.out_info().dtype
    if not dtypes.is_floating(out) or (f32 and out not in _F32_ONLY):
        raise Unsupported(f"{node.target} with a {ST(out).name} output")
    return out, ctx.compute_type(out)


def _c(ctx, v, cst):
    return ctx.const(v, cst)


def _clenshaw(ctx, t, coeffs, cst):
    """``sum c_k T_k(t)`` by Clenshaw's recurrence."""
    t2 = ctx.op("Mul", t, _c(ctx, 2.0, cst))
    b1, b2 = _c(ctx, coeffs[-1], cst), None
    for ck in reversed(coeffs[1:-1]):
        nb = ctx.op("Add", ctx.op("Mul", t2, b1), _c(ctx, ck, cst))
        b1, b2 = (nb if b2 is None else ctx.op("Sub", nb, b2)), b1
    r = ctx.op("Add", ctx.op("Mul", t, b1), _c(ctx, coeffs[0], cst))
    return r if b2 is None else ctx.op("Sub", r, b2)


def _erfcx_nonneg(ctx, xa, cst):
    """erfcx(xa) for xa >= 0 (or NaN, which stays); +inf gives 0 (``t`` would be NaN)."""
    k = _c(ctx, _ERFCX_K, cst)
    den = ctx.op("Add", xa, k)
    t = ctx.op("Div", ctx.op("Sub", xa, k), den)  # 1 from about 4e7 on: g(1) / den is 1 / (sqrt(pi) x)
    r = ctx.op("Div", _clenshaw(ctx, t, _ERFCX_CHEB, cst), den)
    return ctx.op("Where", ctx.op("Equal", xa, _c(ctx, math.inf, cst)), _c(ctx, 0.0, cst), r)


def _erfc(ctx, x, cst):
    """erfc(x): ``exp(-x^2) erfcx(|x|)`` for x >= 0, 2 minus that below 0; NaN stays."""
    xa = ctx.op("Abs", x)
    e = ctx.op("Mul", ctx.op("Exp", ctx.op("Neg", ctx.op("Mul", xa, xa))), _erfcx_nonneg(ctx, xa, cst))
    return ctx.op("Where", ctx.op("Less", x, _c(ctx, 0.0, cst)), ctx.op("Sub", _c(ctx, 2.0, cst), e), e)


def _log1p(ctx, y, cst):
    """log(1 + y): the series to y^5 where |y| < 2^-7, else ``log(u) * y / (u - 1)`` with u = 1 + y
    (exact u - 1), ``log(u)`` where u is +inf; y < -1 gives NaN, y = -1 -inf, NaN stays."""
    u = ctx.op("Add", y, _c(ctx, 1.0, cst))
    series = _c(ctx, 1.0 / 5, cst)  # y (1 - y (1/2 - y (1/3 - y (1/4 - y/5))))
    for k in (4, 3, 2, 1):
        series = ctx.op("Sub", _c(ctx, 1.0 / k, cst), ctx.op("Mul", y, series))
    series = ctx.op("Mul", y, series)
    lu = ctx.op("Log", u)
    fixed = ctx.op("Mul", lu, ctx.op("Div", y, ctx.op("Sub", u, _c(ctx, 1.0, cst))))
    fixed = ctx.op("Where", ctx.op("Equal", u, _c(ctx, math.inf, cst)), lu, fixed)
    small = ctx.op("Less", ctx.op("Abs", y), _c(ctx, 2.0 ** -7, cst))
    return ctx.op("Where", small, series, fixed)


@lowering("onnx", "aten.erfc.default")
def erfc(ctx, node):
    """1 - erf(x), accurate where erf(x) is near 1; erfc(+-inf) = 0, 2."""
    out, cst = _float_out(ctx, node, f32=True)
    return ctx.cast(_erfc(ctx, ctx.t(bind(node, "self").self, cst), cst), cst, out)


@lowering("onnx", "aten.special_erfcx.default")
def erfcx(ctx, node):
    """exp(x^2) erfc(x): the series for x >= 0, ``2 exp(x^2) - erfcx(-x)`` below (+inf from
    x < -9.4 in float32, as torch's); erfcx(+inf) = 0."""
    out, cst = _float_out(ctx, node, f32=True)
    x = ctx.t(bind(node, "self").self, cst)
    xa = ctx.op("Abs", x)
    pos = _erfcx_nonneg(ctx, xa, cst)
    neg = ctx.op("Sub", ctx.op("Mul", _c(ctx, 2.0, cst), ctx.op("Exp", ctx.op("Mul", x, x))), pos)
    return ctx.cast(ctx.op("Where", ctx.op("Less", x, _c(ctx, 0.0, cst)), neg, pos), cst, out)


@lowering("onnx", "aten.special_ndtr.default")
def ndtr(ctx, node):
    """The standard normal CDF as torch computes it: ``(1 + erf(x / sqrt 2)) / 2``."""
    out, cst = _float_out(ctx, node, f32=True)
    x = ctx.t(bind(node, "self").self, cst)
    e = ctx.op("Erf", ctx.op("Mul", x, _c(ctx, math.sqrt(0.5), cst)))
    return ctx.cast(ctx.op("Mul", ctx.op("Add", e, _c(ctx, 1.0, cst)), _c(ctx, 0.5, cst)), cst, out)


@lowering("onnx", "aten.special_log_ndtr.default")
def log_ndtr(ctx, node):
    """log of the normal CDF, torch's two branches with t = x / sqrt 2: ``log(erfcx(-t) / 2) - t^2``
    for x < -1, ``log1p(-erfc(t) / 2)`` from -1 on."""
    out, cst = _float_out(ctx, node, f32=True)
    x = ctx.t(bind(node, "self").self, cst)
    t = ctx.op("Mul", x, _c(ctx, math.sqrt(0.5), cst))
    half = _c(ctx, 0.5, cst)
    low = ctx.op("Sub", ctx.op("Log", ctx.op("Mul", _erfcx_nonneg(ctx, ctx.op("Neg", t), cst), half)),
                 ctx.op("Mul", t, t))
    high = _log1p(ctx, ctx.op("Neg", ctx.op("Mul", _erfc(ctx, t, cst), half)), cst)
    return ctx.cast(ctx.op("Where", ctx.op("Less", x, _c(ctx, -1.0, cst)), low, high), cst, out)


@lowering("onnx", "aten.logit.default")
def logit(ctx, node):
    """``log(z / (1 - z))``, z = x clamped to [eps, 1 - eps] when eps >= 0 is given (NaN stays)."""
    a = bind(node, "self", "eps")
    out, cst = _float_out(ctx, node)
    x = ctx.t(a.self, cst)
    if a.eps is not None:
        if not isinstance(a.eps, (int, float)) or isinstance(a.eps, bool):
            raise Unsupported("logit with an eps computed at run time")
        if a.eps > 0.5:  # torch's scalar loop gives lo there, its vectorized clamp hi
            raise Unsupported(f"logit with eps={a.eps} > 0.5 (an empty clamp range)")
        if a.eps >= 0:
            np_t = dtypes.to_numpy(cst).type
            lo = np_t(a.eps)
            hi = np_t(np_t(1) - lo)
            x = ctx.op("Where", ctx.op("Less", x, _c(ctx, lo, cst)), _c(ctx, lo, cst), x)
            x = ctx.op("Where", ctx.op("Greater", x, _c(ctx, hi, cst)), _c(ctx, hi, cst), x)
    r = ctx.op("Log", ctx.op("Div", x, ctx.op("Sub", _c(ctx, 1.0, cst), x)))
    return ctx.cast(r, cst, out)


@lowering("onnx", "aten.sinc.default")
def sinc(ctx, node):
    """``sin(pi x) / (pi x)``, 1 at x = 0; NaN and the infinities give NaN."""
    out, cst = _float_out(ctx, node)
    x = ctx.t(bind(node, "self").self, cst)
    px = ctx.op("Mul", x, _c(ctx, math.pi, cst))
    r = ctx.op("Div", ctx.op("Sin", px), px)  # px is 0 only where x is (or where a runtime flushes a subnormal)
    return ctx.cast(ctx.op("Where", ctx.op("Equal", px, _c(ctx, 0.0, cst)), _c(ctx, 1.0, cst), r), cst, out)


def _x_times(ctx, node, log_of_other):
    a = bind(node, "self", "other")
    out, cst = _float_out(ctx, node, f32=log_of_other is _log1p)
    x, y = ctx.t(a.self, cst), ctx.t(a.other, cst)
    r = ctx.op("Mul", x, log_of_other(ctx, y, cst))
    r = ctx.op("Where", ctx.op("Equal", x, _c(ctx, 0.0, cst)), _c(ctx, 0.0, cst), r)
    return ctx.cast(ctx.op("Where", ctx.op("IsNaN", y), y, r), cst, out)


@lowering("onnx", "aten.xlogy.Tensor", "aten.xlogy.Scalar_Self", "aten.xlogy.Scalar_Other")
def xlogy(ctx, node):
    """``x * log(y)``; 0 where x == 0 unless y is NaN (then NaN)."""
    return _x_times(ctx, node, lambda c, y, cst: c.op("Log", y))


@lowering("onnx", "aten.special_xlog1py.default", "aten.special_xlog1py.self_scalar",
          "aten.special_xlog1py.other_scalar")
def xlog1py(ctx, node):
    """``x * log1p(y)``; 0 where x == 0 unless y is NaN (then NaN)."""
    return _x_times(ctx, node, _log1p)


@lowering("onnx", "aten.special_entr.default")
def entr(ctx, node):
    """``-x log x`` for x > 0, 0 at 0, -inf below 0, NaN stays."""
    out, cst = _float_out(ctx, node)
    x = ctx.t(bind(node, "self").self, cst)
    zero = _c(ctx, 0.0, cst)
    r = ctx.op("Neg", ctx.op("Mul", x, ctx.op("Log", x)))
    r = ctx.op("Where", ctx.op("Equal", x, zero), zero, r)
    r = ctx.op("Where", ctx.op("Less", x, zero), _c(ctx, -math.inf, cst), r)
    return ctx.cast(r, cst, out)


@lowering("onnx", "aten.deg2rad.default", "aten.rad2deg.default")
def deg2rad(ctx, node):
    """x times pi/180 (180/pi), the factor rounded to the compute type as torch's scalar is."""
    out, cst = _float_out(ctx, node)
    k = math.pi / 180 if "deg2rad" in node.target else 180 / math.pi
    return ctx.cast(ctx.op("Mul", ctx.t(bind(node, "self").self, cst), _c(ctx, k, cst)), cst, out)


def _all_false(ctx, x):
    xi = ctx.t(x, ST.INT)
    return ctx.op("Not", ctx.op("Equal", xi, xi))


@lowering("onnx", "aten.isposinf.default", "aten.isneginf.default")
def isposinf(ctx, node):
    """x == +inf (-inf); false for every integer and boolean."""
    x = bind(node, "self").self
    st = ctx.dtype(x)
    if not dtypes.is_floating(st):
        return _all_false(ctx, x)
    cst = ctx.compute_type(st)
    inf = math.inf if "isposinf" in node.target else -math.inf
    return ctx.op("Equal", ctx.t(x, cst), _c(ctx, inf, cst))


@lowering("onnx", "aten.signbit.default")
def signbit(ctx, node):
    """x < 0 for integers, false for booleans (a float's sign bit, -0.0's and a NaN's, is refused)."""
    x = bind(node, "self").self
    st = ctx.dtype(x)
    if dtypes.is_floating(st):
        raise Unsupported("signbit of a floating tensor: a NaN's sign bit is not readable in ONNX before BitCast (opset 26)")
    if st == ST.BOOL:
        return _all_false(ctx, x)
    cst = ctx.compute_type(st)
    return ctx.op("Less", ctx.t(x, cst), _c(ctx, 0, cst))


@lowering("onnx", "aten.copysign.Tensor", "aten.copysign.Scalar")
def copysign(ctx, node):
    """|self| with the sign bit of ``other``: of a Python number (read exactly), or of an integer or
    boolean tensor (negative below 0); a floating tensor ``other`` is refused (a NaN's sign bit)."""
    a = bind(node, "self", "other")
    o = a.other
    if not isinstance(o, (int, float)) and dtypes.is_floating(ctx.dtype(o)):
        raise Unsupported("copysign with a floating tensor as sign: a NaN's sign bit is not readable in ONNX "
                          "before BitCast (opset 26)")
    out, cst = _float_out(ctx, node)
    m = ctx.op("Abs", ctx.t(a.self, cst))
    if isinstance(o, (int, float)):
        return ctx.cast(ctx.op("Neg", m) if math.copysign(1.0, float(o)) < 0 else m, cst, out)
    if ctx.dtype(o) == ST.BOOL:  # never negative; the result still takes the broadcast shape
        return ctx.cast(ctx.op("Expand", m, ctx.shape_of(o)), cst, out)
    ocst = ctx.compute_type(ctx.dtype(o))
    neg = ctx.op("Less", ctx.t(o, ocst), _c(ctx, 0, ocst))
    return ctx.cast(ctx.op("Where", neg, ctx.op("Neg", m), m), cst, out)


@lowering("onnx", "aten.heaviside.default")
def heaviside(ctx, node):
    """``values`` where x == 0, else 1 where x > 0 and 0 below (NaN gives 0, as torch's kernel)."""
    a = bind(node, "self", "values")
    out = ctx.out_info().dtype
    cst = ctx.compute_type(out) if out != ST.BOOL else ST.INT
    x = ctx.t(a.self, cst)
    step = ctx.cast(ctx.op("Greater", x, _c(ctx, 0, cst)), ST.BOOL, cst)
    r = ctx.op("Where", ctx.op("Equal", x, _c(ctx, 0, cst)), ctx.t(a.values, cst), step)
    return ctx.cast(r, cst, out)


@lowering("onnx", "aten.ldexp.Tensor")
def ldexp(ctx, node):
    """``self * 2^other``. A floating ``self`` with an integer ``other``: torch's ``ldexp`` kernel,
    the exponent wrapped to int32 and the scaling exact (``0 * 2^2000`` is 0, ``1e-30 * 2^200``
    finite): the exponent clamped to +-L (past which every value is 0 or inf already) and applied
    as four powers of two in range, each product exact. Otherwise ``self * 2.0 ** other`` in the
    output dtype, as torch composes it."""
    a = bind(node, "self", "other")
    out, cst = _float_out(ctx, node)
    x = ctx.t(a.self, cst)
    ost = ctx.dtype(a.other)
    if not (dtypes.is_floating(ctx.dtype(a.self)) and dtypes.is_integral(ost)):
        return ctx.cast(ctx.op("Mul", x, ctx.op("Pow", _c(ctx, 2.0, cst), ctx.t(a.other, cst))), cst, out)
    limit = 2200 if cst == ST.DOUBLE else 400
    n = ctx.t(a.other, ST.INT)  # Cast wraps int64 to int32, as torch's kernel takes an int
    for cmp, bound in (("Greater", limit), ("Less", -limit)):
        n = ctx.op("Where", ctx.op(cmp, n, _c(ctx, bound, ST.INT)), _c(ctx, bound, ST.INT), n)
    q = ctx.op("Div", n, _c(ctx, 4, ST.INT))  # truncates: |q| and |n - 3q| <= limit / 4 + 3
    r = ctx.op("Sub", n, ctx.op("Mul", q, _c(ctx, 3, ST.INT)))
    pq = ctx.op("Pow", _c(ctx, 2.0, cst), ctx.cast(q, ST.INT, cst))
    for _ in range(3):
        x = ctx.op("Mul", x, pq)  # the partial products move monotonically from x to the result
    return ctx.cast(ctx.op("Mul", x, ctx.op("Pow", _c(ctx, 2.0, cst), ctx.cast(r, ST.INT, cst))), cst, out)


@lowering("onnx", "aten.isclose.default")
def isclose(ctx, node):
    """``self == other``, or both NaN with ``equal_nan``, or ``|self - other|`` finite and at most
    ``atol + |rtol * other|``, that error computed in float32 for integer and boolean inputs
    (torch casts them to the default dtype before subtracting)."""
    a = bind(node, "self", "other", "rtol", "atol", "equal_nan")
    for v in (a.rtol, a.atol):
        if not isinstance(v, (int, float)) or isinstance(v, bool) or not v >= 0:
            raise Unsupported("isclose with a tolerance computed at run time or negative")
    st = ctx.dtype(a.self)
    if ctx.dtype(a.other) != st or dtypes.is_complex(st) or st in (ST.HALF, ST.BFLOAT16):
        # float16/bfloat16: torch rounds the difference and the bound to the dtype; a boundary
        # case could flip if they were compared in float32
        raise Unsupported(f"isclose of {ST(st).name} and {ST(ctx.dtype(a.other)).name}")
    cst = ctx.compute_type(st) if st != ST.BOOL else ST.INT
    close = ctx.op("Equal", ctx.t(a.self, cst), ctx.t(a.other, cst))
    fl = dtypes.is_floating(st)
    ft = cst if fl else ST.FLOAT
    x, y = ctx.t(a.self, ft), ctx.t(a.other, ft)
    if a.equal_nan and fl:
        close = ctx.op("Or", close, ctx.op("And", ctx.op("IsNaN", x), ctx.op("IsNaN", y)))
    if a.rtol == 0 and a.atol == 0:
        return close
    diff = ctx.op("Abs", ctx.op("Sub", x, y))
    allowed = ctx.op("Add", _c(ctx, a.atol, ft), ctx.op("Abs", ctx.op("Mul", y, _c(ctx, a.rtol, ft))))
    within = ctx.op("And", ctx.op("LessOrEqual", diff, allowed), ctx.op("Not", ctx.op("IsInf", diff)))
    return ctx.op("Or", close, within)  # a NaN difference fails LessOrEqual


@lowering("onnx", "aten.angle.default")
def angle(ctx, node):
    """Of a real tensor: pi below 0, else 0; NaN stays."""
    x = bind(node, "self").self
    out, cst = _float_out(ctx, node)
    if dtypes.is_complex(ctx.dtype(x)):
        raise Unsupported("angle of a complex tensor")
    xc = ctx.t(x, cst)
    r = ctx.op("Where", ctx.op("Less", xc, _c(ctx, 0.0, cst)), _c(ctx, math.pi, cst), _c(ctx, 0.0, cst))
    return ctx.cast(ctx.op("Where", ctx.op("IsNaN", xc), xc, r), cst, out)


# erfinv: torch's rational first guesses (central |y| <= 0.7, and the tail in sqrt(-log((1-|y|)/2))),
# then two Newton steps on erf
_ERFINV_A = (0.886226899, -1.645349621, 0.914624893, -0.140543331)
_ERFINV_B = (-2.118377725, 1.442710462, -0.329097515, 0.012229801)
_ERFINV_C = (-1.970840454, -1.624906493, 3.429567803, 1.641345311)
_ERFINV_D = (3.543889200, 1.637067800)


def _horner(ctx, z, coeffs, cst, lead_one=False):
    """``c0 + c1 z + ... + cn z^n`` (``lead_one``: times z, plus 1: the denominators' form)."""
    r = _c(ctx, coeffs[-1], cst)
    for ck in reversed(coeffs[:-1]):
        r = ctx.op("Add", ctx.op("Mul", r, z), _c(ctx, ck, cst))
    return ctx.op("Add", ctx.op("Mul", r, z), _c(ctx, 1.0, cst)) if lead_one else r


@lowering("onnx", "aten.erfinv.default")
def erfinv(ctx, node):
    """The inverse of erf on [-1, 1] (+-inf at +-1, NaN outside and for NaN), by torch's method:
    a rational guess refined by two Newton steps on ONNX's Erf."""
    out, cst = _float_out(ctx, node, f32=True)
    y = ctx.t(bind(node, "self").self, cst)
    one = _c(ctx, 1.0, cst)
    ya = ctx.op("Abs", y)
    z = ctx.op("Mul", y, y)
    central = ctx.op("Div", ctx.op("Mul", y, _horner(ctx, z, _ERFINV_A, cst)),
                     _horner(ctx, z, _ERFINV_B, cst, lead_one=True))
    w = ctx.op("Sqrt", ctx.op("Neg", ctx.op("Log", ctx.op("Div", ctx.op("Sub", one, ya), _c(ctx, 2.0, cst)))))
    num = _horner(ctx, w, _ERFINV_C, cst)
    num = ctx.op("Where", ctx.op("Less", y, _c(ctx, 0.0, cst)), ctx.op("Neg", num), num)
    tail = ctx.op("Div", num, _horner(ctx, w, _ERFINV_D, cst, lead_one=True))
    x = ctx.op("Where", ctx.op("LessOrEqual", ya, _c(ctx, 0.7, cst)), central, tail)
    k = _c(ctx, 2.0 / math.sqrt(math.pi), cst)
    for _ in range(2):
        slope = ctx.op("Mul", k, ctx.op("Exp", ctx.op("Neg", ctx.op("Mul", x, x))))
        x = ctx.op("Sub", x, ctx.op("Div", ctx.op("Sub", ctx.op("Erf", x), y), slope))
    inf = ctx.op("Where", ctx.op("Less", y, _c(ctx, 0.0, cst)), _c(ctx, -math.inf, cst), _c(ctx, math.inf, cst))
    x = ctx.op("Where", ctx.op("Equal", ya, one), inf, x)
    x = ctx.op("Where", ctx.op("Greater", ya, one), _c(ctx, math.nan, cst), x)
    return ctx.cast(x, cst, out)


# ndtri: Cephes' rational approximations as torch carries them: P0/Q0 in (y - 1/2)^2 for the
# central part, P1/Q1 (z = 1/sqrt(-2 log y) from 1/8 down) and P2/Q2 (beyond x = 8) for the tails
_NDTRI_P0 = (
    -59.96335010141079, 98.00107541859997, -56.67628574690703, 13.931260938727968,
    -1.2391658386738125,
)
_NDTRI_Q0 = (
    1.0, 1.9544885833814176, 4.676279128988815, 86.36024213908905,
    -225.46268785411937, 200.26021238006066, -82.03722561683334, 15.90562251262117,
    -1.1833162112133,
)
_NDTRI_P1 = (
    4.0554489230596245, 31.525109459989388, 57.16281922464213, 44.08050738932008,
    14.684956192885803, 2.1866330685079025, -0.1402560791713545, -0.03504246268278482,
    -0.0008574567851546854,
)
_NDTRI_Q1 = (
    1.0, 15.779988325646675, 45.39076351288792, 41.3172038254672,
    15.04253856929075, 2.504649462083094, -0.14218292285478779, -0.03808064076915783,
    -0.0009332594808954574,
)
_NDTRI_P2 = (
    3.2377489177694603, 6.915228890689842, 3.9388102529247444, 1.3330346081580755,
    0.20148538954917908, 0.012371663481782003, 0.00030158155350823543, 2.6580697468673755e-06,
    6.239745391849833e-09,
)
_NDTRI_Q2 = (
    1.0, 6.02427039364742, 3.6798356385616087, 1.3770209948908132,
    0.21623699359449663, 0.013420400608854318, 0.00032801446468212774, 2.8924786474538068e-06,
    6.790194080099813e-09,
)


def _polevl(ctx, z, coeffs, cst):
    """``c0 z^n + ... + cn`` (Cephes' polevl: highest power first)."""
    r = _c(ctx, coeffs[0], cst)
    for ck in coeffs[1:]:
        r = ctx.op("Add", ctx.op("Mul", r, z), _c(ctx, ck, cst))
    return r


@lowering("onnx", "aten.special_ndtri.default")
def ndtri(ctx, node):
    """The inverse of the normal CDF by torch's (Cephes') method: -inf at 0, inf at 1, NaN outside
    [0, 1] and for NaN."""
    out, cst = _float_out(ctx, node)
    if cst not in (ST.FLOAT, ST.DOUBLE):
        raise Unsupported(f"special_ndtri computed in {ST(cst).name}")
    np_t = dtypes.to_numpy(cst).type
    e2 = np_t(0.13533528323661269189)  # exp(-2)
    y0 = ctx.t(bind(node, "self").self, cst)
    one = _c(ctx, 1.0, cst)
    upper = ctx.op("Greater", y0, _c(ctx, np_t(1) - e2, cst))
    y = ctx.op("Where", upper, ctx.op("Sub", one, y0), y0)
    yc = ctx.op("Sub", y, _c(ctx, 0.5, cst))
    y2 = ctx.op("Mul", yc, yc)
    ratio = ctx.op("Div", ctx.op("Mul", y2, _polevl(ctx, y2, _NDTRI_P0, cst)), _polevl(ctx, y2, _NDTRI_Q0, cst))
    central = ctx.op("Mul", ctx.op("Add", yc, ctx.op("Mul", yc, ratio)), _c(ctx, 2.50662827463100050242, cst))
    x = ctx.op("Sqrt", ctx.op("Mul", _c(ctx, -2.0, cst), ctx.op("Log", y)))
    x0 = ctx.op("Sub", x, ctx.op("Div", ctx.op("Log", x), x))
    z = ctx.op("Div", one, x)
    x1 = [ctx.op("Div", ctx.op("Mul", z, _polevl(ctx, z, p, cst)), _polevl(ctx, z, q, cst))
          for p, q in ((_NDTRI_P1, _NDTRI_Q1), (_NDTRI_P2, _NDTRI_Q2))]
    tail = ctx.op("Sub", x0, ctx.op("Where", ctx.op("Less", x, _c(ctx, 8.0, cst)), x1[0], x1[1]))
    tail = ctx.op("Where", upper, tail, ctx.op("Neg", tail))
    r = ctx.op("Where", ctx.op("Greater", y, _c(ctx, e2, cst)), central, tail)
    r = ctx.op("Where", ctx.op("Or", ctx.op("Less", y0, _c(ctx, 0.0, cst)), ctx.op("Greater", y0, one)),
               _c(ctx, math.nan, cst), r)
    r = ctx.op("Where", ctx.op("Equal", y0, one), _c(ctx, math.inf, cst), r)
    return ctx.cast(ctx.op("Where", ctx.op("Equal", y0, _c(ctx, 0.0, cst)), _c(ctx, -math.inf, cst), r), cst, out)
