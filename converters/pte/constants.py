"""The constant buffers: each weight the plan reads, byte-identical ones sharing one buffer (as
exir writes them: a BatchNorm's zero bias and zero running mean are one buffer).

Only weights of one dtype, shape and first elements (``_HEAD`` of them: random weights differ
there, so almost none is read further) are compared: their bytes are hashed one weight at a time
(``arrays.byte_chunks``) and equal digests confirmed byte for byte (a -0.0 is not a 0.0), so no
weight is ever copied whole.
"""

from __future__ import annotations

import hashlib

import numpy as np

from .arrays import byte_chunks
from .program import Plan, TensorValue

__all__ = ["constant_buffers", "shared_buffers", "used_weights"]

_COMPARE = 1 << 20  # bytes compared at once
_HEAD = 16  # leading elements a weight is grouped by before it is hashed whole


def _digest(arr: np.ndarray) -> bytes:
    h = hashlib.blake2b(digest_size=32)
    for part in byte_chunks(arr):
        h.update(part)
    return h.digest()


def _head(arr: np.ndarray) -> bytes:
    """The first ``_HEAD`` elements' bytes, little-endian (a copy of those elements only)."""
    return np.asarray(arr.flat[:_HEAD]).astype(arr.dtype.newbyteorder("<"), copy=False).tobytes()


def _same_bytes(a: np.ndarray, b: np.ndarray) -> bool:
    """Byte equality of two weights of one dtype and shape (their chunks align), ``_COMPARE``
    bytes at a time."""
    for x, y in zip(byte_chunks(a), byte_chunks(b)):
        x, y = memoryview(x).cast("B"), memoryview(y).cast("B")
        if len(x) != len(y):
            return False
        if any(bytes(x[i:i + _COMPARE]) != bytes(y[i:i + _COMPARE]) for i in range(0, len(x), _COMPARE)):
            return False
    return True


def used_weights(plan: Plan) -> list[str]:
    """The weight placeholders ``plan`` reads, in first-use order."""
    return list(dict.fromkeys(v.weight for v in plan.values if isinstance(v, TensorValue) and v.weight))


def constant_buffers(plan: Plan, weights: dict, leave_out=frozenset()) -> tuple[list[np.ndarray], dict[str, int]]:
    """(buffer i+1's array, weight placeholder -> its buffer index) for the weights ``plan``
    reads, in first-use order, but those in ``leave_out``; ``weights``: the program's
    (``ProgramView.weights``)."""
    return shared_buffers([name for name in used_weights(plan) if name not in leave_out], weights)


def shared_buffers(used: list[str], weights: dict) -> tuple[list[np.ndarray], dict[str, int]]:
    """(buffer i+1's array, placeholder -> its buffer index) for the weight placeholders ``used``,
    in their order, byte-identical ones sharing a buffer."""
    by_size: dict[tuple, list[str]] = {}
    for name in used:
        arr = weights[name].array
        by_size.setdefault((arr.dtype.str, arr.shape, _head(arr)), []).append(name)
    same_as: dict[str, str] = {}
    for names in by_size.values():
        if len(names) < 2:
            continue
        seen: dict[bytes, list[str]] = {}
        for name in names:
            arr = weights[name].array
            key = _digest(arr)
            twin = next((o for o in seen.get(key, []) if _same_bytes(weights[o].array, arr)), None)
            if twin is not None:
                same_as[name] = twin
            else:
                seen.setdefault(key, []).append(name)
    arrays, buffer_of = [], {}
    for name in used:
        if name in same_as:
            buffer_of[name] = buffer_of[same_as[name]]
            continue
        arrays.append(weights[name].array)
        buffer_of[name] = len(arrays)
    return arrays, buffer_of
