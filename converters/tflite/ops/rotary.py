"""ONNX ``RotaryEmbedding`` (opset 23) as GATHER, MUL, ADD and CONCATENATION, following onnx's
reference: the first ``rotary_embedding_dim`` (default: all) features of each head are rotated
as pairs (x1, x2) -> (cos x1 - sin x2, sin x1 + cos x2), the pairs being the two halves or, with
``interleaved``, the even and odd features; the rest pass through. 4-D input ``[B, H, S, D]``,
or 3-D ``[B, S, H*D]`` with ``num_heads``; cos/sin caches ``[max_pos, r/2]`` gathered by
``position_ids`` ``[B, S]``, or ``[B, S, r/2]`` as they are. The head size and rotary dim must
be static (the pair indices are constants)."""

from __future__ import annotations

import numpy as np

from ...errors import Unsupported
from ..core.emit import Emitter, attrs
from ..core.mappers import maps
from ..core.model import TensorType as T
from .shape import _slice1d, shape_tensor

MAX_HEAD_SIZE = 1 << 16  # the pair index tables are this long; a declared size of 2**31 would be 8 GB


def _gather(em: Emitter, x: int, idx: np.ndarray | int, axis: int) -> int:
    idx = em.const(idx) if isinstance(idx, np.ndarray) else idx
    y = em.tmp(em.dtype_of(x), None, "gathered")
    em.op("GATHER", [x, idx], [y], ("GatherOptions", {"axis": axis}))
    return y


def _reshape(em: Emitter, x: int, shape: int) -> int:
    y = em.tmp(em.dtype_of(x), None, "reshaped")
    em.op("RESHAPE", [x, shape], [y])
    return y


def _concat(em: Emitter, xs: list[int], axis: int) -> int:
    y = em.tmp(em.dtype_of(xs[0]), None, "joined")
    em.op("CONCATENATION", xs, [y], ("ConcatenationOptions", {"axis": axis}))
    return y


def _as_heads(em: Emitter, node, a: dict) -> tuple[int, int, int]:
    """(x as 4-D, its head size, the axis the caches broadcast over: heads)."""
    shape = em.shape(node.input[0])
    x = em.t(node.input[0])
    if len(shape) == 4:
        return x, shape[3], 1
    heads = int(a.get("num_heads", 0))
    if len(shape) != 3 or heads <= 0 or shape[2] < 0 or shape[2] % heads:
        raise Unsupported(f"RotaryEmbedding of shape {shape} (4-D, or 3-D with a num_heads dividing its static hidden size)")
    lead = _slice1d(em, shape_tensor(em, x), 0, 2)
    shape4 = em.tmp(T.INT32, [4], "shape")
    em.op("CONCATENATION", [lead, em.const(np.array([heads, shape[2] // heads], np.int32))], [shape4],
          ("ConcatenationOptions", {"axis": 0}))
    return _reshape(em, x, shape4), shape[2] // heads, 2


def _cache(em: Emitter, node, i: int, half: int, heads_axis: int) -> int:
    """cos or sin as [B, S, r/2] with a 1 inserted at the heads axis."""
    if (em.shape(node.input[i]) or [-1])[-1] != half:
        raise Unsupported(f"RotaryEmbedding cache {node.input[i]!r} whose last dim is not rotary_embedding_dim / 2 = {half}")
    c = em.t(node.input[i])
    if len(node.input) > 3 and node.input[3]:
        c = _gather(em, c, em.cast(em.t(node.input[3]), T.INT32), 0)
    y = em.tmp(em.dtype_of(c), None, "cache")
    em.op("EXPAND_DIMS", [c, em.const(np.array(heads_axis, np.int32))], [y])
    return y


@maps("RotaryEmbedding")
def rotary_embedding(em: Emitter, node) -> None:
    a = attrs(node)
    x, d, heads_axis = _as_heads(em, node, a)
    r = int(a.get("rotary_embedding_dim", 0)) or d
    if d < 0 or d > MAX_HEAD_SIZE or r > d or r % 2:
        raise Unsupported(f"RotaryEmbedding rotary_embedding_dim={r} for a head size {d} (static, even, at most the head size, a head size up to {MAX_HEAD_SIZE})")
    half = r // 2
    pairs = np.arange(half, dtype=np.int32)
    first, second = (2 * pairs, 2 * pairs + 1) if int(a.get("interleaved", 0)) else (pairs, pairs + half)
    x1, x2 = _gather(em, x, first, 3), _gather(em, x, second, 3)
    cos, sin = _cache(em, node, 1, half, heads_axis), _cache(em, node, 2, half, heads_axis)
    mul = lambda p, q: em.binary("MUL", p, q)  # noqa: E731
    real = em.binary("SUB", mul(cos, x1), mul(sin, x2))
    imag = em.binary("ADD", mul(sin, x1), mul(cos, x2))
    parts = [real, imag] + ([_gather(em, x, np.arange(r, d, dtype=np.int32), 3)] if r < d else [])
    y = _concat(em, parts, 3)
    if int(a.get("interleaved", 0)):  # [reals, imags, rest] -> [re0, im0, re1, im1, .., rest]
        y = _gather(em, y, np.concatenate([np.stack([pairs, pairs + half], 1).reshape(-1),
                                           np.arange(r, d, dtype=np.int32)]).astype(np.int32), 3)
    if heads_axis == 2:
        y = _reshape(em, y, shape_tensor(em, em.t(node.input[0])))
    em.bind(node.output[0], y)
