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
* ``view``/``_unsafe_view``/``unsqueeze``/``squeeze``/``flatten``/``unflatten``/``view_as``
  (they keep the row-major order of the elements), ``reshape``/``reshape_as``/``flatten``/
  ``contiguous`` when the recorded layout of their input shows they did not copy (ATen's
  ``computeStride``; one that copied makes a new base), and an ``as_strided`` whose
  sizes and strides are those of contiguous memory over a contiguous input at offset 0: the
  new value reshaped to the source's shape (``aten.view_as``);
* ``alias``/``detach``/``lift_fresh``/``positive``/a ``to`` that keeps the dtype and the outputs
  of earlier in-place ops: the same value.

After the write, ``WritePlan.rederive`` lists the other aliasing nodes of the base whose values
are read later: the driver lowers them again from the updated base (in program order), so
later reads of the base and of every other view see the update.

Whatever cannot be proved is refused (``Unprovable``, naming the link): a write through
``expand`` (overlapping memory), through an aliasing op not listed above, a ``reshape`` whose
input has symbolic non-contiguous strides (it may have copied), a split of a dynamic dim, or a write inside a
``cond``/``while`` body to a value of the enclosing graph or its own inputs. A write nothing can observe
(its base is made in this graph and no other alias is read afterwards) needs no plan.

Layouts are read from the strides and storage offsets torch recorded for each value
(``TensorMeta``); symbolic sizes are compared as polynomials (``same_dim``).
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass

from ..schema import definitions as d
from ..schema.walk import value_refs
from ..serde.codec.symbolic import Add, Expr, Integer, Mul, Pow, Symbol
from . import registry
from .args import SymRef, bind
from .graph import Dim, GraphView, input_names, output_names, sym_dim

__all__ = ["Link", "WritePlan", "Unprovable", "write_plan", "write_node", "link", "aliases", "same_dim",
           "contiguous_at_zero", "reshape_is_view", "strided_reshape"]


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
_PIECES = frozenset({"aten.split.Tensor", "aten.split_with_sizes.default", "aten.chunk.default", "aten.unbind.int"})
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


def write_node(link: Link, old_source: str, new_value: str, origin: d.Node) -> d.Node:
    """The node computing ``link.source``'s new contents from the old ones and ``new_value``
    (output named ``link.source``: it has that value's dtype and shape)."""
    target, rest = link.write
    if target in ("aten.view_as.default", "aten.permute.default", "aten.transpose.int", "aten.t.default"):
        ins = [_named("self", _tensor_arg(new_value)), *rest]
        if target == "aten.view_as.default":
            ins.append(_named("other", _tensor_arg(old_source)))
    else:
        ins = [_named("self", _tensor_arg(old_source)), _named("src", _tensor_arg(new_value)), *rest]
    return d.Node(target=target, inputs=ins, outputs=[_tensor_arg(link.source)], metadata={},
                  name=f"{origin.name or 'write'}_to_{link.source}")


# ------------------------------------------------------------------ symbolic sizes


def _degree(e: Expr) -> int | None:
    """Degree of a polynomial in its symbols; None when ``e`` is not a polynomial."""
    if isinstance(e, Integer):
        return 0
    if isinstance(e, Symbol):
        return 1
    if isinstance(e, (Add, Mul)):
        ds = [_degree(a) for a in e.args]
        if any(x is None for x in ds):
            return None
        return max(ds) if isinstance(e, Add) else sum(ds)
    if isinstance(e, Pow) and isinstance(e.exp, Integer) and e.exp.value >= 0:
        b = _degree(e.base)
        return None if b is None else b * e.exp.value
    return None


def same_dim(a: Dim, b: Dim) -> bool:
    """Whether two sizes are equal for every value of their symbols: ints compared, polynomials
    by evaluation on a grid that a non-zero difference of their degree cannot vanish on."""
    if isinstance(a, int) and isinstance(b, int):
        return a == b
    ea, eb = (Integer(x) if isinstance(x, int) else x for x in (a, b))
    if ea == eb:
        return True
    da, db = _degree(ea), _degree(eb)
    syms = sorted(ea.free_symbols | eb.free_symbols)
    if da is None or db is None or len(syms) > 3:
        return False
    points = range(2, 3 + max(da, db))
    grid = [{}]
    for s in syms:
        grid = [{**g, s: v} for g in grid for v in points]
    return all(ea.evaluate(g) == eb.evaluate(g) for g in grid)


def _product(dims) -> Dim:
    ints = 1
    rest = []
    for x in dims:
        if isinstance(x, int):
            ints *= x
        else:
            rest.append(x)
    if not rest:
        return ints
    return Mul(tuple([Integer(ints), *rest])) if ints != 1 else (rest[0] if len(rest) == 1 else Mul(tuple(rest)))


def _contiguous_strides(sizes, strides) -> bool:
    """Row-major strides for ``sizes`` (a dim of size 1 may have any stride)."""
    for i, (n, st) in enumerate(zip(sizes, strides)):
        if isinstance(n, int) and n == 1:
            continue
        if not same_dim(st, _product(sizes[i + 1:])):
            return False
    return True


def _meta(view: GraphView, name: str) -> d.TensorMeta | None:
    v = view
    while v is not None:
        m = v.graph.tensor_values.get(name)
        if m is not None:
            return m
        v = v.parent
    return None


def _layout(view: GraphView, name: str) -> tuple[list, list, Dim] | None:
    """(sizes, strides, storage offset) torch recorded for ``name``."""
    m = _meta(view, name)
    if m is None:
        return None
    return [sym_dim(s) for s in m.sizes], [sym_dim(s) for s in m.strides], sym_dim(m.storage_offset)


def contiguous_at_zero(view: GraphView, name: str) -> bool:
    """Whether torch recorded ``name`` as row-major contiguous at storage offset 0: its
    elements in order are its storage's first elements."""
    lay = _layout(view, name)
    return lay is not None and same_dim(lay[2], 0) and _contiguous_strides(lay[0], lay[1])


def _view_strides(sizes: list[int], strides: list[int], new: list[int]) -> bool:
    """Whether ``new`` sizes can view memory of ``sizes``/``strides`` (ATen's computeStride:
    each run of dims that is contiguous within itself must be split/merged whole)."""
    if not sizes or 0 in sizes:
        return True
    view_d, base, t_numel, v_numel = len(new) - 1, strides[-1], 1, 1
    for t in range(len(sizes) - 1, -1, -1):
        t_numel *= sizes[t]
        if t == 0 or (sizes[t - 1] != 1 and strides[t - 1] != t_numel * base):
            while view_d >= 0 and (v_numel < t_numel or new[view_d] == 1):
                v_numel *= new[view_d]
                view_d -= 1
            if v_numel != t_numel:
                return False
            if t > 0:
                base, t_numel, v_numel = strides[t - 1], 1, 1
    return view_d == -1


def reshape_is_view(view: GraphView, node: d.Node) -> bool | None:
    """Whether a ``reshape``/``reshape_as``/``flatten``/``contiguous`` node returned a view of
    its input (True) or a copy (False), from the layout torch recorded for the input; None when
    symbolic strides leave it open."""
    lay = _layout(view, _first_input(node))
    if lay is None:
        return None
    sizes, strides, _ = lay
    if registry.canonical(node.target) == "aten.contiguous.default":
        fmt = bind(node, "self", memory_format=d.MemoryFormat.ContiguousFormat).memory_format
        if fmt != d.MemoryFormat.ContiguousFormat:
            return None
        return _contiguous_strides(sizes, strides)
    if _contiguous_strides(sizes, strides):
        return True
    new = list(view.tensor(output_names(node)[0]).shape)
    if all(isinstance(x, int) for x in sizes + strides + new):
        return _view_strides(sizes, strides, new)
    return None


def _sym(view: GraphView, x) -> Dim:
    """A bound int argument as a size: an int, or the expression of its SymInt."""
    if isinstance(x, SymRef):
        v = view
        while v is not None:
            if x.name in v.sym_ints:
                return v.sym_ints[x.name]
            v = v.parent
        return Symbol(f"?{x.name}")  # unknown: equal only to itself
    return x


def strided_reshape(view: GraphView, node: d.Node) -> bool:
    """Whether ``as_strided(self, size, stride, storage_offset)`` is a reshape of ``self``:
    ``self`` contiguous at offset 0, the strides row-major for ``size``, offset 0 (or
    unset) and as many elements as ``self``."""
    a = bind(node, "self", "size", "stride", storage_offset=None)
    if not contiguous_at_zero(view, a.self.name):
        return False
    size = [_sym(view, x) for x in a.size]
    stride = [_sym(view, x) for x in a.stride]
    if a.storage_offset is not None and not same_dim(_sym(view, a.storage_offset), 0):
        return False
    return (len(size) == len(stride) and _contiguous_strides(size, stride)
            and same_dim(_product(size), _product(view.tensor(a.self.name).shape)))


# ------------------------------------------------------------------ classifying links


def _first_input(node: d.Node) -> str | None:
    names = input_names(node)
    return names[0] if names else None


def aliases(view: GraphView, node: d.Node | None) -> bool:
    """Whether ``node``'s first output may share memory with its first input: a view op
    (``_signature_table.ALIASING``; a ``to`` that changes the dtype copies), an in-place op
    (its result is its input), or ``getitem`` of a view op's outputs."""
    if node is None:
        return False
    from ._signature_table import ALIASING

    target = registry.canonical(node.target)
    if target.startswith("aten.to.") and _changes_dtype(view, node):
        return False
    if target in _RESHAPE_OR_COPY and reshape_is_view(view, node) is False:
        return False  # it copied
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
    source = _first_input(node)
    rest = list(node.inputs[1:])
    if registry.is_inplace(target) or target in _IDENTITY:
        return Link(node, source, value, None)
    if target in _SCATTER_OF:
        if target == "aten.narrow.default":
            rest = _narrow_as_slice(view, node)
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


def _narrow_as_slice(view: GraphView, node: d.Node) -> list:
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
    a = bind(node, "self", "split_size" if target == "aten.split.Tensor" else
             "split_sizes" if target == "aten.split_with_sizes.default" else
             "chunks" if target == "aten.chunk.default" else "dim", "dim", dim=0)
    shape = view.tensor(_first_input(node)).shape
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
    rank = view.tensor(_first_input(node)).rank
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
        if not aliases(view, p) or _first_input(p) is None:
            break
        steps.append((p, name))
        name = _first_input(p)
    return name, steps[::-1]


def _alias_class(view: GraphView, root: str) -> list[d.Node]:
    """Every aliasing node whose first input is ``root`` or one of its aliases, transitively."""
    members, todo, nodes = {root}, [root], []
    while todo:
        for c in view.consumers.get(todo.pop(), []):
            if aliases(view, c) and _first_input(c) in members and c not in nodes:
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
    written = _first_input(node)
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
    needed = set()
    for o in live - chain_values:
        while o in producers and o not in chain_values and o not in needed:
            needed.add(o)
            o = _first_input(producers[o])
    rederive = sorted({id(producers[o]): producers[o] for o in needed if idx.pos.get(id(producers[o]), here) < here}
                      .values(), key=lambda n: idx.pos[id(n)])
    for n in rederive:
        t = registry.canonical(n.target)
        if t in _RESHAPE_OR_COPY and reshape_is_view(view, n) is None:
            raise Unprovable(f"{_where(n)} of a value with symbolic strides may have copied it "
                             f"(it is read after the write)")
    return WritePlan(written, base, chain, tuple(rederive))
