"""The lowering driver every target shares: walk a graph's nodes in order and lower each
through the registry.

A target (ONNX today, TFLite next) supplies an emission context that implements
``Target``: how it marks, drops and renames what one lowering emitted. Everything else
is here and knows nothing of the target's format:

* ``lower_graph(ctx)``: for each node, ``registry.get(ctx.backend, node.target)(ctx,
  node)`` through ``reads.call``, which refuses an argument given a non-default value that the
  lowering did not read. A node with no lowering, or one that reads a value whose producer was not
  converted, is skipped and its outputs are *poisoned* (its consumers are skipped too,
  silently: the first node's report says why). An ``Unsupported`` raised by a lowering is
  recorded in the ``report.Problems`` of the conversion and poisons the node's outputs; a
  ``NotConverted`` skips the node without a report; any other exception leaves as
  ``failures.lowering_failure``'s ``ConversionError`` naming the node and the lowering.
* Binding outputs: a lowering returns the target name of the node's output, or a list in
  the order of ``output_slots(node)``, or None; values it made are renamed after the
  program's value (``Names.claim``) so models stay readable.
* In-place ops (``aten.add_.Tensor``, recognised by ``registry.is_inplace``): after the
  lowering ran, later readers of the mutated input see the new value; a placeholder of
  the top graph mutated this way is recorded in ``LoweringState.mutated`` and
  ``mutations`` turns it into an extra output (training IR lists no mutation for it).
* The view-mutation pass (``views.write_plan``): an in-place op whose mutated input is a view
  (``m[:, 0:2].fill_(1)``) or whose base has other views read later is followed by its
  write-back: the new view value is put back into its base link by link through the scatter
  and inverse-view lowerings the registry has (``slice_scatter``, ``select_scatter``,
  ``diagonal_scatter``, ``as_strided_scatter``, ``permute``, ``transpose``, ``view_as``), built
  as synthetic nodes, so every target gets the same semantics; a written input or buffer
  becomes a mutation output, and the other views of the base read afterwards are lowered again
  from the new base. Aliasing the pass cannot prove is refused naming the node and the link.
* ``Names``: unique value names across a program and all its subgraphs;
  ``program_names`` is what they must not reuse; ``all_graphs`` yields a graph and its
  subgraphs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterator, NamedTuple, Protocol

from ...schema import definitions as d
from ...schema.walk import subgraphs, value_refs
from ..errors import NotConverted, Unsupported
from ..report import Problems
from . import aliases  # noqa: F401  (adds the lowerings of aliases to the registry)
from . import reads, registry, views
from .failures import lowering_failure, report_node
from .graph import GraphView, ProgramView, first_input, input_names, output_names

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

    backend: str  # the registry's key ("onnx": the TFLite target maps ONNX, it lowers no ATen node)
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
    """Run ``fn(ctx, node)``, bind its outputs, rebind an in-place op's input and write it
    back through the views it came from (``views.write_plan``)."""
    mark = ctx.begin_node(node)
    saved = None
    try:
        plan = _write_plan(ctx, node) if registry.is_inplace(node.target) else None
        if plan is not None:
            saved = dict(ctx.env), dict(ctx.state.mutated)
        result = reads.call(fn, ctx, node)
        _bind_outputs(ctx, node, result, mark)
        if registry.is_inplace(node.target):
            _rebind_mutated(ctx, node)
        if plan is not None:
            _write_back(ctx, node, plan)
    except Unsupported as e:
        if saved is not None:  # nothing of a failed write-back stays bound
            ctx.env.clear()
            ctx.env.update(saved[0])
            ctx.state.mutated.clear()
            ctx.state.mutated.update(saved[1])
        if not isinstance(e, NotConverted):
            report_node(ctx.state.problems, node, e.reason)
        ctx.discard_since(mark)
        ctx.state.poisoned.update(output_names(node))
    except Exception as e:  # not KeyboardInterrupt/SystemExit; MemoryError and RecursionError are
        raise lowering_failure(e, ctx.view, node, fn) from e
    finally:
        ctx.end_node()


# ------------------------------------------------------------------ writes through views


def _write_plan(ctx: Target, node: d.Node) -> views.WritePlan | None:
    """``views.write_plan`` for in-place ``node``; what it cannot prove is refused."""
    try:
        return views.write_plan(ctx.view, node, top=ctx.root is ctx)
    except views.Unprovable as e:
        raise Unsupported(f"in-place write through a view: {e.reason}") from None


def _write_back(ctx: Target, node: d.Node, plan: views.WritePlan) -> None:
    """After in-place ``node`` gave ``plan.written`` its new value: write it back link by link
    to the base (a scatter or inverse view per link, lowered through the registry), record a
    mutated placeholder, and lower the other live aliases of the base again from it."""
    for link in reversed(plan.chain):
        if link.write is None:
            ctx.env[link.source] = ctx.env[link.value]
            continue
        _lower_synthetic(ctx, views.write_node(link, node),
                         f"to write {link.value!r} back into {link.source!r}")
    _record_mutation(ctx, plan.base)
    for n in plan.rederive:
        outs = output_names(n)
        if any(o in ctx.state.poisoned for o in outs):
            continue
        if registry.is_inplace(n.target):  # its result is its (updated) input
            ctx.env[outs[0]] = ctx.env[first_input(n)]
            continue
        _lower_synthetic(ctx, n, f"to re-read {outs[0]!r} after the write")


def _lower_synthetic(ctx: Target, node: d.Node, why: str) -> None:
    """Lower ``node`` (made by the pass, or an earlier node again) inside the current node."""
    fn = registry.get(ctx.backend, node.target)
    if fn is None:
        raise Unsupported(f"no {ctx.backend} lowering of {registry.canonical(node.target)} {why}")
    mark = ctx.begin_node(node)
    _bind_outputs(ctx, node, reads.call(fn, ctx, node), mark)


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
    this lowering made is renamed after the program's value. An output the lowering left out
    (``None``) that anything reads makes the node unsupported (``_refuse_unproduced``)."""
    if result is None:
        return
    if isinstance(result, str):
        result = [result]
    _refuse_unproduced(ctx, node, result)
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


def _refuse_unproduced(ctx: Target, node: d.Node, result: list) -> None:
    """``Unsupported`` naming the first output of ``node`` that its lowering did not produce
    (``None``, or missing from a short list) while a node or the graph's outputs read it
    (``max_pool2d_with_indices``'s indices, ``native_layer_norm``'s mean): the report then names
    this operator, not a reader that finds no value."""
    slots = output_slots(node)
    for i, prog in enumerate(slots):
        if not isinstance(prog, str) or (i < len(result) and result[i] is not None):
            continue
        reader = _first_reader(ctx.view, prog)
        if reader is not None:
            raise Unsupported(f"output {i} of {len(slots)} ({prog!r}) is not converted by the {ctx.backend} "
                              f"lowering, and is read by {reader}")


def _first_reader(view: GraphView, name: str) -> str | None:
    """What reads value ``name`` in ``view``: a node (``node 'add'``), the graph's outputs, or None."""
    readers = view.consumers.get(name)
    if readers:
        return f"node {readers[0].name!r}"
    if any(ref == name for a in view.output_args for _, ref in value_refs(a)):
        return "the graph's outputs"
    return None


def _rebind_mutated(ctx: Target, node: d.Node) -> None:
    """After ``x.add_(y)`` later readers of ``x`` see the new value; a top-graph placeholder
    mutated this way is recorded (``mutations`` makes it an output)."""
    first = node.inputs[0].arg if node.inputs else None
    outs = output_names(node)
    if first is None or first.type != "as_tensor" or not outs or outs[0] not in ctx.env:
        return
    target = first.value.name
    ctx.env[target] = ctx.env[outs[0]]
    _record_mutation(ctx, target)


def _record_mutation(ctx: Target, name: str) -> None:
    """A top-graph placeholder (weight or user input) given a new value is a mutation."""
    view = ctx.view
    if ctx.root is ctx and (name in view.weights or any(u.name == name for u in view.user_inputs)):
        ctx.state.mutated[name] = ctx.env[name]


# ------------------------------------------------------------------------ mutations


_STATE_KINDS = ("buffer", "tensor_constant")  # weights whose in-place writes are outputs


def state_weights(view: ProgramView) -> list[str]:
    """The weight placeholders the program writes (state: a KV cache, running statistics),
    found before lowering: the signature's buffer mutations, and the top graph's in-place ops
    whose first argument is a buffer or tensor constant. A write through a view of one is
    found only while lowering (``mutations``)."""
    by_fqn = {w.fqn: name for name, w in view.weights.items()}
    found = [by_fqn[m.target] for m in view.mutations if m.target in by_fqn]
    for n in view.nodes:
        if registry.is_inplace(n.target) and n.inputs:
            first = first_input(n)
            w = view.weights.get(first) if isinstance(first, str) else None
            if w is not None and w.kind in _STATE_KINDS:
                found.append(first)
    return list(dict.fromkeys(found))


class MutatedOutput(NamedTuple):
    """A buffer or input the program mutates: its FQN or input name, the target's value after
    the call, and the program value whose metadata (dtype, shape) it has."""

    target: str
    value: str
    like: str


def mutations(view: ProgramView, ctx: Target) -> list[MutatedOutput]:
    """Every mutated buffer/input: from the signature (functional IR), then from in-place ops
    on placeholders (training IR keeps ``add_`` and lists no mutation; parameters mutated
    this way are not outputs). A lifted tensor constant written in place is state too (a
    static KV cache that ``torch.export`` lifted as a constant): its new value is an output,
    never dropped."""
    out = [MutatedOutput(m.target, ctx.env.get(m.value, m.value), m.value) for m in view.mutations]
    seen = {m.target for m in out}
    for placeholder, value in ctx.state.mutated.items():
        w = view.weights.get(placeholder)
        target = w.fqn if w is not None else placeholder
        if target not in seen and (w is None or w.kind in _STATE_KINDS):
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
