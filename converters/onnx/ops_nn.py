"""Neural-network lowerings: matmul family, convolution and normalisation. Fused ONNX ops where
the opset has them (Gemm, LayerNormalization, BatchNormalization, InstanceNormalization)."""

from __future__ import annotations

import numpy as np

from ..aten import dtypes
from ..aten.args import TensorRef, bind
from ..aten.dtypes import ST
from ..aten.registry import canonical, lowering
from ..errors import Unsupported
from .lazy_initializers import MIN_LAZY_BYTES
from .shapes import axes_const, one_d, zero_d


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


def _rep(v, n):
    if isinstance(v, int):
        return [v] * n
    v = list(v)
    return v * n if len(v) == 1 else v


def _conv(ctx, x, w, b, stride, padding, dilation, groups, transposed=False, output_padding=0):
    out, cst = _ct(ctx)
    if not dtypes.is_floating(cst) and not transposed and ctx.dtype(x) == ST.LONG:
        from .ops_unpool import integer_conv  # (ops_unpool imports this module)

        return integer_conv(ctx, x, w, b, stride, padding, dilation, groups)
    if not dtypes.is_floating(cst):
        raise Unsupported("convolution of integers (ONNX's Conv and ConvTranspose take floats)")
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


# ---------------------------------------------------------------- normalisation


def _channels(ctx, x):
    c = ctx.info(x).shape[1]
    if not isinstance(c, int):
        raise Unsupported("normalisation over a dynamic channel count")
    return c


def _bn(ctx, x, w, b, mean, var, eps):
    out, cst = _ct(ctx)
    c = _channels(ctx, x)
    if w is None or b is None:
        ctx.reserve_array([2, c], 8, "default norm weights")
    w = ctx.t(w, cst) if w is not None else ctx.const(np.ones(c), cst)
    b = ctx.t(b, cst) if b is not None else ctx.const(np.zeros(c), cst)
    if mean is None or var is None:
        raise Unsupported("batch norm without running statistics (training mode)")
    if any(ctx.value_of(v) is None for v in (mean, var)) and ctx.rank(x) >= 2:
        # statistics known only at run time: the arithmetic (TFLite folds BatchNormalization's constants only)
        shape = ctx.ints([-1] + [1] * (ctx.rank(x) - 2))
        m, v = (ctx.op("Reshape", ctx.t(t, cst), shape) for t in (mean, var))
        d = ctx.op("Div", ctx.op("Sub", ctx.t(x, cst), m), ctx.op("Sqrt", ctx.op("Add", v, ctx.const(float(eps), cst))))
        r = ctx.op("Add", ctx.op("Mul", d, ctx.op("Reshape", w, shape)), ctx.op("Reshape", b, shape))
        return ctx.cast(r, cst, out)
    r = ctx.op("BatchNormalization", ctx.t(x, cst), w, b, ctx.t(mean, cst), ctx.t(var, cst), epsilon=float(eps))
    return ctx.cast(r, cst, out)


@lowering("onnx", "aten.batch_norm.default", "aten.native_batch_norm.default", "aten._native_batch_norm_legit.default",
          "aten._batch_norm_with_update.default")
def batch_norm(ctx, node):
    """Eval mode: BatchNormalization over the running statistics. Training mode: normalised by the
    batch's own statistics (NFNet's weight standardisation: ``F.batch_norm(w, None, None,
    training=True)``). The native overloads also give the batch mean and 1/sqrt(var + eps)
    (training), or the empty tensors torch's CPU kernel gives (eval). Running statistics in
    training mode: see ``_running_stats_unread``."""
    a = bind(node, "input", "weight", "bias", "running_mean", "running_var", training=True)  # _with_update: no training
    a.declare("momentum")  # how the running statistics would be updated (see _running_stats_unread)
    if a.training:
        _running_stats_unread(ctx, a, "batch norm in training mode")
        native = canonical(node.target) != "aten.batch_norm.default"
        y, mean, invstd = _batch_stats_norm(ctx, a.input, a.weight, a.bias, a.eps, stats=native) if native \
            else (_batch_stats_norm(ctx, a.input, a.weight, a.bias, a.eps), None, None)
    else:
        y, mean, invstd = _bn(ctx, a.input, a.weight, a.bias, a.running_mean, a.running_var, a.eps), None, None
    if canonical(node.target) == "aten.batch_norm.default":
        return y
    outs = [y, mean, invstd]
    if canonical(node.target) == "aten._batch_norm_with_update.default":
        outs.append(None)  # the reserve: empty on CPU
    return [v if v is not None else _empty_output(ctx, i) for i, v in enumerate(outs)]


def _running_stats_unread(ctx, a, what: str) -> None:
    """Running statistics normalised-by-the-batch norms are given: torch updates them in place and
    reads them for nothing it returns, and the exported program records the update nowhere (no
    output, no mutation in its signature). Where they are the model's state (buffers, parameters)
    that state would silently stop moving (a model exported in training mode): refused. Passed in
    as inputs or computed, they are read by nothing the program outputs: declared, not read."""
    for ref in (a.running_mean, a.running_var):
        if isinstance(ref, TensorRef) and ref.name in ctx.root.weights:
            raise Unsupported(f"{what} with running statistics (it updates running_mean/running_var, "
                              "the model's buffers)")
    a.declare("running_mean", "running_var")


def _empty_output(ctx, i: int):
    """Output ``i`` as the constant empty tensor its metadata says it is (else None: not converted)."""
    info = ctx.out_info(i)
    return ctx.const(np.zeros(info.shape), info.dtype) if info.is_static and info.numel() == 0 else None


@lowering("onnx", "aten._native_batch_norm_legit.no_stats")
def batch_norm_batch_stats(ctx, node):
    """Normalise with the batch's own statistics (what ``instance_norm`` decomposes into)."""
    a = bind(node, "input", "weight", "bias", "training", "momentum", "eps")
    a.declare("training", "momentum")  # no running statistics: the batch's own, in either mode, none updated
    return [_batch_stats_norm(ctx, a.input, a.weight, a.bias, a.eps), None, None]


def _batch_stats_norm(ctx, x, weight, bias, eps, stats=False):
    """``(x - mean) / sqrt(var + eps) * weight + bias``, mean and biased variance over every axis
    but the channels (1). Of weights (NFNet), a subgraph of constants: ONNX Runtime folds it at load.
    With ``stats``: also the per-channel mean and 1/sqrt(var + eps)."""
    out, cst = _ct(ctx)
    r = ctx.rank(x)
    xs = ctx.t(x, cst)
    ax = axes_const(ctx, [0] + list(range(2, r)))
    mean = ctx.op("ReduceMean", xs, ax, keepdims=1)
    d = ctx.op("Sub", xs, mean)
    var = ctx.op("ReduceMean", ctx.op("Mul", d, d), ax, keepdims=1)
    std = ctx.op("Sqrt", ctx.op("Add", var, ctx.const(float(eps), cst)))
    y = ctx.op("Div", d, std)
    shape = ctx.ints([-1] + [1] * (r - 2))
    if weight is not None:
        y = ctx.op("Mul", y, ctx.op("Reshape", ctx.t(weight, cst), shape))
    if bias is not None:
        y = ctx.op("Add", y, ctx.op("Reshape", ctx.t(bias, cst), shape))
    y = ctx.cast(y, cst, out)
    if not stats:
        return y
    if r < 2:
        raise Unsupported("batch norm statistics of an input without a channel axis")
    flat = ctx.ints([-1])
    mean = ctx.cast(ctx.op("Reshape", mean, flat), cst, ctx.out_info(1).dtype)
    invstd = ctx.cast(ctx.op("Reshape", ctx.op("Reciprocal", std), flat), cst, ctx.out_info(2).dtype)
    return y, mean, invstd


@lowering("onnx", "aten._native_batch_norm_legit_no_training.default")
def batch_norm_no_training(ctx, node):
    a = bind(node, "input", "weight", "bias", "running_mean", "running_var", "momentum", "eps")
    a.declare("momentum")  # updates running statistics, which this overload does not
    return [_bn(ctx, a.input, a.weight, a.bias, a.running_mean, a.running_var, a.eps), None, None]


def _layer_norm(ctx, x, shape, w, b, eps, stats=False):
    """LayerNormalization over the last ``len(shape)`` axes; with ``stats``, also its mean and
    reciprocal standard deviation (the input's shape with those axes 1, as torch's)."""
    out, cst = _ct(ctx)
    k = len(shape)
    if w is None:
        ctx.reserve_array(shape, 8, "default norm weight")
        w = ctx.const(np.ones(shape), cst)
    else:
        w = ctx.t(w, cst)
    b = None if b is None else ctx.t(b, cst)
    if not stats:
        return ctx.cast(ctx.op("LayerNormalization", ctx.t(x, cst), w, b, axis=-k, epsilon=float(eps)), cst, out)
    y, mean, rstd = ctx.op("LayerNormalization", ctx.t(x, cst), w, b, axis=-k, epsilon=float(eps), outputs=3)
    return [ctx.cast(y, cst, out), ctx.cast(mean, cst, ctx.out_info(1).dtype), ctx.cast(rstd, cst, ctx.out_info(2).dtype)]


@lowering("onnx", "aten.layer_norm.default")
def layer_norm(ctx, node):
    a = bind(node, "input", "normalized_shape")
    return _layer_norm(ctx, a.input, a.normalized_shape, a.weight, a.bias, a.eps)


@lowering("onnx", "aten.native_layer_norm.default")
def native_layer_norm(ctx, node):
    a = bind(node, "input", "normalized_shape", "weight", "bias", "eps")
    return _layer_norm(ctx, a.input, a.normalized_shape, a.weight, a.bias, a.eps, stats=True)


@lowering("onnx", "aten.rms_norm.default")
def rms_norm(ctx, node):
    a = bind(node, "input", "normalized_shape")
    out, cst = _ct(ctx)
    k = len(a.normalized_shape)
    if a.eps is None:  # torch: the epsilon of the input's dtype
        import ml_dtypes

        eps = float(ml_dtypes.finfo(dtypes.to_numpy(ctx.dtype(a.input))).eps)
    else:
        eps = a.eps
    x = ctx.t(a.input, cst)
    if ctx.opset >= 23:
        if a.weight is None:
            ctx.reserve_array(a.normalized_shape, 8, "default norm weight")
        w = ctx.t(a.weight, cst) if a.weight is not None else ctx.const(np.ones(a.normalized_shape), cst)
        return ctx.cast(ctx.op("RMSNormalization", x, w, axis=-k, epsilon=float(eps)), cst, out)
    ax = axes_const(ctx, list(range(-k, 0)))
    ms = ctx.op("ReduceMean", ctx.op("Mul", x, x), ax, keepdims=1)
    y = ctx.op("Mul", x, ctx.op("Reciprocal", ctx.op("Sqrt", ctx.op("Add", ms, ctx.const(eps, cst)))))
    if a.weight is not None:
        y = ctx.op("Mul", y, ctx.t(a.weight, cst))
    return ctx.cast(y, cst, out)


def _group_norm(ctx, x, w, b, groups, eps, stats=False):
    """Group normalisation; with ``stats``, also each [N, groups] mean and reciprocal standard
    deviation (``native_group_norm``'s outputs 1 and 2)."""
    out, cst = _ct(ctx)
    r = ctx.rank(x)
    xx = ctx.t(x, cst)
    rest = ctx.info(x).shape[1:]
    # the group's size spelled out where static: Reshape's -1 is undefined for an empty batch
    per_group = int(np.prod(rest)) // groups if all(isinstance(d, int) for d in rest) and groups else -1
    xr = ctx.op("Reshape", xx, ctx.ints([0, groups, per_group]))
    ax = axes_const(ctx, [2])
    mean = ctx.op("ReduceMean", xr, ax, keepdims=1)
    d = ctx.op("Sub", xr, mean)
    var = ctx.op("ReduceMean", ctx.op("Mul", d, d), ax, keepdims=1)
    std = ctx.op("Sqrt", ctx.op("Add", var, ctx.const(eps, cst)))
    y = ctx.op("Div", d, std)
    y = ctx.op("Reshape", y, ctx.shape_of(x))
    c = _channels(ctx, x)
    bshape = [c] + [1] * (r - 2)
    if w is not None:
        y = ctx.op("Mul", y, ctx.op("Reshape", ctx.t(w, cst), ctx.ints(bshape)))
    if b is not None:
        y = ctx.op("Add", y, ctx.op("Reshape", ctx.t(b, cst), ctx.ints(bshape)))
    if not stats:
        return ctx.cast(y, cst, out)
    two = ctx.ints([0, groups])
    mean, rstd = ctx.op("Reshape", mean, two), ctx.op("Reshape", ctx.op("Reciprocal", std), two)
    return [ctx.cast(y, cst, out), ctx.cast(mean, cst, ctx.out_info(1).dtype), ctx.cast(rstd, cst, ctx.out_info(2).dtype)]


@lowering("onnx", "aten.group_norm.default")
def group_norm(ctx, node):
    a = bind(node, "input", "num_groups")
    return _group_norm(ctx, a.input, a.weight, a.bias, a.num_groups, a.eps)


@lowering("onnx", "aten.native_group_norm.default")
def native_group_norm(ctx, node):
    a = bind(node, "input", "weight", "bias", "N", "C", "HxW", "group", "eps")
    a.declare("N", "C", "HxW")  # the input's sizes (torch checks them)
    return _group_norm(ctx, a.input, a.weight, a.bias, a.group, a.eps, stats=True)


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


@lowering("onnx", "aten.instance_norm.default")
def instance_norm(ctx, node):
    a = bind(node, "input")
    a.declare("momentum")  # how running statistics are updated (see _running_stats_unread)
    if not a.use_input_stats:
        return _bn(ctx, a.input, a.weight, a.bias, a.running_mean, a.running_var, a.eps)
    _running_stats_unread(ctx, a, "instance norm with input statistics")
    out, cst = _ct(ctx)
    c = _channels(ctx, a.input)
    if a.weight is None or a.bias is None:
        ctx.reserve_array([2, c], 8, "default norm weights")
    w = ctx.t(a.weight, cst) if a.weight is not None else ctx.const(np.ones(c), cst)
    b = ctx.t(a.bias, cst) if a.bias is not None else ctx.const(np.zeros(c), cst)
    r = ctx.rank(a.input)
    if r > 2 and any(v is not None and ctx.value_of(v) is None for v in (a.weight, a.bias)):
        # scale/bias known only at run time: the arithmetic (TFLite takes InstanceNormalization's as constants)
        xs = ctx.t(a.input, cst)
        ax = axes_const(ctx, list(range(2, r)))
        d = ctx.op("Sub", xs, ctx.op("ReduceMean", xs, ax, keepdims=1))
        var = ctx.op("ReduceMean", ctx.op("Mul", d, d), ax, keepdims=1)
        y = ctx.op("Div", d, ctx.op("Sqrt", ctx.op("Add", var, ctx.const(float(a.eps), cst))))
        shape = ctx.ints([-1] + [1] * (r - 2))
        y = ctx.op("Add", ctx.op("Mul", y, ctx.op("Reshape", w, shape)), ctx.op("Reshape", b, shape))
        return ctx.cast(y, cst, out)
    return ctx.cast(ctx.op("InstanceNormalization", ctx.t(a.input, cst), w, b, epsilon=float(a.eps)), cst, out)


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
