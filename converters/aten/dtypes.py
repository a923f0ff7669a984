"""Scalar types for lowerings: numpy dtypes, categories and torch's type promotion.

The facts (numpy names, item sizes, categories) come from ``schema.dtypes``; this module
adds the promotion rules.

Lowerings need promotion where the program does not spell the result type out: the
inputs of a comparison or of ``where`` are promoted before the op, but only the (bool)
output carries a dtype in ``tensor_values``. The rules are torch's (``c10::promoteTypes``
and ``at::native::result_type``): categories bool < integer < floating < complex; inside a
category the wider type wins, uint8 with int8 gives int16, float16 with bfloat16 gives
float32; zero-dim tensors and Python scalars only decide the result when they are of a
higher category than the dimensioned tensors (a Python float then means the default
dtype, float32; a Python int means int64).
"""

from __future__ import annotations

import numpy as np

from ...schema import dtypes
from ...schema.definitions import ScalarType as ST

__all__ = [
    "ST", "to_numpy", "from_numpy", "category", "is_floating", "is_integral", "is_complex",
    "itemsize", "promote_types", "result_type", "DEFAULT_FLOAT",
]

DEFAULT_FLOAT = ST.FLOAT


def to_numpy(st: ST) -> np.dtype:
    np_dtype = dtypes.numpy_dtype(ST(st))
    if np_dtype is None:
        raise ValueError(f"no numpy dtype for {ST(st).name}")
    return np_dtype


def from_numpy(dt) -> ST:
    st = dtypes.from_numpy(dt)
    if st is None:
        raise ValueError(f"no ScalarType for numpy dtype {np.dtype(dt)}")
    return st


def category(st: ST) -> int:
    """0 bool, 1 integer, 2 floating, 3 complex (``schema.dtypes.CATEGORIES``)."""
    try:
        return dtypes.CATEGORIES.index(dtypes.row(st).category)
    except ValueError:
        raise ValueError(f"no category for {ST(st).name}") from None


def _in_category(st: ST, name: str) -> bool:
    try:
        return dtypes.row(st).category == name
    except ValueError:
        return False


def is_floating(st: ST) -> bool:
    return _in_category(st, "float")


def is_integral(st: ST, include_bool: bool = False) -> bool:
    return _in_category(st, "int") or (include_bool and st == ST.BOOL)


def is_complex(st: ST) -> bool:
    return _in_category(st, "complex")


def itemsize(st: ST) -> int:
    return dtypes.row(st).itemsize


def promote_types(a: ST, b: ST) -> ST:
    """``torch.promote_types`` for the types torch promotes (not the float8s)."""
    a, b = ST(a), ST(b)
    if a == b:
        return a
    ca, cb = category(a), category(b)
    if ca != cb:
        hi, lo = (a, b) if ca > cb else (b, a)
        if category(hi) == 3 and lo == ST.DOUBLE:
            return ST.COMPLEXDOUBLE
        return hi
    if ca == 2:
        if {a, b} == {ST.HALF, ST.BFLOAT16}:
            return ST.FLOAT
        return a if itemsize(a) > itemsize(b) else b
    if ca == 1:
        return from_numpy(np.promote_types(to_numpy(a), to_numpy(b)))
    return a if itemsize(a) > itemsize(b) else b


def _scalar_type(v) -> ST:
    if isinstance(v, (bool, np.bool_)):
        return ST.BOOL
    if isinstance(v, (int, np.integer)):
        return ST.LONG
    if isinstance(v, (float, np.floating)):
        return DEFAULT_FLOAT
    if isinstance(v, complex):
        return ST.COMPLEXFLOAT
    raise TypeError(f"not a scalar: {v!r}")


def _to_complex(st: ST) -> ST:
    return {ST.HALF: ST.COMPLEXHALF, ST.DOUBLE: ST.COMPLEXDOUBLE}.get(st, ST.COMPLEXFLOAT)


def _combine(higher: ST | None, lower: ST | None) -> ST | None:
    """c10's ``combine_categories``: ``higher`` (dimensioned tensors) keeps its type unless
    ``lower`` (zero-dim tensors, then Python scalars) is of a higher category."""
    if higher is None:
        return lower
    if lower is None:
        return higher
    if is_complex(higher):
        return higher
    if is_complex(lower):
        return _to_complex(higher) if is_floating(higher) else lower
    if is_floating(higher):
        return higher
    if higher == ST.BOOL or is_floating(lower):
        return promote_types(higher, lower)
    return higher


def result_type(*operands) -> ST:
    """``torch.result_type`` over operands: a ``ScalarType`` (a dimensioned tensor), a
    ``(ScalarType, rank)`` pair (rank 0 means a zero-dim tensor), or a Python number."""
    dims = zero = wrapped = None
    for op in operands:
        if isinstance(op, tuple):
            st, rank = ST(op[0]), op[1]
            if rank == 0:
                zero = st if zero is None else promote_types(zero, st)
                continue
        elif isinstance(op, ST):
            st = op
        else:
            st = _scalar_type(op)
            wrapped = st if wrapped is None else promote_types(wrapped, st)
            continue
        dims = st if dims is None else promote_types(dims, st)
    out = _combine(dims, _combine(zero, wrapped))
    if out is None:
        raise ValueError("result_type of no operands")
    return out
