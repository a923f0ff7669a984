"""Operator signatures: what arguments and outputs each operator a converter lowers has.

Lowerings read a node's arguments by schema name (``args.bind``) and its outputs by
position, and trust their kinds: ``self`` is a tensor, ``dim`` an int, ``dims`` a list.
A program can say anything, so ``precheck`` compares every node with the signature of
its target before any lowering runs. Signatures of ATen operators are torch's own
(``torch.ops.aten.<op>.<overload>._schema``) for every ATen target any backend lowers,
written by this module's ``main`` into ``_signature_table.py`` (run
``python -m pt2x.converters.signatures`` with torch installed after adding lowerings; a
test fails when the table is stale). SymInt arithmetic (``_operator.*``, ``torch.sym_*``,
``math.*``) and higher-order operators have no torch schema and are declared below
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

__all__ = ["Param", "OpSignature", "signature", "EXTRA_SIGNATURES", "main"]


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


# ------------------------------------------------------------------- table generation


def _spell(t) -> str:
    """A torch JIT type as this module's spelling."""
    import torch

    if isinstance(t, torch.OptionalType):
        return _spell(t.getElementType()) + "?"
    if isinstance(t, torch.ListType):
        return _spell(t.getElementType()) + "[]"
    if isinstance(t, torch.NumberType):
        return "Scalar"
    if isinstance(t, torch.TensorType):
        return "Tensor"
    if isinstance(t, (torch.IntType, torch.SymIntType)):
        return "int"
    if isinstance(t, torch.FloatType):
        return "float"
    if isinstance(t, (torch.BoolType, torch.SymBoolType)):
        return "bool"
    if isinstance(t, torch.StringType):
        return "str"
    return str(t).replace(" ", "")


def _line(schema) -> str:
    args, kw = [], False
    for a in schema.arguments:
        if a.kwarg_only and not kw:
            args.append("*")
            kw = True
        args.append(f"{_spell(a.real_type)} {a.name}{'=' if a.has_default_value() else ''}")
    rets = ", ".join(_spell(r.real_type) for r in schema.returns) or "()"
    return f"{', '.join(args)} -> {rets}"


def generate(targets) -> dict[str, str]:
    """Signature lines from torch's schemas for each ``aten.`` target of ``targets``."""
    import torch

    out = {}
    for t in sorted(set(targets)):
        if not t.startswith("aten."):
            continue
        _, name, overload = t.split(".")
        try:
            op = getattr(getattr(torch.ops.aten, name), overload)
        except (AttributeError, RuntimeError):  # an overload this torch release does not have
            continue
        out[t] = _line(op._schema)
    return out


def render(table: dict[str, str], torch_version: str) -> str:
    lines = [
        f'"""Generated by ``python -m pt2x.converters.signatures`` from torch {torch_version}: do not edit.',
        "",
        "Signature lines of every ATen target a converter lowers (see ``signatures.py``).",
        '"""',
        "",
        "TABLE = {",
    ]
    lines += [f"    {k!r}: {v!r}," for k, v in sorted(table.items())]
    lines.append("}")
    return "\n".join(lines) + "\n"


def lowered_targets() -> list[str]:
    """Every target registered by the converters shipped with pt2x."""
    from . import registry
    from .onnx.converter import _load_lowerings

    _load_lowerings()
    return sorted({t for backend in list(registry._TABLES) for t in registry.targets(backend)})


def main(argv=None) -> int:
    """Regenerate ``_signature_table.py`` (``--check``: exit 1 when it is stale)."""
    import argparse
    import os

    import torch

    p = argparse.ArgumentParser(description=main.__doc__)
    p.add_argument("--check", action="store_true")
    args = p.parse_args(argv)
    text = render(generate(lowered_targets()), torch.__version__.split("+")[0])
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_signature_table.py")
    current = ""
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            current = f.read()
    if args.check:
        if current != text:
            print(f"{path} is stale: run python -m pt2x.converters.signatures")
            return 1
        return 0
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
