"""Selections and boolean logic: ``where``, ``masked_fill``, ``logical_not/and/or/xor``,
``bitwise_not/and/or/xor`` (and ``~``/``&``/``|``/``^``, of a tensor or a number), ``any``; each one
portable kernel (a number for ``where`` becomes a ``scalar_tensor``).

``where.self``'s three tensors broadcast as torch's; its output is of the output's dtype (torch
promotes ``self`` and ``other``). The logical kernels give a bool output of any input; the bitwise
ones take bool or integer tensors (``dtypes.KERNEL_DTYPES``).
"""

from __future__ import annotations

from ..aten.args import TensorRef, bind
from ..aten.registry import lowering
from ..errors import Unsupported


@lowering("pte", "aten.where.self")
def where(ctx, node):
    a = bind(node)
    return ctx.call("where.self_out", {"condition": a.condition, "self": a.self, "other": a.other},
                    [ctx.output(node)]).name


@lowering("pte", "aten.where.ScalarSelf", "aten.where.ScalarOther", "aten.where.Scalar")
def where_scalar(ctx, node):
    """A number for ``self`` or ``other``: a ``scalar_tensor.out`` of the output's dtype in its place
    (torch computes with the number in that dtype too)."""
    a = bind(node)
    dtype = ctx.view.tensor(node.outputs[0].value.name).dtype

    def operand(x):
        if isinstance(x, TensorRef):
            return ctx.tensor(x)
        return ctx.call("scalar_tensor.out", {"s": x}, [ctx.scratch("scalar_tensor", (), dtype)])

    return ctx.call("where.self_out", {"condition": a.condition, "self": operand(a.self), "other": operand(a.other)},
                    [ctx.output(node)]).name


@lowering("pte", "aten.masked_fill.Scalar")
def masked_fill(ctx, node):
    a = bind(node)
    return ctx.call("masked_fill.Scalar_out", {"self": a.self, "mask": a.mask, "value": a.value},
                    [ctx.output(node)]).name


@lowering("pte", "aten.masked_fill.Tensor")
def masked_fill_tensor(ctx, node):
    """A 0-d ``value`` tensor of ``self``'s dtype: ``where(mask, value, self)``. One of another dtype
    (torch casts it) is refused."""
    a = bind(node)
    value, self_ = ctx.view.tensor(a.value.name), ctx.view.tensor(a.self.name)
    if value.rank != 0 or value.dtype != self_.dtype:
        raise Unsupported("masked_fill with a value tensor that is not 0-d of self's dtype")
    return ctx.call("where.self_out", {"condition": a.mask, "self": a.value, "other": a.self},
                    [ctx.output(node)]).name


@lowering("pte", "aten.logical_not.default")
def logical_not(ctx, node):
    a = bind(node)
    return ctx.call("logical_not.out", {"self": a.self}, [ctx.output(node)]).name


@lowering("pte", "aten.bitwise_not.default")
def bitwise_not(ctx, node):
    a = bind(node)
    return ctx.call("bitwise_not.out", {"self": a.self}, [ctx.output(node)]).name


def _binary(kernel: str, op: str):
    def lower(ctx, node):
        a = bind(node)
        return ctx.call(kernel, {"self": a.self, "other": a.other}, [ctx.output(node)]).name

    lower.__name__ = op
    return lower


for _op in ("and", "or", "xor"):
    lowering("pte", f"aten.logical_{_op}.default")(_binary(f"logical_{_op}.out", f"logical_{_op}"))
    lowering("pte", f"aten.bitwise_{_op}.Tensor", f"aten.__{_op}__.Tensor")(
        _binary(f"bitwise_{_op}.Tensor_out", f"bitwise_{_op}"))
    lowering("pte", f"aten.bitwise_{_op}.Scalar", f"aten.__{_op}__.Scalar")(
        _binary(f"bitwise_{_op}.Scalar_out", f"bitwise_{_op}"))


@lowering("pte", "aten.any.dim", "aten.any.dims", "aten.any.default")
def any_(ctx, node):
    """``any.out`` over one dim, ``any.dims_out`` over several, ``any.all_out`` over every element."""
    a = bind(node)
    dim = a.get("dim")
    if "dim" not in a:  # any.default
        return ctx.call("any.all_out", {"self": a.self}, [ctx.output(node)]).name
    if isinstance(dim, int):
        return ctx.call("any.out", {"self": a.self, "dim": dim, "keepdim": a.keepdim}, [ctx.output(node)]).name
    return ctx.call("any.dims_out", {"self": a.self, "dim": dim, "keepdim": a.keepdim}, [ctx.output(node)]).name
