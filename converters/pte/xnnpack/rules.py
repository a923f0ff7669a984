"""What every delegated call must satisfy, and the small readers the op checks share.

XNNPACK's tensors here are float32 or float16 (a partition is one or the other: ``Builder``), of rank 1..6 (``XNN_MAX_TENSOR_DIMS``), with no empty dim;
a scratch output the portable kernel writes beside its result (a pool's int64 indices, a batch
norm's saved statistics) must be read by nothing. Arguments must be literals, except where an
op says otherwise (a reshape's run-time size).
"""

from __future__ import annotations

from ....schema import definitions as d
from ..dtypes import ET_SCALAR_TYPE
from ..program import ListValue, ScalarValue, TensorValue
from .index import PlanIndex

__all__ = ["MAX_DIMS", "FLOAT", "HALF", "INT8", "tensor_problem", "literal_or_none", "ints", "number", "NOT_LITERAL"]

MAX_DIMS = 6
FLOAT = ET_SCALAR_TYPE[d.ScalarType.FLOAT]
HALF = ET_SCALAR_TYPE[d.ScalarType.HALF]
INT8 = ET_SCALAR_TYPE[d.ScalarType.CHAR]
NOT_LITERAL = object()


def tensor_problem(t: TensorValue, what: str) -> str | None:
    if t.scalar_type not in (FLOAT, HALF):
        return f"{what} is not float32 or float16"
    if not 1 <= len(t.sizes) <= MAX_DIMS:
        return f"{what} has rank {len(t.sizes)} (XNNPACK takes 1..{MAX_DIMS})"
    if any(d <= 0 for d in t.sizes):
        return f"{what} has an empty dim"
    return None


def literal_or_none(ix: PlanIndex, v):
    """A literal argument's value (None for Null), or ``NOT_LITERAL`` for a run-time one."""
    if isinstance(v, ListValue):
        items = [literal_or_none(ix, x) for x in v.items]
        return NOT_LITERAL if any(x is NOT_LITERAL for x in items) else items
    if isinstance(v, ScalarValue):
        if v.kind == "Null":
            return None
        return NOT_LITERAL if ix.run_time_int(v) or v.name else v.value
    return NOT_LITERAL


def ints(ix: PlanIndex, v) -> list | None:
    """A literal int list, else None."""
    x = literal_or_none(ix, v)
    return [int(i) for i in x] if isinstance(x, list) and all(isinstance(i, int) for i in x) else None


def number(ix: PlanIndex, v) -> float | None:
    x = literal_or_none(ix, v)
    return float(x) if isinstance(x, (int, float)) and not isinstance(x, bool) else None
