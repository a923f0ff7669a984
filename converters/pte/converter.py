"""``to_pte``: a ``.pt2`` program -> an ExecuTorch ``.pte`` file (portable kernels, no delegate).

The phases, in order:

1. ``open_program`` (the front end's prechecks), the pre-scan for operators with no PTE
   lowering, and the programs slice 1 refuses as a whole (parameters it writes, inputs of a dtype
   the target does not write, a shape symbol with no upper bound: ``max_dims``
   gives one);
2. the shared driver lowers every node into a ``Plan`` (``context.Ctx``; ``ops_*.py``): one
   ``KernelCall`` of a portable out-variant kernel per node, arguments in the kernel's schema
   order (a ``cond``: its branches' instructions between jumps, ``control_flow.py``); every
   refusal is collected into one ``UnsupportedOpsError``. The buffers the program
   writes are planned tensors bound before it, and written back after it (``state.py``);
3. ``memory_plan``: one arena, lifetime-based offsets;
4. ``writer``: the flatbuffer, its extended header, the constants streamed into the segment;
   with ``external_weights``, the weights streamed into a ``.ptd`` beside it instead (``ptd``).
"""

from __future__ import annotations

import json
import os

from ...serde.atomic_write import write_files_atomically
from ...serde.codec.symbolic import Symbol
from ..aten import registry
from ..aten.failures import report_node
from ..aten.graph import ProgramView, open_program
from ..aten.lower import LoweringState, Names, all_graphs, lower_graph, program_names
from ..errors import ConversionError, Unsupported
from ..guard import stage
from ..report import Problems
from . import state
from .constants import constant_buffers
from .context import Ctx
from .kernels import EXECUTORCH_VERSION, out_variant
from .memory_plan import plan_memory
from .program import Plan, TensorValue
from .ptd import data_writer, external_weights as external_data, ptd_bytes, ptd_path
from .writer import Segments, constant_layout, file_writer, flatbuffer, to_bytes
from .xnnpack.delegate import delegate_to_xnnpack

__all__ = ["to_pte", "plan_program", "MAX_DIM_HINT", "DELEGATES", "DEFAULT_DELEGATE"]

DELEGATES = ("xnnpack", "none")
DEFAULT_DELEGATE = "xnnpack"

MAX_DIM_HINT = "--max-dim NAME=N (to_pte(..., max_dims={NAME: N}))"
_UNBOUNDED = 2**62  # a range's max past this is torch's "no upper bound"


def _load_lowerings() -> None:
    from . import (control_flow, ops_attention, ops_create, ops_elementwise, ops_index,  # noqa: F401  (registration)
                   ops_inline, ops_logical, ops_matmul, ops_nn, ops_norm, ops_pad, ops_quant, ops_reduce, ops_resize,
                   ops_shape, ops_sym)


def to_pte(src, dst=None, *, model: str = "model", max_dims: dict[str, int] | None = None,
           external_weights: bool = False, delegate: str = DEFAULT_DELEGATE):
    """Convert one model of a .pt2 (path, file, ``Pt2Archive`` or ``Pt2Model``) to an ExecuTorch
    program. Without ``dst``: returns the file's bytes. With ``dst``: writes it atomically, each
    weight streamed from the archive's memory map into the file once, and returns None.

    ``external_weights``: the weights go to a ``.ptd`` (FlatTensor) file keyed by their fully
    qualified names, as exir's ``external_constants=True`` (``ptd.py``): written beside ``dst``
    (``M.pte`` -> ``M.ptd``), or without ``dst`` returned as ``(pte bytes, ptd bytes)``; a
    program that reads no such weight has no ``.ptd`` (None).

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
            data = external_data(plan, view.weights) if external_weights else None
            arrays, buffer_of = constant_buffers(plan, view.weights, leave_out=data.keys if data else ())
            constants = constant_layout(arrays)
            initial_arrays, initial_of = state.initial_buffers(plan, view.weights)
            initial = constant_layout(initial_arrays) if initial_arrays else None
            in_spec, out_spec = _specs(view)
            segs = Segments.of(plan, constants, initial, named_elsewhere=data is not None)
            program = flatbuffer(plan, memory, segs, buffer_of, in_spec, out_spec, data.refs() if data else None,
                                 initial_of)
            if dst is None:
                pte = to_bytes(program, segs)
                return (pte, data and ptd_bytes(data)) if external_weights else pte
        with stage(member, "writing the .pte file", passthrough=(OSError,)):
            files = [(os.fspath(dst), file_writer(program, segs))]
            if data is not None:
                files.append((ptd_path(dst), data_writer(data)))
            write_files_atomically(files)  # both renamed into place, or neither
        return None
    finally:
        del keep


def plan_program(view: ProgramView, bounds: dict[str, int]) -> Plan:
    """Every node of ``view`` lowered into a numbered ``Plan`` (``bounds``: each shape symbol's
    upper bound); every refusal collected into one ``UnsupportedOpsError``."""
    _load_lowerings()
    state.refuse_parameters(view)
    buffers = state.written_buffers(view)
    ctx = _lowered(view, bounds, buffers)
    late = state.late_buffers(view, ctx, buffers)
    if late:  # written through a view of them: lowered again with every read of them seeing the state
        ctx = _lowered(view, bounds, buffers + late)
    state.write_back(view, ctx)
    _declare_outputs(view, ctx)
    ctx.state.problems.raise_if_any()
    ctx.plan.number()
    return ctx.plan


def _lowered(view: ProgramView, bounds: dict[str, int], buffers: list[str]) -> Ctx:
    """The program's nodes lowered, with ``buffers`` (the placeholders it writes) planned as state."""
    lowering = LoweringState(_missing_lowerings(view))
    ctx = Ctx(view, Names(program_names(view)), lowering, bounds)
    _declare_inputs(view, ctx)
    state.declare_buffers(view, ctx, buffers)
    lower_graph(ctx)
    lowering.problems.raise_if_any()
    return ctx


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
    used = {s.name for g in all_graphs(view) for t in g.tensors.values() for s in t.shape if isinstance(s, Symbol)}
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
                or v in ctx.plan.outputs or v.storage() in ctx.plan.state:
            ctx.state.problems.add_value("graph output", name, "an output that is an input, a mutable buffer (or a "
                                         "view of one) or repeats another output: not converted yet")
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
