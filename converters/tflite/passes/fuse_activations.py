"""Float fusions into the operators LiteRT gives a bias and a fused activation: the pass after
the layout pass and the merge of duplicates.

- **Bias folding.** A CONV_2D, DEPTHWISE_CONV_2D or FULLY_CONNECTED with a constant bias b
  (pt2x writes zeros where ONNX has none) followed by an ADD of a constant c that holds one value
  per output channel or one for all (shape ``[..., 1, M]`` or a scalar, broadcasting along the output's last axis, the
  channels of an NHWC conv and of a fully connected layer) takes b + c as its bias, summed in
  float32 when converting (where b is 0, c itself); refused where b + c is not finite. The
  kernels add the bias to the accumulated products: (acc + b) + c becomes acc + (b + c), a
  reassociation within float32 rounding (a hardsigmoid's + 3 after a biased conv).
- **Activation fusion.** CONV_2D, DEPTHWISE_CONV_2D, FULLY_CONNECTED, ADD, SUB and MUL followed
  by RELU, RELU6 or RELU_N1_TO_1 carry the activation in their ``fused_activation_function``
  field instead (TANH is not fused: XNNPACK takes no op with a fused TANH).

Both apply only to float32 values, where the producer's output has that one reader and is not a
subgraph output (the ADD or activation then writes into the producer's place). With XNNPACK,
LiteRT's default, the delegate fuses a standalone clamp into the operator before it anyway, so
the values are the same; LiteRT's builtin kernels clamp a fused activation's output with
``min(max(y, lo), hi)``, the same NaN-preserving clamp as their standalone RELU/RELU6/RELU_N1_TO_1
and the same saturation of ±inf to ±3.4e38 their conv, fully connected and arithmetic kernels
already apply with no activation (measured in ai-edge-litert 2.3.0 on NaN, ±inf and float32's
limits, XNNPACK on and off: ``tests/converters/tflite/test_tflite_fusions.py``).
Quantized (int8) operators get their activations in the QDQ pass (``qdq_*``).
"""

from __future__ import annotations

import numpy as np

from ..core.layer_constants import channel_constant, constant_bias, is_float32, out_channels, unfused
from ..core.model import ACTIVATION_CODE, Op, Subgraph, Tensor, TensorType

__all__ = ["fold_biases", "fuse_activations"]

# the operators with a fused_activation_function field that XNNPACK also takes with one
_FUSES = frozenset({"CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED", "ADD", "SUB", "MUL"})
_BIASED = frozenset({"CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED"})


def _sole_float_output(sub: Subgraph, op: Op) -> int | None:
    """The op's one output, when it is float32, unquantized, read once and not a subgraph output."""
    if len(op.outputs) != 1:
        return None
    y = op.outputs[0]
    if not is_float32(sub, y) or y in sub.outputs or sub.uses.count(y) != 1:
        return None
    return y


def _absorb(sub: Subgraph, producer: Op, follower: Op) -> None:
    """``follower`` goes; ``producer`` writes its output."""
    outputs = list(follower.outputs)
    sub.remove_op(follower)
    sub.rewire(producer, outputs=outputs)


def fold_biases(sub: Subgraph) -> None:
    for add in list(sub.ops):
        if add.code != "ADD" or len(add.inputs) != 2 or not unfused(add):
            continue
        for k in (0, 1):
            x, c = add.inputs[k], add.inputs[1 - k]
            op = sub.uses.producer.get(x)
            if op is None or op.code not in _BIASED or not unfused(op):
                continue
            m = out_channels(sub, op)
            rank = 2 if op.code == "FULLY_CONNECTED" else 4  # a fully connected output has at least 2 dims
            shift = channel_constant(sub, c, m, rank) if m is not None else None
            old = constant_bias(sub, op, m) if shift is not None else None
            if old is None or _sole_float_output(sub, op) is None:
                continue
            with np.errstate(over="ignore"):
                bias = (old + shift).astype(np.float32)
            if not np.all(np.isfinite(bias)) or sub.tensors[add.outputs[0]].dtype != TensorType.FLOAT32:
                continue
            b = sub.add(_bias_tensor(sub, c, bias))
            sub.rewire(op, inputs=op.inputs[:2] + [b] + op.inputs[3:])
            _absorb(sub, op, add)
            break


def _bias_tensor(sub: Subgraph, c: int, bias: np.ndarray) -> Tensor:
    return Tensor(sub.tensors[c].name + "/bias", TensorType.FLOAT32, [bias.size], bias)


def fuse_activations(sub: Subgraph) -> None:
    for act in list(sub.ops):
        code = ACTIVATION_CODE.get(act.code)
        if code is None or len(act.inputs) != 1:
            continue
        op = sub.uses.producer.get(act.inputs[0])
        if op is None or op.code not in _FUSES or not unfused(op) or _sole_float_output(sub, op) is None:
            continue
        if any(i >= 0 and sub.tensors[i].quant is not None for i in op.inputs):
            continue
        op.options = (op.options[0], {**op.options[1], "fused_activation_function": code})
        _absorb(sub, op, act)
