"""Batched matrix products: ``bmm`` and ``matmul`` of any ranks >= 2, broadcasting batch dims as torch.

``matmul_into`` is the one product every lowering here uses (``ops_attention`` too): a 2-D right
operand is one ``mm.out`` of the left's rows (``[..., K]`` seen as ``[rows, K]``, as torch folds it);
otherwise each operand is expanded to the output's batch dims where it broadcasts
(``expand_copy.out``), seen as 3-D (``[batch, M, K]``: a view, or ``view_copy.out`` when dynamic),
multiplied by ``bmm.out`` and the result seen as the output's shape.
"""

from __future__ import annotations

from ..aten.args import bind
from ..aten.registry import lowering
from ..errors import Unsupported
from .shapes import expanded, product, reshape_into, reshaped

__all__ = ["matmul_into"]


def matmul_into(ctx, x, x_shape, y, y_shape, out, out_shape) -> None:
    """``out`` (shape ``out_shape``) = ``x @ y`` for ``x``, ``y`` of ranks >= 2."""
    if len(x_shape) < 2 or len(y_shape) < 2:
        raise Unsupported(f"matmul of ranks {len(x_shape)} and {len(y_shape)} (a 1-D operand)")
    m, n = out_shape[-2], out_shape[-1]
    if len(y_shape) == 2 and len(x_shape) == 2:
        ctx.call("mm.out", {"self": x, "mat2": y}, [out])
        return
    if len(y_shape) == 2:
        rows = product(x_shape[:-1])
        x2 = reshaped(ctx, x, [rows, x_shape[-1]], "matmul_rows")
        r2 = ctx.call("mm.out", {"self": x2, "mat2": y}, [_scratch(ctx, [rows, n], "mm", x)])
        reshape_into(ctx, r2, out, out_shape)
        return
    batch = list(out_shape[:-2])
    x3 = _as_batched(ctx, x, x_shape, batch, "matmul_lhs")
    y3 = _as_batched(ctx, y, y_shape, batch, "matmul_rhs")
    r3 = ctx.call("bmm.out", {"self": x3, "mat2": y3}, [_scratch(ctx, [product(batch), m, n], "bmm", x)])
    reshape_into(ctx, r3, out, out_shape)


def _scratch(ctx, shape, base, like):
    sizes, dynamic = ctx.dims(shape, base)
    return ctx.scratch_sized(base, sizes, dynamic=dynamic or like.dynamic)


def _as_batched(ctx, t, shape, batch, base):
    """``t`` (``[..., R, C]``) broadcast to ``batch`` and seen as ``[prod(batch), R, C]``."""
    own = [1] * (len(batch) - len(shape) + 2) + list(shape[:-2])
    if own != batch:
        t = expanded(ctx, t, batch + list(shape[-2:]), base + "_expand")
    if len(batch) == 1:
        return t
    return reshaped(ctx, t, [product(batch), shape[-2], shape[-1]], base)


@lowering("pte", "aten.bmm.default")
def bmm(ctx, node):
    a = bind(node)
    return ctx.call("bmm.out", {"self": a.self, "mat2": a.mat2}, [ctx.output(node)]).name


@lowering("pte", "aten.matmul.default")
def matmul(ctx, node):
    a = bind(node)
    out = ctx.output(node)
    shape = lambda r: ctx.view.tensor(r.name).shape  # noqa: E731
    matmul_into(ctx, ctx.tensor(a.self), shape(a.self), ctx.tensor(a.other), shape(a.other), out,
                ctx.view.tensor(node.outputs[0].value.name).shape)
    return out.name
