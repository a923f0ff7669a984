"""Operator names in a .pt2 -> torch callables, and schema enums -> torch values.

A serialized node target is resolved only against:
  * registered operator namespaces: ``torch.ops.<ns>.<op>.<overload>``, where the
    dispatcher must already know ``<ns>::<op>`` (nothing is imported or registered here);
  * higher-order operators torch has registered (``torch.ops.higher_order.<name>``);
  * a fixed table of the Python builtins export graphs use (symbolic arithmetic,
    ``getitem``, ``torch.sym_*``).
No attribute walk over arbitrary modules, no import: anything else is a
``Pt2FormatError`` naming the operator and the node.

Imported lazily by the bridge (imports torch).
"""

from __future__ import annotations

import math
import operator
import re
import sys

import torch

from ...schema import definitions as d
from ...schema import dtypes
from ..errors import Pt2FormatError

__all__ = ["resolve_target", "resolve_meta_func", "DTYPES", "LAYOUTS", "MEMORY_FORMATS", "SYM_OPS"]

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")

# ------------------------------------------------------------------ enum tables

# schema.dtypes' torch-name column as torch objects (the float8s only where this torch has them)
DTYPES: dict[d.ScalarType, torch.dtype] = {
    r.scalar_type: getattr(torch, r.torch_name)
    for r in dtypes.ROWS
    if isinstance(getattr(torch, r.torch_name, None), torch.dtype)
}

LAYOUTS = {
    d.Layout.SparseCoo: torch.sparse_coo,
    d.Layout.SparseCsr: torch.sparse_csr,
    d.Layout.SparseCsc: torch.sparse_csc,
    d.Layout.SparseBsr: torch.sparse_bsr,
    d.Layout.SparseBsc: torch.sparse_bsc,
    d.Layout._mkldnn: torch._mkldnn,  # type: ignore[attr-defined]
    d.Layout.Strided: torch.strided,
}

MEMORY_FORMATS = {
    d.MemoryFormat.ContiguousFormat: torch.contiguous_format,
    d.MemoryFormat.ChannelsLast: torch.channels_last,
    d.MemoryFormat.ChannelsLast3d: torch.channels_last_3d,
    d.MemoryFormat.PreserveFormat: torch.preserve_format,
}

# --------------------------------------------------------------- builtin targets

# Symbolic-value operators (their inputs/outputs are SymInt/SymFloat/SymBool nodes):
# the serialized name is ``f"{fn.__module__}.{fn.__name__}"``.
SYM_OPS = {
    operator.eq, operator.ne, operator.le, operator.ge, operator.lt, operator.gt,
    operator.neg, operator.pos, operator.mul, operator.add, operator.sub,
    operator.floordiv, operator.mod, operator.pow, operator.truediv,
    operator.and_, operator.or_, operator.lshift, operator.rshift,
    math.trunc, torch.sym_not, torch.sym_int, torch.sym_float, torch.sym_ite,
    torch.sym_max, torch.sym_min, torch.sym_sqrt,
}  # fmt: skip

_BUILTINS: dict[str, object] = {f"{fn.__module__}.{fn.__name__}": fn for fn in SYM_OPS}
_BUILTINS["_operator.getitem"] = operator.getitem
_BUILTINS["torch.sym_sqrt"] = torch.sym_sqrt  # older writers used the public name
for _fn in ("sym_not", "sym_int", "sym_float", "sym_ite", "sym_max", "sym_min"):
    _BUILTINS[f"torch.{_fn}"] = getattr(torch, _fn)


def _fail(name: str, why: str, member, path) -> Pt2FormatError:
    return Pt2FormatError(f"operator {name!r} {why}", member=member, path=path)


_FOUND: dict[str, object] = {}


def _lookup_op(name: str):
    """``torch.ops.ns.op.overload`` -> OpOverload / HigherOrderOperator, or a str reason.

    Successes are cached; failures are not (a library may register the op later)."""
    op = _FOUND.get(name)
    if op is None:
        op = _lookup_op_uncached(name)
        if not isinstance(op, str):
            _FOUND[name] = op
    return op


def _lookup_op_uncached(name: str):
    parts = name.split(".")
    if len(parts) < 3 or parts[0] != "torch" or parts[1] != "ops":
        return "is not a registered operator or a known Python builtin"
    rest = parts[2:]
    if not all(_IDENT.match(p) for p in rest):  # dunders (aten.__and__.Tensor) are operators too
        return "has a malformed name"
    ns = rest[0]
    if ns == "higher_order":
        if len(rest) != 2:
            return "is not a registered higher-order operator"
        hop = torch._ops._higher_order_ops.get(rest[1])  # registry of HigherOrderOperator instances
        if hop is None:
            return "is not a registered higher-order operator"
        return hop
    if len(rest) != 3:
        return "is not of the form torch.ops.<namespace>.<op>.<overload>"
    _, op, overload = rest
    schemas = torch._C._jit_get_schemas_for_operator(f"{ns}::{op}")
    if not schemas:
        return f"is not registered with the dispatcher (namespace {ns!r}; load the library defining it first)"
    known = sorted(sc.overload_name or "default" for sc in schemas)
    if overload not in known:
        return f"has no overload {overload!r} (known: {', '.join(known)})"
    return _registered_overload(ns, op, overload)


def _registered_overload(ns: str, op: str, overload: str):
    """The OpOverload of an operator the dispatcher has registered with that overload: only
    ``torch.ops``' operator namespaces are consulted, never a Python attribute of another
    object (the names were checked against the dispatcher's schemas first)."""
    try:
        # Plain getattr: torch.ops caches each packet and overload, and decomposition tables
        # are keyed by those very objects (calling __getattr__ directly would build and cache
        # new ones, replacing torch.ops.aten.<op> for the whole process).
        packet = getattr(getattr(torch.ops, ns), op)
        return getattr(packet, overload)
    except (AttributeError, RuntimeError) as e:
        return f"could not be resolved ({type(e).__name__}: {e})"


def resolve_target(name: str, *, member: str | None = None, path: str | None = None):
    """The torch callable a node target names; ``Pt2FormatError`` if it is not allowed."""
    fn = _BUILTINS.get(name)
    if fn is not None:
        return fn
    if name.startswith("#"):
        raise _fail(name, "is an extension operator (custom serialization handler), which pt2x does not load", member, path)
    res = _lookup_op(name)
    if isinstance(res, str):
        raise _fail(name, res, member, path)
    return res


def resolve_meta_func(name: str):
    """A ``source_fn_stack`` entry's function/class, as torch restores it, or the string itself.

    Only already-imported ``torch`` modules are consulted (``sys.modules``), then one
    attribute that must be a class or builtin/function; nothing is imported.
    """
    if name in _BUILTINS:
        return _BUILTINS[name]
    if name.startswith("torch.ops."):
        res = _lookup_op(name)
        return name if isinstance(res, str) else res
    parts = name.split(".")
    if len(parts) < 2 or parts[0] != "torch" or not all(_IDENT.match(p) for p in parts):
        return name
    mod = sys.modules.get(".".join(parts[:-1]))  # already imported, or not at all
    if mod is None:
        return name
    obj = getattr(mod, "__dict__", {}).get(parts[-1])
    if isinstance(obj, type) or type(obj).__name__ in ("builtin_function_or_method", "function"):
        return obj
    return name
