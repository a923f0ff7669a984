"""The one table of what XNNPACK takes: portable kernel -> ``XnnOp`` (its check and its emitter).

``check(index, call, args)`` returns None when the delegate takes the call as it stands, or the
reason it stays on the portable kernels (every argument read: one the emitter would not honour
is a reason). ``emit(builder, call, args)`` adds the call's XNNPACK nodes. ``ops_*.py`` fill the
table; ``FOLDED`` are the kernels that, on a constant, are folded into the constant instead
(a permuted weight), and never run.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

__all__ = ["XnnOp", "OPS", "FOLDED", "xnn_op"]


@dataclass(frozen=True)
class XnnOp:
    key: str  # the portable kernel: "addmm.out"
    check: Callable
    emit: Callable


OPS: dict[str, XnnOp] = {}
FOLDED = ("permute_copy.out", "transpose_copy.int_out")


def xnn_op(*keys: str, check: Callable):
    """Register the decorated emitter for ``keys`` with ``check``."""
    def register(emit):
        for key in keys:
            OPS[key] = XnnOp(key, check, emit)
        return emit

    return register
