"""New tensors: ``full``/``zeros``/``ones`` and their ``_like``/``new_`` forms, ``fill``/``fill_`` (of a
number or a 0-d tensor), ``scalar_tensor``, ``arange``; each one portable kernel writing the node's
output (its dtype and shape, static or at its upper bound, are the output's metadata; a dynamic size
is the run-time value of its symbols).

Every form is ``full.out`` (the value cast to the output's dtype, as torch's ``fill_``) except
``scalar_tensor`` (``scalar_tensor.out``) and ``arange`` (``arange.start_out``, which sizes and
fills its output as ATen: ``ceil((end - start) / step)`` elements ``start + i * step``). The
device, layout, pinned memory and memory format are refused unless CPU, strided, contiguous
(``ops_shape.plain_memory``); the dtype is read from the output's metadata.
"""

from __future__ import annotations

from ..aten.args import TensorRef, bind
from ..aten.registry import lowering
from .ops_shape import plain_memory


def _fill(ctx, node, a, value):
    """``full.out`` of the node's output shape (its symbols' run-time values) with ``value``."""
    a.declare("dtype")  # the output's metadata holds it
    plain_memory(node, a)
    shape = ctx.view.tensor(node.outputs[0].value.name).shape
    return ctx.call("full.out", {"size": [ctx.size_value(s) for s in shape], "fill_value": value},
                    [ctx.output(node)]).name


@lowering("pte", "aten.full.default", "aten.full_like.default", "aten.new_full.default")
def full(ctx, node):
    a = bind(node)
    a.declare("self", "size")  # the output's metadata holds the shape they give
    return _fill(ctx, node, a, a.fill_value)


@lowering("pte", "aten.zeros.default", "aten.zeros_like.default", "aten.new_zeros.default")
def zeros(ctx, node):
    a = bind(node)
    a.declare("self", "size")
    return _fill(ctx, node, a, 0)


@lowering("pte", "aten.ones.default", "aten.ones_like.default", "aten.new_ones.default")
def ones(ctx, node):
    a = bind(node)
    a.declare("self", "size")
    return _fill(ctx, node, a, 1)


@lowering("pte", "aten.scalar_tensor.default")
def scalar_tensor(ctx, node):
    a = bind(node)
    a.declare("dtype")
    plain_memory(node, a)
    return ctx.call("scalar_tensor.out", {"s": a.s}, [ctx.output(node)]).name


@lowering("pte", "aten.arange.default", "aten.arange.start", "aten.arange.start_step")
def arange(ctx, node):
    a = bind(node)
    a.declare("dtype")
    plain_memory(node, a)
    return ctx.call("arange.start_out", {"start": a.get("start", 0), "end": a.end, "step": a.get("step", 1)},
                    [ctx.output(node)]).name


@lowering("pte", "aten.fill.Scalar", "aten.fill.Tensor", "aten.fill_.Scalar", "aten.fill_.Tensor")
def fill(ctx, node):
    """``self``'s shape and dtype, every element ``value`` (``fill.Scalar_out``, or ``fill.Tensor_out``
    of a 0-d tensor). ``fill_`` is registered here too: torch's signature table does not pair it with
    ``fill`` (so it is not derived); the driver rebinds its input as for any in-place op."""
    a = bind(node)
    key = "fill.Tensor_out" if isinstance(a.value, TensorRef) else "fill.Scalar_out"
    return ctx.call(key, {"self": a.self, "value": a.value}, [ctx.output(node)]).name
