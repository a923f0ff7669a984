"""Duplicate operators merged, dead ones dropped: the pass after the layout pass.

The mappers compute what a node needs where the node is, so a graph repeats work: each layer
takes SHAPE of its own input and slices the same run-time size out of it, each attention node
turns the same mask into the same additive bias. Two operators with the same code, the same
input tensors and the same options compute the same values (every builtin pt2x writes is a
function of its inputs; control flow and stateful or random operators are left alone), so the
later one's readers read the earlier one's outputs and it goes. An operator none of whose
outputs is read or is a subgraph output is dropped. Besides the work saved, every non-XNNPACK
operator removed between XNNPACK ones is a cut fewer in the delegate's partitions.
"""

from __future__ import annotations

from ..core.model import Op, Subgraph

__all__ = ["merge_and_prune"]

# operators that are not a pure function of their input tensors, or that name subgraphs
_KEEP = frozenset({"WHILE", "IF", "CALL_ONCE", "VAR_HANDLE", "READ_VARIABLE", "ASSIGN_VARIABLE",
                   "RANDOM_UNIFORM", "RANDOM_STANDARD_NORMAL", "MULTINOMIAL", "CUSTOM"})


def merge_and_prune(sub: Subgraph) -> None:
    merge_duplicates(sub)
    drop_dead(sub)


def _key(sub: Subgraph, op: Op):
    """What an operator computes: code, inputs, options, and its outputs' types."""
    outs = tuple((sub.tensors[o].dtype, sub.tensors[o].quant) for o in op.outputs)
    return op.code, tuple(op.inputs), repr(op.options), outs


def merge_duplicates(sub: Subgraph) -> None:
    """In op order (producers first): an operator identical to an earlier one is replaced by it.
    One whose output is a subgraph output stays (the output tensor keeps its name)."""
    seen: dict = {}
    alias: dict[int, int] = {}  # dropped output -> the earlier operator's output
    outputs = set(sub.outputs)
    kept = []
    for op in sub.ops:
        if alias and any(i in alias for i in op.inputs):
            sub.rewire(op, inputs=[alias.get(i, i) for i in op.inputs])
        if op.code in _KEEP or not op.outputs:
            kept.append(op)
            continue
        key = _key(sub, op)
        first = seen.get(key)
        if first is None or any(o in outputs for o in op.outputs):
            seen.setdefault(key, op)
            kept.append(op)
            continue
        alias.update(zip(op.outputs, first.outputs))
    sub.set_ops(kept)
    sub.outputs = [alias.get(o, o) for o in sub.outputs]


def drop_dead(sub: Subgraph) -> None:
    """Operators whose outputs nobody reads (in reverse op order, so chains go at once)."""
    live = set(sub.outputs)
    kept = []
    for op in reversed(sub.ops):
        if op.code in _KEEP or not op.outputs or any(o in live for o in op.outputs):
            live.update(i for i in op.inputs if i >= 0)
            kept.append(op)
    sub.set_ops(kept[::-1])
