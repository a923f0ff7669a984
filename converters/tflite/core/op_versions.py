"""Operator versions of what pt2x writes beyond float32: the version LiteRT's versioning rules
(``tensorflow/lite/tools/versioning/op_version.cc``, ``GetBuiltinOperatorVersion``) give an
operator with these tensor types and options, so a runtime without the kernel refuses the file
instead of misreading its tensors. Two writers read this one table: the QDQ pass's int8
operators (``int8_version``; an operator whose first input is not int8 keeps version 1, the
writer raises it where a builtin needs more for every type) and the weight-only options'
stored weights (``dequantize_version``, ``hybrid_version``)."""

from __future__ import annotations

from .model import Tensor
from .model import TensorType as T

__all__ = ["dequantize_version", "hybrid_version", "int8_version"]

# version of an operator reading an int8 first input, where op_version.cc has no other condition
# for it (the ops the QDQ pass emits, and their neighbours in op_version.cc's int8 rules)
INT8_INPUT_VERSION = {
    "ADD": 2, "SUB": 2, "CONCATENATION": 2, "MEAN": 2, "SOFTMAX": 2, "RELU": 2, "RELU6": 2,
    "MAX_POOL_2D": 2, "AVERAGE_POOL_2D": 2, "LOGISTIC": 2, "TANH": 2, "DEQUANTIZE": 2,
    "BATCH_MATMUL": 2, "MAXIMUM": 2, "MINIMUM": 2, "SLICE": 2, "STRIDED_SLICE": 2, "GATHER": 2,
    "PACK": 2, "UNPACK": 2, "SPACE_TO_DEPTH": 2, "DEPTH_TO_SPACE": 2, "TILE": 3,
}


def _rank(t: Tensor | None) -> int:
    return 0 if t is None or t.shape is None else len(t.shape)


GROUPED_CONV_VERSION = 6
"""CONV_2D whose filter reads fewer input channels than the input has (groups > 1), any type."""

# float32 constants stored in another type behind a DEQUANTIZE (weight-only options); an int8
# one with a scale per channel needs 5
DEQUANTIZE_VERSION = {T.FLOAT16: 3, T.INT8: 2}
DEQUANTIZE_PER_CHANNEL_VERSION = 5
# float operators reading int8 weights directly (LiteRT's hybrid kernels): (per tensor, per channel)
HYBRID_VERSION = {"CONV_2D": (2, 5), "FULLY_CONNECTED": (3, 12)}


def _grouped(x: Tensor | None, w: Tensor | None) -> bool:
    return bool(x is not None and w is not None and x.shape and w.shape and x.shape[-1] > 0
                and x.shape[-1] != w.shape[-1])


def dequantize_version(stored: Tensor) -> int:
    """The DEQUANTIZE reading ``stored`` (a float16 or int8 constant)."""
    per_channel = stored.quant is not None and not stored.quant.per_tensor
    return DEQUANTIZE_PER_CHANNEL_VERSION if per_channel else DEQUANTIZE_VERSION[stored.dtype]


def hybrid_version(code: str, x: Tensor, w: Tensor, per_channel: bool) -> int:
    """CONV_2D / FULLY_CONNECTED on float input ``x`` with int8 weights ``w``."""
    if code == "CONV_2D" and _grouped(x, w):
        return GROUPED_CONV_VERSION
    return HYBRID_VERSION[code][per_channel]


def _conv(ins, outs, options) -> int:
    x, w = ins[0], ins[1]
    if _grouped(x, w):
        return GROUPED_CONV_VERSION
    return 3 if w.dtype == T.INT8 and outs[0].dtype == T.INT8 else 1


def _depthwise(ins, outs, options) -> int:
    return 3 if ins[1].dtype == T.INT8 and outs[0].dtype == T.INT8 else 1


def _fully_connected(ins, outs, options) -> int:
    if len(ins) == 2:
        return 6  # no bias
    if options and options[1].get("keep_num_dims"):
        return 5
    return 4 if ins[1].dtype == T.INT8 and outs[0].dtype == T.INT8 else 1


def _mul(ins, outs, options) -> int:
    scales = [t.quant.scale[0] if t is not None and t.quant is not None else 0.0 for t in (ins[0], ins[1], outs[0])]
    if all(s != 0 for s in scales) and scales[0] * scales[1] / scales[2] >= 1.0:
        return 3  # a rescale of 1 or more
    return 2


def _transpose(ins, outs, options) -> int:
    rank = _rank(ins[0])
    return 6 if rank > 5 else 4 if rank > 4 else 2


def _pad(ins, outs, options) -> int:
    return 4 if _rank(ins[0]) > 4 else 2


# builtin -> version for an int8 first input, where op_version.cc looks at more than that type
INT8_RULES = {"CONV_2D": _conv, "DEPTHWISE_CONV_2D": _depthwise, "FULLY_CONNECTED": _fully_connected,
              "MUL": _mul, "TRANSPOSE": _transpose, "PAD": _pad, "PADV2": _pad}


def int8_version(tensors: list[Tensor], code: str, inputs: list[int], outputs: list[int], options=None) -> int:
    """The version of operator ``code`` on these tensors (indices into ``tensors``, -1 omitted)."""
    ins = [tensors[i] if i >= 0 else None for i in inputs]
    outs = [tensors[i] for i in outputs]
    if not ins or ins[0] is None or ins[0].dtype != T.INT8:
        return 1
    rule = INT8_RULES.get(code)
    return rule(ins, outs, options) if rule else INT8_INPUT_VERSION.get(code, 1)
