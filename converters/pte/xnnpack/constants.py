"""The constants a payload names: each becomes one ``NamedData`` blob of the program, its bytes made
from the program's weights one tensor at a time, in slices, when the file is written.

A ``Blob`` is an array (float32 or float16, or an int8 filter, int32 bias of the int8 nodes) described by its ``rows(a, b)``: its rows a..b along the first axis
of ``stream_shape`` (an array of the blob's byte order; XNNPACK's dims may group them otherwise).
A weight taken as it is, or transposed (a numpy view of the archive's memory map), is read slice
by slice; a filter with a batch norm folded into it is scaled slice by slice. Nothing holds a
whole weight: at most ``COPY_CHUNK`` bytes of one are made at a time, and a weight taken as it is
goes from the memory map to the file uncopied.
"""

from __future__ import annotations

import numpy as np

from ..program import NamedData

__all__ = ["Blob", "weight_blob", "literal_blob", "scaled_blob", "int8_blob", "as_float16"]

_F32 = np.dtype("<f4")
COPY_CHUNK = 8 << 20  # bytes of a blob made at once (a transposed or scaled weight); a weight as it is streams uncopied


class Blob:
    def __init__(self, key: str, stream_shape: tuple, rows, dtype=_F32):
        self.key = key
        self.stream_shape = tuple(int(d) for d in stream_shape)
        self.rows = rows  # (a, b) -> array of stream_shape's rows a..b
        self.dtype = np.dtype(dtype).newbyteorder("<")

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.stream_shape, dtype=np.int64)) * self.dtype.itemsize

    def chunks(self):
        if not self.stream_shape:
            yield np.asarray(self.rows(0, 1), dtype=self.dtype).reshape(()).tobytes()
            return
        row = max(1, self.nbytes // max(1, self.stream_shape[0]))
        step = max(1, COPY_CHUNK // row)
        for a in range(0, self.stream_shape[0], step):
            part = self.rows(a, min(a + step, self.stream_shape[0]))
            if part.dtype.kind != self.dtype.kind:
                raise TypeError(f"{self.key}: {part.dtype} rows for a {self.dtype} blob")
            if isinstance(part, np.ndarray) and part.dtype == self.dtype and part.flags.c_contiguous:
                yield memoryview(part.reshape(-1).view(np.uint8))  # the archive's mapped bytes, not copied
            else:
                yield np.ascontiguousarray(part, dtype=self.dtype).tobytes()

    def named(self) -> NamedData:
        return NamedData(self.key, self.nbytes, self.chunks)


def weight_blob(key: str, arr: np.ndarray) -> Blob:
    """A weight (or a view of it: a transpose) as it is, float32 or float16."""
    if arr.dtype not in (np.float32, np.float16):
        raise TypeError(f"{key}: a float32 or float16 weight was expected, not {arr.dtype}")
    return Blob(key, arr.shape, lambda a, b: arr[a:b], arr.dtype)


def as_float16(blob: Blob) -> Blob:
    """A float32 blob's values rounded to float16 (a constant of a float16 partition), slice by slice."""
    return Blob(f"{blob.key}|f16", blob.stream_shape, blob.rows, np.float16)


def literal_blob(key: str, values, dtype=_F32) -> Blob:
    """A small array computed now (a scalar operand, a batch norm's scale and shift, an int8
    node's scales or int32 bias)."""
    arr = np.asarray(values, dtype=dtype)
    return Blob(key, arr.shape, lambda a, b: arr[a:b] if arr.ndim else arr, dtype)


def int8_blob(key: str, w: np.ndarray, perm: tuple | None = None) -> Blob:
    """An int8 weight (a view of the archive's), transposed by ``perm`` (its first axis kept
    first, so each slice of rows is transposed on its own), as it is."""
    if w.dtype != np.int8:
        raise TypeError(f"{key}: an int8 weight was expected, not {w.dtype}")
    perm = tuple(range(w.ndim)) if perm is None else perm
    if perm[0] != 0:
        raise ValueError("the first axis must stay first")
    return Blob(key, tuple(w.shape[p] for p in perm), lambda a, b: w[a:b].transpose(perm), np.int8)


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
