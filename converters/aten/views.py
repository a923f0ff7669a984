"""Alias analysis for the view-mutation pass: which values share memory with which base, and
how an in-place write through a chain of views is written back to that base.

torch's in-place ops (``aten.fill_.Tensor``, ``aten.add_.Tensor``, ``copy_``, ``index_put_``)
write into their first argument. When that argument is a view (``m[:, 0:2]``, ``x[0]``,
``x.t()``, ``x.view(...)``), the write lands in the base and every other view of it. The
converted model has no memory, so the driver (``lower.py``) rewrites such a write as an
out-of-place update: the op's out-of-place lowering gives the view's new value, and
``write_plan`` says how to put it back, link by link from the written view to its base:

* ``slice``/``narrow`` -> ``aten.slice_scatter``, ``select`` -> ``aten.select_scatter``,
  ``diagonal`` -> ``aten.diagonal_scatter``, a piece of ``split``/``split_with_sizes``/``chunk``
  (static sizes) -> ``slice_scatter``, of ``unbind`` -> ``select_scatter``, any other
  ``as_strided`` -> ``aten.as_strided_scatter`` (its lowering refuses overlapping elements);
* ``transpose``/``t``/``mT``/``numpy_T``/``permute``: the inverse permutation of the new value;
* ``view``/``_unsafe_view``/``unsqueeze``/``squeeze``/``unflatten``/``view_as`` (they keep
  the row-major order of the elements), ``reshape``/``reshape_as``/``flatten``/``contiguous``
  when the recorded layout of their input shows they did not copy (ATen's ``computeStride``;
  one that copied makes a new base), and an ``as_strided`` whose sizes and strides are those
  of contiguous memory over a contiguous input at offset 0: the new value reshaped to the
  source's shape (``aten.view_as``);
* ``alias``/``detach``/``lift_fresh``/``positive``/a ``to`` that keeps the dtype and the outputs
  of earlier in-place ops: the same value.

After the write, ``WritePlan.rederive`` lists the other aliasing nodes of the base whose values
are read later: the driver lowers them again from the updated base (in program order), so
later reads of the base and of every other view see the update.

Whatever cannot be proved is refused (``Unprovable``, naming the link): a write through
``expand`` (overlapping memory), through an aliasing op not listed above, a ``reshape`` whose
input has symbolic non-contiguous strides (it may have copied), a split of a dynamic dim, or a
write inside a ``cond``/``while`` body into a value of the enclosing graph or into the body's
own inputs. A write nothing can observe (its base is made in this graph and no other alias is
read afterwards) needs no plan.

Layouts are read from the strides and storage offsets torch recorded for each value
(``layouts.py``).
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass

from ...schema import definitions as d
from ...schema.walk import value_refs
from . import registry
from .args import bind
from .graph import GraphView, first_input, input_names, output_names
from .layouts import reshape_is_view, strided_reshape

__all__ = ["Link", "WritePlan", "Unprovable", "write_plan", "write_node", "link", "aliases"]


class Unprovable(Exception):
    """The aliasing of a write cannot be proved; ``reason`` names the link."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


# ------------------------------------------------------------------ the link table

_IDENTITY = frozenset({"aten.alias.default", "aten.detach.default", "aten.lift_fresh.default",
                       "aten.positive.default", "aten.resolve_conj.default", "aten.resolve_neg.default",
                       "aten.to.dtype", "aten.to.dtype_layout", "aten.to.device", "aten.to.other",
                       "aten.to.prim_dtype", "aten.to.prim_Device", "aten.to.prim_other"})
_RESHAPE = frozenset({"aten.view.default", "aten._unsafe_view.default", "aten.unsqueeze.default",
                      "aten.squeeze.default", "aten.squeeze.dim", "aten.squeeze.dims", "aten.unflatten.int",
                      "aten.view_as.default"})
# reshape-type ops that copy when their input's layout does not allow a view
_RESHAPE_OR_COPY = frozenset({"aten.reshape.default", "aten.reshape_as.default", "aten.flatten.using_ints",
                              "aten.contiguous.default"})
_PERMUTE = frozenset({"aten.permute.default", "aten.transpose.int", "aten.t.default", "aten.mT.default",
                      "aten.numpy_T.default"})
# ops whose outputs are pieces of their input -> the argument that sizes the pieces (unbind: none)
_PIECES = {"aten.split.Tensor": "split_size", "aten.split_with_sizes.default": "split_sizes",
           "aten.chunk.default": "chunks", "aten.unbind.int": None}
# write-backs that are views of the new value (``self``), not scatters into the old source
_INVERSE_VIEWS = frozenset({"aten.view_as.default", "aten.permute.default", "aten.transpose.int", "aten.t.default"})
_SCATTER_OF = {"aten.slice.Tensor": "aten.slice_scatter.default", "aten.narrow.default": "aten.slice_scatter.default",
               "aten.select.int": "aten.select_scatter.default",
               "aten.diagonal.default": "aten.diagonal_scatter.default"}


@dataclass(frozen=True)
class Link:
    """One step of a view chain: ``node`` made ``value`` from ``source``. ``write`` is how a
    new ``value`` is put back into ``source``: ``None`` (the same value), or the synthetic
    node's target and its arguments after ``self``/``src`` (see ``write_node``)."""

    node: d.Node
    source: str
    value: str
    write: tuple | None  # (target, [NamedArgument, ...]) or None for an identity link


@dataclass(frozen=True)
class WritePlan:
    """How an in-place write to ``written`` reaches ``base`` (``chain``: base side first) and
    which earlier aliasing nodes to lower again afterwards (``rederive``, program order)."""

    written: str
    base: str
    chain: tuple[Link, ...]
    rederive: tuple[d.Node, ...]


def _tensor_arg(name: str) -> d.Argument:
    return d.Argument(as_tensor=d.TensorArgument(name=name))


def _named(name: str, arg: d.Argument) -> d.NamedArgument:
    return d.NamedArgument(name=name, arg=arg, kind=d.ArgumentKind.POSITIONAL)


def write_node(link: Link, origin: d.Node) -> d.Node:
    """The node computing ``link.source``'s new contents from its old ones and the new
    ``link.value`` (the driver's ``env`` holds both under those names while it lowers it). Its
    output is named ``link.source``: it has that value's dtype and shape."""
    target, rest = link.write
    if target in _INVERSE_VIEWS:
        ins = [_named("self", _tensor_arg(link.value)), *rest]
        if target == "aten.view_as.default":
            ins.append(_named("other", _tensor_arg(link.source)))
    else:
        ins = [_named("self", _tensor_arg(link.source)), _named("src", _tensor_arg(link.value)), *rest]
    return d.Node(target=target, inputs=ins, outputs=[_tensor_arg(link.source)], metadata={},
                  name=f"{origin.name or 'write'}_to_{link.source}")


# ------------------------------------------------------------------ classifying links


def aliases(view: GraphView, node: d.Node | None) -> bool:
    """Whether ``node``'s first output may share memory with its first input: a view op
    (``_signature_table.ALIASING``, less what copied: a ``to`` that changes the dtype or has
    ``copy=True``, a ``reshape`` the recorded layout could not view), an in-place op (its
    result is its input), or ``getitem`` of a view op's outputs."""
    if node is None:
        return False
    from ._signature_table import ALIASING

    target = registry.canonical(node.target)
    if target.startswith("aten.to.") and (_changes_dtype(view, node) or bind(node, copy=False).copy):
        return False
    if target in _RESHAPE_OR_COPY and reshape_is_view(view, node) is False:
        return False
    return target in ALIASING or registry.is_inplace(target) or target == "_operator.getitem"


def _changes_dtype(view: GraphView, node: d.Node) -> bool:
    ins, outs = input_names(node), output_names(node)
    if not ins or not outs or not view.has_tensor(ins[0]) or not view.has_tensor(outs[0]):
        return False
    return view.tensor(ins[0]).dtype != view.tensor(outs[0]).dtype


def _where(node: d.Node) -> str:
    return f"{registry.canonical(node.target)} (node {node.name!r})"


def link(view: GraphView, node: d.Node, value: str) -> Link:
    """How a new ``value`` (made by aliasing ``node``) is written back to its source; raises
    ``Unprovable`` for a link whose memory sharing is not known exactly."""
    target = registry.canonical(node.target)
    source = first_input(node)
    rest = list(node.inputs[1:])
    if registry.is_inplace(target) or target in _IDENTITY:
        return Link(node, source, value, None)
    if target in _SCATTER_OF:
        if target == "aten.narrow.default":
            rest = _narrow_as_slice(node)
        return Link(node, source, value, (_SCATTER_OF[target], rest))
    if target in _PERMUTE:
        return Link(node, source, value, _inverse_permute(view, node, target, rest))
    if target in _RESHAPE or (target in _RESHAPE_OR_COPY and reshape_is_view(view, node)):
        return Link(node, source, value, ("aten.view_as.default", []))
    if target in _RESHAPE_OR_COPY:
        raise Unprovable(f"{_where(node)} of a value with symbolic strides may have copied it")
    if target == "aten.as_strided.default":
        if strided_reshape(view, node):
            return Link(node, source, value, ("aten.view_as.default", []))
        return Link(node, source, value, ("aten.as_strided_scatter.default", rest))
    if target in _PIECES:
        return Link(node, source, value, _piece(view, node, target, output_names(node).index(value)))
    if target in ("aten.expand.default", "aten.expand_as.default"):
        raise Unprovable(f"{_where(node)}: a write through an expanded view writes elements that overlap")
    raise Unprovable(f"{_where(node)}: no write-back through this view op")


def _narrow_as_slice(node: d.Node) -> list:
    a = bind(node, "self", "dim", "start", "length")
    if isinstance(a.start, int) and isinstance(a.length, int):
        end = d.Argument(as_sym_int=d.SymIntArgument(as_int=a.start + a.length))
    elif a.start == 0:
        end = next(na.arg for na in node.inputs if na.name == "length")
    else:
        raise Unprovable(f"{_where(node)} with a symbolic start")
    start = next(na.arg for na in node.inputs if na.name == "start")
    dim = next(na.arg for na in node.inputs if na.name == "dim")
    return [_named("dim", dim), _named("start", start), _named("end", end)]


def _piece(view: GraphView, node: d.Node, target: str, i: int) -> tuple:
    """The scatter that puts piece ``i`` of a split/chunk/unbind back (static sizes only)."""
    sized_by = _PIECES[target]
    a = bind(node, *(("self", sized_by, "dim") if sized_by else ("self", "dim")), dim=0)
    shape = view.tensor(first_input(node)).shape
    dim = a.dim % len(shape)
    size = shape[dim]

    def ints(**kw):
        return [_named(k, d.Argument(as_int=v)) for k, v in kw.items()]

    if target == "aten.unbind.int":
        return "aten.select_scatter.default", ints(dim=dim, index=i)
    if target == "aten.split_with_sizes.default":
        sizes = a.split_sizes
    else:
        step = a.split_size if target == "aten.split.Tensor" else (
            -(-size // a.chunks) if isinstance(size, int) and isinstance(a.chunks, int) else None)
        if not isinstance(step, int) or not isinstance(size, int):
            raise Unprovable(f"{_where(node)} of a dynamic dim")
        sizes = [min(step, size - k) for k in range(0, size, step)]
    if not all(isinstance(x, int) for x in sizes):
        raise Unprovable(f"{_where(node)} with symbolic sizes")
    start = sum(sizes[:i])
    return "aten.slice_scatter.default", ints(dim=dim, start=start, end=start + sizes[i])


def _inverse_permute(view: GraphView, node: d.Node, target: str, rest: list) -> tuple:
    if target in ("aten.transpose.int", "aten.t.default"):
        return target, rest  # their own inverse
    rank = view.tensor(first_input(node)).rank
    if target == "aten.mT.default":
        perm = list(range(rank - 2)) + [rank - 1, rank - 2]
    elif target == "aten.numpy_T.default":
        perm = list(reversed(range(rank)))
    else:
        perm = [p % rank for p in bind(node, "self", "dims").dims]
    inv = [perm.index(i) for i in range(rank)]
    return "aten.permute.default", [_named("dims", d.Argument(as_ints=inv))]


# ------------------------------------------------------------------ the plan


class _Index:
    """Per graph: each node's position and the last position that reads each value."""

    def __init__(self, view: GraphView):
        self.pos = {id(n): i for i, n in enumerate(view.nodes)}
        self.last_read: dict[str, int] = {}
        for i, n in enumerate(view.nodes):
            for name in input_names(n):
                self.last_read[name] = i
        end = len(view.nodes)
        for a in view.output_args:
            for _, name in value_refs(a):
                self.last_read[name] = end


_INDEX: "weakref.WeakKeyDictionary[GraphView, _Index]" = weakref.WeakKeyDictionary()


def _index(view: GraphView) -> _Index:
    idx = _INDEX.get(view)
    if idx is None:
        idx = _INDEX[view] = _Index(view)
    return idx


def _root(view: GraphView, name: str) -> tuple[str, list[tuple[d.Node, str]]]:
    """The value ``name`` aliases through aliasing producers, and the (node, value) steps from
    that root down to ``name``."""
    steps = []
    seen = set()
    while name not in seen:
        seen.add(name)
        p = view.producer.get(name)
        if not aliases(view, p) or first_input(p) is None:
            break
        steps.append((p, name))
        name = first_input(p)
    return name, steps[::-1]


def _alias_class(view: GraphView, root: str) -> list[d.Node]:
    """Every aliasing node whose first input is ``root`` or one of its aliases, transitively."""
    members, todo, nodes, seen = {root}, [root], [], set()
    while todo:
        for c in view.consumers.get(todo.pop(), []):
            if id(c) not in seen and aliases(view, c) and first_input(c) in members:
                seen.add(id(c))
                nodes.append(c)
                for o in output_names(c):
                    if o not in members:
                        members.add(o)
                        todo.append(o)
    return nodes


def write_plan(view: GraphView, node: d.Node, *, top: bool) -> WritePlan | None:
    """The write-back of in-place ``node``, or None when it needs none (its input is no view
    and nothing else aliases it, or nothing can observe the write). ``top``: ``view`` is the
    program's top graph (a write into its inputs and weights is a mutation the model outputs;
    one into a subgraph's inputs is refused). Raises ``Unprovable`` naming the link it cannot prove."""
    written = first_input(node)
    if written is None:
        return None
    base, steps = _root(view, written)
    idx = _index(view)
    here = idx.pos[id(node)]
    chain_values = {v for _, v in steps} | {base}
    own = {written, *output_names(node)}
    live = set()
    producers = {}
    for n in _alias_class(view, base):
        for o in output_names(n):
            producers[o] = n
            if o not in own and idx.last_read.get(o, -1) > here:
                live.add(o)
    base_read = base != written and idx.last_read.get(base, -1) > here
    into_input = base != written and base not in view.producer  # a placeholder, subgraph input or outer value
    if not (live or base_read or into_input):
        return None
    if into_input and not top:
        raise Unprovable(f"a write through a view of {base!r}, a value from outside this subgraph")
    chain = tuple(link(view, p, v) for p, v in steps)
    return WritePlan(written, base, chain, _rederive(view, live - chain_values, producers, chain_values, here))


def _rederive(view: GraphView, live: set[str], producers: dict[str, d.Node], chain_values: set[str],
              here: int) -> tuple[d.Node, ...]:
    """The aliasing nodes before position ``here`` that make the ``live`` aliases from the
    chain (``producers``: each alias's node), in program order: lowered again after the write.
    A reshape among them whose recorded layout leaves view-or-copy open is ``Unprovable``."""
    idx = _index(view)
    needed = set()
    for o in live:
        while o in producers and o not in chain_values and o not in needed:
            needed.add(o)
            o = first_input(producers[o])
    nodes = sorted({id(producers[o]): producers[o] for o in needed if idx.pos.get(id(producers[o]), here) < here}
                   .values(), key=lambda n: idx.pos[id(n)])
    for n in nodes:
        if registry.canonical(n.target) in _RESHAPE_OR_COPY and reshape_is_view(view, n) is None:
            raise Unprovable(f"{_where(n)} of a value with symbolic strides may have copied it "
                             f"(it is read after the write)")
    return tuple(nodes)
