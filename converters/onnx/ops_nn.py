"""Neural-network lowerings: matmul family, convolution and normalisation. Fused ONNX ops where
the opset has them (Gemm, LayerNormalization, BatchNormalization, InstanceNormalization)."""

from __future__ import annotations

import numpy as np

from ..aten import dtypes
from ..aten.args import bind
from ..aten.dtypes import ST
from ..aten.registry import lowering
from ..errors import Unsupported
from .lazy_initializers import MIN_LAZY_BYTES
from .ops_unpool import integer_conv
from .shapes import axes_const, one_d, per_axis, zero_d


@lowering("onnx", "aten.einsum.default")
def einsum(ctx, node):
    a = bind(node, "equation", "tensors")
    a.declare("path")  # the order of the contractions, not their result
    out = ctx.out_info().dtype
    cst = ctx.compute_type(out)
    return ctx.cast(ctx.op("Einsum", *[ctx.t(t, cst) for t in a.tensors], equation=a.equation), cst, out)


def _ct(ctx):
    out = ctx.out_info().dtype
    return out, ctx.compute_type(out)


def _transposed(ctx, w, cst):
    """``w.T`` (2-D): a folded initializer when ``w`` is constant, else a Transpose node."""
    v = ctx.foldable(w)
    st = ctx.dtype(w)
    if v is not None and ctx.root.lazy is not None and v.nbytes >= MIN_LAZY_BYTES and st != cst:
        return ctx.cast(ctx.const_array(v.T, name=f"{w.name}.T"), st, cst)  # stays bf16/fp16 in the file
    if v is not None:
        ctx.reserve_array(v.shape, v.itemsize + dtypes.to_numpy(cst).itemsize, f"{w.name!r} transposed")
        return ctx.const_array(v.T.astype(dtypes.to_numpy(cst), copy=False), name=f"{w.name}.T")  # a view when lazy
    return ctx.op("Transpose", ctx.t(w, cst), perm=[1, 0])


@lowering("onnx", "aten.linear.default")
def linear(ctx, node):
    a = bind(node, "input", "weight")
    out, cst = _ct(ctx)
    x = ctx.t(a.input, cst)
    if ctx.rank(a.input) == 2 and dtypes.is_floating(cst):  # ONNX's Gemm is float only
        b = None if a.bias is None else ctx.t(a.bias, cst)
        return ctx.cast(ctx.op("Gemm", x, ctx.t(a.weight, cst), b, transB=1), cst, out)
    y = ctx.op("MatMul", x, _transposed(ctx, a.weight, cst))
    if a.bias is not None:
        y = ctx.op("Add", y, ctx.t(a.bias, cst))
    return ctx.cast(y, cst, out)


@lowering("onnx", "aten.addmm.default")
def addmm(ctx, node):
    a = bind(node, "self", "mat1", "mat2")
    if a.beta == 0:
        a.declare("self")  # beta = 0: torch ignores self (NaN and inf included)
    out, cst = _ct(ctx)
    if not dtypes.is_floating(cst):  # ONNX's Gemm is float only: beta * self + alpha * (mat1 @ mat2)
        r = ctx.op("MatMul", ctx.t(a.mat1, cst), ctx.t(a.mat2, cst))
        if a.alpha != 1:
            r = ctx.op("Mul", r, ctx.const(a.alpha, cst))
        if a.beta != 0:
            r = ctx.op("Add", r, ctx.t(a.self, cst) if a.beta == 1 else ctx.op("Mul", ctx.t(a.self, cst),
                                                                                ctx.const(a.beta, cst)))
        return ctx.cast(r, cst, out)
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
    a = bind(node, "self", "batch1", "batch2")
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


def _conv(ctx, x, w, b, stride, padding, dilation, groups, transposed=False, output_padding=0):
    out, cst = _ct(ctx)
    if not dtypes.is_floating(cst) and not transposed and ctx.dtype(x) == ST.LONG:
        return integer_conv(ctx, x, w, b, stride, padding, dilation, groups)
    if not dtypes.is_floating(cst):
        raise Unsupported("convolution of integers (ONNX's Conv and ConvTranspose take floats)")
    n = ctx.rank(w) - 2
    attrs = dict(strides=per_axis(stride, n), dilations=per_axis(dilation, n), group=int(groups))
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
        p = per_axis(padding, n)
        attrs["pads"] = p + p
    if transposed:
        op = "ConvTranspose"
        attrs["output_padding"] = per_axis(output_padding, n) if any(per_axis(output_padding, n)) else None
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
    a = bind(node, "input", "weight")
    return _conv(ctx, a.input, a.weight, a.bias, a.stride, a.padding, a.dilation, a.groups)


@lowering("onnx", "aten.convolution.default", "aten._convolution.default")
def convolution(ctx, node):
    a = bind(node, "input", "weight", "bias", "stride", "padding", "dilation", "transposed", "output_padding", "groups")
    return _conv(ctx, a.input, a.weight, a.bias, a.stride, a.padding, a.dilation, a.groups, a.transposed,
                 a.output_padding)


@lowering("onnx", "aten.conv_transpose1d.default", "aten.conv_transpose2d.input", "aten.conv_transpose3d.input")
def conv_transpose(ctx, node):
    a = bind(node, "input", "weight")
    return _conv(ctx, a.input, a.weight, a.bias, a.stride, a.padding, a.dilation, a.groups, True, a.output_padding)


# -------------------------------------------------------------------- attention


@lowering("onnx", "aten.glu.default")
def glu(ctx, node):
    a = bind(node, "self")
    out, cst = _ct(ctx)
    dim = a.dim % ctx.rank(a.self)
    x1, x2 = ctx.op("Split", ctx.t(a.self, cst), axis=dim, num_outputs=2, outputs=2)
    return ctx.cast(ctx.op("Mul", x1, ctx.op("Sigmoid", x2)), cst, out)


@lowering("onnx", "aten._weight_norm.default")
def weight_norm(ctx, node):
    """``v * (g / ||v||)``, the 2-norm over every dim but ``dim`` (``dim=-1``: over all of them,
    as torch's ``norm_except_dim`` reads it)."""
    a = bind(node, "v", "g")
    r = ctx.rank(a.v)
    if r == 0:
        raise Unsupported("_weight_norm of a 0-d tensor")
    axes = list(range(r)) if a.dim == -1 else [i for i in range(r) if i != a.dim % r]
    out = ctx.out_info().dtype
    cst = ctx.compute_type(out)
    v = ctx.t(a.v, cst)
    norm = ctx.op("ReduceL2", v, axes_const(ctx, axes), keepdims=1) if axes else ctx.op("Abs", v)
    return ctx.cast(ctx.op("Mul", v, ctx.op("Div", ctx.t(a.g, cst), norm)), cst, out)


@lowering("onnx", "aten.prelu.default", "aten._prelu_kernel.default")
def prelu(ctx, node):
    a = bind(node, "self", "weight")
    out, cst = _ct(ctx)
    r = ctx.rank(a.self)
    w = ctx.t(a.weight, cst)
    if r > 2 and ctx.rank(a.weight) == 1 and ctx.info(a.weight).shape[0] != 1:  # one weight per channel (dim 1)
        w = ctx.op("Reshape", w, ctx.ints([-1] + [1] * (r - 2)))
    return ctx.cast(ctx.op("PRelu", ctx.t(a.self, cst), w), cst, out)


@lowering("onnx", "aten.cosine_similarity.default")
def cosine_similarity(ctx, node):
    a = bind(node, "x1", "x2")
    out, cst = _ct(ctx)
    x, y = one_d(ctx, ctx.t(a.x1, cst), a.x1), one_d(ctx, ctx.t(a.x2, cst), a.x2)  # 0-d: one element along dim 0
    ax = axes_const(ctx, [a.dim])
    dot = ctx.op("ReduceSum", ctx.op("Mul", x, y), ax, keepdims=0)
    nx = ctx.op("ReduceSum", ctx.op("Mul", x, x), ax, keepdims=0)
    ny = ctx.op("ReduceSum", ctx.op("Mul", y, y), ax, keepdims=0)
    # torch: x.y / sqrt(clamp_min(|x|^2 |y|^2, eps^2))
    den = ctx.op("Sqrt", ctx.op("Max", ctx.op("Mul", nx, ny), ctx.const(a.eps * a.eps, cst)))
    return ctx.cast(ctx.op("Div", dot, den), cst, out)


@lowering("onnx", "aten._cdist_forward.default", "aten.cdist.default")
def cdist(ctx, node):
    a = bind(node, "x1", "x2", "p")
    a.declare("compute_mode")  # torch's choice of algorithm (matrix product or direct): the distances are the same
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
    elif a.p == 0:  # the count of differing coordinates (the formula's 1/p would be inf)
        r = ctx.op("ReduceSum", _nonzero_count(ctx, d, cst), ax, keepdims=0)
    else:
        p = ctx.const(float(a.p), cst)
        r = ctx.op("Pow", ctx.op("ReduceSum", ctx.op("Pow", d, p), ax, keepdims=0), ctx.op("Reciprocal", p))
    return ctx.cast(r, cst, out)


def _nonzero_count(ctx, d, cst):
    """1 where ``d`` is not 0 (NaN included), else 0, in ``cst``: the terms of a p=0 distance."""
    return ctx.cast(ctx.op("Not", ctx.op("Equal", d, ctx.const(0, cst))), ST.BOOL, cst)


@lowering("onnx", "aten._pdist_forward.default", "aten.pdist.default")
def pdist(ctx, node):
    """Upper-triangle pairwise distances of the rows (static row count)."""
    a = bind(node, "self")
    out, cst = _ct(ctx)
    n = ctx.info(a.self).shape[0]
    if not isinstance(n, int):
        raise Unsupported("pdist over a dynamic number of rows")
    x = ctx.t(a.self, cst)
    d = ctx.op("Abs", ctx.op("Sub", ctx.op("Unsqueeze", x, axes_const(ctx, [1])), ctx.op("Unsqueeze", x, axes_const(ctx, [0]))))
    ax = axes_const(ctx, [-1])
    if a.p == 2:
        full = ctx.op("ReduceL2", d, ax, keepdims=0)
    elif a.p == 1:
        full = ctx.op("ReduceL1", d, ax, keepdims=0)
    elif a.p == float("inf"):
        full = ctx.op("ReduceMax", d, ax, keepdims=0)
    elif a.p == 0:
        full = ctx.op("ReduceSum", _nonzero_count(ctx, d, cst), ax, keepdims=0)
    else:
        p = ctx.const(float(a.p), cst)
        full = ctx.op("Pow", ctx.op("ReduceSum", ctx.op("Pow", d, p), ax, keepdims=0), ctx.op("Reciprocal", p))
    ctx.reserve_array([3, n, n], 8, "pdist index")
    i, j = np.triu_indices(n, 1)
    flat = ctx.op("Reshape", full, ctx.ints([-1]))
    return ctx.cast(ctx.op("Gather", flat, ctx.const_array((i * n + j).astype(np.int64), "pdist_index"), axis=0),
                    cst, out)


# ------------------------------------------------------------ dropout, backward


@lowering("onnx", "aten.feature_alpha_dropout.default")
def feature_alpha_dropout(ctx, node):
    """Identity when ``train`` is False or ``p`` is 0 (torch returns the input itself); ``x * 0``
    when ``p`` is 1 (NaN and inf stay NaN); any other training-mode ``p`` draws random masks: refused."""
    a = bind(node, "input", "p", "train")
    a.declare("p")  # read below where train is set
    if not a.train or a.p == 0:
        return ctx.t(a.input)
    out, cst = _ct(ctx)
    if a.p == 1 and dtypes.is_floating(cst):
        return ctx.cast(ctx.op("Mul", ctx.t(a.input, cst), ctx.const(0, cst)), cst, out)
    raise Unsupported(f"feature_alpha_dropout in training mode with p={a.p} (random masks)")


@lowering("onnx", "aten.native_dropout_backward.default")
def native_dropout_backward(ctx, node):
    """``grad_output * mask * scale``: the product in ``grad_output``'s dtype (an AND of booleans),
    then times ``scale`` in the result's (float) dtype; NaN and inf where the mask is False stay NaN."""
    a = bind(node, "grad_output", "mask", "scale")
    out, cst = _ct(ctx)
    if ctx.dtype(a.mask) != ST.BOOL or not dtypes.is_floating(cst):
        raise Unsupported("native_dropout_backward with a mask that is not bool or a result that is not float")
    gst = ctx.dtype(a.grad_output)
    if gst == ST.BOOL:
        prod, pst = ctx.op("And", ctx.t(a.grad_output), ctx.t(a.mask)), ST.BOOL
    else:
        pst = ctx.compute_type(gst)
        prod = ctx.op("Mul", ctx.t(a.grad_output, pst), ctx.t(a.mask, pst))
    r = ctx.op("Mul", ctx.cast(prod, pst, cst), ctx.const(float(a.scale), cst))
    return ctx.cast(r, cst, out)


@lowering("onnx", "aten._softmax_backward_data.default")
def softmax_backward_data(ctx, node):
    """The gradient of softmax along ``dim``: ``output * (grad - sum(grad * output, dim))``, in the
    result's dtype (``input_dtype``)."""
    a = bind(node, "grad_output", "output", "dim", "input_dtype")
    a.declare("input_dtype")  # the result's dtype
    out, cst = _ct(ctx)  # the result's dtype is input_dtype
    if not dtypes.is_floating(cst):
        raise Unsupported(f"_softmax_backward_data of {out.name}")
    g = one_d(ctx, ctx.t(a.grad_output, cst), a.grad_output)
    y = one_d(ctx, ctx.t(a.output, cst), a.output)
    dim = a.dim % max(ctx.rank(a.output), 1)
    s = ctx.op("ReduceSum", ctx.op("Mul", g, y), axes_const(ctx, [dim]), keepdims=1)
    r = ctx.op("Mul", y, ctx.op("Sub", g, s))
    return ctx.cast(zero_d(ctx, r, a.output), cst, out)
