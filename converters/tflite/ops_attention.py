"""ONNX ``Attention`` (opset 23; pt2x's own ONNX at its default opset holds it) decomposed into
BATCH_MATMUL, SOFTMAX and masks. 4-D query/key/value ``[B, H, L, E]``; a boolean or additive
mask; ``is_causal`` (upper-left aligned, as ONNX defines it); grouped key/value heads (query
head h reads key/value head h // (Hq / Hkv)). Rows every key of which is masked give 0, as
torch's safe softmax and pt2x's own opset-18 decomposition do. KV caches, softcap, 3-D inputs
and the extra outputs are refused."""

from __future__ import annotations

import math

import numpy as np

from ..errors import Unsupported
from .emit import Emitter, attrs
from .mappers import maps
from .model import TensorType as T
from .ops_shape import _slice1d, shape_tensor

_MUL = ("MulOptions", {"fused_activation_function": 0})
_ADD = ("AddOptions", {"fused_activation_function": 0})


def _cat(em: Emitter, pieces: list[int]) -> int:
    out = em.tmp(T.INT32, [len(pieces)], "shape")
    em.op("CONCATENATION", pieces, [out], ("ConcatenationOptions", {"axis": 0}))
    return out


def _reshape(em: Emitter, x: int, shape: int) -> int:
    y = em.tmp(em.dtype_of(x), None, "reshaped")
    em.op("RESHAPE", [x, shape], [y])
    return y


@maps("Attention")
def attention(em: Emitter, node) -> None:
    a = attrs(node)
    ins = list(node.input) + [""] * (6 - len(node.input))
    if ins[4] or ins[5] or any(o for o in node.output[1:]):
        raise Unsupported("Attention with a KV cache (past/present key and value) or the qk output")
    if float(a.get("softcap", 0.0)):
        raise Unsupported("Attention with softcap")
    if em.rank(ins[0]) != 4 or em.rank(ins[1]) != 4:
        raise Unsupported("3-D Attention (q_num_heads/kv_num_heads)")
    q_shape, k_shape = em.shape(ins[0]), em.shape(ins[1])
    hq, hkv, e = q_shape[1], k_shape[1], q_shape[3]
    if hq < 0 or hkv < 0 or e < 0 or hq % hkv:
        raise Unsupported("Attention whose head counts or head size are not static")
    scale = a.get("scale")
    scale = float(scale) if scale is not None else 1.0 / math.sqrt(e)
    q, k, v = em.t(ins[0]), em.t(ins[1]), em.t(ins[2])
    group = hq // hkv
    qs = shape_tensor(em, q)
    if group > 1:  # [B, Hkv, g, L, E] against [B, Hkv, 1, S, E]: BATCH_MATMUL broadcasts the group
        q = _reshape(em, q, _cat(em, [_slice1d(em, qs, 0, 1), em.const(np.array([hkv, group], np.int32)),
                                      _slice1d(em, qs, 2, 4)]))
        k = _expand_group(em, k)
        v = _expand_group(em, v)
    q = em.binary("MUL", q, em.const(np.float32(scale)), options=_MUL)
    scores = em.tmp(T.FLOAT32, None, "scores")
    em.op("BATCH_MATMUL", [q, k], [scores], ("BatchMatMulOptions", {"adj_x": False, "adj_y": True}))
    allowed = None  # bool [.., L, S] where a key may be attended
    if ins[3]:
        mask = em.t(ins[3])
        if group > 1 and em.rank(ins[3]) == 4:
            mask = _mask_by_group(em, mask, hkv, group)
        if em.dtype_of(mask) == T.BOOL:
            allowed = mask
        else:
            scores = em.binary("ADD", scores, mask, options=_ADD)
    if int(a.get("is_causal", 0)):
        causal = _causal(em, qs, shape_tensor(em, em.t(ins[1])))
        allowed = causal if allowed is None else em.binary("LOGICAL_AND", allowed, causal, dtype=T.BOOL)
    if allowed is not None:
        scores = _select(em, allowed, scores)
    attn = em.unary("SOFTMAX", scores, options=("SoftmaxOptions", {"beta": 1.0}))
    attn = _zero_dead_rows(em, attn, scores)
    y = em.tmp(T.FLOAT32, None, "attended")
    em.op("BATCH_MATMUL", [attn, v], [y], ("BatchMatMulOptions", {"adj_x": False, "adj_y": False}))
    if group > 1:
        y = _reshape(em, y, qs)
    em.bind(node.output[0], y)


def _expand_group(em: Emitter, t: int) -> int:
    y = em.tmp(em.dtype_of(t), None, "grouped")
    em.op("EXPAND_DIMS", [t, em.const(np.array(2, np.int32))], [y])
    return y


def _mask_by_group(em: Emitter, mask: int, hkv: int, group: int) -> int:
    """A 4-D mask [B|1, Hq|1, L, S] for the grouped [B, Hkv, g, L, S] scores."""
    ms = shape_tensor(em, mask)
    heads = em.tmp(T.INT32, [], "heads")
    em.op("GATHER", [ms, em.const(np.array(1, np.int32))], [heads], ("GatherOptions", {"axis": 0}))
    is_one = em.binary("EQUAL", heads, em.const(np.array(1, np.int32)), dtype=T.BOOL)
    split = em.tmp(T.INT32, [2], "split")
    em.op("SELECT_V2", [is_one, em.const(np.array([1, 1], np.int32)), em.const(np.array([hkv, group], np.int32))], [split])
    return _reshape(em, mask, _cat(em, [_slice1d(em, ms, 0, 1), split, _slice1d(em, ms, 2, 4)]))


def _causal(em: Emitter, qs: int, ks: int) -> int:
    """[L, S] bool: key j <= query i (upper-left aligned)."""
    zero, one = em.const(np.array(0, np.int32)), em.const(np.array(1, np.int32))

    def arange(shape, i):
        n = em.tmp(T.INT32, [], "n")
        em.op("GATHER", [shape, em.const(np.array(i, np.int32))], [n], ("GatherOptions", {"axis": 0}))
        r = em.tmp(T.INT32, [-1], "range")
        em.op("RANGE", [zero, n, one], [r])
        return r

    rows = em.tmp(T.INT32, [-1, 1], "rows")
    em.op("EXPAND_DIMS", [arange(qs, 2), one], [rows])
    return em.binary("LESS_EQUAL", arange(ks, 2), rows, dtype=T.BOOL)


def _select(em: Emitter, allowed: int, scores: int) -> int:
    out = em.tmp(T.FLOAT32, None, "masked")
    em.op("SELECT_V2", [allowed, scores, em.const(np.float32(-np.inf))], [out])
    return out


def _zero_dead_rows(em: Emitter, attn: int, scores: int) -> int:
    """0 where every score of a row is -inf (SOFTMAX gives NaN there)."""
    best = em.tmp(T.FLOAT32, None, "row_max")
    em.op("REDUCE_MAX", [scores, em.const(np.array([-1], np.int32))], [best], ("ReducerOptions", {"keep_dims": True}))
    live = em.binary("GREATER", best, em.const(np.float32(-np.inf)), dtype=T.BOOL)
    out = em.tmp(T.FLOAT32, None, "attn")
    em.op("SELECT_V2", [live, attn, em.const(np.float32(0))], [out])
    return out
