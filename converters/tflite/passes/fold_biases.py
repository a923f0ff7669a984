"""Bias folding, the pass after the layout pass and the merge of duplicates: a CONV_2D,
DEPTHWISE_CONV_2D or FULLY_CONNECTED with a constant bias b (pt2x writes zeros where ONNX has
none) followed by an ADD of a constant c that holds one value per output channel or one for all
(shape ``[..., 1, M]`` or a scalar, broadcasting along the output's last axis, the channels of an
NHWC conv and of a fully connected layer) takes b + c as its bias, summed in float32 when
converting (where b is 0, c itself); refused where b + c is not finite. The kernels add the bias
to the accumulated products: (acc + b) + c becomes acc + (b + c), a reassociation within float32
rounding (a hardsigmoid's + 3 after a biased conv). Float32 only, where the layer's output has
that one reader and is no subgraph output (``fuse_activations.sole_float_output``).
"""

from __future__ import annotations

import numpy as np

from ..core.layer_constants import channel_constant, constant_bias, out_channels, unfused
from ..core.model import Subgraph, Tensor, TensorType
from .fuse_activations import absorb, sole_float_output

__all__ = ["fold_biases"]

_BIASED = frozenset({"CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED"})


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
            if old is None or sole_float_output(sub, op) is None:
                continue
            with np.errstate(over="ignore"):
                bias = (old + shift).astype(np.float32)
            if not np.all(np.isfinite(bias)) or sub.tensors[add.outputs[0]].dtype != TensorType.FLOAT32:
                continue
            b = sub.add(_bias_tensor(sub, c, bias))
            sub.rewire(op, inputs=op.inputs[:2] + [b] + op.inputs[3:])
            absorb(sub, op, add)
            break


def _bias_tensor(sub: Subgraph, c: int, bias: np.ndarray) -> Tensor:
    return Tensor(sub.tensors[c].name + "/bias", TensorType.FLOAT32, [bias.size], bias)
