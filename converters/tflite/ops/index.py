"""Indexing ONNX ops: Gather, GatherND, GatherElements, ScatterElements/ScatterND with
reduction="add", OneHot and NonZero.

Element-wise gathers and scatters address one element per index: their coordinates for
GATHER_ND/SCATTER_ND are built at run time (``_element_coords``). A scatter without reduction
is refused: TFLite's SCATTER_ND sums duplicate indices into zeros, which is exact only for "add".
"""

from __future__ import annotations

import numpy as np

from ...errors import Unsupported
from ..core.emit import Emitter, attrs
from ..core.mappers import maps
from ..core.model import TensorType as T
from .shape import _axis, shape_tensor


@maps("Gather")
def gather(em: Emitter, node) -> None:
    rank = em.rank(node.input[0])
    axis = _axis(int(attrs(node).get("axis", 0)), rank)
    idx_v = em.const_value(node.input[1])
    data = em.t(node.input[0])
    if _as_slice(em, node, axis, idx_v):
        return
    if idx_v is not None and (np.asarray(idx_v) < 0).any():
        idx = _from_end(em, data, axis, np.asarray(idx_v), em.shape(node.input[0])[axis])
    else:
        idx = em.t(node.input[1])
    em.op("GATHER", [data, idx], [em.out()], ("GatherOptions", {"axis": axis}))


def _as_slice(em: Emitter, node, axis: int, idx_v) -> bool:
    """A float Gather of one constant in-range index (``x[:, 0]``, a class token) as a
    STRIDED_SLICE of that one position and a RESHAPE to the output's shape (-1 for its one
    run-time dim, where it has at most one): the same values, and XNNPACK takes both, not GATHER."""
    shape, out = em.shape(node.input[0]), em.shape(node.output[0])
    if idx_v is None or np.ndim(idx_v) != 0 or em.dtype_of(em.t(node.input[0])) != T.FLOAT32 or not out:
        return False
    dim, rank = shape[axis], len(shape)
    if dim < 0 or not -dim <= int(idx_v) < dim or rank > 5 or sum(d < 0 for d in out) > 1:
        return False
    i, whole = int(idx_v) % dim, ((1 << rank) - 1) & ~(1 << axis)
    begin, end = np.zeros(rank, np.int32), np.zeros(rank, np.int32)
    begin[axis], end[axis] = i, i + 1
    part = em.tmp(T.FLOAT32, None, "position")
    em.op("STRIDED_SLICE", [em.t(node.input[0]), em.const(begin), em.const(end), em.const(np.ones(rank, np.int32))],
          [part], ("StridedSliceOptions", {"begin_mask": whole, "end_mask": whole}))
    em.op("RESHAPE", [part, em.const(np.array(out, np.int32))], [em.out()])
    return True


def _from_end(em: Emitter, data: int, axis: int, idx_v: np.ndarray, dim: int) -> int:
    """Constant indices with negative ones counted from the end of ``data``'s dim ``axis``
    (TFLite's GATHER takes none): folded when the dim is static, else the dim read at run time
    (``x[:, -1]`` along a dynamic sequence) and added to the negative ones."""
    negative = idx_v < 0
    if dim >= 0:
        return em.const(np.where(negative, idx_v + dim, idx_v).astype(np.int32))
    size = em.tmp(T.INT32, [], "dim")
    em.op("GATHER", [shape_tensor(em, data), em.const(np.array(axis, np.int32))], [size],
          ("GatherOptions", {"axis": 0}))
    if not negative.all():  # only the negative ones move: + dim * (index < 0)
        size = em.binary("MUL", em.const(negative.astype(np.int32)), size)
    return em.binary("ADD", em.const(idx_v.astype(np.int32)), size)


@maps("GatherND")
def gather_nd(em: Emitter, node) -> None:
    if int(attrs(node).get("batch_dims", 0)):
        raise Unsupported("GatherND with batch_dims has no TFLite builtin")
    em.op("GATHER_ND", [em.t(node.input[0]), em.t(node.input[1])], [em.out()])


def _element_coords(em: Emitter, data: int, idx: int, rank: int, axis: int) -> int:
    """GATHER_ND/SCATTER_ND coordinates [..., rank] for Gather/ScatterElements: along ``axis``
    the indices (negative ones normalised against data's dim), along every other axis j the
    position itself (RANGE over the indices' dim j, broadcast), built at run time."""
    dim = em.tmp(T.INT32, [], "dim")
    em.op("GATHER", [shape_tensor(em, data), em.const(np.array(axis, np.int32))], [dim], ("GatherOptions", {"axis": 0}))
    negative = em.binary("LESS", idx, em.const(np.array(0, np.int32)), dtype=T.BOOL)
    shifted = em.binary("ADD", idx, dim)
    idx_n = em.tmp(T.INT32, em.shape_of(idx), "index")
    em.op("SELECT_V2", [negative, shifted, idx], [idx_n])
    s = shape_tensor(em, idx)
    coords = []
    for j in range(rank):
        if j == axis:
            coords.append(idx_n)
            continue
        n = em.tmp(T.INT32, [], "n")
        em.op("GATHER", [s, em.const(np.array(j, np.int32))], [n], ("GatherOptions", {"axis": 0}))
        r = em.tmp(T.INT32, [-1], "range")
        em.op("RANGE", [em.const(np.array(0, np.int32)), n, em.const(np.array(1, np.int32))], [r])
        along = [1] * rank
        along[j] = -1
        rr = em.tmp(T.INT32, along, "grid")
        em.op("RESHAPE", [r, em.const(np.asarray(along, np.int32))], [rr])
        c = em.tmp(T.INT32, em.shape_of(idx), "grid")
        em.op("BROADCAST_TO", [rr, s], [c])
        coords.append(c)
    packed = em.tmp(T.INT32, None, "coords")
    em.op("PACK", coords, [packed], ("PackOptions", {"values_count": rank, "axis": rank}))
    return packed


@maps("GatherElements")
def gather_elements(em: Emitter, node) -> None:
    """GATHER_ND over ``_element_coords``; an index that is a constant broadcast over the leading
    dims is one GATHER of constant positions (``_rows_gather``)."""
    rank = em.rank(node.input[1])
    axis = _axis(int(attrs(node).get("axis", 0)), rank)
    if axis == rank - 1 and _rows_gather(em, node, rank):
        return
    data = em.t(node.input[0])
    coords = _element_coords(em, data, em.cast(em.t(node.input[1]), T.INT32), rank, axis)
    em.op("GATHER_ND", [data, coords], [em.out()])


def _broadcast_index(em: Emitter, name: str, rank: int) -> tuple[np.ndarray, str] | None:
    """(P [I, J], the Expand's shape input) where ``name`` is ``Expand(C, shape)`` of a constant
    C of shape [1, ..., 1, I, J] by a shape of ``rank`` entries (DeBERTa's relative positions,
    repeated over batch and heads): the index is P at every leading position, the leading dims
    being the shape's own. Where I or J is 1, shape inference must give the index that dim (the
    shape could broadcast it)."""
    node = next((n for n in em.graph.node if name in n.output), None)
    if node is None or node.op_type != "Expand" or em.shape(node.input[1]) != [rank]:
        return None
    c = em.const_value(node.input[0])
    if c is None or c.ndim != rank or any(d != 1 for d in c.shape[:-2]):
        return None
    # a trailing dim of 1 in C could be broadcast by the shape: then shape inference must say it is not
    if min(c.shape[-2:]) == 1 and (em.shape(name) or [])[-2:] != list(c.shape[-2:]):
        return None
    return np.asarray(c).reshape(c.shape[-2:]), node.input[1]


def _rows_gather(em: Emitter, node, rank: int) -> bool:
    """GatherElements along the last axis whose index is one constant P [I, J] at every leading
    position (``_broadcast_index``): out[..., i, j] = data[..., i, P[i, j]]. The data's [I, K]
    dims go first (TRANSPOSE), one GATHER with ``batch_dims=1`` reads the constant P along K for
    each i (LiteRT checks every index against K, as ONNX asks), and a TRANSPOSE puts the leading
    dims back; the result is then cut to the index's leading dims (the Expand's shape: an index
    smaller than the data reads only its part) unless shape inference proves them the data's.
    Exact; no coordinates are built at run time. Taken where I is static and the data's, and
    every P is >= 0 (a negative one counts from a K that may be known only at run time);
    otherwise False and the general path is taken."""
    found = _broadcast_index(em, node.input[1], rank)
    shape = em.shape(node.input[0])
    if found is None or shape is None or len(shape) != rank:
        return False
    p, target = found
    if shape[-2] <= 0 or p.shape[0] != shape[-2] or p.size == 0 or (p < 0).any() or (p > np.iinfo(np.int32).max).any():
        return False
    lead = list(range(rank - 2))
    rows = _transpose(em, em.t(node.input[0]), [rank - 2, rank - 1] + lead)  # [I, K, lead...]
    picked = em.tmp(em.dtype_of(rows), None, "gathered")
    em.op("GATHER", [rows, em.const(p.astype(np.int32))], [picked], ("GatherOptions", {"axis": 1, "batch_dims": 1}))
    em.sub.ops[-1].version = 5  # op_version.cc: GATHER with batch_dims
    gathered = _transpose(em, picked, [d + 2 for d in lead] + [0, 1])  # [lead..., I, J]
    if _same_leading(em, node.input[0], node.input[1], rank):
        em.bind(node.output[0], gathered)
        return True
    end = em.tmp(T.INT32, [rank], "end")
    em.op("CONCATENATION", [_leading(em, target, rank), em.const(np.asarray(p.shape, np.int32))], [end],
          ("ConcatenationOptions", {"axis": 0}))
    zeros, ones = np.zeros(rank, np.int32), np.ones(rank, np.int32)
    em.op("STRIDED_SLICE", [gathered, em.const(zeros), end, em.const(ones)], [em.out()],
          ("StridedSliceOptions", {}))
    return True


def _transpose(em: Emitter, x: int, perm: list[int]) -> int:
    y = em.tmp(em.dtype_of(x), None, "moved")
    em.op("TRANSPOSE", [x, em.const(np.asarray(perm, np.int32))], [y])
    return y


def _same_leading(em: Emitter, data: str, index: str, rank: int) -> bool:
    """Whether shape inference proves the leading dims of the two values equal (the same static
    size, or the same symbolic name)."""
    ds, xs = em.shape(data), em.shape(index)
    dn, xn = em.dim_names.get(data, [""] * rank), em.dim_names.get(index, [""] * rank)
    if ds is None or xs is None or len(dn) != rank or len(xn) != rank:
        return False
    return all((a >= 0 and a == b) or (a < 0 and n and n == m) for a, b, n, m in zip(ds[:-2], xs[:-2], dn, xn))


def _leading(em: Emitter, target: str, rank: int) -> int:
    """The first rank - 2 entries of the Expand's shape, as int32."""
    t = em.cast(em.t(target), T.INT32)
    out = em.tmp(T.INT32, [rank - 2], "lead")
    em.op("STRIDED_SLICE", [t, em.const(np.zeros(1, np.int32)), em.const(np.array([rank - 2], np.int32)),
                            em.const(np.ones(1, np.int32))], [out], ("StridedSliceOptions", {}))
    return out


def _scatter_add(em: Emitter, node, data: int, coords: int, updates: int) -> None:
    """data + SCATTER_ND(coords, updates): exact for reduction="add" (SCATTER_ND sums duplicates).
    Other reductions are refused: SCATTER_ND's sum of duplicate indices is no "last write"."""
    red = attrs(node).get("reduction", b"none")
    red = red.decode() if isinstance(red, bytes) else red
    if red != "add":
        raise Unsupported(f"{node.op_type} with reduction={red!r}: TFLite's SCATTER_ND adds duplicate "
                          "indices, which is exact only for reduction='add'")
    if em.dtype_of(data) == T.BOOL:
        raise Unsupported(f"{node.op_type} with reduction='add' of booleans: TFLite's ADD takes no bool")
    scattered = em.tmp(em.dtype_of(data), em.shape_of(data), "scattered")
    em.op("SCATTER_ND", [coords, updates, shape_tensor(em, data)], [scattered])
    em.op("ADD", [data, scattered], [em.out()])


@maps("ScatterElements")
def scatter_elements(em: Emitter, node) -> None:
    rank = em.rank(node.input[1])
    axis = _axis(int(attrs(node).get("axis", 0)), rank)
    data = em.t(node.input[0])
    if (attrs(node).get("reduction", b"none") or b"none") not in (b"add", "add"):
        _scatter_add(em, node, data, -1, -1)  # refuses, naming the reduction
    coords = _element_coords(em, data, em.cast(em.t(node.input[1]), T.INT32), rank, axis)
    _scatter_add(em, node, data, coords, em.t(node.input[2]))


@maps("ScatterND")
def scatter_nd(em: Emitter, node) -> None:
    data = em.t(node.input[0])
    if (attrs(node).get("reduction", b"none") or b"none") not in (b"add", "add"):
        if _one_index(em, node.input[1]):
            _scatter_one(em, data, em.cast(em.t(node.input[1]), T.INT32), em.t(node.input[2]))
            return
        _scatter_add(em, node, data, -1, -1)
    _scatter_add(em, node, data, em.cast(em.t(node.input[1]), T.INT32), em.t(node.input[2]))


def _one_index(em: Emitter, indices: str) -> bool:
    """Whether ScatterND's ``indices`` hold one index tuple, as shapes prove (no duplicates)."""
    shape = em.shape_of(em.t(indices))
    return shape is not None and len(shape) >= 1 and all(d == 1 for d in shape[:-1])


def _scatter_one(em: Emitter, data: int, coords: int, updates: int) -> None:
    """ScatterND with one index tuple (reduction "none": a write, as a KV cache's decode step
    makes): SELECT_V2(the slice it addresses, SCATTER_ND(coords, updates), data). Exact for
    every value, and the one tuple cannot collide with itself."""
    shape = shape_tensor(em, data)
    ones = em.tmp(T.INT32, em.shape_of(updates), "ones")
    em.op("FILL", [shape_tensor(em, updates), em.const(np.array(1, np.int32))], [ones])
    hit = em.tmp(T.INT32, em.shape_of(data), "written")
    em.op("SCATTER_ND", [coords, ones, shape], [hit])
    mask = em.binary("NOT_EQUAL", hit, em.const(np.array(0, np.int32)), dtype=T.BOOL)
    scattered = em.tmp(em.dtype_of(data), em.shape_of(data), "scattered")
    em.op("SCATTER_ND", [coords, updates, shape], [scattered])
    em.op("SELECT_V2", [mask, scattered, data], [em.out()])


@maps("OneHot")
def one_hot(em: Emitter, node) -> None:
    """ONE_HOT; negative indices count from ``depth`` as ONNX says."""
    rank = em.rank(node.input[0])
    axis = int(attrs(node).get("axis", -1))
    axis = axis + rank + 1 if axis < 0 else axis
    idx = em.cast(em.t(node.input[0]), T.INT32)
    depth = em.tmp(T.INT32, [], "depth")
    em.op("RESHAPE", [em.cast(em.t(node.input[1]), T.INT32), em.const(np.zeros(0, np.int32))], [depth])
    negative = em.binary("LESS", idx, em.const(np.array(0, np.int32)), dtype=T.BOOL)
    wrapped = em.tmp(T.INT32, em.shape_of(idx), "index")
    em.op("SELECT_V2", [negative, em.binary("ADD", idx, depth),
                        idx], [wrapped])
    values = em.t(node.input[2])
    off, on = (em.tmp(em.dtype_of(values), [], n) for n in ("off", "on"))
    for k, v in enumerate((off, on)):
        em.op("GATHER", [values, em.const(np.array(k, np.int32))], [v], ("GatherOptions", {"axis": 0}))
    em.op("ONE_HOT", [wrapped, depth, on, off], [em.out()], ("OneHotOptions", {"axis": axis}))


@maps("NonZero")
def non_zero(em: Emitter, node) -> None:
    """WHERE gives the coordinates as [n, rank] int64; ONNX wants [rank, n]."""
    coords = em.tmp(T.INT64, [-1, em.rank(node.input[0])], "coords")
    em.op("WHERE", [em.t(node.input[0])], [coords])
    moved = em.tmp(T.INT64, [em.rank(node.input[0]), -1], "coords")
    em.op("TRANSPOSE", [coords, em.const(np.array([1, 0], np.int32))], [moved])
    em.op("CAST", [moved], [em.out()], ("CastOptions", {"in_data_type": T.INT64, "out_data_type": T.INT32}))
