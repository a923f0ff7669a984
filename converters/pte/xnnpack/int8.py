"""PT2E int8 in the delegate: the plan's quantizes and dequantizes (``program.QuantOp``) as
XNNPACK int8 values.

``fold(plan)`` puts each recorded ``QuantOp`` in the place of the portable calls it was written
as (when they are a run of calls whose scratch tensors nothing else reads); ``unfold(calls)``
puts the calls back for those the delegate did not take. Inside a partition:

* a dequantize defines nothing: its float result *is* its int8 source (a ``QINT8`` value with its
  scale and zero point) to an op that runs int8 (``ops_int8.py``), and a float reader gets an
  ``XNNConvert`` of it (``Builder._input``);
* a quantize after an op that runs int8 is that op's output (``quantize_after``: absorbed);
  any other is an ``XNNConvert`` from float32;
* a per-channel dequantize of an int8 weight is read only as a ``QCINT8`` filter
  (``weight_view``): on its own it stays portable, and is dropped when nothing else reads it.

Only what XNNPACK's int8 values hold is taken: int8 (not uint8) with the full range -128..127 for
a quantize (XNNPACK clamps to the type's range), per-channel weights with zero points 0.
"""

from __future__ import annotations

import numpy as np

from ..program import Call, QuantOp, TensorValue
from .builder import STD, Ref
from .constants import literal_blob
from .graph import QINT8, PerChannel, PerTensor
from .index import kernel_key
from .rules import INT8, tensor_problem
from .table import xnn_op

__all__ = ["fold", "unfold", "dequantized", "quantize_after", "weight_view", "channel_scales", "params",
           "QUANTIZE", "DEQUANTIZE", "PER_CHANNEL"]

QUANTIZE, DEQUANTIZE, PER_CHANNEL = "quantize_per_tensor", "dequantize_per_tensor", "dequantize_per_channel"
INT8_RANGE = (-128, 127)
_TRANSPOSES = ("permute_copy.out", "transpose_copy.int_out")


# ------------------------------------------------------------------ the plan


def fold(plan) -> None:
    """Each ``QuantOp`` whose calls are a run of the plan's calls, their scratch tensors read by
    no other call, in the place of those calls."""
    position = {id(c): i for i, c in enumerate(plan.calls)}
    readers: dict = {}
    for c in plan.calls:
        for t in c.reads:
            readers.setdefault(t.storage(), set()).add(id(c))
    start = {}
    for q in plan.quant_ops:
        at = [position.get(id(c)) for c in q.calls]
        if not at or None in at or at != list(range(at[0], at[0] + len(at))):
            continue
        own = {id(c) for c in q.calls}
        scratch = {t.storage() for c in q.calls for t in c.writes} - {q.result.storage()}
        if any(readers.get(s, set()) - own for s in scratch):
            continue
        start[at[0]] = q
    calls, skip = [], 0
    for i, c in enumerate(plan.calls):
        if skip:
            skip -= 1
            continue
        q = start.get(i)
        calls.append(q if q is not None else c)
        skip = len(q.calls) - 1 if q is not None else 0
    plan.calls = calls


def unfold(calls: list) -> list:
    """``calls`` with each ``QuantOp`` left replaced by its portable calls."""
    out = []
    for c in calls:
        out.extend(c.calls if isinstance(c, QuantOp) else [c])
    return out


# ------------------------------------------------------------------ reading the parameters


def params(q: QuantOp) -> PerTensor:
    return PerTensor(float(q.scale), int(q.zero_point))


def dequantized(b, t: TensorValue) -> QuantOp | None:
    """The dequantize of the partition whose result ``t`` is (with its sizes), else None."""
    q = b.dequantized.get(t.storage())
    return q if q is not None and tuple(t.sizes) == tuple(q.result.sizes) else None


def quantize_after(b, t: TensorValue) -> QuantOp | None:
    """The quantize of the partition that is ``t``'s only reader (not yet taken), else None."""
    r = b.ix.sole_reader(t)
    if not isinstance(r, QuantOp) or r.kind != QUANTIZE or not b.in_group(r) or id(r) in b.absorbed:
        return None
    return r if tuple(r.source.sizes) == tuple(t.sizes) and r.source.storage() is t.storage() else None


def weight_view(ix, t):
    """(the per-channel dequantize, a key, the int8 weight as ``t`` lays it out, the channel
    axis there, the permutation from the weight) when ``t`` is a per-channel dequantize of an int8
    weight or a transpose of one; else None."""
    if not isinstance(t, TensorValue) or t.alias_of is not None:
        return None
    c = ix.writer.get(t)
    if isinstance(c, QuantOp):
        if c.kind != PER_CHANNEL or c.source.weight is None or c.source.alias_of is not None:
            return None
        arr = ix.weights[c.source.weight].array
        return c, c.source.weight, arr, c.axis, tuple(range(arr.ndim))
    if isinstance(c, Call) and kernel_key(c) in _TRANSPOSES:
        a = ix.args(c)
        inner = weight_view(ix, a["self"])
        if inner is None:
            return None
        q, key, arr, axis, perm0 = inner
        rank = arr.ndim
        if kernel_key(c) == "permute_copy.out":
            perm = [int(x.value) % rank for x in a["dims"].items]
        else:
            perm = list(range(rank))
            i, j = int(a["dim0"].value) % rank, int(a["dim1"].value) % rank
            perm[i], perm[j] = perm[j], perm[i]
        return q, key, arr.transpose(perm), perm.index(axis), tuple(perm0[p] for p in perm)
    return None


def weight_scales(ix, q: QuantOp) -> np.ndarray | None:
    """The float32 scales of a per-channel dequantize whose zero points are all 0, else None."""
    if q.zero_point is not None and np.any(np.asarray(ix.weights[q.zero_point].array)):
        return None
    return np.asarray(ix.weights[q.scale].array, dtype=np.float64).astype(np.float32)


def channel_scales(b, key: str, scales: np.ndarray) -> int:
    """The ``constant_data`` index of a blob of float32 scales (a ``PerChannel``'s)."""
    blob = b.blob(literal_blob(f"{key}|scales", scales))
    return b.g.constant(blob.key, blob.nbytes)


def per_channel(b, key: str, scales: np.ndarray, dim: int) -> PerChannel:
    return PerChannel(dim, channel_scales(b, key, scales), len(scales))


# ------------------------------------------------------------------ the QuantOps as XNNPACK values


def _check(ix, q, _a):
    if q.kind == PER_CHANNEL:
        return "a weight's dequantize: read as a per-channel int8 filter by the op that takes it"
    if q.axis is not None or not isinstance(q.scale, float) or not isinstance(q.zero_point, int):
        return "quantization parameters that are not per-tensor literals"
    int8, real = (q.result, q.source) if q.kind == QUANTIZE else (q.source, q.result)
    if int8.scalar_type != INT8:
        return "a quantized dtype other than int8 (XNNPACK's qint8)"
    if q.kind == QUANTIZE and (q.quant_min, q.quant_max) != INT8_RANGE:
        return f"a quantize to [{q.quant_min}, {q.quant_max}] (XNNPACK's clamps to int8's range)"
    return tensor_problem(real, "the float tensor")


@xnn_op(f"quantized_decomposed::{DEQUANTIZE}", check=_check)
def dequantize(b, q, _a):
    """Nothing yet: the int8 source is the value; a float reader converts it (``Builder._input``)."""
    s = q.source.storage()
    if s not in b.refs:  # the int8 tensor comes from outside the partition
        v = b.g.value(s.sizes, dtype=QINT8, quant=params(q))
        b.g.inputs.append(v)
        b.inputs.append(s)
        b.refs[s] = Ref(v, tuple(s.sizes), STD)
    b.dequantized[q.result.storage()] = q


@xnn_op(f"quantized_decomposed::{QUANTIZE}", check=_check)
def quantize(b, q, _a):
    """A quantize no int8 op took: an ``XNNConvert`` from float32."""
    x = q.source
    ref = b.ref(x)
    layout = ref.layout if ref.sizes == tuple(x.sizes) else STD
    xin = b.tensor(x, layout)
    y = b.g.value(xin.dims, dtype=QINT8, quant=params(q))
    b.node("XNNConvert", "_XNNNode1x1", input_id=xin.id, output_id=y.id, flags=0)
    b.bind(q.result, y, layout, tuple(x.sizes))


xnn_op(f"quantized_decomposed::{PER_CHANNEL}", check=_check)(dequantize)  # refused by its check
