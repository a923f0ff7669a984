"""ONNX ops that generate values from sizes and positions: ConstantOfShape (FILL), Range,
CumSum (the running sum along an axis) and Trilu (a row/column mask built at run time)."""

from __future__ import annotations

import numpy as np

from ..core.emit import Emitter, attrs
from ..core.mappers import maps
from ..core.model import NUMPY_OF
from ..core.model import TensorType as T
from .shape import dims_tensor


@maps("ConstantOfShape")
def constant_of_shape(em: Emitter, node) -> None:
    from onnx import numpy_helper

    v = attrs(node).get("value")
    value = numpy_helper.to_array(v).reshape(()) if v is not None else np.float32(0)
    from ..core.emit import to_compute_array

    em.op("FILL", [em.t(node.input[0]), em.const(to_compute_array(value, "ConstantOfShape's value"))], [em.out()])


@maps("Range")
def range_(em: Emitter, node) -> None:
    em.op("RANGE", [em.t(i) for i in node.input], [em.out()])


@maps("CumSum")
def cumsum(em: Emitter, node) -> None:
    a = attrs(node)
    em.op("CUMSUM", [em.t(node.input[0]), em.t(node.input[1])], [em.out()],
          ("CumsumOptions", {"exclusive": bool(a.get("exclusive", 0)), "reverse": bool(a.get("reverse", 0))}))


@maps("Trilu")
def trilu(em: Emitter, node) -> None:
    """x where ``col - row >= k`` (upper) or ``<= k`` (lower), else 0; the mask is built at run time."""
    x = em.t(node.input[0])
    shape = em.shape(node.input[0])
    k = em.t(node.input[1]) if len(node.input) > 1 and node.input[1] else em.const(np.array(0, np.int32))
    rank = len(shape)
    dims = dims_tensor(em, x, shape, rank - 2, rank)
    zero, one = em.const(np.array(0, np.int32)), em.const(np.array(1, np.int32))

    def arange(i):
        n = em.tmp(T.INT32, [], "n")
        em.op("GATHER", [dims, em.const(np.array(i, np.int32))], [n], ("GatherOptions", {"axis": 0}))
        r = em.tmp(T.INT32, [-1], "range")
        em.op("RANGE", [zero, n, one], [r])
        return r

    r = arange(0)
    rows = em.tmp(T.INT32, [-1, 1], "rows")
    em.op("EXPAND_DIMS", [r, em.const(np.array(1, np.int32))], [rows])
    cols = arange(1)
    diff = em.binary("SUB", cols, rows)
    k_ = em.cast(k, T.INT32)
    mask = em.binary("GREATER_EQUAL" if attrs(node).get("upper", 1) else "LESS_EQUAL", diff, k_, dtype=T.BOOL)
    zeros = em.const(np.zeros((), NUMPY_OF[em.dtype_of(x)]))
    em.op("SELECT_V2", [mask, x, zeros], [em.out()])
