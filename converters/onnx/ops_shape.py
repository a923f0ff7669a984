"""View lowerings: reshape, flatten/unflatten, transpose/permute, expand, squeeze/unsqueeze,
view_as, atleast_Nd, broadcast_tensors, sum_to_size. Weight-only chains (a transposed parameter)
fold to new initializers so ``linear`` over ``t(weight)`` costs no node (``_fold``, shared with
``ops_slice``'s select)."""

from __future__ import annotations

import numpy as np

from ..aten.aliases import refuse_if_written
from ..aten.args import TensorRef, bind
from ..aten.dtypes import ST
from ..aten.registry import lowering
from ..errors import Unsupported
from .shapes import axes_const, reshape_target


def _fold(ctx, x, fn):
    v = ctx.foldable(x)
    if v is None:
        return None
    return ctx.const_array(np.asarray(fn(v)), name=(x.name if isinstance(x, TensorRef) else "folded"))


@lowering("onnx", "aten.view.default", "aten.reshape.default", "aten._unsafe_view.default",
          "aten._reshape_alias.default")
def view(ctx, node):
    a = bind(node, "self", "size")
    a.declare("stride")  # _reshape_alias: the strides of the reshape torch proved a view
    sizes = a.get("size", a.get("shape"))
    out = ctx.out_info()
    if out.is_static:
        folded = _fold(ctx, a.self, lambda v: v.reshape(out.shape))
        if folded:
            return folded
    if tuple(ctx.info(a.self).shape) == tuple(out.shape):
        return ctx.t(a.self)
    if any(d == 0 for d in out.shape) and len(sizes) == len(out.shape):
        # no elements: Reshape reads a 0 as "copy the input's dim" unless allowzero, and -1 is undefined
        vals = [d if isinstance(d, int) else s for d, s in zip(out.shape, sizes)]
        if any(isinstance(v, int) and v < 0 for v in vals):
            raise Unsupported("reshape to no elements with a dim inferred (-1) at run time")
        return ctx.op("Reshape", ctx.t(a.self), ctx.ints(vals), allowzero=1)
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
    if any(d == 0 for d in out.shape):  # no elements: a 0 in Reshape's shape would copy the input's dim
        if not out.is_static:
            raise Unsupported("unflatten to no elements with dims known only at run time")
        return ctx.op("Reshape", ctx.t(a.self), ctx.ints(list(out.shape)), allowzero=1)
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
    d0, d1 = a.dim0, a.dim1  # read for every rank (torch checks them against max(rank, 1))
    if r < 2:
        return ctx.t(a.self)
    perm = list(range(r))
    d0, d1 = d0 % r, d1 % r
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
    a.declare("implicit")  # whether the expand was written by the user: same values
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
    st = ctx.dtype(a.self)
    if st == ST.BFLOAT16:  # ONNX Runtime CPU has no bfloat16 Expand: float32 holds every bfloat16 exactly
        return ctx.cast(ctx.op("Expand", ctx.t(a.self, ST.FLOAT), ctx.ints(vals)), ST.FLOAT, st)
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


@lowering("onnx", "aten.view_as.default", "aten.reshape_as.default")
def view_as(ctx, node):
    """``self`` in ``other``'s shape (the program's output shape: ``view``'s lowering)."""
    a = bind(node, "self", "other")
    if tuple(ctx.info(a.self).shape) == tuple(ctx.out_info().shape):
        return ctx.t(a.self)
    return ctx.op("Reshape", ctx.t(a.self), ctx.shape_of(a.other))


_ATLEAST_AXES = {1: {0: [0]}, 2: {0: [0, 1], 1: [0]}, 3: {0: [0, 1, 2], 1: [0, 2], 2: [2]}}
"""atleast_Nd: the axes to insert by input rank (a 1-d tensor becomes [1, n, 1] in 3-d, a 2-d [m, n, 1])."""


def atleast(ctx, x, n: int) -> str:
    """``x`` with the unit dims ``torch.atleast_{n}d`` adds."""
    r = ctx.rank(x)
    if r >= n:
        return ctx.t(x)
    return ctx.op("Unsqueeze", ctx.t(x), axes_const(ctx, _ATLEAST_AXES[n][r]))


@lowering("onnx", "aten.atleast_1d.default", "aten.atleast_2d.default", "aten.atleast_3d.default")
def atleast_nd(ctx, node):
    """``x`` viewed with at least n dims (unit dims added as torch places them)."""
    refuse_if_written(ctx.view, node)
    return atleast(ctx, bind(node, "self").self, int(node.target.split(".")[-2][-2]))


@lowering("onnx", "aten.atleast_1d.Sequence", "aten.atleast_2d.Sequence", "aten.atleast_3d.Sequence")
def atleast_nd_sequence(ctx, node):
    """Each of ``tensors`` viewed with at least n dims."""
    n = int(node.target.split(".")[-2][-2])
    refuse_if_written(ctx.view, node)
    return [atleast(ctx, x, n) for x in bind(node, "tensors").tensors]


def broadcast_shape(ctx, refs, shape) -> str:
    """``shape`` (a broadcast of ``refs``' shapes) as a 1-D int64 tensor: static dims as constants,
    a symbolic one from an input that has that dim at the same place (from the right)."""
    parts = []
    for k, s in enumerate(shape):
        if isinstance(s, int):
            parts.append(ctx.ints([s]))
            continue
        back = len(shape) - k
        src = next((x for x in refs if ctx.rank(x) >= back and ctx.info(x).shape[-back] == s), None)
        if src is None:
            raise Unsupported(f"a broadcast dim {s} that no input has")
        parts.append(ctx.dim(src, -back))
    if not parts:
        return ctx.const(np.zeros([0], np.int64), ST.LONG)
    return parts[0] if len(parts) == 1 else ctx.op("Concat", *parts, axis=0)


def expand_to(ctx, x, shape, refs) -> str:
    """``x`` expanded to ``shape`` (dims and symbols of ``refs``' shapes)."""
    if tuple(ctx.info(x).shape) == tuple(shape):
        return ctx.t(x)
    st = ctx.dtype(x)
    target = broadcast_shape(ctx, refs, shape)
    if st == ST.BFLOAT16:  # ONNX Runtime CPU has no bfloat16 Expand
        return ctx.cast(ctx.op("Expand", ctx.t(x, ST.FLOAT), target), ST.FLOAT, st)
    return ctx.op("Expand", ctx.t(x), target)


@lowering("onnx", "aten.broadcast_tensors.default")
def broadcast_tensors(ctx, node):
    """Each of ``tensors`` expanded to their common broadcast shape."""
    xs = bind(node, "tensors").tensors
    refuse_if_written(ctx.view, node)
    return [expand_to(ctx, x, ctx.out_info(i).shape, xs) for i, x in enumerate(xs)]


@lowering("onnx", "aten.sum_to_size.default")
def sum_to_size(ctx, node):
    """``self`` summed (keeping dims) down to ``size``: over its leading dims and where ``size`` is 1;
    in the output's dtype (torch's sum: integers and bools in int64 when anything is summed)."""
    a = bind(node, "self", "size")
    info, out = ctx.info(a.self), ctx.out_info()
    lead = info.rank - len(a.size)
    if lead < 0:
        raise Unsupported("sum_to_size to more dims than the input has")
    # the output's dims: a symbolic size torch proved 1 is 1 there
    axes = list(range(lead)) + [lead + i for i, s in enumerate(out.shape) if s == 1 and info.shape[lead + i] != 1]
    cst = ST.LONG if out.dtype == ST.BOOL else ctx.compute_type(out.dtype)
    if not axes:  # torch returns self
        refuse_if_written(ctx.view, node)
        return ctx.t(a.self, out.dtype)
    r = ctx.op("ReduceSum", ctx.t(a.self, cst), axes_const(ctx, axes), keepdims=1)
    if lead:
        r = ctx.op("Squeeze", r, axes_const(ctx, list(range(lead))))
    return ctx.cast(r, cst, out.dtype)
