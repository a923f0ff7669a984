"""SymInt arithmetic and shape queries, computed in the graph on the fly.

``sym_size.int`` reads a dim with ``Shape``; ``_operator.*`` (how torch spells SymInt
arithmetic in ``Node.target``) become int64 scalar ops. Python semantics are kept:
``//`` floors and ``%`` takes the divisor's sign (ONNX ``Mod`` with fmod=0). Runtime
assertions (``_assert_scalar``, ``sym_constrain_range``) are checked at export time and
carry no data, so they emit nothing.
"""

from __future__ import annotations

import numpy as np

from ..aten.args import SymRef, TensorRef, bind
from ..aten.dtypes import ST
from ..aten.registry import lowering
from ..errors import Unsupported


def _sym_type(ctx, x) -> ST:
    if isinstance(x, SymRef):
        return {"int": ST.LONG, "bool": ST.BOOL, "float": ST.DOUBLE}[x.kind]
    if isinstance(x, TensorRef):
        return ctx.dtype(x)
    if isinstance(x, bool):
        return ST.BOOL
    return ST.LONG if isinstance(x, int) else ST.DOUBLE


def _operands(ctx, node):
    a = bind(node, "a", "b")
    xs = [a[0], a[1]] if len(node.inputs) > 1 else [a[0]]
    sts = [_sym_type(ctx, x) for x in xs]
    st = ST.DOUBLE if ST.DOUBLE in sts else ST.LONG
    return [ctx.t(x, st) for x in xs], st


@lowering("onnx", "aten.sym_size.int")
def sym_size(ctx, node):
    a = bind(node, "self", "dim")
    info = ctx.info(a.self)
    dim = a.dim % info.rank
    if isinstance(info.shape[dim], int):
        return ctx.const(info.shape[dim], ST.LONG)
    return ctx.op("Squeeze", ctx.shape(ctx.t(a.self), dim, dim + 1), ctx.const([0], ST.LONG))


@lowering("onnx", "aten.sym_numel.default")
def sym_numel(ctx, node):
    x = bind(node, "self")[0]
    return ctx.op("Size", ctx.t(x))


@lowering("onnx", "aten.sym_stride.int", "aten.sym_storage_offset.default")
def sym_stride(ctx, node):
    raise Unsupported("strides are not observable in ONNX")


def _binary(op_type):
    def lower(ctx, node):
        (x, y), _ = _operands(ctx, node)
        return ctx.op(op_type, x, y)

    return lower


for _name, _op in [("add", "Add"), ("sub", "Sub"), ("mul", "Mul"), ("pow", "Pow")]:
    lowering("onnx", f"_operator.{_name}")(_binary(_op))


@lowering("onnx", "_operator.floordiv")
def floordiv(ctx, node):
    (x, y), st = _operands(ctx, node)
    if st == ST.DOUBLE:
        return ctx.op("Floor", ctx.op("Div", x, y))
    return ctx.op("Div", ctx.op("Sub", x, ctx.op("Mod", x, y)), y)


@lowering("onnx", "_operator.mod")
def mod(ctx, node):
    (x, y), st = _operands(ctx, node)
    if st == ST.DOUBLE:
        return ctx.op("Sub", x, ctx.op("Mul", ctx.op("Floor", ctx.op("Div", x, y)), y))
    return ctx.op("Mod", x, y)


@lowering("onnx", "_operator.truediv")
def truediv(ctx, node):
    a = bind(node, "a", "b")
    return ctx.op("Div", ctx.t(a[0], ST.DOUBLE), ctx.t(a[1], ST.DOUBLE))


@lowering("onnx", "_operator.neg")
def neg(ctx, node):
    (x,), _ = _operands(ctx, node)
    return ctx.op("Neg", x)


_CMP = {"eq": "Equal", "ne": "Equal", "lt": "Less", "le": "LessOrEqual", "gt": "Greater", "ge": "GreaterOrEqual"}


def _cmp(ctx, node):
    op = node.target.split(".")[-1]
    (x, y), _ = _operands(ctx, node)
    r = ctx.op(_CMP[op], x, y)
    return ctx.op("Not", r) if op == "ne" else r


for _op in _CMP:
    lowering("onnx", f"_operator.{_op}")(_cmp)


@lowering("onnx", "_operator.and_", "_operator.or_")
def and_or(ctx, node):
    a = bind(node, "a", "b")
    return ctx.op("And" if "and" in node.target else "Or", ctx.t(a[0], ST.BOOL), ctx.t(a[1], ST.BOOL))


@lowering("onnx", "_operator.not_", "torch.sym_not")
def not_(ctx, node):
    return ctx.op("Not", ctx.t(bind(node, "a")[0], ST.BOOL))


@lowering("onnx", "torch.sym_max", "torch.sym_min")
def sym_max(ctx, node):
    (x, y), _ = _operands(ctx, node)
    return ctx.op("Max" if "max" in node.target else "Min", x, y)


@lowering("onnx", "torch.sym_float")
def sym_float(ctx, node):
    return ctx.t(bind(node, "a")[0], ST.DOUBLE)


@lowering("onnx", "torch.sym_int", "math.floor", "math.ceil", "math.trunc")
def sym_int(ctx, node):
    x = bind(node, "a")[0]
    v = ctx.t(x, ST.DOUBLE)
    if node.target == "math.ceil":
        v = ctx.op("Ceil", v)
    elif node.target != "math.trunc" and node.target != "torch.sym_int":
        v = ctx.op("Floor", v)
    else:
        v = ctx.op("Mul", ctx.op("Floor", ctx.op("Abs", v)), ctx.op("Sign", v))
    return ctx.cast(v, ST.DOUBLE, ST.LONG)


@lowering("onnx", "torch.sym_sqrt")
def sym_sqrt(ctx, node):
    return ctx.op("Sqrt", ctx.t(bind(node, "a")[0], ST.DOUBLE))


@lowering("onnx", "torch.sym_ite")
def sym_ite(ctx, node):
    a = bind(node, "b", "t", "f")
    st = _sym_type(ctx, a[1])
    return ctx.op("Where", ctx.t(a[0], ST.BOOL), ctx.t(a[1], st), ctx.t(a[2], st))


@lowering("onnx", "aten._local_scalar_dense.default", "aten.item.default")
def item(ctx, node):
    x = bind(node, "self")[0]
    st = ctx.dtype(x)
    to = ST.BOOL if st == ST.BOOL else ST.DOUBLE if st not in (ST.BYTE, ST.CHAR, ST.SHORT, ST.INT, ST.LONG) else ST.LONG
    v = ctx.t(x, to)
    if ctx.rank(x):
        v = ctx.op("Reshape", v, ctx.const(np.zeros(0, np.int64), ST.LONG))
    return v


@lowering("onnx", "aten._assert_scalar.default", "aten._assert_async.msg", "aten._assert_async.default",
          "aten.sym_constrain_range.default", "aten.sym_constrain_range_for_size.default",
          "aten._assert_tensor_metadata.default", "aten._functional_assert_async.msg",
          "aten._functional_sym_constrain_range.default", "aten._functional_sym_constrain_range_for_size.default")
def assertion(ctx, node):
    """Checked by torch at export for the example inputs and by range constraints; no data."""
    bind(node).declare_all()  # the check is dropped, with everything it reads
    return None


@lowering("onnx", "_operator.getitem")
def getitem(ctx, node):
    """``seq[i]`` on a list of tensors or SymInts (torch 2.13 rarely writes it: multi-output
    ops list their outputs directly)."""
    a = bind(node, "a", "b")
    seq, i = a[0], a[1]
    if isinstance(seq, list) and isinstance(i, int):
        return ctx.t(seq[i])
    raise Unsupported("getitem on a tensor or with a symbolic index")
