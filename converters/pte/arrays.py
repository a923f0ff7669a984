"""A weight's bytes as ExecuTorch stores them (C order, little-endian), in slices along its first
axis of at most ``CHUNK`` bytes: a weight that is not contiguous in the archive (a transposed or
sliced view of its storage) is never copied whole."""

from __future__ import annotations

from typing import Iterator

import numpy as np

__all__ = ["CHUNK", "byte_chunks"]

CHUNK = 64 << 20


def byte_chunks(arr: np.ndarray, chunk: int = CHUNK) -> Iterator[memoryview | bytes]:
    little = arr.dtype.newbyteorder("<")
    if arr.ndim == 0:
        yield arr.astype(little).tobytes()
        return
    if arr.flags.c_contiguous and arr.dtype == little:
        yield memoryview(arr.reshape(-1).view(np.uint8))
        return
    step = max(1, chunk // max(1, arr[:1].nbytes))
    for i in range(0, arr.shape[0], step):
        yield np.ascontiguousarray(arr[i:i + step]).astype(little, copy=False).tobytes()
