"""Weights packed into a segment and streamed into a file: the one way pt2x writes weight bytes
for ExecuTorch, whether the segment is the ``.pte``'s constant segment or the ``.ptd``'s data.

A delegate's constant (a named blob, ``program.NamedData``) is written by ``stream_blob``, its
bytes made in pieces as they are written. ``pack(arrays, alignment)`` places each array at the next ``alignment``-aligned offset from the
segment's start; ``stream(f, packing)`` writes them there, zero padding between, each one's bytes
streamed from its source (the archive's memory map) by ``arrays.byte_chunks``: nothing holds all
of the weights, or a whole strided one, at once.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import ConversionError
from .arrays import byte_chunks

__all__ = ["Packing", "pack", "stream", "stream_blob", "align"]


def align(n: int, a: int) -> int:
    return (n + a - 1) // a * a


@dataclass
class Packing:
    arrays: list  # numpy arrays, in segment order
    offsets: list  # offsets[i]: arrays[i]'s offset from the segment's start
    size: int  # the segment's bytes (the last array's end)


def pack(arrays: list, alignment: int) -> Packing:
    offsets, at = [], 0
    for a in arrays:
        at = align(at, alignment)
        offsets.append(at)
        at += a.nbytes
    return Packing(list(arrays), offsets, at)


def stream(f, packing: Packing) -> None:
    """The segment's bytes into ``f`` (positioned at the segment's start)."""
    at = 0
    for arr, off in zip(packing.arrays, packing.offsets):
        f.write(b"\0" * (off - at))
        _write_array(f, arr)
        at = off + arr.nbytes


def _write_array(f, arr: np.ndarray) -> None:
    """One weight's bytes, little-endian, C order, at most ``arrays.CHUNK`` of them copied at once."""
    for part in byte_chunks(arr):
        f.write(part)


def stream_blob(f, blob) -> None:
    """A named blob's bytes (``program.NamedData``: a delegate's constant, made in pieces as they
    are written) into ``f``; ``ConversionError`` when they are not the size planned."""
    written = 0
    for part in blob.chunks():
        f.write(part)
        written += memoryview(part).nbytes
    if written != blob.nbytes:
        raise ConversionError(f"the named blob {blob.key!r} wrote {written} bytes, {blob.nbytes} planned")
