"""Activation fusion, the pass after the bias folding (``fold_biases``): CONV_2D,
DEPTHWISE_CONV_2D, FULLY_CONNECTED, ADD, SUB and MUL followed by RELU, RELU6 or RELU_N1_TO_1
carry the activation in their ``fused_activation_function`` field instead (TANH is not fused:
XNNPACK takes no op with a fused TANH).

It applies only to float32 values, where the producer's output has that one reader and is not a
subgraph output (``sole_float_output``; the activation then writes into the producer's place:
``absorb``). With XNNPACK, LiteRT's default, the delegate fuses a standalone clamp into the
operator before it anyway, so the values are the same; LiteRT's builtin kernels clamp a fused
activation's output with ``min(max(y, lo), hi)``, the same NaN-preserving clamp as their
standalone RELU/RELU6/RELU_N1_TO_1 and the same saturation of ±inf to ±3.4e38 their conv, fully
connected and arithmetic kernels already apply with no activation (measured in ai-edge-litert
2.3.0 on NaN, ±inf and float32's limits, XNNPACK on and off:
``tests/converters/tflite/test_tflite_fusions.py``). Quantized (int8) operators get their
activations in the QDQ pass (``quant/qdq_*``).
"""

from __future__ import annotations

from ..core.layer_constants import is_float32, unfused
from ..core.model import ACTIVATION_CODE, Op, Subgraph

__all__ = ["fuse_activations", "sole_float_output", "absorb"]

# the operators with a fused_activation_function field that XNNPACK also takes with one
_FUSES = frozenset({"CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED", "ADD", "SUB", "MUL"})


def sole_float_output(sub: Subgraph, op: Op) -> int | None:
    """The op's one output, when it is float32, unquantized, read once and not a subgraph output."""
    if len(op.outputs) != 1:
        return None
    y = op.outputs[0]
    if not is_float32(sub, y) or y in sub.outputs or sub.uses.count(y) != 1:
        return None
    return y


def absorb(sub: Subgraph, producer: Op, follower: Op) -> None:
    """``follower`` goes; ``producer`` writes its output."""
    outputs = list(follower.outputs)
    sub.remove_op(follower)
    sub.rewire(producer, outputs=outputs)


def fuse_activations(sub: Subgraph) -> None:
    for act in list(sub.ops):
        code = ACTIVATION_CODE.get(act.code)
        if code is None or len(act.inputs) != 1:
            continue
        op = sub.uses.producer.get(act.inputs[0])
        if op is None or op.code not in _FUSES or not unfused(op) or sole_float_output(sub, op) is None:
            continue
        if any(i >= 0 and sub.tensors[i].quant is not None for i in op.inputs):
            continue
        op.options = (op.options[0], {**op.options[1], "fused_activation_function": code})
        absorb(sub, op, act)
