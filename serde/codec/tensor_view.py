"""The bounds check of a strided view over stored tensor bytes, before any array exists.

``check_view`` is the one check every stored tensor passes, whichever layout it comes
from (the raw files of torch >= 2.10 in ``archive.tensor_data``, the pickles of older
releases in ``pickle_reader``): exact integer arithmetic on sizes, strides and offset before
numpy sees them, so nothing overflows and nothing is allocated for a view. A view may claim
more elements than it stores (stride 0: ``torch.ones(4).expand(1000, 4)``); it stays a
view, and what it claims beyond its bytes is charged to a ``ViewBudget`` per member,
bounded by ``limits.MAX_AMPLIFIED_BYTES``, so a small file cannot stand for terabytes.
``brief_repr`` names a hostile value in a message without printing all of it.
"""

from __future__ import annotations

import reprlib
from typing import Sequence

from .. import limits
from ..errors import LimitExceededError, TensorDataError

__all__ = ["check_view", "ViewBudget", "brief_repr", "MAX_DIM", "INTP_MAX"]

MAX_DIM = 1 << 62
"""Largest size, stride or offset accepted: past it products overflow int64 in any reader."""

INTP_MAX = (1 << 63) - 1  # numpy's byte strides and byte sizes are int64 (intp)

class _BriefRepr(reprlib.Repr):
    """``reprlib`` (bounded lengths and nesting) that also names huge ints by their size."""

    def repr_int(self, x, level):
        if x.bit_length() > 128:
            return f"<{'negative ' if x < 0 else ''}int of {x.bit_length()} bits>"
        return super().repr_int(x, level)


_REPR = _BriefRepr()
_REPR.maxstring = _REPR.maxother = 60


def brief_repr(value) -> str:
    """A bounded repr for error messages: a hostile value may be huge (an int of a million
    digits, whose ``repr`` raises), or shared so deeply that a full repr never ends."""
    try:
        return _REPR.repr(value)
    except Exception:
        return f"<{type(value).__name__}>"


class ViewBudget:
    """Bytes the tensors of one weights member claim beyond what it stores, against
    ``limits.MAX_AMPLIFIED_BYTES``.

    Charged with the bytes by which an overlapping view (stride 0, broadcast) exceeds the
    storage span it reads, and with copies made to apply torch's neg/conj bits. One budget
    per member (one pickle, one ``*_config.json``) shared by all its tensors, so many
    small expansions cannot add up to a large one.
    """

    __slots__ = ("used",)

    def __init__(self):
        self.used = 0

    def charge(self, nbytes: int, what: str, *, member: str | None = None, path: str | None = None) -> None:
        """Add ``nbytes`` for ``what``; a ``LimitExceededError`` naming member and tensor when over."""
        self.used += nbytes
        if self.used > limits.MAX_AMPLIFIED_BYTES:
            raise LimitExceededError(
                f"{what}: {nbytes} bytes beyond the stored ones ({self.used} so far in this member) exceed "
                f"MAX_AMPLIFIED_BYTES={limits.MAX_AMPLIFIED_BYTES}", member=member, path=path)


def check_view(
    sizes: Sequence[int],
    strides: Sequence[int],
    storage_offset: int,
    storage_elements: int,
    itemsize: int,
    *,
    member: str | None = None,
    path: str | None = None,
    budget: ViewBudget | None = None,
) -> int:
    """Check torch's view metadata (in elements) against a storage of ``storage_elements``
    items, with exact Python integers, before numpy is asked for anything; returns numel.

    The one check both weight layouts use (the raw files of torch >= 2.10 and the pickles
    of older releases). In order: concrete ints and rank; sizes and offset in [0, 2**62);
    elements (the product of the non-zero sizes) within ``MAX_TENSOR_ELEMENTS``; the last
    element read, ``offset + sum((size - 1) * stride)``, inside the storage; every byte
    stride within int64; and a view that reads some elements more than once (numel past
    its span) charges the excess bytes to ``budget`` (a fresh one when None).
    """

    def fail(msg: str, exc=TensorDataError) -> Exception:
        return exc(msg, member=member, path=path)

    rank = max(len(sizes), len(strides))
    if rank > limits.MAX_TENSOR_RANK:
        raise fail(f"tensor rank {rank} exceeds MAX_TENSOR_RANK={limits.MAX_TENSOR_RANK}", LimitExceededError)
    if len(sizes) != len(strides):
        raise fail(f"size {brief_repr(tuple(sizes))} and stride {brief_repr(tuple(strides))} differ in rank")
    for label, values in (("size", sizes), ("stride", strides), ("storage_offset", (storage_offset,))):
        for v in values:
            if type(v) is not int:
                raise fail(f"{label} {brief_repr(v)} is not a concrete integer")
            if v < 0:
                raise fail(f"{label} {brief_repr(v)} is negative: out of range [0, 2**62)")
            if v >= MAX_DIM and label != "stride":  # strides: below, once the extent is known
                raise fail(f"{label} {brief_repr(v)} out of range [0, 2**62)")
    shape_elements = 1  # numpy's size check ignores zero dims; so must ours
    for n in sizes:
        shape_elements *= n or 1
    if shape_elements > limits.MAX_TENSOR_ELEMENTS:
        raise fail(f"tensor of {shape_elements} elements (sizes {tuple(sizes)}) exceeds "
                   f"MAX_TENSOR_ELEMENTS={limits.MAX_TENSOR_ELEMENTS}", LimitExceededError)
    numel = 0 if 0 in sizes else shape_elements
    if numel == 0:
        if storage_offset > storage_elements:
            raise fail(f"storage_offset {storage_offset} is past storage of {storage_elements} elements")
    else:
        last = storage_offset + sum((n - 1) * s for n, s in zip(sizes, strides))
        if last >= storage_elements:
            raise fail(f"tensor extent (offset {storage_offset}, sizes {tuple(sizes)}, strides {brief_repr(tuple(strides))}) "
                       f"reaches element {brief_repr(last)}, past storage of {storage_elements} elements")
    for s in strides:  # only strides of size-0/1 dims can still be this large
        if s >= MAX_DIM or s * itemsize > INTP_MAX:
            raise fail(f"stride {brief_repr(s)} out of range [0, 2**62) ({itemsize}-byte items)")
    if numel:
        span = last - storage_offset + 1
        if numel > span:
            (budget or ViewBudget()).charge(
                (numel - span) * itemsize, f"view of {numel} elements over {span} stored", member=member, path=path)
    return numel
