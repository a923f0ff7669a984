"""ONNX ``CausalConvWithState`` (opset 27) as onnx's reference defines it: the input [B, C, L]
left-padded with the past state (or k - 1 zeros), a depthwise valid convolution with the
[C, 1, k] weight (given at run time or constant) written as the sum over its k taps of a shifted
STRIDED_SLICE times that tap's [1, C, 1] weights, the optional bias, SiLU (``silu``/``swish``:
x * LOGISTIC(x)), and the present state: the padded input's last k - 1 positions. The kernel
size must be static; k = 1 with the present state asked for is refused (an empty tensor)."""

from __future__ import annotations

import numpy as np

from ...errors import Unsupported
from ..core.emit import Emitter, attrs
from ..core.mappers import maps
from ..core.model import TensorType as T

MAX_KERNEL = 4096  # one STRIDED_SLICE, MUL and ADD per tap


def _slice_last(em: Emitter, x: int, start: int, stop_from_end: int) -> int:
    """x[:, :, start : len - stop_from_end] of a 3-D tensor (to the end when stop_from_end is 0)."""
    end_mask = 3 | (4 if stop_from_end == 0 else 0)
    y = em.tmp(em.dtype_of(x), None, "taps")
    em.op("STRIDED_SLICE", [x, em.const(np.array([0, 0, start], np.int32)),
                            em.const(np.array([0, 0, -stop_from_end], np.int32)), em.const(np.ones(3, np.int32))],
          [y], ("StridedSliceOptions", {"begin_mask": 3, "end_mask": end_mask}))
    return y


def _padded(em: Emitter, node, k: int) -> int:
    x = em.t(node.input[0])
    if len(node.input) > 3 and node.input[3]:
        y = em.tmp(em.dtype_of(x), None, "padded")
        em.op("CONCATENATION", [em.t(node.input[3]), x], [y], ("ConcatenationOptions", {"axis": 2}))
        return y
    if k == 1:
        return x
    y = em.tmp(em.dtype_of(x), None, "padded")
    em.op("PAD", [x, em.const(np.array([[0, 0], [0, 0], [k - 1, 0]], np.int32))], [y])
    return y


@maps("CausalConvWithState")
def causal_conv_with_state(em: Emitter, node) -> None:
    act = attrs(node).get("activation", b"none")
    act = act.decode() if isinstance(act, bytes) else act
    if act not in ("none", "silu", "swish"):
        raise Unsupported(f"CausalConvWithState activation={act!r}")
    w_shape = em.shape(node.input[1])
    if em.rank(node.input[0]) != 3 or len(w_shape) != 3 or not 0 < w_shape[2] <= MAX_KERNEL or w_shape[1] != 1:
        raise Unsupported(f"CausalConvWithState with a weight of shape {w_shape} (3-D [C, 1, k], k static, at most "
                          f"{MAX_KERNEL})")
    k = w_shape[2]
    outs = list(node.output) + [""]
    if outs[1] and k == 1:
        raise Unsupported("CausalConvWithState with kernel size 1 and its (empty) present state")
    padded = _padded(em, node, k)
    w = em.tmp(T.FLOAT32, [1, -1, k], "taps_weight")
    em.op("RESHAPE", [em.t(node.input[1]), em.const(np.array([1, -1, k], np.int32))], [w])
    y = None
    for j in range(k):
        tap = em.binary("MUL", _slice_last(em, padded, j, k - 1 - j), _slice_last(em, w, j, k - 1 - j))
        y = tap if y is None else em.binary("ADD", y, tap)
    if len(node.input) > 2 and node.input[2]:
        bias = em.tmp(T.FLOAT32, [-1, 1], "bias")
        em.op("RESHAPE", [em.t(node.input[2]), em.const(np.array([-1, 1], np.int32))], [bias])
        y = em.binary("ADD", y, bias)
    if act != "none":
        y = em.binary("MUL", y, em.unary("LOGISTIC", y))
    em.bind(outs[0], y)
    if outs[1]:
        em.bind(outs[1], _slice_last(em, padded, -(k - 1), 0))
