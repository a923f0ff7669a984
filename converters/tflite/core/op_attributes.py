"""The ONNX attributes, and their values, each TFLite mapper implements: one table, checked before
the mapper runs (``core.mappers.maps`` wraps every mapper in ``check_attributes``).

``ATTRIBUTES[op][name]`` is either ``ANY`` (the mapper reads the attribute and implements, or
itself refuses naming it, every value the schema allows) or a tuple of the values it implements.
An attribute a mapper does not read is declared with its schema default only, so that a node
whose value would change the result is refused instead of silently computed with the default.
Anything outside the table (an attribute not declared for the op, a value not listed, an op
with no entry) is ``Unsupported``, naming the op, the attribute and the value.

Declarations are for the schemas from opset 18 (``normalise.TARGET_OPSET``) to the newest onnx
knows; ``tests/converters/tflite/test_tflite_attributes.py`` holds them against
``onnx.defs.get_schema``: each declared attribute exists for the op, each declared value is a
valid one, and each schema attribute not declared is refused by the check.

Strings are compared as text (onnx hands them over as bytes); floats as float32, the type the
attribute is stored in.
"""

from __future__ import annotations

import numpy as np
from onnx import helper

from ...errors import Unsupported

__all__ = ["ANY", "ATTRIBUTES", "check_attributes"]

ANY = "any"  # the mapper reads the attribute and implements or refuses each value itself

_NONE: dict = {}
_AXIS = {"axis": ANY}
_REDUCE = {"keepdims": ANY, "noop_with_empty_axes": ANY}
_POOL = {"auto_pad": ANY, "ceil_mode": ANY, "dilations": ANY, "kernel_shape": ANY, "pads": ANY, "strides": ANY}
_CONV = {"auto_pad": ANY, "dilations": ANY, "group": ANY, "kernel_shape": ANY, "pads": ANY, "strides": ANY}
_RNN = {"activation_alpha": ANY, "activation_beta": ANY, "activations": ANY, "clip": ANY, "direction": ANY,
        "hidden_size": ANY, "layout": ANY}  # rnn_cells.py reads each (refuses activations/clip)

ATTRIBUTES: dict[str, dict] = {
    # elementwise without attributes
    **{op: _NONE for op in (
        "Abs", "Add", "And", "Atan", "BitwiseAnd", "BitwiseNot", "BitwiseOr", "BitwiseXor", "Ceil", "Clip", "Cos",
        "Div", "Equal", "Erf",
        "Exp", "Expand", "Floor", "GlobalAveragePool", "GlobalMaxPool", "Greater", "GreaterOrEqual", "HardSwish",
        "Identity", "IsNaN", "Less", "LessOrEqual", "Log", "MatMul", "Max", "Min", "Mul", "Neg", "NonZero", "Not",
        "Or", "PRelu", "Pow", "Reciprocal", "Relu", "Round", "Sigmoid", "Sign", "Sin", "Size", "Slice", "Softplus",
        "Sqrt", "Squeeze", "Sub", "Sum", "Tanh", "Tile", "Unsqueeze", "Where", "Xor")},
    "ArgMax": {"axis": ANY, "keepdims": ANY, "select_last_index": ANY},
    "ArgMin": {"axis": ANY, "keepdims": ANY, "select_last_index": ANY},
    # the mapper refuses qk_matmul_output_mode 0 with softcap and a softmax_precision other than float;
    # the window attributes it does not read are declared at their defaults
    "Attention": {"is_causal": ANY, "scale": ANY, "softcap": ANY, "kv_num_heads": ANY, "q_num_heads": ANY,
                  "qk_matmul_output_mode": ANY, "softmax_precision": ANY, "left_window_size": (-1,),
                  "right_window_size": (-1,)},
    "AveragePool": {**_POOL, "count_include_pad": ANY},
    # momentum only updates the running statistics of training_mode=1, which the mapper refuses
    "BatchNormalization": {"epsilon": ANY, "momentum": ANY, "training_mode": ANY},
    # saturate and round_mode apply to float8/float4 targets only, which the mapper refuses by type
    "Cast": {"to": ANY, "saturate": ANY, "round_mode": ANY},
    "Concat": _AXIS,
    "Constant": {"value": ANY},  # the mapper refuses any other value_* form
    "ConstantOfShape": {"value": ANY},
    "Conv": _CONV,
    "ConvTranspose": {**_CONV, "output_padding": ANY, "output_shape": ANY},
    "CumSum": {"exclusive": ANY, "reverse": ANY},
    "DepthToSpace": {"blocksize": ANY, "mode": ANY},
    "Einsum": {"equation": ANY},
    "Elu": {"alpha": ANY},
    "Flatten": _AXIS,
    "GRU": {**_RNN, "linear_before_reset": ANY},
    "Gather": _AXIS,
    "GatherElements": _AXIS,
    "GatherND": {"batch_dims": ANY},
    "Gelu": {"approximate": ("none", "tanh")},
    "Gemm": {"alpha": ANY, "beta": ANY, "transA": ANY, "transB": ANY},
    "GridSample": {"align_corners": ANY, "mode": ANY, "padding_mode": ANY},
    "HardSigmoid": {"alpha": ANY, "beta": ANY},
    "If": {"then_branch": ANY, "else_branch": ANY},
    "InstanceNormalization": {"epsilon": ANY},
    "IsInf": {"detect_negative": ANY, "detect_positive": ANY},
    "LSTM": {**_RNN, "input_forget": ANY},
    "LayerNormalization": {"axis": ANY, "epsilon": ANY, "stash_type": (1,)},  # computed in float32
    "LeakyRelu": {"alpha": ANY},
    "LogSoftmax": _AXIS,
    "Loop": {"body": ANY},
    "MaxPool": {**_POOL, "storage_order": (0,)},  # storage_order orders the indices output, refused
    "CausalConvWithState": {"activation": ANY},
    # score_mod/prob_mod graphs are not declared: refused by name
    "FlexAttention": {"scale": ANY, "softmax_precision": ANY},
    # chunk_size is a tuning hint without effect on the output (onnx's reference ignores it)
    "LinearAttention": {"chunk_size": ANY, "kv_num_heads": ANY, "q_num_heads": ANY, "scale": ANY, "update_rule": ANY},
    "Mod": {"fmod": ANY},
    # ops_quantize refuses block_size, precision and an output_dtype other than the types it maps;
    # saturate applies to float8 outputs only, which it refuses by type
    "DequantizeLinear": {"axis": ANY, "block_size": ANY, "output_dtype": ANY},
    "DynamicQuantizeLinear": {},
    "QuantizeLinear": {"axis": ANY, "block_size": ANY, "output_dtype": ANY, "precision": ANY, "saturate": ANY},
    **{op: {"output_datatype": ANY, "periodic": ANY} for op in ("BlackmanWindow", "HammingWindow", "HannWindow")},
    "DFT": {"axis": ANY, "inverse": ANY, "onesided": ANY},
    "OneHot": _AXIS,
    "Pad": {"mode": ANY},
    "RMSNormalization": {"axis": ANY, "epsilon": ANY, "stash_type": (1,)},  # computed in float32
    "Range": {"stash_type": (1,)},
    **{op: _REDUCE for op in ("ReduceL1", "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceMax", "ReduceMean",
                              "ReduceMin", "ReduceProd", "ReduceSum", "ReduceSumSquare")},
    "Reshape": {"allowzero": ANY},
    "Resize": {"antialias": ANY, "axes": ANY, "coordinate_transformation_mode": ANY, "cubic_coeff_a": ANY,
               "exclude_outside": ANY, "extrapolation_value": ANY, "keep_aspect_ratio_policy": ANY, "mode": ANY,
               "nearest_mode": ANY},
    "RotaryEmbedding": {"interleaved": ANY, "num_heads": ANY, "rotary_embedding_dim": ANY},
    "Scan": {"body": ANY, "num_scan_inputs": ANY, "scan_input_axes": ANY, "scan_input_directions": ANY,
             "scan_output_axes": ANY, "scan_output_directions": ANY},
    "ScatterElements": {"axis": ANY, "reduction": ANY},
    "ScatterND": {"reduction": ANY},
    "Shape": {"start": ANY, "end": ANY},
    "Softmax": _AXIS,
    "SpaceToDepth": {"blocksize": ANY},
    # without split sizes, SPLIT divides evenly into len(outputs) == num_outputs parts
    "Split": {"axis": ANY, "num_outputs": ANY},
    "TopK": {"axis": ANY, "largest": ANY, "sorted": ANY},
    "Transpose": {"perm": ANY},
    "Trilu": {"upper": ANY},
    # ops_aliases.py, ops_activation.py
    **{op: _NONE for op in ("Mean", "Mish", "Softsign", "Sinh", "Cosh", "Tan", "Asin", "Acos", "Asinh", "Acosh",
                            "Atanh")},
    "CastLike": {"saturate": ANY, "round_mode": ANY},  # passed on to Cast's mapper
    "Dropout": {"seed": ANY},  # the mask is drawn in training mode only, which is refused
    "Selu": {"alpha": ANY, "gamma": ANY},
    "Celu": {"alpha": ANY},
    "Shrink": {"bias": ANY, "lambd": ANY},
    "ThresholdedRelu": {"alpha": ANY},
    # ops_loss.py
    "NegativeLogLikelihoodLoss": {"ignore_index": ANY, "reduction": ANY},
    "SoftmaxCrossEntropyLoss": {"ignore_index": ANY, "reduction": ANY},
    # ops_reduce.py
    "Hardmax": _AXIS,
    "LpNormalization": {"axis": ANY, "p": ANY},
    "CumProd": {"exclusive": ANY, "reverse": ANY},  # ops_cumprod.py
    "CenterCropPad": {"axes": ANY},  # ops_crop.py
    "AffineGrid": {"align_corners": ANY},  # ops_affine_grid.py
    "LpPool": {**_POOL, "p": ANY},  # ops_pool.py
    "Compress": _AXIS,  # ops_compress.py
    "BitShift": {"direction": ANY},  # ops_bitshift.py
    "EyeLike": {"dtype": ANY, "k": ANY},  # ops_eye_like.py
}


def _value(a) -> object:
    v = helper.get_attribute_value(a)
    if isinstance(v, bytes):
        return v.decode("utf-8", errors="replace")
    if isinstance(v, float):
        return float(np.float32(v))
    return v


def _shown(v) -> str:
    text = repr(v)
    return text if len(text) <= 80 else text[:77] + "..."


def check_attributes(node) -> None:
    """``Unsupported`` for the first attribute of ``node`` its mapper does not implement."""
    declared = ATTRIBUTES.get(node.op_type)
    for a in node.attribute:
        allowed = None if declared is None else declared.get(a.name)
        if allowed is None:
            raise Unsupported(f"{node.op_type} attribute {a.name!r} = {_shown(_value(a))}: pt2x's TFLite mapper does "
                              "not implement it")
        if allowed is ANY:
            continue
        value = _value(a)
        if value not in allowed:
            raise Unsupported(f"{node.op_type} attribute {a.name!r} = {_shown(value)}: pt2x's TFLite mapper "
                              f"implements only {', '.join(map(repr, allowed))}")
