"""View/shape lowerings: reshape, transpose, expand, squeeze, cat, split, slice, select,
index, copies and casts. Weight-only chains (a transposed parameter) fold to new
initializers so ``linear`` over ``t(weight)`` costs no node."""

from __future__ import annotations

import numpy as np

from .. import dtypes
from ..args import SymRef, TensorRef, bind
from ..dtypes import ST
from ..errors import Unsupported
from ..registry import lowering
from .shapes import axes_const, reshape_target

INT64_MAX = 2**63 - 1


def _fold(ctx, x, fn):
    v = ctx.value_of(x)
    if v is None:
        return None
    return ctx.const_array(np.asarray(fn(v)), name=(x.name if isinstance(x, TensorRef) else "folded"))


@lowering("onnx", "aten.view.default", "aten.reshape.default", "aten._unsafe_view.default",
          "aten._reshape_alias.default")
def view(ctx, node):
    a = bind(node, "self", "size")
    sizes = a.get("size", a.get("shape"))
    out = ctx.out_info()
    if out.is_static:
        folded = _fold(ctx, a.self, lambda v: v.reshape(out.shape))
        if folded:
            return folded
    if tuple(ctx.info(a.self).shape) == tuple(out.shape):
        return ctx.t(a.self)
    return ctx.op("Reshape", ctx.t(a.self), reshape_target(ctx, a.self, sizes, out.shape))


@lowering("onnx", "aten.flatten.using_ints")
def flatten(ctx, node):
    a = bind(node, "self", start_dim=0, end_dim=-1)
    r = ctx.rank(a.self)
    if r == 0:
        return ctx.op("Reshape", ctx.t(a.self), ctx.ints([1]))
    s, e = a.start_dim % r, a.end_dim % r
    if s == e:
        return ctx.t(a.self)
    tail = ctx.info(a.self).shape[e + 1:]
    if all(isinstance(d, int) for d in tail):
        return ctx.op("Reshape", ctx.t(a.self), ctx.ints([0] * s + [-1] + list(tail)))
    shape = ctx.op("Concat", ctx.ints([0] * s + [-1]), ctx.shape(ctx.t(a.self), e + 1), axis=0)
    return ctx.op("Reshape", ctx.t(a.self), shape)


@lowering("onnx", "aten.unflatten.int")
def unflatten(ctx, node):
    a = bind(node, "self", "dim", "sizes")
    r = ctx.rank(a.self)
    dim = a.dim % r
    out = ctx.out_info()
    mid = [out.shape[dim + i] if isinstance(out.shape[dim + i], int) else s for i, s in enumerate(a.sizes)]
    tail = ctx.info(a.self).shape[dim + 1:]
    if all(isinstance(d, int) for d in tail):
        return ctx.op("Reshape", ctx.t(a.self), ctx.ints([0] * dim + mid + list(tail)))
    shape = ctx.op("Concat", ctx.ints([0] * dim + mid), ctx.shape(ctx.t(a.self), dim + 1), axis=0)
    return ctx.op("Reshape", ctx.t(a.self), shape)


def _transpose(ctx, x, perm):
    if list(perm) == list(range(len(perm))):
        return ctx.t(x)
    folded = _fold(ctx, x, lambda v: np.transpose(v, perm))
    return folded or ctx.op("Transpose", ctx.t(x), perm=list(perm))


@lowering("onnx", "aten.permute.default")
def permute(ctx, node):
    a = bind(node, "self", "dims")
    r = ctx.rank(a.self)
    return _transpose(ctx, a.self, [d % r for d in a.dims])


@lowering("onnx", "aten.transpose.int")
def transpose(ctx, node):
    a = bind(node, "self", "dim0", "dim1")
    r = ctx.rank(a.self)
    if r < 2:
        return ctx.t(a.self)
    perm = list(range(r))
    d0, d1 = a.dim0 % r, a.dim1 % r
    perm[d0], perm[d1] = perm[d1], perm[d0]
    return _transpose(ctx, a.self, perm)


@lowering("onnx", "aten.mT.default", "aten.mH.default", "aten.adjoint.default")
def mT(ctx, node):
    r = ctx.rank(bind(node, "self")[0])
    return _transpose(ctx, bind(node, "self")[0], list(range(r - 2)) + [r - 1, r - 2])


@lowering("onnx", "aten.t.default", "aten.numpy_T.default", "aten.permute_copy.default")
def t(ctx, node):
    a = bind(node, "self", dims=None)
    r = ctx.rank(a.self)
    perm = [d % r for d in a.dims] if a.dims is not None else list(reversed(range(r)))
    return _transpose(ctx, a.self, perm)


@lowering("onnx", "aten.expand.default", "aten.expand_copy.default")
def expand(ctx, node):
    a = bind(node, "self", "size", implicit=False)
    in_shape = ctx.info(a.self).shape
    out_shape = ctx.out_info().shape
    lead = len(a.size) - len(in_shape)
    vals = []
    for i, s in enumerate(a.size):
        j = i - lead
        if s == -1 or (j >= 0 and in_shape[j] == out_shape[i]):
            vals.append(1)
        elif isinstance(out_shape[i], int):
            vals.append(out_shape[i])
        else:
            vals.append(s)
    if all(v == 1 for v in vals) and lead == 0:
        return ctx.t(a.self)
    return ctx.op("Expand", ctx.t(a.self), ctx.ints(vals))


@lowering("onnx", "aten.expand_as.default")
def expand_as(ctx, node):
    a = bind(node, "self", "other")
    return ctx.op("Expand", ctx.t(a.self), ctx.shape_of(a.other))


@lowering("onnx", "aten.unsqueeze.default", "aten.unsqueeze_copy.default")
def unsqueeze(ctx, node):
    a = bind(node, "self", "dim")
    dim = a.dim % (ctx.rank(a.self) + 1)
    folded = _fold(ctx, a.self, lambda v: np.expand_dims(v, dim))
    return folded or ctx.op("Unsqueeze", ctx.t(a.self), axes_const(ctx, [dim]))


@lowering("onnx", "aten.squeeze.dim", "aten.squeeze.dims", "aten.squeeze.default", "aten.squeeze_copy.dims")
def squeeze(ctx, node):
    a = bind(node, "self", dim=None)
    info = ctx.info(a.self)
    r = info.rank
    dims = a.get("dims", a.dim)
    if dims is None:
        dims = list(range(r))
    elif isinstance(dims, int):
        dims = [dims]
    dims = [d % r for d in dims if r and info.shape[d % r] == 1] if r else []
    if not dims:
        return ctx.t(a.self)
    return ctx.op("Squeeze", ctx.t(a.self), axes_const(ctx, dims))


@lowering("onnx", "aten.cat.default", "aten.concat.default", "aten.concatenate.default")
def cat(ctx, node):
    a = bind(node, "tensors", dim=0)
    out = ctx.out_info()
    xs = [x for x in a.tensors if not (ctx.info(x).rank == 1 and ctx.info(x).shape[0] == 0 and out.rank != 1)]
    if len(xs) == 1:
        return ctx.t(xs[0], out.dtype)
    return ctx.op("Concat", *[ctx.t(x, out.dtype) for x in xs], axis=a.dim % out.rank)


@lowering("onnx", "aten.stack.default")
def stack(ctx, node):
    a = bind(node, "tensors", dim=0)
    out = ctx.out_info()
    dim = a.dim % out.rank
    ax = axes_const(ctx, [dim])
    parts = [ctx.op("Unsqueeze", ctx.t(x, out.dtype), ax) for x in a.tensors]
    return parts[0] if len(parts) == 1 else ctx.op("Concat", *parts, axis=dim)


def _split_by_sizes(ctx, x, dim, n_out):
    """Split into the node's outputs along ``dim`` using their metadata sizes."""
    from ..graph import output_names

    outs = output_names(ctx.node)
    sizes = [ctx.view.tensor(o).shape[dim] for o in outs]
    if all(isinstance(s, int) for s in sizes):
        if len(sizes) == 1:
            return [ctx.t(x)]
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
    a = bind(node, "self", "split_size", dim=0)
    dim = a.dim % ctx.rank(a.self)
    n = len(_flat(node))
    r = _split_by_sizes(ctx, a.self, dim, n)
    if r is not None:
        return r
    size = a.get("split_size", a.get("split_sizes"))
    if isinstance(size, int):
        return _split_slices(ctx, a.self, dim, size, n)
    raise Unsupported("split of a dynamic dim into dynamic sizes")


def _flat(node):
    from ..graph import output_names

    return output_names(node)


@lowering("onnx", "aten.unbind.int")
def unbind(ctx, node):
    a = bind(node, "self", dim=0)
    r = ctx.rank(a.self)
    dim = a.dim % r
    n = len(_flat(node))
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


def _bound(ctx, v, default):
    return default if v is None else v


@lowering("onnx", "aten.slice.Tensor", "aten.slice_copy.Tensor")
def slice_(ctx, node):
    a = bind(node, "self", "dim", "start", "end", "step", dim=0, start=None, end=None, step=1)
    info = ctx.info(a.self)
    dim = a.dim % info.rank
    start, end = _bound(ctx, a.start, 0), _bound(ctx, a.end, INT64_MAX)
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


def _index_plan(ctx, x, indices):
    """Advanced indexing with several index tensors: (x with the indexed axes moved first,
    the stacked broadcast indices for GatherND/ScatterND, perm from GatherND's layout
    [index dims, other dims] to torch's, or None when torch's layout already matches)."""
    idx = list(indices) + [None] * (ctx.rank(x) - len(indices))
    present = [i for i, t in enumerate(idx) if t is not None]
    if any(ctx.dtype(idx[i]) == ST.BOOL for i in present):
        raise Unsupported("boolean mask among several index tensors")
    r = ctx.rank(x)
    others = [i for i in range(r) if i not in present]
    xt = _transpose(ctx, x, present + others) if present + others != list(range(r)) else ctx.t(x)
    ts = [ctx.t(idx[i], ST.LONG) for i in present]
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
    xt, stacked, perm = _index_plan(ctx, a.self, idx)
    g = ctx.op("GatherND", xt, stacked)
    return ctx.op("Transpose", g, perm=perm) if perm else g


@lowering("onnx", "aten.index_select.default")
def index_select(ctx, node):
    a = bind(node, "self", "dim", "index")
    return ctx.op("Gather", ctx.t(a.self), ctx.t(a.index, ST.LONG), axis=a.dim % max(ctx.rank(a.self), 1))


@lowering("onnx", "aten.gather.default")
def gather(ctx, node):
    a = bind(node, "self", "dim", "index")
    return ctx.op("GatherElements", ctx.t(a.self), ctx.t(a.index, ST.LONG), axis=a.dim % max(ctx.rank(a.self), 1))


@lowering("onnx", "aten.scatter.src", "aten.scatter.value", "aten.scatter_add.default", "aten.scatter.reduce")
def scatter(ctx, node):
    a = bind(node, "self", "dim", "index", "src", reduce=None)
    src = a.get("src", a.get("value"))
    out = ctx.out_info()
    reduction = "add" if "scatter_add" in node.target else {None: "none", "add": "add", "multiply": "mul"}[a.reduce]
    upd = ctx.t(src, out.dtype)
    if not isinstance(src, TensorRef):
        upd = ctx.op("Expand", upd, ctx.shape_of(a.index))
    return ctx.op("ScatterElements", ctx.t(a.self), ctx.t(a.index, ST.LONG), upd, axis=a.dim % out.rank,
                  reduction=reduction)


@lowering("onnx", "aten.index_put.default", "aten.index_put_.default", "aten._unsafe_index_put.default")
def index_put(ctx, node):
    a = bind(node, "self", "indices", "values", accumulate=False)
    idx = list(a.indices)
    out = ctx.out_info()
    present = [i for i, x in enumerate(idx) if x is not None]
    if len(present) == 1 and present[0] == 0 and ctx.dtype(idx[0]) == ST.BOOL and not a.accumulate \
            and ctx.rank(idx[0]) == out.rank:
        return ctx.op("Where", ctx.t(idx[0]), ctx.t(a.values, out.dtype), ctx.t(a.self))
    if any(ctx.dtype(idx[i]) == ST.BOOL for i in present):
        raise Unsupported("index_put with a boolean mask that is not full-rank")
    r = out.rank
    others = [i for i in range(r) if i not in present]
    order = present + others
    xt, stacked, perm = _index_plan(ctx, a.self, idx)
    # values broadcast to torch's indexing-result layout, then to GatherND's [idx..., others...]
    res_shape = ctx.op("Shape", ctx.op("GatherND", xt, stacked))
    vals = ctx.t(a.values, out.dtype)
    if perm:
        inv = [perm.index(i) for i in range(len(perm))]
        torch_shape = ctx.op("Gather", res_shape, ctx.const(np.asarray(perm, np.int64), ST.LONG))
        vals = ctx.op("Transpose", ctx.op("Expand", vals, torch_shape), perm=inv)
    else:
        vals = ctx.op("Expand", vals, res_shape)
    r_t = ctx.op("ScatterND", xt, stacked, vals, reduction="add" if a.accumulate else None)
    if order != list(range(r)):
        r_t = ctx.op("Transpose", r_t, perm=[order.index(i) for i in range(r)])
    return r_t


@lowering("onnx", "aten.tile.default")
def tile(ctx, node):
    a = bind(node, "self", "dims")
    reps = [1] * (ctx.rank(a.self) - len(a.dims)) + list(a.dims)
    x = ctx.t(a.self)
    extra = len(reps) - ctx.rank(a.self)
    if extra:
        x = ctx.op("Reshape", x, ctx.op("Concat", ctx.ints([1] * extra), ctx.shape_of(a.self), axis=0))
    return ctx.op("Tile", x, ctx.ints(reps))


@lowering("onnx", "aten.repeat.default")
def repeat(ctx, node):
    a = bind(node, "self", "repeats")
    x = ctx.t(a.self)
    extra = len(a.repeats) - ctx.rank(a.self)
    if extra:
        x = ctx.op("Reshape", x, ctx.op("Concat", ctx.ints([1] * extra), ctx.shape_of(a.self), axis=0))
    return ctx.op("Tile", x, ctx.ints(a.repeats))


@lowering("onnx", "aten.flip.default")
def flip(ctx, node):
    a = bind(node, "self", "dims")
    r = ctx.rank(a.self)
    dims = [d % r for d in a.dims]
    n = len(dims)
    return ctx.op("Slice", ctx.t(a.self), ctx.ints([-1] * n), ctx.ints([-INT64_MAX] * n), ctx.ints(dims), ctx.ints([-1] * n))


@lowering("onnx", "aten.roll.default")
def roll(ctx, node):
    a = bind(node, "self", "shifts", dims=())
    x = ctx.t(a.self)
    if not a.dims:
        raise Unsupported("roll without dims")
    r = ctx.rank(a.self)
    for s, d in zip(a.shifts, a.dims):
        d %= r
        size = ctx.info(a.self).shape[d]
        if not isinstance(size, int):
            raise Unsupported("roll along a dynamic dim")
        s %= size
        if s == 0:
            continue
        head = ctx.op("Slice", x, ctx.ints([size - s]), ctx.ints([size]), ctx.ints([d]))
        tail = ctx.op("Slice", x, ctx.ints([0]), ctx.ints([size - s]), ctx.ints([d]))
        x = ctx.op("Concat", head, tail, axis=d)
    return x


# ---------------------------------------------------------------- identities / copies


@lowering("onnx", "aten.clone.default", "aten.contiguous.default", "aten.alias.default", "aten.detach.default",
          "aten.detach_.default", "aten.lift_fresh_copy.default", "aten.lift_fresh.default",
          "aten.alias_copy.default", "aten.view_as.default", "aten.dropout.default", "aten.dropout_.default",
          "aten.feature_dropout.default", "aten.alpha_dropout.default", "aten.native_dropout.default",
          "aten.clone_.default", "aten.resolve_conj.default", "aten.resolve_neg.default",
          "aten.positive.default", "aten._conj.default", "aten.detach_copy.default")
def identity(ctx, node):
    """No data change at inference (dropout in eval mode; the exported train flag is honoured
    only as False: a training-mode dropout would be random)."""
    a = bind(node, "self", "input", train=False)
    x = a.get("self", a.get("input"))
    if "dropout" in node.target:
        if a.train and a.get("p", 0.5) > 0:
            raise Unsupported("dropout in training mode")
        if "native_dropout" in node.target:
            return [ctx.t(x), ctx.op("ConstantOfShape", ctx.shape_of(x), value=_scalar_tensor(True, ST.BOOL))]
    if "view_as" in node.target:
        return ctx.op("Reshape", ctx.t(x), ctx.shape_of(a.other))
    return ctx.t(x)


def _scalar_tensor(v, st):
    from onnx import helper

    from .context import onnx_type

    arr = np.asarray([v]).astype(dtypes.to_numpy(st))
    return helper.make_tensor("value", onnx_type(st), [1], arr.tobytes(), raw=True)


@lowering("onnx", "aten._to_copy.default", "aten.to.dtype", "aten.to.dtype_layout", "aten.to.device",
          "aten.to.other", "aten.type_as.default", "aten._to_dim_order_copy.default", "aten.to.prim_dtype",
          "aten.to.prim_Device", "aten.to.prim_other", "aten._autocast_to_reduced_precision.default")
def to_copy(ctx, node):
    a = bind(node, "self")
    out = ctx.out_info().dtype
    src = ctx.dtype(a.self)
    if src == out:
        return ctx.t(a.self)
    v = ctx.value_of(a.self)
    if v is not None and v.size > 4096:
        return ctx.const_array(v.astype(dtypes.to_numpy(out)), name=a.self.name)
    if dtypes.is_floating(src) and dtypes.is_integral(out, include_bool=False):
        # torch truncates toward zero; ONNX Cast float->int also truncates
        pass
    return ctx.cast(ctx.t(a.self), src, out)


@lowering("onnx", "aten.copy.default", "aten.copy_.default")
def copy(ctx, node):
    a = bind(node, "self", "src")
    out = ctx.out_info()
    r = ctx.t(a.src, out.dtype)
    if ctx.info(a.src).shape != out.shape:
        r = ctx.op("Expand", r, ctx.shape_of(a.self))
    return r


# ------------------------------------------------------------------------ creation


def _fill(ctx, shape_name, value, st):
    """A tensor of ``st`` filled with ``value`` (number or SymRef) of a 1-D shape tensor."""
    if isinstance(value, (SymRef, TensorRef)):
        return ctx.op("Expand", ctx.t(value, st), shape_name)
    cst = ctx.compute_type(st) if st in (ST.BFLOAT16,) else st
    r = ctx.op("ConstantOfShape", shape_name, value=_scalar_tensor(value, cst))
    return ctx.cast(r, cst, st)


@lowering("onnx", "aten.full.default", "aten.zeros.default", "aten.ones.default", "aten.empty.memory_format",
          "aten.empty.default", "aten.new_zeros.default", "aten.new_ones.default", "aten.new_full.default",
          "aten.new_empty.default", "aten.empty_strided.default", "aten.new_empty_strided.default")
def full(ctx, node):
    a = bind(node, "self", "size", fill_value=0)
    out = ctx.out_info()
    name = node.target.split(".")[-2]
    value = {"zeros": 0, "ones": 1, "new_zeros": 0, "new_ones": 1}.get(name, a.fill_value)
    if name.startswith("empty") or name.startswith("new_empty"):
        value = 0
    if out.is_static and isinstance(value, (int, float, bool)) and (out.numel() or 0) <= 16:
        return ctx.const(np.full(out.shape, value), out.dtype)
    return _fill(ctx, ctx.ints(a.size), value, out.dtype)


@lowering("onnx", "aten.full_like.default", "aten.zeros_like.default", "aten.ones_like.default",
          "aten.empty_like.default")
def full_like(ctx, node):
    a = bind(node, "self", fill_value=0)
    out = ctx.out_info()
    name = node.target.split(".")[-2]
    value = {"zeros_like": 0, "ones_like": 1, "empty_like": 0}.get(name, a.fill_value)
    return _fill(ctx, ctx.shape_of(a.self), value, out.dtype)


@lowering("onnx", "aten.scalar_tensor.default")
def scalar_tensor(ctx, node):
    a = bind(node, "s")
    out = ctx.out_info().dtype
    return ctx.t(a.s, out) if isinstance(a.s, SymRef) else ctx.const(a.s, out)


@lowering("onnx", "aten.arange.default", "aten.arange.start", "aten.arange.start_step")
def arange(ctx, node):
    a = bind(node, start=0, step=1)
    if "end" not in a:
        raise Unsupported("arange without end")
    start, end, step = (a.start, a.end, a.step) if "start" in node.target or node.target.endswith("start_step") \
        else (0, a.end, 1)
    out = ctx.out_info()
    cst = ST.FLOAT if out.dtype in (ST.HALF, ST.BFLOAT16) else ST.INT if out.dtype in (ST.BYTE, ST.CHAR, ST.SHORT) \
        else out.dtype
    if out.is_static and all(isinstance(v, (int, float)) for v in (start, end, step)):
        return ctx.const(np.arange(start, end, step).astype(dtypes.to_numpy(out.dtype)), out.dtype)
    if dtypes.is_floating(cst) and not all(isinstance(v, int) for v in (start, end, step)):
        # torch computes start + i * step in double, then casts
        n = ctx.op("Ceil", ctx.op("Div", ctx.op("Sub", ctx.t(end, ST.DOUBLE), ctx.t(start, ST.DOUBLE)), ctx.t(step, ST.DOUBLE)))
        i = ctx.op("Range", ctx.const(0, ST.DOUBLE), n, ctx.const(1, ST.DOUBLE))
        r = ctx.op("Add", ctx.t(start, ST.DOUBLE), ctx.op("Mul", i, ctx.t(step, ST.DOUBLE)))
        return ctx.cast(r, ST.DOUBLE, out.dtype)
    r = ctx.op("Range", ctx.t(start, cst), ctx.t(end, cst), ctx.t(step, cst))
    return ctx.cast(r, cst, out.dtype)


@lowering("onnx", "aten.tril.default", "aten.triu.default")
def tril(ctx, node):
    a = bind(node, "self", diagonal=0)
    return ctx.op("Trilu", ctx.t(a.self), ctx.t(a.diagonal, ST.LONG), upper=int("triu" in node.target))


@lowering("onnx", "aten.embedding.default")
def embedding(ctx, node):
    a = bind(node, "weight", "indices", padding_idx=-1)
    return ctx.op("Gather", ctx.t(a.weight), ctx.t(a.indices, ST.LONG), axis=0)


@lowering("onnx", "aten.constant_pad_nd.default", "aten.pad.default")
def constant_pad_nd(ctx, node):
    a = bind(node, "self", "pad", mode="constant", value=0)
    if a.mode != "constant":
        mode = {"reflect": "reflect", "replicate": "edge", "circular": "wrap"}.get(a.mode)
        if mode is None:
            raise Unsupported(f"pad mode {a.mode}")
    else:
        mode = "constant"
    r = ctx.rank(a.self)
    pads = list(a.pad)
    begins, ends = [0] * r, [0] * r
    for i in range(len(pads) // 2):
        begins[r - 1 - i], ends[r - 1 - i] = pads[2 * i], pads[2 * i + 1]
    out = ctx.out_info().dtype
    value = None if mode != "constant" else ctx.const(a.value or 0, out)
    return ctx.op("Pad", ctx.t(a.self), ctx.ints(begins + ends), value, mode=mode)


@lowering("onnx", "aten.topk.default")
def topk(ctx, node):
    a = bind(node, "self", "k", dim=-1, largest=True, sorted=True)
    dim = a.dim % max(ctx.rank(a.self), 1)
    st = ctx.dtype(a.self)
    cst = ctx.compute_type(st)
    v, i = ctx.op("TopK", ctx.t(a.self, cst), ctx.ints([a.k]), axis=dim, largest=int(a.largest),
                  sorted=int(a.sorted), outputs=2)
    return [ctx.cast(v, cst, st), i]


@lowering("onnx", "aten.sort.default", "aten.sort.stable")
def sort(ctx, node):
    a = bind(node, "self", dim=-1, descending=False, stable=None)
    dim = a.dim % max(ctx.rank(a.self), 1)
    st = ctx.dtype(a.self)
    cst = ctx.compute_type(st)
    k = ctx.dim(a.self, dim)
    v, i = ctx.op("TopK", ctx.t(a.self, cst), k, axis=dim, largest=int(bool(a.descending)), sorted=1, outputs=2)
    return [ctx.cast(v, cst, st), i]


@lowering("onnx", "aten.argsort.default", "aten.argsort.stable")
def argsort(ctx, node):
    a = bind(node, "self", dim=-1, descending=False)
    dim = a.dim % max(ctx.rank(a.self), 1)
    st = ctx.dtype(a.self)
    cst = ctx.compute_type(st)
    _, i = ctx.op("TopK", ctx.t(a.self, cst), ctx.dim(a.self, dim), axis=dim, largest=int(bool(a.descending)),
                  sorted=1, outputs=2)
    return i


@lowering("onnx", "aten.cumsum.default")
def cumsum(ctx, node):
    a = bind(node, "self", "dim", dtype=None)
    out = ctx.out_info().dtype
    cst = ctx.compute_type(out)
    if cst == ST.INT and out != ST.INT:
        cst = ST.LONG
    r = ctx.op("CumSum", ctx.t(a.self, cst), ctx.const(a.dim, ST.LONG))
    return ctx.cast(r, cst, out)


@lowering("onnx", "aten.one_hot.default")
def one_hot(ctx, node):
    a = bind(node, "self", num_classes=-1)
    if a.num_classes < 0:
        raise Unsupported("one_hot without num_classes")
    r = ctx.op("OneHot", ctx.t(a.self, ST.LONG), ctx.const(a.num_classes, ST.LONG), ctx.const([0, 1], ST.LONG), axis=-1)
    return r


@lowering("onnx", "aten.diff.default")
def diff(ctx, node):
    a = bind(node, "self", n=1, dim=-1, prepend=None, append=None)
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
    return ctx.cast(x, cst, out.dtype) if out.dtype != ST.BOOL else x


@lowering("onnx", "aten.fill.Scalar", "aten.fill.Tensor", "aten.fill_.Scalar", "aten.fill_.Tensor")
def fill(ctx, node):
    a = bind(node, "self", "value")
    out = ctx.out_info()
    v = a.value
    if isinstance(v, TensorRef):
        return ctx.op("Expand", ctx.t(v, out.dtype), ctx.shape_of(a.self))
    return _fill(ctx, ctx.shape_of(a.self), v, out.dtype)


@lowering("onnx", "aten.nonzero.default")
def nonzero(ctx, node):
    x = bind(node, "self")[0]
    return ctx.op("Transpose", ctx.op("NonZero", ctx.t(x)), perm=[1, 0])


def _pad_mode(mode):
    def lower(ctx, node):
        a = bind(node, "self", "padding")
        r = ctx.rank(a.self)
        pads = list(a.padding)
        begins, ends = [0] * r, [0] * r
        for i in range(len(pads) // 2):
            begins[r - 1 - i], ends[r - 1 - i] = pads[2 * i], pads[2 * i + 1]
        return ctx.op("Pad", ctx.t(a.self), ctx.ints(begins + ends), mode=mode)

    return lower


for _d in ("1d", "2d", "3d"):
    lowering("onnx", f"aten.reflection_pad{_d}.default")(_pad_mode("reflect"))
    lowering("onnx", f"aten.replication_pad{_d}.default")(_pad_mode("edge"))
    lowering("onnx", f"aten.circular_pad{_d}.default")(_pad_mode("wrap"))


@lowering("onnx", "aten.scatter_reduce.two")
def scatter_reduce(ctx, node):
    a = bind(node, "self", "dim", "index", "src", "reduce", include_self=True)
    red = {"sum": "add", "prod": "mul", "amax": "max", "amin": "min"}.get(a.reduce)
    if red is None or not a.include_self:
        raise Unsupported(f"scatter_reduce {a.reduce!r} include_self={a.include_self}")
    out = ctx.out_info()
    return ctx.op("ScatterElements", ctx.t(a.self), ctx.t(a.index, ST.LONG), ctx.t(a.src, out.dtype),
                  axis=a.dim % out.rank, reduction=red)


@lowering("onnx", "aten.slice_scatter.default")
def slice_scatter(ctx, node):
    a = bind(node, "self", "src", dim=0, start=None, end=None, step=1)
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
    lo = ctx.op("Slice", x, ctx.ints([0]), ctx.ints([idx]), ax)
    hi = ctx.op("Slice", x, after, ctx.ints([INT64_MAX]), ax)
    return ctx.op("Concat", lo, src, hi, axis=dim)


@lowering("onnx", "aten.grid_sampler_2d.default", "aten.grid_sampler.default")
def grid_sampler(ctx, node):
    a = bind(node, "input", "grid", "interpolation_mode", "padding_mode", "align_corners")
    out = ctx.out_info().dtype
    cst = ctx.compute_type(out)
    mode = {0: "linear", 1: "nearest", 2: "cubic"}[a.interpolation_mode]
    pad = {0: "zeros", 1: "border", 2: "reflection"}[a.padding_mode]
    r = ctx.op("GridSample", ctx.t(a.input, cst), ctx.t(a.grid, cst), mode=mode, padding_mode=pad,
               align_corners=int(bool(a.align_corners)))
    return ctx.cast(r, cst, out)


@lowering("onnx", "aten.diagonal.default", "aten.diagonal_copy.default")
def diagonal(ctx, node):
    a = bind(node, "self", offset=0, dim1=0, dim2=1)
    info = ctx.info(a.self)
    r = info.rank
    d1, d2 = a.dim1 % r, a.dim2 % r
    n1, n2 = info.shape[d1], info.shape[d2]
    if not (isinstance(n1, int) and isinstance(n2, int)):
        raise Unsupported("diagonal of dynamic dims")
    # move d1, d2 last, gather the (i, i + offset) pairs with a one-hot mask, reduce
    perm = [i for i in range(r) if i not in (d1, d2)] + [d1, d2]
    x = ctx.op("Transpose", ctx.t(a.self), perm=perm) if perm != list(range(r)) else ctx.t(a.self)
    mask = np.eye(n1, n2, k=a.offset, dtype=bool)
    rows = [i for i in range(n1) if 0 <= i + a.offset < n2]
    out_dtype = info.dtype
    cst = ctx.compute_type(out_dtype) if out_dtype != ST.BOOL else ST.INT
    xm = ctx.op("Where", ctx.const(mask, ST.BOOL), ctx.cast(x, out_dtype, cst), ctx.const(0, cst))
    s = ctx.op("ReduceSum", xm, axes_const(ctx, [-1]), keepdims=0)
    s = ctx.op("Gather", s, ctx.const(np.asarray(rows, np.int64), ST.LONG), axis=-1)
    return ctx.cast(s, cst, out_dtype)


@lowering("onnx", "aten.index_fill.int_Scalar", "aten.index_fill.int_Tensor")
def index_fill(ctx, node):
    a = bind(node, "self", "dim", "index", "value")
    out = ctx.out_info()
    dim = a.dim % out.rank
    # mask over ``dim``: any(arange(size) == index), broadcast along the other dims
    size = ctx.dim(a.self, dim)
    rng = ctx.op("Range", ctx.const(0, ST.LONG), ctx.op("Squeeze", size, axes_const(ctx, [0])), ctx.const(1, ST.LONG))
    idx = ctx.op("Reshape", ctx.t(a.index, ST.LONG), ctx.ints([-1, 1]))
    hit = ctx.cast(ctx.op("ReduceMax", ctx.cast(ctx.op("Equal", rng, idx), ST.BOOL, ST.INT), axes_const(ctx, [0]),
                          keepdims=0), ST.INT, ST.BOOL)
    shape = [1] * out.rank
    shape[dim] = -1
    mask = ctx.op("Reshape", hit, ctx.ints(shape))
    return ctx.op("Where", mask, ctx.t(a.value, out.dtype), ctx.t(a.self))


@lowering("onnx", "aten.eye.default", "aten.eye.m")
def eye(ctx, node):
    out = ctx.out_info()
    if not out.is_static:
        raise Unsupported("eye of a dynamic size")
    return ctx.const(np.eye(*out.shape), out.dtype)


@lowering("onnx", "aten.linspace.default")
def linspace(ctx, node):
    a = bind(node, "start", "end", "steps")
    out = ctx.out_info()
    if not all(isinstance(v, (int, float)) for v in (a.start, a.end, a.steps)):
        raise Unsupported("linspace with tensor or symbolic bounds")
    return ctx.const(np.linspace(a.start, a.end, a.steps), out.dtype)


@lowering("onnx", "aten.einsum.default")
def einsum(ctx, node):
    a = bind(node, "equation", "tensors")
    out = ctx.out_info().dtype
    cst = ctx.compute_type(out)
    return ctx.cast(ctx.op("Einsum", *[ctx.t(t, cst) for t in a.tensors], equation=a.equation), cst, out)
