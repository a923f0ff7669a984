"""``meshgrid``: N 1-D tensors to N tensors on their common grid.

Output ``i`` is input ``i`` reshaped to a vector along its grid axis (ones elsewhere) and
broadcast to the grid's shape with ``Expand``. ``indexing="ij"``: input ``i``'s axis is ``i``,
the grid shape the inputs' lengths in order; ``indexing="xy"`` (Cartesian): the first two axes
swap, so input 0 runs along axis 1 and input 1 along axis 0. A 0-d input counts as one element
(torch's rule). The grid shape is a constant when every length is static, else read at run time.
"""

from __future__ import annotations

from ..aten.args import bind
from ..aten.registry import lowering
from ..errors import Unsupported

INDEXINGS = ("ij", "xy")


def grid_axes(n: int, indexing: str) -> list[int]:
    """The grid axis of each of ``n`` inputs."""
    axes = list(range(n))
    if indexing == "xy" and n >= 2:
        axes[0], axes[1] = 1, 0
    return axes


def _length(ctx, ref) -> tuple[object, str]:
    """An input's length (an int when static) and as a 1-D int64 of length 1."""
    info = ctx.info(ref)
    if info.rank > 1:
        raise Unsupported(f"meshgrid of a {info.rank}-d tensor (torch takes 0-d or 1-d tensors)")
    if info.rank == 0:
        return 1, ctx.ints([1])
    return info.shape[0], ctx.dim(ref, 0)


@lowering("onnx", "aten.meshgrid.default", "aten.meshgrid.indexing")
def meshgrid(ctx, node):
    a = bind(node, "tensors")
    indexing = a.get("indexing") or "ij"
    if indexing not in INDEXINGS:
        raise Unsupported(f"meshgrid indexing={indexing!r} (torch takes 'ij' or 'xy')")
    tensors = list(a.tensors)
    axes = grid_axes(len(tensors), indexing)
    lengths = [_length(ctx, t) for t in tensors]
    order = sorted(range(len(tensors)), key=lambda i: axes[i])  # the input whose axis is 0, 1, ...
    static = [lengths[i][0] for i in order]
    if all(isinstance(s, int) for s in static):
        grid = ctx.ints(static)
    else:
        grid = ctx.op("Concat", *[lengths[i][1] for i in order], axis=0)
    outs = []
    for i, t in enumerate(tensors):
        vector_shape = [1] * len(tensors)
        vector_shape[axes[i]] = -1
        vector = ctx.op("Reshape", ctx.t(t, ctx.out_info(i).dtype), ctx.ints(vector_shape))
        outs.append(ctx.op("Expand", vector, grid))
    return outs
