"""Operator signatures: what arguments and outputs each operator a converter lowers has.

Lowerings read a node's arguments by schema name (``args.bind``) and its outputs by
position, and trust their kinds: ``self`` is a tensor, ``dim`` an int, ``dims`` a list.
A program can say anything, so ``precheck`` compares every node with the signature of
its target before any lowering runs. Signatures of ATen operators are torch's own
(``torch.ops.aten.<op>.<overload>._schema``) for every ATen target any backend lowers,
written into ``_signature_table.py`` by ``tools/scripts/gen_signature_table.py`` (run it with
torch installed after adding lowerings; a test fails when the table is stale). SymInt
arithmetic (``_operator.*``, ``torch.sym_*``, ``math.*``) and higher-order operators
have no torch schema and are declared below
(``Graph`` is a subgraph argument, ``Value[]`` a list of operands, ``Any`` is not checked,
``...`` after the arguments allows more of them, and as the return means "as many as the
subgraphs say", which ``precheck`` checks per operator).

A signature line reads ``Tensor self, Tensor other, *, Scalar alpha= -> Tensor``: argument
types in torch's spelling with ``SymInt``/``SymFloat``/``SymBool`` folded into
``int``/``float``/``bool``, fixed list sizes dropped (``int[2]`` -> ``int[]``), ``=`` marking
an argument with a default (the value itself is not needed), ``*`` starting the keyword-only
arguments; returns after ``->``, comma-separated, ``()`` for none.

Only torch's own serializer is modelled, leniently: it writes each argument by its Python
value, so a ``Tensor`` argument may be a number (``x + 2``), an ``int[]`` a single int, a
``float`` an int. Arguments a newer torch adds are unknown here and not checked.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field

__all__ = ["Param", "OpSignature", "signature", "EXTRA_SIGNATURES"]


@dataclass(frozen=True, slots=True)
class Param:
    """One declared argument: its schema name, type spelling, whether it has a default
    and whether it is keyword-only."""

    name: str
    type: str
    has_default: bool
    kwarg_only: bool


@dataclass(frozen=True, slots=True)
class OpSignature:
    """A target's arguments and the type spellings of its returns.

    ``variadic`` (higher-order wrappers) allows any number of arguments after the declared ones."""

    target: str
    params: tuple[Param, ...]
    returns: tuple[str, ...]
    variadic: bool = False
    positional: tuple[Param, ...] = field(init=False, compare=False, repr=False)
    _by_name: dict = field(init=False, compare=False, repr=False)

    def __post_init__(self):
        object.__setattr__(self, "positional", tuple(p for p in self.params if not p.kwarg_only))
        object.__setattr__(self, "_by_name", {p.name: p for p in self.params})

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
        "Graph cond_fn, Graph body_fn, Value[] carried_inputs, Value[] additional_inputs= -> ...",
    "higher_order.map_impl": "Graph f, Value[] xs, Value[] pos_args= -> ...",
    "higher_order.wrap_with_set_grad_enabled": "bool enabled, Graph body, ... -> ...",
    "higher_order.wrap_with_autocast":
        "Any device_type, Any dtype, Any enabled, Any cache_enabled, Graph body, ... -> ...",
}
"""Signatures of targets that have no torch operator schema (see the module docstring)."""


def parse_line(target: str, line: str) -> OpSignature:
    """One signature line (``Tensor self, *, Scalar alpha= -> Tensor``) as an ``OpSignature``."""
    args, _, rets = line.partition(" -> ")
    params, kwarg_only, variadic = [], False, False
    for part in (p.strip() for p in args.split(",")):
        if not part:
            continue
        if part == "*":
            kwarg_only = True
            continue
        if part == "...":
            variadic = True
            continue
        typ, _, name = part.partition(" ")
        params.append(Param(name.rstrip("="), typ, name.endswith("="), kwarg_only))
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
