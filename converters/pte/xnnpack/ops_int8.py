"""The int8 forms of the delegated ops: an op whose float inputs are dequantizes of the partition
and whose result is quantized by the partition ("dq -> op -> q", PT2E's pattern) runs as XNNPACK's
int8 node, its output the quantize's ``QINT8`` value; ``emit(b, call, args)`` returns False when
the call is not in that pattern, and the float emitter of ``table.OPS`` runs it instead.

What XNNPACK's int8 nodes take (executorch's ``backends/xnnpack/operators``, its partitioner's
``STATIC_QUANT`` configs):

* convolution (depthwise too) and fully connected: a ``QINT8`` input, a ``QCINT8`` filter (the int8
  weight as it is; scales per output channel, its dim 0 in OHWI or [out, in], 3 in a depthwise
  [1, kh, kw, out]; zero points 0), a ``QCINT32`` bias (``round(bias / scale)``, each channel's
  scale the input's times the filter's, zero point 0) and a ``QINT8`` output of its own scale;
* add, sub, mul of two int8 tensors; global average pooling (a mean over H and W, an adaptive pool
  to 1x1): each value its own parameters;
* max pool, clamps (relu, hardtanh), reshapes, permutes, slices, copies and concatenation move
  values without arithmetic: their inputs and output must share one scale and zero point (the
  float emitter writes them, on the int8 values).

A relu/hardtanh/clamp between the op and its quantize, or after a "q -> dq" of the op's output
with the same parameters again quantized alike, is the node's output bounds: XNNPACK clamps in the
quantized domain, which is what quantizing the clamped float does.
"""

from __future__ import annotations

import numpy as np

from ..program import ListValue, TensorValue
from .builder import NHWC, STD, literal
from .constants import Blob, int8_blob, literal_blob
from .fuse import ACTIVATIONS, activation_bounds
from .graph import FLAG_KEEP_DIMS, FP32, INVALID_ID, QCINT8, QCINT32, QINT8
from .index import kernel_key
from .int8 import DEQUANTIZE, dequantized, params, per_channel, quantize_after, weight_scales, weight_view
from .ops_conv import conv_node
from .ops_nn import pair
from .table import OPS

__all__ = ["emit"]

_INT32 = (-(2**31), 2**31 - 1)


# ------------------------------------------------------------------ the output: a quantize, clamped


def _activation(b, t: TensorValue):
    """(the relu/hardtanh/clamp of the partition that is ``t``'s only reader, its bounds), or None."""
    r = b.ix.sole_reader(t)
    if not b.in_group(r) or id(r) in b.absorbed or kernel_key(r) not in ACTIVATIONS:
        return None
    bounds = activation_bounds(b.ix, r)
    if bounds is None or tuple(b.ix.args(r)["self"].sizes) != tuple(t.sizes):
        return None
    return r, bounds


def _meet(a, b2):
    return b2 if a is None else (max(a[0], b2[0]), min(a[1], b2[1]))


def _output(b, out: TensorValue):
    """(the calls a node writing ``out`` takes after it, the last quantize, the bounds) when
    ``out`` ends, through a clamp, in a quantize of the partition; else None. After the quantize,
    "dq -> clamp -> q" of the same parameters is taken too."""
    taken, bounds = [], None
    act = _activation(b, out)
    if act is not None:
        taken.append(act[0])
        out, bounds = act[0].writes[0], act[1]
    q = quantize_after(b, out)
    if q is None:
        return None
    taken.append(q)
    while True:
        dq = b.ix.sole_reader(q.result)
        if not (b.in_group(dq) and getattr(dq, "kind", None) == DEQUANTIZE and id(dq) not in b.absorbed
                and params(dq) == params(q)):
            break
        act = _activation(b, dq.result)
        q2 = quantize_after(b, act[0].writes[0]) if act is not None else None
        if q2 is None or params(q2) != params(q):
            break
        taken += [dq, act[0], q2]
        bounds, q = _meet(bounds, act[1]), q2
    return taken, q, bounds


def _define(b, taken, q, sizes, layout):
    """The node's int8 output: ``q``'s value."""
    b.absorbed.update(id(c) for c in taken)
    v = b.g.value(sizes if layout == STD else tuple(sizes[p] for p in (0, 2, 3, 1)), dtype=QINT8, quant=params(q))
    b.bind(q.result, v, layout, tuple(sizes))
    return v


# ------------------------------------------------------------------ weights


def _bias(b, bias, in_scale: float, w_scales: np.ndarray, key: str):
    """The int32 bias value (``QCINT32``), or INVALID_ID's stand-in None for no bias."""
    if bias is None:
        return None
    found = b.ix.constant_view(bias)
    if found is None:
        return False
    bkey, arr = found
    scales = np.float32(in_scale) * w_scales  # float32, as XNNPACK compares them
    q = np.clip(np.round(np.asarray(arr, dtype=np.float64) / scales.astype(np.float64)), *_INT32).astype(np.int32)
    blob = literal_blob(f"{bkey}|qc32|{key}|{np.float32(in_scale).tobytes().hex()}", q, np.int32)
    return b.constant(blob, (len(q),), QCINT32, per_channel(b, blob.key, scales, 0))


def conv(b, c, a) -> bool:
    x, w = a["input"], a["weight"]
    found = weight_view(b.ix, w)
    dq = dequantized(b, x)
    result = _output(b, c.writes[0])
    if found is None or dq is None or result is None or len(w.sizes) != 4:
        return False
    q_w, wkey, warr, axis, perm = found
    w_scales = weight_scales(b.ix, q_w)
    if axis != 0 or perm != (0, 1, 2, 3) or w_scales is None:
        return False
    bias = a["bias"] if isinstance(a["bias"], TensorValue) else None
    stride, padding, dilation = (pair(literal(a[k])) for k in ("stride", "padding", "dilation"))
    groups = int(literal(a["groups"]))
    oc, gic, kh, kw = w.sizes
    depthwise = gic == 1
    if depthwise:  # [out, 1, kh, kw] -> [1, kh, kw, out], the channel dim last
        flat = warr.reshape(oc, kh * kw)
        blob = Blob(f"{wkey}|dw|qc8", (kh * kw, oc), lambda i, j, flat=flat: flat[:, i:j].T, np.int8)
        filt = b.constant(blob, (1, kh, kw, oc), QCINT8, per_channel(b, blob.key, w_scales, 3))
    else:
        blob = int8_blob(f"{wkey}|ohwi|qc8", warr, (0, 2, 3, 1))
        filt = b.constant(blob, (oc, kh, kw, gic), QCINT8, per_channel(b, blob.key, w_scales, 0))
    in_scale = params(dq).scale
    bias_v = _bias(b, bias, in_scale, w_scales, wkey)
    if bias_v is False:
        return False
    xin = b.tensor(dq.source, NHWC)
    taken, q, bounds = result
    y = _define(b, taken, q, tuple(c.writes[0].sizes), NHWC)
    conv_node(b, (oc, gic, kh, kw), groups, (stride, padding, dilation), xin, filt, bias_v, y, bounds)
    return True


def fully_connected(b, c, a) -> bool:
    x, w = a.get("mat1", a["self"]), a["mat2"]
    found = weight_view(b.ix, w)
    dq = dequantized(b, x)
    result = _output(b, c.writes[0])
    if found is None or dq is None or result is None or len(w.sizes) != 2:
        return False
    q_w, wkey, warr, axis, perm = found
    w_scales = weight_scales(b.ix, q_w)
    if perm != (1, 0) or axis != 1 or w_scales is None:  # the linear's transpose of an [out, in] weight
        return False
    raw = warr.T
    blob = int8_blob(f"{wkey}|qc8", raw)
    filt = b.constant(blob, raw.shape, QCINT8, per_channel(b, blob.key, w_scales, 0))
    bias_v = _bias(b, a["self"] if "mat1" in a else None, params(dq).scale, w_scales, wkey)
    if bias_v is False:
        return False
    xin = b.tensor(dq.source)
    taken, q, bounds = result
    y = _define(b, taken, q, tuple(c.writes[0].sizes), STD)
    node = b.node("XNNFullyConnected", "XNNFullyConnected", input1_id=xin.id, filter_id=filt.id,
                  bias_id=INVALID_ID if bias_v is None else bias_v.id, output_id=y.id, flags=0)
    node.output_min_max = bounds
    return True


# ------------------------------------------------------------------ arithmetic and pools

BINARY = {"add.out": "XNNAdd", "sub.out": "XNNSubtract", "mul.out": "XNNMultiply"}


def binary(b, c, a) -> bool:
    x, y = a["self"], a["other"]
    if not isinstance(y, TensorValue) or "alpha" in a and literal(a["alpha"]) != 1:
        return False
    dx, dy = dequantized(b, x), dequantized(b, y)
    result = _output(b, c.writes[0])
    if dx is None or dy is None or result is None:
        return False
    refs = [b.ref(d.source) for d in (dx, dy)]
    same = all(r.sizes == tuple(c.writes[0].sizes) for r in refs)
    layout = refs[0].layout if same and refs[0].layout == refs[1].layout else STD
    xin, yin = b.tensor(dx.source, layout), b.tensor(dy.source, layout)
    taken, q, bounds = result
    out = _define(b, taken, q, tuple(c.writes[0].sizes), layout)
    b.node(BINARY[kernel_key(c)], "_XNNNode2x1", input1_id=xin.id, input2_id=yin.id, output_id=out.id,
           flags=0).output_min_max = bounds
    return True


def global_pool(b, c, a) -> bool:
    x, out = a["self"], c.writes[0]
    if kernel_key(c) == "_adaptive_avg_pool2d.out":
        if literal(a["output_size"]) != [1, 1]:
            return False
        keep = True
    else:
        keep = bool(literal(a["keepdim"]))
    dq = dequantized(b, x)
    result = _output(b, out)
    if dq is None or result is None or len(x.sizes) != 4:
        return False
    xin = b.tensor(dq.source, NHWC)
    taken, q, bounds = result
    y = _define(b, taken, q, tuple(out.sizes), NHWC if keep else STD)
    b.node("XNNGlobalAvgPooling2d", "_XNNNode1x1", input_id=xin.id, output_id=y.id,
           flags=FLAG_KEEP_DIMS if keep else 0).output_min_max = bounds
    return True


# ------------------------------------------------------------------ moves: one scale and zero point


def shared(b, c, a) -> bool:
    """The float emitter on the int8 values, when every tensor input is a dequantize and the one
    output a quantize, all of one scale and zero point."""
    keys = [k for k, v in a.items() if isinstance(v, TensorValue) or isinstance(v, ListValue) and v.kind == "TensorList"]
    swapped, shared_params = dict(a), set()
    for k in keys:
        items = a[k].items if isinstance(a[k], ListValue) else [a[k]]
        dqs = [dequantized(b, t) for t in items]
        if any(d is None for d in dqs):
            return False
        shared_params |= {params(d) for d in dqs}
        srcs = [d.source for d in dqs]
        swapped[k] = ListValue(a[k].kind, srcs) if isinstance(a[k], ListValue) else srcs[0]
    out = c.writes[0]
    q = quantize_after(b, out)
    if q is None or shared_params != {params(q)} or any(b.ix.read_elsewhere(t) for t in c.writes[1:]):
        return False
    first = len(b.g.values)
    OPS[kernel_key(c)].emit(b, c, swapped)
    for v in b.g.values[first:]:  # the values it made hold the same int8 numbers
        if v.dtype == FP32 and not v.constant:
            v.dtype, v.quant = QINT8, params(q)
    ref = b.refs.pop(out.storage())  # the float tensor is read by the quantize alone
    b.absorbed.add(id(q))
    b.bind(q.result, ref.value, ref.layout, ref.sizes)
    return True


EMITTERS = {
    "convolution.out": conv,
    "addmm.out": fully_connected, "mm.out": fully_connected,
    **{k: binary for k in BINARY},
    "mean.out": global_pool, "_adaptive_avg_pool2d.out": global_pool,
    **{k: shared for k in ("max_pool2d_with_indices.out", "relu.out", "hardtanh.out", "clamp.out", "view_copy.out",
                           "permute_copy.out", "transpose_copy.int_out", "clone.out", "slice_copy.Tensor_out",
                           "select_copy.int_out", "cat.out")},
}


def emit(b, c, a) -> bool:
    """Whether ``c`` was written as an int8 node (else the float emitter writes it)."""
    e = EMITTERS.get(kernel_key(c))
    return e is not None and e(b, c, a)
