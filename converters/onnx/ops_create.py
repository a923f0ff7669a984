"""Tensor creation: full/zeros/ones(_like), arange, eye, linspace, fill, tril/triu. Small
static results become constants; the rest are ``ConstantOfShape``/``Range`` of runtime shapes."""

from __future__ import annotations

import math

import numpy as np

from ..aten import dtypes
from ..aten.args import SymRef, TensorRef, bind
from ..aten.dtypes import ST
from ..aten.registry import lowering
from ..errors import Unsupported
from .shapes import scalar_attr


def _fill(ctx, shape_name, value, st):
    """A tensor of ``st`` filled with ``value`` (number or SymRef) of a 1-D shape tensor."""
    if isinstance(value, (SymRef, TensorRef)):
        return ctx.op("Expand", ctx.t(value, st), shape_name)
    cst = ctx.compute_type(st) if st in (ST.BFLOAT16,) else st
    r = ctx.op("ConstantOfShape", shape_name, value=scalar_attr(value, cst))
    return ctx.cast(r, cst, st)


@lowering("onnx", "aten.full.default", "aten.zeros.default", "aten.ones.default", "aten.empty.memory_format",
          "aten.empty.default", "aten.new_zeros.default", "aten.new_ones.default", "aten.new_full.default",
          "aten.new_empty.default", "aten.empty_strided.default", "aten.new_empty_strided.default")
def full(ctx, node):
    a = bind(node, fill_value=0)  # size, and self for new_*, by name; zeros/ones/empty have no fill_value
    a.declare("size", "stride", "dtype", "self")  # the output's metadata: its shape and dtype
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
    a = bind(node, "self", fill_value=0)  # zeros_like/ones_like/empty_like have no fill_value
    a.declare("dtype")  # the output's dtype
    out = ctx.out_info()
    name = node.target.split(".")[-2]
    value = {"zeros_like": 0, "ones_like": 1, "empty_like": 0}.get(name, a.fill_value)
    return _fill(ctx, ctx.shape_of(a.self), value, out.dtype)


@lowering("onnx", "aten.scalar_tensor.default")
def scalar_tensor(ctx, node):
    a = bind(node, "s")
    a.declare("dtype")  # the output's dtype
    out = ctx.out_info().dtype
    return ctx.t(a.s, out) if isinstance(a.s, SymRef) else ctx.const(a.s, out)


@lowering("onnx", "aten.arange.default", "aten.arange.start", "aten.arange.start_step")
def arange(ctx, node):
    a = bind(node, start=0, step=1)  # arange.default has no start, arange.start no step
    a.declare("dtype")  # the output's dtype
    if "end" not in a:
        raise Unsupported("arange without end")
    start, end, step = (a.start, a.end, a.step) if "start" in node.target or node.target.endswith("start_step") \
        else (0, a.end, 1)
    out = ctx.out_info()
    cst = ST.FLOAT if out.dtype in (ST.HALF, ST.BFLOAT16) else ST.INT if out.dtype in (ST.BYTE, ST.CHAR, ST.SHORT) \
        else out.dtype
    if out.is_static and all(isinstance(v, (int, float)) for v in (start, end, step)):
        if step == 0:
            raise Unsupported("arange with step 0")
        ctx.reserve_array([max(0, math.ceil((end - start) / step))], 8, "arange")
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
    a = bind(node, "self")
    return ctx.op("Trilu", ctx.t(a.self), ctx.t(a.diagonal, ST.LONG), upper=int("triu" in node.target))


@lowering("onnx", "aten.fill.Scalar", "aten.fill.Tensor", "aten.fill_.Scalar", "aten.fill_.Tensor")
def fill(ctx, node):
    a = bind(node, "self", "value")
    out = ctx.out_info()
    v = a.value
    if isinstance(v, TensorRef):
        return ctx.op("Expand", ctx.t(v, out.dtype), ctx.shape_of(a.self))
    return _fill(ctx, ctx.shape_of(a.self), v, out.dtype)


@lowering("onnx", "aten.eye.default", "aten.eye.m")
def eye(ctx, node):
    bind(node).declare("n", "m", "dtype")  # the output's shape and dtype
    out = ctx.out_info()
    if not out.is_static:
        raise Unsupported("eye of a dynamic size")
    ctx.reserve_array(out.shape, 8, "eye")
    return ctx.const(np.eye(*out.shape), out.dtype)


@lowering("onnx", "aten.linspace.default")
def linspace(ctx, node):
    a = bind(node, "start", "end", "steps")
    out = ctx.out_info()
    if not all(isinstance(v, (int, float)) for v in (a.start, a.end, a.steps)):
        raise Unsupported("linspace with tensor or symbolic bounds")
    ctx.reserve_array([a.steps], 8, "linspace")
    return ctx.const(np.linspace(a.start, a.end, a.steps), out.dtype)
