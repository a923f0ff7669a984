"""Operator order for the delegate: integer and boolean work that reads only the subgraph's
inputs and constants runs first.

LiteRT's delegate partitioner walks the operators in their order and starts a new partition
each time it meets an operator the delegate does not take after ones it does; an operator
that could have run at the start (a mask turned into an additive bias, positions, sizes from
the input's SHAPE) but is listed in the middle of the float graph cuts XNNPACK's graph in two.
XNNPACK runs float32 operators only, so an operator reading or writing a tensor of another
type (constants aside: perms, axes, shapes) is one it leaves to LiteRT. Each such operator
whose operands are all subgraph inputs, constants or outputs of operators already moved is
moved to the front, in its original relative order; every other operator keeps its order, so
the list stays topologically sorted and the values computed are the same.
"""

from __future__ import annotations

from ..core.model import Op, Subgraph, TensorType

__all__ = ["hoist_input_only"]

_FLOAT = TensorType.FLOAT32
_IN_PLACE = frozenset({"WHILE", "IF", "CALL_ONCE", "VAR_HANDLE", "READ_VARIABLE", "ASSIGN_VARIABLE"})


def _not_float(sub: Subgraph, op: Op) -> bool:
    """Whether the operator touches a non-float32 tensor other than a constant operand."""
    ts = sub.tensors
    return (any(i >= 0 and ts[i].data is None and ts[i].dtype != _FLOAT for i in op.inputs)
            or any(o >= 0 and ts[o].dtype != _FLOAT for o in op.outputs))


def hoist_input_only(sub: Subgraph) -> None:
    ready = set(sub.inputs)  # tensors the hoisted prefix has computed, with the inputs
    ts = sub.tensors
    first, rest = [], []
    for op in sub.ops:
        if (op.code not in _IN_PLACE and _not_float(sub, op)
                and all(i < 0 or i in ready or ts[i].data is not None for i in op.inputs)):
            first.append(op)
            ready.update(op.outputs)
        else:
            rest.append(op)
    sub.set_ops(first + rest)
