"""Cutting and joining ONNX ops: Slice (constant or run-time starts/ends/steps/axes), Concat, Split.

Bounds known only at run time are built at run time as int32 (clamped to int32's range).
"""

from __future__ import annotations

import numpy as np

from ...errors import Unsupported
from ..core.emit import Emitter, attrs
from ..core.mappers import maps
from ..core.model import Tensor
from ..core.model import TensorType as T
from .shape import _axis, axes_of, shape_tensor, _slice1d

_I32 = np.iinfo(np.int32)


@maps("Concat")
def concat(em: Emitter, node) -> None:
    rank = em.rank(node.output[0])
    ins = [em.t(i) for i in node.input if i]
    em.op("CONCATENATION", ins, [em.out()],
          ("ConcatenationOptions", {"axis": _axis(int(attrs(node)["axis"]), rank)}))


def _full(em: Emitter, rank: int, axes: list[int], name: str, default: int) -> tuple[int, int]:
    """(1-D int32 tensor over all ``rank`` axes, mask of axes not sliced) for Slice's starts/ends/steps."""
    mask = sum(1 << a for a in range(rank) if a not in axes)
    v = em.const_value(name) if name else None
    if not name or v is not None:
        vals = [default] * rank
        if name:
            for a, s in zip(axes, np.asarray(v).reshape(-1)):
                vals[a] = int(np.clip(int(s), _I32.min, _I32.max))
        return em.const(np.asarray(vals, np.int32)), mask
    src = _clamped_bounds(em, name)
    pieces = []
    for a in range(rank):
        if a in axes:
            j = axes.index(a)
            pieces.append(_slice1d(em, src, j, j + 1))
        else:
            pieces.append(em.const(np.array([default], np.int32)))
    out = em.tmp(T.INT32, [rank], "slice")
    em.op("CONCATENATION", pieces, [out], ("ConcatenationOptions", {"axis": 0}))
    return out, mask


def _clamped_bounds(em: Emitter, name: str) -> int:
    """Run-time Slice bounds as int32. A graph input's int64 values are clamped to int32's range
    in int64 first (the CAST at the input edge keeps the low 32 bits: an end of INT64_MAX, the
    usual "to the end", would read as -1 and drop the last element, measured)."""
    raw = next((i for i in em.sub.inputs if em.sub.tensors[i].name == name), None)
    if raw is None or em.dtype_of(raw) != T.INT64:
        return em.t(name)
    low = em.binary("MAXIMUM", raw, _int64_const(em, _I32.min))
    high = em.binary("MINIMUM", low, _int64_const(em, _I32.max))
    return em.cast(high, T.INT32)


def _int64_const(em: Emitter, v: int) -> int:
    """An int64 scalar (``Emitter.const`` stores int64 as int32, the compute type)."""
    return em.sub.add(Tensor(em.fresh_name("bound"), T.INT64, [], np.array(v, np.int64)))


def _stride_as_reshape(em: Emitter, node, ins: list[str], axes: list[int], steps: list[int]) -> bool:
    """``x[start::s]`` along one static axis of size d (a multiple of s, 0 <= start < s, to the
    end): RESHAPE the axis to [d / s, s], take position ``start`` of the new axis, RESHAPE to
    the output: the same elements (start + k*s), and XNNPACK takes a unit-stride slice and
    constant reshapes, not a strided STRIDED_SLICE (Swin's patch merging)."""
    shape, out = em.shape(node.input[0]), em.shape(node.output[0])
    starts, ends = em.const_value(ins[1]), em.const_value(ins[2])
    if len(axes) != 1 or steps[0] <= 1 or starts is None or ends is None or shape is None or out is None:
        return False
    a, st, d = axes[0], steps[0], shape[axes[0]]
    start, end = int(np.asarray(starts).reshape(-1)[0]), int(np.asarray(ends).reshape(-1)[0])
    start, end = start + d if start < 0 else start, min(end + d if end < 0 else end, d)
    if (d <= 0 or d % st or not 0 <= start < st or start + (d // st - 1) * st >= end or len(shape) > 4
            or sum(v < 0 for v in shape) > 1 or sum(v < 0 for v in out) > 1):
        return False
    split = em.tmp(em.dtype_of(em.t(node.input[0])), shape[:a] + [d // st, st] + shape[a + 1:], "phases")
    em.op("RESHAPE", [em.t(node.input[0]), em.const(np.array(em.shape_of(split), np.int32))], [split])
    rank = len(shape) + 1
    begin, end_ = np.zeros(rank, np.int32), np.zeros(rank, np.int32)
    begin[a + 1], end_[a + 1] = start, start + 1
    whole = ((1 << rank) - 1) & ~(1 << (a + 1))
    phase = em.tmp(em.dtype_of(split), None, "phase")
    em.op("STRIDED_SLICE", [split, em.const(begin), em.const(end_), em.const(np.ones(rank, np.int32))], [phase],
          ("StridedSliceOptions", {"begin_mask": whole, "end_mask": whole}))
    em.op("RESHAPE", [phase, em.const(np.array(out, np.int32))], [em.out()])
    return True


@maps("Slice")
def slice_(em: Emitter, node) -> None:
    if "starts" in attrs(node):
        raise Unsupported("Slice-1 (starts/ends as attributes, opset < 10)")
    rank = em.rank(node.input[0])
    ins = list(node.input) + [""] * (5 - len(node.input))
    if ins[3] and em.const_value(ins[3]) is None:
        _slice_run_time_axes(em, node, ins, rank)
        return
    axes = axes_of(em, node, 3)
    axes = list(range(len(np.asarray(em.const_value(ins[1])).reshape(-1)))) if axes is None and \
        em.const_value(ins[1]) is not None else axes
    if axes is None:
        rank_s = em.shape(ins[1])
        if rank_s is None or rank_s[0] < 0:
            raise Unsupported("Slice whose number of axes is known only at run time")
        axes = list(range(rank_s[0]))
    axes = [_axis(a, rank) for a in axes]
    steps = em.const_value(ins[4]) if ins[4] else np.ones(len(axes), np.int64)
    if steps is None:
        raise Unsupported("Slice with steps computed at run time")
    steps = [int(v) for v in np.asarray(steps).reshape(-1)]
    if _stride_as_reshape(em, node, ins, axes, steps):
        return
    empty = _empty_axes(em.const_value(ins[2]), axes, steps)
    if empty:  # sliced as a whole here, then emptied by a GATHER of no indices
        ins[1:3] = _drop_axes(em, ins[1], axes, empty), _drop_axes(em, ins[2], axes, empty)
        steps = [st for a, st in zip(axes, steps) if a not in empty]
        axes = [a for a in axes if a not in empty]
    begin, mask = _full(em, rank, axes, ins[1], 0)
    end, _ = _full(em, rank, axes, ins[2], 0)
    vals = [1] * rank
    for a, st in zip(axes, steps):
        vals[a] = st
    y = em.out() if not empty else em.tmp(em.dtype_of(em.t(node.input[0])), None, "sliced")
    em.op("STRIDED_SLICE", [em.t(node.input[0]), begin, end, em.const(np.asarray(vals, np.int32))], [y],
          ("StridedSliceOptions", {"begin_mask": mask, "end_mask": mask}))
    for k, a in enumerate(empty):
        z = em.out() if k == len(empty) - 1 else em.tmp(em.dtype_of(y), None, "emptied")
        em.op("GATHER", [y, em.const(np.zeros(0, np.int32))], [z], ("GatherOptions", {"axis": a}))
        y = z


def _slice_run_time_axes(em: Emitter, node, ins: list[str], rank: int) -> None:
    """Slice over axes computed at run time (their count static): starts, ends and steps are
    spread over every axis at run time (EQUAL of the axes against 0..rank-1, SELECT_V2, SUM);
    an axis not listed is taken whole (0, its dim, 1)."""
    n = em.shape(ins[3])
    if n is None or len(n) != 1 or n[0] < 0:
        raise Unsupported("Slice with axes computed at run time whose count is unknown")
    k = n[0]
    x = em.t(node.input[0])
    axes = em.binary("FLOOR_MOD", em.cast(em.t(ins[3]), T.INT32), em.const(np.array(rank, np.int32)))
    hit = em.binary("EQUAL", _column(em, axes, k), em.const(np.arange(rank, dtype=np.int32).reshape(1, rank)),
                    dtype=T.BOOL)
    listed = em.tmp(T.BOOL, [rank], "listed")
    em.op("REDUCE_ANY", [hit, em.const(np.array([0], np.int32))], [listed], ("ReducerOptions", {"keep_dims": False}))

    def spread(values: int, default: int) -> int:
        picked = em.tmp(T.INT32, [k, rank], "picked")
        em.op("SELECT_V2", [hit, _column(em, values, k), em.const(np.array(0, np.int32))], [picked])
        total = em.tmp(T.INT32, [rank], "total")
        em.op("SUM", [picked, em.const(np.array([0], np.int32))], [total], ("ReducerOptions", {"keep_dims": False}))
        out = em.tmp(T.INT32, [rank], "bounds")
        em.op("SELECT_V2", [listed, total, default], [out])
        return out

    ones = em.const(np.ones(rank, np.int32))
    steps = _bound_vector(em, ins[4]) if ins[4] else em.const(np.ones(k, np.int32))
    begin = spread(_bound_vector(em, ins[1]), em.const(np.zeros(rank, np.int32)))
    end = spread(_bound_vector(em, ins[2]), shape_tensor(em, x))
    em.op("STRIDED_SLICE", [x, begin, end, spread(steps, ones)], [em.out()], ("StridedSliceOptions", {}))


def _column(em: Emitter, v: int, k: int) -> int:
    col = em.tmp(em.dtype_of(v), [k, 1], "column")
    em.op("RESHAPE", [v, em.const(np.array([k, 1], np.int32))], [col])
    return col


def _bound_vector(em: Emitter, name: str) -> int:
    """Slice starts/ends/steps as int32, clamped to int32's range."""
    v = em.const_value(name)
    if v is not None:
        return em.const(np.clip(np.asarray(v, np.int64).reshape(-1), _I32.min, _I32.max).astype(np.int32))
    return _clamped_bounds(em, name)


def _empty_axes(ends, axes: list[int], steps: list[int]) -> list[int]:
    """Axes a constant end of 0 with a positive step makes empty. XNNPACK's STRIDED_SLICE reads
    such an end as "to the end of the dim" (checked with ai-edge-litert 2.3.0: x[:, 0:0] came
    back whole), so these are not left to STRIDED_SLICE."""
    if ends is None:
        return []
    return [a for a, e, st in zip(axes, np.asarray(ends).reshape(-1), steps) if int(e) == 0 and st > 0]


def _drop_axes(em: Emitter, name: str, axes: list[int], drop: list[int]) -> str:
    """A constant starts/ends input without the entries of ``drop`` (a new constant's name)."""
    v = np.asarray(em.const_value(name)).reshape(-1) if name else None
    if v is None:
        raise Unsupported("Slice mixing run-time starts with an empty axis")
    kept = np.asarray([x for a, x in zip(axes, v) if a not in drop], v.dtype)
    new = em.fresh_name(name)
    em.consts[new] = kept
    return new


def _split_by_slices(em: Emitter, name: str, axis: int, rank: int, sizes: list[int], outs: list[int]) -> None:
    """Uneven constant parts as one STRIDED_SLICE each (XNNPACK takes it, not SPLIT_V); every
    other axis whole (its begin/end mask bit)."""
    x, whole = em.t(name), ((1 << rank) - 1) & ~(1 << axis)
    start = 0
    for size, out in zip(sizes, outs):
        begin, end = np.zeros(rank, np.int32), np.zeros(rank, np.int32)
        begin[axis], end[axis] = start, start + size
        em.op("STRIDED_SLICE", [x, em.const(begin), em.const(end), em.const(np.ones(rank, np.int32))], [out],
              ("StridedSliceOptions", {"begin_mask": whole, "end_mask": whole}))
        start += size


@maps("Split")
def split(em: Emitter, node) -> None:
    """SPLIT where the parts are even, one STRIDED_SLICE per part where they are constant and
    uneven over a static size (XNNPACK takes both, not SPLIT_V), else SPLIT_V with the sizes
    (a run-time int32 tensor); without sizes, ONNX's ceil(n / k) parts with a smaller last one
    (SPLIT where they are even, or where n is known only at run time: LiteRT then refuses an
    uneven n at invoke)."""
    if em.dtype_of(em.t(node.input[0])) == T.BOOL:
        raise Unsupported("Split of booleans: LiteRT's SPLIT and SPLIT_V have no bool kernel")
    rank = em.rank(node.input[0])
    axis = _axis(int(attrs(node).get("axis", 0)), rank)
    outs = [em.out(i) for i in range(len(node.output))]
    if len(node.input) > 1 and node.input[1]:
        sizes = em.const_value(node.input[1])
        n = em.shape(node.input[0])[axis]
        if sizes is not None and len(outs) > 1 and n >= 0 and np.all(sizes == n // len(outs)) and n % len(outs) == 0:
            em.op("SPLIT", [em.const(np.array(axis, np.int32)), em.t(node.input[0])], outs,
                  ("SplitOptions", {"num_splits": len(outs)}))  # even parts: SPLIT, which XNNPACK takes
            return
        float32 = em.dtype_of(em.t(node.input[0])) == T.FLOAT32  # XNNPACK's type; others keep SPLIT_V
        if (float32 and sizes is not None and np.size(sizes) == len(outs) and n >= 0 and int(np.sum(sizes)) == n
                and np.all(np.asarray(sizes) >= 0) and rank <= 5):
            _split_by_slices(em, node.input[0], axis, rank, [int(v) for v in np.asarray(sizes).reshape(-1)], outs)
            return
        s = em.const(np.asarray(sizes, np.int32).reshape(-1)) if sizes is not None else \
            em.cast(em.t(node.input[1]), T.INT32)
    else:
        n, k = em.shape(node.input[0])[axis], len(outs)
        if n < 0 or n % k == 0:
            em.op("SPLIT", [em.const(np.array(axis, np.int32)), em.t(node.input[0])], outs,
                  ("SplitOptions", {"num_splits": k}))
            return
        part = -(-n // k)
        if rank <= 5 and em.dtype_of(em.t(node.input[0])) == T.FLOAT32:
            _split_by_slices(em, node.input[0], axis, rank, [part] * (k - 1) + [n - part * (k - 1)], outs)
            return
        s = em.const(np.asarray([part] * (k - 1) + [n - part * (k - 1)], np.int32))
    em.op("SPLIT_V", [em.t(node.input[0]), s, em.const(np.array(axis, np.int32))], outs,
          ("SplitVOptions", {"num_splits": len(outs)}))
