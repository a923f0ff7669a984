"""A reduction that keeps its axes followed by a RESHAPE that only drops them (global average
pooling, then the flatten before the classifier) becomes the reduction without keep_dims, and
the RESHAPE goes: one operator less, the same values in the same order.

Applies to MEAN, SUM, REDUCE_MAX, REDUCE_MIN and REDUCE_PROD with constant axes whose output is
read only by that RESHAPE and is not a subgraph output; the RESHAPE's target (its constant shape
operand, or its output's shape) must equal the input's shape without the reduced axes, up to
one -1 (which the other sizes then fix to that dim).
"""

from __future__ import annotations

import numpy as np

from ..core.builtins import REDUCTIONS
from ..core.model import Subgraph

__all__ = ["drop_squeezing_reshapes"]


def _kept_dims(sub: Subgraph, op) -> list[int] | None:
    """The reduction's input dims without its reduced axes (-1 for a dynamic one)."""
    x, axes = sub.tensors[op.inputs[0]], sub.tensors[op.inputs[1]].data
    if x.shape is None or axes is None or not op.options or not op.options[1].get("keep_dims"):
        return None
    r = len(x.shape)
    if any(not -r <= int(a) < r for a in np.asarray(axes).reshape(-1)):
        return None
    reduced = {int(a) % r for a in np.asarray(axes).reshape(-1)}
    return [d for i, d in enumerate(x.shape) if i not in reduced]


def _target(sub: Subgraph, reshape) -> list[int] | None:
    if len(reshape.inputs) > 1 and reshape.inputs[1] >= 0:
        t = sub.tensors[reshape.inputs[1]].data
        return None if t is None else [int(v) for v in np.asarray(t).reshape(-1)]
    shape = sub.tensors[reshape.outputs[0]].shape
    return None if shape is None else list(shape)


def drop_squeezing_reshapes(sub: Subgraph) -> None:
    for op in list(sub.ops):
        if op.code not in REDUCTIONS or len(op.outputs) != 1:
            continue
        y = op.outputs[0]
        readers = sub.uses.readers.get(y, [])
        if len(readers) != 1 or readers[0].code != "RESHAPE" or readers[0].inputs[0] != y or y in sub.outputs:
            continue
        reshape = readers[0]
        kept, target = _kept_dims(sub, op), _target(sub, reshape)
        if kept is None or target is None or len(kept) != len(target):
            continue
        if target.count(-1) > 1 or any(t != k and t != -1 for t, k in zip(target, kept)) \
                or (-1 in target and kept.count(-1) > 1):
            continue
        outputs = list(reshape.outputs)
        sub.remove_op(reshape)
        op.options = (op.options[0], {**op.options[1], "keep_dims": False})
        sub.rewire(op, outputs=outputs)
