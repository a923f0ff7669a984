"""Growing ONNX ops: Pad (constant, reflect, edge, wrap; negative pads crop), Tile, Expand."""

from __future__ import annotations

import numpy as np

from ...errors import Unsupported
from ..core.emit import Emitter, attrs
from ..core.mappers import maps
from ..core.model import TensorType as T
from .shape import _axis, shape_tensor


@maps("Expand")
def expand(em: Emitter, node) -> None:
    x = em.t(node.input[0])
    target = em.const_value(node.input[1])
    xs = em.shape(node.input[0])
    if _expand_by_mul(em, node, x, xs):
        return
    if target is not None and xs is not None and all(d >= 0 for d in xs):
        t = np.asarray(target).reshape(-1)
        n = max(len(t), len(xs))
        a, b = [1] * (n - len(xs)) + list(xs), [1] * (n - len(t)) + [int(v) for v in t]
        s = em.const(np.asarray([y if x_ == 1 else x_ for x_, y in zip(a, b)], np.int32))
    else:
        s = em.tmp(T.INT32, None, "bshape")
        em.op("BROADCAST_ARGS", [shape_tensor(em, x), em.t(node.input[1])], [s])
    em.op("BROADCAST_TO", [x, s], [em.out()])


def _expand_by_mul(em: Emitter, node, x: int, xs: list[int] | None) -> bool:
    """A float Expand whose every broadcast dim is static (a run-time dim of the output is the
    input's own, the same dim_param): x * ones of the broadcast shape. x * 1.0 == x for every
    float, and XNNPACK takes a broadcasting MUL, not BROADCAST_TO (grouped-query attention's
    key/value heads repeated per layer)."""
    out = em.shape(node.output[0])
    if xs is None or out is None or em.dtype_of(x) != T.FLOAT32 or len(out) < len(xs):
        return False
    lead = len(out) - len(xs)
    a = [1] * lead + list(xs)
    names = em.dim_names.get(node.input[0]) or [""] * len(xs)
    in_names = [""] * lead + list(names)
    out_names = em.dim_names.get(node.output[0]) or [""] * len(out)
    ones = []
    for i, (d_in, d_out) in enumerate(zip(a, out)):
        if d_out < 0:  # run-time: only where the input's dim is provably the same one
            if d_in >= 0 or not in_names[i] or in_names[i] != out_names[i]:
                return False
            ones.append(1)
        elif d_in == d_out or (d_in == 1 and d_out >= 0):
            ones.append(d_out if d_in == 1 else 1)
        else:
            return False
    if int(np.prod(ones)) > 1 << 20:  # the constant's size
        return False
    em.op("MUL", [x, em.const(np.ones(ones, np.float32))], [em.out()])
    return True


@maps("Tile")
def tile(em: Emitter, node) -> None:
    em.op("TILE", [em.t(node.input[0]), em.t(node.input[1])], [em.out()])


def _zero(v) -> bool:
    """A constant pad value of 0 (PAD pads with zeros, and XNNPACK takes PAD, not PADV2)."""
    if v is None or np.size(v) != 1:
        return False
    x = np.asarray(v).reshape(())
    return bool(x == 0) and not (x.dtype.kind == "f" and np.signbit(x))  # -0.0 stays PADV2


@maps("Pad")
def pad(em: Emitter, node) -> None:
    """Constant (PAD/PADV2), reflect (MIRROR_PAD), edge and wrap (a GATHER of source indices per
    padded axis, static dims); ``axes`` spreads the pads over the listed axes; negative pads crop
    afterwards (STRIDED_SLICE, counted from the end, so any size)."""
    a = attrs(node)
    mode = a.get("mode", b"constant")
    mode = mode.decode() if isinstance(mode, bytes) else mode
    rank = em.rank(node.input[0])
    pads = em.const_value(node.input[1])
    if pads is None:
        _pad_run_time(em, node, mode, rank)
        return
    pads = _pads_by_axis(em, node, np.asarray(pads).reshape(-1).astype(np.int64), rank)
    grow, crop = np.maximum(pads, 0).astype(np.int32), np.maximum(-pads, 0).astype(np.int32)
    x = em.t(node.input[0])
    y = em.out() if not crop.any() else em.tmp(em.dtype_of(x), None, "padded")
    if not grow.any():
        y = x
    elif mode == "constant":
        p = em.const(np.ascontiguousarray(grow))
        if len(node.input) > 2 and node.input[2] and not _zero(em.const_value(node.input[2])):
            em.op("PADV2", [x, p, em.t(node.input[2])], [y])
        else:
            em.op("PAD", [x, p], [y])
    elif mode == "reflect":
        if 0 in list(em.shape(node.input[0]) or ()):  # MIRROR_PAD refuses it at allocate
            raise Unsupported("Pad mode=reflect of a tensor with no elements")
        em.op("MIRROR_PAD", [x, em.const(np.ascontiguousarray(grow))], [y], ("MirrorPadOptions", {"mode": 0}))
    elif mode in ("edge", "wrap"):
        y = _pad_by_gather(em, node, x, grow, mode, y)
    else:
        raise Unsupported(f"Pad mode {mode!r}")
    if crop.any():
        _crop(em, y, crop, rank)
    elif y == x:
        em.bind(node.output[0], x)


def _pad_run_time(em: Emitter, node, mode: str, rank: int) -> None:
    """Constant or reflect Pad by pads computed at run time (all axes): [begins, ends] as the
    [rank, 2] int32 table PAD/PADV2/MIRROR_PAD read. A negative pad, which would crop, makes
    LiteRT fail at invoke."""
    if len(node.input) > 3 and node.input[3]:
        raise Unsupported("Pad with pads computed at run time over given axes")
    if mode not in ("constant", "reflect"):
        raise Unsupported(f"Pad mode {mode!r} with pads computed at run time")
    pairs = em.tmp(T.INT32, [2, rank], "pads")
    em.op("RESHAPE", [em.cast(em.t(node.input[1]), T.INT32), em.const(np.array([2, rank], np.int32))], [pairs])
    table = em.tmp(T.INT32, [rank, 2], "pads")
    em.op("TRANSPOSE", [pairs, em.const(np.array([1, 0], np.int32))], [table])
    x = em.t(node.input[0])
    if mode == "reflect":
        em.op("MIRROR_PAD", [x, table], [em.out()], ("MirrorPadOptions", {"mode": 0}))
    elif len(node.input) > 2 and node.input[2]:
        em.op("PADV2", [x, table, em.t(node.input[2])], [em.out()])
    else:
        em.op("PAD", [x, table], [em.out()])


def _pads_by_axis(em: Emitter, node, flat: np.ndarray, rank: int) -> np.ndarray:
    """ONNX pads (begins, then ends, over ``axes`` or every axis) as [rank, 2]."""
    axes = list(range(rank))
    if len(node.input) > 3 and node.input[3]:
        v = em.const_value(node.input[3])
        if v is None:
            raise Unsupported("Pad with axes computed at run time")
        axes = [_axis(int(i), rank) for i in np.asarray(v).reshape(-1)]
    if flat.size != 2 * len(axes):
        raise Unsupported("Pad whose pads do not hold a begin and an end per axis")
    out = np.zeros((rank, 2), np.int64)
    for k, ax in enumerate(axes):
        out[ax] = [flat[k], flat[len(axes) + k]]
    return out


def _pad_by_gather(em: Emitter, node, x: int, grow: np.ndarray, mode: str, out: int) -> int:
    """edge: a source index clamped to [0, n); wrap: taken modulo n; one GATHER per padded axis."""
    shape = em.shape(node.input[0])
    padded = [ax for ax in range(len(shape)) if grow[ax].any()]
    if any(shape[ax] <= 0 for ax in padded):
        raise Unsupported(f"Pad mode {mode!r} along a dim known only at run time, or empty")
    for k, ax in enumerate(padded):
        n = shape[ax]
        src = np.arange(-int(grow[ax, 0]), n + int(grow[ax, 1]))
        src = np.clip(src, 0, n - 1) if mode == "edge" else np.mod(src, n)
        y = out if k == len(padded) - 1 else em.tmp(em.dtype_of(x), None, "padded")
        em.op("GATHER", [x, em.const(src.astype(np.int32))], [y], ("GatherOptions", {"axis": ax}))
        x = y
    return x


def _crop(em: Emitter, y: int, crop: np.ndarray, rank: int) -> None:
    end_mask = sum(1 << ax for ax in range(rank) if not crop[ax, 1])
    em.op("STRIDED_SLICE", [y, em.const(crop[:, 0].astype(np.int32)), em.const((-crop[:, 1]).astype(np.int32)),
                            em.const(np.ones(rank, np.int32))], [em.out()],
          ("StridedSliceOptions", {"begin_mask": 0, "end_mask": end_mask}))
