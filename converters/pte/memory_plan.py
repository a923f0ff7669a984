"""Lifetime-based memory planning: every non-constant tensor gets an offset in one arena
(``mem_id`` 1; ``non_const_buffer_sizes[1]`` is its size, entry 0 is ExecuTorch's reserved
constant slot).

A tensor's storage lives from the call that writes it (inputs: from before the first call)
to the last call that reads it or any view of it (outputs: to the end). A mutable buffer
(``Plan.state``) lives from before the first call to the end, so no other tensor ever shares
its bytes and its value carries from one ``execute()`` to the next. Storages are placed
largest first at the lowest ``ALIGNMENT``-aligned offset whose bytes no storage with an
overlapping lifetime holds. A view (``TensorValue.alias_of``) shares its base's offset.
"""

from __future__ import annotations

from dataclasses import dataclass

from .program import Plan, TensorValue

__all__ = ["ALIGNMENT", "MEMORY_ID", "MemoryPlan", "plan_memory"]

ALIGNMENT = 16  # bytes: every planned tensor starts at a multiple of this (exir's default)
MEMORY_ID = 1


@dataclass
class MemoryPlan:
    offsets: dict  # storage TensorValue -> offset in the arena
    arena_size: int

    def offset_of(self, t: TensorValue) -> int:
        return self.offsets[t.storage()]


def _align(n: int) -> int:
    return (n + ALIGNMENT - 1) // ALIGNMENT * ALIGNMENT


def lifetimes(plan: Plan) -> dict:
    """Planned storage -> (first, last) call index; inputs start at -1, outputs end past the last
    call, mutable buffers do both."""
    end = len(plan.calls)
    span: dict = {}

    def touch(t: TensorValue, i: int) -> None:
        s = t.storage()
        if s.weight is not None:
            return
        first, last = span.get(s, (i, i))
        span[s] = (min(first, i), max(last, i))

    for t in plan.inputs + plan.state:
        if isinstance(t, TensorValue):
            touch(t, -1)
    for i, c in enumerate(plan.calls):
        for t in c.writes:
            touch(t, i)
        for t in c.reads:
            touch(t, i)
    for t in plan.outputs + plan.state:
        if isinstance(t, TensorValue):
            touch(t, end)
    return span


def plan_memory(plan: Plan) -> MemoryPlan:
    span = lifetimes(plan)
    order = sorted(span, key=lambda s: (-s.nbytes, span[s][0]))
    placed: list = []  # (offset, end offset, first, last)
    offsets = {}
    for s in order:
        size = _align(s.nbytes)
        first, last = span[s]
        busy = sorted((o, e) for o, e, f, l in placed if not (l < first or last < f))
        offset = 0
        for o, e in busy:
            if offset + size <= o:
                break
            offset = max(offset, _align(e))
        offsets[s] = offset
        placed.append((offset, offset + size, first, last))
    arena = max((e for _o, e, _f, _l in placed), default=0)
    return MemoryPlan(offsets, arena)
