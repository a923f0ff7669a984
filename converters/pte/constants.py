"""The constant buffers: each weight the plan reads, byte-identical ones sharing one buffer (as
exir writes them: a BatchNorm's zero bias and zero running mean are one buffer).

Only weights of equal byte size are compared: their bytes are hashed one weight at a time
(``_CHUNK`` bytes contiguous at most) and equal digests confirmed byte for byte, so no two
weights are ever copied whole at once.
"""

from __future__ import annotations

import hashlib

import numpy as np

from .program import Plan, TensorValue

__all__ = ["constant_buffers"]

_CHUNK = 64 << 20


def _digest(arr: np.ndarray) -> bytes:
    h = hashlib.blake2b(digest_size=32)
    flat = arr.reshape(-1)
    step = max(1, _CHUNK // max(1, arr.itemsize))
    for i in range(0, flat.size, step):
        h.update(np.ascontiguousarray(flat[i:i + step]).view(np.uint8))
    return h.digest()


def constant_buffers(plan: Plan, weights: dict) -> tuple[list[np.ndarray], dict[str, int]]:
    """(buffer i+1's array, weight placeholder -> its buffer index) for the weights ``plan``
    reads, in first-use order; ``weights``: the program's (``ProgramView.weights``)."""
    used = list(dict.fromkeys(v.weight for v in plan.values if isinstance(v, TensorValue) and v.weight))
    by_size: dict[int, list[str]] = {}
    for name in used:
        by_size.setdefault(weights[name].array.nbytes, []).append(name)
    same_as: dict[str, str] = {}
    for names in by_size.values():
        if len(names) < 2:
            continue
        seen: dict[bytes, list[str]] = {}
        for name in names:
            arr = weights[name].array
            key = _digest(arr)
            twin = next((o for o in seen.get(key, []) if np.array_equal(weights[o].array.view(np.uint8).reshape(-1),
                                                                          arr.view(np.uint8).reshape(-1))), None)
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
