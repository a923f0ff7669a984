"""View and layout lowerings: reshape, transpose, expand, squeeze, cat/split, slice/select,
tile/flip/roll, pads, copies and casts. Weight-only chains (a transposed parameter) fold to
new initializers so ``linear`` over ``t(weight)`` costs no node."""

from __future__ import annotations

import numpy as np

from ..aten import dtypes
from ..aten.args import TensorRef, bind
from ..aten.dtypes import ST
from ..aten.registry import lowering
from ..errors import Unsupported
from .shapes import INT64_MAX, axes_const, diagonal_plane, reshape_target, scalar_attr


def _fold(ctx, x, fn):
    v = ctx.foldable(x)
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
    a = bind(node, "self")
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
    a = bind(node, "self", dims=None)  # only permute_copy has dims
    r = ctx.rank(a.self)
    perm = [d % r for d in a.dims] if a.dims is not None else list(reversed(range(r)))
    return _transpose(ctx, a.self, perm)


@lowering("onnx", "aten.expand.default", "aten.expand_copy.default")
def expand(ctx, node):
    a = bind(node, "self", "size")
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
    a = bind(node, "self", dim=None)  # squeeze.default has no dim
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


def _split_by_sizes(ctx, x, dim, n_out):
    """Split into the node's outputs along ``dim`` using their metadata sizes."""
    from ..aten.graph import output_names

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
    a = bind(node, "self", "split_size")
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
    from ..aten.graph import output_names

    return output_names(node)


@lowering("onnx", "aten.unbind.int")
def unbind(ctx, node):
    a = bind(node, "self")
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
    a = bind(node, "self", "dim", "start", "end", "step")
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
    a = bind(node, "self", "shifts")
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
          "aten.alias_copy.default", "aten.dropout.default", "aten.dropout_.default",
          "aten.feature_dropout.default", "aten.alpha_dropout.default", "aten.native_dropout.default",
          "aten.clone_.default", "aten.resolve_conj.default", "aten.resolve_neg.default",
          "aten.positive.default", "aten._conj.default", "aten.detach_copy.default")
def identity(ctx, node):
    """No data change at inference (dropout in eval mode; the exported train flag is honoured
    only as False: a training-mode dropout would be random)."""
    a = bind(node, train=False)  # self or input, by name; only the dropouts have train
    x = a.get("self", a.get("input"))
    if "dropout" in node.target:
        if a.train and a.get("p", 0.5) > 0:
            raise Unsupported("dropout in training mode")
        if "native_dropout" in node.target:
            return [ctx.t(x), ctx.op("ConstantOfShape", ctx.shape_of(x), value=scalar_attr(True, ST.BOOL))]
    return ctx.t(x)


@lowering("onnx", "aten.view_as.default", "aten.reshape_as.default")
def view_as(ctx, node):
    """``self`` in ``other``'s shape (the program's output shape: ``view``'s lowering)."""
    a = bind(node, "self", "other")
    if tuple(ctx.info(a.self).shape) == tuple(ctx.out_info().shape):
        return ctx.t(a.self)
    return ctx.op("Reshape", ctx.t(a.self), ctx.shape_of(a.other))


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
        ctx.reserve_array(v.shape, dtypes.to_numpy(out).itemsize, f"{a.self.name!r} cast")
        return ctx.const_array(v.astype(dtypes.to_numpy(out)), name=a.self.name)
    if dtypes.is_floating(src) and dtypes.is_integral(out, include_bool=False):
        # torch truncates toward zero; ONNX Cast float->int also truncates
        pass
    return ctx.cast(ctx.t(a.self), src, out)


@lowering("onnx", "aten.copy.default")
def copy(ctx, node):
    a = bind(node, "self", "src")
    out = ctx.out_info()
    r = ctx.t(a.src, out.dtype)
    if ctx.info(a.src).shape != out.shape:
        r = ctx.op("Expand", r, ctx.shape_of(a.self))
    return r


# ------------------------------------------------------------------------ creation


@lowering("onnx", "aten.constant_pad_nd.default", "aten.pad.default")
def constant_pad_nd(ctx, node):
    a = bind(node, "self", "pad", mode="constant")  # constant_pad_nd has no mode
    if a.mode != "constant":
        mode = {"reflect": "reflect", "replicate": "edge", "circular": "wrap"}.get(a.mode)
        if mode is None or (mode == "wrap" and ctx.opset < 19):
            raise Unsupported(f"pad mode {a.mode} at opset {ctx.opset}")
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
    return ctx.cast(x, cst, out.dtype) if out.dtype != ST.BOOL else x


def _pad_mode(mode):
    def lower(ctx, node):
        a = bind(node, "self", "padding")
        if mode == "wrap" and ctx.opset < 19:
            raise Unsupported("circular padding needs opset >= 19")
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


@lowering("onnx", "aten.diagonal.default", "aten.diagonal_copy.default")
def diagonal(ctx, node):
    a = bind(node, "self")
    perm, n1, n2, rows = diagonal_plane(ctx, a, "diagonal")
    # move d1, d2 last, gather the (i, i + offset) pairs with a one-hot mask, reduce
    x = ctx.op("Transpose", ctx.t(a.self), perm=perm) if perm != sorted(perm) else ctx.t(a.self)
    ctx.reserve_array([n1, n2], 1, "diagonal mask")
    mask = np.eye(n1, n2, k=a.offset, dtype=bool)
    out_dtype = ctx.info(a.self).dtype
    cst = ctx.compute_type(out_dtype) if out_dtype != ST.BOOL else ST.INT
    xm = ctx.op("Where", ctx.const(mask, ST.BOOL), ctx.cast(x, out_dtype, cst), ctx.const(0, cst))
    s = ctx.op("ReduceSum", xm, axes_const(ctx, [-1]), keepdims=0)
    s = ctx.op("Gather", s, ctx.const(np.asarray(rows, np.int64), ST.LONG), axis=-1)
    return ctx.cast(s, cst, out_dtype)
