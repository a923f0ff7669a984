"""Float rewrites around the matrix products of a transformer, after the layout pass and the
merge of duplicates (attention as torch's math path writes it: ``q·√s @ (k·√s)ᵀ``).

- **Transposed right operand.** A BATCH_MATMUL whose right operand is a TRANSPOSE that only
  swaps the last two dims (an attention's ``kᵀ``) reads the transpose's input with ``adj_y``
  instead, the layout XNNPACK's batch matrix multiply takes without a copy (its
  ``XNN_FLAG_TRANSPOSE_B``). The same products of the same values: exact. ``adj_x`` is left
  alone (XNNPACK refuses it).
- **Scalar scale into a fully connected layer.** A MUL by a float32 scalar constant c (finite,
  not 0) of a FULLY_CONNECTED's output, directly or through the RESHAPE that splits heads, is
  folded into the layer: weights W·c and bias b·c, computed once when converting. The kernel then
  computes x·(W·c) + b·c instead of (x·W + b)·c: equal up to float32 rounding, the same
  reassociation as the bias folding of ``fuse_activations.py`` (attention's √scale on q and k).

Each applies to float32, unquantized tensors whose intermediate values have that one reader and
are not subgraph outputs. A constant read by nothing else is rewritten in place, so the old
values do not stay in the file.
"""

from __future__ import annotations

import numpy as np

from .layer_constants import is_float32, shared_buffers, unfused
from .model import Op, Subgraph, Tensor, TensorType

__all__ = ["fuse_matmuls"]


def fuse_matmuls(sub: Subgraph) -> None:
    transposes_into_adj_y(sub)
    fold_scalar_scales(sub)


def _private(sub: Subgraph, idx: int, readers: dict[int, int]) -> bool:
    """A float32 value read by one op slot and not a subgraph output."""
    return is_float32(sub, idx) and readers.get(idx) == 1 and idx not in sub.outputs


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
    readers = sub.reader_counts()
    producer = {o: op for op in sub.ops for o in op.outputs}
    for mm in list(sub.ops):
        if mm.code != "BATCH_MATMUL" or mm.options is None or mm.options[1].get("adj_y"):
            continue
        b = mm.inputs[1]
        tr = producer.get(b)
        if tr is None or not _last_two_swapped(sub, tr) or not is_float32(sub, b) or not is_float32(sub, tr.inputs[0]):
            continue
        mm.inputs = [mm.inputs[0], tr.inputs[0]] + mm.inputs[2:]
        mm.options = (mm.options[0], {**mm.options[1], "adj_y": True})
        readers[b] -= 1
        readers[tr.inputs[0]] = readers.get(tr.inputs[0], 0) + 1
        if readers[b] == 0 and b not in sub.outputs:
            sub.ops.remove(tr)
            readers[tr.inputs[0]] -= 1
            readers[tr.inputs[1]] -= 1


def _scalar(sub: Subgraph, idx: int, rank: int | None) -> np.float32 | None:
    """A finite, non-zero float32 constant of one element and of rank <= ``rank`` (so that
    multiplying by it changes no shape)."""
    t = sub.tensors[idx]
    if t.data is None or not is_float32(sub, idx) or t.data.size != 1 or rank is None or t.data.ndim > rank:
        return None
    c = np.float32(t.data.reshape(()))
    return c if np.isfinite(c) and c != 0 else None


def _fc_with_constants(sub: Subgraph, op: Op | None) -> bool:
    """An unfused float FULLY_CONNECTED with constant float32 weights and bias (or none)."""
    if op is None or op.code != "FULLY_CONNECTED" or not unfused(op):
        return False
    w = sub.tensors[op.inputs[1]]
    if w.data is None or not is_float32(sub, op.inputs[1]):
        return False
    b = op.inputs[2] if len(op.inputs) > 2 else -1
    return b < 0 or (sub.tensors[b].data is not None and is_float32(sub, b))


def _scaled(sub: Subgraph, idx: int, c: np.float32, readers: dict[int, int]) -> int | None:
    """Constant ``idx`` times c, in place when nothing else reads it; None where not finite."""
    t = sub.tensors[idx]
    with np.errstate(over="ignore", under="ignore"):
        data = (t.data * c).astype(np.float32)
    if not np.all(np.isfinite(data)):
        return None
    if readers.get(idx) == 1 and idx not in sub.outputs:
        t.data = data
        return idx
    return sub.add(Tensor(t.name + "/scaled", TensorType.FLOAT32, list(t.shape), data))


def _scale_source(sub: Subgraph, x: int, producer: dict, readers: dict) -> tuple[Op, Op | None] | None:
    """(the FULLY_CONNECTED, the RESHAPE between or None) whose output ``x`` is."""
    op = producer.get(x)
    if op is not None and op.code == "RESHAPE" and _private(sub, op.inputs[0], readers):
        fc = producer.get(op.inputs[0])
        return (fc, op) if _fc_with_constants(sub, fc) else None
    return (op, None) if _fc_with_constants(sub, op) else None


def fold_scalar_scales(sub: Subgraph) -> None:
    readers = sub.reader_counts()
    producer = {o: op for op in sub.ops for o in op.outputs}
    shared = shared_buffers(sub)
    for mul in list(sub.ops):
        if mul.code != "MUL" or len(mul.inputs) != 2 or not unfused(mul) or not is_float32(sub, mul.outputs[0]):
            continue
        for k in (0, 1):
            x, c_idx = mul.inputs[k], mul.inputs[1 - k]
            c = _scalar(sub, c_idx, sub.tensors[x].rank)
            src = _scale_source(sub, x, producer, readers) if c is not None and _private(sub, x, readers) else None
            if src is None or not _fold(sub, src, c, readers, shared):
                continue
            fc, reshape = src
            last = reshape or fc
            last.outputs = list(mul.outputs)
            producer[mul.outputs[0]] = last
            sub.ops.remove(mul)
            readers[x] -= 1
            readers[c_idx] -= 1
            break


def _fold(sub: Subgraph, src: tuple[Op, Op | None], c: np.float32, readers: dict, shared: set[int]) -> bool:
    """Scale the layer's weights and bias by c; False (nothing changed) where one is not finite,
    or where the weights are read elsewhere or share their bytes' buffer (never copied)."""
    fc = src[0]
    if readers.get(fc.inputs[1]) != 1 or fc.inputs[1] in shared:
        return False
    w_data = sub.tensors[fc.inputs[1]].data
    with np.errstate(over="ignore", under="ignore"):
        if not np.all(np.isfinite(w_data * c)):
            return False
        b = fc.inputs[2] if len(fc.inputs) > 2 else -1
        if b >= 0 and not np.all(np.isfinite(sub.tensors[b].data * c)):
            return False
    w = _scaled(sub, fc.inputs[1], c, readers)
    new_b = _scaled(sub, b, c, readers) if b >= 0 else -1
    for old, new in ((fc.inputs[1], w), (b, new_b)):
        if old >= 0 and new != old:
            readers[old] -= 1
            readers[new] = 1
    fc.inputs = [fc.inputs[0], w, new_b] + fc.inputs[3:]
    return True
