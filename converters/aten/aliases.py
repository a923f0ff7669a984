"""ATen operators that are other ATen operators: written once here, for every target.

* ``RENAMES``: an overload whose schema is another's apart from the name (``divide.Tensor`` is
  ``div.Tensor``, ``broadcast_to`` is ``expand``): the other's lowering runs on the node
  re-targeted (same arguments; ``tests/converters/test_aliases.py`` checks the schemas with torch).
* ``REWRITES``: an overload that is another with other arguments (``square(x)`` is
  ``pow(x, 2)``): a function of the node (and its graph) returns the node to lower instead. It
  binds the node's arguments it uses (so the node's own unread-argument check sees them) and
  the new node's lowering is checked in turn (``reads.call``).

``registry.get`` derives the lowering of an alias for any backend that lowers its target, after
the registered lowerings and the in-place overloads (this module adds its deriver when imported:
``lower.py`` imports it); an explicit registration wins.
The signature table holds the aliases' own schemas (``tools/scripts/gen_signature_table.py``
reads ``targets()``), so ``precheck`` and ``bind`` treat their nodes as any other.
"""

from __future__ import annotations

import dataclasses
from typing import Callable

from ...schema import definitions as d
from . import registry
from .args import bind
from .graph import GraphView
from .reads import call

__all__ = ["RENAMES", "REWRITES", "targets", "base_of", "derived"]

RENAMES: dict[str, str] = {
    "aten.divide.Tensor": "aten.div.Tensor",
    "aten.divide.Scalar": "aten.div.Scalar",
    "aten.divide.Tensor_mode": "aten.div.Tensor_mode",
    "aten.divide.Scalar_mode": "aten.div.Scalar_mode",
    "aten.subtract.Tensor": "aten.sub.Tensor",
    "aten.subtract.Scalar": "aten.sub.Scalar",
    "aten.multiply.Tensor": "aten.mul.Tensor",
    "aten.multiply.Scalar": "aten.mul.Scalar",
    "aten.broadcast_to.default": "aten.expand.default",
    # float_power is pow computed in float64: its output's dtype (which pow's lowerings compute in)
    "aten.float_power.Tensor_Tensor": "aten.pow.Tensor_Tensor",
    "aten.float_power.Tensor_Scalar": "aten.pow.Tensor_Scalar",
    "aten.float_power.Scalar": "aten.pow.Scalar",
}
"""Alias overload -> the overload it is, same arguments."""


def _named(name: str, arg: d.Argument) -> d.NamedArgument:
    return d.NamedArgument(name=name, arg=arg, kind=d.ArgumentKind.POSITIONAL)


def _square(node: d.Node, view: GraphView) -> d.Node:
    """``square(x)`` -> ``pow.Tensor_Scalar(x, 2)``."""
    bind(node, "self").declare("self")
    return dataclasses.replace(node, target="aten.pow.Tensor_Scalar",
                               inputs=[node.inputs[0], _named("exponent", d.Argument(as_int=2))])


def _exp2(node: d.Node, view: GraphView) -> d.Node:
    """``exp2(x)`` -> ``pow.Scalar(2.0, x)`` (computed in the output's floating dtype)."""
    bind(node, "self").declare("self")
    return dataclasses.replace(node, target="aten.pow.Scalar",
                               inputs=[_named("self", d.Argument(as_float=2.0)),
                                       _named("exponent", node.inputs[0].arg)])


REWRITES: dict[str, tuple[str, Callable[[d.Node, GraphView], d.Node]]] = {
    "aten.square.default": ("aten.pow.Tensor_Scalar", _square),
    "aten.exp2.default": ("aten.pow.Scalar", _exp2),
}
"""Alias overload -> (the overload it becomes, a function of (node, graph) giving that node)."""


def targets() -> list[str]:
    """Every alias overload (for the signature table)."""
    return sorted(set(RENAMES) | set(REWRITES))


def base_of(target: str) -> str | None:
    """The overload whose lowering an alias's is derived from."""
    if target in RENAMES:
        return RENAMES[target]
    return REWRITES[target][0] if target in REWRITES else None

_DERIVED: dict[tuple[str, Callable], Callable] = {}


def derived(target: str, fn: Callable) -> Callable:
    """The lowering of alias ``target`` from ``fn``, the lowering of ``base_of(target)``."""
    key = (target, fn)
    if key not in _DERIVED:
        _DERIVED[key] = _rename(target, fn) if target in RENAMES else _rewrite(target, fn)
    return _DERIVED[key]


def _rename(target: str, fn: Callable) -> Callable:
    base = RENAMES[target]

    def lower(ctx, node, *rest):
        return fn(ctx, dataclasses.replace(node, target=base), *rest)

    lower.__name__ = lower.__qualname__ = f"{getattr(fn, '__name__', 'lowering')}[{target}]"
    return lower


def _rewrite(target: str, fn: Callable) -> Callable:
    rewrite = REWRITES[target][1]

    def lower(ctx, node):
        return call(fn, ctx, rewrite(node, ctx.view))

    lower.__name__ = lower.__qualname__ = f"{getattr(fn, '__name__', 'lowering')}[{target}]"
    return lower


def _derive(target: str, table: dict) -> Callable | None:
    base = base_of(target)
    return derived(target, table[base]) if base is not None and base in table else None


registry.add_deriver(_derive)
