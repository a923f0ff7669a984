"""Indexing: ``index.Tensor`` (advanced indexing: index tensors broadcast together, ``None`` for a
dim taken whole), ``index_select``, ``gather``; each its portable kernel. The output's shape (a
dynamic one at its upper bound) is the node's metadata; a bool mask index, whose output size
depends on the data, has no bound and is refused by the planner."""

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
