"""Linear layers, 1-D and 2-D convolutions, eval-mode batch and layer norms, 2-D pools, embeddings.

``linear`` is what exir makes of it: ``permute_copy`` of the weight, then ``addmm`` (``mm``
without a bias); an input of rank > 2 is viewed as 2-D around it (static shapes only; with a
dynamic input or weight, ``view_copy`` to 2-D and back).
"""

from __future__ import annotations

import math

from ..aten.args import bind
from ..aten.registry import lowering
from ..errors import Unsupported


def _transposed_weight(ctx, w):
    """``w.T``: of dynamic shape when ``w`` is (a weight that is a program input), so the kernel may resize it."""
    wt = ctx.scratch_sized("permute_copy", (w.sizes[1], w.sizes[0]), dynamic=w.dynamic)
    return ctx.call("permute_copy.out", {"self": w, "dims": [1, 0]}, [wt])


@lowering("pte", "aten.linear.default")
def linear(ctx, node):
    a = bind(node)
    x, w = ctx.tensor(a.input), ctx.tensor(a.weight)
    if len(w.sizes) != 2:
        raise Unsupported("linear with a weight of rank other than 2")
    rank = len(x.sizes)
    if rank == 1:
        raise Unsupported("linear of a 1-D input")
    wt = _transposed_weight(ctx, w)
    out = ctx.output(node)
    if rank == 2:
        _matmul_add(ctx, a, x, wt, out)
    elif not x.dynamic and not w.dynamic:  # viewed as 2-D and back: no instructions
        rows = math.prod(x.sizes[:-1])
        x2 = ctx.scratch("view", (rows, x.sizes[-1]))
        x2.alias_of = x
        out2 = ctx.scratch("addmm", (rows, w.sizes[0]))
        out.alias_of = out2
        _matmul_add(ctx, a, x2, wt, out2)
    else:
        _dynamic_rows_linear(ctx, a, x, w, wt, out, ctx.view.tensor(node.outputs[0].value.name).shape)
    return out.name


def _matmul_add(ctx, a, x2, wt, target):
    if a.bias is None:
        ctx.call("mm.out", {"self": x2, "mat2": wt}, [target])
    else:
        ctx.call("addmm.out", {"self": a.bias, "mat1": x2, "mat2": wt}, [target])


def _dynamic_rows_linear(ctx, a, x, w, wt, out, out_shape):
    """An input of rank > 2 with a dynamic input or weight, as exir lowers it: its rows counted at
    run time (``sym_size.int`` times the static dims, ``executorch_prim::mul.Scalar``; a literal
    when every row dim is static), ``view_copy`` to 2-D (exir's ``et_view`` without the copy),
    ``addmm``, ``view_copy`` back to the output's shape."""
    shape = ctx.view.tensor(a.input.name).shape
    rows, static = None, 1
    for dim in shape[:-1]:
        if isinstance(dim, int):
            static *= dim
            continue
        v = ctx.size_value(dim)
        rows = v if rows is None else ctx.call("executorch_prim::mul.Scalar", {"a": rows, "b": v}, [])
    if rows is None:
        rows = static
    elif static != 1:
        rows = ctx.call("executorch_prim::mul.Scalar", {"a": rows, "b": static}, [])
    max_rows = math.prod(x.sizes[:-1])
    x2 = ctx.call("view_copy.out", {"self": x, "size": [rows, ctx.size_value(shape[-1])]},
                  [ctx.scratch_sized("view_copy", (max_rows, x.sizes[-1]), dynamic=True)])
    out2 = ctx.scratch_sized("addmm", (max_rows, w.sizes[0]), dynamic=True)
    _matmul_add(ctx, a, x2, wt, out2)
    ctx.call("view_copy.out", {"self": out2, "size": [ctx.size_value(d) for d in out_shape]}, [out])


@lowering("pte", "aten.addmm.default")
def addmm(ctx, node):
    a = bind(node)
    return ctx.call("addmm.out", {"self": a.self, "mat1": a.mat1, "mat2": a.mat2, "beta": a.beta, "alpha": a.alpha},
                    [ctx.output(node)]).name


@lowering("pte", "aten.mm.default")
def mm(ctx, node):
    a = bind(node)
    return ctx.call("mm.out", {"self": a.self, "mat2": a.mat2}, [ctx.output(node)]).name


def _pair(v):
    """A one-element list of a 2-D op's argument means both dims (ATen expands it); the portable
    kernels are given both."""
    return list(v) * 2 if isinstance(v, (list, tuple)) and len(v) == 1 else v


def _conv(ctx, node, a, transposed, output_padding):
    rank = len(ctx.view.tensor(a.input.name).shape)
    if rank not in (3, 4):
        raise Unsupported("convolution other than 1-D or 2-D")
    if ctx.view.tensor(a.weight.name).rank != rank:  # conv2d of (C, H, W): the portable kernel needs a batch dim
        raise Unsupported(f"an unbatched convolution input (rank {rank}, weight rank {ctx.view.tensor(a.weight.name).rank})")
    if transposed:
        raise Unsupported("transposed convolution")
    if isinstance(a.padding, str):
        raise Unsupported(f"convolution with padding={a.padding!r}")
    per_dim = _pair if rank == 4 else list  # a 1-D convolution's lists have one entry
    return ctx.call("convolution.out", {
        "input": a.input, "weight": a.weight, "bias": a.bias, "stride": per_dim(a.stride),
        "padding": per_dim(a.padding), "dilation": per_dim(a.dilation), "transposed": False,
        "output_padding": per_dim(output_padding), "groups": a.groups,
    }, [ctx.output(node)]).name


@lowering("pte", "aten.conv2d.default")
def conv2d(ctx, node):
    a = bind(node)
    return _conv(ctx, node, a, False, [0, 0])


@lowering("pte", "aten.conv1d.default")
def conv1d(ctx, node):
    a = bind(node)
    return _conv(ctx, node, a, False, [0])


@lowering("pte", "aten.convolution.default")
def convolution(ctx, node):
    a = bind(node)
    return _conv(ctx, node, a, a.transposed, a.output_padding)


def _batch_norm_call(ctx, a, outs):
    c = ctx.view.tensor(a.input.name)
    if c.rank < 2:
        raise Unsupported("batch norm of an input of rank < 2")
    return ctx.call("_native_batch_norm_legit_no_training.out", {
        "input": a.input, "weight": a.weight, "bias": a.bias, "running_mean": a.running_mean,
        "running_var": a.running_var, "momentum": a.momentum, "eps": a.eps}, outs)


@lowering("pte", "aten.batch_norm.default")
def batch_norm(ctx, node):
    a = bind(node)
    if a.training:
        raise Unsupported("batch norm in training mode (batch statistics)")
    if a.running_mean is None or a.running_var is None:
        raise Unsupported("batch norm without running statistics")
    out = ctx.output(node)
    _batch_norm_call(ctx, a, [out, ctx.scratch("bn_mean", (0,)), ctx.scratch("bn_invstd", (0,))])
    return out.name


@lowering("pte", "aten._native_batch_norm_legit_no_training.default")
def native_batch_norm_no_training(ctx, node):
    a = bind(node)
    outs = [ctx.output(node, i) for i in range(3)]
    _batch_norm_call(ctx, a, outs)
    return [o.name for o in outs]


def _layer_norm_stats(ctx, x_shape, normalized):
    shape = tuple(x_shape[: len(x_shape) - len(normalized)]) + (1,) * len(normalized)
    return ctx.scratch("ln_mean", shape), ctx.scratch("ln_rstd", shape)


@lowering("pte", "aten.layer_norm.default")
def layer_norm(ctx, node):
    a = bind(node)
    out = ctx.output(node)
    mean, rstd = _layer_norm_stats(ctx, ctx.view.tensor(a.input.name).shape, a.normalized_shape)
    ctx.call("native_layer_norm.out", {"input": a.input, "normalized_shape": a.normalized_shape, "weight": a.weight,
                                       "bias": a.bias, "eps": a.eps}, [out, mean, rstd])
    return out.name


@lowering("pte", "aten.native_layer_norm.default")
def native_layer_norm(ctx, node):
    a = bind(node)
    outs = [ctx.output(node, i) for i in range(3)]
    ctx.call("native_layer_norm.out", {"input": a.input, "normalized_shape": a.normalized_shape, "weight": a.weight,
                                       "bias": a.bias, "eps": a.eps}, outs)
    return [o.name for o in outs]


def _rank4(ctx, a, op):
    if ctx.view.tensor(a.self.name).rank != 4:
        raise Unsupported(f"{op} of an input of rank other than 4 (NCHW)")


@lowering("pte", "aten.max_pool2d.default")
def max_pool2d(ctx, node):
    a = bind(node)
    _rank4(ctx, a, "max_pool2d")
    out = ctx.output(node)
    info = ctx.view.tensor(node.outputs[0].value.name)
    from ...schema import definitions as d

    indices = ctx.scratch("indices", info.shape, d.ScalarType.LONG)
    ctx.call("max_pool2d_with_indices.out", {"self": a.self, "kernel_size": _pair(a.kernel_size),
                                             "stride": _pair(a.stride), "padding": _pair(a.padding),
                                             "dilation": _pair(a.dilation),
                                             "ceil_mode": a.ceil_mode}, [out, indices])
    return out.name


@lowering("pte", "aten.max_pool2d_with_indices.default")
def max_pool2d_with_indices(ctx, node):
    a = bind(node)
    _rank4(ctx, a, "max_pool2d_with_indices")
    outs = [ctx.output(node, 0), ctx.output(node, 1)]
    ctx.call("max_pool2d_with_indices.out", {"self": a.self, "kernel_size": _pair(a.kernel_size),
                                             "stride": _pair(a.stride), "padding": _pair(a.padding),
                                             "dilation": _pair(a.dilation), "ceil_mode": a.ceil_mode}, outs)
    return [o.name for o in outs]


@lowering("pte", "aten.embedding.default")
def embedding(ctx, node):
    """Rows of ``weight`` by index; ``padding_idx`` and ``scale_grad_by_freq``/``sparse`` shape only
    the gradient."""
    a = bind(node)
    a.declare("padding_idx", "scale_grad_by_freq", "sparse")
    return ctx.call("embedding.out", {"weight": a.weight, "indices": a.indices}, [ctx.output(node)]).name


@lowering("pte", "aten.avg_pool2d.default")
def avg_pool2d(ctx, node):
    a = bind(node)
    _rank4(ctx, a, "avg_pool2d")
    return ctx.call("avg_pool2d.out", {"self": a.self, "kernel_size": _pair(a.kernel_size), "stride": _pair(a.stride),
                                       "padding": _pair(a.padding), "ceil_mode": a.ceil_mode,
                                       "count_include_pad": a.count_include_pad,
                                       "divisor_override": a.divisor_override}, [ctx.output(node)]).name


@lowering("pte", "aten.adaptive_avg_pool2d.default", "aten._adaptive_avg_pool2d.default")
def adaptive_avg_pool2d(ctx, node):
    a = bind(node)
    _rank4(ctx, a, "adaptive_avg_pool2d")
    return ctx.call("_adaptive_avg_pool2d.out", {"self": a.self, "output_size": a.output_size},
                    [ctx.output(node)]).name
