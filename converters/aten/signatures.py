"""Operator signatures: what arguments and outputs each operator a converter lowers has.

Lowerings read a node's arguments by schema name (``args.bind``) and its outputs by
position, and trust their kinds: ``self`` is a tensor, ``dim`` an int, ``dims`` a list.
A program can say anything, so ``precheck`` compares every node with the signature of
its target before any lowering runs. Signatures of ATen operators are torch's own
(``torch.ops.aten.<op>.<overload>._schema``) for every ATen target any backend lowers,
written into ``_signature_table.py`` by ``scripts/gen_signature_table.py`` (run it with
torch installed after adding lowerings; a test fails when the table is stale). SymInt
arithmetic (``_operator.*``, ``torch.sym_*``, ``math.*``) and higher-order operators
have no torch schema and are declared below
(``Graph`` is a subgraph argument, ``Value[]`` a list of operands, ``Any`` is not checked,
``...`` after the arguments allows more of them, and as the return means "as many as the
subgraphs say", which ``precheck`` checks per operator).

A signature line reads ``Tensor self, Tensor other, *, Scalar alpha= -> Tensor``: argument
types in torch's spelling with ``SymInt``/``SymFloat``/``SymBool`` folded into
``int``/``float``/``bool``, fixed list sizes dropped (``int[2]`` -> ``int[]``), ``=`` and torch's
default value after an argument that has one (a Python literal: number, bool, string, None or
a list of those, lists at their declared length: ``int[2] padding=[0, 0]``; ``<object>`` for a
torch object such as a memory format, which is not filled in), ``*`` starting the keyword-only
arguments; returns after ``->``, comma-separated, ``()`` for none. ``args.bind`` fills every
argument a node leaves out with its default from here, so lowerings do not restate them.

Only torch's own serializer is modelled, leniently: it writes each argument by its Python
value, so a ``Tensor`` argument may be a number (``x + 2``), an ``int[]`` a single int, a
``float`` an int. Arguments a newer torch adds are unknown here and not checked.
"""

from __future__ import annotations

import ast
import functools
from dataclasses import dataclass, field

__all__ = ["Param", "OpSignature", "signature", "EXTRA_SIGNATURES", "OBJECT_DEFAULT", "NO_DEFAULT"]


class _Marker:
    __slots__ = ("_text",)

    def __init__(self, text: str):
        self._text = text

    def __repr__(self):
        return self._text


OBJECT_DEFAULT = _Marker("<object>")
"""The default of an argument whose default is a torch object (``MemoryFormat memory_format=<object>``)."""
NO_DEFAULT = _Marker("NO_DEFAULT")
"""The default of an argument that has none."""


@dataclass(frozen=True, slots=True)
class Param:
    """One declared argument: its schema name, type spelling, whether it is keyword-only, and
    its default (``NO_DEFAULT`` when it has none, ``OBJECT_DEFAULT`` for a torch object)."""

    name: str
    type: str
    kwarg_only: bool
    default: object = NO_DEFAULT

    @property
    def has_default(self) -> bool:
        return self.default is not NO_DEFAULT


@dataclass(frozen=True, slots=True)
class OpSignature:
    """A target's arguments and the type spellings of its returns; ``defaults`` maps each
    argument whose default is literal data to that value.

    ``variadic`` (higher-order wrappers) allows any number of arguments after the declared ones."""

    target: str
    params: tuple[Param, ...]
    returns: tuple[str, ...]
    variadic: bool = False
    positional: tuple[Param, ...] = field(init=False, compare=False, repr=False)
    _by_name: dict = field(init=False, compare=False, repr=False)

    defaults: dict = field(init=False, compare=False, repr=False)

    def __post_init__(self):
        object.__setattr__(self, "positional", tuple(p for p in self.params if not p.kwarg_only))
        object.__setattr__(self, "_by_name", {p.name: p for p in self.params})
        object.__setattr__(self, "defaults", {p.name: p.default for p in self.params
                                              if p.has_default and p.default is not OBJECT_DEFAULT})

    def param(self, name: str) -> Param | None:
        return self._by_name.get(name)


# Targets torch writes without an operator schema. Higher-order operators take their
# arguments unnamed, by position.
EXTRA_SIGNATURES: dict[str, str] = {
    **{f"_operator.{op}": "Scalar a, Scalar b -> Scalar"
       for op in ("add", "sub", "mul", "pow", "floordiv", "mod", "truediv", "eq", "ne", "lt", "le", "gt", "ge",
                  "and_", "or_")},
    "_operator.neg": "Scalar a -> Scalar",
    "_operator.not_": "Scalar a -> Scalar",
    "_operator.getitem": "Any a, int b -> Any",
    "torch.sym_not": "Scalar a -> Scalar",
    "torch.sym_float": "Scalar a -> Scalar",
    "torch.sym_int": "Scalar a -> Scalar",
    "torch.sym_sqrt": "Scalar a -> Scalar",
    "torch.sym_max": "Scalar a, Scalar b -> Scalar",
    "torch.sym_min": "Scalar a, Scalar b -> Scalar",
    "torch.sym_ite": "Scalar b, Scalar t, Scalar f -> Scalar",
    "math.floor": "Scalar a -> Scalar",
    "math.ceil": "Scalar a -> Scalar",
    "math.trunc": "Scalar a -> Scalar",
    "higher_order.cond": "Tensor pred, Graph true_fn, Graph false_fn, Value[] operands -> ...",
    "higher_order.while_loop":
        "Graph cond_fn, Graph body_fn, Value[] carried_inputs, Value[] additional_inputs=[] -> ...",
    "higher_order.map_impl": "Graph f, Value[] xs, Value[] pos_args=[] -> ...",
    "higher_order.wrap_with_set_grad_enabled": "bool enabled, Graph body, ... -> ...",
    "higher_order.wrap_with_autocast":
        "Any device_type, Any dtype, Any enabled, Any cache_enabled, Graph body, ... -> ...",
}
"""Signatures of targets that have no torch operator schema (see the module docstring)."""


def _split_top_level(target: str, text: str) -> list[str]:
    """``text`` split at the commas outside brackets and quotes."""
    parts, depth, quote, start = [], 0, "", 0
    for i, ch in enumerate(text):
        if quote:
            quote = "" if ch == quote and text[i - 1] != "\\" else quote
        elif ch in "'\"":
            quote = ch
        elif ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    if depth or quote:
        raise ValueError(f"{target}: unbalanced brackets or quotes in {text!r}")
    parts.append(text[start:])
    return parts


_LITERAL_TYPES = (int, float, bool, str, type(None))


def _default(target: str, text: str):
    """One default's spelling as its value: ``<object>`` or a literal (never evaluated as code)."""
    if text == "<object>":
        return OBJECT_DEFAULT
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError):
        raise ValueError(f"{target}: default {text!r} is not literal data") from None
    items = value if isinstance(value, list) else [value]
    if not all(isinstance(v, _LITERAL_TYPES) for v in items):
        raise ValueError(f"{target}: default {text!r} is not a number, bool, string, None or list of those")
    return value


def _param(target: str, part: str, kwarg_only: bool) -> Param:
    typ, _, rest = part.partition(" ")
    name, eq, default = rest.partition("=")
    if not typ or not name.isidentifier():
        raise ValueError(f"{target}: argument {part!r} is not 'type name[=default]'")
    return Param(name, typ, kwarg_only, _default(target, default) if eq else NO_DEFAULT)


def parse_line(target: str, line: str) -> OpSignature:
    """One signature line (``Tensor self, *, Scalar alpha=1 -> Tensor``) as an ``OpSignature``."""
    args, _, rets = line.partition(" -> ")
    params, kwarg_only, variadic = [], False, False
    for part in (p.strip() for p in _split_top_level(target, args)):
        if not part:
            continue
        if part == "*":
            kwarg_only = True
            continue
        if part == "...":
            variadic = True
            continue
        params.append(_param(target, part, kwarg_only))
    rets = rets.strip()
    returns = () if rets in ("()", "") else tuple(r.strip() for r in rets.split(","))
    return OpSignature(target, tuple(params), returns, variadic)


@functools.lru_cache(maxsize=None)
def signature(target: str) -> OpSignature | None:
    """The signature of a canonical target (``aten.add.Tensor``), or None when unknown
    (custom operators, ATen operators no backend lowers)."""
    line = EXTRA_SIGNATURES.get(target)
    if line is None:
        from ._signature_table import TABLE

        line = TABLE.get(target)
    return None if line is None else parse_line(target, line)
