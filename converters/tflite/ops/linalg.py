"""MatMul and Gemm: FULLY_CONNECTED when the right operand is a constant matrix (weights
transposed once, at conversion), BATCH_MATMUL otherwise (it broadcasts batch dims)."""

from __future__ import annotations

import numpy as np

from ...errors import Unsupported
from ..core.emit import Emitter, attrs, to_compute_array
from ..core.mappers import maps
from ..core.model import TensorType as T



def _fully_connected(em: Emitter, x: int, w_kn: np.ndarray, bias: np.ndarray | None, out: int) -> None:
    """out = x @ w_kn (+ bias) over x's last dim, other dims kept."""
    w = em.const(np.ascontiguousarray(to_compute_array(w_kn, "the weight").T))
    b = em.const(to_compute_array(bias, "the bias")) if bias is not None else -1
    em.op("FULLY_CONNECTED", [x, w, b], [out], ("FullyConnectedOptions", {"fused_activation_function": 0,
                                                                         "keep_num_dims": True}))


@maps("MatMul")
def matmul(em: Emitter, node) -> None:
    a_name, b_name = node.input
    ra, rb = em.rank(a_name), em.rank(b_name)
    a, bv = em.t(a_name), em.const_value(b_name)
    if bv is not None and rb == 2 and ra >= 2 and em.dtype_of(a) == T.FLOAT32:
        _fully_connected(em, a, bv, None, em.out())  # runs with no elements (an adaptive pool of an empty batch)
        return
    if any(0 in list(em.shape(n) or ()) for n in (a_name, b_name)):  # (em.t would write a constant B twice)
        raise Unsupported("BATCH_MATMUL of an operand with no elements (ai-edge-litert 2.3.0's XNNPACK delegate "
                          "fails to prepare it)")
    b = em.t(b_name)
    if ra == 1 or rb == 1:
        _matmul_vector(em, a, b, ra, rb)
        return
    em.op("BATCH_MATMUL", [a, b], [em.out()], ("BatchMatMulOptions", {"adj_x": False, "adj_y": False}))


def _matmul_vector(em: Emitter, a: int, b: int, ra: int, rb: int) -> None:
    """numpy's rule for a 1-D operand: a vector on the left is a row [1, k], on the right a
    column [k, 1]; that dim is squeezed from the product."""
    if ra == 1:
        a = _expand(em, a, 0)
    if rb == 1:
        b = _expand(em, b, 1)
    y = em.tmp(em.dtype_of(a), None, "mm")
    em.op("BATCH_MATMUL", [a, b], [y], ("BatchMatMulOptions", {"adj_x": False, "adj_y": False}))
    rank = max(ra, rb, 2)
    dims = ([rank - 2] if ra == 1 else []) + ([rank - 1] if rb == 1 else [])
    em.op("SQUEEZE", [y], [em.out()], ("SqueezeOptions", {"squeeze_dims": dims}))


def _expand(em: Emitter, x: int, axis: int) -> int:
    y = em.tmp(em.dtype_of(x), None, "vec")
    em.op("EXPAND_DIMS", [x, em.const(np.array(axis if axis == 0 else -1, np.int32))], [y])
    return y


def _per_column(c_shape: tuple, n: int) -> bool:
    """Whether Gemm's C (broadcast to [M, N]) is one bias per output column: every dim but the
    last is 1 and the last is 1 or N. A C of [M, 1] is one value per row, even when M == N."""
    return all(d == 1 for d in c_shape[:-1]) and (not c_shape or c_shape[-1] in (1, n))


@maps("Gemm")
def gemm(em: Emitter, node) -> None:
    at = attrs(node)
    alpha, beta = float(at.get("alpha", 1.0)), float(at.get("beta", 1.0))
    trans_a, trans_b = int(at.get("transA", 0)), int(at.get("transB", 0))
    a = em.t(node.input[0])
    bv = em.const_value(node.input[1])
    cv = em.const_value(node.input[2]) if len(node.input) > 2 and node.input[2] else None
    has_c = len(node.input) > 2 and bool(node.input[2])
    if not trans_a and bv is not None and (not has_c or cv is not None) and em.dtype_of(a) == T.FLOAT32:
        w = (bv.T if trans_b else bv).astype(np.float32) * np.float32(alpha)
        n = w.shape[1]
        bias = None
        if has_c:
            c = np.asarray(cv, np.float32) * np.float32(beta)
            if _per_column(c.shape, n):
                bias = np.broadcast_to(c.reshape(-1), (n,)).copy()
        if not has_c or bias is not None:
            _fully_connected(em, a, w, bias, em.out())
            return
    if any(0 in list(em.shape(n) or ()) for n in node.input[:2]):
        raise Unsupported("Gemm as a BATCH_MATMUL of an operand with no elements (ai-edge-litert 2.3.0's XNNPACK "
                          "delegate fails to prepare it)")
    b = em.t(node.input[1])
    y = em.tmp(em.dtype_of(a), em.shape(node.output[0]), "mm")
    em.op("BATCH_MATMUL", [a, b], [y], ("BatchMatMulOptions", {"adj_x": bool(trans_a), "adj_y": bool(trans_b)}))
    if alpha != 1.0:
        y = em.binary("MUL", y, em.const(np.float32(alpha)))
    if not has_c:
        em.bind(node.output[0], y)
        return
    c = em.t(node.input[2])
    if beta != 1.0:
        c = em.binary("MUL", c, em.const(np.float32(beta)))
    em.op("ADD", [y, c], [em.out()])
