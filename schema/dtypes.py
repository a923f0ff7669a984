"""The one table of scalar types: each schema ``ScalarType`` with its names and sizes elsewhere.

One row per ``ScalarType`` (all but ``UNKNOWN``, which names no type): the torch dtype
attribute (``torch.float32`` -> ``"float32"``, also the name a pickle writes as
``GLOBAL 'torch float32'``), the numpy dtype name (``None`` where numpy has none:
complex32), whether that name is an ``ml_dtypes`` type (bfloat16, the float8s), the item
size in bytes, the category torch's type promotion orders (bool < int < float < complex) and
the legacy typed storage class ``torch.save`` pickled before untyped storages
(``FloatStorage``).

Pure data and small lookups: nothing here imports torch. numpy is imported only by
``numpy_dtype``/``from_numpy``, and ``ml_dtypes`` only when a row that needs it is asked
for, so reading an fp32 model never imports it. The torch bridge maps the torch-name column
to torch objects itself (``serde.torch.ops``).

``TORCH_ONLY_DTYPES`` lists the torch dtypes the export schema cannot express (quantized,
sub-byte, bit types): a pickle may name them, and pt2x refuses to make arrays of them.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, NamedTuple

from .definitions import ScalarType

if TYPE_CHECKING:
    import numpy as np

__all__ = [
    "DtypeRow", "ROWS", "CATEGORIES", "TORCH_ONLY_DTYPES", "TORCH_ONLY_STORAGE_CLASSES",
    "row", "by_torch_name", "by_storage_class", "by_numpy_name", "numpy_dtype", "from_numpy",
]

CATEGORIES = ("bool", "int", "float", "complex")
"""torch's promotion categories, lowest first."""


class DtypeRow(NamedTuple):
    scalar_type: ScalarType
    torch_name: str  # attribute of the torch module: torch.<torch_name>
    numpy_name: str | None  # numpy dtype name (np.dtype(x).name); None: numpy has no such type
    ml_dtypes: bool  # numpy_name is an attribute of ml_dtypes, not of numpy
    itemsize: int  # bytes per element
    category: str  # one of CATEGORIES
    storage_class: str | None  # legacy typed storage class (torch.FloatStorage); None: there is none


_S = ScalarType
ROWS: tuple[DtypeRow, ...] = (
    #        schema            torch name         numpy name         ml_dtypes size category   storage class
    DtypeRow(_S.BYTE,          "uint8",           "uint8",           False, 1, "int",     "ByteStorage"),
    DtypeRow(_S.CHAR,          "int8",            "int8",            False, 1, "int",     "CharStorage"),
    DtypeRow(_S.SHORT,         "int16",           "int16",           False, 2, "int",     "ShortStorage"),
    DtypeRow(_S.INT,           "int32",           "int32",           False, 4, "int",     "IntStorage"),
    DtypeRow(_S.LONG,          "int64",           "int64",           False, 8, "int",     "LongStorage"),
    DtypeRow(_S.HALF,          "float16",         "float16",         False, 2, "float",   "HalfStorage"),
    DtypeRow(_S.FLOAT,         "float32",         "float32",         False, 4, "float",   "FloatStorage"),
    DtypeRow(_S.DOUBLE,        "float64",         "float64",         False, 8, "float",   "DoubleStorage"),
    DtypeRow(_S.COMPLEXHALF,   "complex32",       None,              False, 4, "complex", None),
    DtypeRow(_S.COMPLEXFLOAT,  "complex64",       "complex64",       False, 8, "complex", "ComplexFloatStorage"),
    DtypeRow(_S.COMPLEXDOUBLE, "complex128",      "complex128",      False, 16, "complex", "ComplexDoubleStorage"),
    DtypeRow(_S.BOOL,          "bool",            "bool",            False, 1, "bool",    "BoolStorage"),
    DtypeRow(_S.BFLOAT16,      "bfloat16",        "bfloat16",        True,  2, "float",   "BFloat16Storage"),
    DtypeRow(_S.UINT16,        "uint16",          "uint16",          False, 2, "int",     None),
    DtypeRow(_S.FLOAT8E4M3FN,  "float8_e4m3fn",   "float8_e4m3fn",   True,  1, "float",   None),
    DtypeRow(_S.FLOAT8E5M2,    "float8_e5m2",     "float8_e5m2",     True,  1, "float",   None),
    DtypeRow(_S.FLOAT8E4M3FNUZ, "float8_e4m3fnuz", "float8_e4m3fnuz", True, 1, "float",   None),
    DtypeRow(_S.FLOAT8E5M2FNUZ, "float8_e5m2fnuz", "float8_e5m2fnuz", True, 1, "float",   None),
    DtypeRow(_S.FLOAT8E8M0FNU, "float8_e8m0fnu",  "float8_e8m0fnu",  True,  1, "float",   None),
    DtypeRow(_S.UINT32,        "uint32",          "uint32",          False, 4, "int",     None),
    DtypeRow(_S.UINT64,        "uint64",          "uint64",          False, 8, "int",     None),
)  # fmt: skip

TORCH_ONLY_DTYPES = frozenset(
    "float4_e2m1fn_x2 bits1x8 bits2x4 bits4x2 bits8 bits16 qint8 qint32 quint8 quint4x2 quint2x4 "
    "uint1 uint2 uint3 uint4 uint5 uint6 uint7 int1 int2 int3 int4 int5 int6 int7".split()
)
"""torch dtype names with no ``ScalarType`` (and no numpy type)."""

TORCH_ONLY_STORAGE_CLASSES = {
    "QInt8Storage": "qint8", "QInt32Storage": "qint32", "QUInt8Storage": "quint8",
    "QUInt4x2Storage": "quint4x2", "QUInt2x4Storage": "quint2x4",
}
"""Legacy typed storage classes of ``TORCH_ONLY_DTYPES`` -> their torch dtype name."""

_BY_SCALAR_TYPE = {r.scalar_type: r for r in ROWS}
_BY_TORCH_NAME = {r.torch_name: r for r in ROWS}
_BY_STORAGE_CLASS = {r.storage_class: r for r in ROWS if r.storage_class}
_BY_NUMPY_NAME = {r.numpy_name: r for r in ROWS if r.numpy_name}


def row(st: ScalarType | int) -> DtypeRow:
    """The row of a ScalarType; ``ValueError`` for UNKNOWN or a number that is no ScalarType."""
    r = _BY_SCALAR_TYPE.get(st)
    if r is None:
        raise ValueError(f"no dtype for ScalarType {st!r}")
    return r


def by_torch_name(name: str) -> DtypeRow | None:
    """The row whose torch dtype is ``torch.<name>``, or None."""
    return _BY_TORCH_NAME.get(name)


def by_storage_class(name: str) -> DtypeRow | None:
    """The row of a legacy typed storage class (``FloatStorage``), or None."""
    return _BY_STORAGE_CLASS.get(name)


def by_numpy_name(name: str) -> DtypeRow | None:
    """The row whose numpy (or ml_dtypes) dtype is named ``name``, or None."""
    return _BY_NUMPY_NAME.get(name)


@functools.cache
def numpy_dtype(st: ScalarType) -> np.dtype | None:
    """The numpy dtype of a ScalarType, or None where numpy has none (complex32, UNKNOWN,
    or a type this ml_dtypes release lacks). Imports ml_dtypes only for the rows that need it."""
    r = _BY_SCALAR_TYPE.get(st)
    if r is None or r.numpy_name is None:
        return None
    import numpy as np

    if r.ml_dtypes:
        import ml_dtypes

        t = getattr(ml_dtypes, r.numpy_name, None)
        return None if t is None else np.dtype(t)
    return np.dtype(r.numpy_name)


def from_numpy(dt) -> ScalarType | None:
    """The ScalarType of a numpy dtype (native byte order), or None."""
    import numpy as np

    dt = np.dtype(dt)
    r = _BY_NUMPY_NAME.get(dt.name)
    if r is None or numpy_dtype(r.scalar_type) != dt:
        return None
    return r.scalar_type
