"""A float rewrite around the matrix products of a transformer, after the layout pass and the
merge of duplicates (attention as torch's math path writes it: ``q·√s @ (k·√s)ᵀ``; its √s on q
and k is folded into their layers' weights by ``fold_affine.py``, with the other per-channel
scales).

- **Transposed right operand.** A BATCH_MATMUL whose right operand is a TRANSPOSE that only
  swaps the last two dims (an attention's ``kᵀ``) reads the transpose's input with ``adj_y``
  instead, the layout XNNPACK's batch matrix multiply takes without a copy (its
  ``XNN_FLAG_TRANSPOSE_B``). The same products of the same values: exact. ``adj_x`` is left
  alone (XNNPACK refuses it).

It applies to float32, unquantized tensors; the TRANSPOSE goes when nothing else reads its output.
"""

from __future__ import annotations

from ..core.layer_constants import is_float32
from ..core.model import Op, Subgraph

__all__ = ["transposes_into_adj_y"]


def _last_two_swapped(sub: Subgraph, op: Op) -> bool:
    """A TRANSPOSE by a constant perm [0, 1, ..., r-1, r-2] (r >= 2)."""
    if op.code != "TRANSPOSE" or len(op.inputs) != 2:
        return False
    perm = sub.tensors[op.inputs[1]].data
    if perm is None or perm.ndim != 1 or perm.size < 2:
        return False
    r = perm.size
    return [int(p) for p in perm] == list(range(r - 2)) + [r - 1, r - 2]


def transposes_into_adj_y(sub: Subgraph) -> None:
    for mm in list(sub.ops):
        if mm.code != "BATCH_MATMUL" or mm.options is None or mm.options[1].get("adj_y"):
            continue
        b = mm.inputs[1]
        tr = sub.uses.producer.get(b)
        if tr is None or not _last_two_swapped(sub, tr) or not is_float32(sub, b) or not is_float32(sub, tr.inputs[0]):
            continue
        sub.rewire(mm, inputs=[mm.inputs[0], tr.inputs[0]] + mm.inputs[2:])
        mm.options = (mm.options[0], {**mm.options[1], "adj_y": True})
        if sub.uses.count(b) == 0 and b not in sub.outputs:
            sub.remove_op(tr)
