"""Lowerings that rearrange elements without computing new values: the ``atleast_*d`` family,
the stacks (``hstack``, ``vstack``, ``dstack``, ``column_stack``), flips and rotations
(``rot90``, ``fftshift``), diagonals and block matrices (``diag_embed``, ``diagflat``,
``linalg_diagonal``, ``block_diag``, ``kron``, ``cartesian_prod``, ``_chunk_cat``), channel and
pixel shuffles, flat indexing (``take``, ``put``), ``combinations`` and ``linalg_vander``.

Sizes may be symbolic (a dynamic batch): index tables are constants when the sizes they depend
on are static, else built at run time from ``Shape``/``Range``. Built from Gather, Reshape,
Transpose, Slice, Concat, Expand, Range, Where and ScatterND (reduction "add"), which the TFLite
target maps.
"""

from __future__ import annotations

import math

import numpy as np

from ..aten.args import bind
from ..aten.dtypes import ST
from ..aten.registry import lowering
from ..errors import Unsupported
from .shapes import INT64_MAX, axes_const

# ------------------------------------------------------------------ helpers


def _size(ctx, name: str, s, axis: int) -> str:
    """Dim ``axis`` of ``name`` (static size ``s`` or a symbol) as a 1-D int64 of length 1."""
    if isinstance(s, int):
        return ctx.ints([s])
    return ctx.shape(name, axis, axis + 1 if axis != -1 else None)


def _dims(ctx, name: str, shape, start: int, end: int) -> str | None:
    """Dims ``start:end`` of ``name`` as a 1-D int64 (a constant when static; None when empty)."""
    part = list(shape[start:end])
    if not part:
        return None
    if all(isinstance(s, int) for s in part):
        return ctx.ints(part)
    return ctx.shape(name, start, end)


def _cat_shape(ctx, *parts) -> str:
    """A 1-D int64 shape from pieces that are ints or 1-D int64 tensors (None: left out)."""
    parts = [p for p in parts if p is not None]
    names = [ctx.ints([p]) if isinstance(p, int) else p for p in parts]
    return names[0] if len(names) == 1 else ctx.op("Concat", *names, axis=0)


def _scalar(ctx, one: str) -> str:
    return ctx.op("Reshape", one, ctx.ints([]))


def _zeros(ctx, shape: str, rank: int, st: ST) -> str:
    """Zeros of dtype ``st`` and run-time ``shape`` (a 1-D int64 of ``rank`` elements)."""
    return ctx.op("Expand", ctx.const(np.zeros([1] * rank), st), shape)


def _out(ctx):
    """The output's dtype and the dtype to gather/concatenate in (bool as int32: some ONNX Runtime
    and LiteRT kernels lack bool)."""
    out = ctx.out_info().dtype
    cst = ctx.compute_type(out)
    return out, (ST.INT if cst == ST.BOOL else cst)


def _transpose(ctx, x: str, perm: list[int]) -> str:
    return x if perm == sorted(perm) else ctx.op("Transpose", x, perm=perm)


# ------------------------------------------------------------ rotations, shifts


def _flip(ctx, x: str, dims: list[int]) -> str:
    n = len(dims)
    return ctx.op("Slice", x, ctx.ints([-1] * n), ctx.ints([-INT64_MAX] * n), ctx.ints(dims), ctx.ints([-1] * n))


@lowering("onnx", "aten.rot90.default")
def rot90(ctx, node):
    """``k`` quarter turns in the ``dims`` plane, from ``dims[0]`` towards ``dims[1]``:
    flips and a transpose."""
    a = bind(node, "self", "k", "dims")
    r = ctx.rank(a.self)
    if r < 2 or len(a.dims) != 2 or a.dims[0] % r == a.dims[1] % r:
        raise Unsupported(f"rot90 of a {r}-d tensor in dims {list(a.dims)} (torch raises)")
    d0, d1 = a.dims[0] % r, a.dims[1] % r
    x = ctx.t(a.self)
    k = a.k % 4
    if k == 0:
        return ctx.op("Identity", x)
    if k == 2:
        return _flip(ctx, x, [d0, d1])
    perm = list(range(r))
    perm[d0], perm[d1] = d1, d0
    return ctx.op("Transpose", _flip(ctx, x, [d1 if k == 1 else d0]), perm=perm)


def _shift(ctx, x: str, shape, dims, inverse: bool) -> str:
    """``x`` rolled by ``n // 2`` (``inverse``: ``-(n // 2)``) along each of ``dims``: one Gather
    per dim, the positions a constant for a static size, else computed from ``Shape``."""
    for d in dims:
        n = shape[d]
        if isinstance(n, int):
            s = n // 2 if not inverse else -(n // 2)
            if n == 0 or s % n == 0:
                continue
            idx = ctx.const(np.roll(np.arange(n, dtype=np.int64), s), ST.LONG)
        else:
            nt = _scalar(ctx, _size(ctx, x, n, d))
            half = ctx.op("Div", nt, ctx.const(2, ST.LONG))
            add = half if inverse else ctx.op("Sub", nt, half)  # out[i] = x[(i + add) mod n]
            t = ctx.op("Add", ctx.op("Range", ctx.const(0, ST.LONG), nt, ctx.const(1, ST.LONG)), add)
            idx = ctx.op("Where", ctx.op("Less", t, nt), t, ctx.op("Sub", t, nt))
        x = ctx.op("Gather", x, idx, axis=d)
    return x


@lowering("onnx", "aten.fft_fftshift.default")
def fft_fftshift(ctx, node):
    """Rolled by ``n // 2`` along each of ``dim`` (all dims without it): zero frequency centred."""
    return _fftshift(ctx, node, inverse=False)


@lowering("onnx", "aten.fft_ifftshift.default")
def fft_ifftshift(ctx, node):
    """Rolled by ``-(n // 2)`` along each of ``dim`` (all dims without it): ``fftshift`` undone."""
    return _fftshift(ctx, node, inverse=True)


def _fftshift(ctx, node, inverse: bool):
    a = bind(node, "self", "dim")
    info = ctx.info(a.self)
    r = info.rank
    if r == 0:
        if a.dim not in (None, [], [0], [-1]):
            raise Unsupported(f"fftshift of a 0-d tensor along dims {a.dim}")
        return ctx.op("Identity", ctx.t(a.self))
    dims = list(range(r)) if a.dim is None else [d % r for d in a.dim]  # a dim named twice rolls twice
    return ctx.op("Identity", _shift(ctx, ctx.t(a.self), list(info.shape), dims, inverse))


# -------------------------------------------------------------------- shuffles


@lowering("onnx", "aten.channel_shuffle.default")
def channel_shuffle(ctx, node):
    """Channels (dim 1) seen as ``[groups, C / groups]`` and transposed: one Gather."""
    a = bind(node, "self", "groups")
    info = ctx.info(a.self)
    c = info.shape[1] if info.rank >= 2 else None
    g = a.groups
    if not isinstance(c, int) or not isinstance(g, int) or g <= 0 or c % g:
        raise Unsupported(f"channel_shuffle of {c} channels in {g} groups (static, divisible only)")
    per = c // g
    order = np.asarray([i * per + j for j in range(per) for i in range(g)], np.int64)
    return ctx.op("Gather", ctx.t(a.self), ctx.const(order, ST.LONG), axis=1)


@lowering("onnx", "aten.pixel_unshuffle.default")
def pixel_unshuffle(ctx, node):
    """``[*, C, H*r, W*r]`` -> ``[*, C*r*r, H, W]``: each ``r x r`` block of pixels to channels."""
    a = bind(node, "self", "downscale_factor")
    info = ctx.info(a.self)
    r = a.downscale_factor
    shape = list(info.shape)
    if info.rank < 3 or not all(isinstance(s, int) for s in shape[-3:]) or not isinstance(r, int) or r <= 0:
        raise Unsupported(f"pixel_unshuffle of shape {shape} by {r} (static C, H, W only)")
    c, h, w = shape[-3:]
    x = ctx.t(a.self)
    if r == 1:
        return ctx.op("Identity", x)
    if h % r or w % r:
        raise Unsupported(f"pixel_unshuffle of {h}x{w} by {r} (torch raises)")
    b = len(shape) - 3
    batch = shape[:b]
    if all(isinstance(s, int) for s in batch):
        nb = ctx.ints([math.prod(batch)])
    else:
        nb = ctx.op("ReduceProd", ctx.shape(x, 0, b), keepdims=1)
    y = ctx.op("Reshape", x, _cat_shape(ctx, nb, ctx.ints([c, h // r, r, w // r, r])))
    y = ctx.op("Transpose", y, perm=[0, 1, 3, 5, 2, 4])
    return ctx.op("Reshape", y, _cat_shape(ctx, _dims(ctx, x, shape, 0, b), ctx.ints([c * r * r, h // r, w // r])))


# ------------------------------------------------------------ block structures


@lowering("onnx", "aten.block_diag.default")
def block_diag(ctx, node):
    """The tensors (0-d: 1x1, 1-d: one row) as the diagonal blocks of one matrix, zeros elsewhere."""
    a = bind(node, "tensors")
    out, cst = _out(ctx)
    blocks = []
    for t in a.tensors:
        info = ctx.info(t)
        if info.rank > 2:
            raise Unsupported(f"block_diag of a {info.rank}-d tensor (torch raises)")
        shape = [1] * (2 - info.rank) + list(info.shape)
        x = ctx.t(t, cst)
        if info.rank < 2:
            x = ctx.op("Reshape", x, ctx.ints([1, -1] if info.rank == 1 else [1, 1]))
        blocks.append((x, shape))
    cols = [_size(ctx, x, s[1], 1) for x, s in blocks]
    static_cols = [s[1] for _, s in blocks]
    rows = []
    for i, (x, shape) in enumerate(blocks):
        pieces = []
        for lo, hi in ((0, i), (i + 1, len(blocks))):
            known = static_cols[lo:hi]
            if all(isinstance(s, int) for s in known):
                if sum(known) == 0:
                    pieces.append(None)
                    continue
                width = ctx.ints([sum(known)])
            else:
                width = cols[lo]
                for c in cols[lo + 1:hi]:
                    width = ctx.op("Add", width, c)
            pieces.append(_zeros(ctx, _cat_shape(ctx, _size(ctx, x, shape[0], 0), width), 2, cst))
        parts = [p for p in (pieces[0], x, pieces[1]) if p is not None]
        rows.append(ctx.op("Concat", *parts, axis=1) if len(parts) > 1 else x)
    if not rows:
        raise Unsupported("block_diag of no tensors")
    y = ctx.op("Concat", *rows, axis=0) if len(rows) > 1 else ctx.op("Identity", rows[0])
    return ctx.cast(y, cst, out)


@lowering("onnx", "aten.cartesian_prod.default")
def cartesian_prod(ctx, node):
    """Every tuple of one element from each 1-d tensor, the last varying fastest: ``[N, k]``
    (one tensor: itself)."""
    a = bind(node, "tensors")
    out, cst = _out(ctx)
    ts = list(a.tensors)
    if not ts or any(ctx.rank(t) != 1 for t in ts):
        raise Unsupported("cartesian_prod of tensors that are not all 1-d")
    if len(ts) == 1:
        return ctx.op("Identity", ctx.t(ts[0], out))
    k = len(ts)
    grid = _cat_shape(ctx, *[_size(ctx, ctx.t(t), ctx.info(t).shape[0], 0) for t in ts])
    cols = []
    for i, t in enumerate(ts):
        x = ctx.op("Reshape", ctx.t(t, cst), ctx.ints([1] * i + [-1] + [1] * (k - 1 - i)))
        cols.append(ctx.op("Reshape", ctx.op("Expand", x, grid), ctx.ints([-1, 1])))
    return ctx.cast(ctx.op("Concat", *cols, axis=1), cst, out)


@lowering("onnx", "aten._chunk_cat.default")
def chunk_cat(ctx, node):
    """Each tensor zero-padded along ``dim`` to ``num_chunks`` equal chunks, viewed as
    ``[pre..., num_chunks, chunk * post]``, the views concatenated along the last dim."""
    a = bind(node, "tensors", "dim", "num_chunks")
    out, cst = _out(ctx)
    nc = a.num_chunks
    ranks = {ctx.rank(t) for t in a.tensors}
    if not a.tensors or len(ranks) != 1 or 0 in ranks or not isinstance(nc, int) or nc <= 0:
        raise Unsupported("_chunk_cat of tensors of different or zero ranks, or num_chunks <= 0")
    r = ranks.pop()
    d = a.dim % r
    views = []
    for t in a.tensors:
        shape = list(ctx.info(t).shape)
        tail = shape[d:]
        if not all(isinstance(s, int) for s in tail):
            raise Unsupported(f"_chunk_cat of a tensor of shape {shape}: dims from {d} on must be static")
        x = ctx.t(t, cst)
        chunk = -(-tail[0] // nc)
        pad = chunk * nc - tail[0]
        if pad:
            zshape = _cat_shape(ctx, _dims(ctx, x, shape, 0, d), ctx.ints([pad, *tail[1:]]))
            x = ctx.op("Concat", x, _zeros(ctx, zshape, r, cst), axis=d)
        views.append(ctx.op("Reshape", x, ctx.ints([0] * d + [nc, chunk * math.prod(tail[1:])])))
    y = ctx.op("Concat", *views, axis=d + 1) if len(views) > 1 else ctx.op("Identity", views[0])
    return ctx.cast(y, cst, out)


@lowering("onnx", "aten.kron.default")
def kron(ctx, node):
    """Kronecker product: ``out[i * B + j] = self[i] * other[j]`` per dim, the ranks aligned at
    the right (``and`` for bool)."""
    a = bind(node, "self", "other")
    out, cst = _out(ctx)
    ra, rb = ctx.rank(a.self), ctx.rank(a.other)
    r = max(ra, rb)
    x, y = ctx.t(a.self, cst), ctx.t(a.other, cst)
    if r == 0:
        return ctx.cast(ctx.op("Mul", x, y), cst, out)
    if ra < r:
        x = ctx.op("Unsqueeze", x, axes_const(ctx, range(r - ra)))
    if rb < r:
        y = ctx.op("Unsqueeze", y, axes_const(ctx, range(r - rb)))
    xs = ctx.op("Unsqueeze", x, axes_const(ctx, range(1, 2 * r, 2)))  # [a0, 1, a1, 1, ...]
    ys = ctx.op("Unsqueeze", y, axes_const(ctx, range(0, 2 * r, 2)))  # [1, b0, 1, b1, ...]
    p = ctx.op("Mul", xs, ys)
    sa = [1] * (r - ra) + list(ctx.info(a.self).shape)
    sb = [1] * (r - rb) + list(ctx.info(a.other).shape)
    if all(isinstance(s, int) for s in (*sa, *sb)):
        shape = ctx.ints([u * v for u, v in zip(sa, sb)])
    else:
        shape = ctx.op("Mul", ctx.op("Shape", x), ctx.op("Shape", y))
    return ctx.cast(ctx.op("Reshape", p, shape), cst, out)


# ------------------------------------------------------- flat indexing, tables


def _flat_index(ctx, index_ref, numel: str) -> str:
    """``index`` flattened, negative positions counted from ``numel`` (a 1-D int64 [1])."""
    idx = ctx.op("Reshape", ctx.t(index_ref, ST.LONG), ctx.ints([-1]))
    return ctx.op("Where", ctx.op("Less", idx, ctx.const(0, ST.LONG)), ctx.op("Add", idx, numel), idx)


def _numel(ctx, ref) -> str:
    n = ctx.info(ref).numel()
    return ctx.ints([n]) if n is not None else ctx.op("ReduceProd", ctx.op("Shape", ctx.t(ref)), keepdims=1)


@lowering("onnx", "aten.take.default")
def take(ctx, node):
    """``self`` flattened, read at ``index`` (negative: from the end); shaped like ``index``."""
    a = bind(node, "self", "index")
    flat = ctx.op("Reshape", ctx.t(a.self), ctx.ints([-1]))
    g = ctx.op("Gather", flat, _flat_index(ctx, a.index, _numel(ctx, a.self)), axis=0)
    return ctx.op("Reshape", g, ctx.shape_of(a.index))


@lowering("onnx", "aten.put.default")
def put(ctx, node):
    """``self`` flattened with ``source`` written (``accumulate``: added; bool: or-ed) at ``index``
    (negative: from the end), shaped back. Without ``accumulate`` duplicate indices leave one of
    the values, as torch leaves it undefined."""
    a = bind(node, "self", "index", "source", "accumulate")
    out, cst = _out(ctx)
    flat = ctx.op("Reshape", ctx.t(a.self, cst), ctx.ints([-1]))
    idx = ctx.op("Unsqueeze", _flat_index(ctx, a.index, _numel(ctx, a.self)), axes_const(ctx, [1]))
    src = ctx.op("Reshape", ctx.t(a.source, cst), ctx.ints([-1]))
    y = ctx.op("ScatterND", flat, idx, src, reduction="add" if a.accumulate else None)
    if a.accumulate and out == ST.BOOL:
        y = ctx.op("Greater", y, ctx.const(0, cst))
        return ctx.op("Reshape", y, ctx.shape_of(a.self))
    return ctx.cast(ctx.op("Reshape", y, ctx.shape_of(a.self)), cst, out)


@lowering("onnx", "aten.combinations.default")
def combinations(ctx, node):
    """The ``r``-element combinations of a 1-d ``self`` as rows ``[C, r]``: ``r = 1`` is ``self``
    as a column (with or without repeats), ``r = 0`` an empty 1-d tensor. (``r >= 2``: refused;
    torch.export cannot export it either, its sizes depending on data.)"""
    a = bind(node, "self", "r", "with_replacement")
    a.declare("with_replacement")  # r <= 1 does not depend on it
    if ctx.rank(a.self) != 1 or a.r not in (0, 1):
        raise Unsupported(f"combinations of a {ctx.rank(a.self)}-d tensor with r={a.r} (1-d and r <= 1 only)")
    x = ctx.t(a.self)
    if a.r == 0:
        return ctx.op("Slice", x, ctx.ints([0]), ctx.ints([0]), ctx.ints([0]))
    return ctx.op("Unsqueeze", x, axes_const(ctx, [1]))


@lowering("onnx", "aten.linalg_vander.default")
def linalg_vander(ctx, node):
    """``[..., n]`` -> ``[..., n, N]`` powers ``x^0 .. x^(N-1)`` (a 0-d ``x`` as ``[1]``), each
    the previous times ``x`` as torch's cumulative product (integers wrap alike)."""
    a = bind(node, "x", "N")
    info = ctx.info(a.x)
    out = ctx.out_info().dtype
    if out == ST.BOOL or ctx.compute_type(out) != out:
        raise Unsupported(f"linalg_vander of dtype {ST(out).name}")
    n = info.shape[-1] if info.rank else 1
    big_n = n if a.N is None else a.N
    if not isinstance(big_n, int) or big_n < 1 or big_n > 64:
        raise Unsupported(f"linalg_vander with N={big_n} (static 1..64 only)")
    x = ctx.t(a.x, out)
    if info.rank == 0:
        x = ctx.op("Reshape", x, ctx.ints([1]))
    col = ctx.op("Unsqueeze", x, axes_const(ctx, [-1]))
    cols = [ctx.op("Expand", ctx.const(1, out), ctx.op("Shape", col))]
    p = col
    for k in range(1, big_n):
        cols.append(p)
        if k + 1 < big_n:
            p = ctx.op("Mul", p, col)
    return ctx.op("Concat", *cols, axis=-1) if len(cols) > 1 else cols[0]
