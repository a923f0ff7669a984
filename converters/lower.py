"""The lowering driver every target shares: walk a graph's nodes in order and lower each
through the registry.

A target (ONNX today, TFLite next) supplies an emission context that implements
``Target``: how it marks, drops and renames what one lowering emitted. Everything else
is here and knows nothing of the target's format:

* ``lower_graph(ctx)``: for each node, ``registry.get(ctx.backend, node.target)(ctx,
  node)``. A node with no lowering, or one that reads a value whose producer was not
  converted, is skipped and its outputs are *poisoned* (its consumers are skipped too,
  silently: the first node's report says why). An ``Unsupported`` raised by a lowering is
  recorded in the ``report.Problems`` of the conversion and poisons the node's outputs; a
  ``NotConverted`` skips the node without a report; any other exception leaves as
  ``guard.lowering_failure``'s ``ConversionError`` naming the node and the lowering.
* Binding outputs: a lowering returns the target name of the node's output, or a list in
  the order of ``output_slots(node)``, or None; values it made are renamed after the
  program's value (``Names.claim``) so models stay readable.
* In-place ops (``aten.add_.Tensor``, recognised by ``registry.is_inplace``): after the
  lowering ran, later readers of the mutated input see the new value; a placeholder of
  the top graph mutated this way is recorded in ``LoweringState.mutated`` and
  ``mutations`` turns it into an extra output (training IR lists no mutation for it).
  An in-place op whose mutated input may alias another value (it comes from a view op,
  ``_signature_table.ALIASING``) is refused (``view_write_base``) unless the write is
  provably dead: the view-mutation pass that would write through to the base is not there yet.
* ``Names``: unique value names across a program and all its subgraphs;
  ``program_names`` is what they must not reuse; ``all_graphs`` yields a graph and its
  subgraphs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterator, NamedTuple, Protocol

from ..schema import definitions as d
from ..schema.walk import subgraphs, value_refs
from . import registry
from .errors import NotConverted, Unsupported
from .graph import GraphView, ProgramView, input_names, output_names
from .guard import lowering_failure
from .report import Problems

__all__ = ["Names", "LoweringState", "Target", "MutatedOutput", "lower_graph", "lower_node", "output_slots",
           "all_graphs", "program_names", "mutations"]


class Names:
    """Unique value names across the main graph and every subgraph (ONNX forbids shadowing).

    ``reserved`` names (the program's own values) are handed out only by ``claim``, to the
    value that bears them; ``fresh`` never returns one."""

    def __init__(self, reserved=()):
        self.reserved = set(reserved)
        self.taken: set[str] = set()
        self._next: dict[str, int] = {}

    def claim(self, name: str) -> str:
        """``name`` itself the first time, a fresh variant afterwards."""
        if name not in self.taken:
            self.taken.add(name)
            return name
        return self.fresh(name)

    def fresh(self, base: str) -> str:
        base = base or "v"
        if base not in self.taken and base not in self.reserved:
            self.taken.add(base)
            return base
        i = self._next.get(base, 1)
        while f"{base}_{i}" in self.taken or f"{base}_{i}" in self.reserved:
            i += 1
        self._next[base] = i + 1
        name = f"{base}_{i}"
        self.taken.add(name)
        return name


@dataclass
class LoweringState:
    """What lowering one program records across its graphs (shared by a context and its children)."""

    problems: Problems  # every unsupported node, reported at the end
    poisoned: set[str] = field(default_factory=set)  # program values whose producer was not converted
    mutated: dict[str, str] = field(default_factory=dict)  # top-graph placeholder -> target value after in-place ops


class Target(Protocol):
    """What the driver needs of a target's emission context for one graph.

    ``env`` maps program value names to the target's value names; ``root`` is the context
    of the program's top graph (a subgraph's context has its own ``env`` and ``view``)."""

    backend: str  # the registry's key: "onnx", "tflite"
    view: GraphView
    root: "Target"
    env: dict[str, str]
    names: Names
    state: LoweringState

    def begin_node(self, node: d.Node) -> int:
        """Start lowering ``node``; returns a mark of what was emitted so far."""

    def end_node(self) -> None:
        """``node`` is done (lowered, skipped or failed)."""

    def made_since(self, mark: int) -> set[str]:
        """The values made by what was emitted since ``mark`` (shared constants excluded)."""

    def discard_since(self, mark: int) -> None:
        """Drop what was emitted since ``mark`` (the lowering raised ``Unsupported``)."""

    def rename_since(self, mark: int, old: str, new: str) -> None:
        """Rename value ``old`` to ``new`` in what was emitted since ``mark``."""


# ------------------------------------------------------------------------- the walk


def lower_graph(ctx: Target) -> None:
    """Lower every node of ``ctx.view`` in order; record problems, poison what was not converted."""
    state = ctx.state
    for node in ctx.view.nodes:
        fn = registry.get(ctx.backend, node.target)
        if fn is None or any(n in state.poisoned for n in input_names(node)):
            state.poisoned.update(output_names(node))
            continue
        lower_node(ctx, node, fn)


def lower_node(ctx: Target, node: d.Node, fn) -> None:
    """Run ``fn(ctx, node)``, bind its outputs, rebind an in-place op's input."""
    mark = ctx.begin_node(node)
    try:
        if registry.is_inplace(node.target):
            base = view_write_base(ctx.view, node)
            if base is not None:
                raise Unsupported(f"in-place write through a view of {base!r}: not supported yet "
                                  f"(the write would not reach {base!r} and what else aliases it)")
        result = fn(ctx, node)
        _bind_outputs(ctx, node, result, mark)
        if registry.is_inplace(node.target):
            _rebind_mutated(ctx, node)
    except Unsupported as e:
        if not isinstance(e, NotConverted):
            ctx.state.problems.add(node, e.reason)
        ctx.discard_since(mark)
        ctx.state.poisoned.update(output_names(node))
    except Exception as e:  # not KeyboardInterrupt/SystemExit; MemoryError and RecursionError are
        raise lowering_failure(e, ctx.view, node, fn) from e
    finally:
        ctx.end_node()


# ------------------------------------------------------------------ writes through views


def _aliasing(view: GraphView, node: d.Node | None) -> bool:
    """Whether ``node``'s outputs may alias its first input: a view op (``ALIASING``; a
    ``to`` that changes the dtype copies), an in-place op (its result is its input), or
    ``getitem`` of a view op's outputs."""
    if node is None:
        return False
    from ._signature_table import ALIASING

    target = registry.canonical(node.target)
    if target.startswith("aten.to.") and _changes_dtype(view, node):
        return False
    return target in ALIASING or registry.is_inplace(target) or target == "_operator.getitem"


def _changes_dtype(view: GraphView, node: d.Node) -> bool:
    ins, outs = input_names(node), output_names(node)
    if not ins or not outs or not view.has_tensor(ins[0]) or not view.has_tensor(outs[0]):
        return False
    return view.tensor(ins[0]).dtype != view.tensor(outs[0]).dtype


def _first_input(node: d.Node) -> str | None:
    names = input_names(node)
    return names[0] if names else None


def _alias_root(view: GraphView, name: str) -> tuple[str, bool]:
    """The value ``name`` aliases through view/in-place/getitem producers, and whether any of
    them was a view (``getitem`` and in-place ops alone make no view)."""
    through_view = False
    seen = set()
    while name not in seen:
        seen.add(name)
        p = view.producer.get(name)
        if not _aliasing(view, p) or _first_input(p) is None:
            break
        through_view |= not registry.is_inplace(p.target) and p.target != "_operator.getitem"
        name = _first_input(p)
    return name, through_view


def _alias_class(view: GraphView, root: str) -> set[str]:
    """``root`` and every value made from it by aliasing nodes, transitively."""
    out, todo = {root}, [root]
    while todo:
        for c in view.consumers.get(todo.pop(), []):
            if _aliasing(view, c) and _first_input(c) in out:
                for o in output_names(c):
                    if o not in out:
                        out.add(o)
                        todo.append(o)
    return out


def view_write_base(view: GraphView, node: d.Node) -> str | None:
    """The base an in-place ``node`` writes to through a view, unless that write is provably
    dead; None when its mutated input is no view. Dead: the base is made in this graph (not
    an input, weight or outer value), and after ``node`` nothing reads the base or any other
    alias of it, nor is one a graph output (reads of the written view itself see the write)."""
    target = _first_input(node)
    if target is None:
        return None
    base, through_view = _alias_root(view, target)
    if not through_view:
        return None
    p = view.producer.get(base)
    if p is None:  # a graph input, a weight or a value of an enclosing graph
        return base
    own = {target, *output_names(node)}
    others = _alias_class(view, base) - own
    outs = {name for a in view.output_args for _, name in value_refs(a)}
    if others & outs:
        return base
    after = view.nodes[next(i for i, n in enumerate(view.nodes) if n is node) + 1:]
    if any(set(input_names(n)) & others for n in after):
        return base
    return None


# ------------------------------------------------------------------ binding outputs


def output_slots(node: d.Node) -> list[str | None]:
    """The program value each of a node's outputs binds, flattened in order (``None`` for an
    output with no name: ``as_none``, a constant SymInt, an absent optional tensor)."""
    out = []
    for a in node.outputs:
        if a.type == "as_tensors":
            out.extend(t.name for t in a.value)
        elif a.type == "as_optional_tensors":
            out.extend(t.value.name if t.type == "as_tensor" else None for t in a.value)
        elif a.type == "as_tensor":
            out.append(a.value.name)
        elif a.type in ("as_sym_int", "as_sym_bool", "as_sym_float"):
            out.append(a.value.value if a.value.type == "as_name" else None)
        elif a.type == "as_none":
            out.append(None)
        else:
            out.append(getattr(a.value, "name", None))
    return out


def _bind_outputs(ctx: Target, node: d.Node, result, mark: int) -> None:
    """``ctx.env[program value] = target value`` for each output the lowering returned; a value
    this lowering made is renamed after the program's value."""
    if result is None:
        return
    if isinstance(result, str):
        result = [result]
    made = ctx.made_since(mark)
    for prog, value in zip(output_slots(node), result):
        if prog is None or value is None:
            continue
        if value in made:
            new = ctx.names.claim(prog)
            ctx.rename_since(mark, value, new)
            made.discard(value)
            value = new
        ctx.env[prog] = value


def _rebind_mutated(ctx: Target, node: d.Node) -> None:
    """After ``x.add_(y)`` later readers of ``x`` see the new value; a top-graph placeholder
    mutated this way is recorded (``mutations`` makes it an output)."""
    first = node.inputs[0].arg if node.inputs else None
    outs = output_names(node)
    if first is None or first.type != "as_tensor" or not outs or outs[0] not in ctx.env:
        return
    target, new = first.value.name, ctx.env[outs[0]]
    ctx.env[target] = new
    view = ctx.view
    if ctx.root is ctx and (target in view.weights or any(u.name == target for u in view.user_inputs)):
        ctx.state.mutated[target] = new


# ------------------------------------------------------------------------ mutations


class MutatedOutput(NamedTuple):
    """A buffer or input the program mutates: its FQN or input name, the target's value after
    the call, and the program value whose metadata (dtype, shape) it has."""

    target: str
    value: str
    like: str


def mutations(view: ProgramView, ctx: Target) -> list[MutatedOutput]:
    """Every mutated buffer/input: from the signature (functional IR), then from in-place ops
    on placeholders (training IR keeps ``add_`` and lists no mutation; parameters mutated
    this way are not outputs)."""
    out = [MutatedOutput(m.target, ctx.env.get(m.value, m.value), m.value) for m in view.mutations]
    seen = {m.target for m in out}
    for placeholder, value in ctx.state.mutated.items():
        w = view.weights.get(placeholder)
        target = w.fqn if w is not None else placeholder
        if target not in seen and (w is None or w.kind == "buffer"):
            out.append(MutatedOutput(target, value, placeholder))
            seen.add(target)
    return out


# ------------------------------------------------------------------------ subgraphs


def all_graphs(view: GraphView) -> Iterator[GraphView]:
    """``view`` and every subgraph under it (cond/while/map bodies), depth first."""
    yield view
    for n in view.nodes:
        for na in n.inputs:
            for g in subgraphs(na.arg):
                yield from all_graphs(view.subgraph(g.graph))


def program_names(view: ProgramView) -> set[str]:
    """Every value name of the program (all graphs, SymInts): ``Names`` reserves them."""
    return {n for g in all_graphs(view) for n in g.tensors} | set(view.sym_ints)
