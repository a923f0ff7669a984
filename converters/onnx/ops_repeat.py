"""``repeat_interleave`` with an int repeat count: each element repeated ``repeats`` times in place.

``repeat_interleave(x, r, dim)`` is ``x.unsqueeze(dim + 1)`` broadcast to ``r`` along the new
axis and the two axes merged: an Unsqueeze, an Expand (ONNX broadcasting: a shape of ones and
``r``) and a Reshape to ``x``'s shape with ``dim``'s length times ``r`` (read at run time for a
dynamic size). ``dim=None`` repeats the flattened tensor. torch checks ``output_size`` against
the result and raises when they differ: a stated ``output_size`` is accepted where it is the
static result length, and refused otherwise (a mismatch, or a length known only at run time).
A repeat count that is a tensor or a symbol is refused (``repeat_interleave.Tensor`` has no
lowering): the output length would be data-dependent.
"""

from __future__ import annotations

import numpy as np

from ..aten.args import SymRef, bind
from ..aten.registry import lowering
from ..errors import Unsupported
from .shapes import axes_const


def _flattened(ctx, x: str) -> str:
    return ctx.op("Reshape", x, ctx.ints([-1]))


def _result_shape(ctx, x: str, shape: list, dim: int, repeats: int) -> str:
    """``shape`` with ``dim``'s length times ``repeats``, as a 1-D int64 (constant when static)."""
    if all(isinstance(s, int) for s in shape):
        return ctx.ints([s * repeats if i == dim else s for i, s in enumerate(shape)])
    parts = []
    if dim > 0:
        parts.append(ctx.shape(x, 0, dim))
    parts.append(ctx.op("Mul", ctx.shape(x, dim, dim + 1), ctx.ints([repeats])))
    if dim + 1 < len(shape):
        parts.append(ctx.shape(x, dim + 1, len(shape)))
    return parts[0] if len(parts) == 1 else ctx.op("Concat", *parts, axis=0)


def _check_output_size(output_size, length, repeats: int) -> None:
    if output_size is None:
        return
    if isinstance(output_size, SymRef) or not isinstance(length, int):
        raise Unsupported(f"repeat_interleave output_size={output_size} with a length known only at run time "
                          "(torch checks it against the result as it runs)")
    if output_size != length * repeats:
        raise Unsupported(f"repeat_interleave output_size={output_size}, but the result's length is "
                          f"{length} x {repeats} = {length * repeats} (torch raises)")


@lowering("onnx", "aten.repeat_interleave.self_int")
def repeat_interleave_int(ctx, node):
    a = bind(node, "self", "repeats", "dim", "output_size")
    repeats = a.repeats
    if isinstance(repeats, SymRef) or not isinstance(repeats, int) or isinstance(repeats, bool):
        raise Unsupported(f"repeat_interleave with a repeat count known only at run time ({repeats})")
    if repeats < 0:
        raise Unsupported(f"repeat_interleave repeats={repeats} (torch raises: repeats must be non-negative)")
    info = ctx.info(a.self)
    x = ctx.t(a.self)
    shape = list(info.shape)
    if a.dim is None:
        x = _flattened(ctx, x)
        numel = int(np.prod(shape)) if all(isinstance(s, int) for s in shape) else None
        shape, dim = [numel if numel is not None else "?"], 0
    else:
        if not shape:
            raise Unsupported("repeat_interleave of a 0-d tensor along a dim (torch flattens only with dim=None)")
        dim = a.dim % len(shape)
    _check_output_size(a.output_size, shape[dim], repeats)
    wide = [1] * (len(shape) + 1)
    wide[dim + 1] = repeats
    expanded = ctx.op("Expand", ctx.op("Unsqueeze", x, axes_const(ctx, [dim + 1])), ctx.ints(wide))
    return ctx.op("Reshape", expanded, _result_shape(ctx, x, shape, dim, repeats))

