"""Indexing and its writes: ``index.Tensor`` (advanced indexing: index tensors broadcast together,
``None`` for a dim taken whole), ``index_select``, ``gather``; ``slice_scatter``, ``select_scatter``
and ``index_put`` (a new tensor: ``self`` with the indexed part replaced, or accumulated into);
each its portable kernel. The output's shape (a dynamic one at its upper bound) is the node's
metadata; a bool mask index, whose output size depends on the data, has no bound and is refused by
the planner. The scatters are also what the front end's view-mutation pass writes an in-place op
on a view back with (``m[:, 0:2].fill_(1)``)."""

from __future__ import annotations

from ..aten.args import bind
from ..aten.registry import lowering


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


@lowering("pte", "aten.slice_scatter.default")
def slice_scatter(ctx, node):
    a = bind(node)
    return ctx.call("slice_scatter.out", {"self": a.self, "src": a.src, "dim": a.dim, "start": a.start, "end": a.end,
                                          "step": a.step}, [ctx.output(node)]).name


@lowering("pte", "aten.select_scatter.default")
def select_scatter(ctx, node):
    a = bind(node)
    return ctx.call("select_scatter.out", {"self": a.self, "src": a.src, "dim": a.dim, "index": a.index},
                    [ctx.output(node)]).name


@lowering("pte", "aten.index_put.default")
def index_put(ctx, node):
    a = bind(node)
    return ctx.call("index_put.out", {"self": a.self, "indices": a.indices, "values": a.values,
                                      "accumulate": a.accumulate}, [ctx.output(node)]).name
