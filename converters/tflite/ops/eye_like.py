"""EyeLike: ones where column - row == k over the 2-D input's (run-time) shape, zeros elsewhere,
in ``dtype`` (default: the input's type), built with RANGE and EQUAL."""

from __future__ import annotations

import numpy as np

from ...errors import Unsupported
from ..core.emit import Emitter, attrs, compute_type
from ..core.mappers import maps
from ..core.model import TensorType as T
from .shape import shape_tensor


def _arange(em: Emitter, dims: int, i: int) -> int:
    n = em.tmp(T.INT32, [], "n")
    em.op("GATHER", [dims, em.const(np.array(i, np.int32))], [n], ("GatherOptions", {"axis": 0}))
    r = em.tmp(T.INT32, [-1], "range")
    em.op("RANGE", [em.const(np.array(0, np.int32)), n, em.const(np.array(1, np.int32))], [r])
    return r


@maps("EyeLike")
def eye_like(em: Emitter, node) -> None:
    a = attrs(node)
    if em.rank(node.input[0]) != 2:
        raise Unsupported("EyeLike of a value that is not 2-D")
    dtype = compute_type(int(a["dtype"]), "EyeLike's dtype") if "dtype" in a else em.dtype_of(em.t(node.input[0]))
    dims = shape_tensor(em, em.t(node.input[0]))
    rows = em.tmp(T.INT32, [-1, 1], "rows")
    em.op("EXPAND_DIMS", [_arange(em, dims, 0), em.const(np.array(1, np.int32))], [rows])
    diff = em.binary("SUB", _arange(em, dims, 1), rows)
    on = em.binary("EQUAL", diff, em.const(np.array(int(a.get("k", 0)), np.int32)), dtype=T.BOOL)
    em.op("CAST", [on], [em.out()], ("CastOptions", {"in_data_type": T.BOOL, "out_data_type": dtype}))
