"""ONNX ``Attention`` (opset 23; pt2x's own ONNX at its default opset holds it) decomposed into
BATCH_MATMUL, SOFTMAX and masks, following onnx's reference: 4-D query/key/value ``[B, H, L, E]``
or 3-D ``[B, L, H*E]`` (``q_num_heads``/``kv_num_heads``: reshaped to 4-D and back); a boolean or
additive mask; ``is_causal`` (key j allowed for query i when j <= i + the past length); grouped
key/value heads (query head h reads key/value head h // (Hq / Hkv)); ``softcap`` (c * tanh(s / c),
before the mask); a KV cache (``present_* = concat(past_*, K/V)`` along the sequence);
``nonpad_kv_seqlen`` (keys from that index on masked, per batch); a mask shorter than the keys
padded as masked out (static shapes); the ``qk_matmul_output`` of each mode (0: the scaled
Q K^T, 1: after softcap, 2: after the masks, 3: the softmax). Rows every key of which is masked
give 0, as torch's safe softmax, pt2x's own opset-18 decomposition and the spec's mode 3 do. The
masks become one additive float bias computed once per mask (``_mask_bias``), so each layer runs
ADD, SOFTMAX and MUL only, which XNNPACK takes.
Refused by attribute/value: mode 0 with softcap (the spec says before softcap, onnx 1.22's
reference gives it after), ``softmax_precision`` other than float."""

from __future__ import annotations

import math

import numpy as np
from onnx import TensorProto, helper

from ...errors import Unsupported
from ..core.emit import Emitter, attrs
from ..core.mappers import maps
from ..core.model import TensorType as T
from .shape import _slice1d, shape_tensor

_MAX_MASK_PAD = 1 << 24  # elements of the constant that pads a short mask
_HEADS_FIRST = np.array([0, 2, 1, 3], np.int32)  # [B, L, H, E] <-> [B, H, L, E]
# qk_matmul_output_mode -> the stage whose scores it outputs
_QK_STAGES = {0: "matmul", 1: "softcap", 2: "masked", 3: "softmax"}


def _cat(em: Emitter, pieces: list[int]) -> int:
    out = em.tmp(T.INT32, [-1], "shape")
    em.op("CONCATENATION", pieces, [out], ("ConcatenationOptions", {"axis": 0}))
    return out


def _reshape(em: Emitter, x: int, shape: int) -> int:
    y = em.tmp(em.dtype_of(x), None, "reshaped")
    em.op("RESHAPE", [x, shape], [y])
    return y


def _transpose(em: Emitter, x: int, perm: np.ndarray) -> int:
    y = em.tmp(em.dtype_of(x), None, "transposed")
    em.op("TRANSPOSE", [x, em.const(perm)], [y])
    return y


def _dim(em: Emitter, x: int, i: int) -> int:
    """Dim ``i`` of x at run time, an int32 scalar."""
    n = em.tmp(T.INT32, [], "n")
    em.op("GATHER", [shape_tensor(em, x), em.const(np.array(i, np.int32))], [n], ("GatherOptions", {"axis": 0}))
    return n


def _check(a: dict, ins: list[str], outs: list[str]) -> None:
    mode = int(a.get("qk_matmul_output_mode", 0))
    if outs[3] and mode not in _QK_STAGES:
        raise Unsupported(f"Attention qk_matmul_output_mode={mode}")
    if outs[3] and mode == 0 and float(a.get("softcap", 0.0)):
        raise Unsupported("Attention qk_matmul_output_mode=0 with softcap (onnx's reference and spec disagree on it)")
    if int(a.get("softmax_precision", TensorProto.FLOAT)) != TensorProto.FLOAT:
        raise Unsupported(f"Attention softmax_precision={a['softmax_precision']} (computed in float32 only)")
    if bool(ins[4]) != bool(ins[5]):
        raise Unsupported("Attention with only one of past_key/past_value")


def _heads(em: Emitter, name: str, heads: int | None, what: str) -> int:
    """A 4-D [B, H, L, E] tensor: 4-D inputs as they are, 3-D [B, L, H*E] split into heads."""
    x = em.t(name)
    rank = em.rank(name)
    if rank == 4:
        return x
    if rank != 3 or not heads:
        raise Unsupported(f"Attention {what} of rank {rank} (4-D, or 3-D with q_num_heads/kv_num_heads)")
    hidden = em.shape(name)[2]
    if hidden < 0 or hidden % heads:
        raise Unsupported(f"3-D Attention {what} whose hidden size {hidden} is not static or not divisible by {heads}")
    lead = _slice1d(em, shape_tensor(em, x), 0, 2)
    x = _reshape(em, x, _cat(em, [lead, em.const(np.array([heads, hidden // heads], np.int32))]))
    return _transpose(em, x, _HEADS_FIRST)


def _merge_heads(em: Emitter, y: int) -> int:
    """[B, H, L, Ev] -> [B, L, H*Ev]."""
    y = _transpose(em, y, _HEADS_FIRST)
    return _reshape(em, y, _cat(em, [_slice1d(em, shape_tensor(em, y), 0, 2), em.const(np.array([-1], np.int32))]))


def _with_past(em: Emitter, past: str, new: int) -> int:
    if not past:
        return new
    if em.rank(past) != 4:
        raise Unsupported("Attention past_key/past_value that is not 4-D")
    out = em.tmp(em.dtype_of(new), None, "present")
    em.op("CONCATENATION", [em.t(past), new], [out], ("ConcatenationOptions", {"axis": 2}))
    return out


@maps("Attention")
def attention(em: Emitter, node) -> None:
    a = attrs(node)
    ins = list(node.input) + [""] * (7 - len(node.input))
    outs = list(node.output) + [""] * (4 - len(node.output))
    _check(a, ins, outs)
    three_d = em.rank(ins[0]) == 3
    q = _heads(em, ins[0], a.get("q_num_heads"), "query")
    k = _with_past(em, ins[4], _heads(em, ins[1], a.get("kv_num_heads"), "key"))
    keys = _dim(em, k, 2)
    v = _with_past(em, ins[5], _heads(em, ins[2], a.get("kv_num_heads"), "value"))
    for i, t in ((1, k), (2, v)):
        if outs[i]:
            em.bind(outs[i], t)
    hq, hkv, e = _static_heads(em, ins, a, three_d)
    scale = a.get("scale")
    scale = float(scale) if scale is not None else 1.0 / math.sqrt(e)
    group = hq // hkv
    qs = shape_tensor(em, q)
    if group > 1:  # [B, Hkv, g, L, E] against [B, Hkv, 1, S, E]: BATCH_MATMUL broadcasts the group
        q = _reshape(em, q, _cat(em, [_slice1d(em, qs, 0, 1), em.const(np.array([hkv, group], np.int32)),
                                      _slice1d(em, qs, 2, 4)]))
        k, v = _expand_group(em, k), _expand_group(em, v)
    q = em.binary("MUL", q, em.const(np.float32(scale)))
    scores = em.tmp(T.FLOAT32, None, "scores")
    em.op("BATCH_MATMUL", [q, k], [scores], ("BatchMatMulOptions", {"adj_x": False, "adj_y": True}))
    stage = _QK_STAGES[int(a.get("qk_matmul_output_mode", 0))] if outs[3] else None

    def tap(name: str, t: int) -> None:
        if stage == name:
            em.bind(outs[3], _ungroup(em, t, group, qs, keys))

    tap("matmul", scores)
    softcap = float(a.get("softcap", 0.0))
    if softcap > 0:
        scores = _softcap(em, scores, softcap)
    tap("softcap", scores)
    allowed, additive = _masks(em, a, ins, keys, qs, group, hkv)
    bias, safe_bias, live = _mask_bias(em, ins, allowed, additive)
    if stage == "masked":
        tap("masked", _masked_scores(em, scores, allowed, additive))
    if safe_bias is not None:
        scores = em.binary("ADD", scores, safe_bias)
    attn = em.unary("SOFTMAX", scores, options=("SoftmaxOptions", {"beta": 1.0}))
    if live is not None:
        attn = em.binary("MUL", attn, live)
    tap("softmax", attn)
    y = em.tmp(T.FLOAT32, None, "attended")
    em.op("BATCH_MATMUL", [attn, v], [y], ("BatchMatMulOptions", {"adj_x": False, "adj_y": False}))
    if group > 1:
        y = _reshape(em, y, _cat(em, [_slice1d(em, qs, 0, 3), _slice1d(em, shape_tensor(em, y), 4, 5)]))
    em.bind(outs[0], _merge_heads(em, y) if three_d else y)


def _static_heads(em: Emitter, ins: list[str], a: dict, three_d: bool) -> tuple[int, int, int]:
    """(query heads, key/value heads, query head size), each static, Hq a multiple of Hkv."""
    if three_d:
        hq, hkv = int(a.get("q_num_heads") or -1), int(a.get("kv_num_heads") or -1)
        e = em.shape(ins[0])[2] // hq if hq > 0 and em.shape(ins[0])[2] >= 0 else -1
    else:
        hq, hkv, e = em.shape(ins[0])[1], em.shape(ins[1])[1], em.shape(ins[0])[3]
    if hq <= 0 or hkv <= 0 or e < 0 or hq % hkv:
        raise Unsupported("Attention whose head counts or head size are not static")
    return hq, hkv, e


def _softcap(em: Emitter, scores: int, c: float) -> int:
    t = em.unary("TANH", em.binary("MUL", scores, em.const(np.float32(1.0 / c))))
    return em.binary("MUL", t, em.const(np.float32(c)))


def _ungroup(em: Emitter, s: int, group: int, qs: int, keys: int) -> int:
    """Grouped [B, Hkv, g, L, S] scores as [B, Hq, L, S]."""
    if group == 1:
        return s
    return _reshape(em, s, _cat(em, [_slice1d(em, qs, 0, 3), _reshape(em, keys, em.const(np.array([1], np.int32)))]))


def _masks(em: Emitter, a: dict, ins: list[str], keys: int, qs: int, group: int,
           hkv: int) -> tuple[int | None, int | None]:
    """(allowed, additive): a bool tensor where a key may be attended (the boolean mask, the
    causal rule and the padding lengths together), and the additive float mask; None when absent."""
    allowed, additive = None, None
    if ins[3]:
        mask = _checked_mask(em, ins, group)
        if group > 1 and em.rank(ins[3]) == 4:
            mask = _mask_by_group(em, mask, hkv, group)
        if em.dtype_of(mask) == T.BOOL:
            allowed = mask
        else:
            additive = mask
    if int(a.get("is_causal", 0)):
        past = _dim(em, em.t(ins[4]), 2) if ins[4] else None
        allowed = _and(em, allowed, _causal(em, qs, keys, past))
    if ins[6]:
        allowed = _and(em, allowed, _unpadded(em, ins[6], keys, 5 if group > 1 else 4))
    return allowed, additive


def _masked_scores(em: Emitter, scores: int, allowed: int | None, additive: int | None) -> int:
    """The ``qk_matmul_output`` of mode 2: the scores plus the additive mask, -inf where a key is
    not allowed. The -inf is written by SELECT_V2 after the ADD, not added: LiteRT's builtin ADD
    saturates -inf to -3.4e38 (docs/tflite.md, "NaN and infinity")."""
    if additive is not None:
        scores = em.binary("ADD", scores, additive)
    if allowed is None:
        return scores
    out = em.tmp(T.FLOAT32, None, "masked_scores")
    em.op("SELECT_V2", [allowed, scores, em.const(np.float32(-np.inf))], [out])
    return out


def _mask_bias(em: Emitter, ins: list[str], allowed: int | None,
               additive: int | None) -> tuple[int | None, int | None, int | None]:
    """The masks as one float bias added to the scores before SOFTMAX: (bias, safe bias, row
    factor). ``bias`` is the additive mask (or 0) where a key may be attended and -inf where the
    boolean/causal/padding masks forbid it (SELECT_V2, not an ADD of -inf: a +inf in the mask
    stays as ADD gave it). A row every bias of which is -inf would make SOFTMAX NaN; torch's
    safe softmax gives 0 there. So ``safe bias`` is 0 on such rows and the softmax is multiplied
    by ``row factor`` (1.0, or 0.0 on such rows): exact, as x * 1.0 == x and x + 0.0 == x. None of
    the three depends on the scores, so every layer reading the same mask shares one computation
    (``passes.merge_and_prune`` merges the identical operators) and each layer runs only ADD, SOFTMAX and MUL,
    all XNNPACK's. Without a mask or padding lengths no row can be all -inf (a causal row keeps
    its own key): no factor. A row whose *scores* are all -inf (q.k overflowing float32) gives
    NaN, not 0."""
    bias = additive
    if allowed is not None:
        bias = em.tmp(T.FLOAT32, None, "mask_bias")
        em.op("SELECT_V2", [allowed, em.const(np.float32(0)) if additive is None else additive,
                            em.const(np.float32(-np.inf))], [bias])
    if bias is None or not (ins[3] or ins[6]):
        return bias, bias, None
    return (bias, *_live_rows(em, bias))


def _live_rows(em: Emitter, bias: int) -> tuple[int, int]:
    """(the bias with 0 on its all -inf rows, 1.0 on the other rows and 0.0 on those)."""
    best = em.tmp(T.FLOAT32, None, "row_max")
    em.op("REDUCE_MAX", [bias, em.const(np.array([-1], np.int32))], [best], ("ReducerOptions", {"keep_dims": True}))
    live = em.binary("GREATER", best, em.const(np.float32(-np.inf)), dtype=T.BOOL)
    safe = em.tmp(T.FLOAT32, None, "safe_bias")
    em.op("SELECT_V2", [live, bias, em.const(np.float32(0))], [safe])
    return safe, em.cast(live, T.FLOAT32)


def _total_keys(em: Emitter, ins: list[str]) -> int:
    """The static key count (past + new), -1 when not static."""
    k = em.shape(ins[1])
    s = k[2] if len(k) == 4 else k[1]
    past = em.shape(ins[4])[2] if ins[4] else 0
    return s + past if s >= 0 and past >= 0 else -1


def _checked_mask(em: Emitter, ins: list[str], group: int) -> int:
    m_shape, s = em.shape(ins[3]), _total_keys(em, ins)
    if group > 1 and len(m_shape) == 3 and m_shape[0] != 1:
        raise Unsupported("grouped-query Attention with a 3-D attn_mask whose first dim is not 1")
    mask = em.t(ins[3])
    if not m_shape or m_shape[-1] < 0 or s < 0 or m_shape[-1] == s:
        return mask
    if m_shape[-1] > s or min(m_shape) < 0 or int(np.prod(m_shape[:-1], dtype=np.float64)) * s > _MAX_MASK_PAD:
        raise Unsupported(f"Attention attn_mask of {m_shape[-1]} keys for {s} (not static, more than the keys, or a pad over {_MAX_MASK_PAD} elements)")
    return _pad_mask(em, mask, m_shape, s)


def _pad_mask(em: Emitter, mask: int, m_shape: list[int], s: int) -> int:
    """A mask shorter than the keys padded at the end: masked out (False, or -inf), as the spec says."""
    fill = np.zeros if em.dtype_of(mask) == T.BOOL else (lambda shape, dtype: np.full(shape, -np.inf, dtype))
    pad = em.const(fill(m_shape[:-1] + [s - m_shape[-1]], np.bool_ if em.dtype_of(mask) == T.BOOL else np.float32))
    out = em.tmp(em.dtype_of(mask), m_shape[:-1] + [s], "padded_mask")
    em.op("CONCATENATION", [mask, pad], [out], ("ConcatenationOptions", {"axis": len(m_shape) - 1}))
    return out


def _and(em: Emitter, a: int | None, b: int) -> int:
    return b if a is None else em.binary("LOGICAL_AND", a, b, dtype=T.BOOL)


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


def _arange(em: Emitter, n: int) -> int:
    r = em.tmp(T.INT32, [-1], "range")
    em.op("RANGE", [em.const(np.array(0, np.int32)), n, em.const(np.array(1, np.int32))], [r])
    return r


def _causal(em: Emitter, qs: int, keys: int, past: int | None) -> int:
    """[L, S] bool: key j <= query i + the past length (upper-left aligned without a cache)."""
    n = em.tmp(T.INT32, [], "n")
    em.op("GATHER", [qs, em.const(np.array(2, np.int32))], [n], ("GatherOptions", {"axis": 0}))
    rows = em.tmp(T.INT32, [-1, 1], "rows")
    em.op("EXPAND_DIMS", [_arange(em, n), em.const(np.array(1, np.int32))], [rows])
    if past is not None:
        rows = em.binary("ADD", rows, past)
    return em.binary("LESS_EQUAL", _arange(em, keys), rows, dtype=T.BOOL)


def _unpadded(em: Emitter, name: str, keys: int, rank: int) -> int:
    """[B, 1, .., 1, S] bool: key j < nonpad_kv_seqlen[b]."""
    if em.rank(name) != 1:
        raise Unsupported("Attention nonpad_kv_seqlen that is not 1-D")
    n = em.cast(em.t(name), T.INT32)
    n = _reshape(em, n, em.const(np.array([-1] + [1] * (rank - 1), np.int32)))
    return em.binary("LESS", _arange(em, keys), n, dtype=T.BOOL)


@maps("FlexAttention")
def flex_attention(em: Emitter, node) -> None:
    """ai.onnx.preview FlexAttention without ``score_mod``/``prob_mod`` (their graphs are
    refused by the attribute table): 4-D Attention with its ``scale``, no mask; the same grouped
    head mapping (query head h reads key/value head h // (Hq / Hkv))."""
    a = attrs(node)
    if int(a.get("softmax_precision", TensorProto.FLOAT)) != TensorProto.FLOAT:
        raise Unsupported(f"FlexAttention softmax_precision={a['softmax_precision']} (computed in float32 only)")
    if any(em.rank(i) != 4 for i in node.input[:3]):
        raise Unsupported("FlexAttention of inputs that are not 4-D")
    as_attention = helper.make_node("Attention", list(node.input[:3]), [node.output[0]], name=node.name,
                                    **({"scale": a["scale"]} if "scale" in a else {}))
    em.node = as_attention
    try:
        attention(em, as_attention)
    finally:
        em.node = node
