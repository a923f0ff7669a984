"""The delegation stage: a ``Plan`` of portable kernel calls -> the same plan with the parts
XNNPACK runs replaced by ``DelegateCall``s of ``XnnpackBackend`` payloads.

The phases, in order:

0. ``int8.fold``: each PT2E quantize or dequantize stands for its portable calls (one unit);
1. every call is checked against the op table (``table.OPS``); a call XNNPACK does not take stays
   on the portable kernels, with its reason (``DelegationReport.kept``);
2. ``partition``: the largest groups of taken calls that can each run as one instruction;
3. each group -> an ``XGraph`` (``builder.Builder``, the emitters of ``ops_*.py``: the int8 form
   of ``ops_int8`` where a call is in PT2E's "dq -> op -> q" pattern) -> its payload;
   a group whose build is refused stays portable, with the reason;
4. the plan rewritten: each group one ``DelegateCall`` (its inputs, then its outputs), placed in
   a topological order of the groups and the calls left; calls nothing reads any more (a
   weight's permute folded into a filter, a size only a delegated reshape read) and the values
   no instruction names are dropped; the constants become the plan's named blobs; a quantize or
   dequantize left outside the groups is its portable calls again.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field

from ...errors import ConversionError
from ..delegate_reader import BACKEND_ID
from ..program import Call, Delegate, DelegateCall, Plan, QuantOp, TensorValue
from . import int8, ops_conv, ops_elementwise, ops_int8, ops_nn, ops_shape  # noqa: F401  (they fill the table)
from .builder import Builder
from .index import PlanIndex, flat_values, kernel_key
from .partition import partition
from .payload import payload
from .rules import tensor_problem
from .table import OPS

__all__ = ["BACKEND_ID", "DelegationReport", "delegate_to_xnnpack"]

MAX_EXTERNS = 4096  # the XNNPACK backend refuses a payload with more external values
# groups of only these move no arithmetic: they stay portable rather than cost a delegate call
_LAYOUT_ONLY = {"permute_copy.out", "transpose_copy.int_out", "view_copy.out", "clone.out", "slice_copy.Tensor_out",
                "select_copy.int_out", "split_with_sizes_copy.out", "cat.out",
                "dim_order_ops::_to_dim_order_copy.out"}


@dataclass
class DelegationReport:
    partitions: int = 0
    delegated_calls: int = 0
    kept: dict = field(default_factory=dict)  # kernel -> (count, the first reason)

    def keep(self, key: str, reason: str) -> None:
        n, first = self.kept.get(key, (0, reason))
        self.kept[key] = (n + 1, first)


def _why_not(ix: PlanIndex, c) -> str | None:
    """None when XNNPACK takes ``c``; else why it stays portable."""
    if isinstance(c, QuantOp):
        return OPS[kernel_key(c)].check(ix, c, None)
    if not isinstance(c, Call):
        return "not a kernel call"
    key = kernel_key(c)
    op = OPS.get(key)
    if op is None:
        return "XNNPACK has no node for it here"
    for i, t in enumerate(c.writes):
        if i == 0 or ix.read_elsewhere(t):
            problem = tensor_problem(t, "the output")
            if problem:
                return problem
    return op.check(ix, c, ix.args(c))


def _outputs(ix: PlanIndex, group: list) -> list:
    """The storages the group writes that are read outside it, or are the plan's outputs."""
    members = {id(c) for c in group}
    out = []
    for c in group:
        for t in c.writes:
            s = t.storage()
            read_outside = any(id(r) not in members for r in ix.readers.get(s, []))
            if (s in ix.plan_outputs or read_outside) and s not in out:
                out.append(s)
    return out


def _build(ix: PlanIndex, group: list, blobs: dict):
    """(payload, input storages, output storages) of one group; ``ConversionError`` when refused."""
    local: dict = dict(blobs)
    b = Builder(ix, group, local)
    for c in group:
        if id(c) in b.absorbed:
            continue
        b.handle = ix.position[id(c)]
        if not ops_int8.emit(b, c, ix.args(c)):
            OPS[kernel_key(c)].emit(b, c, ix.args(c))
    outputs = _outputs(ix, group)
    if len(b.inputs) + len(outputs) > MAX_EXTERNS:
        raise ConversionError(f"{len(b.inputs) + len(outputs)} inputs and outputs (the runtime takes {MAX_EXTERNS})")
    g = b.finish(outputs)
    blobs.update(local)
    return payload(g), list(b.inputs), outputs, {k for k, _n in g.constants}


def _order(ix: PlanIndex, units: list) -> list:
    """``units`` (a group's DelegateCall or a call left, each with the calls it stands for) in a
    topological order, the plan's order where it leaves a choice."""
    unit_of = {id(c): u for u, (_inst, calls) in enumerate(units) for c in calls}
    first = [min(ix.position[id(c)] for c in calls) for _inst, calls in units]
    preds = [set() for _ in units]
    for u, (_inst, calls) in enumerate(units):
        for c in calls:
            for p in ix.producers(c):
                if id(p) in unit_of and unit_of[id(p)] != u:
                    preds[u].add(unit_of[id(p)])
    succs = [[] for _ in units]
    for u, ps in enumerate(preds):
        for p in ps:
            succs[p].append(u)
    waiting = [len(ps) for ps in preds]
    ready = [(first[u], u) for u in range(len(units)) if not waiting[u]]
    heapq.heapify(ready)
    out = []
    while ready:
        _f, u = heapq.heappop(ready)
        out.append(units[u][0])
        for s in succs[u]:
            waiting[s] -= 1
            if not waiting[s]:
                heapq.heappush(ready, (first[s], s))
    if len(out) != len(units):
        raise ConversionError("the delegated partitions form a cycle (a partitioner bug)")
    return out


def _drop_dead(plan: Plan) -> None:
    """Calls nothing reads any more (the delegates stay), then every value no instruction, input
    or output names."""
    live = {t.storage() for t in plan.outputs if isinstance(t, TensorValue)}
    kept = []
    for c in reversed(plan.calls):
        if isinstance(c, Call):
            results = [t.storage() for t in c.writes] or [id(c.args[-1])]
            if not any(r in live for r in results):
                continue
        kept.append(c)
        for v in flat_values(c.args):
            live.add(v.storage() if isinstance(v, TensorValue) else id(v))
    plan.calls = kept[::-1]
    named = set()
    for v in [v for c in plan.calls for v in flat_values(c.args)] + list(plan.inputs) + list(plan.outputs):
        while v is not None and id(v) not in named:  # a view keeps the tensors it is a view of
            named.add(id(v))
            v = v.alias_of if isinstance(v, TensorValue) else None
    plan.values = [v for v in plan.values if id(v) in named]


def delegate_to_xnnpack(plan: Plan, view) -> DelegationReport:
    """Rewrite ``plan`` in place (``view``: the program's ``ProgramView``: its weights, and which
    of its tensors' dims are symbolic)."""
    report = DelegationReport()
    if any(not isinstance(c, Call) or not c.op[1] for c in plan.calls) or plan.state:
        # jumps index the instruction list, state persists between calls, and an in-place kernel
        # (copy_ into a written input) writes a tensor a second time, where the partitioner takes
        # each tensor as written once: such plans keep their order and stay on the portable kernels
        for c in plan.calls:
            if isinstance(c, Call):
                report.keep(kernel_key(c), "the plan has control flow, state or in-place writes (not delegated yet)")
        return report
    int8.fold(plan)
    ix = PlanIndex(plan, view.weights, view.tensors, [u.name for u in view.user_inputs])
    reasons = {id(c): _why_not(ix, c) for c in plan.calls}
    groups = partition(ix, lambda c: reasons[id(c)] is None)
    blobs: dict = {}
    units, used = [], set()
    grouped = set()
    for group in groups:
        if all(kernel_key(c) in _LAYOUT_ONLY for c in group):
            for c in group:
                reasons[id(c)] = "alone in a partition that would only move data"
            continue
        try:
            data, inputs, outputs, keys = _build(ix, group, blobs)
        except ConversionError as e:
            for c in group:
                reasons[id(c)] = f"its partition was not built: {e}"
            continue
        used |= keys
        call = DelegateCall(len(plan.delegates), list(inputs) + list(outputs), list(inputs), list(outputs))
        plan.delegates.append(Delegate(BACKEND_ID, data))
        units.append((call, group))
        grouped |= {id(c) for c in group}
        report.partitions += 1
        report.delegated_calls += len(group)
    units += [(c, [c]) for c in plan.calls if id(c) not in grouped]
    for q in plan.calls:
        if isinstance(q, QuantOp) and id(q) not in grouped:  # back to its portable calls
            reasons.update((id(c), reasons[id(q)]) for c in q.calls)
    plan.calls = int8.unfold(_order(ix, units))
    _drop_dead(plan)
    for c in plan.calls:
        if isinstance(c, Call):
            report.keep(kernel_key(c), reasons.get(id(c)) or "")
    plan.named_data = [blobs[k].named() for k in blobs if k in used]
    plan.number()
    return report
