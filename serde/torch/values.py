"""Torch values -> schema values: enum tables, symbolic values, tensor metadata.

Value-level conversions shared by the export bridge; nothing here knows about graphs.
Torch is imported lazily (``tables()`` builds the torch-keyed tables once, from ``ops``'
schema-keyed ones).

Symbolic expressions are printed as torch prints them: ``sympy.srepr`` of the
expression for ``SymExpr.expr_str`` (e.g. ``Symbol('s77', positive=True, integer=True)``),
``str`` of the symbol for range-constraint keys.
"""

from __future__ import annotations

import functools

from ...schema import definitions as d


class Tables:
    def __init__(self):
        import torch

        from . import ops

        self.torch = torch
        # the bridge's enum tables (schema -> torch, ``ops``) read the other way
        self.dtype = {v: k for k, v in ops.DTYPES.items()}
        self.layout = {v: k for k, v in ops.LAYOUTS.items()}
        self.memory_format = {v: k for k, v in ops.MEMORY_FORMATS.items()}
        self.sym_ops = ops.SYM_OPS
        from torch.fx.experimental import symbolic_shapes as ss

        self.is_concrete_int = ss.is_concrete_int
        self.is_concrete_float = ss.is_concrete_float
        self.is_concrete_bool = ss.is_concrete_bool
        import sympy

        self.srepr = sympy.srepr
        self.SymInt, self.SymFloat, self.SymBool = torch.SymInt, torch.SymFloat, torch.SymBool
        # (expr, hint) -> SymInt; schema objects are never mutated after creation
        self.sym_int_cache: dict = {}


@functools.cache
def tables() -> Tables:
    return Tables()


# ------------------------------------------------------------------ symbolic values


def _expr_str(s, T: Tables) -> str:
    return T.srepr(s.node.expr if isinstance(s, (T.SymInt, T.SymFloat, T.SymBool)) else s)


def sym_int(s, T: Tables) -> d.SymInt:
    if type(s) is int:
        return d.SymInt(as_int=s)
    node = getattr(s, "node", None)
    key = None if node is None else (node.expr, node.hint)
    hit = T.sym_int_cache.get(key) if key is not None else None
    if hit is not None:  # the same symbolic size recurs across most tensors of a graph
        return hit
    if T.is_concrete_int(s):
        out = d.SymInt(as_int=int(s))
    else:
        hint = s.node.hint
        out = d.SymInt(as_expr=d.SymExpr(_expr_str(s, T), None if hint is None else d.SymExprHint(as_int=hint)))
    if key is not None:
        T.sym_int_cache[key] = out
    return out


def sym_float(s, T: Tables) -> d.SymFloat:
    if type(s) is float:
        return d.SymFloat(as_float=s)
    if T.is_concrete_float(s):
        return d.SymFloat(as_float=float(s))
    hint = s.node.hint
    return d.SymFloat(as_expr=d.SymExpr(_expr_str(s, T), None if hint is None else d.SymExprHint(as_float=hint)))


def sym_bool(s, T: Tables) -> d.SymBool:
    if type(s) is bool or T.is_concrete_bool(s):
        return d.SymBool(as_bool=bool(s))
    return d.SymBool(as_expr=d.SymExpr(expr_str=_expr_str(s, T)))


def tensor_meta(t, T: Tables) -> d.TensorMeta:
    dev = t.device
    return d.TensorMeta(
        dtype=T.dtype[t.dtype],
        sizes=[d.SymInt(as_int=s) if type(s) is int else sym_int(s, T) for s in t.shape],
        requires_grad=t.requires_grad,
        device=d.Device(type=dev.type, index=dev.index),
        strides=[d.SymInt(as_int=s) if type(s) is int else sym_int(s, T) for s in t.stride()],
        storage_offset=sym_int(t.storage_offset(), T),
        layout=T.layout[t.layout],
    )


# ------------------------------------------------------------- plain argument values

# exact Python type -> Argument member, for constants that need no graph context
SCALAR_ARGS = {bool: "as_bool", str: "as_string", int: "as_int", float: "as_float"}
# homogeneous lists of exact types -> Argument member (checked in this order)
SCALAR_LISTS = [(bool, "as_bools"), (int, "as_ints"), (float, "as_floats"), (str, "as_strings")]
# element type of an empty list's schema type (torch.JitType class name) -> member
EMPTY_LIST_BY_ELEMENT = {
    "BoolType": "as_bools", "IntType": "as_ints", "FloatType": "as_floats",
    "StringType": "as_strings", "TensorType": "as_tensors",
}
# ConstantArgument values of user inputs -> ConstantValue member
CONSTANT_VALUES = {int: "as_int", bool: "as_bool", str: "as_string", float: "as_float"}


def torch_object_arg(a, T: Tables) -> d.Argument | None:
    """dtype / device / memory_format / layout arguments, else None."""
    torch = T.torch
    if isinstance(a, torch.dtype):
        return d.Argument(as_scalar_type=T.dtype[a])
    if isinstance(a, torch.device):
        return d.Argument(as_device=d.Device(type=a.type, index=a.index))
    if isinstance(a, torch.memory_format):
        return d.Argument(as_memory_format=T.memory_format[a])
    if isinstance(a, torch.layout):
        return d.Argument(as_layout=T.layout[a])
    return None


def constant_value(v) -> d.ConstantValue:
    if v is None:
        return d.ConstantValue(as_none=True)
    member = CONSTANT_VALUES.get(type(v))
    if member is None:
        raise TypeError(f"unsupported constant input {v!r}")
    return d.ConstantValue(**{member: v})
