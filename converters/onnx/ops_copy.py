"""Copies and casts: the identities (clone, contiguous, detach, eval-mode dropout, ...),
``_to_copy``/``to`` (a Cast, or a folded constant) and ``copy``."""

from __future__ import annotations

from ..aten import dtypes
from ..aten.args import bind
from ..aten.dtypes import ST
from ..aten.registry import lowering
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
