"""Indexing and writes at positions: ``index.Tensor`` (advanced indexing: index tensors broadcast
together, ``None`` for a dim taken whole), ``index_select``, ``gather``; ``index_put``,
``index_copy``, ``index_add``, ``slice_scatter`` and ``select_scatter`` (a new tensor:
``self`` with the indexed part replaced, or accumulated into), what a static KV cache's update
and the front end's write-backs through views (``m[:, 0:2].fill_(1)``) lower to; each its
portable kernel. The output's shape (a dynamic one at its upper bound) is the node's metadata; a
bool mask index, whose output size depends on the data, has no bound and is refused by the planner.

The in-place forms (``index_put_``; ``index_copy_`` derived by the registry) are the
same lowerings: the front end rebinds the written tensor to the result (a mutated buffer is
written back after the graph, ``state.py``). ``index_copy`` has no portable kernel: it is
``index_put`` with its index at ``dim`` and every other dim taken whole (core ATen's decomposition).

The writes' index tensors are int64 (``dtypes.KERNEL_DTYPES``: ``index_put.out``'s ``indices``).
"""

from __future__ import annotations

from ...schema import definitions as d
from ..aten.args import TensorRef, bind
from ..aten.registry import lowering
from ..errors import Unsupported

@lowering("pte", "aten.index.Tensor")
def index(ctx, node):
    a = bind(node)
    return ctx.call("index.Tensor_out", {"self": a.self, "indices": a.indices}, [ctx.output(node)]).name


@lowering("pte", "aten.index_select.default")
def index_select(ctx, node):
    a = bind(node)
    return ctx.call("index_select.out", {"self": a.self, "dim": a.dim, "index": a.index}, [ctx.output(node)]).name


@lowering("pte", "aten.gather.default")
def gather(ctx, node):
    """``sparse_grad`` shapes only the gradient."""
    a = bind(node)
    a.declare("sparse_grad")
    return ctx.call("gather.out", {"self": a.self, "dim": a.dim, "index": a.index}, [ctx.output(node)]).name


def _int64_indices(ctx, refs) -> None:
    for r in refs:
        if r is not None and ctx.view.tensor(r.name).dtype != d.ScalarType.LONG:
            raise Unsupported(f"an index tensor of {ctx.view.tensor(r.name).dtype.name} (a mask or int32 index): "
                              "the pte target converts int64 indices")


@lowering("pte", "aten.index_put.default", "aten.index_put_.default")
def index_put(ctx, node):
    a = bind(node)
    _int64_indices(ctx, a.indices)
    return ctx.call("index_put.out", {"self": a.self, "indices": a.indices, "values": a.values,
                                      "accumulate": a.accumulate}, [ctx.output(node)]).name


def _rows_at(ctx, a, op: str) -> list:
    """``[None] * dim + [index]``: the index list that puts ``source``'s rows at ``index`` along
    ``dim`` (the indexed shape is ``source``'s)."""
    _int64_indices(ctx, [a.index])
    if ctx.view.tensor(a.index.name).rank != 1:
        raise Unsupported(f"{op} with an index that is not 1-D")
    rank = ctx.view.tensor(a.self.name).rank
    if rank == 0 or ctx.view.tensor(a.source.name).rank != rank:
        raise Unsupported(f"{op} of a 0-d tensor, or with a source of another rank")
    return [None] * (a.dim % rank) + [TensorRef(a.index.name)]


@lowering("pte", "aten.index_copy.default")
def index_copy(ctx, node):
    """``self`` with the rows ``index`` along ``dim`` replaced by ``source``'s."""
    a = bind(node)
    return ctx.call("index_put.out", {"self": a.self, "indices": _rows_at(ctx, a, "index_copy"), "values": a.source,
                                      "accumulate": False}, [ctx.output(node)]).name


@lowering("pte", "aten.index_add.default")
def index_add(ctx, node):
    """``self`` with ``alpha * source``'s rows added at ``index`` along ``dim`` (repeated indices
    add up): ``index_put`` with ``accumulate``, as core ATen decomposes it."""
    a = bind(node)
    indices = _rows_at(ctx, a, "index_add")
    source = a.source
    if a.alpha != 1:
        source = ctx.call("mul.Scalar_out", {"self": a.source, "other": a.alpha},
                          [ctx.scratch("index_add_source", ctx.view.tensor(a.source.name).shape)])
    return ctx.call("index_put.out", {"self": a.self, "indices": indices, "values": source, "accumulate": True},
                    [ctx.output(node)]).name


@lowering("pte", "aten.slice_scatter.default")
def slice_scatter(ctx, node):
    a = bind(node)
    return ctx.call("slice_scatter.out", {"self": a.self, "src": a.src, "dim": a.dim, "start": a.start,
                                          "end": a.end, "step": a.step}, [ctx.output(node)]).name


@lowering("pte", "aten.select_scatter.default")
def select_scatter(ctx, node):
    a = bind(node)
    return ctx.call("select_scatter.out", {"self": a.self, "src": a.src, "dim": a.dim, "index": a.index},
                    [ctx.output(node)]).name
