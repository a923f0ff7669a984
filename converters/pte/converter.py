"""``to_pte``: a ``.pt2`` program -> an ExecuTorch ``.pte`` file (portable kernels, no delegate).

The phases, in order:

1. ``open_program`` (the front end's prechecks), the pre-scan for operators with no PTE
   lowering, and the programs slice 1 refuses as a whole (state it writes, inputs other than
   float32 tensors, a shape symbol with no upper bound: ``max_dims`` gives one);
2. the shared driver lowers every node into a ``Plan`` (``context.Ctx``; ``ops_*.py``): one
   ``KernelCall`` of a portable out-variant kernel per node, arguments in the kernel's schema
   order; every refusal is collected into one ``UnsupportedOpsError``;
3. ``memory_plan``: one arena, lifetime-based offsets;
4. ``writer``: the flatbuffer, its extended header, the constants streamed into the segment.
"""

from __future__ import annotations

import json
import os

from ...serde.codec.symbolic import Symbol
from ..aten import registry
from ..aten.failures import report_node
from ..aten.graph import ProgramView, open_program
from ..aten.lower import LoweringState, Names, lower_graph, program_names
from ..errors import ConversionError, Unsupported
from ..guard import stage
from ..report import Problems
from .constants import constant_buffers
from .context import Ctx
from .kernels import EXECUTORCH_VERSION, out_variant
from .memory_plan import plan_memory
from .program import Plan, TensorValue
from .writer import constant_layout, extra_segments, flatbuffer, to_bytes, write_file
from .xnnpack.delegate import delegate_to_xnnpack

__all__ = ["to_pte", "plan_program", "MAX_DIM_HINT", "DELEGATES", "DEFAULT_DELEGATE"]

DELEGATES = ("xnnpack", "none")
DEFAULT_DELEGATE = "xnnpack"

MAX_DIM_HINT = "--max-dim NAME=N (to_pte(..., max_dims={NAME: N}))"
_UNBOUNDED = 2**62  # a range's max past this is torch's "no upper bound"


def _load_lowerings() -> None:
    from . import ops_attention, ops_elementwise, ops_nn, ops_shape  # noqa: F401  (registration side effects)


def to_pte(src, dst=None, *, model: str = "model", max_dims: dict[str, int] | None = None,
           delegate: str = DEFAULT_DELEGATE):
    """Convert one model of a .pt2 (path, file, ``Pt2Archive`` or ``Pt2Model``) to an ExecuTorch
    program. Without ``dst``: returns the file's bytes. With ``dst``: writes it atomically, each
    weight streamed from the archive's memory map into the file once, and returns None.

    ``max_dims`` bounds shape symbols torch left unbounded (``{"s77": 64}``): ExecuTorch plans a
    dynamic tensor at its upper bound. Raises ``UnsupportedOpsError`` naming every ATen node the
    target cannot convert, ``ConversionError`` for a program it refuses as a whole.

    ``delegate``: ``"xnnpack"`` runs what XNNPACK takes in ``XnnpackBackend`` payloads (the rest on
    the portable kernels), ``"none"`` writes portable kernels only."""
    if delegate not in DELEGATES:
        raise ConversionError(f"delegate {delegate!r}: choose one of {', '.join(DELEGATES)}")
    view, keep = open_program(src, model)
    try:
        member = view.member
        with stage(member, "converting to ExecuTorch"):
            plan = plan_program(view, _bounds(view, max_dims or {}))
        if delegate == "xnnpack":
            with stage(member, "delegating to XNNPACK"):
                delegate_to_xnnpack(plan, view)
        with stage(member, "planning memory"):
            memory = plan_memory(plan)
        with stage(member, "writing the ExecuTorch program"):
            arrays, buffer_of = constant_buffers(plan, view.weights)
            constants = constant_layout(arrays)
            in_spec, out_spec = _specs(view)
            program = flatbuffer(plan, memory, constants, buffer_of, in_spec, out_spec)
            if dst is None:
                return to_bytes(program, constants, extra_segments(plan))
        with stage(member, "writing the .pte file", passthrough=(OSError,)):
            write_file(os.fspath(dst), program, constants, extra_segments(plan))
        return None
    finally:
        del keep


def plan_program(view: ProgramView, bounds: dict[str, int]) -> Plan:
    """Every node of ``view`` lowered into a numbered ``Plan`` (``bounds``: each shape symbol's
    upper bound); every refusal collected into one ``UnsupportedOpsError``."""
    _load_lowerings()
    lowering = LoweringState(_missing_lowerings(view))
    ctx = Ctx(view, Names(program_names(view)), lowering, bounds)
    _refuse_programs(view)
    _declare_inputs(view, ctx)
    lower_graph(ctx)
    lowering.problems.raise_if_any()
    _refuse_state(view, ctx)
    _declare_outputs(view, ctx)
    lowering.problems.raise_if_any()
    ctx.plan.number()
    return ctx.plan


def _missing_lowerings(view: ProgramView) -> Problems:
    """Every node with no pte lowering, each reason saying whether ExecuTorch's portable library has
    a kernel for it (a lowering could be added) or not (the operator needs a decomposition or a
    delegate)."""
    problems = Problems("pte", view.member)
    for n in view.walk():
        if registry.get("pte", n.target) is not None:
            continue
        t = registry.parse_target(registry.canonical(n.target))
        key = out_variant(t.op, t.overload) if t is not None and t.form == "overload" and t.namespace == "aten" else None
        reason = (f"no pte lowering yet (ExecuTorch {EXECUTORCH_VERSION}'s portable library has aten::{key})" if key
                  else f"no pte lowering, and ExecuTorch {EXECUTORCH_VERSION}'s portable library has no out-variant "
                       "kernel for it")
        report_node(problems, n, reason)
    return problems


def _bounds(view: ProgramView, max_dims: dict[str, int]) -> dict[str, int]:
    """Each shape symbol's upper bound: ``max_dims``', else its range's; unbounded is refused."""
    used = {s.name for t in view.tensors.values() for s in t.shape if isinstance(s, Symbol)}
    unknown = set(max_dims) - used
    if unknown:
        raise ConversionError(f"max_dims names {sorted(unknown)[0]!r}, which is no shape symbol of the program "
                              f"(its symbols: {', '.join(sorted(used)) or 'none'})", member=view.member)
    out = {}
    for name in sorted(used):
        _lo, hi = view.ranges.get(name, (None, None))
        if name in max_dims:
            hi = int(max_dims[name])
        if hi is None or hi >= _UNBOUNDED:
            where = view.symbol_sources().get(name)
            at = f" (input {where[0]!r} dim {where[1]})" if where else ""
            raise ConversionError(f"shape symbol {name}{at} has no upper bound: ExecuTorch plans a dynamic "
                                  f"tensor at its largest size; give one with {MAX_DIM_HINT.replace('NAME', name)}",
                                  member=view.member)
        out[name] = hi
    return out


def _refuse_programs(view: ProgramView) -> None:
    if view.mutations:
        raise ConversionError("the program writes buffers or inputs (state): the pte target does not convert "
                              "mutations yet", member=view.member)


def _refuse_state(view: ProgramView, ctx: Ctx) -> None:
    """In-place writes to a weight or input (training IR lists no mutation for them) are state too."""
    if ctx.state.mutated:
        raise ConversionError(f"the program writes {', '.join(sorted(ctx.state.mutated))} in place (state): the pte "
                              "target does not convert mutations yet", member=view.member)


def _declare_inputs(view: ProgramView, ctx: Ctx) -> None:
    for u in view.user_inputs:
        if u.kind == "constant":
            continue
        if u.kind != "tensor":
            ctx.state.problems.add_value(f"{u.kind} input", u.name, "the pte target takes tensor inputs only")
            ctx.state.poisoned.add(u.name)
            continue
        try:
            ctx.plan.inputs.append(ctx.declare_input(u.name))
        except Unsupported as e:
            ctx.state.problems.add_value("tensor input", u.name, e.reason)
            ctx.state.poisoned.add(u.name)


def _declare_outputs(view: ProgramView, ctx: Ctx) -> None:
    for i, arg in enumerate(view.user_outputs):
        if arg.type != "as_tensor":
            ctx.state.problems.add_value("graph output", str(i), f"a {arg.type[3:]} output: the pte target "
                                         "returns tensors only")
            continue
        name = arg.value.name
        if name in view.weights or name not in ctx.env:
            ctx.state.problems.add_value("graph output", name, "an output that is a weight or has no converted "
                                         "producer")
            continue
        v = ctx.by_name[ctx.env[name]]
        if isinstance(v, TensorValue) and v.storage().weight is not None:
            ctx.state.problems.add_value("graph output", name, "an output that is a view of a weight: not converted yet")
            continue
        if not isinstance(v, TensorValue) or v in ctx.plan.inputs or v.storage() in ctx.plan.inputs \
                or v in ctx.plan.outputs:
            ctx.state.problems.add_value("graph output", name, "an output that is an input or repeats another "
                                         "output: not converted yet")
            continue
        ctx.plan.outputs.append(v)


_LEAF = {"type": None, "context": None, "children_spec": []}


def _specs(view: ProgramView) -> tuple[str, str]:
    """The pytree specs ExecuTorch's ``ContainerMetadata`` holds: torch's own when the program
    records them (the module call graph's root signature), else a tuple of tensors in, and one
    tensor (or a tuple) out."""
    graph = getattr(view.program.graph_module, "module_call_graph", None) or []
    for entry in graph:
        sig = getattr(entry, "signature", None)
        if getattr(entry, "fqn", None) == "" and sig is not None and sig.in_spec and sig.out_spec:
            return sig.in_spec, sig.out_spec
    n_in = sum(1 for u in view.user_inputs if u.kind == "tensor")
    args = {"type": "builtins.tuple", "context": "null", "children_spec": [_LEAF] * n_in}
    kwargs = {"type": "builtins.dict", "context": "[]", "children_spec": []}
    in_spec = [1, {"type": "builtins.tuple", "context": "null", "children_spec": [args, kwargs]}]
    n_out = len(view.user_outputs)
    out_tree = _LEAF if n_out == 1 else {"type": "builtins.tuple", "context": "null", "children_spec": [_LEAF] * n_out}
    return json.dumps(in_spec), json.dumps([1, out_tree])
