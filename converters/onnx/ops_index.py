"""Indexing lowerings: advanced indexing (GatherND; index_put is in ops_scatter), gather/scatter
families, embedding and embedding_bag, sort/topk, cumsum, one_hot, nonzero."""

from __future__ import annotations

import numpy as np

from ..aten import layouts
from ..aten.args import TensorRef, bind
from ..aten.dtypes import ST
from ..aten.graph import input_names
from ..aten.registry import canonical, lowering
from ..errors import Unsupported
from .ops_nn import _ct
from .ops_shape import _transpose
from .shapes import INT64_MAX, axes_const, one_d, scalar_attr, zero_d


def _index_plan(ctx, x, indices, prep=None):
    """Advanced indexing with several index tensors: (x with the indexed axes moved first,
    the stacked broadcast indices for GatherND/ScatterND, perm from GatherND's layout
    [index dims, other dims] to torch's, or None when torch's layout already matches).
    ``prep(axis, name)``: each int64 index transformed first (a clamp)."""
    idx = list(indices) + [None] * (ctx.rank(x) - len(indices))
    present = [i for i, t in enumerate(idx) if t is not None]
    if any(ctx.dtype(idx[i]) == ST.BOOL for i in present):
        raise Unsupported("boolean mask among several index tensors")
    r = ctx.rank(x)
    others = [i for i in range(r) if i not in present]
    xt = _transpose(ctx, x, present + others) if present + others != list(range(r)) else ctx.t(x)
    ts = [ctx.t(idx[i], ST.LONG) if prep is None else prep(i, ctx.t(idx[i], ST.LONG)) for i in present]
    shapes = {ctx.info(idx[i]).shape for i in present}
    if len(shapes) != 1:
        total = ts[0]
        for t in ts[1:]:
            total = ctx.op("Add", total, t)
        b = ctx.op("Shape", total)
        ts = [ctx.op("Expand", t, b) for t in ts]
    ranks = [ctx.info(idx[i]).rank for i in present]
    ib = max(ranks)
    ax = axes_const(ctx, [-1])
    stacked = ctx.op("Concat", *[ctx.op("Unsqueeze", t, ax) for t in ts], axis=-1)
    consecutive = present == list(range(present[0], present[-1] + 1))
    k = present[0]
    perm = None
    if consecutive and k > 0:
        # GatherND gives [idx..., before..., after...]; torch wants [before..., idx..., after...]
        n_after = r - present[-1] - 1
        perm = list(range(ib, ib + k)) + list(range(ib)) + list(range(ib + k, ib + k + n_after))
    return xt, stacked, perm


@lowering("onnx", "aten.index.Tensor", "aten._unsafe_index.Tensor")
def index(ctx, node):
    a = bind(node, "self", "indices")
    idx = list(a.indices)
    present = [i for i, x in enumerate(idx) if x is not None]
    if len(present) == 1:
        k = present[0]
        ix = idx[k]
        if ctx.dtype(ix) == ST.BOOL:
            if ctx.rank(ix) != 1:
                raise Unsupported("boolean mask index of rank > 1")
            nz = ctx.op("Squeeze", ctx.op("NonZero", ctx.t(ix)), axes_const(ctx, [0]))
            return ctx.op("Gather", ctx.t(a.self), nz, axis=k)
        return ctx.op("Gather", ctx.t(a.self), ctx.t(ix, ST.LONG), axis=k)
    if present == [0, 1] and _full_arange_first(ctx, idx[0], a.self, idx[1]):
        return _gather_per_row(ctx, a.self, idx[0], idx[1])
    xt, stacked, perm = _index_plan(ctx, a.self, idx)
    g = ctx.op("GatherND", xt, stacked)
    return ctx.op("Transpose", g, perm=perm) if perm else g


# views that keep a tensor's elements in row-major order (a chain of them over a [n, 1, ..., 1]
# tensor keeps the values along its first axis)
_ORDER_KEEPING_VIEWS = ("aten.unsqueeze.default", "aten.view.default", "aten.reshape.default",
                        "aten._unsafe_view.default", "aten.squeeze.dim", "aten.squeeze.dims", "aten.clone.default")
_ARANGES = ("aten.arange.default", "aten.arange.start", "aten.arange.start_step")


def _full_arange_first(ctx, first, x, second) -> bool:
    """Whether ``x[first, second]`` is ``x[b, second[0, ...]]`` row by row: ``first`` is an
    integer ``[n, 1, ..., 1]`` view of ``arange(n)`` (start 0, step 1) where ``n`` is the size
    of ``x``'s first axis (equal as symbols), at least as high in rank as ``second``, and
    ``second`` (an integer tensor) has size 1 on the broadcast's first axis. Proven from the
    program's nodes and shapes; anything else is False and the general GatherND path runs."""
    if not isinstance(first, TensorRef) or not isinstance(second, TensorRef):
        return False
    fi, si, xi = ctx.info(first), ctx.info(second), ctx.info(x)
    if xi.rank < 2 or fi.rank < si.rank or si.rank == 0 or ctx.dtype(second) not in (ST.LONG, ST.INT):
        return False
    if si.rank == fi.rank and si.shape[0] != 1:
        return False
    n = xi.shape[0]
    name = first.name
    while True:
        info = ctx.view.tensor(name)
        if info.dtype not in (ST.LONG, ST.INT) or not info.shape or info.shape[0] != n \
                or any(s != 1 for s in info.shape[1:]):
            return False
        node = ctx.view.producer.get(name)
        if node is None:
            return False
        target = canonical(node.target)
        if target in _ORDER_KEEPING_VIEWS:
            ins = input_names(node)
            if not ins:
                return False
            name = ins[0]
            continue
        if target not in _ARANGES or info.rank != 1:
            return False
        a = bind(node)  # the arange's own arguments (its signature's names), not the index's
        start = a.get("start", 0) if target != "aten.arange.default" else 0
        step = a.get("step", 1) if target == "aten.arange.start_step" else 1
        return all(type(v) is int for v in (start, step)) and (start, step) == (0, 1)


def _gather_per_row(ctx, x, first, second):
    """``x[arange(n)[:, None...], second]`` as a Gather along axis 1 by ``second`` with its
    broadcast's first axis (size 1) dropped: ``[n] + second.shape[1:] + x.shape[2:]``."""
    r, sr = ctx.rank(first), ctx.rank(second)
    ix = ctx.t(second, ST.LONG)
    if sr == r:
        ix = ctx.op("Squeeze", ix, axes_const(ctx, [0]))
    elif r - 1 > sr:
        ix = ctx.op("Unsqueeze", ix, axes_const(ctx, list(range(r - 1 - sr))))
    return ctx.op("Gather", ctx.t(x), ix, axis=1)


@lowering("onnx", "aten.index_select.default")
def index_select(ctx, node):
    a = bind(node, "self", "dim", "index")
    x = one_d(ctx, ctx.t(a.self), a.self)  # a 0-d self: one element along dim 0
    r = ctx.op("Gather", x, ctx.t(a.index, ST.LONG), axis=a.dim % max(ctx.rank(a.self), 1))
    return ctx.op("Reshape", r, ctx.ints([])) if ctx.out_info().rank == 0 else r


@lowering("onnx", "aten.gather.default")
def gather(ctx, node):
    a = bind(node, "self", "dim", "index")
    a.declare("sparse_grad")  # the gradient's layout
    return ctx.op("GatherElements", ctx.t(a.self), ctx.t(a.index, ST.LONG), axis=a.dim % max(ctx.rank(a.self), 1))


@lowering("onnx", "aten.scatter.src", "aten.scatter.value", "aten.scatter_add.default", "aten.scatter.reduce")
def scatter(ctx, node):
    a = bind(node, "self", "dim", "index", "src", reduce=None)  # only scatter.reduce has a reduce
    src = a.get("src", a.get("value"))
    out = ctx.out_info()
    reduction = "add" if "scatter_add" in node.target else {None: "none", "add": "add", "multiply": "mul"}[a.reduce]
    upd = ctx.t(src, out.dtype)
    if not isinstance(src, TensorRef):
        upd = ctx.op("Expand", upd, ctx.shape_of(a.index))
    x, index = ctx.t(a.self), ctx.t(a.index, ST.LONG)
    if out.rank == 0:  # torch scatters into a 0-d tensor as into one element; ScatterElements needs rank >= 1
        if a.dim not in (0, -1):
            raise Unsupported(f"scatter into a 0-d tensor along dim {a.dim}")
        one = ctx.ints([1])
        x, index, upd = (ctx.op("Reshape", v, one) for v in (x, index, upd))
        r = ctx.op("ScatterElements", x, index, upd, axis=0, reduction=reduction)
        return ctx.op("Reshape", r, ctx.ints([]))
    return ctx.op("ScatterElements", x, index, upd, axis=a.dim % out.rank, reduction=reduction)


@lowering("onnx", "aten.embedding.default")
def embedding(ctx, node):
    a = bind(node, "weight", "indices")
    a.declare("padding_idx", "scale_grad_by_freq", "sparse")  # the gradient's: the forward gathers every row
    return ctx.op("Gather", ctx.t(a.weight), ctx.t(a.indices, ST.LONG), axis=0)


@lowering("onnx", "aten.topk.default")
def topk(ctx, node):
    a = bind(node, "self", "k")
    dim = a.dim % max(ctx.rank(a.self), 1)
    st = ctx.dtype(a.self)
    cst = ctx.compute_type(st) if st != ST.BOOL else ST.INT  # ONNX's TopK takes no bool
    if ctx.rank(a.self) == 0 and a.k != 1:
        raise Unsupported(f"topk of a 0-d tensor with k={a.k} (torch returns the element itself for k=0)")
    v, i = ctx.op("TopK", one_d(ctx, ctx.t(a.self, cst), a.self), ctx.ints([a.k]), axis=dim, largest=int(a.largest),
                  sorted=int(a.sorted), outputs=2)
    return [ctx.cast(zero_d(ctx, v, a.self), cst, st), zero_d(ctx, i, a.self)]


@lowering("onnx", "aten.sort.default", "aten.sort.stable")
def sort(ctx, node):
    a = bind(node, "self", stable=None)  # sort.default has no stable
    a.declare("stable")  # ONNX's TopK breaks ties by the lower index: stable either way
    dim = a.dim % max(ctx.rank(a.self), 1)
    st = ctx.dtype(a.self)
    cst = ctx.compute_type(st) if st != ST.BOOL else ST.INT  # ONNX's TopK takes no bool
    k = ctx.dim(a.self, dim) if ctx.rank(a.self) else ctx.ints([1])
    v, i = ctx.op("TopK", one_d(ctx, ctx.t(a.self, cst), a.self), k, axis=dim, largest=int(bool(a.descending)),
                  sorted=1, outputs=2)
    return [ctx.cast(zero_d(ctx, v, a.self), cst, st), zero_d(ctx, i, a.self)]


@lowering("onnx", "aten.argsort.default", "aten.argsort.stable")
def argsort(ctx, node):
    a = bind(node, "self")
    a.declare("stable")  # ONNX's TopK breaks ties by the lower index: stable either way
    dim = a.dim % max(ctx.rank(a.self), 1)
    st = ctx.dtype(a.self)
    cst = ctx.compute_type(st) if st != ST.BOOL else ST.INT  # ONNX's TopK takes no bool
    k = ctx.dim(a.self, dim) if ctx.rank(a.self) else ctx.ints([1])
    _, i = ctx.op("TopK", one_d(ctx, ctx.t(a.self, cst), a.self), k, axis=dim, largest=int(bool(a.descending)),
                  sorted=1, outputs=2)
    return zero_d(ctx, i, a.self)


@lowering("onnx", "aten.cumsum.default")
def cumsum(ctx, node):
    a = bind(node, "self", "dim")
    a.declare("dtype")  # the output's dtype, computed in
    out = ctx.out_info().dtype
    cst = ctx.compute_type(out)
    if cst == ST.INT and out != ST.INT:
        cst = ST.LONG
    r = ctx.op("CumSum", one_d(ctx, ctx.t(a.self, cst), a.self), ctx.const(a.dim, ST.LONG))
    return ctx.cast(zero_d(ctx, r, a.self), cst, out)


@lowering("onnx", "aten.one_hot.default")
def one_hot(ctx, node):
    a = bind(node, "self")
    if a.num_classes < 0:
        raise Unsupported("one_hot without num_classes")
    idx = one_d(ctx, ctx.t(a.self, ST.LONG), a.self)  # OneHot's indices need rank >= 1
    r = ctx.op("OneHot", idx, ctx.const(a.num_classes, ST.LONG), ctx.const([0, 1], ST.LONG), axis=-1)
    return ctx.op("Squeeze", r, axes_const(ctx, [0])) if ctx.rank(a.self) == 0 else r


@lowering("onnx", "aten.nonzero.default")
def nonzero(ctx, node):
    x = bind(node, "self")[0]
    v = ctx.t(x)
    if ctx.dtype(x) in (ST.CHAR, ST.SHORT):  # ONNX Runtime has no NonZero kernel for int8/int16
        v = ctx.cast(v, ctx.dtype(x), ST.INT)
    if ctx.rank(x) == 0:  # torch: [n, 0] (n = 1 for a non-zero value); NonZero of the value as [1] is [1, n]
        hits = ctx.op("Transpose", ctx.op("NonZero", ctx.op("Reshape", v, ctx.ints([1]))), perm=[1, 0])
        return ctx.op("Slice", hits, ctx.ints([0]), ctx.ints([0]), ctx.ints([1]))
    return ctx.op("Transpose", ctx.op("NonZero", v), perm=[1, 0])


@lowering("onnx", "aten.slice_scatter.default")
def slice_scatter(ctx, node):
    a = bind(node, "self", "src")
    out = ctx.out_info()
    dim = a.dim % out.rank
    if a.step != 1:
        raise Unsupported("slice_scatter with a step")
    start = 0 if a.start is None else a.start
    end = INT64_MAX if a.end is None else a.end
    x, ax = ctx.t(a.self), ctx.ints([dim])
    parts = []
    if start != 0:
        parts.append(ctx.op("Slice", x, ctx.ints([0]), ctx.ints([start]), ax))
    parts.append(ctx.t(a.src, out.dtype))
    if end != INT64_MAX and not (isinstance(end, int) and end >= (out.shape[dim] if isinstance(out.shape[dim], int) else INT64_MAX)):
        parts.append(ctx.op("Slice", x, ctx.ints([end]), ctx.ints([INT64_MAX]), ax))
    return parts[0] if len(parts) == 1 else ctx.op("Concat", *parts, axis=dim)


@lowering("onnx", "aten.select_scatter.default")
def select_scatter(ctx, node):
    a = bind(node, "self", "src", "dim", "index")
    out = ctx.out_info()
    dim = a.dim % out.rank
    idx = a.index
    if isinstance(idx, int) and idx < 0:
        size = out.shape[dim]
        if not isinstance(size, int):
            raise Unsupported("select_scatter with a negative index on a dynamic dim")
        idx += size
    x, ax = ctx.t(a.self), ctx.ints([dim])
    src = ctx.op("Unsqueeze", ctx.t(a.src, out.dtype), axes_const(ctx, [dim]))
    after = ctx.ints([idx + 1]) if isinstance(idx, int) else ctx.op("Add", ctx.ints([idx]), ctx.ints([1]))
    parts = [src]
    if idx != 0:  # no empty slices: the first or last index needs one side only
        parts.insert(0, ctx.op("Slice", x, ctx.ints([0]), ctx.ints([idx]), ax))
    if not (isinstance(idx, int) and isinstance(out.shape[dim], int) and idx + 1 >= out.shape[dim]):
        parts.append(ctx.op("Slice", x, after, ctx.ints([INT64_MAX]), ax))
    return parts[0] if len(parts) == 1 else ctx.op("Concat", *parts, axis=dim)


@lowering("onnx", "aten.index_fill.int_Scalar", "aten.index_fill.int_Tensor")
def index_fill(ctx, node):
    a = bind(node, "self", "dim", "index", "value")
    out = ctx.out_info()
    if out.rank == 0:  # a 0-d self is one element along dim 0 or -1: filled when the index hits it (0 or -1)
        if a.dim not in (0, -1):
            raise Unsupported(f"index_fill of a 0-d tensor along dim {a.dim}")
        idx = ctx.t(a.index, ST.LONG)
        hit = ctx.op("Or", ctx.op("Equal", idx, ctx.const(0, ST.LONG)), ctx.op("Equal", idx, ctx.const(-1, ST.LONG)))
        hit = ctx.cast(ctx.op("ReduceSum", ctx.cast(ctx.op("Reshape", hit, ctx.ints([-1])), ST.BOOL, ST.INT),
                              axes_const(ctx, [0]), keepdims=0), ST.INT, ST.BOOL)
        return _where(ctx, hit, a.value, a.self, out.dtype)
    dim = a.dim % out.rank
    # mask over ``dim``: any(arange(size) == index) (a count: no index is no hit), broadcast along the
    # other dims; a negative index counts from the end, as torch's does
    size = ctx.dim(a.self, dim)
    rng = ctx.op("Range", ctx.const(0, ST.LONG), ctx.op("Squeeze", size, axes_const(ctx, [0])), ctx.const(1, ST.LONG))
    idx = ctx.op("Reshape", ctx.t(a.index, ST.LONG), ctx.ints([-1, 1]))
    idx = ctx.op("Where", ctx.op("Less", idx, ctx.const(0, ST.LONG)), ctx.op("Add", idx, size), idx)
    hit = ctx.cast(ctx.op("ReduceSum", ctx.cast(ctx.op("Equal", rng, idx), ST.BOOL, ST.INT), axes_const(ctx, [0]),
                          keepdims=0), ST.INT, ST.BOOL)
    shape = [1] * out.rank
    shape[dim] = -1
    mask = ctx.op("Reshape", hit, ctx.ints(shape))
    return _where(ctx, mask, a.value, a.self, out.dtype)


def _where(ctx, cond, value, x, st):
    """Where(cond, value, x) in ``st``, bool computed as int32 (ONNX Runtime has no Where for bool)."""
    cst = ST.INT if st == ST.BOOL else st
    return ctx.cast(ctx.op("Where", cond, ctx.t(value, cst), ctx.t(x, cst)), cst, st)


@lowering("onnx", "aten._embedding_bag.default", "aten._embedding_bag_forward_only.default",
          "aten.embedding_bag.default", "aten.embedding_bag.padding_idx")
def embedding_bag(ctx, node):
    """1-D indices with offsets: bag ids by a cumulative sum of bag starts, then a
    ScatterND reduction into (num_bags, D). Only the first output (the bags) is produced."""
    a = bind(node, "weight", "indices", "offsets", "scale_grad_by_freq", "mode", "sparse", "per_sample_weights",
             "include_last_offset", "padding_idx", padding_idx=-1)  # embedding_bag.default has none
    if ctx.rank(a.indices) != 1:
        raise Unsupported("embedding_bag with 2-D indices")
    if a.padding_idx is not None and a.padding_idx >= 0:
        raise Unsupported("embedding_bag with padding_idx")
    out, cst = _ct(ctx)
    L = ctx.const
    idx = ctx.t(a.indices, ST.LONG)
    offs = ctx.t(a.offsets, ST.LONG)
    rows = ctx.op("Gather", ctx.t(a.weight, cst), idx, axis=0)  # (N, D)
    if a.per_sample_weights is not None:
        rows = ctx.op("Mul", rows, ctx.op("Unsqueeze", ctx.t(a.per_sample_weights, cst), axes_const(ctx, [1])))
    n = ctx.op("Shape", idx)
    nb = ctx.op("Shape", offs)
    if a.include_last_offset:
        nb = ctx.op("Sub", nb, ctx.ints([1]))
        offs = ctx.op("Slice", offs, ctx.ints([0]), nb, ctx.ints([0]))
    # bag id of every index: number of bag starts at or before its position, minus one
    marks = ctx.op("ScatterElements", ctx.op("ConstantOfShape", n, value=_long_zero()), offs,
                   ctx.op("Expand", L(np.array([1], np.int64), ST.LONG), ctx.op("Shape", offs)), axis=0,
                   reduction="add")
    bag = ctx.op("Sub", ctx.op("CumSum", marks, L(0, ST.LONG)), L(1, ST.LONG))
    dshape = ctx.op("Concat", nb, ctx.op("Shape", ctx.t(a.weight), start=1), axis=0)
    red = {0: "add", 1: "add", 2: "max"}[a.mode]
    init = 0.0 if a.mode != 2 else -np.inf
    base = ctx.op("Expand", L(init, cst), dshape)
    sums = ctx.op("ScatterND", base, ctx.op("Unsqueeze", bag, axes_const(ctx, [1])), rows, reduction=red)
    if a.mode == 1:
        cnt = ctx.op("ScatterElements", ctx.op("ConstantOfShape", nb, value=_long_zero()), bag,
                     ctx.op("Expand", L(np.array([1], np.int64), ST.LONG), n), axis=0, reduction="add")
        cnt = ctx.op("Max", ctx.cast(cnt, ST.LONG, cst), L(1.0, cst))
        sums = ctx.op("Div", sums, ctx.op("Unsqueeze", cnt, axes_const(ctx, [1])))
    if a.mode == 2:
        sums = ctx.op("Where", ctx.op("IsInf", sums, detect_positive=0), L(0.0, cst), sums)
    return [ctx.cast(sums, cst, out), None, None, None]


def _long_zero():
    return scalar_attr(0, ST.LONG)


@lowering("onnx", "aten.masked_scatter.default")
def masked_scatter(ctx, node):
    """``self`` with the True positions of ``mask`` filled, in order, from ``source``."""
    a = bind(node, "self", "mask", "source")
    out = ctx.out_info()
    shape = ctx.shape_of(a.self)
    m = ctx.op("Expand", ctx.t(a.mask, ST.BOOL), shape)
    flat = ctx.op("Reshape", ctx.cast(m, ST.BOOL, ST.LONG), ctx.ints([-1]))
    pos = ctx.op("Max", ctx.op("Sub", ctx.op("CumSum", flat, ctx.const(0, ST.LONG)), ctx.const(1, ST.LONG)),
                 ctx.const(0, ST.LONG))
    cst = ST.INT if out.dtype == ST.BOOL else out.dtype  # ONNX Runtime has no Where for bool values
    src = ctx.op("Reshape", ctx.t(a.source, cst), ctx.ints([-1]))
    picked = ctx.op("Reshape", ctx.op("Gather", src, pos, axis=0), shape)
    return ctx.cast(ctx.op("Where", m, picked, ctx.t(a.self, cst)), cst, out.dtype)


@lowering("onnx", "aten.as_strided.default", "aten.as_strided_copy.default")
def as_strided(ctx, node):
    """Over an input torch recorded as contiguous at storage offset 0: a reshape when the sizes
    and strides are those of contiguous memory with the input's element count (symbolic sizes
    too: ``layouts.strided_reshape``); else static sizes/strides only, the element offsets
    computed at conversion time and gathered from the input flattened."""
    a = bind(node, "self", "size", "stride")
    if not layouts.contiguous_at_zero(ctx.view, a.self.name):
        raise Unsupported("as_strided over a value that is not contiguous at storage offset 0")
    if layouts.strided_reshape(ctx.view, node):
        if tuple(ctx.info(a.self).shape) == tuple(ctx.out_info().shape):
            return ctx.t(a.self)
        return ctx.op("Reshape", ctx.t(a.self), ctx.ints(list(a.size)))
    idx = _strided_offsets(ctx, a, "as_strided")
    flat = ctx.op("Reshape", ctx.t(a.self), ctx.ints([-1]))
    return ctx.op("Gather", flat, ctx.const_array(idx, "as_strided_index"), axis=0)


@lowering("onnx", "aten.as_strided_scatter.default")
def as_strided_scatter(ctx, node):
    """``self`` (contiguous at storage offset 0) with the elements ``as_strided(self, size,
    stride, storage_offset)`` reads replaced by ``src``: a reshape of ``src`` when that view
    is a reshape of ``self`` (``layouts.strided_reshape``), else static sizes/strides whose
    offsets do not overlap, scattered into ``self`` flattened."""
    a = bind(node, "self", "src", "size", "stride")
    out = ctx.out_info()
    if not layouts.contiguous_at_zero(ctx.view, a.self.name):
        raise Unsupported("as_strided_scatter into a value that is not contiguous at storage offset 0")
    src = ctx.t(a.src, out.dtype)
    if layouts.strided_reshape(ctx.view, node):
        return ctx.op("Reshape", src, ctx.shape_of(a.self))
    numel = ctx.info(a.self).numel()
    if numel is None:
        raise Unsupported("as_strided_scatter with symbolic sizes or strides that are not a reshape of "
                          "contiguous memory")
    flat_idx = _strided_offsets(ctx, a, "as_strided_scatter").reshape(-1)
    if len(np.unique(flat_idx)) != flat_idx.size or (flat_idx.size and (flat_idx.min() < 0 or flat_idx.max() >= numel)):
        raise Unsupported("as_strided_scatter whose elements overlap or leave the input")
    flat = ctx.op("Reshape", ctx.t(a.self), ctx.ints([-1]))
    put = ctx.op("ScatterND", flat, ctx.const_array(flat_idx.reshape(-1, 1), "as_strided_index"),
                 ctx.op("Reshape", src, ctx.ints([-1])))
    return ctx.op("Reshape", put, ctx.shape_of(a.self))


def _strided_offsets(ctx, a, op: str) -> np.ndarray:
    """The storage offset of every element ``as_strided`` reads (static ``a.size``/``a.stride``/
    ``a.storage_offset`` only), shaped like ``a.size``."""
    vals = list(a.size) + list(a.stride) + [a.storage_offset or 0]
    if not all(isinstance(v, int) for v in vals):
        raise Unsupported(f"{op} with symbolic sizes or strides that are not a reshape of contiguous memory")
    ctx.reserve_array(list(a.size) + [2], 8, f"{op} index")
    idx = np.full(tuple(a.size), a.storage_offset or 0, np.int64)
    for axis, (n, st) in enumerate(zip(a.size, a.stride)):
        shape = [1] * len(a.size)
        shape[axis] = n
        idx = idx + (np.arange(n, dtype=np.int64) * st).reshape(shape)
    return idx
