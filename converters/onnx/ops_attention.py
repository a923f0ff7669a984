"""``scaled_dot_product_attention``: ONNX ``Attention`` from opset 23 (masks, causal, grouped
query), else MatMul/Softmax with torch's math-path scaling and safe softmax.

The ONNX spec lets ``attn_mask`` be anything that broadcasts to ``[B, H, L, S]``, but ONNX
Runtime's CPU kernel (1.32) wants rank 2-4 with the last two dims exactly ``[L, S]`` ("inconsistent
q_sequence_length"): a mask that broadcasts over the query or key dimension (``[B, 1, 1, S]``
from ``nn.MultiheadAttention``'s key padding) is expanded to ``[.., L, S]`` with runtime sizes.
Leading dims of 1 stay 1 (the kernel broadcasts those itself)."""

from __future__ import annotations

import math

import numpy as np

from ..aten.args import bind
from ..aten.dtypes import ST
from ..aten.registry import lowering
from ..errors import Unsupported
from .ops_nn import _ct
from .shapes import axes_const, scalar_attr


@lowering("onnx", "aten.scaled_dot_product_attention.default", "aten._scaled_dot_product_flash_attention_for_cpu.default")
def sdpa(ctx, node):
    a = bind(node, "query", "key", "value", enable_gqa=False)  # flash_attention_for_cpu has no enable_gqa
    if a.dropout_p:
        raise Unsupported("attention dropout")
    out, cst = _ct(ctx)
    q, k, v = (ctx.t(x, cst) for x in (a.query, a.key, a.value))
    qi, ki = ctx.info(a.query), ctx.info(a.key)
    e = qi.shape[-1]
    mask = None
    if a.attn_mask is not None:
        mask = ctx.t(a.attn_mask) if ctx.dtype(a.attn_mask) == ST.BOOL else ctx.t(a.attn_mask, cst)
    if ctx.opset >= 23 and qi.rank == 4 and (a.enable_gqa or qi.shape[1] == ki.shape[1]):
        if mask is not None:
            mask = _mask_for_kernel(ctx, a, mask)
        r = ctx.op("Attention", q, k, v, mask, is_causal=int(bool(a.is_causal)),
                   scale=None if a.scale is None else float(a.scale))
        res = ctx.cast(r, cst, out)
        return [res] + [None] * (len(node.outputs) - 1) if len(node.outputs) > 1 else res
    if a.enable_gqa and qi.shape[-3] != ki.shape[-3]:
        k = _repeat_heads(ctx, k, qi.shape[-3], ki.shape[-3], ki.rank, ki.shape[-1])
        v = _repeat_heads(ctx, v, qi.shape[-3], ki.shape[-3], ki.rank, ctx.info(a.value).shape[-1])
    if not isinstance(e, int):
        raise Unsupported("attention with a dynamic head size")
    scale = a.scale if a.scale is not None else 1 / math.sqrt(e)
    r = qi.rank
    perm = list(range(r))
    perm[-1], perm[-2] = perm[-2], perm[-1]
    # scale q and k by sqrt(scale) each, as torch's math path does
    s = ctx.const(math.sqrt(scale), cst)
    scores = ctx.op("MatMul", ctx.op("Mul", q, s), ctx.op("Transpose", ctx.op("Mul", k, s), perm=perm))
    if a.is_causal:
        ones = ctx.op("ConstantOfShape", ctx.op("Concat", ctx.dim(a.query, -2), ctx.dim(a.key, -2), axis=0),
                      value=_one_bool())
        mask = ctx.op("Trilu", ones, upper=0)
    live = None
    if mask is not None:
        if _is_bool(ctx, a):
            mask = ctx.op("Where", mask, ctx.const(0.0, cst), ctx.const(-np.inf, cst))
        if a.attn_mask is not None:  # a causal mask alone keeps key 0 in every row
            mask, live = _live_rows(ctx, mask, cst)
        scores = ctx.op("Add", scores, mask)
    attn = ctx.op("Softmax", scores, axis=-1)
    if live is not None:
        attn = ctx.op("Mul", attn, live)
    res = ctx.cast(ctx.op("MatMul", attn, v), cst, out)
    return [res] + [None] * (len(node.outputs) - 1) if len(node.outputs) > 1 else res


def _mask_for_kernel(ctx, a, mask):
    """The mask as ONNX Runtime's Attention kernel takes it: rank 2-4, last two dims [L, S]."""
    mi, L, S = ctx.info(a.attn_mask), ctx.info(a.query).shape[-2], ctx.info(a.key).shape[-2]
    if mi.rank > 4:
        raise Unsupported(f"attention mask of rank {mi.rank} (at most 4)")
    if mi.rank >= 2 and _same_dim(mi.shape[-2], L) and _same_dim(mi.shape[-1], S):
        return mask
    shape = ctx.op("Concat", ctx.ints([1, 1]), ctx.dim(a.query, -2), ctx.dim(a.key, -2), axis=0)
    return ctx.op("Expand", mask, shape)


def _same_dim(x, y) -> bool:
    """True only when equal sizes are proved: the same int or the same symbolic expression."""
    return type(x) is type(y) and x == y


def _live_rows(ctx, bias, cst):
    """torch's safe softmax, read off the additive mask: a row whose mask is all -inf (every key
    masked) gives zeros, not NaN. Such a row's bias becomes 0 (a finite softmax) and the softmax
    is multiplied by the row's factor, 0.0 there and 1.0 elsewhere (x * 1.0 == x: exact). Neither
    depends on the scores, so layers that share a mask share them, and each layer adds Add and
    Mul only. (Scores that are themselves all -inf, q.k overflowing, give NaN there.)"""
    finite = ctx.op("Not", ctx.op("IsInf", bias, detect_positive=0))
    # reduced in int32 (ReduceMax takes no bool before opset 20): the whole chain is integer/bool
    # work, which no float kernel (XNNPACK's) picks up halfway and cuts the graph at
    any_finite = ctx.op("ReduceMax", ctx.cast(finite, ST.BOOL, ST.INT), axes_const(ctx, [-1]), keepdims=1)
    safe = ctx.op("Where", ctx.cast(any_finite, ST.INT, ST.BOOL), bias, ctx.const(0.0, cst))
    return safe, ctx.cast(any_finite, ST.INT, cst)


def _repeat_heads(ctx, t, hq, hkv, rank, e):
    """repeat_interleave of the kv heads (dim -3) up to the query heads, as torch's GQA does."""
    if not all(isinstance(v, int) for v in (hq, hkv, e)) or rank != 4:
        raise Unsupported("grouped-query attention with dynamic head counts below opset 23")
    g = hq // hkv
    u = ctx.op("Unsqueeze", t, axes_const(ctx, [2]))
    ex = ctx.op("Expand", u, ctx.ints([1, 1, g, 1, 1]))
    return ctx.op("Reshape", ex, ctx.ints([0, hq, -1, e]))


def _is_bool(ctx, a):
    return a.is_causal or (a.attn_mask is not None and ctx.dtype(a.attn_mask) == ST.BOOL)


def _one_bool():
    return scalar_attr(True, ST.BOOL)


# ------------------------------------------------------------------------ pools
