"""Cutting and joining lowerings: cat/stack (and h/v/d/column_stack), split/unbind, select/slice/narrow,
flip/roll, take_along_dim, diff (slices subtracted) and diagonal (a masked sum over the plane)."""

from __future__ import annotations

import numpy as np

from ...serde.codec.symbolic import Symbol
from ..aten.args import bind
from ..aten.dtypes import ST
from ..aten.registry import lowering
from ..errors import Unsupported
from .ops_shape import _fold, atleast, expand_to
from .shapes import INT64_MAX, axes_const


@lowering("onnx", "aten.cat.default", "aten.concat.default", "aten.concatenate.default")
def cat(ctx, node):
    a = bind(node, "tensors")
    out = ctx.out_info()
    xs = [x for x in a.tensors if not (ctx.info(x).rank == 1 and ctx.info(x).shape[0] == 0 and out.rank != 1)]
    if len(xs) == 1:
        return ctx.t(xs[0], out.dtype)
    return ctx.op("Concat", *[ctx.t(x, out.dtype) for x in xs], axis=a.dim % out.rank)


@lowering("onnx", "aten.stack.default")
def stack(ctx, node):
    a = bind(node, "tensors")
    out = ctx.out_info()
    dim = a.dim % out.rank
    ax = axes_const(ctx, [dim])
    parts = [ctx.op("Unsqueeze", ctx.t(x, out.dtype), ax) for x in a.tensors]
    return parts[0] if len(parts) == 1 else ctx.op("Concat", *parts, axis=dim)


def _concat(ctx, parts, dim, out_dtype):
    """``parts`` ((ONNX name, dtype) pairs) joined along ``dim`` in ``out_dtype``."""
    names = [ctx.cast(p, st, out_dtype) for p, st in parts]
    return names[0] if len(names) == 1 else ctx.op("Concat", *names, axis=dim)


@lowering("onnx", "aten.hstack.default", "aten.vstack.default", "aten.dstack.default")
def hvdstack(ctx, node):
    """``tensors`` made at least 1-d (hstack: joined along dim 0 when 1-d, else 1), 2-d (vstack:
    along 0) or 3-d (dstack: along 2), in the output's dtype."""
    xs = bind(node, "tensors").tensors
    out = ctx.out_info()
    n = {"hstack": 1, "vstack": 2, "dstack": 3}[node.target.split(".")[-2]]
    rank = max(ctx.rank(xs[0]), n)
    dim = {1: 0 if rank == 1 else 1, 2: 0, 3: 2}[n]
    # cat's legacy rule: a 1-d empty tensor joins any other (hstack leaves 1-d tensors 1-d)
    keep = [x for x in xs if not (n == 1 and out.rank != 1 and ctx.info(x).shape == (0,))] or xs
    return _concat(ctx, [(atleast(ctx, x, n), ctx.dtype(x)) for x in keep], dim, out.dtype)


@lowering("onnx", "aten.column_stack.default")
def column_stack(ctx, node):
    """``tensors`` joined along dim 1, a 0-d or 1-d one first made a column ([n, 1])."""
    xs = bind(node, "tensors").tensors
    out = ctx.out_info()
    cols = {0: [0, 1], 1: [1]}
    parts = [(ctx.op("Unsqueeze", ctx.t(x), axes_const(ctx, cols[ctx.rank(x)])) if ctx.rank(x) < 2 else ctx.t(x),
              ctx.dtype(x)) for x in xs]
    return _concat(ctx, parts, 1, out.dtype)


@lowering("onnx", "aten.take_along_dim.default")
def take_along_dim(ctx, node):
    """``self`` gathered at ``indices`` along ``dim`` (both broadcast but along ``dim``, as torch
    does); without ``dim``, of the flattened tensors."""
    a = bind(node, "self", "indices", "dim")
    x, idx = a.self, a.indices
    if a.dim is None:
        flat = ctx.ints([-1])
        return ctx.op("GatherElements", ctx.op("Reshape", ctx.t(x), flat),
                      ctx.op("Reshape", ctx.t(idx, ST.LONG), flat), axis=0)
    r = ctx.rank(x)
    if ctx.rank(idx) != r:
        raise Unsupported("take_along_dim of an input and indices of different ranks")
    if r == 0:  # torch refuses a dim for 0-d tensors
        raise Unsupported("take_along_dim of 0-d tensors along a dim")
    dim = a.dim % r
    shape = list(ctx.out_info().shape)
    xshape = shape[:dim] + [ctx.info(x).shape[dim]] + shape[dim + 1:]
    xb = expand_to(ctx, x, xshape, [x, idx])
    ib = ctx.cast(expand_to(ctx, idx, shape, [x, idx]), ctx.dtype(idx), ST.LONG)
    return ctx.op("GatherElements", xb, ib, axis=dim)


def _split_by_sizes(ctx, x, dim):
    """Split into the node's outputs along ``dim`` using their metadata sizes."""
    from ..aten.graph import output_names

    outs = output_names(ctx.node)
    sizes = [ctx.view.tensor(o).shape[dim] for o in outs]
    if all(isinstance(s, int) for s in sizes):
        if len(sizes) == 1:
            return [ctx.t(x)]
        if ctx.dtype(x) == ST.BOOL:  # Slices: LiteRT's SPLIT/SPLIT_V have no bool kernel
            bounds = [int(b) for b in np.cumsum([0, *sizes])]
            return [ctx.op("Slice", ctx.t(x), ctx.ints([lo]), ctx.ints([hi]), ctx.ints([dim]))
                    for lo, hi in zip(bounds, bounds[1:])]
        return ctx.op("Split", ctx.t(x), ctx.const(np.asarray(sizes, np.int64), ST.LONG), axis=dim, outputs=len(sizes))
    return None


def _split_slices(ctx, x, dim, chunk, count):
    res = []
    for i in range(count):
        start = i * chunk
        end = INT64_MAX if i == count - 1 else (i + 1) * chunk
        res.append(ctx.op("Slice", ctx.t(x), ctx.ints([start]), ctx.ints([end]), ctx.ints([dim])))
    return res


@lowering("onnx", "aten.split.Tensor", "aten.split_with_sizes.default", "aten.chunk.default",
          "aten.split_with_sizes_copy.default", "aten.split_copy.Tensor")
def split(ctx, node):
    a = bind(node, "self", "split_size")
    a.declare("split_size", "split_sizes", "chunks")  # the sizes of the outputs' metadata (_split_by_sizes)
    dim = a.dim % ctx.rank(a.self)
    n = len(_flat(node))
    r = _split_by_sizes(ctx, a.self, dim)
    if r is not None:
        return r
    size = a.get("split_size", a.get("split_sizes"))
    if isinstance(size, int):
        return _split_slices(ctx, a.self, dim, size, n)
    if a.get("chunks", 0) > 0:
        return _chunk_slices(ctx, a.self, dim, a.chunks, n)
    raise Unsupported("split of a dynamic dim into dynamic sizes")


def _symbol_range(ctx, name: str) -> tuple[int | None, int | None]:
    v = ctx.view
    while getattr(v, "parent", None) is not None:
        v = v.parent
    return getattr(v, "ranges", {}).get(name, (None, None))


def _chunk_slices(ctx, x, dim, chunks, count):
    """``chunk`` of a dynamic dim n: ``chunks`` pieces of ceil(n / chunks) at run time, the last one
    what is left. Only where every n the program allows gives ``chunks`` pieces (torch gives fewer
    for some: 3 chunks of 4 are 2 of 2), which holds for every n > chunks * (chunks - 1)."""
    s = ctx.info(x).shape[dim]
    lo, hi = _symbol_range(ctx, s.name) if isinstance(s, Symbol) else (None, None)
    top = chunks * (chunks - 1) if hi is None else min(hi, chunks * (chunks - 1))
    if count != chunks or lo is None or lo < 1 or chunks > 1024 or \
            any(-(-m // -(-m // chunks)) != chunks for m in range(lo, top + 1)):
        raise Unsupported(f"chunk of a dynamic dim into {chunks}: some sizes the program allows give fewer pieces")
    size = ctx.dim(x, dim)
    step = ctx.op("Div", ctx.op("Add", size, ctx.ints([chunks - 1])), ctx.ints([chunks]))
    bounds = [ctx.op("Mul", step, ctx.ints([i])) for i in range(count)] + [ctx.ints([INT64_MAX])]
    ax = ctx.ints([dim])
    return [ctx.op("Slice", ctx.t(x), lo, hi, ax) for lo, hi in zip(bounds, bounds[1:])]


def _flat(node):
    from ..aten.graph import output_names

    return output_names(node)


@lowering("onnx", "aten.tensor_split.sections", "aten.tensor_split.indices")
def tensor_split(ctx, node):
    """One Slice per output: between the given ``indices`` (Python's slicing rules), or for
    ``sections`` between the bounds the outputs' metadata sizes give (torch's sizes: the first
    ``n % sections`` one longer). Empty pieces stay empty."""
    a = bind(node, "self")
    a.declare("sections")  # the outputs' sizes in their metadata
    rank = ctx.rank(a.self)
    if rank == 0:
        raise Unsupported("tensor_split of a 0-d tensor")
    dim = a.dim % rank
    outs = _flat(node)
    if node.target.endswith(".indices"):
        bounds = [0, *a.indices, INT64_MAX]
    else:
        sizes = [ctx.view.tensor(o).shape[dim] for o in outs]
        if not all(isinstance(s, int) for s in sizes):
            return _sections_slices(ctx, a.self, dim, a.sections, len(outs))
        bounds = [int(b) for b in np.cumsum([0, *sizes])]
    x = ctx.t(a.self)
    return [ctx.op("Slice", x, ctx.ints([lo]), ctx.ints([hi]), ctx.ints([dim])) for lo, hi in zip(bounds, bounds[1:])]


def _sections_slices(ctx, x, dim, sections, count):
    """``tensor_split`` of a dynamic dim of size n into ``sections``: piece i starts at
    i * (n // sections) + min(i, n % sections) (the first n % sections pieces one longer)."""
    if not isinstance(sections, int) or sections <= 0 or count != sections:
        raise Unsupported("tensor_split of a dynamic dim into a number of sections known only at run time")
    n = ctx.dim(x, dim)
    q = ctx.op("Div", n, ctx.ints([sections]))
    r = ctx.op("Sub", n, ctx.op("Mul", q, ctx.ints([sections])))
    bounds = [ctx.ints([0])] + [ctx.op("Add", ctx.op("Mul", q, ctx.ints([i])), ctx.op("Min", r, ctx.ints([i])))
                                for i in range(1, count)] + [ctx.ints([INT64_MAX])]
    ax = ctx.ints([dim])
    return [ctx.op("Slice", ctx.t(x), lo, hi, ax) for lo, hi in zip(bounds, bounds[1:])]


@lowering("onnx", "aten.tensor_split.tensor_indices_or_sections")
def tensor_split_tensor(ctx, node):
    """``tensor_split`` at the indices a 1-D int64 tensor holds (read at run time, Python's slicing
    rules as ``tensor_split.indices``); a 0-d tensor (a number of sections) is refused."""
    a = bind(node, "self", "tensor_indices_or_sections", "dim")
    t = a.tensor_indices_or_sections
    rank = ctx.rank(a.self)
    if rank == 0 or ctx.rank(t) != 1 or not isinstance(ctx.info(t).shape[0], int):
        raise Unsupported("tensor_split by a tensor other than a 1-D one of indices of a tensor of rank >= 1")
    n = ctx.info(t).shape[0]
    if n + 1 != len(_flat(node)):
        raise Unsupported("tensor_split whose number of outputs is not one more than its indices")
    dim = a.dim % rank
    idx = ctx.t(t, ST.LONG)
    cuts = [ctx.op("Slice", idx, ctx.ints([i]), ctx.ints([i + 1])) for i in range(n)]
    bounds = [ctx.ints([0]), *cuts, ctx.ints([INT64_MAX])]
    x, ax = ctx.t(a.self), ctx.ints([dim])
    return [ctx.op("Slice", x, lo, hi, ax) for lo, hi in zip(bounds, bounds[1:])]


@lowering("onnx", "aten.unbind.int")
def unbind(ctx, node):
    a = bind(node, "self")
    r = ctx.rank(a.self)
    dim = a.dim % r
    n = len(_flat(node))
    if n > 1 and ctx.dtype(a.self) == ST.BOOL:  # Slices: LiteRT's SPLIT has no bool kernel
        parts = [ctx.op("Slice", ctx.t(a.self), ctx.ints([i]), ctx.ints([i + 1]), ctx.ints([dim])) for i in range(n)]
    else:
        parts = ctx.op("Split", ctx.t(a.self), axis=dim, num_outputs=n, outputs=n) if n > 1 else [ctx.t(a.self)]
    ax = axes_const(ctx, [dim])
    return [ctx.op("Squeeze", p, ax) for p in parts]


@lowering("onnx", "aten.select.int", "aten.select_copy.int")
def select(ctx, node):
    a = bind(node, "self", "dim", "index")
    dim = a.dim % ctx.rank(a.self)
    idx = ctx.t(a.index, ST.LONG) if not isinstance(a.index, int) else ctx.const(a.index, ST.LONG)
    folded = isinstance(a.index, int) and _fold(ctx, a.self, lambda v: np.take(v, a.index, axis=dim))
    return folded or ctx.op("Gather", ctx.t(a.self), idx, axis=dim)


def _bound(v, default):
    return default if v is None else v


@lowering("onnx", "aten.slice.Tensor", "aten.slice_copy.Tensor")
def slice_(ctx, node):
    a = bind(node, "self", "dim", "start", "end", "step")
    info = ctx.info(a.self)
    dim = a.dim % info.rank
    start, end = _bound(a.start, 0), _bound(a.end, INT64_MAX)
    if start == 0 and a.step == 1 and (end == INT64_MAX or end == info.shape[dim]) and isinstance(end, int):
        return ctx.t(a.self)
    if isinstance(end, int) and end > INT64_MAX:
        end = INT64_MAX
    return ctx.op("Slice", ctx.t(a.self), ctx.ints([start]), ctx.ints([end]), ctx.ints([dim]), ctx.ints([a.step]))


@lowering("onnx", "aten.narrow.default")
def narrow(ctx, node):
    a = bind(node, "self", "dim", "start", "length")
    dim = a.dim % ctx.rank(a.self)
    st = ctx.ints([a.start])
    end = ctx.ints([a.start + a.length]) if isinstance(a.start, int) and isinstance(a.length, int) else \
        ctx.op("Add", st, ctx.ints([a.length]))
    return ctx.op("Slice", ctx.t(a.self), st, end, ctx.ints([dim]))


@lowering("onnx", "aten.flip.default")
def flip(ctx, node):
    a = bind(node, "self", "dims")
    r = ctx.rank(a.self)
    if r == 0:  # flipping one element along dim 0 or -1 changes nothing
        if not all(d in (0, -1) for d in a.dims):
            raise Unsupported(f"flip of a 0-d tensor along dims {list(a.dims)}")
        return ctx.op("Identity", ctx.t(a.self))
    dims = [d % r for d in a.dims]
    n = len(dims)
    return ctx.op("Slice", ctx.t(a.self), ctx.ints([-1] * n), ctx.ints([-INT64_MAX] * n), ctx.ints(dims), ctx.ints([-1] * n))


@lowering("onnx", "aten.roll.default")
def roll(ctx, node):
    """Each (shift, dim) pair in turn; without ``dims``, the flattened tensor rolled by the one
    shift and reshaped back (torch's rule)."""
    a = bind(node, "self", "shifts")
    x = ctx.t(a.self)
    shape = ctx.info(a.self).shape
    if not a.dims:
        if len(a.shifts) != 1 or not all(isinstance(s, int) for s in shape):
            raise Unsupported("roll without dims of several shifts or a dynamic shape")
        size = int(np.prod(shape, dtype=np.int64))
        flat = _roll_axis(ctx, ctx.op("Reshape", x, ctx.ints([-1])), a.shifts[0], 0, size)
        return ctx.op("Reshape", flat, ctx.ints(list(shape)))
    r = ctx.rank(a.self)
    for s, d in zip(a.shifts, a.dims):
        d %= r
        if not isinstance(shape[d], int):
            raise Unsupported("roll along a dynamic dim")
        x = _roll_axis(ctx, x, s, d, shape[d])
    return x


def _roll_axis(ctx, x: str, shift, axis: int, size: int) -> str:
    if not isinstance(shift, int):
        raise Unsupported("roll by a shift computed at run time")
    s = shift % size if size else 0
    if s == 0:
        return x
    head = ctx.op("Slice", x, ctx.ints([size - s]), ctx.ints([size]), ctx.ints([axis]))
    tail = ctx.op("Slice", x, ctx.ints([0]), ctx.ints([size - s]), ctx.ints([axis]))
    return ctx.op("Concat", head, tail, axis=axis)


@lowering("onnx", "aten.diff.default")
def diff(ctx, node):
    a = bind(node, "self")
    out = ctx.out_info()
    dim = a.dim % out.rank
    parts = [p for p in (a.prepend, a.self, a.append) if p is not None]
    x = ctx.op("Concat", *[ctx.t(p) for p in parts], axis=dim) if len(parts) > 1 else ctx.t(a.self)
    cst = ST.INT if out.dtype == ST.BOOL else ctx.compute_type(out.dtype)
    x = ctx.cast(x, out.dtype, cst) if out.dtype != ST.BOOL else ctx.cast(x, ST.BOOL, cst)
    ax = ctx.ints([dim])
    for _ in range(a.n):
        hi = ctx.op("Slice", x, ctx.ints([1]), ctx.ints([INT64_MAX]), ax)
        lo = ctx.op("Slice", x, ctx.ints([0]), ctx.ints([-1]), ax)
        x = ctx.op("Sub", hi, lo) if out.dtype != ST.BOOL else ctx.op("Not", ctx.op("Equal", hi, lo))
    return ctx.cast(x, cst, out.dtype) if out.dtype != ST.BOOL or a.n == 0 else x  # n=0: x is still in cst


