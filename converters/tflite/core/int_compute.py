"""The one rule for integer tensors reaching a TFLite builtin (``Emitter.op`` applies it to
every operator a mapper emits).

LiteRT treats int8, uint8 and int16 tensors as *quantized* in most of its arithmetic,
comparison and activation kernels, reading scales and zero points pt2x does not write (and
should not: an ONNX int8 is an integer, not a quantized real). Measured in ai-edge-litert
2.3.0 without the rule: MUL and DIV return zeros, ADD, SUB and the comparisons abort the
process, ABS, SIGN and ARG_MAX (int16) refuse at prepare, RELU of int8 returns zeros and
RELU of int32 refuses at invoke. So, for each builtin:

- ``EXACT_NARROW[code]``: the 8/16-bit types the builtin computes exactly as integers, without
  quantization parameters (data movement, max/min selections); the op is emitted as is.
- ``INT32_KERNEL``: builtins with an exact int32 kernel. 8/16-bit operands are CAST to int32 and
  8/16-bit results CAST back. LiteRT's CAST from int32 keeps the low bits (wraps), so the
  result is ONNX's and torch's two's-complement wrap-around for ADD/SUB/MUL/SUM, and exact for
  the rest (their int32 result fits the narrow type, or wraps as ONNX Runtime's does).
- ``CLAMP_OF``: the activations LiteRT computes only on floats or quantized values (RELU,
  RELU6, RELU_N1_TO_1, RELU_0_TO_1); on any integer type they become MAXIMUM/MINIMUM with
  constant bounds.
- ``NO_INT32_KERNEL``: builtins with no int32 kernel at all: an integer data operand is refused.
- Any other builtin given an 8/16-bit tensor is refused (``Unsupported``), never emitted; so is
  a type-preserving builtin whose output type is not its input's (a mapper written for floats).

tests/converters/tflite/test_tflite_integers.py runs each ONNX op over int8/uint8/int16/int32/
int64 in LiteRT against ONNX Runtime and checks that every (builtin, type) of ``EXACT_NARROW``
and every builtin of ``INT32_KERNEL`` was reached by a matching case.
"""

from __future__ import annotations

import numpy as np

from ...errors import Unsupported
from .model import NUMPY_OF
from .model import TensorType as T

__all__ = ["NARROW", "EXACT_NARROW", "INT32_KERNEL", "CLAMP_OF", "NO_INT32_KERNEL", "emit_with_integer_rule"]

NARROW = frozenset({T.INT8, T.UINT8, T.INT16})
_INTEGER = NARROW | {T.INT32, T.INT64}
_ALL, _BYTES = NARROW, frozenset({T.INT8, T.UINT8})

# builtin -> the 8/16-bit types it computes exactly without quantization parameters (measured)
EXACT_NARROW = {
    # data movement
    "CAST": _ALL, "RESHAPE": _ALL, "TRANSPOSE": _ALL, "CONCATENATION": _ALL, "GATHER": _ALL, "GATHER_ND": _ALL,
    "STRIDED_SLICE": _ALL, "EXPAND_DIMS": _ALL, "SQUEEZE": _ALL, "BROADCAST_TO": _ALL,
    "TILE": _ALL, "PAD": _ALL, "PADV2": _ALL, "MIRROR_PAD": _ALL, "SPLIT_V": _ALL, "SPLIT": _ALL,
    "SHAPE": _ALL, "SELECT_V2": _ALL,
    # selections: the result is one of the operands
    "MAXIMUM": _ALL, "MINIMUM": _ALL, "REDUCE_MAX": _BYTES, "REDUCE_MIN": _BYTES,
    "ARG_MAX": _BYTES, "ARG_MIN": _BYTES, "TOPK_V2": _BYTES,
}
# builtins whose int32 kernel computes the ONNX integer op exactly (8/16-bit operands widened)
INT32_KERNEL = frozenset({
    "ADD", "SUB", "MUL", "DIV", "FLOOR_DIV", "FLOOR_MOD", "POW", "ABS", "NEG", "SIGN", "SUM", "REDUCE_PROD",
    "MEAN", "EQUAL", "LESS", "LESS_EQUAL", "GREATER", "GREATER_EQUAL", "ARG_MAX", "ARG_MIN",
    "TOPK_V2", "ONE_HOT", "BITWISE_XOR", "CUMSUM", "RANGE", "SCATTER_ND", "REDUCE_MAX", "REDUCE_MIN",
})
# activations with no integer kernel -> (lower bound, upper bound) of the clamp they are
CLAMP_OF = {"RELU": (0, None), "RELU6": (0, 6), "RELU_N1_TO_1": (-1, 1), "RELU_0_TO_1": (0, 1)}
# builtins with no int32 kernel (float or quantized only) -> the position of their data operand,
# which is refused when it is an integer
NO_INT32_KERNEL = {"BATCH_MATMUL": 0, "FULLY_CONNECTED": 0, "PRELU": 0, "MAX_POOL_2D": 0, "AVERAGE_POOL_2D": 0,
                   "CONV_2D": 0, "DEPTHWISE_CONV_2D": 0, "TRANSPOSE_CONV": 2, "LEAKY_RELU": 0}


def emit_with_integer_rule(em, code: str, inputs: list[int], outputs: list[int], options) -> bool:
    """Emit ``code`` under the rule when it concerns the op (True), or leave it to the caller
    (False: no integer tensor needs anything)."""
    types = [em.dtype_of(i) for i in inputs if i >= 0]
    if code in CLAMP_OF and types and types[0] in _INTEGER:
        _clamp(em, code, inputs[0], outputs[0])
        return True
    data = inputs[NO_INT32_KERNEL[code]] if code in NO_INT32_KERNEL else -1
    if data >= 0 and em.dtype_of(data) in _INTEGER:
        raise Unsupported(f"TFLite's {code} has no integer kernel (only float32 and quantized types)")
    _check_same_type(em, code, inputs, outputs)
    narrow = {t for t in types + [em.dtype_of(o) for o in outputs] if t in NARROW}
    if not narrow or narrow <= EXACT_NARROW.get(code, frozenset()):
        return False
    if code not in INT32_KERNEL:
        names = ", ".join(sorted(_type_name(t) for t in narrow))
        raise Unsupported(f"TFLite's {code} on {names}: LiteRT computes these types as quantized values in most "
                          f"kernels, and {code} is neither known exact on them nor computed in int32 by pt2x")
    _in_int32(em, code, inputs, outputs, options)
    return True


# builtins whose first output has their first input's type (a mismatch is a mapper's mistake)
_SAME_TYPE = frozenset(EXACT_NARROW) - {"CAST", "SHAPE", "ARG_MAX", "ARG_MIN", "TOPK_V2", "SELECT_V2", "SPLIT"} | {
    "RESIZE_NEAREST_NEIGHBOR", "RESIZE_BILINEAR", "MAX_POOL_2D"}


def _check_same_type(em, code: str, inputs: list[int], outputs: list[int]) -> None:
    """An integer operand of a type-preserving builtin must come out in its own type."""
    if code not in _SAME_TYPE or not inputs or not outputs or inputs[0] < 0:
        return
    a, b = em.dtype_of(inputs[0]), em.dtype_of(outputs[0])
    if a != b and (a in _INTEGER or b in _INTEGER):
        raise Unsupported(f"TFLite's {code} would read {_type_name(a)} and write {_type_name(b)} "
                          "(pt2x maps it for floats only)")


def _type_name(t: int) -> str:
    return np.dtype(NUMPY_OF[t]).name


def _in_int32(em, code: str, inputs: list[int], outputs: list[int], options) -> None:
    """``code`` on int32: 8/16-bit operands CAST up (constants converted), results CAST back."""
    wide_in = [_widen(em, i) for i in inputs]
    wide_out = [em.tmp(T.INT32, em.shape_of(o), "int32") if em.dtype_of(o) in NARROW else o for o in outputs]
    em.op(code, wide_in, wide_out, options)
    for o, w in zip(outputs, wide_out):
        if o != w:
            em.op("CAST", [w], [o], ("CastOptions", {"in_data_type": T.INT32, "out_data_type": em.dtype_of(o)}))


def _widen(em, idx: int) -> int:
    if idx < 0 or em.dtype_of(idx) not in NARROW:
        return idx
    t = em.sub.tensors[idx]
    if t.data is not None:  # a constant: its int32 copy (a 0-d one's data is stored 1-d)
        return em.const(np.asarray(t.data).astype(np.int32).reshape(t.shape))
    return em.cast(idx, T.INT32)


def _clamp(em, code: str, x: int, y: int) -> None:
    """An integer activation as MAXIMUM (and MINIMUM) with its bounds in the operand's type."""
    np_type = NUMPY_OF[em.dtype_of(x)]
    info = np.iinfo(np_type)
    lo, hi = (None if b is None else np_type(min(max(b, info.min), info.max)) for b in CLAMP_OF[code])
    if hi is None:
        em.op("MAXIMUM", [x, em.const(lo)], [y])
        return
    em.op("MINIMUM", [em.binary("MAXIMUM", x, em.const(lo)), em.const(hi)], [y])
