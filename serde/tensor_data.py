"""Tensor bytes -> numpy arrays, exactly as torch laid them out, after checking they fit.

A stored tensor is a storage (raw bytes) plus sizes, strides and a storage offset in
elements. The array is a strided, read-only view over those bytes — never a copy — so
shared storages (tied weights, slices) stay shared and non-contiguous tensors keep
torch's strides. bfloat16 and float8 use ``ml_dtypes``.
"""

from __future__ import annotations

import functools
from typing import Sequence

import numpy as np

from ..schema.definitions import ScalarType
from .errors import TensorDataError
from .limits import MAX_TENSOR_RANK

__all__ = ["numpy_dtype", "strided_view", "MAX_DIM"]

MAX_DIM = 1 << 62
"""Largest size, stride or offset accepted: past it products overflow int64 in any reader."""


_NUMPY_NATIVE = {
    ScalarType.BYTE: np.uint8,
    ScalarType.CHAR: np.int8,
    ScalarType.SHORT: np.int16,
    ScalarType.INT: np.int32,
    ScalarType.LONG: np.int64,
    ScalarType.HALF: np.float16,
    ScalarType.FLOAT: np.float32,
    ScalarType.DOUBLE: np.float64,
    ScalarType.COMPLEXFLOAT: np.complex64,
    ScalarType.COMPLEXDOUBLE: np.complex128,
    ScalarType.BOOL: np.bool_,
    ScalarType.UINT16: np.uint16,
    ScalarType.UINT32: np.uint32,
    ScalarType.UINT64: np.uint64,
}
# Types numpy lacks, by ml_dtypes attribute name. ml_dtypes is imported only when a file
# holds one of them: its import costs more than the rest of a cold load of an fp32 model.
_ML_DTYPES = {
    ScalarType.BFLOAT16: "bfloat16",
    ScalarType.FLOAT8E4M3FN: "float8_e4m3fn",
    ScalarType.FLOAT8E5M2: "float8_e5m2",
    ScalarType.FLOAT8E4M3FNUZ: "float8_e4m3fnuz",
    ScalarType.FLOAT8E5M2FNUZ: "float8_e5m2fnuz",
    ScalarType.FLOAT8E8M0FNU: "float8_e8m0fnu",
}


@functools.cache
def _dtype(st: ScalarType) -> np.dtype | None:
    if st in _NUMPY_NATIVE:
        return np.dtype(_NUMPY_NATIVE[st])
    if st in _ML_DTYPES:
        import ml_dtypes

        t = getattr(ml_dtypes, _ML_DTYPES[st], None)
        return None if t is None else np.dtype(t)
    return None  # UNKNOWN, COMPLEXHALF: no numpy equivalent


def numpy_dtype(dtype: ScalarType | int, *, member: str | None = None, path: str | None = None) -> np.dtype:
    """The numpy dtype for a schema ScalarType; a clear error for ones numpy can't hold (complex32)."""
    try:
        st = ScalarType(dtype)
    except ValueError:
        raise TensorDataError(f"unknown dtype {dtype}", member=member, path=path) from None
    np_dtype = _dtype(st)
    if np_dtype is None:
        raise TensorDataError(f"dtype {st.name} has no numpy equivalent", member=member, path=path)
    return np_dtype


def strided_view(
    storage: memoryview | bytes,
    dtype: np.dtype,
    sizes: Sequence[int],
    strides: Sequence[int],
    storage_offset: int,
    *,
    member: str | None = None,
    path: str | None = None,
) -> np.ndarray:
    """A read-only array over ``storage`` with torch's sizes/strides/offset (in elements)."""

    def fail(msg: str) -> TensorDataError:
        return TensorDataError(msg, member=member, path=path)

    itemsize = dtype.itemsize
    nbytes = len(storage) if not isinstance(storage, memoryview) else storage.nbytes
    if nbytes % itemsize:
        raise fail(f"{nbytes} bytes is not a multiple of the {dtype} item size {itemsize}")
    if len(sizes) != len(strides):
        raise fail(f"{len(sizes)} sizes but {len(strides)} strides")
    if len(sizes) > MAX_TENSOR_RANK:
        raise fail(f"rank {len(sizes)} exceeds {MAX_TENSOR_RANK}")
    for label, values in (("size", sizes), ("stride", strides), ("storage_offset", (storage_offset,))):
        for v in values:
            if type(v) is not int:
                raise fail(f"{label} {v!r} is not a concrete integer")
            if v < 0 or v >= MAX_DIM:
                raise fail(f"{label} {v} out of range [0, 2**62)")
    numel = nbytes // itemsize
    if 0 in sizes:
        if storage_offset > numel:
            raise fail(f"storage_offset {storage_offset} past the {numel}-element storage")
        return np.empty(tuple(sizes), dtype=dtype)
    extent = storage_offset + sum((n - 1) * s for n, s in zip(sizes, strides))
    if extent >= numel:
        raise fail(
            f"tensor extent {extent + 1} elements (offset {storage_offset}, sizes {list(sizes)}, strides {list(strides)}) "
            f"exceeds the {numel}-element storage"
        )
    # as_strided goes through __array_interface__, which loses ml_dtypes types (bfloat16
    # comes back as '<f2'... or fails): stride a same-width raw view, then reinterpret.
    raw_dtype = dtype if dtype.type.__module__ == "numpy" else np.dtype(f"V{itemsize}")
    base = np.frombuffer(storage, dtype=raw_dtype, count=extent + 1 - storage_offset, offset=storage_offset * itemsize)
    view = np.lib.stride_tricks.as_strided(
        base, shape=tuple(sizes), strides=tuple(s * itemsize for s in strides), writeable=False
    )
    return view if raw_dtype is dtype else view.view(dtype)
