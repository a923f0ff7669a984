"""A relu, hardtanh or clamp fused into the node before it: XNNPACK's nodes clamp their output
(``output_min_max``), so an activation that is its producer's only reader costs no node of its own.
"""

from __future__ import annotations

from ..program import TensorValue
from .index import kernel_key
from .rules import literal_or_none, number

__all__ = ["ACTIVATIONS", "activation_bounds", "fused_activation"]

ACTIVATIONS = ("relu.out", "hardtanh.out", "clamp.out")


def activation_bounds(ix, c) -> tuple | None:
    """(min, max) of a relu/hardtanh/clamp call with literal bounds, else None."""
    key = kernel_key(c)
    a = ix.args(c)
    if key == "relu.out":
        return 0.0, float("inf")
    if key == "hardtanh.out":
        lo, hi = number(ix, a["min_val"]), number(ix, a["max_val"])
        return None if lo is None or hi is None or lo > hi else (lo, hi)
    if key == "clamp.out":
        lo, hi = literal_or_none(ix, a["min"]), literal_or_none(ix, a["max"])
        if not all(x is None or isinstance(x, (int, float)) and not isinstance(x, bool) for x in (lo, hi)):
            return None
        lo = float("-inf") if lo is None else float(lo)
        hi = float("inf") if hi is None else float(hi)
        return None if lo > hi else (lo, hi)
    return None


def fused_activation(b, out: TensorValue):
    """The tensor a node writing ``out`` ends in, and the (min, max) to clamp it to: a relu,
    hardtanh or clamp of the partition that is ``out``'s only reader is absorbed."""
    reader = b.ix.sole_reader(out)
    if not b.in_group(reader) or id(reader) in b.absorbed or kernel_key(reader) not in ACTIVATIONS:
        return out, None
    src = b.ix.args(reader)["self"]
    bounds = activation_bounds(b.ix, reader)
    if bounds is None or tuple(src.sizes) != tuple(out.sizes):
        return out, None
    b.absorbed.add(id(reader))
    return reader.writes[0], bounds
