"""Bind a node's ``NamedArgument``s to Python values by argument name.

torch writes each argument's schema name (``self``, ``other``, ``alpha``) into
``NamedArgument.name`` and leaves out arguments equal to their defaults; ``bind`` fills those
in with torch's default values from the signature table (``signatures.py``), so a lowering
reads every argument by name and states no defaults::

    a = bind(node)                   # a.self, a.other, a.alpha (1 when left out)
    a = bind(node, "self", "dim")    # also a[0], a[1] by schema position

A default a lowering does state (``bind(node, max=None)``) is for an argument the table
cannot fill: one some of the lowering's targets lack, or one whose default is a torch object.

Values are decoded from the ``Argument`` union: tensors as ``TensorRef``, symbolic ints
and bools as ``SymRef`` (or a plain int/bool when static), lists element-wise, graphs as the
schema ``GraphArgument``, ``as_none`` as ``None``. No torch is imported: the defaults are the
generated table's.

Every argument given is read or refused: ``bind`` logs, per node being lowered (``reading``),
which of the node's arguments the lowering asked for (``a.x``, ``a[i]``, ``a.get``, ``a.items``;
``a.declare(...)`` for one it honours without reading its value), and ``reads.call`` refuses the
node when an argument given a non-default value was never asked for.
"""

from __future__ import annotations

import contextlib
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Iterator

from ...schema import definitions as d
from ..errors import Unsupported
from .signatures import NO_DEFAULT, signature

__all__ = ["TensorRef", "SymRef", "decode", "bind", "Bound", "MISSING", "ReadLog", "reading", "input_name"]


@dataclass(frozen=True, slots=True)
class TensorRef:
    """A tensor value of the graph, by name."""

    name: str


@dataclass(frozen=True, slots=True)
class SymRef:
    """A symbolic int/bool/float value of the graph, by name (``kind`` "int"|"bool"|"float")."""

    name: str
    kind: str = "int"


class _Missing:
    def __repr__(self):
        return "MISSING"


MISSING = _Missing()


def _sym(u, kind: str):
    return SymRef(u.value, kind) if u.type == "as_name" else u.value


def _opt_tensor(o: d.OptionalTensorArgument):
    return TensorRef(o.value.name) if o.type == "as_tensor" else None


def decode(arg: d.Argument) -> Any:
    """One ``Argument`` as a Python value (see the module docstring)."""
    t, v = arg.type, arg.value
    if t == "as_none":
        return None
    if t == "as_tensor":
        return TensorRef(v.name)
    if t == "as_tensors":
        return [TensorRef(x.name) for x in v]
    if t == "as_optional_tensors":
        return [_opt_tensor(x) for x in v]
    if t == "as_optional_tensor":
        return _opt_tensor(v)
    if t == "as_sym_int":
        return _sym(v, "int")
    if t == "as_sym_ints":
        return [_sym(x, "int") for x in v]
    if t == "as_sym_bool":
        return _sym(v, "bool")
    if t == "as_sym_bools":
        return [_sym(x, "bool") for x in v]
    if t == "as_sym_float":
        return _sym(v, "float")
    if t == "as_sym_floats":
        return [_sym(x, "float") for x in v]
    if t == "as_complex":
        return complex(v.real, v.imag)
    if t == "as_string_to_argument":
        return {k: decode(a) for k, a in v.items()}
    # as_int(s), as_float(s), as_bool(s), as_string(s), as_scalar_type, as_memory_format,
    # as_layout, as_device, as_graph, as_custom_obj, as_operator, as_int_lists, ...
    return v


class Bound:
    """A node's arguments by name (attribute or ``[]``), with the lowering's defaults; records
    which of the node's given arguments (by input position) the lowering asked for."""

    __slots__ = ("_node", "_values", "_order", "_positional", "_given", "_defaults", "_read", "_pos_index")

    def __init__(self, node: d.Node, values: dict, order: tuple, positional: list, given: dict, defaults: dict):
        self._node, self._values, self._order, self._positional = node, values, order, positional
        self._given = given  # argument name -> its position in node.inputs
        self._defaults = defaults  # the defaults in effect (the table's, else the lowering's)
        self._read: set[int] = set()  # positions in node.inputs asked for
        self._pos_index = [i for i, na in enumerate(node.inputs) if na.kind != d.ArgumentKind.KEYWORD]

    def _mark(self, name: str) -> None:
        i = self._given.get(name)
        if i is not None:
            self._read.add(i)

    def __getattr__(self, name: str):
        self._mark(name)
        try:
            return self._values[name]
        except KeyError:
            raise Unsupported(f"{self._node.target}: argument {name!r} missing and has no default") from None

    def __getitem__(self, key):
        if isinstance(key, int):
            # torch writes positional arguments first, in schema order, omitting only trailing defaults
            if 0 <= key < len(self._positional):
                self._read.add(self._pos_index[key])
                return self._positional[key]
            return getattr(self, self._order[key])
        return getattr(self, key)

    def __contains__(self, name: str) -> bool:
        return name in self._values

    def get(self, name: str, default=None):
        self._mark(name)
        return self._values.get(name, default)

    def items(self):
        self._read.update(self._given.values())
        return self._values.items()

    def declare(self, *names: str) -> None:
        """The lowering honours these arguments without reading their values (the output's
        metadata carries a ``dtype``; a flag changes no value): they count as read."""
        for name in names:
            self._mark(name)

    def declare_all(self) -> None:
        """Every argument counts as read (a lowering that drops the node: a run-time check)."""
        self._read.update(self._given.values())

    def default_of(self, name: str):
        """The default in effect for ``name`` (``NO_DEFAULT`` when none)."""
        return self._defaults.get(name, NO_DEFAULT)

    def __repr__(self):
        return f"Bound({self._values})"


@dataclass
class ReadLog:
    """The ``Bound``s made for the node being lowered (``reading``)."""

    bounds: list[Bound] = field(default_factory=list)

    def read(self, node: d.Node) -> set[int]:
        """Positions in ``node.inputs`` some ``Bound`` of ``node`` was asked for (not of a node the
        lowering looked at, such as a producer; a re-targeted copy of ``node`` shares its inputs)."""
        return set().union(*(b._read for b in self.of(node)))

    def of(self, node: d.Node) -> list[Bound]:
        return [b for b in self.bounds if b._node.inputs is node.inputs]


_LOG: ContextVar[ReadLog | None] = ContextVar("pt2x_argument_reads", default=None)


@contextlib.contextmanager
def reading() -> Iterator[ReadLog]:
    """Log the ``bind`` calls made until exit (one node's lowering; nested for a subgraph's nodes)."""
    log = ReadLog()
    token = _LOG.set(log)
    try:
        yield log
    finally:
        _LOG.reset(token)


def input_name(na: d.NamedArgument, i: int, order: tuple = ()) -> str:
    """The name ``bind`` gives input ``i``: its schema name, else ``order[i]``, else ``arg{i}``."""
    return na.name or (order[i] if i < len(order) else f"arg{i}")


def _table_defaults(target: str) -> dict:
    """torch's default values of ``target``'s arguments (none for a target the table lacks)."""
    sig = signature(target[len("torch.ops."):] if target.startswith("torch.ops.") else target)
    if sig is None:
        return {}
    return {k: list(v) if isinstance(v, list) else v for k, v in sig.defaults.items()}


def bind(node: d.Node, *order: str, **defaults) -> Bound:
    """The node's arguments by name. ``order`` names the schema's positional arguments (for
    ``[i]`` access falls back to them; ``[i]`` is the i-th positional argument as written, which
    is what higher-order ops with empty names need). What torch left out takes torch's default
    (the signature table's), else the lowering's ``defaults`` (see the module docstring).
    Unnamed arguments take the name at their position in ``order``."""
    values = {**defaults, **_table_defaults(node.target)}
    in_effect = dict(values)
    positional, given = [], {}
    for i, na in enumerate(node.inputs):
        name = input_name(na, i, order)
        given[name] = i
        v = values[name] = decode(na.arg)
        if na.kind != d.ArgumentKind.KEYWORD:
            positional.append(v)
    bound = Bound(node, values, order, positional, given, in_effect)
    log = _LOG.get()
    if log is not None:
        log.bounds.append(bound)
    return bound
