"""CumProd along a constant axis of static length n: a Hillis-Steele scan, ceil(log2 n) steps of
``y = y * shift(y, s)`` for s = 1, 2, 4, ... where ``shift`` moves the values s places along
the axis and fills with ones (STRIDED_SLICE + PADV2). ``exclusive`` shifts the result once
more; ``reverse`` scans the reversed axis (REVERSE_V2 before and after). The products are
grouped differently from a left-to-right loop: equal up to float rounding, exact for integers.
"""

from __future__ import annotations

import numpy as np

from ...errors import Unsupported
from ..core.emit import Emitter, attrs
from ..core.mappers import maps
from ..core.model import NUMPY_OF
from ..core.model import TensorType as T
from .shape import _axis



def _shifted(em: Emitter, y: int, axis: int, rank: int, n: int, s: int) -> int:
    """y moved ``s`` places up ``axis`` (length n), ones in front."""
    begin, end = np.zeros(rank, np.int32), np.zeros(rank, np.int32)
    end[axis] = n - s
    mask = sum(1 << i for i in range(rank) if i != axis)
    head = em.tmp(em.dtype_of(y), None, "head")
    em.op("STRIDED_SLICE", [y, em.const(begin), em.const(end), em.const(np.ones(rank, np.int32))], [head],
          ("StridedSliceOptions", {"begin_mask": mask, "end_mask": mask}))
    pads = np.zeros((rank, 2), np.int32)
    pads[axis, 0] = s
    out = em.tmp(em.dtype_of(y), em.shape_of(y), "shifted")
    em.op("PADV2", [head, em.const(pads), em.const(np.ones((), NUMPY_OF[em.dtype_of(y)]))], [out])
    return out


def _reversed(em: Emitter, x: int, axis: int) -> int:
    y = em.tmp(em.dtype_of(x), em.shape_of(x), "reversed")
    em.op("REVERSE_V2", [x, em.const(np.array([axis], np.int32))], [y])
    return y


@maps("CumProd")
def cumprod(em: Emitter, node) -> None:
    a = attrs(node)
    shape = em.shape(node.input[0])
    axis_v = em.const_value(node.input[1])
    if axis_v is None or shape is None:
        raise Unsupported("CumProd with an axis computed at run time, or of unknown rank")
    rank = len(shape)
    axis = _axis(int(np.asarray(axis_v).reshape(())), rank)
    n = shape[axis]
    if n < 0:
        raise Unsupported("CumProd along a dim known only at run time (the scan's steps depend on it)")
    y = em.t(node.input[0])
    if em.dtype_of(y) not in (T.FLOAT32, T.INT32):
        raise Unsupported("CumProd of a type other than float and int32/int64")
    reverse = bool(a.get("reverse", 0))
    if reverse:
        y = _reversed(em, y, axis)
    s = 1
    while s < n:
        y = em.binary("MUL", y, _shifted(em, y, axis, rank, n, s))
        s *= 2
    if a.get("exclusive", 0) and n > 0:
        y = _shifted(em, y, axis, rank, n, 1)
    if reverse:
        y = _reversed(em, y, axis)
    em.bind(node.output[0], y)
