"""Pool indices and unpooling. torch's max-pool indices name each maximum by its flat position
within its own (n, c) plane; ONNX's MaxPool counts from the start of the whole tensor, so
``plane_indices`` takes the plane's offset off (a Mod by the plane's size). ``max_unpool2d/3d``
writes values back at those positions (ScatterElements, a write: TFLite refuses it, its
SCATTER_ND adds duplicates); ``max_pool2d/3d_with_indices_backward`` adds the gradients there."""

from __future__ import annotations

import numpy as np

from ...schema.walk import value_refs
from ..aten.args import bind
from ..aten.dtypes import ST
from ..aten.registry import lowering
from ..errors import Unsupported
from .shapes import axes_const, scalar_attr


def _plane_size(ctx, ref, n: int) -> str:
    """The element count of the last ``n`` axes of ``ref`` as a 1-D int64 of length 1."""
    spatial = ctx.info(ref).shape[-n:]
    if all(isinstance(s, int) for s in spatial):
        return ctx.ints([int(np.prod(spatial))])
    r = ctx.rank(ref)
    return ctx.op("ReduceProd", ctx.shape(ctx.t(ref), r - n, r), axes_const(ctx, [0]), keepdims=1)


def output_read(ctx, i: int) -> bool:
    """Whether output ``i`` of the node being lowered is read (by a node or the graph's outputs):
    a max pool's indices are made only then (TFLite refuses MaxPool's indices output)."""
    from ..aten.lower import output_slots

    slots = output_slots(ctx.node)
    name = slots[i] if i < len(slots) else None
    if not isinstance(name, str):
        return False
    return bool(ctx.view.consumers.get(name)) or any(
        ref == name for arg in ctx.view.output_args for _, ref in value_refs(arg))


def plane_indices(ctx, onnx_indices: str, ref, n: int) -> str:
    """ONNX MaxPool's indices (flat over the whole input ``ref``) as torch's: flat within each
    (n, c) plane of the last ``n`` axes."""
    return ctx.op("Mod", onnx_indices, _plane_size(ctx, ref, n))


def _flat(ctx, name: str, ref, n: int, plane: str) -> str:
    """``name`` (shaped like ``ref``) with its last ``n`` axes flattened to one of size ``plane``."""
    r = ctx.rank(ref)
    lead = ctx.shape(ctx.t(ref), 0, r - n) if r > n else None
    shape = plane if lead is None else ctx.op("Concat", lead, plane, axis=0)
    return ctx.op("Reshape", name, shape)


def _unpool(ctx, node, n: int):
    """Zeros of the input's leading dims + ``output_size``, ``self`` written at ``indices`` (flat
    positions within each plane; torch refuses an index outside the plane)."""
    a = bind(node, "self", "indices", "output_size", stride=None, padding=None)  # 2-D has no stride/padding
    a.declare("stride", "padding")  # torch checks them against the sizes; the result does not read them
    out = ctx.out_info()
    r = ctx.rank(a.self)
    if r not in (n + 1, n + 2) or ctx.info(a.indices).shape != ctx.info(a.self).shape:
        raise Unsupported(f"{node.target} with input rank {r} or indices shaped unlike the input")
    sizes = list(a.output_size)
    if all(isinstance(s, int) for s in sizes):
        ctx.reserve_array([int(np.prod(sizes))], 8, "unpool plane")
        plane_out = ctx.ints([int(np.prod(sizes))])
    else:
        plane_out = ctx.op("ReduceProd", ctx.ints(sizes), axes_const(ctx, [0]), keepdims=1)
    lead = ctx.shape(ctx.t(a.self), 0, r - n)
    zeros = ctx.op("ConstantOfShape", ctx.op("Concat", lead, plane_out, axis=0),
                   value=_zero_attr(out.dtype))
    plane_in = _plane_size(ctx, a.self, n)
    vals = _flat(ctx, ctx.t(a.self, out.dtype), a.self, n, plane_in)
    idx = _flat(ctx, ctx.t(a.indices, ST.LONG), a.indices, n, plane_in)
    y = ctx.op("ScatterElements", zeros, idx, vals, axis=-1)
    return ctx.op("Reshape", y, ctx.op("Concat", lead, ctx.ints(sizes), axis=0))


def _zero_attr(st):
    return scalar_attr(0, st)


lowering("onnx", "aten.max_unpool2d.default")(lambda ctx, node: _unpool(ctx, node, 2))
lowering("onnx", "aten.max_unpool3d.default")(lambda ctx, node: _unpool(ctx, node, 3))


def _pool_backward(ctx, node, n: int):
    """The gradient of a max pool: zeros shaped like ``self``, each ``grad_output`` element added at
    the position its index names within its plane (windows that share a maximum add up)."""
    a = bind(node, "grad_output", "self", "kernel_size", "stride", "padding", "dilation", "ceil_mode", "indices")
    a.declare("kernel_size", "stride", "padding", "dilation", "ceil_mode")  # the pool's: the indices say where
    out = ctx.out_info()
    if out.dtype not in (ST.FLOAT, ST.DOUBLE):
        raise Unsupported(f"{node.target} of {out.dtype.name}")
    if ctx.info(a.indices).shape != ctx.info(a.grad_output).shape:
        raise Unsupported(f"{node.target} with indices shaped unlike grad_output")
    zeros = ctx.op("ConstantOfShape", ctx.shape_of(a.self), value=_zero_attr(out.dtype))
    plane_out = _plane_size(ctx, a.grad_output, n)
    flat_zeros = _flat(ctx, zeros, a.self, n, _plane_size(ctx, a.self, n))
    grads = _flat(ctx, ctx.t(a.grad_output, out.dtype), a.grad_output, n, plane_out)
    idx = _flat(ctx, ctx.t(a.indices, ST.LONG), a.indices, n, plane_out)
    y = ctx.op("ScatterElements", flat_zeros, idx, grads, axis=-1, reduction="add")
    return ctx.op("Reshape", y, ctx.shape_of(a.self))


lowering("onnx", "aten.max_pool2d_with_indices_backward.default")(lambda ctx, node: _pool_backward(ctx, node, 2))
lowering("onnx", "aten.max_pool3d_with_indices_backward.default")(lambda ctx, node: _pool_backward(ctx, node, 3))
