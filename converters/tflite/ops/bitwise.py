"""ONNX ``BitwiseAnd``/``BitwiseOr`` without a TFLite AND/OR builtin, exactly, in int32: for any
two's-complement integers ``p + q = (p ^ q) + 2 (p & q)``, so ``p & q = (p + q - (p ^ q)) / 2``
with BITWISE_XOR, ADD, SUB and FLOOR_DIV, which cannot overflow int32 for 16-bit operands. 8/16-bit
operands are widened to int32 and the result cast back; int32 operands (and int64, computed as
int32: the low 32 bits, see docs/tflite.md) are split into a signed high and an unsigned low
16-bit half (FLOOR_DIV/FLOOR_MOD by 2^16), combined half by half, and rejoined as hi * 2^16 + lo.
``p | q = (p ^ q) + (p & q)``: the two have no bit in common, so the sum has no carry."""

from __future__ import annotations

import numpy as np

from ...errors import Unsupported
from ..core.emit import Emitter
from ..core.mappers import maps
from ..core.model import TensorType as T

_NARROW = (T.INT8, T.INT16, T.UINT8)
_HALF = np.int32(1 << 16)


def _and_small(em: Emitter, p: int, q: int) -> int:
    """p & q for operands within 16 bits (signed or not) held in int32."""
    total = em.binary("ADD", p, q)
    carries = em.binary("SUB", total, em.binary("BITWISE_XOR", p, q))
    return em.binary("FLOOR_DIV", carries, em.const(np.int32(2)))


def _halves(em: Emitter, x: int) -> tuple[int, int]:
    return em.binary("FLOOR_DIV", x, em.const(_HALF)), em.binary("FLOOR_MOD", x, em.const(_HALF))


def _and32(em: Emitter, a: int, b: int) -> int:
    (ah, al), (bh, bl) = _halves(em, a), _halves(em, b)
    high = em.binary("MUL", _and_small(em, ah, bh), em.const(_HALF))
    return em.binary("ADD", high, _and_small(em, al, bl))


def _operands(em: Emitter, node) -> tuple[int, int, int]:
    """(a, b) as int32 and the type to give the result."""
    a, b = em.t(node.input[0]), em.t(node.input[1])
    dtype = em.dtype_of(a)
    if dtype not in _NARROW + (T.INT32,) or em.dtype_of(b) != dtype:
        raise Unsupported(f"{node.op_type} of {node.input[0]!r}'s type (int8/16/32/64 and uint8 only)")
    return em.cast(a, T.INT32), em.cast(b, T.INT32), dtype


def _and(em: Emitter, a: int, b: int, dtype: int) -> int:
    return _and_small(em, a, b) if dtype in _NARROW else _and32(em, a, b)


@maps("BitwiseAnd")
def bitwise_and(em: Emitter, node) -> None:
    a, b, dtype = _operands(em, node)
    em.bind(node.output[0], em.cast(_and(em, a, b, dtype), dtype))


@maps("BitwiseOr")
def bitwise_or(em: Emitter, node) -> None:
    a, b, dtype = _operands(em, node)
    y = em.binary("ADD", em.binary("BITWISE_XOR", a, b), _and(em, a, b, dtype))
    em.bind(node.output[0], em.cast(y, dtype))
