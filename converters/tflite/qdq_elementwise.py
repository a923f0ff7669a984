"""int8 elementwise kernels: Add -> ADD, Mul -> MUL (each input and the output with its own
parameters: LiteRT and XNNPACK rescale), Relu -> RELU, Clip(0, 6) -> RELU6, HardSwish ->
HARD_SWISH, Sigmoid -> LOGISTIC (``qdq_registry``'s patterns).

LiteRT's int8 LOGISTIC writes its output at scale 1/256, zero point -128 (``activations.cc``
checks it): a Sigmoid quantized otherwise stays float. A dequantized constant operand of
Add/Mul is written as an int8 constant with its parameters (per tensor only), when its integers
and zero point fit int8 (an int32 constant that does not keeps the op float: a cast would wrap).
"""

from __future__ import annotations

import numpy as np
from onnx import TensorProto

from .emit import Emitter
from .qdq_params import storage_quant
from .qdq_registry import ACTIVATION_CODE, Pattern, append, int8_op, q_input, q_output, qtensor

__all__ = ["binary", "activation"]


def _operand(em: Emitter, p: Pattern, slot: int) -> int:
    """The int8 tensor of input ``slot``: the quantized value, or a dequantized constant as int8."""
    source = p.dq[slot].input[0]
    c = em.const_value(source)
    if c is None:
        return q_input(em, p, slot)
    prm = p.params[slot]  # _binary_check saw the integers fit int8
    stored = (c.astype(np.int64) + (prm.stored_zero_point() - prm.zero_point)).astype(np.int8)
    return _int8_const(em, stored, storage_quant(prm))


def _int8_const(em: Emitter, data: np.ndarray, quant) -> int:
    idx = qtensor(em, data.shape, quant, "const")
    em.sub.tensors[idx].data = np.ascontiguousarray(data)
    return idx


def _int8_storage(em: Emitter, p: Pattern, slot: int) -> np.ndarray | None:
    """A dequantized constant operand's integers and zero point in int8 storage (the uint8
    shift applied), as int64; None for a run-time value."""
    c = em.const_value(p.dq[slot].input[0])
    if c is None:
        return None
    prm = p.params[slot]
    shift = prm.stored_zero_point() - prm.zero_point
    return np.append(c.astype(np.int64).reshape(-1) + shift, prm.stored_zero_point())


def _constant_reason(em: Emitter, p: Pattern, slot: int) -> str | None:
    stored = _int8_storage(em, p, slot)
    if stored is None or (stored.min(initial=0) >= -128 and stored.max(initial=0) <= 127):
        return None
    elem = TensorProto.DataType.Name(p.params[slot].elem)
    return (f"input {slot} dequantizes a {elem} constant whose integers or zero point do not fit int8 "
            f"(LiteRT's int8 {p.node.op_type} takes int8 operands)")


def _binary_check(em: Emitter, p: Pattern) -> str | None:
    for s in (0, 1):
        if not p.params[s].per_tensor:
            return f"input {s} is quantized per channel (LiteRT's int8 {p.node.op_type} takes per-tensor values)"
        reason = _constant_reason(em, p, s)
        if reason:
            return reason
    shapes = [em.shape(p.node.input[s]) for s in (0, 1)]
    if any(s is None for s in shapes) or max(len(s) for s in shapes) > 6:
        return "its operands' ranks are unknown or above 6"
    return None


@int8_op("Add", "Mul", slots=(0, 1), fuses=True, check=_binary_check)
def binary(em: Emitter, p: Pattern) -> None:
    code = {"Add": "ADD", "Mul": "MUL"}[p.node.op_type]
    options = (f"{code.capitalize()}Options", {"fused_activation_function": ACTIVATION_CODE[p.activation]})
    append(em, code, [_operand(em, p, 0), _operand(em, p, 1)], [q_output(em, p)], options)


def _clip_code(em: Emitter, p: Pattern) -> str | None:
    if p.node.op_type != "Clip":
        return {"Relu": "RELU", "HardSwish": "HARD_SWISH", "Sigmoid": "LOGISTIC"}[p.node.op_type]
    ins = list(p.node.input) + ["", ""]
    lo = em.const_value(ins[1]) if ins[1] else None
    hi = em.const_value(ins[2]) if ins[2] else None
    if lo is not None and lo.size == 1 and float(lo) == 0.0:
        if not ins[2]:
            return "RELU"
        if hi is not None and hi.size == 1 and float(hi) == 6.0:
            return "RELU6"
    return None


def _activation_check(em: Emitter, p: Pattern) -> str | None:
    if not p.params[0].per_tensor:
        return "its input is quantized per channel"
    code = _clip_code(em, p)
    if code is None:
        return "it is a Clip other than to [0, inf) or [0, 6] (no int8 builtin clamps elsewhere)"
    if code == "LOGISTIC" and p.out.scalar() != (np.float32(1 / 256), -128):
        return (f"its output is quantized at scale {p.out.scalar()[0]:g}, zero point {p.out.scalar()[1]} (int8 "
                "storage); LiteRT's int8 LOGISTIC writes scale 1/256, zero point -128")
    return None


@int8_op("Relu", "Clip", "HardSwish", "Sigmoid", check=_activation_check)
def activation(em: Emitter, p: Pattern) -> None:
    code = _clip_code(em, p)  # RELU6 at a rounding tie: RELU, then the pass's MINIMUM (Pattern.six)
    append(em, "RELU" if code == "RELU6" and p.six is not None else code, [q_input(em, p, 0)], [q_output(em, p)])
