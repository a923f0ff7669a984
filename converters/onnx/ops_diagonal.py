"""Diagonals of any size, static or run-time: diag, diagonal (and diagonal_copy, linalg_diagonal),
diagonal_scatter, diag_embed and diagflat, by index arithmetic over the planes (no constant mask
of the matrix's size)."""

from __future__ import annotations

import numpy as np

from ..aten.args import bind
from ..aten.dtypes import ST
from ..aten.registry import lowering
from ..errors import Unsupported
from .ops_arrange import _cat_shape, _dims, _out, _scalar, _size, _transpose, _zeros
from .shapes import axes_const


# ---------------------------------------------------------------- diagonals


def embed_diagonal(ctx, x: str, shape, offset: int, st: ST) -> str:
    """``x`` (dtype ``st``) of shape ``[..., n]`` as ``[..., m, m]`` matrices (``m = n + |offset|``)
    with ``x`` on diagonal ``offset`` and zeros elsewhere: one Gather from ``x`` with a zero
    appended, the positions off the diagonal reading that zero (``n = 0`` works too)."""
    r = len(shape)
    n = shape[-1]
    pad_shape = _cat_shape(ctx, _dims(ctx, x, shape, 0, r - 1), 1)
    xp = ctx.op("Concat", x, _zeros(ctx, pad_shape, r, st), axis=r - 1)
    if isinstance(n, int):
        m = n + abs(offset)
        ctx.reserve_array([m, m], 8, "diagonal index")
        i, j = np.indices((m, m))
        idx = ctx.const(np.where(j - i == offset, i if offset >= 0 else j, n), ST.LONG)
    else:
        nt = _size(ctx, x, n, r - 1)
        k = ctx.op("Range", ctx.const(0, ST.LONG), _scalar(ctx, ctx.op("Add", nt, ctx.ints([abs(offset)]))),
                   ctx.const(1, ST.LONG))
        i = ctx.op("Unsqueeze", k, axes_const(ctx, [1]))
        j = ctx.op("Unsqueeze", k, axes_const(ctx, [0]))
        on = ctx.op("Equal", ctx.op("Sub", j, i), ctx.const(offset, ST.LONG))
        idx = ctx.op("Where", on, i if offset >= 0 else j, _scalar(ctx, nt))
    return ctx.op("Gather", xp, idx, axis=r - 1)


def _plane_first(ctx, x: str, shape, d1: int, d2: int):
    """``x`` with dims ``d1``, ``d2`` moved first and flattened into one: ``(flat, n1, n2,
    plane, rest)``, ``plane`` their element count and ``rest`` the other dims' sizes."""
    r = len(shape)
    others = [i for i in range(r) if i not in (d1, d2)]
    xt = _transpose(ctx, x, [d1, d2, *others])
    n1, n2 = shape[d1], shape[d2]
    rest = [shape[i] for i in others]
    if isinstance(n1, int) and isinstance(n2, int):
        plane = ctx.ints([n1 * n2])
    else:
        plane = ctx.op("Mul", _size(ctx, xt, n1, 0), _size(ctx, xt, n2, 1))
    flat = ctx.op("Reshape", xt, _cat_shape(ctx, plane, _dims(ctx, xt, [n1, n2, *rest], 2, r)))
    return flat, _size(ctx, xt, n1, 0), _size(ctx, xt, n2, 1), plane, rest


def _grid(ctx, t1: str, t2: str):
    """Row and column numbers of an ``[n1, n2]`` grid of run-time sizes (``[n1, 1]``, ``[1, n2]``)."""
    zero, one = ctx.const(0, ST.LONG), ctx.const(1, ST.LONG)
    rows = ctx.op("Unsqueeze", ctx.op("Range", zero, _scalar(ctx, t1), one), axes_const(ctx, [1]))
    cols = ctx.op("Unsqueeze", ctx.op("Range", zero, _scalar(ctx, t2), one), axes_const(ctx, [0]))
    return rows, cols


def take_diagonal(ctx, x: str, shape, offset: int, d1: int, d2: int) -> str:
    """Diagonal ``offset`` of the ``(d1, d2)`` planes of ``x``: ``[others..., L]`` (torch's
    ``diagonal``). The two dims are moved first and flattened into one, and the elements
    ``(i, i + offset)`` gathered from it; their flat positions are a constant when both dims are
    static, else computed from ``Shape`` (any size, ``L = 0`` included)."""
    r = len(shape)
    flat_x, t1, t2, _, _ = _plane_first(ctx, x, shape, d1, d2)
    n1, n2 = shape[d1], shape[d2]
    if isinstance(n1, int) and isinstance(n2, int):
        rows = [i for i in range(n1) if 0 <= i + offset < n2]
        flat = ctx.const(np.asarray([i * n2 + i + offset for i in rows], np.int64).reshape(-1), ST.LONG)
    else:
        if offset >= 0:
            length = ctx.op("Min", t1, ctx.op("Sub", t2, ctx.ints([offset])))
        else:
            length = ctx.op("Min", ctx.op("Add", t1, ctx.ints([offset])), t2)
        length = ctx.op("Max", length, ctx.ints([0]))
        k = ctx.op("Range", ctx.const(0, ST.LONG), _scalar(ctx, length), ctx.const(1, ST.LONG))
        row = ctx.op("Add", k, ctx.const(max(0, -offset), ST.LONG))
        flat = ctx.op("Add", ctx.op("Mul", row, _scalar(ctx, t2)), ctx.op("Add", k, ctx.const(max(0, offset), ST.LONG)))
    g = ctx.op("Gather", flat_x, flat, axis=0)  # [L, others...]
    return _transpose(ctx, g, [*range(1, r - 1), 0])


def scatter_diagonal(ctx, x: str, shape, src: str, offset: int, d1: int, d2: int) -> str:
    """``x`` with diagonal ``offset`` of its ``(d1, d2)`` planes replaced by ``src``
    (``[others..., L]``; torch's ``diagonal_scatter``): the plane flattened first, ``src``'s
    rows appended after it, one Gather picking each position from the plane or from ``src``.
    The pick is a constant for static ``d1``/``d2`` sizes, else computed from ``Shape``."""
    r = len(shape)
    flat_x, t1, t2, plane, rest = _plane_first(ctx, x, shape, d1, d2)
    n1, n2 = shape[d1], shape[d2]
    both = ctx.op("Concat", flat_x, _transpose(ctx, src, [r - 2, *range(r - 2)]), axis=0)
    if isinstance(n1, int) and isinstance(n2, int):
        ctx.reserve_array([n1, n2], 8, "diagonal_scatter index")
        i, j = np.indices((n1, n2))
        pick = ctx.const(np.where(j - i == offset, n1 * n2 + i - max(0, -offset), i * n2 + j).reshape(-1), ST.LONG)
    else:
        i, j = _grid(ctx, t1, t2)
        on = ctx.op("Equal", ctx.op("Sub", j, i), ctx.const(offset, ST.LONG))
        from_src = ctx.op("Add", i, ctx.op("Sub", _scalar(ctx, plane), ctx.const(max(0, -offset), ST.LONG)))
        here = ctx.op("Add", ctx.op("Mul", i, _scalar(ctx, t2)), j)
        pick = ctx.op("Reshape", ctx.op("Where", on, from_src, here), ctx.ints([-1]))
    y = ctx.op("Gather", both, pick, axis=0)  # [n1 * n2, others...]
    others = [k for k in range(r) if k not in (d1, d2)]
    y = ctx.op("Reshape", y, _cat_shape(ctx, t1, t2, _dims(ctx, flat_x, [None, *rest], 1, r - 1)))
    return _transpose(ctx, y, _inverse([d1, d2, *others]))


def _inverse(perm: list[int]) -> list[int]:
    return [perm.index(i) for i in range(len(perm))]


@lowering("onnx", "aten.linalg_diagonal.default")
def linalg_diagonal(ctx, node):
    """Diagonal ``offset`` of the ``(dim1, dim2)`` planes of ``A``, appended as the last dim."""
    a = bind(node, "A", "offset", "dim1", "dim2")
    info = ctx.info(a.A)
    r = info.rank
    if r < 2 or a.dim1 % r == a.dim2 % r:
        raise Unsupported(f"linalg_diagonal of a {r}-d tensor with dims {a.dim1}, {a.dim2}")
    return take_diagonal(ctx, ctx.t(a.A), list(info.shape), a.offset, a.dim1 % r, a.dim2 % r)


@lowering("onnx", "aten.diag.default")
def diag(ctx, node):
    """``aten.diag``: 1-d ``self`` on diagonal ``diagonal`` of a square matrix; 2-d: that
    diagonal as a vector."""
    a = bind(node, "self", "diagonal")
    info = ctx.info(a.self)
    if info.rank == 1:
        out, cst = _out(ctx)
        return ctx.cast(embed_diagonal(ctx, ctx.t(a.self, cst), list(info.shape), a.diagonal, cst), cst, out)
    if info.rank != 2:
        raise Unsupported(f"diag of a {info.rank}-d tensor (1-d or 2-d)")
    return take_diagonal(ctx, ctx.t(a.self), list(info.shape), a.diagonal, 0, 1)


@lowering("onnx", "aten.diagonal.default", "aten.diagonal_copy.default")
def diagonal(ctx, node):
    """``aten.diagonal``/``diagonal_copy``: diagonal ``offset`` of the ``(dim1, dim2)`` planes,
    appended as the last dim."""
    a = bind(node, "self", "offset", "dim1", "dim2")
    info = ctx.info(a.self)
    r = info.rank
    if r < 2 or a.dim1 % r == a.dim2 % r:
        raise Unsupported(f"diagonal of a {r}-d tensor with dims {a.dim1}, {a.dim2}")
    return take_diagonal(ctx, ctx.t(a.self), list(info.shape), a.offset, a.dim1 % r, a.dim2 % r)


@lowering("onnx", "aten.diagonal_scatter.default")
def diagonal_scatter(ctx, node):
    """``aten.diagonal_scatter``: ``self`` with its (``offset``, ``dim1``, ``dim2``) diagonal
    replaced by ``src``."""
    a = bind(node, "self", "src", "offset", "dim1", "dim2")
    info = ctx.info(a.self)
    r = info.rank
    if r < 2 or a.dim1 % r == a.dim2 % r:
        raise Unsupported(f"diagonal_scatter of a {r}-d tensor with dims {a.dim1}, {a.dim2}")
    return scatter_diagonal(ctx, ctx.t(a.self), list(info.shape), ctx.t(a.src, info.dtype), a.offset,
                            a.dim1 % r, a.dim2 % r)


@lowering("onnx", "aten.diag_embed.default")
def diag_embed(ctx, node):
    """The last dim of ``self`` written on diagonal ``offset`` of new ``(dim1, dim2)`` planes,
    zeros elsewhere (``diagonal(out, offset, dim1, dim2) == self``)."""
    a = bind(node, "self", "offset", "dim1", "dim2")
    info = ctx.info(a.self)
    rank = info.rank + 1
    d1, d2 = a.dim1 % rank, a.dim2 % rank
    if info.rank == 0 or d1 == d2:
        raise Unsupported(f"diag_embed of a {info.rank}-d tensor with dims {a.dim1}, {a.dim2}")
    out, cst = _out(ctx)
    e = embed_diagonal(ctx, ctx.t(a.self, cst), list(info.shape), a.offset, cst)  # [batch..., m(d1), m(d2)]
    others = [o for o in range(rank) if o not in (d1, d2)]
    perm = [0] * rank
    perm[d1], perm[d2] = rank - 2, rank - 1
    for k, o in enumerate(others):
        perm[o] = k
    return ctx.cast(_transpose(ctx, e, perm), cst, out)


@lowering("onnx", "aten.diagflat.default")
def diagflat(ctx, node):
    """``self`` flattened, as the diagonal ``offset`` of a square matrix."""
    a = bind(node, "self", "offset")
    info = ctx.info(a.self)
    out, cst = _out(ctx)
    flat = ctx.op("Reshape", ctx.t(a.self, cst), ctx.ints([-1]))
    e = embed_diagonal(ctx, flat, [info.numel()], a.offset, cst)  # (None: a run-time count)
    return ctx.cast(e, cst, out)
