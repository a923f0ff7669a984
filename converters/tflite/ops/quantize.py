"""ONNX ``DequantizeLinear`` and ``QuantizeLinear`` on the 8/16-bit integer types, per tensor or
per axis (a 1-D scale along ``axis``), as onnx's reference computes them in float32:
dequantize ``(float(x) - zero_point) * scale`` (exact before the one rounding of the MUL: |x -
zp| < 2^17), quantize ``clip(round_half_even(x / scale) + zero_point)`` with DIV, ROUND (LiteRT's
rounds half to even), ADD, MAXIMUM/MINIMUM and a CAST. Refused: blocked quantization
(``block_size``), int32/float8/4-bit/2-bit/16-bit-unsigned types, a ``precision`` attribute, and a
float16/bfloat16/double input to QuantizeLinear (the reference divides in that type)."""

from __future__ import annotations

import numpy as np
from onnx import TensorProto

from ...errors import Unsupported
from ..core.emit import Emitter, attrs
from ..core.mappers import maps
from ..core.model import TensorType as T

# ONNX integer type -> (TFLite type, min, max)
_QUANT_TYPES = {TensorProto.UINT8: (T.UINT8, 0, 255), TensorProto.INT8: (T.INT8, -128, 127),
                TensorProto.INT16: (T.INT16, -32768, 32767)}


def _check(node, a: dict) -> None:
    if int(a.get("block_size", 0)):
        raise Unsupported(f"{node.op_type} with block_size={a['block_size']} (blocked quantization)")
    if a.get("precision"):
        raise Unsupported(f"{node.op_type} with precision={a['precision']}")


def _broadcast(em: Emitter, node, name: str, rank: int) -> int:
    """A scale or zero point as float32, shaped to broadcast along ``axis`` when it is 1-D."""
    shape = em.shape(name)
    t = em.cast(em.t(name), T.FLOAT32)
    if not shape or shape == [1] or rank == 0:
        return t
    if len(shape) != 1:
        raise Unsupported(f"{node.op_type} with a {len(shape)}-D scale or zero point (blocked quantization)")
    axis = int(attrs(node).get("axis", 1)) % rank
    target = [1] * rank
    target[axis] = -1
    y = em.tmp(T.FLOAT32, None, "per_axis")
    em.op("RESHAPE", [t, em.const(np.asarray(target, np.int32))], [y])
    return y


def _zero_point(node) -> str:
    return node.input[2] if len(node.input) > 2 and node.input[2] else ""


def _fold_constant(em: Emitter, node, a: dict) -> bool:
    """A DequantizeLinear of constants (quantized weights and int32 biases: ``prepare`` leaves
    them unfolded for the QDQ pass) becomes a float32 constant computed as onnx's reference
    does, ``(float32(x) - float32(zp)) * scale``; True when it did."""
    x, scale = em.const_value(node.input[0]), em.const_value(node.input[1])
    zp_name = _zero_point(node)
    zp = em.const_value(zp_name) if zp_name else np.zeros((), x.dtype if x is not None else np.int8)
    if x is None or scale is None or zp is None or scale.dtype != np.float32 or scale.ndim > 1:
        return False
    if scale.size > 1 and x.ndim == 0:
        return False
    shape = [1] * x.ndim
    if scale.ndim == 1 and x.ndim:
        shape[int(a.get("axis", 1)) % x.ndim] = -1
    with np.errstate(invalid="ignore", over="ignore"):  # a file's inf/NaN scale gives the reference's NaN/inf
        real = (x.astype(np.float32) - zp.astype(np.float32).reshape(shape)) * scale.reshape(shape)
    em.consts[node.output[0]] = real.astype(np.float32)
    return True


@maps("DequantizeLinear")
def dequantize_linear(em: Emitter, node) -> None:
    a = attrs(node)
    _check(node, a)
    x_elem = em.elem(node.input[0])
    if x_elem not in _QUANT_TYPES and x_elem != TensorProto.INT32:
        raise Unsupported(f"DequantizeLinear of {TensorProto.DataType.Name(x_elem)} (uint8, int8, int16, "
                          "and int32 constants only)")
    if em.elem(node.input[1]) not in (TensorProto.FLOAT, TensorProto.FLOAT16):
        raise Unsupported("DequantizeLinear with a scale that is not float32/float16")
    if a.get("output_dtype", 0) not in (0, em.elem(node.input[1])):
        raise Unsupported(f"DequantizeLinear with output_dtype={a['output_dtype']}")
    if _fold_constant(em, node, a):
        return
    if x_elem not in _QUANT_TYPES:
        raise Unsupported(f"DequantizeLinear of {TensorProto.DataType.Name(x_elem)} computed at run time "
                          "(uint8, int8, int16 only)")
    rank = em.rank(node.input[0])
    x = em.cast(em.t(node.input[0]), T.FLOAT32)
    zp = _zero_point(node)
    if zp:
        x = em.binary("SUB", x, _broadcast(em, node, zp, rank))
    em.op("MUL", [x, _broadcast(em, node, node.input[1], rank)], [em.out()])


@maps("QuantizeLinear")
def quantize_linear(em: Emitter, node) -> None:
    a = attrs(node)
    _check(node, a)
    if em.elem(node.input[0]) != TensorProto.FLOAT or em.elem(node.input[1]) != TensorProto.FLOAT:
        raise Unsupported("QuantizeLinear of a value or scale that is not float32 (the reference divides in its type)")
    zp = _zero_point(node)
    out_elem = em.elem(zp) if zp else int(a.get("output_dtype", 0)) or TensorProto.UINT8
    if out_elem not in _QUANT_TYPES:
        raise Unsupported(f"QuantizeLinear to {TensorProto.DataType.Name(out_elem)} (uint8, int8, int16 only)")
    dtype, lo, hi = _QUANT_TYPES[out_elem]
    rank = em.rank(node.input[0])
    q = em.binary("DIV", em.t(node.input[0]), _broadcast(em, node, node.input[1], rank))
    q = em.unary("ROUND", q)
    if zp:
        q = em.binary("ADD", q, _broadcast(em, node, zp, rank))
    q = em.binary("MINIMUM", em.binary("MAXIMUM", q, em.const(np.float32(lo))), em.const(np.float32(hi)))
    em.op("CAST", [q], [em.out()], ("CastOptions", {"in_data_type": T.FLOAT32, "out_data_type": dtype}))


def _reduce_all(em: Emitter, code: str, x: int, rank: int) -> int:
    y = em.tmp(T.FLOAT32, [], "extreme")
    em.op(code, [x, em.const(np.arange(rank, dtype=np.int32))], [y], ("ReducerOptions", {"keep_dims": False}))
    return y


def _clip(em: Emitter, x: int, lo: float, hi: float) -> int:
    return em.binary("MINIMUM", em.binary("MAXIMUM", x, em.const(np.float32(lo))), em.const(np.float32(hi)))


@maps("DynamicQuantizeLinear")
def dynamic_quantize_linear(em: Emitter, node) -> None:
    """uint8 with the reference's scale (max(0, max x) - min(0, min x)) / 255 (1 / 255 when both
    are 0, where ONNX Runtime gives 1.0 and the spec's formula 0/0: y and the zero point are 0
    in all of them) and zero point rint(clip(-min / scale, 0, 255)), all in float32."""
    if em.elem(node.input[0]) != TensorProto.FLOAT:
        raise Unsupported("DynamicQuantizeLinear of a value that is not float32")
    x, rank = em.t(node.input[0]), em.rank(node.input[0])
    zero = em.const(np.float32(0))
    hi = em.binary("MAXIMUM", _reduce_all(em, "REDUCE_MAX", x, rank), zero)
    lo = em.binary("MINIMUM", _reduce_all(em, "REDUCE_MIN", x, rank), zero)
    span = em.binary("SUB", hi, lo)
    empty = em.binary("EQUAL", span, zero, dtype=T.BOOL)
    span_or_one = em.tmp(T.FLOAT32, [], "span")
    em.op("SELECT_V2", [empty, em.const(np.float32(1)), span], [span_or_one])
    scale = em.binary("DIV", span_or_one, em.const(np.float32(255)))
    zp = em.unary("ROUND", _clip(em, em.binary("SUB", zero, em.binary("DIV", lo, scale)),
                                 0, 255))
    q = _clip(em, em.binary("ADD", em.unary("ROUND", em.binary("DIV", x, scale)), zp), 0, 255)
    em.op("CAST", [q], [em.out(0)], ("CastOptions", {"in_data_type": T.FLOAT32, "out_data_type": T.UINT8}))
    em.bind(node.output[1], scale)
    em.op("CAST", [zp], [em.out(2)], ("CastOptions", {"in_data_type": T.FLOAT32, "out_data_type": T.UINT8}))
