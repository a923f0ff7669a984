"""The one table of what XNNPACK takes: portable kernel -> ``XnnOp`` (its check and its emitter).

``check(index, call, args)`` returns None when the delegate takes the call as it stands, or the
reason it stays on the portable kernels (every argument read: one the emitter would not honour
is a reason). ``emit(builder, call, args)`` adds the call's XNNPACK nodes. ``ops_*.py`` fill the
table. A permute, transpose, slice or select of a constant is folded into the constant instead
(``PlanIndex.constant_view``): its check refuses it, and it runs only if a portable kernel
reads it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

__all__ = ["XnnOp", "OPS", "xnn_op"]


@dataclass(frozen=True)
class XnnOp:
    key: str  # the portable kernel: "addmm.out"
    check: Callable
    emit: Callable


OPS: dict[str, XnnOp] = {}


def xnn_op(*keys: str, check: Callable):
    """Register the decorated emitter for ``keys`` with ``check``."""
    def register(emit):
        for key in keys:
            OPS[key] = XnnOp(key, check, emit)
        return emit

    return register
