"""Neural-network lowerings: matmul family, convolution, normalisation, attention, pools,
resizing and recurrent layers. Fused ONNX ops where the opset has them (Gemm,
LayerNormalization, Attention at opset >= 23)."""

from __future__ import annotations

import math

import numpy as np

from ..args import bind
from ..dtypes import ST
from ..errors import Unsupported
from ..registry import lowering
from .shapes import axes_const


def _ct(ctx):
    out = ctx.out_info().dtype
    return out, ctx.compute_type(out)


def _transposed(ctx, w, cst):
    """``w.T`` (2-D): a folded initializer when ``w`` is constant, else a Transpose node."""
    v = ctx.value_of(w)
    if v is not None:
        from .. import dtypes

        return ctx.const_array(np.ascontiguousarray(v.T).astype(dtypes.to_numpy(cst)), name=f"{w.name}.T")
    return ctx.op("Transpose", ctx.t(w, cst), perm=[1, 0])


@lowering("onnx", "aten.linear.default")
def linear(ctx, node):
    a = bind(node, "input", "weight", bias=None)
    out, cst = _ct(ctx)
    x = ctx.t(a.input, cst)
    if ctx.rank(a.input) == 2:
        b = None if a.bias is None else ctx.t(a.bias, cst)
        return ctx.cast(ctx.op("Gemm", x, ctx.t(a.weight, cst), b, transB=1), cst, out)
    y = ctx.op("MatMul", x, _transposed(ctx, a.weight, cst))
    if a.bias is not None:
        y = ctx.op("Add", y, ctx.t(a.bias, cst))
    return ctx.cast(y, cst, out)


@lowering("onnx", "aten.addmm.default")
def addmm(ctx, node):
    a = bind(node, "self", "mat1", "mat2", beta=1, alpha=1)
    out, cst = _ct(ctx)
    bias = ctx.t(a.self, cst) if a.beta != 0 else None
    r = ctx.op("Gemm", ctx.t(a.mat1, cst), ctx.t(a.mat2, cst), bias,
               alpha=float(a.alpha) if a.alpha != 1 else None, beta=float(a.beta) if a.beta not in (0, 1) else None)
    return ctx.cast(r, cst, out)


@lowering("onnx", "aten.mm.default", "aten.bmm.default", "aten.matmul.default")
def matmul(ctx, node):
    a = bind(node, "self", "other")  # mm/bmm name the second "mat2"
    out, cst = _ct(ctx)
    if cst in (ST.LONG, ST.INT, ST.BOOL):
        cst = ST.DOUBLE if cst == ST.LONG else ST.FLOAT
    return ctx.cast(ctx.op("MatMul", ctx.t(a[0], cst), ctx.t(a[1], cst)), cst, out)


@lowering("onnx", "aten.baddbmm.default")
def baddbmm(ctx, node):
    a = bind(node, "self", "batch1", "batch2", beta=1, alpha=1)
    out, cst = _ct(ctx)
    p = ctx.op("MatMul", ctx.t(a.batch1, cst), ctx.t(a.batch2, cst))
    if a.alpha != 1:
        p = ctx.op("Mul", p, ctx.const(a.alpha, cst))
    if a.beta == 0:
        return ctx.cast(p, cst, out)
    s = ctx.t(a.self, cst)
    if a.beta != 1:
        s = ctx.op("Mul", s, ctx.const(a.beta, cst))
    return ctx.cast(ctx.op("Add", s, p), cst, out)


# ------------------------------------------------------------------ convolution


def _rep(v, n):
    if isinstance(v, int):
        return [v] * n
    v = list(v)
    return v * n if len(v) == 1 else v


def _conv(ctx, x, w, b, stride, padding, dilation, groups, transposed=False, output_padding=0):
    out, cst = _ct(ctx)
    n = ctx.rank(w) - 2
    attrs = dict(strides=_rep(stride, n), dilations=_rep(dilation, n), group=int(groups))
    if isinstance(padding, str):
        if padding == "valid":
            attrs["pads"] = [0] * (2 * n)
        elif padding == "same":
            ks = ctx.info(w).shape[2:]
            pads = [d * (k - 1) for d, k in zip(attrs["dilations"], ks)]
            attrs["pads"] = [p // 2 for p in pads] + [p - p // 2 for p in pads]
        else:
            raise Unsupported(f"conv padding {padding!r}")
    else:
        p = _rep(padding, n)
        attrs["pads"] = p + p
    if transposed:
        op = "ConvTranspose"
        attrs["output_padding"] = _rep(output_padding, n) if any(_rep(output_padding, n)) else None
    else:
        op = "Conv"
    unbatched = ctx.rank(x) == n + 1
    xx = ctx.t(x, cst)
    if unbatched:
        xx = ctx.op("Unsqueeze", xx, axes_const(ctx, [0]))
    r = ctx.op(op, xx, ctx.t(w, cst), None if b is None else ctx.t(b, cst), **attrs)
    if unbatched:
        r = ctx.op("Squeeze", r, axes_const(ctx, [0]))
    return ctx.cast(r, cst, out)


@lowering("onnx", "aten.conv1d.default", "aten.conv2d.default", "aten.conv3d.default", "aten.conv1d.padding",
          "aten.conv2d.padding", "aten.conv3d.padding")
def conv(ctx, node):
    a = bind(node, "input", "weight", bias=None, stride=1, padding=0, dilation=1, groups=1)
    return _conv(ctx, a.input, a.weight, a.bias, a.stride, a.padding, a.dilation, a.groups)


@lowering("onnx", "aten.convolution.default", "aten._convolution.default")
def convolution(ctx, node):
    a = bind(node, "input", "weight", "bias", "stride", "padding", "dilation", "transposed", "output_padding", "groups")
    return _conv(ctx, a.input, a.weight, a.bias, a.stride, a.padding, a.dilation, a.groups, a.transposed,
                 a.output_padding)


@lowering("onnx", "aten.conv_transpose1d.default", "aten.conv_transpose2d.input", "aten.conv_transpose3d.input")
def conv_transpose(ctx, node):
    a = bind(node, "input", "weight", bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1)
    return _conv(ctx, a.input, a.weight, a.bias, a.stride, a.padding, a.dilation, a.groups, True, a.output_padding)


# ---------------------------------------------------------------- normalisation


def _channels(ctx, x):
    c = ctx.info(x).shape[1]
    if not isinstance(c, int):
        raise Unsupported("normalisation over a dynamic channel count")
    return c


def _bn(ctx, x, w, b, mean, var, eps):
    out, cst = _ct(ctx)
    c = _channels(ctx, x)
    w = ctx.t(w, cst) if w is not None else ctx.const(np.ones(c), cst)
    b = ctx.t(b, cst) if b is not None else ctx.const(np.zeros(c), cst)
    if mean is None or var is None:
        raise Unsupported("batch norm without running statistics (training mode)")
    r = ctx.op("BatchNormalization", ctx.t(x, cst), w, b, ctx.t(mean, cst), ctx.t(var, cst), epsilon=float(eps))
    return ctx.cast(r, cst, out)


@lowering("onnx", "aten.batch_norm.default", "aten.native_batch_norm.default", "aten._native_batch_norm_legit.default")
def batch_norm(ctx, node):
    a = bind(node, "input", "weight", "bias", "running_mean", "running_var", "training", "momentum", "eps",
             training=False, eps=1e-5)
    if a.training:
        raise Unsupported("batch norm in training mode")
    r = _bn(ctx, a.input, a.weight, a.bias, a.running_mean, a.running_var, a.eps)
    return r if node.target.endswith("batch_norm.default") and "native" not in node.target else [r, None, None]


@lowering("onnx", "aten._native_batch_norm_legit.no_stats")
def batch_norm_batch_stats(ctx, node):
    """Normalise with the batch's own statistics (what ``instance_norm`` decomposes into):
    mean and biased variance over every axis but the channels."""
    a = bind(node, "input", "weight", "bias", "training", "momentum", "eps")
    out, cst = _ct(ctx)
    r = ctx.rank(a.input)
    x = ctx.t(a.input, cst)
    ax = axes_const(ctx, [0] + list(range(2, r)))
    mean = ctx.op("ReduceMean", x, ax, keepdims=1)
    d = ctx.op("Sub", x, mean)
    var = ctx.op("ReduceMean", ctx.op("Mul", d, d), ax, keepdims=1)
    y = ctx.op("Div", d, ctx.op("Sqrt", ctx.op("Add", var, ctx.const(float(a.eps), cst))))
    shape = ctx.ints([-1] + [1] * (r - 2))
    if a.weight is not None:
        y = ctx.op("Mul", y, ctx.op("Reshape", ctx.t(a.weight, cst), shape))
    if a.bias is not None:
        y = ctx.op("Add", y, ctx.op("Reshape", ctx.t(a.bias, cst), shape))
    return [ctx.cast(y, cst, out), None, None]


@lowering("onnx", "aten._native_batch_norm_legit_no_training.default")
def batch_norm_no_training(ctx, node):
    a = bind(node, "input", "weight", "bias", "running_mean", "running_var", "momentum", "eps")
    return [_bn(ctx, a.input, a.weight, a.bias, a.running_mean, a.running_var, a.eps), None, None]


def _layer_norm(ctx, x, shape, w, b, eps):
    out, cst = _ct(ctx)
    k = len(shape)
    if w is None:
        w = ctx.const(np.ones(shape), cst)
    else:
        w = ctx.t(w, cst)
    b = None if b is None else ctx.t(b, cst)
    return ctx.cast(ctx.op("LayerNormalization", ctx.t(x, cst), w, b, axis=-k, epsilon=float(eps)), cst, out)


@lowering("onnx", "aten.layer_norm.default")
def layer_norm(ctx, node):
    a = bind(node, "input", "normalized_shape", weight=None, bias=None, eps=1e-5)
    return _layer_norm(ctx, a.input, a.normalized_shape, a.weight, a.bias, a.eps)


@lowering("onnx", "aten.native_layer_norm.default")
def native_layer_norm(ctx, node):
    a = bind(node, "input", "normalized_shape", "weight", "bias", "eps")
    return [_layer_norm(ctx, a.input, a.normalized_shape, a.weight, a.bias, a.eps), None, None]


@lowering("onnx", "aten.rms_norm.default")
def rms_norm(ctx, node):
    a = bind(node, "input", "normalized_shape", weight=None, eps=None)
    out, cst = _ct(ctx)
    k = len(a.normalized_shape)
    eps = a.eps if a.eps is not None else float(np.finfo(np.float32).eps)
    x = ctx.t(a.input, cst)
    ax = axes_const(ctx, list(range(-k, 0)))
    ms = ctx.op("ReduceMean", ctx.op("Mul", x, x), ax, keepdims=1)
    y = ctx.op("Mul", x, ctx.op("Reciprocal", ctx.op("Sqrt", ctx.op("Add", ms, ctx.const(eps, cst)))))
    if a.weight is not None:
        y = ctx.op("Mul", y, ctx.t(a.weight, cst))
    return ctx.cast(y, cst, out)


def _group_norm(ctx, x, w, b, groups, eps):
    out, cst = _ct(ctx)
    r = ctx.rank(x)
    xx = ctx.t(x, cst)
    xr = ctx.op("Reshape", xx, ctx.ints([0, groups, -1]))
    ax = axes_const(ctx, [2])
    mean = ctx.op("ReduceMean", xr, ax, keepdims=1)
    d = ctx.op("Sub", xr, mean)
    var = ctx.op("ReduceMean", ctx.op("Mul", d, d), ax, keepdims=1)
    y = ctx.op("Div", d, ctx.op("Sqrt", ctx.op("Add", var, ctx.const(eps, cst))))
    y = ctx.op("Reshape", y, ctx.shape_of(x))
    c = _channels(ctx, x)
    bshape = [c] + [1] * (r - 2)
    if w is not None:
        y = ctx.op("Mul", y, ctx.op("Reshape", ctx.t(w, cst), ctx.ints(bshape)))
    if b is not None:
        y = ctx.op("Add", y, ctx.op("Reshape", ctx.t(b, cst), ctx.ints(bshape)))
    return ctx.cast(y, cst, out)


@lowering("onnx", "aten.group_norm.default")
def group_norm(ctx, node):
    a = bind(node, "input", "num_groups", weight=None, bias=None, eps=1e-5)
    return _group_norm(ctx, a.input, a.weight, a.bias, a.num_groups, a.eps)


@lowering("onnx", "aten.native_group_norm.default")
def native_group_norm(ctx, node):
    a = bind(node, "input", "weight", "bias", "N", "C", "HxW", "group", "eps")
    return [_group_norm(ctx, a.input, a.weight, a.bias, a.group, a.eps), None, None]


# -------------------------------------------------------------------- attention


@lowering("onnx", "aten.scaled_dot_product_attention.default", "aten._scaled_dot_product_flash_attention_for_cpu.default")
def sdpa(ctx, node):
    a = bind(node, "query", "key", "value", attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
             enable_gqa=False)
    if a.dropout_p:
        raise Unsupported("attention dropout")
    out, cst = _ct(ctx)
    q, k, v = (ctx.t(x, cst) for x in (a.query, a.key, a.value))
    qi, ki = ctx.info(a.query), ctx.info(a.key)
    e = qi.shape[-1]
    mask = None
    if a.attn_mask is not None:
        mask = ctx.t(a.attn_mask) if ctx.dtype(a.attn_mask) == ST.BOOL else ctx.t(a.attn_mask, cst)
    if ctx.opset >= 23 and qi.rank == 4 and (a.enable_gqa or qi.shape[1] == ki.shape[1]):
        r = ctx.op("Attention", q, k, v, mask, is_causal=int(bool(a.is_causal)),
                   scale=None if a.scale is None else float(a.scale))
        res = ctx.cast(r, cst, out)
        return [res] + [None] * (len(node.outputs) - 1) if len(node.outputs) > 1 else res
    if a.enable_gqa and qi.shape[-3] != ki.shape[-3]:
        k = _repeat_heads(ctx, k, qi.shape[-3], ki.shape[-3], ki.rank, ki.shape[-1])
        v = _repeat_heads(ctx, v, qi.shape[-3], ki.shape[-3], ki.rank, ctx.info(a.value).shape[-1])
    if not isinstance(e, int):
        raise Unsupported("attention with a dynamic head size")
    scale = a.scale if a.scale is not None else 1 / math.sqrt(e)
    r = qi.rank
    perm = list(range(r))
    perm[-1], perm[-2] = perm[-2], perm[-1]
    # scale q and k by sqrt(scale) each, as torch's math path does
    s = ctx.const(math.sqrt(scale), cst)
    scores = ctx.op("MatMul", ctx.op("Mul", q, s), ctx.op("Transpose", ctx.op("Mul", k, s), perm=perm))
    if a.is_causal:
        ones = ctx.op("ConstantOfShape", ctx.op("Concat", ctx.dim(a.query, -2), ctx.dim(a.key, -2), axis=0),
                      value=_one_bool())
        mask = ctx.op("Trilu", ones, upper=0)
    if mask is not None:
        if _is_bool(ctx, a, mask):
            mask = ctx.op("Where", mask, ctx.const(0.0, cst), ctx.const(-np.inf, cst))
        scores = ctx.op("Add", scores, mask)
    attn = ctx.op("Softmax", scores, axis=-1)
    res = ctx.cast(ctx.op("MatMul", attn, v), cst, out)
    return [res] + [None] * (len(node.outputs) - 1) if len(node.outputs) > 1 else res


def _repeat_heads(ctx, t, hq, hkv, rank, e):
    """repeat_interleave of the kv heads (dim -3) up to the query heads, as torch's GQA does."""
    if not all(isinstance(v, int) for v in (hq, hkv, e)) or rank != 4:
        raise Unsupported("grouped-query attention with dynamic head counts below opset 23")
    g = hq // hkv
    u = ctx.op("Unsqueeze", t, axes_const(ctx, [2]))
    ex = ctx.op("Expand", u, ctx.ints([1, 1, g, 1, 1]))
    return ctx.op("Reshape", ex, ctx.ints([0, hq, -1, e]))


def _is_bool(ctx, a, mask):
    return a.is_causal or (a.attn_mask is not None and ctx.dtype(a.attn_mask) == ST.BOOL)


def _one_bool():
    from .ops_shape import _scalar_tensor

    return _scalar_tensor(True, ST.BOOL)


# ------------------------------------------------------------------------ pools


def _pool_attrs(ctx, x, kernel, stride, padding, n, ceil_mode, dilation=None):
    k = _rep(kernel, n)
    s = _rep(stride, n) if stride not in (None, [], ()) else k
    p = _rep(padding, n)
    attrs = dict(kernel_shape=k, strides=s, pads=p + p, ceil_mode=int(bool(ceil_mode)))
    if dilation is not None and any(d != 1 for d in _rep(dilation, n)):
        attrs["dilations"] = _rep(dilation, n)
    return attrs


def _pool(ctx, node, op, n, with_indices=False):
    a = bind(node, "self", "kernel_size", stride=None, padding=0, dilation=1, ceil_mode=False,
             count_include_pad=True, divisor_override=None)
    if a.divisor_override is not None:
        raise Unsupported("avg_pool divisor_override")
    out, cst = _ct(ctx)
    attrs = _pool_attrs(ctx, a.self, a.kernel_size, a.stride, a.padding, n, a.ceil_mode,
                        a.dilation if op == "MaxPool" else None)
    if op == "AveragePool":
        attrs["count_include_pad"] = int(bool(a.count_include_pad))
    x = ctx.t(a.self, cst)
    unbatched = ctx.rank(a.self) == n + 1
    if unbatched:
        x = ctx.op("Unsqueeze", x, axes_const(ctx, [0]))
    r = ctx.op(op, x, **attrs)
    if unbatched:
        r = ctx.op("Squeeze", r, axes_const(ctx, [0]))
    r = ctx.cast(r, cst, out)
    return [r, None] if with_indices else r


for _n in (1, 2, 3):
    lowering("onnx", f"aten.max_pool{_n}d.default")(lambda ctx, node, _n=_n: _pool(ctx, node, "MaxPool", _n))
    lowering("onnx", f"aten.max_pool{_n}d_with_indices.default")(
        lambda ctx, node, _n=_n: _pool(ctx, node, "MaxPool", _n, True))
    lowering("onnx", f"aten.avg_pool{_n}d.default")(lambda ctx, node, _n=_n: _pool(ctx, node, "AveragePool", _n))


def _adaptive(ctx, node, op, n, with_indices=False):
    a = bind(node, "self", "output_size")
    out, cst = _ct(ctx)
    info = ctx.info(a.self)
    sizes = _rep(a.output_size, n)
    x = ctx.t(a.self, cst)
    if all(s == 1 for s in sizes):
        r = ctx.op("GlobalAveragePool" if op == "AveragePool" else "GlobalMaxPool", x)
    else:
        spatial = info.shape[-n:]
        if not all(isinstance(s, int) for s in spatial) or any(i % o for i, o in zip(spatial, sizes)):
            raise Unsupported("adaptive pool with an output size that does not divide the (static) input")
        k = [i // o for i, o in zip(spatial, sizes)]
        r = ctx.op(op, x, kernel_shape=k, strides=k)
    r = ctx.cast(r, cst, out)
    return [r, None] if with_indices else r


for _n in (1, 2, 3):
    lowering("onnx", f"aten.adaptive_avg_pool{_n}d.default", f"aten._adaptive_avg_pool{_n}d.default")(
        lambda ctx, node, _n=_n: _adaptive(ctx, node, "AveragePool", _n))
    lowering("onnx", f"aten.adaptive_max_pool{_n}d.default")(
        lambda ctx, node, _n=_n: _adaptive(ctx, node, "MaxPool", _n, True))


# --------------------------------------------------------------------- resizing


def _resize(ctx, node, mode, n):
    a = bind(node, "input", output_size=None, align_corners=None, scale_factors=None, scales_h=None, scales_w=None,
             scales_d=None, scales=None)
    out, cst = _ct(ctx)
    x = ctx.t(a.input, cst)
    oshape = ctx.out_info().shape
    scales = a.scale_factors
    if scales is None:
        per = [a.scales_d, a.scales_h, a.scales_w][-n:] if n > 1 else [a.scales]
        if all(s is not None for s in per):
            scales = per
    attrs = {}
    if mode == "nearest":
        attrs = dict(mode="nearest", coordinate_transformation_mode="asymmetric", nearest_mode="floor")
    elif mode == "nearest-exact":
        attrs = dict(mode="nearest", coordinate_transformation_mode="half_pixel", nearest_mode="round_prefer_ceil")
    else:
        attrs = dict(mode="linear" if mode != "cubic" else "cubic",
                     coordinate_transformation_mode="align_corners" if a.align_corners else "pytorch_half_pixel")
        if mode == "cubic":
            attrs["cubic_coeff_a"] = -0.75
    if scales is not None and not a.align_corners:
        sc = ctx.const(np.asarray([1.0, 1.0] + [float(s) for s in scales], np.float32), ST.FLOAT)
        r = ctx.op("Resize", x, None, sc, **attrs)
    else:
        if all(isinstance(s, int) for s in oshape[-n:]):
            size_tail = ctx.ints(list(oshape[-n:]))
        elif a.output_size is not None:
            size_tail = ctx.ints(list(a.output_size))
        else:
            raise Unsupported("resize to a dynamic size without output_size")
        sizes = ctx.op("Concat", ctx.shape(x, 0, 2), size_tail, axis=0)
        r = ctx.op("Resize", x, None, None, sizes, **attrs)
    return ctx.cast(r, cst, out)


for _n, _d in ((1, "1d"), (2, "2d"), (3, "3d")):
    for _ov in ("vec", "default"):
        lowering("onnx", f"aten.upsample_nearest{_d}.{_ov}")(lambda ctx, node, _n=_n: _resize(ctx, node, "nearest", _n))
        lowering("onnx", f"aten._upsample_nearest_exact{_d}.{_ov}")(
            lambda ctx, node, _n=_n: _resize(ctx, node, "nearest-exact", _n))
lowering("onnx", "aten.upsample_linear1d.vec", "aten.upsample_linear1d.default")(
    lambda ctx, node: _resize(ctx, node, "linear", 1))
lowering("onnx", "aten.upsample_bilinear2d.vec", "aten.upsample_bilinear2d.default")(
    lambda ctx, node: _resize(ctx, node, "linear", 2))
lowering("onnx", "aten.upsample_trilinear3d.vec", "aten.upsample_trilinear3d.default")(
    lambda ctx, node: _resize(ctx, node, "linear", 3))
lowering("onnx", "aten.upsample_bicubic2d.vec", "aten.upsample_bicubic2d.default")(
    lambda ctx, node: _resize(ctx, node, "cubic", 2))


@lowering("onnx", "aten.pixel_shuffle.default")
def pixel_shuffle(ctx, node):
    a = bind(node, "self", "upscale_factor")
    return ctx.op("DepthToSpace", ctx.t(a.self), blocksize=int(a.upscale_factor), mode="CRD")


@lowering("onnx", "aten.glu.default")
def glu(ctx, node):
    a = bind(node, "self", dim=-1)
    out, cst = _ct(ctx)
    dim = a.dim % ctx.rank(a.self)
    x1, x2 = ctx.op("Split", ctx.t(a.self, cst), axis=dim, num_outputs=2, outputs=2)
    return ctx.cast(ctx.op("Mul", x1, ctx.op("Sigmoid", x2)), cst, out)


@lowering("onnx", "aten.prelu.default", "aten._prelu_kernel.default")
def prelu(ctx, node):
    a = bind(node, "self", "weight")
    out, cst = _ct(ctx)
    r = ctx.rank(a.self)
    w = ctx.t(a.weight, cst)
    if r > 2 and ctx.info(a.weight).shape[0] != 1:
        w = ctx.op("Reshape", w, ctx.ints([-1] + [1] * (r - 2)))
    return ctx.cast(ctx.op("PRelu", ctx.t(a.self, cst), w), cst, out)



@lowering("onnx", "aten.instance_norm.default")
def instance_norm(ctx, node):
    a = bind(node, "input", weight=None, bias=None, running_mean=None, running_var=None, use_input_stats=True,
             momentum=0.1, eps=1e-5)
    if not a.use_input_stats:
        return _bn(ctx, a.input, a.weight, a.bias, a.running_mean, a.running_var, a.eps)
    out, cst = _ct(ctx)
    c = _channels(ctx, a.input)
    w = ctx.t(a.weight, cst) if a.weight is not None else ctx.const(np.ones(c), cst)
    b = ctx.t(a.bias, cst) if a.bias is not None else ctx.const(np.zeros(c), cst)
    return ctx.cast(ctx.op("InstanceNormalization", ctx.t(a.input, cst), w, b, epsilon=float(a.eps)), cst, out)


@lowering("onnx", "aten.cosine_similarity.default")
def cosine_similarity(ctx, node):
    a = bind(node, "x1", "x2", dim=1, eps=1e-8)
    out, cst = _ct(ctx)
    x, y = ctx.t(a.x1, cst), ctx.t(a.x2, cst)
    ax = axes_const(ctx, [a.dim])
    dot = ctx.op("ReduceSum", ctx.op("Mul", x, y), ax, keepdims=0)
    nx = ctx.op("ReduceSum", ctx.op("Mul", x, x), ax, keepdims=0)
    ny = ctx.op("ReduceSum", ctx.op("Mul", y, y), ax, keepdims=0)
    # torch: x.y / sqrt(clamp_min(|x|^2 |y|^2, eps^2))
    den = ctx.op("Sqrt", ctx.op("Max", ctx.op("Mul", nx, ny), ctx.const(a.eps * a.eps, cst)))
    return ctx.cast(ctx.op("Div", dot, den), cst, out)


@lowering("onnx", "aten._cdist_forward.default", "aten.cdist.default")
def cdist(ctx, node):
    a = bind(node, "x1", "x2", "p", p=2.0, compute_mode=None)
    out, cst = _ct(ctx)
    x1 = ctx.op("Unsqueeze", ctx.t(a.x1, cst), axes_const(ctx, [-2]))  # (..., P, 1, M)
    x2 = ctx.op("Unsqueeze", ctx.t(a.x2, cst), axes_const(ctx, [-3]))  # (..., 1, R, M)
    d = ctx.op("Abs", ctx.op("Sub", x1, x2))
    ax = axes_const(ctx, [-1])
    if a.p == 2:
        r = ctx.op("ReduceL2", d, ax, keepdims=0)
    elif a.p == 1:
        r = ctx.op("ReduceL1", d, ax, keepdims=0)
    elif a.p == float("inf"):
        r = ctx.op("ReduceMax", d, ax, keepdims=0)
    else:
        p = ctx.const(float(a.p), cst)
        r = ctx.op("Pow", ctx.op("ReduceSum", ctx.op("Pow", d, p), ax, keepdims=0), ctx.op("Reciprocal", p))
    return ctx.cast(r, cst, out)


@lowering("onnx", "aten._embedding_bag.default", "aten._embedding_bag_forward_only.default",
          "aten.embedding_bag.default", "aten.embedding_bag.padding_idx")
def embedding_bag(ctx, node):
    """1-D indices with offsets: bag ids by a cumulative sum of bag starts, then a
    ScatterND reduction into (num_bags, D). Only the first output (the bags) is produced."""
    a = bind(node, "weight", "indices", "offsets", "scale_grad_by_freq", "mode", "sparse", "per_sample_weights",
             "include_last_offset", "padding_idx", scale_grad_by_freq=False, mode=0, sparse=False,
             per_sample_weights=None, include_last_offset=False, padding_idx=-1)
    if ctx.rank(a.indices) != 1:
        raise Unsupported("embedding_bag with 2-D indices")
    if a.padding_idx is not None and a.padding_idx >= 0:
        raise Unsupported("embedding_bag with padding_idx")
    out, cst = _ct(ctx)
    L = ctx.const
    idx = ctx.t(a.indices, ST.LONG)
    offs = ctx.t(a.offsets, ST.LONG)
    rows = ctx.op("Gather", ctx.t(a.weight, cst), idx, axis=0)  # (N, D)
    if a.per_sample_weights is not None:
        rows = ctx.op("Mul", rows, ctx.op("Unsqueeze", ctx.t(a.per_sample_weights, cst), axes_const(ctx, [1])))
    n = ctx.op("Shape", idx)
    nb = ctx.op("Shape", offs)
    if a.include_last_offset:
        nb = ctx.op("Sub", nb, ctx.ints([1]))
        offs = ctx.op("Slice", offs, ctx.ints([0]), nb, ctx.ints([0]))
    # bag id of every index: number of bag starts at or before its position, minus one
    marks = ctx.op("ScatterElements", ctx.op("ConstantOfShape", n, value=_long_zero()), offs,
                   ctx.op("Expand", L(np.array([1], np.int64), ST.LONG), ctx.op("Shape", offs)), axis=0,
                   reduction="add")
    bag = ctx.op("Sub", ctx.op("CumSum", marks, L(0, ST.LONG)), L(1, ST.LONG))
    dshape = ctx.op("Concat", nb, ctx.op("Shape", ctx.t(a.weight), start=1), axis=0)
    red = {0: "add", 1: "add", 2: "max"}[a.mode]
    init = 0.0 if a.mode != 2 else -np.inf
    base = ctx.op("Expand", L(init, cst), dshape)
    sums = ctx.op("ScatterND", base, ctx.op("Unsqueeze", bag, axes_const(ctx, [1])), rows, reduction=red)
    if a.mode == 1:
        cnt = ctx.op("ScatterElements", ctx.op("ConstantOfShape", nb, value=_long_zero()), bag,
                     ctx.op("Expand", L(np.array([1], np.int64), ST.LONG), n), axis=0, reduction="add")
        cnt = ctx.op("Max", ctx.cast(cnt, ST.LONG, cst), L(1.0, cst))
        sums = ctx.op("Div", sums, ctx.op("Unsqueeze", cnt, axes_const(ctx, [1])))
    if a.mode == 2:
        sums = ctx.op("Where", ctx.op("IsInf", sums, detect_positive=0), L(0.0, cst), sums)
    return [ctx.cast(sums, cst, out), None, None, None]


def _long_zero():
    from .ops_shape import _scalar_tensor

    return _scalar_tensor(0, ST.LONG)
