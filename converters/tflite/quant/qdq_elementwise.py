"""int8 elementwise kernels: Add -> ADD, Mul -> MUL (each input and the output with its own
parameters: LiteRT and XNNPACK rescale), Relu -> RELU, Clip(0, 6) -> RELU6, HardSwish ->
HARD_SWISH, Sigmoid -> LOGISTIC (``qdq_registry``'s patterns).

LiteRT's int8 LOGISTIC writes its output at scale 1/256, zero point -128 (``activations.cc``
checks it): a Sigmoid quantized otherwise stays float. A dequantized constant operand (of
these and every int8 kernel) is written as an int8 constant with its parameters when its integers
and zero point fit int8 (``qdq_registry.q_input``; one that does not keeps the op float: a cast
would wrap).
"""

from __future__ import annotations

import numpy as np

from ..core.emit import Emitter
from .qdq_registry import ACTIVATION_CODE, Pattern, append, int8_op, q_input, q_output

__all__ = ["binary", "activation"]


def _binary_check(em: Emitter, p: Pattern) -> str | None:
    for s in (0, 1):
        if not p.params[s].per_tensor:
            return f"input {s} is quantized per channel (LiteRT's int8 {p.node.op_type} takes per-tensor values)"
    shapes = [em.shape(p.node.input[s]) for s in (0, 1)]
    if any(s is None for s in shapes) or max(len(s) for s in shapes) > 6:
        return "its operands' ranks are unknown or above 6"
    return None


@int8_op("Add", "Mul", slots=(0, 1), fuses=True, check=_binary_check)
def binary(em: Emitter, p: Pattern) -> None:
    code = {"Add": "ADD", "Mul": "MUL"}[p.node.op_type]
    options = (f"{code.capitalize()}Options", {"fused_activation_function": ACTIVATION_CODE[p.activation]})
    append(em, code, [q_input(em, p, 0), q_input(em, p, 1)], [q_output(em, p)], options)


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
