"""``Tensor.unfold(dimension, size, step)``: the sliding windows along one axis.

The output replaces ``dimension``'s length ``L`` with the window count ``(L - size) // step + 1``
and appends an axis of length ``size``: window ``w``, element ``k`` is input index
``w * step + k``. Lowered as one ``Gather`` with that constant 2-D index table (giving the
windows and their elements in place of ``dimension``) and, unless ``dimension`` is the last axis,
a ``Transpose`` moving the element axis to the end. The index table is a constant when the
length along ``dimension`` is static, else built at run time from ``Shape`` and ``Range``. A 0-d
input is one element along dim 0: ``size`` 0 or 1 windows of it.
"""

from __future__ import annotations

import numpy as np

from ..aten.args import bind
from ..aten.dtypes import ST
from ..aten.registry import lowering
from ..errors import Unsupported


def window_indices(length: int, size: int, step: int) -> np.ndarray:
    """(windows, size) int64: the input index of each window's elements."""
    count = (length - size) // step + 1
    return np.arange(count, dtype=np.int64)[:, None] * step + np.arange(size, dtype=np.int64)[None, :]


@lowering("onnx", "aten.unfold.default", "aten.unfold_copy.default")
def unfold(ctx, node):
    """The windows ``x[w * step : w * step + size]`` along ``dimension``, their elements last."""
    a = bind(node, "self", "dimension", "size", "step")
    info = ctx.info(a.self)
    if not (isinstance(a.size, int) and isinstance(a.step, int)) or a.step <= 0 or a.size < 0:
        raise Unsupported(f"unfold size={a.size} step={a.step} (torch raises)")
    x = ctx.t(a.self)
    if info.rank == 0:  # torch: [size] copies of the one element, size 0 or 1
        if a.dimension not in (0, -1) or a.size > 1:
            raise Unsupported(f"unfold of a 0-d tensor along {a.dimension} with size {a.size} (torch raises)")
        return ctx.op("Slice", ctx.op("Reshape", x, ctx.ints([1])), ctx.ints([0]), ctx.ints([a.size]), ctx.ints([0]))
    rank = info.rank
    dim = a.dimension % rank
    length = info.shape[dim]
    if isinstance(length, int):
        if a.size > length:
            raise Unsupported(f"unfold size={a.size} over length {length} (torch raises)")
        table = ctx.const(window_indices(length, a.size, a.step), ST.LONG)
    else:
        table = _window_table(ctx, x, dim, a.size, a.step)
    windows = ctx.op("Gather", x, table, axis=dim)  # x[:dim] + (windows, size) + x[dim+1:]
    if dim == rank - 1:
        return windows
    perm = [*range(dim + 1), *range(dim + 2, rank + 1), dim + 1]
    return ctx.op("Transpose", windows, perm=perm)


def _window_table(ctx, x: str, dim: int, size: int, step: int) -> str:
    """``window_indices`` of dim ``dim``'s run-time length: ``count = (L - size) // step + 1``
    windows (0 when ``L < size``, where torch raises)."""
    long = ST.LONG
    length = ctx.op("Reshape", ctx.shape(x, dim, dim + 1), ctx.ints([]))
    room = ctx.op("Add", ctx.op("Sub", length, ctx.const(size, long)), ctx.const(step, long))
    # room < 0 (L < size): Div truncates towards 0, so count is 0 after the Max
    count = ctx.op("Max", ctx.op("Div", room, ctx.const(step, long)), ctx.const(0, long))
    starts = ctx.op("Range", ctx.const(0, long), ctx.op("Mul", count, ctx.const(step, long)), ctx.const(step, long))
    col = ctx.op("Unsqueeze", starts, ctx.const(np.array([1], np.int64), long))
    return ctx.op("Add", col, ctx.const(np.arange(size, dtype=np.int64)[None, :], long))
