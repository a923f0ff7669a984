"""Initializers whose bytes stay where they are until the model is written.

A weight of a .pt2 is a view of the archive's memory map. Copying it into a ``TensorProto``
while converting would hold every weight a second time (and a third when the model is
serialised), so a conversion that is given a ``LazyInitializers`` keeps each large constant as:

* a **skeleton** in the graph: a ``TensorProto`` with its name, type and dims, no bytes,
  ``data_location = EXTERNAL`` and ``location = "pt2x-lazy:<token>"``, ``offset = <index>``;
  everything that reads types and shapes (shape inference, the checker, the passes) reads it as
  it reads any initializer;
* the **array** in the store: the memory-mapped view itself (a transpose or a reshape of a weight
  is a view too), or a ``Deferred`` computation evaluated one tensor at a time.

``array_of(t)`` is the one way to read an initializer's values: the store's array for a
skeleton, ``numpy_helper.to_array`` otherwise. The writer (``onnx/writer.py``) streams each
array into the output once. A skeleton never reaches a file: the writer replaces it.
"""

from __future__ import annotations

import itertools
import weakref

import numpy as np
from onnx import TensorProto, numpy_helper

from ..errors import ConversionError

__all__ = ["LazyInitializers", "Deferred", "LAZY_PREFIX", "MIN_LAZY_BYTES", "is_lazy", "array_of",
           "store_of"]

LAZY_PREFIX = "pt2x-lazy:"
MIN_LAZY_BYTES = 1 << 16  # smaller constants are copied into the graph: they are cheap and folds read them
_tokens = itertools.count()
_live: "weakref.WeakValueDictionary[str, LazyInitializers]" = weakref.WeakValueDictionary()


class Deferred:
    """An array computed when it is needed (``compute()``), of a known dtype and shape: a cast or
    a scaled copy of a weight, made one tensor at a time by whoever reads it (the writer)."""

    def __init__(self, shape, dtype, compute):
        self.shape = tuple(int(s) for s in shape)
        self.dtype = np.dtype(dtype)
        self.compute = compute

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) * self.dtype.itemsize

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    def __array__(self, dtype=None, copy=None):
        arr = np.asarray(self.compute())
        if arr.shape != self.shape or arr.dtype != self.dtype:
            raise ConversionError(f"a deferred constant computed {arr.dtype}{list(arr.shape)}, "
                                  f"not the declared {self.dtype}{list(self.shape)}")
        return arr if dtype is None else arr.astype(dtype, copy=False)


class LazyInitializers:
    """The arrays behind one conversion's skeleton initializers. Skeletons find their store
    through its token while the store is alive (the conversion and its writer hold it)."""

    def __init__(self):
        self.token = f"{LAZY_PREFIX}{next(_tokens)}"
        self.arrays: list = []  # np.ndarray (often a memory-mapped view) or Deferred
        _live[self.token] = self

    def skeleton(self, name: str, arr, data_type: int) -> TensorProto:
        """A bytes-free ``TensorProto`` standing for ``arr`` (kept, not copied)."""
        t = TensorProto(name=name, data_type=data_type, dims=list(arr.shape))
        self.adopt(t, arr)
        return t

    def adopt(self, t: TensorProto, arr) -> None:
        """Make ``t`` (an initializer already in a graph) a skeleton standing for ``arr``."""
        t.ClearField("raw_data")
        del t.external_data[:]
        t.data_location = TensorProto.EXTERNAL
        for key, value in (("location", self.token), ("offset", str(len(self.arrays)))):
            e = t.external_data.add()
            e.key, e.value = key, value
        self.arrays.append(arr)

    def array(self, t: TensorProto):
        """The array behind skeleton ``t`` (a ``Deferred`` stays deferred)."""
        return self.arrays[_index(t)]


def _fields(t: TensorProto) -> dict[str, str]:
    return {e.key: e.value for e in t.external_data}


def _index(t: TensorProto) -> int:
    return int(_fields(t)["offset"])


def is_lazy(t: TensorProto) -> bool:
    return t.data_location == TensorProto.EXTERNAL and _fields(t).get("location", "").startswith(LAZY_PREFIX)


def store_of(t: TensorProto) -> LazyInitializers:
    token = _fields(t)["location"]
    store = _live.get(token)
    if store is None:
        raise ConversionError(f"initializer {t.name!r}: its weights belonged to a conversion that has ended "
                              f"({token}); convert again, or write the model with to_onnx(src, dst)")
    return store


def array_of(t: TensorProto) -> np.ndarray:
    """The values of initializer ``t``: the store's array for a skeleton (a read-only view:
    never write to it), else the tensor's own data."""
    if is_lazy(t):
        return np.asarray(store_of(t).array(t))
    return numpy_helper.to_array(t)
