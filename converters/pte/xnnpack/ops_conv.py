"""Convolution (1-D and 2-D, a following eval batch norm folded in) and batch norm: XNNPACK's
nodes for the portable kernels the ATen lowerings wrote; ``conv_node`` writes the node the int8
emitter (``ops_int8.py``) writes too.

Facts from executorch's XNNPACK backend (``backends/xnnpack/operators``): a convolution's filter
is stored [out, kh, kw, in/groups] (OHWI), a depthwise one (one input channel a group) [1, kh, kw,
out]; its input and output are NHWC.
"""

from __future__ import annotations

import numpy as np

from ...errors import ConversionError
from ..program import TensorValue
from .builder import NHWC, STD, literal
from .constants import Blob, literal_blob, scaled_blob
from .fuse import fused_activation
from .graph import INVALID_ID
from .index import kernel_key
from .ops_nn import constant_problem, float_constant, pair
from .rules import ints, literal_or_none, number, tensor_problem
from .table import xnn_op

__all__ = ["BATCH_NORM", "conv_node", "batch_norm_scale_shift"]

BATCH_NORM = "_native_batch_norm_legit_no_training.out"


def _check_conv(ix, c, a):
    x, w = a["input"], a["weight"]
    if not (len(x.sizes) == len(w.sizes) == 4 or len(x.sizes) == len(w.sizes) == 3):
        return "a convolution other than 1-D or 2-D"
    if len(x.sizes) == 3:  # run as a 2-D one of height 1
        dyn = ix.dynamic_dims(x)
        if dyn is None or dyn[1] or dyn[2]:
            return "a 1-D convolution of run-time channels or length"
        if any(len(ints(ix, a[k]) or ()) != 1 for k in ("stride", "padding", "dilation")):
            return "a 1-D convolution with malformed parameters"
    if literal_or_none(ix, a["transposed"]) is not False:
        return "a transposed convolution"
    if constant_problem(ix, w, "the filter") or a["bias"] is not None and isinstance(a["bias"], TensorValue) \
            and ix.constant_view(a["bias"]) is None:
        return "a convolution whose filter or bias is not a constant"
    params = [ints(ix, a[k]) for k in ("stride", "padding", "dilation", "output_padding")]
    groups = literal_or_none(ix, a["groups"])
    if any(p is None or len(p) not in (1, 2) for p in params) or not isinstance(groups, int):
        return "a convolution with run-time or malformed parameters"
    if any(p < 0 for p in params[1]) or any(s < 1 for s in params[0] + params[2]):
        return "a convolution with negative padding or a stride or dilation below 1"
    return tensor_problem(x, "the input")


def _batch_norm_after(b, conv_out: TensorValue):
    """The batch norm of the partition that is the convolution's only reader, with constant
    statistics and unread saved statistics: folded into the filter."""
    bn = b.ix.sole_reader(conv_out)
    if not b.in_group(bn) or kernel_key(bn) != BATCH_NORM or id(bn) in b.absorbed:
        return None
    a = b.ix.args(bn)
    if a["input"] is not conv_out or _check_batch_norm(b.ix, bn, a) is not None:
        return None
    return bn


def batch_norm_scale_shift(ix, a) -> tuple[np.ndarray, np.ndarray, str]:
    """Per channel: x * scale + shift is the batch norm (float64 arithmetic, float32 results);
    and a key naming the statistics."""
    mean = np.asarray(ix.constant_view(a["running_mean"])[1], dtype=np.float64)
    var = np.asarray(ix.constant_view(a["running_var"])[1], dtype=np.float64)
    names = [ix.constant_view(a[k])[0] if isinstance(a[k], TensorValue) else "-" for k in
             ("weight", "bias", "running_mean", "running_var")]
    gamma = np.asarray(ix.constant_view(a["weight"])[1], dtype=np.float64) if isinstance(a["weight"], TensorValue) else 1.0
    beta = np.asarray(ix.constant_view(a["bias"])[1], dtype=np.float64) if isinstance(a["bias"], TensorValue) else 0.0
    eps = float(literal(a["eps"]))
    scale = gamma / np.sqrt(var + eps)
    shift = beta - mean * scale
    return scale, shift, f"bn({','.join(names)},eps={eps!r})"


@xnn_op("convolution.out", check=_check_conv)
def convolution(b, c, a):
    ix = b.ix
    x, w = a["input"], a["weight"]
    one_d = len(x.sizes) == 3  # [N, C, L]: a 2-D convolution of height 1
    if one_d:
        stride, padding, dilation = ([h] + list(literal(a[k])) for k, h in
                                     (("stride", 1), ("padding", 0), ("dilation", 1)))
    else:
        stride, padding, dilation = (pair(literal(a[k])) for k in ("stride", "padding", "dilation"))
    groups = int(literal(a["groups"]))
    oc, gic, kh, kw = w.sizes if not one_d else (w.sizes[0], w.sizes[1], 1, w.sizes[2])
    out = c.writes[0]
    bn = _batch_norm_after(b, out)
    wkey, warr = float_constant(ix, w, "the filter")
    if one_d:
        if not warr.flags.c_contiguous:
            raise ConversionError(f"the 1-D filter {wkey!r} is strided (its reshape would copy it whole)")
        wkey, warr = f"{wkey}|h1", warr.reshape(oc, gic, 1, kw)
    bias = a["bias"] if isinstance(a["bias"], TensorValue) else None
    scale = None
    if bn is not None:
        b.absorbed.add(id(bn))
        scale, shift, bn_key = batch_norm_scale_shift(ix, ix.args(bn))
        conv_bias = np.asarray(ix.constant_view(bias)[1], dtype=np.float64) if bias is not None else 0.0
        wkey = f"{wkey}|{bn_key}"
        bias_v = b.constant(literal_blob(f"{ix.constant_view(bias)[0] if bias is not None else 'zero'}|{bn_key}",
                                         conv_bias * scale + shift), (oc,))
        out = bn.writes[0]
        scale = scale.astype(np.float32)
    else:
        bias_v = b.tensor(bias) if bias is not None else None
    depthwise = gic == 1
    if depthwise:  # [out, 1, kh, kw] -> [1, kh, kw, out]
        flat = warr.reshape(oc, kh * kw)
        s = scale

        def rows(i, j, flat=flat, s=s):
            part = flat[:, i:j].astype(np.float32)
            return (part * s[:, None] if s is not None else part).T

        filter_v = b.constant(Blob(f"{wkey}|dw", (kh * kw, oc), rows), (1, kh, kw, oc))
    else:
        filter_v = b.constant(scaled_blob(f"{wkey}|ohwi", warr, scale, (0, 2, 3, 1)), (oc, kh, kw, gic))
    out, bounds = fused_activation(b, out)
    if one_d:
        xin, y = _as_height_one(b, x, out)
    else:
        xin = b.tensor(x, NHWC)
        y = b.define(out, NHWC)
    conv_node(b, (oc, gic, kh, kw), groups, (stride, padding, dilation), xin, filter_v, bias_v, y, bounds)
    if one_d:
        _from_height_one(b, y, out)


def _lead(b, t: TensorValue) -> int:
    """A reshape's batch dim: 0 (inferred) when it is sized at run time."""
    return 0 if b.dynamic_dims(t)[0] else t.sizes[0]


def _as_height_one(b, x: TensorValue, out: TensorValue):
    """A 1-D convolution's input [N, C, L] as the NHWC [N, 1, L, C] a 2-D one reads (a transpose,
    then a reshape of the same bytes), and the NHWC value [N, 1, L', O] it writes."""
    n, ch, length = x.sizes
    nlc = b.transpose(b.tensor(x, STD), (0, 2, 1))
    xin = b.reshape(nlc, [_lead(b, x), 1, length, ch], (n, 1, length, ch))
    return xin, b.g.value((out.sizes[0], 1, out.sizes[2], out.sizes[1]))


def _from_height_one(b, y, out: TensorValue) -> None:
    """``out`` ([N, O, L']) from the NHWC [N, 1, L', O] a 2-D convolution wrote."""
    n, oc, length = out.sizes
    nlo = b.reshape(y, [_lead(b, out), length, oc], (n, length, oc))
    b.bind(out, b.transpose(nlo, (0, 2, 1)), STD)


def conv_node(b, filter_sizes: tuple, groups: int, geometry: tuple, xin, filt, bias_v, y, bounds) -> None:
    """An ``XNNConv2d``, or ``XNNDepthwiseConv2d`` for a filter of one input channel a group
    (``filter_sizes``: torch's [out, in/groups, kh, kw]; ``geometry``: stride, padding, dilation,
    each [h, w]; ``bounds``: a fused activation's)."""
    oc, gic, kh, kw = filter_sizes
    stride, padding, dilation = geometry
    node = b.node("XNNDepthwiseConv2d" if gic == 1 else "XNNConv2d", "_XNNNodeConv",
                  padding_top=padding[0], padding_right=padding[1], padding_bottom=padding[0], padding_left=padding[1],
                  kernel_height=kh, kernel_width=kw, subsampling_height=stride[0], subsampling_width=stride[1],
                  dilation_height=dilation[0], dilation_width=dilation[1], group_input_channels=gic,
                  group_output_channels=oc // groups, groups=groups, adjustment_height=0, adjustment_width=0,
                  input1_id=xin.id, filter_id=filt.id, bias_id=INVALID_ID if bias_v is None else bias_v.id,
                  output_id=y.id, flags=0)
    node.output_min_max = bounds


def _check_batch_norm(ix, c, a):
    if len(a["input"].sizes) not in (2, 3, 4):
        return "a batch norm of an input other than 2-D, 3-D or 4-D"
    for k in ("weight", "bias", "running_mean", "running_var"):
        if isinstance(a[k], TensorValue) and ix.constant_view(a[k]) is None:
            return f"a batch norm whose {k} is not a constant"
    if not isinstance(a["running_mean"], TensorValue) or not isinstance(a["running_var"], TensorValue):
        return "a batch norm without running statistics"
    if number(ix, a["eps"]) is None:
        return "a batch norm with a run-time eps"
    if any(ix.read_elsewhere(t) for t in c.writes[1:]):
        return "a batch norm whose saved statistics are read"
    return tensor_problem(a["input"], "the input")


@xnn_op(BATCH_NORM, check=_check_batch_norm)
def batch_norm(b, c, a):
    """Not after a convolution: x * scale + shift, per channel (dim 1): 4-D in NHWC, where the
    channel is the last dim; [N, C] as it is; [N, C, L] with the scale and shift as [C, 1]."""
    scale, shift, key = batch_norm_scale_shift(b.ix, a)
    rank = len(a["input"].sizes)
    xin = b.tensor(a["input"], NHWC if rank == 4 else STD)
    c_ = a["input"].sizes[1]
    dims = (c_, 1) if rank == 3 else (c_,)
    s_v = b.constant(literal_blob(f"{key}|scale", scale), dims)
    t_v = b.constant(literal_blob(f"{key}|shift", shift), dims)
    mid = b.g.value(xin.dims)
    b.node("XNNMultiply", "_XNNNode2x1", input1_id=xin.id, input2_id=s_v.id, output_id=mid.id, flags=0)
    out, bounds = fused_activation(b, c.writes[0])
    y = b.define(out, NHWC if rank == 4 else STD)
    node = b.node("XNNAdd", "_XNNNode2x1", input1_id=mid.id, input2_id=t_v.id, output_id=y.id, flags=0)
    node.output_min_max = bounds
