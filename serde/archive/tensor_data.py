"""Tensor bytes -> numpy arrays, exactly as torch laid them out, after checking they fit.

A stored tensor is a storage (raw bytes) plus sizes, strides and a storage offset in
elements. The array is a strided, read-only view over those bytes — never a copy — so
shared storages (tied weights, slices) stay shared and non-contiguous tensors keep
torch's strides. dtypes come from ``schema.dtypes`` (bfloat16 and float8 through ``ml_dtypes``,
imported only when a file holds them).

Every view first passes ``codec.tensor_view.check_view``, the one bounds check the pickles
of older releases (``codec.pickle_reader``) pass too; what a view claims beyond its bytes
is charged to a ``ViewBudget`` per member.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from ...schema import dtypes
from ...schema.definitions import ScalarType
from ..codec.tensor_view import INTP_MAX, ViewBudget, check_view
from ..errors import LimitExceededError, TensorDataError

__all__ = ["numpy_dtype", "strided_view", "fake_zeros"]

def numpy_dtype(dtype: ScalarType | int, *, member: str | None = None, path: str | None = None) -> np.dtype:
    """The numpy dtype for a schema ScalarType; a clear error for ones numpy can't hold (complex32)."""
    try:
        st = ScalarType(dtype)
    except ValueError:
        raise TensorDataError(f"unknown dtype {dtype}", member=member, path=path) from None
    np_dtype = dtypes.numpy_dtype(st)
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
    budget: ViewBudget | None = None,
) -> np.ndarray:
    """A read-only array over ``storage`` with torch's sizes/strides/offset (in elements),
    after ``check_view``; never a copy, so an expanded view stays as small as its bytes."""
    itemsize = dtype.itemsize
    nbytes = len(storage) if not isinstance(storage, memoryview) else storage.nbytes
    if nbytes % itemsize:
        raise TensorDataError(f"{nbytes} bytes is not a multiple of the {dtype} item size {itemsize}",
                              member=member, path=path)
    numel = check_view(sizes, strides, storage_offset, nbytes // itemsize, itemsize,
                       member=member, path=path, budget=budget)
    try:
        if numel == 0:
            return np.empty(tuple(sizes), dtype=dtype)
        end = storage_offset + sum((n - 1) * s for n, s in zip(sizes, strides)) + 1
        # as_strided goes through __array_interface__, which loses ml_dtypes types (bfloat16
        # comes back as '<f2'... or fails): stride a same-width raw view, then reinterpret.
        raw_dtype = dtype if dtype.type.__module__ == "numpy" else np.dtype(f"V{itemsize}")
        base = np.frombuffer(storage, dtype=raw_dtype, count=end - storage_offset, offset=storage_offset * itemsize)
        view = np.lib.stride_tricks.as_strided(
            base, shape=tuple(sizes), strides=tuple(s * itemsize for s in strides), writeable=False
        )
        return view if raw_dtype is dtype else view.view(dtype)
    except Exception as e:  # numpy refusing what the checks let through is still the file's fault
        raise TensorDataError(f"cannot view storage: {type(e).__name__}: {e}", member=member, path=path) from None


def fake_zeros(
    dtype: np.dtype,
    sizes: Sequence[int],
    strides: Sequence[int],
    storage_offset: int,
    *,
    member: str | None = None,
    path: str | None = None,
    budget: ViewBudget | None = None,
) -> np.ndarray:
    """Zeros for a tensor whose storage holds no bytes (torch writes none for fake/meta
    tensors and rebuilds zeros), after the same ``check_view``.

    The storage is taken to be exactly as large as the view needs, so the view's elements
    are bounded by ``MAX_TENSOR_ELEMENTS`` and an overlapping (stride-0) one is charged to
    ``budget`` like any other. ``np.zeros`` maps zero pages lazily; an allocation the
    system refuses is a ``LimitExceededError``.
    """
    check_view(sizes, strides, storage_offset, INTP_MAX // dtype.itemsize, dtype.itemsize,
               member=member, path=path, budget=budget)
    try:
        return np.zeros(tuple(sizes), dtype=dtype)
    except MemoryError:
        raise LimitExceededError(f"cannot allocate zeros of sizes {tuple(sizes)} ({dtype}) for an empty storage",
                                 member=member, path=path) from None
    except Exception as e:
        raise TensorDataError(f"cannot make zeros: {type(e).__name__}: {e}", member=member, path=path) from None
