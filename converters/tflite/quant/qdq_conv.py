"""int8 kernels with weights: Conv -> CONV_2D / DEPTHWISE_CONV_2D, Gemm and MatMul by a constant
-> FULLY_CONNECTED (``qdq_registry``'s patterns).

LiteRT's and XNNPACK's int8 convolution and fully-connected kernels take (read from LiteRT's
``conv.cc``/``depthwise_conv.cc``/``fully_connected.cc`` and XNNPACK's delegate): int8 per-tensor
input and output; int8 weights, symmetric (zero point 0), one scale per output channel along
``quantized_dimension`` (0 for OHWI and [N, K], 3 for the depthwise 1HWC filter); an int32 bias
at scale ``s_in * s_w[c]``, zero point 0; ``s_in * s_w / s_out`` in [2^-32, 256). The bias is
``round(b / (s_in * s_w))`` (a real bias from a float constant or a dequantized int32); one that
does not fit int32 keeps the op float. A per-tensor weight scale is written once per channel.
ONNX's pads that equal TFLite's SAME padding for the input's (static) size become ``padding:
SAME`` (the kernels pad with the input's zero point, real 0: exact); others a PAD of the zero
point before a VALID kernel.
"""

from __future__ import annotations

import numpy as np
from onnx import TensorProto

from ..core.emit import Emitter, attrs
from ..core.model import Quantization
from ..core.model import TensorType as T
from ..ops.nn import _SAME, _conv_axes
from .qdq_registry import (ACTIVATION_CODE, Pattern, append, int8_op, q_input, q_output, qtensor,
                           requant_scale_ok, transpose_q)
from ..core.window import tflite_same_padding

__all__ = ["conv", "fully_connected"]

_INT32 = np.iinfo(np.int32)


def _weight_reason(p: Pattern, slot: int, channel_axis: int, channels: int) -> str | None:
    w = p.params[slot]
    if w.elem != TensorProto.INT8:
        return f"its weights are {TensorProto.DataType.Name(w.elem)} (LiteRT's int8 kernels take int8 weights)"
    if np.any(w.zero_point != 0):
        return "its weights have a non-zero zero point (LiteRT's int8 kernels take symmetric weights)"
    if w.axis is not None and (w.axis != channel_axis or w.scale.size != channels):
        return f"its weights are quantized along axis {w.axis}, not the output channels"
    return None


def _channel_scales(p: Pattern, slot: int, channels: int) -> np.ndarray:
    s = p.params[slot].scale.astype(np.float32).reshape(-1)
    return np.broadcast_to(s, (channels,)).astype(np.float32) if s.size == 1 else s


def _bias_reason(p: Pattern, w_slot: int, channels: int) -> str | None:
    s_in, _ = p.params[0].scalar()
    s_w = _channel_scales(p, w_slot, channels)
    if not requant_scale_ok(np.float32(s_in) * s_w, p.out.scalar()[0]):
        return "its input scale x weight scale / output scale is outside [2^-32, 256)"
    if p.bias is not None:
        if p.bias.size not in (1, channels):
            return f"its bias has {p.bias.size} values for {channels} channels"
        q = np.round(np.broadcast_to(p.bias.reshape(-1), (channels,)) / (np.float64(s_in) * s_w))
        if not np.all(np.isfinite(q)) or q.min() < _INT32.min or q.max() > _INT32.max:
            return "its bias does not fit int32 at scale input scale x weight scale"
    return None


def _bias(em: Emitter, p: Pattern, w_slot: int, channels: int) -> int:
    s_in, _ = p.params[0].scalar()
    s_w = _channel_scales(p, w_slot, channels)
    scale = (np.float32(s_in) * s_w).astype(np.float32)
    real = np.zeros(channels) if p.bias is None else np.broadcast_to(p.bias.reshape(-1), (channels,))
    data = np.round(real / scale.astype(np.float64)).astype(np.int32)
    quant = Quantization(tuple(float(v) for v in scale), (0,) * channels, 0)
    return _const_q(em, data, quant, "bias", T.INT32)


def _const_q(em: Emitter, data: np.ndarray, quant: Quantization, hint: str, dtype: int = T.INT8) -> int:
    idx = qtensor(em, data.shape, quant, hint, dtype)
    em.sub.tensors[idx].data = np.ascontiguousarray(data)
    return idx


def _weights(em: Emitter, p: Pattern, slot: int, data: np.ndarray, dimension: int, channels: int) -> int:
    quant = Quantization(tuple(float(v) for v in _channel_scales(p, slot, channels)), (0,) * channels, dimension)
    return _const_q(em, data.astype(np.int8), quant, "weights")


def _conv_check(em: Emitter, p: Pattern) -> str | None:
    node, a = p.node, attrs(p.node)
    if em.rank(node.input[0]) != 4:
        return "it is not a 2-D convolution (the int8 kernels here are CONV_2D and DEPTHWISE_CONV_2D)"
    w = em.const_value(p.dq[1].input[0])
    if w is None or w.ndim != 4:
        return "its weights are not a 4-D constant"
    m, c = w.shape[0], w.shape[1] * int(a.get("group", 1))
    group = int(a.get("group", 1))
    if group != 1 and not (group == c and w.shape[1] == 1 and m % c == 0):
        return f"it is a grouped convolution (group={group}) that is not depthwise"
    _conv_axes(em, node, a, list(w.shape[2:]))  # raises Unsupported for a geometry TFLite lacks
    return _weight_reason(p, 1, 0, m) or _bias_reason(p, 1, m)


@int8_op("Conv", slots=(0, 1), bias_slot=2, fuses=True, check=_conv_check)
def conv(em: Emitter, p: Pattern) -> None:
    node, a = p.node, attrs(p.node)
    w = em.const_value(p.dq[1].input[0])
    m, group = w.shape[0], int(a.get("group", 1))
    axes, padding = _conv_axes(em, node, a, list(w.shape[2:]))
    x = transpose_q(em, q_input(em, p, 0), [0, 2, 3, 1])
    if tflite_same_padding(axes):
        padding = _SAME
    else:
        x = _pad(em, x, axes)
    geometry = {"padding": padding, "stride_h": axes[0].stride, "stride_w": axes[1].stride,
                "dilation_h_factor": axes[0].dilation, "dilation_w_factor": axes[1].dilation,
                "fused_activation_function": ACTIVATION_CODE[p.activation]}
    y = qtensor(em, None, em.sub.tensors[q_output(em, p)].quant, "conv")
    bias = _bias(em, p, 1, m)
    if group > 1:  # depthwise: [1, kh, kw, C * multiplier], channels along dimension 3
        filt = _weights(em, p, 1, w.transpose(1, 2, 3, 0), 3, m)
        append(em, "DEPTHWISE_CONV_2D", [x, filt, bias], [y],
               ("DepthwiseConv2DOptions", {**geometry, "depth_multiplier": m // group}))
    else:  # OHWI, channels along dimension 0
        filt = _weights(em, p, 1, w.transpose(0, 2, 3, 1), 0, m)
        append(em, "CONV_2D", [x, filt, bias], [y], ("Conv2DOptions", geometry))
    transpose_q(em, y, [0, 3, 1, 2], em.t(p.q.output[0]))


def _pad(em: Emitter, x: int, axes) -> int:
    """PAD (of the zero point: real 0) by the axes' begin/end pads."""
    if not any(ax.begin or ax.end for ax in axes):
        return x
    spec = em.const(np.array([[0, 0]] + [[ax.begin, ax.end] for ax in axes] + [[0, 0]], np.int32))
    t = em.sub.tensors[x]
    shape = None if t.shape is None else [t.shape[0]] + [
        d + ax.begin + ax.end if d >= 0 else -1 for d, ax in zip(t.shape[1:3], axes)] + [t.shape[3]]
    y = qtensor(em, shape, t.quant, "pad")
    append(em, "PAD", [x, spec], [y])
    return y


# ------------------------------------------------------------------ fully connected


def _fc_layout(em: Emitter, p: Pattern) -> tuple[np.ndarray, int] | None:
    """The weights as [N, K] and the ONNX axis of N; None when the op is no x @ W (+ b)."""
    w = em.const_value(p.dq[1].input[0])
    if w is None or w.ndim != 2:
        return None
    if p.node.op_type == "Gemm":
        a = attrs(p.node)
        if int(a.get("transA", 0)) or float(a.get("alpha", 1.0)) != 1.0 or float(a.get("beta", 1.0)) != 1.0:
            return None
        return (w, 0) if int(a.get("transB", 0)) else (w.T, 1)
    return w.T, 1


def _fc_check(em: Emitter, p: Pattern) -> str | None:
    layout = _fc_layout(em, p)
    if layout is None:
        return "it is not x @ W (+ b) with a constant 2-D W (transA, alpha or beta other than the plain product)"
    rank = em.rank(p.node.input[0])
    if rank < 2 or (p.node.op_type == "Gemm" and rank != 2):
        return f"its input has rank {rank}"
    n = layout[0].shape[0]
    return _weight_reason(p, 1, layout[1], n) or _bias_reason(p, 1, n)


@int8_op("Gemm", slots=(0, 1), bias_slot=2, fuses=True, check=_fc_check)
@int8_op("MatMul", slots=(0, 1), fuses=True, bias_add=True, check=_fc_check)
def fully_connected(em: Emitter, p: Pattern) -> None:
    w, _ = _fc_layout(em, p)
    n = w.shape[0]
    x = q_input(em, p, 0)
    keep = em.rank(p.node.input[0]) > 2
    append(em, "FULLY_CONNECTED", [x, _weights(em, p, 1, np.ascontiguousarray(w), 0, n), _bias(em, p, 1, n)],
           [q_output(em, p)], ("FullyConnectedOptions", {"fused_activation_function": ACTIVATION_CODE[p.activation],
                                                         "keep_num_dims": keep}))

