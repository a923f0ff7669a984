"""Which named values an ``Argument`` refers to: the one walk every checker and converter needs.

A value is a tensor, a SymInt/SymBool/SymFloat, a custom object or a token, named by
a string unique within its graph. Literals (ints, floats, strings, dtypes…) refer to
nothing. Subgraphs (``as_graph``) are returned separately: they are scopes of their own.
"""

from __future__ import annotations

from typing import Iterator

from . import definitions as d

__all__ = ["value_refs", "subgraphs"]

_SINGLE_NAMED = {"as_sym_int": "sym_int", "as_sym_bool": "sym_bool", "as_sym_float": "sym_float"}
_LIST_NAMED = {"as_sym_ints": "sym_int", "as_sym_bools": "sym_bool", "as_sym_floats": "sym_float"}


def value_refs(arg: d.Argument) -> Iterator[tuple[str, str]]:
    """Yield ``(kind, name)`` for every value ``arg`` names; kind is tensor|sym_int|sym_bool|sym_float|custom_obj|token."""
    t, v = arg.type, arg.value
    if t == "as_tensor":
        yield "tensor", v.name
    elif t == "as_tensors":
        for x in v:
            yield "tensor", x.name
    elif t == "as_optional_tensor":
        if v.type == "as_tensor":
            yield "tensor", v.value.name
    elif t == "as_optional_tensors":
        for x in v:
            if x.type == "as_tensor":
                yield "tensor", x.value.name
    elif t == "as_nested_tensors":
        for row in v:
            for x in row:
                yield "tensor", x.name
    elif t in _SINGLE_NAMED:
        if v.type == "as_name":
            yield _SINGLE_NAMED[t], v.value
    elif t in _LIST_NAMED:
        for x in v:
            if x.type == "as_name":
                yield _LIST_NAMED[t], x.value
    elif t == "as_custom_obj":
        yield "custom_obj", v.name
    elif t == "as_string_to_argument":
        for x in v.values():
            yield from value_refs(x)


def subgraphs(arg: d.Argument) -> Iterator[d.GraphArgument]:
    """Yield the subgraphs ``arg`` carries (higher-order ops' branches and bodies)."""
    if arg.type == "as_graph":
        yield arg.value
    elif arg.type == "as_string_to_argument":
        for x in arg.value.values():
            yield from subgraphs(x)


def spec_value(arg) -> tuple[str, str] | None:
    """``(kind, name)`` for a signature spec's ``arg`` (TensorArgument, TokenArgument, CustomObjArgument or Argument)."""
    if isinstance(arg, d.TensorArgument):
        return "tensor", arg.name
    if isinstance(arg, d.TokenArgument):
        return "token", arg.name
    if isinstance(arg, d.CustomObjArgument):
        return "custom_obj", arg.name
    refs = list(value_refs(arg))
    return refs[0] if refs else None
