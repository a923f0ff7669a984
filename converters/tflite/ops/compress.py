"""Compress: the entries of ``input`` along ``axis`` (the flattened input without one) whose
``condition`` is true, in order: WHERE gives their positions (int64 [k, 1]), a GATHER takes
them. ``condition`` may be shorter than the axis (the rest is dropped, as ONNX defines)."""

from __future__ import annotations

import numpy as np

from ...errors import Unsupported
from ..core.emit import Emitter, attrs
from ..core.mappers import maps
from ..core.model import TensorType as T
from .shape import _axis


@maps("Compress")
def compress(em: Emitter, node) -> None:
    a = attrs(node)
    x = em.t(node.input[0])
    if em.rank(node.input[1]) != 1:
        raise Unsupported("Compress with a condition that is not 1-D")
    if "axis" in a:
        axis = _axis(int(a["axis"]), em.rank(node.input[0]))
    else:
        flat = em.tmp(em.dtype_of(x), [-1], "flat")
        em.op("RESHAPE", [x, em.const(np.array([-1], np.int32))], [flat])
        x, axis = flat, 0
    cond = em.cast(em.t(node.input[1]), T.BOOL)
    where = em.tmp(T.INT64, [-1, 1], "positions")
    em.op("WHERE", [cond], [where])
    idx = em.tmp(T.INT32, [-1], "positions")
    em.op("RESHAPE", [em.cast(where, T.INT32), em.const(np.array([-1], np.int32))], [idx])
    em.op("GATHER", [x, idx], [em.out()], ("GatherOptions", {"axis": axis}))
