"""Fully connected, pools, mean, batched matmul: XNNPACK's nodes for the portable kernels the
ATen lowerings wrote (convolution and batch norm: ``ops_conv.py``), and the constant readers the
emitters share.

Facts from executorch's XNNPACK backend (``backends/xnnpack/operators``): a fully connected
filter is [out, in]; pools and global average pooling take NHWC and keep their dims with
``XNN_FLAG_KEEP_DIMS``; average pooling leaves the padding out of the count.
"""

from __future__ import annotations

from ...errors import ConversionError
from ..program import TensorValue
from .builder import NHWC, STD, literal
from .constants import weight_blob
from .fuse import fused_activation
from .graph import FLAG_KEEP_DIMS, INVALID_ID
from .index import kernel_key
from .int8 import weight_view
from .rules import ints, literal_or_none, number, tensor_problem
from .table import xnn_op

# ------------------------------------------------------------------ shared by the emitters


def pair(v):
    """A 2-D op's [h, w] from torch's one or two values."""
    return list(v) * 2 if len(v) == 1 else list(v)


def constant_problem(ix, t, what: str) -> str | None:
    """None for a constant, or an int8 weight's dequantize (``int8.weight_view``: the int8 node
    reads it; a float node of it is refused when the partition is built)."""
    if ix.constant_view(t) is not None or weight_view(ix, t) is not None:
        return None
    return f"{what} is not a constant"


def float_constant(ix, t, what: str):
    """``ix.constant_view(t)``, or ``ConversionError`` (a dequantized int8 weight read by a float node)."""
    found = ix.constant_view(t)
    if found is None:
        raise ConversionError(f"{what} is a dequantized int8 weight read by a float node (not folded yet)")
    return found


# ------------------------------------------------------------------ fully connected


def _fc_filter(ix, mat2):
    """The filter [out, in] a fully connected node reads for ``mat2`` [in, out]: its transpose."""
    key, arr = float_constant(ix, mat2, "the filter")
    key = key[: -len("|permute1,0")] if key.endswith("|permute1,0") else f"{key}|permute1,0"
    return key, arr.T


def _check_fc(ix, c, a):
    x, w = a.get("mat1", a["self"]), a["mat2"]
    if "mat1" in a:
        bias = a["self"]
        if number(ix, a["beta"]) != 1 or number(ix, a["alpha"]) != 1:
            return "addmm with beta or alpha other than 1"
        if not isinstance(bias, TensorValue) or ix.constant_view(bias) is None or tuple(bias.sizes) != (w.sizes[1],):
            return "addmm whose bias is not a constant vector of the output's width"
    if ix.constant_view(x) is not None or len(x.sizes) != 2:
        return "a matrix product whose left operand is a constant or not 2-D"
    if constant_problem(ix, w, "the filter") or len(w.sizes) != 2:
        return "a matrix product whose right operand is not a constant matrix"
    return tensor_problem(x, "the input")


def flattened_from(b, x: TensorValue, keep: int):
    """The tensor of rank ``len(x.sizes) + 1`` to 6 whose leading dims ``x`` merges into its first,
    keeping its last ``keep`` dims: a static view of it (an alias), or a ``view_copy`` of the
    partition; else None."""
    if x.alias_of is not None:
        src = x.alias_of
    else:
        w = b.ix.writer.get(x.storage())
        if not b.in_group(w) or kernel_key(w) != "view_copy.out":
            return None
        src = b.ix.args(w)["self"]
    if not isinstance(src, TensorValue) or not len(x.sizes) < len(src.sizes) <= 6:
        return None
    if tuple(src.sizes[-keep:]) != tuple(x.sizes[-keep:]) or b.ix.constant_view(src) is not None:
        return None
    return src if b.dynamic_dims(src) is not None else None


def nd_output(b, lead: TensorValue, keep: int, out: TensorValue):
    """Where a node writing ``out`` ([N, *its last keep dims]) from inputs with ``lead``'s leading
    dims writes instead, and its sizes: ``lead``'s leading dims, then ``out``'s last ``keep``,
    when ``out`` is only seen so: a static ``out`` (its readers take the value as it is, or
    reshaped by ``Builder.tensor``), or ``out`` read only by a ``view_copy`` of the partition back
    to those dims (absorbed: no node); else None."""
    n = len(lead.sizes) - keep
    sizes = tuple(lead.sizes[:n]) + tuple(out.sizes[1:])
    dyn = b.dynamic_dims(lead)
    if not any(dyn) and not out.dynamic:
        return out, sizes
    r = b.ix.sole_reader(out)
    if not b.in_group(r) or id(r) in b.absorbed or kernel_key(r) != "view_copy.out":
        return None
    back = r.writes[0]
    if tuple(back.sizes) != sizes or b.dynamic_dims(back) != tuple(dyn[:n]) + (False,) * keep:
        return None
    b.absorbed.add(id(r))
    return back, sizes


@xnn_op("addmm.out", "mm.out", check=_check_fc)
def fully_connected(b, c, a):
    """XNNPACK's fully connected node flattens all but its input's last dim: a linear of an N-D
    tensor, which the portable lowering views as 2-D and back, reads the N-D tensor and writes
    the N-D result (no reshape nodes) where the views allow (``flattened_from``, ``nd_output``)."""
    x, mat2 = a.get("mat1", a["self"]), a["mat2"]
    key, filt = _fc_filter(b.ix, mat2)
    filter_v = b.constant(weight_blob(key, filt), filt.shape)
    bias_v = b.tensor(a["self"]) if "mat1" in a else None
    out, bounds = fused_activation(b, c.writes[0])
    src = flattened_from(b, x, 1)
    nd = nd_output(b, src, 1, out) if src is not None else None
    if nd is not None:
        target, sizes = nd
        xin = b.tensor(src)
        y = b.define(target, sizes=sizes)
    else:
        xin = b.tensor(x)
        y = b.define(out)
    node = b.node("XNNFullyConnected", "XNNFullyConnected", input1_id=xin.id, filter_id=filter_v.id,
                  bias_id=INVALID_ID if bias_v is None else bias_v.id, output_id=y.id, flags=0)
    node.output_min_max = bounds


# ------------------------------------------------------------------ pools and mean


def _pool_out(size: int, k: int, s: int, pad_total: int, d: int = 1) -> int:
    return (size + pad_total - d * (k - 1) - 1) // s + 1


def _pool_params(ix, c, a, dilated: bool):
    """(kernel, stride, (top, left), (bottom, right), dilation) matching the output's sizes, or a reason."""
    x, out = a["self"], c.writes[0]
    if len(x.sizes) != 4:
        return "a pool of an input other than 4-D"
    kernel, stride, padding = ints(ix, a["kernel_size"]), ints(ix, a["stride"]), ints(ix, a["padding"])
    dilation = ints(ix, a["dilation"]) if dilated else [1, 1]
    if any(p is None for p in (kernel, stride, padding, dilation)):
        return "a pool with run-time parameters"
    kernel, padding, dilation = pair(kernel), pair(padding), pair(dilation)
    stride = pair(stride) if stride else kernel
    if len(kernel) != 2 or len(stride) != 2 or len(padding) != 2 or len(dilation) != 2 or min(kernel + stride) < 1:
        return "a pool with malformed parameters"
    if kernel[0] * kernel[1] == 1:
        return "a 1x1 pool"
    extra = []
    for i in range(2):
        want, size = out.sizes[2 + i], x.sizes[2 + i]
        pad = 2 * padding[i]
        more = max(0, (want - 1) * stride[i] + dilation[i] * (kernel[i] - 1) + 1 - (size + pad))
        if _pool_out(size, kernel[i], stride[i], pad + more, dilation[i]) != want:
            return "a pool whose output size XNNPACK would not reproduce"
        extra.append(more)
    return kernel, stride, padding, extra, dilation


def _check_max_pool(ix, c, a):
    if ix.read_elsewhere(c.writes[1]):
        return "a max pool whose indices are read"
    p = _pool_params(ix, c, a, dilated=True)
    if isinstance(p, str):
        return p
    if literal_or_none(ix, a["ceil_mode"]) not in (False, True):
        return "a max pool with a run-time ceil_mode"
    if p[3] != [0, 0] and (not literal(a["ceil_mode"]) or not ix.static_dims(a["self"], (2, 3))):
        return "a max pool whose output size needs ceil_mode's padding (of a dynamic input: not planned)"
    return tensor_problem(a["self"], "the input")


def _pool_node(b, c, a, kind, p, dilated):
    kernel, stride, padding, extra, dilation = p
    xin = b.tensor(a["self"], NHWC)
    out, bounds = fused_activation(b, c.writes[0]) if kind == "XNNAvgPooling2d" else (c.writes[0], None)
    y = b.define(out, NHWC)
    fields = dict(padding_top=padding[0], padding_right=padding[1] + extra[1], padding_bottom=padding[0] + extra[0],
                  padding_left=padding[1], pooling_height=kernel[0], pooling_width=kernel[1],
                  stride_height=stride[0], stride_width=stride[1])
    if dilated:
        fields.update(dilation_height=dilation[0], dilation_width=dilation[1])
    node = b.node(kind, "_XNNPooling2D", **fields, input_id=xin.id, output_id=y.id, flags=FLAG_KEEP_DIMS)
    node.output_min_max = bounds


@xnn_op("max_pool2d_with_indices.out", check=_check_max_pool)
def max_pool2d(b, c, a):
    _pool_node(b, c, a, "XNNMaxPooling2d", _pool_params(b.ix, c, a, dilated=True), True)


def _check_avg_pool(ix, c, a):
    p = _pool_params(ix, c, a, dilated=False)
    if isinstance(p, str):
        return p
    if literal_or_none(ix, a["ceil_mode"]) is not False or p[3] != [0, 0]:
        return "an average pool with ceil_mode"
    if literal_or_none(ix, a["divisor_override"]) is not None:
        return "an average pool with divisor_override"
    include = literal_or_none(ix, a["count_include_pad"])
    if include not in (False, True) or include and any(p[2]):
        return "an average pool counting its padding (XNNPACK leaves it out)"
    return tensor_problem(a["self"], "the input")


@xnn_op("avg_pool2d.out", check=_check_avg_pool)
def avg_pool2d(b, c, a):
    _pool_node(b, c, a, "XNNAvgPooling2d", _pool_params(b.ix, c, a, dilated=False), False)


def _global_pool(b, x, out_t, keep_dims: bool):
    xin = b.tensor(x, NHWC)
    out, bounds = fused_activation(b, out_t)
    y = b.define(out, NHWC) if keep_dims else b.define(out, STD)
    node = b.node("XNNGlobalAvgPooling2d", "_XNNNode1x1", input_id=xin.id, output_id=y.id,
                  flags=FLAG_KEEP_DIMS if keep_dims else 0)
    node.output_min_max = bounds


def _check_adaptive(ix, c, a):
    x, size = a["self"], ints(ix, a["output_size"])
    if len(x.sizes) != 4 or size is None or len(size) != 2:
        return "an adaptive pool other than 2-D, or of a run-time size"
    if size != [1, 1] and (x.sizes[2] % size[0] or x.sizes[3] % size[1] or not ix.static_dims(x, (2, 3))):
        return "an adaptive pool whose input is no whole multiple of its output"
    if size != [1, 1] and x.sizes[2] == size[0] and x.sizes[3] == size[1]:
        return "an adaptive pool that is the identity"
    return tensor_problem(x, "the input")


@xnn_op("_adaptive_avg_pool2d.out", check=_check_adaptive)
def adaptive_avg_pool2d(b, c, a):
    x, (oh, ow) = a["self"], literal(a["output_size"])
    if (oh, ow) == (1, 1):
        return _global_pool(b, x, c.writes[0], keep_dims=True)
    kernel = [x.sizes[2] // oh, x.sizes[3] // ow]
    _pool_node(b, c, a, "XNNAvgPooling2d", (kernel, kernel, [0, 0], [0, 0], [1, 1]), False)


def _check_mean(ix, c, a):
    x, dims = a["self"], ints(ix, a["dim"])
    if len(x.sizes) != 4 or dims is None or sorted(d % 4 for d in dims) != [2, 3]:
        return "a mean other than over the last two dims of a 4-D tensor"
    if literal_or_none(ix, a["dtype"]) is not None or literal_or_none(ix, a["keepdim"]) not in (True, False):
        return "a mean with a dtype or a run-time keepdim"
    return tensor_problem(x, "the input")


@xnn_op("mean.out", check=_check_mean)
def mean(b, c, a):
    _global_pool(b, a["self"], c.writes[0], keep_dims=bool(literal(a["keepdim"])))


# ------------------------------------------------------------------ batched matmul


def _check_bmm(ix, c, a):
    x, y = a["self"], a["mat2"]
    if ix.constant_view(x) is not None or ix.constant_view(y) is not None:
        return "a batched matmul of a constant"
    if len(x.sizes) != 3 or len(y.sizes) != 3:
        return "a batched matmul other than 3-D"
    return tensor_problem(x, "the input") or tensor_problem(y, "the input")


@xnn_op("bmm.out", check=_check_bmm)
def bmm(b, c, a):
    """XNNPACK's batched matmul takes any number of batch dims: where both operands are views of
    tensors of the same batch dims (attention's [B, H, S, D] viewed as [B * H, S, D]), it reads
    those and writes the result with them (no reshape nodes)."""
    x, y, out = a["self"], a["mat2"], c.writes[0]
    sx, sy = flattened_from(b, x, 2), flattened_from(b, y, 2)
    nd = None
    if sx is not None and sy is not None and tuple(sx.sizes[:-2]) == tuple(sy.sizes[:-2]) \
            and b.dynamic_dims(sx)[:-2] == b.dynamic_dims(sy)[:-2]:
        nd = nd_output(b, sx, 2, out)
    if nd is not None:
        xv, yv = b.tensor(sx), b.tensor(sy)
        target, sizes = nd
        ov = b.define(target, sizes=sizes)
    else:
        xv, yv = b.tensor(x), b.tensor(y)
        ov = b.define(out)
    b.node("XNNBatchMatrixMultiply", "_XNNNode2x1", input1_id=xv.id, input2_id=yv.id, output_id=ov.id, flags=0)
