"""Copies and casts: the identities (clone, contiguous, detach, eval-mode dropout, ...),
``_to_copy``/``to`` (a Cast, or a folded constant), ``copy``, the complex parts of real tensors
(``real``, ``conj_physical``, ``isreal``), ``zero_`` and the ``resize_``s that keep the elements."""

from __future__ import annotations

import numpy as np

from ..aten import dtypes, views
from ..aten.aliases import UNANNOTATED_VIEWS
from ..aten.args import bind
from ..aten.dtypes import ST
from ..aten.layouts import contiguous_at_zero
from ..aten.registry import canonical, lowering
from ..errors import Unsupported
from .shapes import scalar_attr


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
    a.declare("p")  # read below where train is set
    if "dropout" in node.target:
        if a.train and a.get("p", 0.5) > 0:
            raise Unsupported("dropout in training mode")
        if "native_dropout" in node.target:
            return [ctx.t(x), ctx.op("ConstantOfShape", ctx.shape_of(x), value=scalar_attr(True, ST.BOOL))]
    return ctx.t(x)


@lowering("onnx", "aten._to_copy.default", "aten.to.dtype", "aten.to.dtype_layout", "aten.to.device",
          "aten.to.other", "aten.type_as.default", "aten._to_dim_order_copy.default", "aten.to.prim_dtype",
          "aten.to.prim_Device", "aten.to.prim_other", "aten._autocast_to_reduced_precision.default")
def to_copy(ctx, node):
    a = bind(node, "self")
    # the output's dtype (to.other's and type_as's: other's; autocast's: the device's); a copy has the same values
    a.declare("dtype", "other", "copy", "cuda_enabled", "cpu_enabled", "cuda_dtype", "cpu_dtype")
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
    a.declare("self")  # overwritten: only its shape (the output's) matters
    out = ctx.out_info()
    r = ctx.t(a.src, out.dtype)
    if ctx.info(a.src).shape != out.shape:
        r = ctx.op("Expand", r, ctx.shape_of(a.self))
    return r


def _real_input(ctx, x, op: str):
    if dtypes.is_complex(ctx.dtype(x)):
        raise Unsupported(f"{op} of a complex tensor")
    return x


@lowering("onnx", "aten.real.default", "aten.conj_physical.default")
def real(ctx, node):
    """A real tensor is its own real part and its own conjugate."""
    return ctx.t(_real_input(ctx, bind(node, "self").self, node.target.split(".")[-2]))


@lowering("onnx", "aten.isreal.default")
def isreal(ctx, node):
    """Every element of a real tensor is real: True in its shape."""
    x = _real_input(ctx, bind(node, "self").self, "isreal")
    return ctx.op("ConstantOfShape", ctx.shape_of(x), value=scalar_attr(True, ST.BOOL))


@lowering("onnx", "aten.zero.default", "aten.zero_.default")
def zero(ctx, node):
    """Zeros in ``self``'s shape and dtype."""
    x = bind(node, "self").self
    st = ctx.dtype(x)
    if dtypes.is_complex(st):
        raise Unsupported("zero_ of a complex tensor")
    cst = ctx.compute_type(st) if st != ST.BOOL else ST.BOOL
    return ctx.cast(ctx.op("ConstantOfShape", ctx.shape_of(x), value=scalar_attr(0, cst)), cst, st)


def _aliasing(view, n) -> bool:
    return views.aliases(view, n) or canonical(n.target) in UNANNOTATED_VIEWS


def _shares_memory(ctx, node, name: str) -> bool:
    """Whether ``name`` is a view (or an in-place result) or has one besides ``node``: the
    view-mutation pass would carry the new shape into those."""
    view = ctx.view
    p = view.producer.get(name)
    if p is not None and _aliasing(view, p):
        return True
    return any(c is not node and c.name != node.name and _aliasing(view, c) for c in view.consumers.get(name, []))


@lowering("onnx", "aten.resize_.default", "aten.resize_as_.default")
def resize_(ctx, node):
    """``self`` in the new shape when that keeps elements torch defined: the same shape, or (``self``
    contiguous from the start of its storage, static shapes) as many elements or fewer: the
    first ones in order. More elements would be uninitialised memory: refused."""
    a = bind(node, "self")
    a.declare("size", "the_template")  # the output's shape
    x, out = a.self, ctx.out_info()
    info = ctx.info(x)
    if tuple(info.shape) == tuple(out.shape):
        return ctx.t(x)
    if not (info.is_static and out.is_static):
        raise Unsupported("resize_ to another shape with dims known only at run time")
    if _shares_memory(ctx, node, x.name):
        raise Unsupported("resize_ to another shape of a tensor that shares memory with another value")
    if not contiguous_at_zero(ctx.view, x.name):
        raise Unsupported("resize_ of a tensor torch did not record as contiguous at the start of its storage")
    n, m = info.numel(), out.numel()
    if m > n:
        raise Unsupported(f"resize_ from {n} to {m} elements (the new ones are uninitialised)")
    r = ctx.t(x)
    if m < n:
        r = ctx.op("Slice", ctx.op("Reshape", r, ctx.ints([-1])), ctx.ints([0]), ctx.ints([m]), ctx.ints([0]))
    # a 0 in the shape is a size, not "copy the input's dim", where there are no elements
    return ctx.op("Reshape", r, ctx.const(np.asarray(out.shape, np.int64).reshape(-1), ST.LONG),
                  allowzero=1 if m == 0 else None)
