"""ATen operators that are other ATen operators: written once here, for every target.

* ``RENAMES``: an overload whose schema is another's apart from the name (``divide.Tensor`` is
  ``div.Tensor``, ``broadcast_to`` is ``expand``): the other's lowering runs on the node
  re-targeted (same arguments; ``tests/converters/test_aliases.py`` checks the schemas with torch).
* ``REWRITES``: an overload that is another with other arguments (``square(x)`` is
  ``pow(x, 2)``): a function of the node (and its graph) returns the node to lower instead. It
  binds the node's arguments it uses (so the node's own unread-argument check sees them) and
  the new node's lowering is checked in turn (``reads.call``).
* ``refuse_if_written``: some ops return views (or ``self``) though torch's schema does not say
  so (``UNANNOTATED_VIEWS``: ``unsafe_split``, ``atleast_Nd``, ``broadcast_tensors``, ...); their
  lowerings refuse a node whose memory an in-place op writes afterwards.

``registry.get`` derives the lowering of an alias for any backend that lowers its target, after
the registered lowerings and the in-place overloads (this module adds its deriver when imported:
``lower.py`` imports it); an explicit registration wins.
The signature table holds the aliases' own schemas (``scripts/gen_signature_table.py``
reads ``targets()``), so ``precheck`` and ``bind`` treat their nodes as any other.
"""

from __future__ import annotations

import dataclasses
from typing import Callable

from ...schema import definitions as d
from ..errors import Unsupported
from . import registry, views
from .args import bind
from .graph import GraphView, first_input, input_names
from .reads import call

__all__ = ["RENAMES", "REWRITES", "UNANNOTATED_VIEWS", "targets", "base_of", "derived", "refuse_if_written"]

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
    # the *_copy overloads are their views' values (a copy, which no later write aliases)
    "aten.view_copy.default": "aten.view.default",
    "aten.t_copy.default": "aten.t.default",
    "aten.transpose_copy.int": "aten.transpose.int",
    "aten.unbind_copy.int": "aten.unbind.int",
    "aten.squeeze_copy.default": "aten.squeeze.default",
    "aten.squeeze_copy.dim": "aten.squeeze.dim",
    "aten.narrow_copy.default": "aten.narrow.default",
    "aten.matrix_H.default": "aten.mH.default",  # of a 2-D tensor
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


def _flip(dim: int) -> Callable[[d.Node, GraphView], d.Node]:
    def rewrite(node: d.Node, view: GraphView) -> d.Node:
        """``fliplr(x)`` -> ``flip(x, [1])``, ``flipud(x)`` -> ``flip(x, [0])``."""
        bind(node, "self").declare("self")
        return dataclasses.replace(node, target="aten.flip.default",
                                   inputs=[node.inputs[0], _named("dims", d.Argument(as_ints=[dim]))])

    return rewrite


def _ravel(node: d.Node, view: GraphView) -> d.Node:
    """``ravel(x)`` -> ``view(x, [-1])`` (a 0-d tensor becomes one element)."""
    bind(node, "self").declare("self")
    return dataclasses.replace(node, target="aten.view.default",
                               inputs=[node.inputs[0], _named("size", d.Argument(as_ints=[-1]))])


def _rank(node: d.Node, view: GraphView) -> int:
    return view.tensor(node.inputs[0].arg.value.name).rank


def _movedim(node: d.Node, view: GraphView) -> d.Node:
    """``movedim(x, source, destination)`` -> ``permute(x, dims)``: each source dim lands at its
    destination, the others keep their order in the remaining places."""
    a = bind(node, "self", "source", "destination")
    a.declare("self")
    r = _rank(node, view)
    n = max(r, 1)  # a 0-d tensor takes dims 0 and -1
    src = [a.source] if isinstance(a.source, int) else list(a.source)
    dst = [a.destination] if isinstance(a.destination, int) else list(a.destination)
    if len(src) != len(dst) or not all(-n <= x < n for x in src + dst):
        raise Unsupported(f"movedim of source {src} to destination {dst} for rank {r}")
    src, dst = [x % n for x in src], [x % n for x in dst]
    if len(set(src)) != len(src) or len(set(dst)) != len(dst):
        raise Unsupported("movedim with repeated dims")
    perm: list[int | None] = [None] * r  # a 0-d tensor: no dims to move
    for s, t in zip(src, dst):
        if r:
            perm[t] = s
    rest = iter(i for i in range(r) if i not in src)
    perm = [next(rest) if p is None else p for p in perm]
    return dataclasses.replace(node, target="aten.permute.default",
                               inputs=[node.inputs[0], _named("dims", d.Argument(as_ints=perm))])


def _split_dim(op: str, node: d.Node, view: GraphView) -> int:
    r = _rank(node, view)
    need = {"hsplit": 1, "vsplit": 2, "dsplit": 3}[op]
    if r < need:
        raise Unsupported(f"{op} of a {r}-d tensor")
    return {"hsplit": 0 if r == 1 else 1, "vsplit": 0, "dsplit": 2}[op]


def _hvdsplit(op: str, by: str) -> Callable[[d.Node, GraphView], d.Node]:
    def rewrite(node: d.Node, view: GraphView) -> d.Node:
        """``hsplit``/``vsplit``/``dsplit`` -> ``tensor_split`` along dim 1 (0 for 1-d), 0, 2."""
        bind(node, "self", by).declare("self", by)
        dim = _split_dim(op, node, view)
        target = "aten.tensor_split.sections" if by == "sections" else "aten.tensor_split.indices"
        arg = next(na.arg for na in node.inputs if na.name == by)
        return dataclasses.replace(node, target=target, inputs=[
            node.inputs[0], _named(by, arg), _named("dim", d.Argument(as_int=dim))])

    return rewrite


UNANNOTATED_VIEWS = frozenset({
    "aten.unsafe_split.Tensor", "aten.unsafe_split_with_sizes.default", "aten.unsafe_chunk.default",
    "aten.atleast_1d.default", "aten.atleast_2d.default", "aten.atleast_3d.default", "aten.atleast_1d.Sequence",
    "aten.atleast_2d.Sequence", "aten.atleast_3d.Sequence", "aten.broadcast_tensors.default",
    "aten.sum_to_size.default"})
"""Ops whose results share their input's memory (all or some of the time: ``sum_to_size`` to the
same shape is ``self``) though torch's schema does not say so: the view-mutation pass
(``views.py``) would not carry a write through them (``refuse_if_written``)."""


def _storage_root(view: GraphView, name: str) -> str:
    seen = set()
    while name not in seen:
        seen.add(name)
        p = view.producer.get(name)
        if p is None or not (views.aliases(view, p) or registry.canonical(p.target) in UNANNOTATED_VIEWS):
            return name
        name = first_input(p) or name
    return name


def refuse_if_written(view: GraphView, node: d.Node) -> None:
    """Refuse ``node`` (one of ``UNANNOTATED_VIEWS``) when an in-place op after it writes into memory
    its inputs or outputs share: the write would not reach its results, or its results' writes
    their inputs."""
    roots = {_storage_root(view, x) for x in input_names(node)}
    nodes = view.nodes
    at = next((i for i, n in enumerate(nodes) if n is node or (node.name and n.name == node.name)), -1)
    after = nodes[at + 1:]  # all of them where the node is not found
    for n in after:
        target = registry.canonical(n.target)
        if registry.is_inplace(target) and first_input(n) is not None and _storage_root(view, first_input(n)) in roots:
            raise Unsupported(f"{target} writes into memory that {registry.canonical(node.target)} returns a view of")


def _unsafe(base: str) -> Callable[[d.Node, GraphView], d.Node]:
    def rewrite(node: d.Node, view: GraphView) -> d.Node:
        """``unsafe_split``/``unsafe_chunk`` -> ``split``/``chunk`` unless a write goes through a piece."""
        bind(node).declare(*[na.name for na in node.inputs])  # the same arguments, read by the base's lowering
        refuse_if_written(view, node)
        return dataclasses.replace(node, target=base)

    return rewrite


def _empty_permuted(node: d.Node, view: GraphView) -> d.Node:
    """``empty_permuted(size, physical_layout, ...)`` -> ``empty(size, ...)``: the layout is the
    strides'; the values are unspecified either way."""
    bind(node, "size", "physical_layout").declare("size", "physical_layout", "dtype", "layout")
    return dataclasses.replace(node, target="aten.empty.memory_format",
                               inputs=[na for na in node.inputs if na.name != "physical_layout"])


REWRITES: dict[str, tuple[str, Callable[[d.Node, GraphView], d.Node]]] = {
    "aten.square.default": ("aten.pow.Tensor_Scalar", _square),
    "aten.exp2.default": ("aten.pow.Scalar", _exp2),
    "aten.fliplr.default": ("aten.flip.default", _flip(1)),
    "aten.flipud.default": ("aten.flip.default", _flip(0)),
    "aten.ravel.default": ("aten.view.default", _ravel),
    "aten.movedim.intlist": ("aten.permute.default", _movedim),
    "aten.movedim.int": ("aten.permute.default", _movedim),
    "aten.hsplit.int": ("aten.tensor_split.sections", _hvdsplit("hsplit", "sections")),
    "aten.vsplit.int": ("aten.tensor_split.sections", _hvdsplit("vsplit", "sections")),
    "aten.dsplit.int": ("aten.tensor_split.sections", _hvdsplit("dsplit", "sections")),
    "aten.hsplit.array": ("aten.tensor_split.indices", _hvdsplit("hsplit", "indices")),
    "aten.vsplit.array": ("aten.tensor_split.indices", _hvdsplit("vsplit", "indices")),
    "aten.dsplit.array": ("aten.tensor_split.indices", _hvdsplit("dsplit", "indices")),
    "aten.empty_permuted.default": ("aten.empty.memory_format", _empty_permuted),
    # the unsafe_ splits differ from theirs only in autograd's view tracking (REWRITES: refuse writes)
    "aten.unsafe_split.Tensor": ("aten.split.Tensor", _unsafe("aten.split.Tensor")),
    "aten.unsafe_split_with_sizes.default": ("aten.split_with_sizes.default", _unsafe("aten.split_with_sizes.default")),
    "aten.unsafe_chunk.default": ("aten.chunk.default", _unsafe("aten.chunk.default")),
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
