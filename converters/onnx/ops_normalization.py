"""Normalisation layers: batch norm (inference, training statistics, running statistics read or
left unread), layer norm, RMS norm and group norm."""

from __future__ import annotations

import numpy as np

from ..aten import dtypes
from ..aten.args import TensorRef, bind
from ..aten.registry import canonical, lowering
from ..errors import Unsupported
from .ops_nn import _ct
from .shapes import axes_const


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
