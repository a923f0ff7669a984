"""The constants a payload names: each becomes one ``NamedData`` blob of the program, its bytes made
from the program's weights one tensor at a time, in slices, when the file is written.

A ``Blob`` is a float32 array described by its ``rows(a, b)``: its rows a..b along the first axis
of ``stream_shape`` (an array of the blob's byte order; XNNPACK's dims may group them otherwise).
A weight taken as it is, or transposed (a numpy view of the archive's memory map), is read slice
by slice; a filter with a batch norm folded into it is scaled slice by slice. Nothing holds a
whole weight: at most ``COPY_CHUNK`` bytes of one are made at a time, and a weight taken as it is
goes from the memory map to the file uncopied.
"""

from __future__ import annotations

import numpy as np

from ..program import NamedData

__all__ = ["Blob", "weight_blob", "literal_blob", "scaled_blob"]

_F32 = np.dtype("<f4")
COPY_CHUNK = 8 << 20  # bytes of a blob made at once (a transposed or scaled weight); a weight as it is streams uncopied


class Blob:
    def __init__(self, key: str, stream_shape: tuple, rows):
        self.key = key
        self.stream_shape = tuple(int(d) for d in stream_shape)
        self.rows = rows  # (a, b) -> float32 array of stream_shape's rows a..b

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.stream_shape, dtype=np.int64)) * _F32.itemsize

    def chunks(self):
        if not self.stream_shape:
            yield np.asarray(self.rows(0, 1), dtype=_F32).reshape(()).tobytes()
            return
        row = max(1, self.nbytes // max(1, self.stream_shape[0]))
        step = max(1, COPY_CHUNK // row)
        for a in range(0, self.stream_shape[0], step):
            part = self.rows(a, min(a + step, self.stream_shape[0]))
            if isinstance(part, np.ndarray) and part.dtype == _F32 and part.flags.c_contiguous:
                yield memoryview(part.reshape(-1).view(np.uint8))  # the archive's mapped bytes, not copied
            else:
                yield np.ascontiguousarray(part, dtype=_F32).tobytes()

    def named(self) -> NamedData:
        return NamedData(self.key, self.nbytes, self.chunks)


def weight_blob(key: str, arr: np.ndarray) -> Blob:
    """A weight (or a view of it: a transpose) as it is."""
    if arr.dtype != np.float32:
        raise TypeError(f"{key}: a float32 weight was expected, not {arr.dtype}")
    return Blob(key, arr.shape, lambda a, b: arr[a:b])


def literal_blob(key: str, values) -> Blob:
    """A small array computed now (a scalar operand, a batch norm's scale and shift)."""
    arr = np.asarray(values, dtype=np.float32)
    return Blob(key, arr.shape, lambda a, b: arr[a:b] if arr.ndim else arr)


def scaled_blob(key: str, w: np.ndarray, scale: np.ndarray | None, perm: tuple) -> Blob:
    """``(w * scale[:, None, ...]).transpose(perm)`` for a ``perm`` that keeps axis 0 first (a
    filter's output channels): each slice of output channels scaled and transposed on its own."""
    if perm[0] != 0:
        raise ValueError("the first axis must stay first")
    shape = tuple(w.shape[p] for p in perm)
    pad = (slice(None),) + (None,) * (w.ndim - 1)

    def rows(a, b):
        part = w[a:b].astype(np.float32)
        if scale is not None:
            part = part * scale[a:b][pad]
        return part.transpose(perm)

    return Blob(key, shape, rows)
