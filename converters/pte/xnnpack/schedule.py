"""The order XNNPACK runs a partition's nodes in: each node as soon as its inputs are made.

XNNPACK runs a subgraph's nodes in the order they are defined. The plan's order is the
program's (torch's forward, line by line); here a node moves up to just after the last node
making one of its inputs, so that a value's readers run together while it is fresh (ResNet's
downsample convolution right after the first convolution reading the block's input, as exir
orders it). Ties keep the plan's order.
"""

from __future__ import annotations

import heapq

from .graph import XGraph

__all__ = ["schedule"]

_OUTPUTS = ("output_id", "output_value_id", "output_index_id")


def _ids(node) -> tuple[list, list]:
    ins = [v for k, v in node.fields.items() if k.endswith("_id") and k not in _OUTPUTS]
    outs = [v for k, v in node.fields.items() if k in _OUTPUTS]
    return ins, outs


def schedule(g: XGraph) -> None:
    """Reorder ``g.nodes`` (a topological order: every input made before it is read)."""
    maker = {}
    for i, n in enumerate(g.nodes):
        for v in _ids(n)[1]:
            maker[v] = i
    preds = [{maker[v] for v in _ids(n)[0] if v in maker} for n in g.nodes]
    succs = [[] for _ in g.nodes]
    for i, ps in enumerate(preds):
        for p in ps:
            succs[p].append(i)
    waiting = [len(ps) for ps in preds]
    placed_at: dict = {}
    ready = [((-1, i), i) for i in range(len(g.nodes)) if not waiting[i]]
    heapq.heapify(ready)
    order = []
    while ready:
        _key, i = heapq.heappop(ready)
        placed_at[i] = len(order)
        order.append(g.nodes[i])
        for s in succs[i]:
            waiting[s] -= 1
            if not waiting[s]:
                heapq.heappush(ready, ((max(placed_at[p] for p in preds[s]), s), s))
    if len(order) != len(g.nodes):
        raise ValueError("the partition's nodes form a cycle")
    g.nodes[:] = order
