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


# ----------------------------------------------------------------------- linspace, logspace
#
# torch's CPU kernels: steps 0 is empty, steps 1 is ``start`` (logspace: base ** start, in double);
# else step = (end - start) / (steps - 1) and element i is start + step * i in the first half
# (i < steps // 2) and end - step * (steps - 1 - i) in the second. linspace converts start and end to
# the result's dtype first (an integer result truncates them) and computes an integer result in
# double, as does logspace (base ** that, in double). A float result is computed in its own precision.

_SPACE_DTYPES = (ST.FLOAT, ST.DOUBLE, ST.LONG, ST.INT)


def _space_type(ctx, what: str) -> tuple[ST, ST, bool]:
    """(the result's dtype, the one computed in, whether the result is integral)."""
    out = ctx.out_info().dtype
    if out not in _SPACE_DTYPES:
        raise Unsupported(f"{what} of {out.name}")
    integral = out in (ST.LONG, ST.INT)
    return out, ST.DOUBLE if integral else out, integral


def _halves(steps: int):
    """(i, steps - 1 - i, whether i is in the first half) for i < steps."""
    i = np.arange(steps)
    return i, steps - 1 - i, i < steps // 2


def _space_static(start, end, steps: int, out: ST, cst: ST, integral: bool, base=None) -> np.ndarray:
    """The values torch's kernel gives for number bounds (see above)."""
    np_c = dtypes.to_numpy(cst)
    if integral and not (base is not None and steps == 1):
        start, end = int(start), int(end)  # Scalar.to<int64_t>: truncation
    if steps == 1:
        v = np.asarray([float(base) ** float(start) if base is not None else start], np.float64)
    else:
        s, e = np_c.type(start), np_c.type(end)
        step = (e - s) / np_c.type(steps - 1)
        i, j, first = _halves(steps)
        v = np.where(first, s + step * i.astype(np_c), e - step * j.astype(np_c))
        if base is not None:
            v = np.power(np_c.type(base), v)
    if integral:
        info = np.iinfo(dtypes.to_numpy(out))
        if v.size and not (np.isfinite(v).all() and info.min <= v.min() and v.max() <= info.max):
            raise Unsupported("linspace/logspace values outside the integer result's range")
        v = np.trunc(v)
    return v.astype(dtypes.to_numpy(out))


def _space(ctx, node, log: bool):
    """linspace/logspace, each overload: bounds that are numbers are folded; tensor bounds are
    read at run time and computed as torch's kernel does."""
    a = bind(node, "start", "end", "steps", base=10.0)  # linspace has no base
    a.declare("dtype")  # the result's dtype
    what = "logspace" if log else "linspace"
    out, cst, integral = _space_type(ctx, what)
    steps = a.steps
    if not isinstance(steps, int):
        raise Unsupported(f"{what} with a symbolic number of steps")
    base = float(a.base) if log else None
    ctx.reserve_array([max(steps, 0), 3], 8, what)
    bounds = (a.start, a.end)
    if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in bounds):
        return ctx.const(_space_static(a.start, a.end, steps, out, cst, integral, base), out)
    if not all(isinstance(v, (int, float, TensorRef)) for v in bounds):
        raise Unsupported(f"{what} with symbolic bounds")
    if steps == 0:
        return ctx.const(np.zeros(0), out)
    if steps == 1:  # fill_(start), or fill_(base ** start) computed in double
        if log:
            v = ctx.op("Pow", ctx.const(base, ST.DOUBLE), _bound(ctx, a.start, ST.DOUBLE, False))
            return ctx.cast(ctx.op("Reshape", v, ctx.ints([1])), ST.DOUBLE, out)
        return ctx.cast(ctx.op("Reshape", _bound(ctx, a.start, cst, integral), ctx.ints([1])), cst, out)
    s, e = (_bound(ctx, v, cst, integral) for v in bounds)
    np_c = dtypes.to_numpy(cst)
    step = ctx.op("Div", ctx.op("Sub", e, s), ctx.const(steps - 1, cst))
    i, j, first = _halves(steps)
    lo = ctx.op("Add", s, ctx.op("Mul", step, ctx.const(i.astype(np_c), cst)))
    hi = ctx.op("Sub", e, ctx.op("Mul", step, ctx.const(j.astype(np_c), cst)))
    v = ctx.op("Where", ctx.const(first, ST.BOOL), lo, hi)
    if log:
        v = ctx.op("Pow", ctx.const(base, cst), v)
    return ctx.cast(v, cst, out)  # Cast truncates toward zero, as the kernel's conversion to an integer


def _bound(ctx, v, cst: ST, truncate: bool) -> str:
    """A bound as a 0-d value in ``cst``: a tensor's one element (``.item()``), an integer
    result's truncated first (linspace converts the bounds to the result's dtype)."""
    if not isinstance(v, TensorRef):
        return ctx.const(int(v) if truncate else v, cst)
    if ctx.info(v).numel() != 1:
        raise Unsupported("linspace/logspace with a bound of more than one element")
    x = ctx.op("Reshape", ctx.t(v), ctx.ints([]))
    src = ctx.dtype(v)
    if truncate:  # Cast truncates a float toward zero, as Scalar.to<int64_t>
        return ctx.cast(ctx.cast(x, src, ST.LONG), ST.LONG, cst)
    return ctx.cast(x, src, cst)


for _ov in ("default", "Tensor_Tensor", "Tensor_Scalar", "Scalar_Tensor"):
    lowering("onnx", f"aten.linspace.{_ov}")(lambda ctx, node: _space(ctx, node, False))
    lowering("onnx", f"aten.logspace.{_ov}")(lambda ctx, node: _space(ctx, node, True))


@lowering("onnx", "aten.tril_indices.default", "aten.triu_indices.default")
def tril_indices(ctx, node):
    """The [2, n] row and column indices of a (row x col) matrix's lower (upper) triangle from
    diagonal ``offset``, in row-major order: a constant."""
    a = bind(node, "row", "col", "offset")
    a.declare("dtype")  # the result's dtype
    out = ctx.out_info().dtype
    if not all(isinstance(v, int) for v in (a.row, a.col, a.offset)) or a.row < 0 or a.col < 0:
        raise Unsupported(f"{node.target} with symbolic or negative sizes")
    ctx.reserve_array([2, a.row, a.col], 8, "triangle indices")
    tri = np.tril_indices if "tril" in node.target else np.triu_indices
    rows, cols = tri(a.row, a.offset, a.col)
    return ctx.const(np.stack([rows, cols]).astype(dtypes.to_numpy(out)).reshape(2, -1), out)
