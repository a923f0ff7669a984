"""Activations and trigonometric ONNX ops with no TFLite builtin, composed from float32 builtins
(EXP, LOG, SQRT, ATAN2, SELECT_V2...): Selu, Celu, Mish, Shrink, ThresholdedRelu, Softsign,
Sinh, Cosh, Tan, Asin, Acos, Asinh, Acosh, Atanh.

Each is ONNX's formula, arranged so float32 does not overflow or cancel where the plain one
would: branches are picked with SELECT_V2 (never a product with 0, which an inf would turn into
NaN), and near 0, where ``exp(x) - exp(-x)`` or ``log(1 + x)`` lose the relative precision of a
small result, the odd functions take their Taylor polynomial (below ``_SMALL`` its error is under
float32's rounding).
"""

from __future__ import annotations

import numpy as np

from ...errors import Unsupported
from ..core.emit import Emitter, attrs
from ..core.mappers import maps
from ..core.model import TensorType as T

_SMALL = 1e-2


class _F:
    """Float32 arithmetic on tensors of the current node (a small expression builder)."""

    def __init__(self, em: Emitter, node):
        self.em = em
        x = em.t(node.input[0])
        if em.dtype_of(x) != T.FLOAT32:
            raise Unsupported(f"{node.op_type} of a non-float tensor")
        self.x = x

    def c(self, v: float) -> int:
        return self.em.const(np.float32(v))

    def op2(self, code: str, a: int, b: int) -> int:
        return self.em.binary(code, a, b)

    def add(self, a, b):
        return self.op2("ADD", a, b)

    def sub(self, a, b):
        return self.op2("SUB", a, b)

    def mul(self, a, b):
        return self.op2("MUL", a, b)

    def div(self, a, b):
        return self.op2("DIV", a, b)

    def f(self, code: str, a: int) -> int:
        return self.em.unary(code, a)

    def cmp(self, code: str, a: int, b: int) -> int:
        return self.em.binary(code, a, b, dtype=T.BOOL)

    def select(self, cond: int, a: int, b: int) -> int:
        y = self.em.tmp(T.FLOAT32, self.em.shape_of(self.x), "select")
        self.em.op("SELECT_V2", [cond, a, b], [y])
        return y

    def small(self, series: float, formula: int) -> int:
        """``formula`` for |x| >= _SMALL, else x + series * x^3."""
        x = self.x
        taylor = self.add(x, self.mul(self.c(series), self.mul(x, self.mul(x, x))))
        return self.select(self.cmp("LESS", self.f("ABS", x), self.c(_SMALL)), taylor, formula)

    def done(self, y: int) -> None:
        self.em.bind(self.em.node.output[0], y)


def _attr(node, name: str, default: float) -> float:
    return float(attrs(node).get(name, default))


def _expm1_branch(f: _F, x: int, alpha: float) -> int:
    """alpha * (exp(x) - 1)."""
    return f.mul(f.c(alpha), f.sub(f.f("EXP", x), f.c(1.0)))


@maps("Selu")
def selu(em: Emitter, node) -> None:
    f = _F(em, node)
    alpha, gamma = _attr(node, "alpha", 1.67326319217681884765625), _attr(node, "gamma", 1.05070102214813232421875)
    y = f.select(f.cmp("GREATER", f.x, f.c(0.0)), f.x, _expm1_branch(f, f.x, alpha))
    f.done(f.mul(y, f.c(gamma)))


@maps("Celu")
def celu(em: Emitter, node) -> None:
    """max(0, x) + min(0, alpha * (exp(x / alpha) - 1))."""
    f = _F(em, node)
    alpha = _attr(node, "alpha", 1.0)
    neg = _expm1_branch(f, f.div(f.x, f.c(alpha)), alpha)
    f.done(f.add(f.op2("MAXIMUM", f.x, f.c(0.0)), f.op2("MINIMUM", neg, f.c(0.0))))


def _log1p(f: _F, u: int) -> int:
    """log(1 + u) for u >= 0 to u's relative precision: below _SMALL the series
    u - u^2/2 + u^3/3 - u^4/4 (LiteRT's XNNPACK LOG near 1 is off by ~1e-7 absolute, 2% of
    log(1 + 6e-6), measured)."""
    u2 = f.mul(u, u)
    series = f.add(f.sub(u, f.mul(f.c(0.5), u2)), f.mul(u2, f.sub(f.mul(f.c(1 / 3), u), f.mul(f.c(0.25), u2))))
    return f.select(f.cmp("LESS", u, f.c(_SMALL)), series, f.f("LOG", f.add(f.c(1.0), u)))


def _softplus(f: _F, x: int) -> int:
    """log(1 + exp(x)) as max(x, 0) + log1p(exp(-|x|)) (no overflow, and the small result of a
    very negative x keeps its precision)."""
    e = f.f("EXP", f.f("NEG", f.f("ABS", x)))
    return f.add(f.op2("MAXIMUM", x, f.c(0.0)), _log1p(f, e))


@maps("Mish")
def mish(em: Emitter, node) -> None:
    f = _F(em, node)
    f.done(f.mul(f.x, f.f("TANH", _softplus(f, f.x))))


@maps("Shrink")
def shrink(em: Emitter, node) -> None:
    """x + bias below -lambd, x - bias above lambd, else 0."""
    f = _F(em, node)
    bias, lambd = _attr(node, "bias", 0.0), _attr(node, "lambd", 0.5)
    high = f.select(f.cmp("GREATER", f.x, f.c(lambd)), f.sub(f.x, f.c(bias)), f.c(0.0))
    f.done(f.select(f.cmp("LESS", f.x, f.c(-lambd)), f.add(f.x, f.c(bias)), high))


@maps("ThresholdedRelu")
def thresholded_relu(em: Emitter, node) -> None:
    f = _F(em, node)
    f.done(f.select(f.cmp("GREATER", f.x, f.c(_attr(node, "alpha", 1.0))), f.x, f.c(0.0)))


@maps("Softsign")
def softsign(em: Emitter, node) -> None:
    f = _F(em, node)
    f.done(f.div(f.x, f.add(f.f("ABS", f.x), f.c(1.0))))


@maps("Sinh")
def sinh(em: Emitter, node) -> None:
    f = _F(em, node)
    half = f.mul(f.sub(f.f("EXP", f.x), f.f("EXP", f.f("NEG", f.x))), f.c(0.5))
    f.done(f.small(1 / 6, half))


@maps("Cosh")
def cosh(em: Emitter, node) -> None:
    f = _F(em, node)
    f.done(f.mul(f.add(f.f("EXP", f.x), f.f("EXP", f.f("NEG", f.x))), f.c(0.5)))


@maps("Tan")
def tan(em: Emitter, node) -> None:
    f = _F(em, node)
    f.done(f.div(f.f("SIN", f.x), f.f("COS", f.x)))


def _one_minus_square(f: _F, x: int) -> int:
    """(1 - x)(1 + x): 1 - x^2 without cancellation near |x| = 1."""
    return f.mul(f.sub(f.c(1.0), x), f.add(f.c(1.0), x))


@maps("Asin")
def asin(em: Emitter, node) -> None:
    f = _F(em, node)
    f.done(f.op2("ATAN2", f.x, f.f("SQRT", _one_minus_square(f, f.x))))


@maps("Acos")
def acos(em: Emitter, node) -> None:
    f = _F(em, node)
    f.done(f.op2("ATAN2", f.f("SQRT", _one_minus_square(f, f.x)), f.x))


def _log_twice(f: _F, a: int) -> int:
    """log(2a) for a >= 1e18, as log(a / 2^64) + 65 log 2: LiteRT's LOG (XNNPACK) loses accuracy
    near float32's largest values (log(3e38) came out 0.2 low) and gives 88.7 for inf."""
    scaled = f.f("LOG", f.mul(a, f.c(2.0 ** -64)))
    y = f.add(scaled, f.c(65 * np.log(2.0)))
    return f.select(f.cmp("EQUAL", a, f.c(np.inf)), a, y)


@maps("Asinh")
def asinh(em: Emitter, node) -> None:
    """sign(x) * log(|x| + sqrt(x^2 + 1)); log(2|x|) where x^2 would overflow."""
    f = _F(em, node)
    a = f.f("ABS", f.x)
    mag = f.select(f.cmp("GREATER", a, f.c(1e18)), _log_twice(f, a),
                   f.f("LOG", f.add(a, f.f("SQRT", f.add(f.mul(a, a), f.c(1.0))))))
    signed = f.select(f.cmp("LESS", f.x, f.c(0.0)), f.f("NEG", mag), mag)
    f.done(f.small(-1 / 6, signed))


@maps("Acosh")
def acosh(em: Emitter, node) -> None:
    """log(x + sqrt((x - 1)(x + 1))); log(2x) where the product would overflow."""
    f = _F(em, node)
    x = f.x
    root = f.f("SQRT", f.mul(f.sub(x, f.c(1.0)), f.add(x, f.c(1.0))))
    f.done(f.select(f.cmp("GREATER", x, f.c(1e18)), _log_twice(f, x), f.f("LOG", f.add(x, root))))


@maps("Atanh")
def atanh(em: Emitter, node) -> None:
    f = _F(em, node)
    ratio = f.div(f.add(f.c(1.0), f.x), f.sub(f.c(1.0), f.x))
    f.done(f.small(1 / 3, f.mul(f.f("LOG", ratio), f.c(0.5))))
