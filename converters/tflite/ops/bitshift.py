"""BitShift (uint8, the one unsigned type pt2x computes) in int32: x * 2^s (LEFT) or
floor(x / 2^s) (RIGHT) with s clamped to 9, where either is already 0 or a multiple of 256,
then CAST back to uint8, which keeps the low 8 bits: the wrap-around of a left shift."""

from __future__ import annotations

import numpy as np

from ...errors import Unsupported
from ..core.emit import Emitter, attrs
from ..core.mappers import maps
from ..core.model import TensorType as T


@maps("BitShift")
def bit_shift(em: Emitter, node) -> None:
    d = attrs(node)["direction"]
    d = d.decode() if isinstance(d, bytes) else d
    x, s = em.t(node.input[0]), em.t(node.input[1])
    if em.dtype_of(x) != T.UINT8 or em.dtype_of(s) != T.UINT8:
        raise Unsupported("BitShift of a type other than uint8 (uint16/32/64 are not computed)")
    s32 = em.binary("MINIMUM", em.cast(s, T.INT32), em.const(np.array(9, np.int32)))
    scale = em.binary("POW", em.const(np.array(2, np.int32)), s32)
    x32 = em.cast(x, T.INT32)
    if d == "LEFT":
        y = em.binary("MUL", x32, scale)
    else:
        y = em.binary("FLOOR_DIV", x32, scale)
    em.op("CAST", [y], [em.out()], ("CastOptions", {"in_data_type": T.INT32, "out_data_type": T.UINT8}))
