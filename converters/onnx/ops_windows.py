"""``Tensor.unfold(dimension, size, step)``: the sliding windows along one axis.

The output replaces ``dimension``'s length ``L`` with the window count ``(L - size) // step + 1``
and appends an axis of length ``size``: window ``w``, element ``k`` is input index
``w * step + k``. Lowered as one ``Gather`` with that constant 2-D index table (giving the
windows and their elements in place of ``dimension``) and, unless ``dimension`` is the last axis,
a ``Transpose`` moving the element axis to the end. The length along ``dimension`` must be
static (the index table is a constant); a run-time length, and a 0-d input, are refused.
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


@lowering("onnx", "aten.unfold.default")
def unfold(ctx, node):
    a = bind(node, "self", "dimension", "size", "step")
    info = ctx.info(a.self)
    if info.rank == 0:
        raise Unsupported("unfold of a 0-d tensor")
    rank = info.rank
    dim = a.dimension % rank
    length = info.shape[dim]
    if not isinstance(length, int):
        raise Unsupported(f"unfold along dim {dim} of run-time length {length} (the window table is a constant)")
    if not (isinstance(a.size, int) and isinstance(a.step, int)) or a.step <= 0 or a.size < 0 or a.size > length:
        raise Unsupported(f"unfold size={a.size} step={a.step} over length {length} (torch raises)")
    x = ctx.t(a.self)
    table = ctx.const(window_indices(length, a.size, a.step), ST.LONG)
    windows = ctx.op("Gather", x, table, axis=dim)  # x[:dim] + (windows, size) + x[dim+1:]
    if dim == rank - 1:
        return windows
    perm = [*range(dim + 1), *range(dim + 2, rank + 1), dim + 1]
    return ctx.op("Transpose", windows, perm=perm)
