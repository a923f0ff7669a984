"""Elementwise ONNX ops: unary math, binary arithmetic, comparisons, logic, Where, Cast.

TFLite's binary kernels broadcast like ONNX. ``Erf`` has no builtin: it is computed with
Abramowitz & Stegun's formula 7.1.26 (absolute error below 1.5e-7, under float32's tolerance).
"""

from __future__ import annotations

import numpy as np
from onnx import TensorProto

from ...errors import Unsupported
from ..core.emit import Emitter, attrs, compute_type
from ..core.mappers import maps
from ..core.model import NUMPY_OF
from ..core.model import TensorType as T

_FLOAT = (T.FLOAT32,)

_UNARY = {
    "Relu": "RELU", "Sigmoid": "LOGISTIC", "Tanh": "TANH", "Exp": "EXP", "Log": "LOG", "Sqrt": "SQRT",
    "Abs": "ABS", "Neg": "NEG", "Floor": "FLOOR", "Ceil": "CEIL", "Sin": "SIN", "Cos": "COS",
    "Round": "ROUND", "Sign": "SIGN", "Not": "LOGICAL_NOT", "HardSwish": "HARD_SWISH",
}
_BINARY = {
    "Add": "ADD", "Sub": "SUB", "Mul": "MUL", "Div": "DIV", "Pow": "POW", "Equal": "EQUAL", "Less": "LESS",
    "Greater": "GREATER", "LessOrEqual": "LESS_EQUAL", "GreaterOrEqual": "GREATER_EQUAL", "And": "LOGICAL_AND",
    "Or": "LOGICAL_OR", "Xor": "NOT_EQUAL",
}
# kernels with no integer version in TFLite's CPU op set
_FLOAT_ONLY = {"LOGISTIC", "TANH", "EXP", "LOG", "SQRT", "SIN", "COS", "FLOOR", "CEIL", "ROUND", "HARD_SWISH"}


def _check_float(em: Emitter, code: str, x: int) -> None:
    if code in _FLOAT_ONLY and em.dtype_of(x) not in _FLOAT:
        raise Unsupported(f"TFLite's {code} computes float32 only")


@maps(*_UNARY)
def unary(em: Emitter, node) -> None:
    code = _UNARY[node.op_type]
    x = em.t(node.input[0])
    _check_float(em, code, x)
    em.op(code, [x], [em.out()])


@maps(*_BINARY)
def binary(em: Emitter, node) -> None:
    code = _BINARY[node.op_type]
    a, b = em.t(node.input[0]), em.t(node.input[1])
    if node.op_type == "Pow":
        _pow(em, a, b, node)
        return
    em.op(code, [a, b], [em.out()])


def _pow(em: Emitter, a: int, b: int, node) -> None:
    """``Pow``. A float exponent constant 2, 3, 0.5 or 1 takes the kernel torch's own special
    case computes with (MUL, MUL twice, SQRT, the base itself). An integer base with a float exponent is ONNX Runtime's
    ``(T) pow(double(x), y)``: an exponent constant of integral values >= 0 becomes an integer POW
    (exact); any other is computed in float32 and truncated towards zero (CAST), exact while |x|
    and the result stay within float32's 2^24. Otherwise the exponent takes the base's type."""
    e = em.const_value(node.input[1])
    v = float(np.asarray(e).reshape(())) if e is not None and e.size == 1 else None
    if em.dtype_of(a) not in _FLOAT and em.dtype_of(b) in _FLOAT:
        if e is None or not np.all(np.isfinite(e)) or not np.all(e == np.round(e)) or np.any(e < 0):
            y = em.binary("POW", em.cast(a, T.FLOAT32), b, dtype=T.FLOAT32)
            em.op("CAST", [y], [em.out()], ("CastOptions", {"in_data_type": T.FLOAT32,
                                                           "out_data_type": em.dtype_of(em.out())}))
            return
        b, v = em.const(np.asarray(e).astype(np.int64)), None
    if v == 1.0:
        em.bind(node.output[0], a)
    elif v == 2.0:
        em.op("MUL", [a, a], [em.out()])
    elif v == 3.0 and em.dtype_of(a) in _FLOAT:  # torch's (x * x) * x; XNNPACK takes MUL, not POW
        sq = em.binary("MUL", a, a)
        em.op("MUL", [sq, a], [em.out()])
    elif v == 0.5 and em.dtype_of(a) in _FLOAT:
        em.op("SQRT", [a], [em.out()])
    else:
        if em.dtype_of(a) not in _FLOAT and (e is None or np.any(np.asarray(e) < 0)):
            # LiteRT's integer POW fails at invoke on a negative exponent, which only the run knows
            raise Unsupported("Pow of integers with an exponent that may be negative (known only at run time)")
        em.op("POW", [a, em.cast(b, em.dtype_of(a))], [em.out()])


@maps("PRelu")
def prelu(em: Emitter, node) -> None:
    """PRELU on floats; on integers (TFLite's PRELU has no integer kernel) x < 0 ? x * slope : x."""
    x, slope = em.t(node.input[0]), em.t(node.input[1])
    if em.dtype_of(x) in _FLOAT:
        em.op("PRELU", [x, slope], [em.out()])
        return
    negative = em.binary("LESS", x, em.const(np.zeros((), NUMPY_OF[em.dtype_of(x)])), dtype=T.BOOL)
    scaled = em.binary("MUL", x, slope)
    em.op("SELECT_V2", [negative, scaled, x], [em.out()])


@maps("Mod")
def mod(em: Emitter, node) -> None:
    if attrs(node).get("fmod", 0):
        a, b = em.t(node.input[0]), em.t(node.input[1])
        if em.dtype_of(a) in _FLOAT:
            raise Unsupported("Mod with fmod=1 on floats (C fmod) has no TFLite builtin")
        q = em.binary("DIV", a, b)
        qb = em.binary("MUL", q, b)
        em.op("SUB", [a, qb], [em.out()])
        return
    a = em.t(node.input[0])
    if em.dtype_of(a) in _FLOAT:  # ONNX Runtime refuses the model
        raise Unsupported("Mod with fmod=0 on floats is invalid ONNX (fmod must be 1 for floating-point types)")
    em.op("FLOOR_MOD", [a, em.t(node.input[1])], [em.out()])


@maps("Max", "Min", "Sum")
def variadic(em: Emitter, node) -> None:
    code = {"Max": "MAXIMUM", "Min": "MINIMUM", "Sum": "ADD"}[node.op_type]
    ins = [em.t(i) for i in node.input if i]
    if len(ins) == 1:
        em.bind(node.output[0], ins[0])
        return
    acc = ins[0]
    for x in ins[1:-1]:
        acc = em.binary(code, acc, x)
    em.op(code, [acc, ins[-1]], [em.out()])


# all ones in each integer type TFLite's BITWISE_XOR takes; int64 is computed in int32, whose
# bits are the low 32 bits of the int64 result (exact within int32, see docs/tflite.md)
_ALL_ONES = {T.INT32: np.int32(-1), T.INT16: np.int16(-1), T.INT8: np.int8(-1), T.UINT8: np.uint8(255)}


def _bitwise_operand(em: Emitter, name: str) -> int:
    x = em.t(name)
    if em.dtype_of(x) not in _ALL_ONES:
        raise Unsupported(f"TFLite's BITWISE_XOR takes int8/16/32 and uint8, not {name!r}'s type")
    return x


@maps("BitwiseXor")
def bitwise_xor(em: Emitter, node) -> None:
    em.op("BITWISE_XOR", [_bitwise_operand(em, node.input[0]), _bitwise_operand(em, node.input[1])], [em.out()])


@maps("BitwiseNot")
def bitwise_not(em: Emitter, node) -> None:
    """~x as x XOR all-ones (LOGICAL_NOT for a bool, which ONNX leaves to Not but costs nothing)."""
    x = em.t(node.input[0])
    if em.dtype_of(x) == T.BOOL:
        em.op("LOGICAL_NOT", [x], [em.out()])
        return
    x = _bitwise_operand(em, node.input[0])
    em.op("BITWISE_XOR", [x, em.const(_ALL_ONES[em.dtype_of(x)])], [em.out()])


@maps("Identity")
def identity(em: Emitter, node) -> None:
    em.bind(node.output[0], em.t(node.input[0]))


@maps("Reciprocal")
def reciprocal(em: Emitter, node) -> None:
    x = em.t(node.input[0])
    em.op("DIV", [em.const(np.ones((), np.float32)), x], [em.out()])


@maps("Where")
def where(em: Emitter, node) -> None:
    c, a, b = (em.t(i) for i in node.input)
    em.op("SELECT_V2", [c, a, b], [em.out()])


@maps("Cast")
def cast(em: Emitter, node) -> None:
    to = attrs(node)["to"]
    x = em.t(node.input[0])
    dst = compute_type(to, f"Cast to {TensorProto.DataType.Name(to)}")
    if to == TensorProto.FLOAT16 and em.dtype_of(x) == T.FLOAT32:
        # keep float16's rounding: the value is computed in float32 (see emit.COMPUTE_TYPE)
        x = em.cast(x, T.FLOAT16)
    elif to == TensorProto.BFLOAT16 and em.dtype_of(x) == T.FLOAT32:
        x = round_to_bfloat16(em, x)
    y = em.cast(x, dst)
    if y == x:
        em.bind(node.output[0], x)
        return
    em.bind(node.output[0], y)


def round_to_bfloat16(em: Emitter, x: int) -> int:
    """float32 -> the nearest bfloat16 (ties to even), kept in float32: on the bits,
    ``b + 0x7FFF + ((b >> 16) & 1)`` with the low 16 bits cleared (FLOOR_MOD/FLOOR_DIV do the
    masking: TFLite has no bitwise AND). NaN/inf inputs are left to the arithmetic."""
    bits = em.unary("BITCAST", x, T.INT32, hint="bits")
    k16 = em.const(np.array(65536, np.int32))
    odd = em.binary("FLOOR_MOD", em.binary("FLOOR_DIV", bits, k16), em.const(np.array(2, np.int32)))
    up = em.binary("ADD", em.binary("ADD", bits, em.const(np.array(0x7FFF, np.int32))), odd)
    cleared = em.binary("SUB", up, em.binary("FLOOR_MOD", up, k16))
    return em.unary("BITCAST", cleared, T.FLOAT32, hint="bf16")


@maps("LeakyRelu")
def leaky_relu(em: Emitter, node) -> None:
    alpha = float(attrs(node).get("alpha", 0.01))
    em.op("LEAKY_RELU", [em.t(node.input[0])], [em.out()], ("LeakyReluOptions", {"alpha": alpha}))


@maps("Elu")
def elu(em: Emitter, node) -> None:
    if float(attrs(node).get("alpha", 1.0)) != 1.0:
        raise Unsupported("TFLite's ELU has alpha 1 only")
    em.op("ELU", [em.t(node.input[0])], [em.out()])


@maps("Gelu")
def gelu(em: Emitter, node) -> None:
    approx = attrs(node).get("approximate", "none")
    approx = approx.decode() if isinstance(approx, bytes) else approx
    em.op("GELU", [em.t(node.input[0])], [em.out()], ("GeluOptions", {"approximate": approx == "tanh"}))


@maps("Clip")
def clip(em: Emitter, node) -> None:
    x = em.t(node.input[0])
    lo = node.input[1] if len(node.input) > 1 and node.input[1] else None
    hi = node.input[2] if len(node.input) > 2 and node.input[2] else None
    lo_v, hi_v = em.const_value(lo), em.const_value(hi)
    if em.dtype_of(x) == T.FLOAT32 and lo_v is not None and hi_v is not None and float(lo_v) == 0 and float(hi_v) == 6:
        em.op("RELU6", [x], [em.out()])
        return
    if lo is None and hi is None:
        em.bind(node.output[0], x)
        return
    if lo is not None:
        x = em.binary("MAXIMUM", x, em.t(lo)) if hi is not None else x
        if hi is None:
            em.op("MAXIMUM", [x, em.t(lo)], [em.out()])
            return
    em.op("MINIMUM", [x, em.t(hi)], [em.out()])


@maps("HardSigmoid")
def hard_sigmoid(em: Emitter, node) -> None:
    """clip(alpha x + beta, 0, 1). With alpha = 1/6 in float32 (torch's hardsigmoid, whose
    alpha * 6 rounds to 1), it is torch's own form relu6(x + beta / alpha) * alpha: ADD, RELU6
    (fused into the ADD by ``fuse_activations``), MUL, equal to the clip up to float32 rounding,
    1 exactly at the top, and NaN-preserving on LiteRT's builtin kernels as RELU6 is."""
    a = attrs(node)
    x = em.t(node.input[0])
    alpha, beta = np.float32(a.get("alpha", 0.2)), np.float32(a.get("beta", 0.5))
    if alpha * np.float32(6) == np.float32(1) and em.dtype_of(x) == T.FLOAT32:
        shifted = em.binary("ADD", x, em.const(np.float32(float(beta) / float(alpha))))
        em.op("MUL", [em.unary("RELU6", shifted), em.const(alpha)], [em.out()])
        return
    y = em.binary("MUL", x, em.const(np.float32(a.get("alpha", 0.2))))
    y = em.binary("ADD", y, em.const(np.float32(a.get("beta", 0.5))))
    y = em.binary("MAXIMUM", y, em.const(np.float32(0)))
    em.op("MINIMUM", [y, em.const(np.float32(1))], [em.out()])


@maps("IsNaN")
def is_nan(em: Emitter, node) -> None:
    x = em.t(node.input[0])
    em.op("NOT_EQUAL", [x, x], [em.out()])


@maps("IsInf")
def is_inf(em: Emitter, node) -> None:
    a = attrs(node)
    x = em.t(node.input[0])
    pos, neg = a.get("detect_positive", 1), a.get("detect_negative", 1)
    if pos and neg:
        em.op("EQUAL", [em.unary("ABS", x), em.const(np.float32(np.inf))], [em.out()])
    elif pos or neg:
        em.op("EQUAL", [x, em.const(np.float32(np.inf if pos else -np.inf))], [em.out()])
    else:  # neither sign asked for: false everywhere (x > inf is, NaN included)
        em.op("GREATER", [x, em.const(np.float32(np.inf))], [em.out()])


_ERF_P = 0.3275911
_ERF_A = (0.254829592, -0.284496736, 1.421413741, -1.453152027, 1.061405429)


@maps("Erf")
def erf(em: Emitter, node) -> None:
    x = em.t(node.input[0])
    _check_float(em, "EXP", x)
    ax = em.unary("ABS", x)
    t = em.binary("ADD", em.binary("MUL", ax, em.const(np.float32(_ERF_P))), em.const(np.float32(1)))
    t = em.binary("DIV", em.const(np.float32(1)), t)
    poly = em.const(np.float32(_ERF_A[-1]))
    for a in reversed(_ERF_A[:-1]):
        poly = em.binary("ADD", em.binary("MUL", poly, t), em.const(np.float32(a)))
    poly = em.binary("MUL", poly, t)
    e = em.unary("EXP", em.unary("NEG", em.binary("MUL", x, x)))
    y = em.binary("SUB", em.const(np.float32(1)), em.binary("MUL", poly, e))
    # sign(x) as clip(x * 2^100, -1, 1): SIGN is not an XNNPACK op and cut every GELU out of the
    # delegated graph. Equal to sign(x) for |x| >= 2^-100; below, y is within the formula's
    # 1.5e-7 of erf(|x|) ~ 0 either way, so the bound holds; NaN stays NaN through y.
    big = em.binary("MUL", x, em.const(np.float32(2.0**100)))
    sign = em.binary("MINIMUM", em.binary("MAXIMUM", big, em.const(np.float32(-1))), em.const(np.float32(1)))
    em.op("MUL", [sign, y], [em.out()])


@maps("Softplus")
def softplus(em: Emitter, node) -> None:
    """log(1 + exp(x)) as max(x, 0) + log1p(exp(-|x|)): no overflow for large |x|."""
    x = em.t(node.input[0])
    _check_float(em, "EXP", x)
    e = em.unary("EXP", em.unary("NEG", em.unary("ABS", x)))
    em.op("ADD", [em.binary("MAXIMUM", x, em.const(np.float32(0))), _log1p(em, e)], [em.out()])


# log1p(u) = 2 atanh(s), s = u / (2 + u): the series 2 (s + s^3/3 + ... + s^15/15), within
# 1.3e-8 relative for u in [0, 1] (s <= 1/3)
_LOG1P_TERMS = tuple(2.0 / (2 * k + 1) for k in range(8))


def _log1p(em: Emitter, u: int) -> int:
    """log(1 + u) for u in [0, 1] without LOG: LOG(1 + u) loses 1 + u's rounding (0.1% of the
    result at u = 5e-5, where softplus(-10) and Mish are) and XNNPACK's LOG is off by ~1e-7
    near 1 (half the result at u = 2e-7)."""
    s = em.binary("DIV", u, em.binary("ADD", u, em.const(np.float32(2))))
    s2 = em.binary("MUL", s, s)
    poly = em.const(np.float32(_LOG1P_TERMS[-1]))
    for c in reversed(_LOG1P_TERMS[:-1]):
        poly = em.binary("ADD", em.binary("MUL", poly, s2), em.const(np.float32(c)))
    return em.binary("MUL", poly, s)


@maps("Atan")
def atan(em: Emitter, node) -> None:
    x = em.t(node.input[0])
    _check_float(em, "EXP", x)
    shape = em.unary("SHAPE", x, T.INT32, [em.rank(node.input[0])], ("ShapeOptions", {"out_type": T.INT32}), "shape")
    ones = em.tmp(T.FLOAT32, em.shape_of(x), "ones")
    em.op("FILL", [shape, em.const(np.float32(1))], [ones])  # ATAN2 does not broadcast
    em.op("ATAN2", [x, ones], [em.out()])
