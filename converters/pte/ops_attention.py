"""``scaled_dot_product_attention`` composed of portable kernels (the library has none for it), as
torch's math reference computes it:

    scores = q @ k^T * scale                   (ops_matmul.matmul_into: bmm over the batch dims)
    scores = scores + mask | scores + where(mask, 0, -inf) | scores + where(tril(ones), 0, -inf) (is_causal)
    probs  = softmax(scores, -1), 0 on a row every position of which is -inf (torch's _safe_softmax)
    out    = probs @ v

Grouped-query heads (``enable_gqa``, fewer key/value heads) are repeated to the query's heads, each
``heads / kv_heads`` times in a row (torch's ``repeat_interleave``): a view with a unit dim, an
``expand_copy`` and a view. Static and dynamic shapes (a dynamic batch is viewed by ``view_copy``).
Dropout is refused.
"""

from __future__ import annotations

import math

from ...schema import definitions as d
from ..aten.args import bind
from ..aten.registry import lowering
from ..errors import Unsupported
from .ops_matmul import matmul_into
from .shapes import expanded, reshaped


def _scratch(ctx, shape, base, dtype=None):
    sizes, dynamic = ctx.dims(shape, base)
    return ctx.scratch_sized(base, sizes, dynamic=dynamic, dtype=dtype)


def _kv_heads(ctx, t, shape, heads, base):
    """``t`` (``[..., kv_heads, S, E]``) with each head repeated ``heads / kv_heads`` times in a row."""
    kv = shape[-3]
    if kv == heads:
        return t, shape
    if not isinstance(kv, int) or not isinstance(heads, int) or heads % kv:
        raise Unsupported(f"grouped-query attention of {heads} query heads over {kv} key/value heads")
    lead, rest = list(shape[:-3]), list(shape[-2:])
    unit = reshaped(ctx, t, lead + [kv, 1] + rest, base + "_heads")
    wide = expanded(ctx, unit, lead + [kv, heads // kv] + rest, base + "_repeat")
    out_shape = lead + [heads] + rest
    return reshaped(ctx, wide, out_shape, base + "_gqa"), out_shape


def _masked(ctx, a, scores, shape, rows, cols):
    """``scores`` with the mask applied (``None`` when there is none): a float mask added; a bool
    mask, or the causal one, made a float one of its own shape (0 where kept, -inf where not, as
    torch's math reference turns a bool mask into a bias) and added: the select runs on the
    mask's elements, not the scores' (often a head count more), and the add broadcasts."""
    if a.attn_mask is None and not a.is_causal:
        return None
    if a.attn_mask is not None and a.is_causal:
        raise Unsupported("attention with both a mask and is_causal")
    out = _scratch(ctx, shape, "masked_scores")
    if a.attn_mask is not None and ctx.view.tensor(a.attn_mask.name).dtype != d.ScalarType.BOOL:
        return ctx.call("add.out", {"self": scores, "other": a.attn_mask}, [out])
    if a.attn_mask is not None:
        keep, keep_shape = ctx.tensor(a.attn_mask), list(ctx.view.tensor(a.attn_mask.name).shape)
    else:  # top-left aligned, as torch: row i sees columns 0..i
        ones = ctx.call("full.out", {"size": [ctx.size_value(rows), ctx.size_value(cols)], "fill_value": True},
                        [_scratch(ctx, [rows, cols], "causal_ones", d.ScalarType.BOOL)])
        keep = ctx.call("tril.out", {"self": ones, "diagonal": 0},
                        [_scratch(ctx, [rows, cols], "causal_mask", d.ScalarType.BOOL)])
        keep_shape = [rows, cols]
    zero = ctx.call("scalar_tensor.out", {"s": 0.0}, [_scratch(ctx, [], "mask_zero")])
    neg_inf = ctx.call("scalar_tensor.out", {"s": -math.inf}, [_scratch(ctx, [], "minus_inf")])
    bias = ctx.call("where.self_out", {"condition": keep, "self": zero, "other": neg_inf},
                    [_scratch(ctx, keep_shape, "mask_bias")])
    return ctx.call("add.out", {"self": scores, "other": bias}, [out])


def _safe_softmax(ctx, scores, shape, masked: bool):
    """``softmax(scores, -1)``; where a mask may hide a whole row, that row's probabilities are 0
    instead of NaN (torch's ``_safe_softmax``)."""
    probs = ctx.call("_softmax.out", {"self": scores, "dim": -1, "half_to_float": False},
                     [_scratch(ctx, shape, "softmax")])
    if not masked:
        return probs
    hidden = ctx.call("eq.Scalar_out", {"self": scores, "other": -math.inf},
                      [_scratch(ctx, shape, "hidden", d.ScalarType.BOOL)])
    seen = ctx.call("logical_not.out", {"self": hidden}, [_scratch(ctx, shape, "seen", d.ScalarType.BOOL)])
    row_seen = ctx.call("any.out", {"self": seen, "dim": -1, "keepdim": True},
                        [_scratch(ctx, list(shape[:-1]) + [1], "row_seen", d.ScalarType.BOOL)])
    zero = ctx.call("scalar_tensor.out", {"s": 0.0}, [_scratch(ctx, [], "zero")])
    return ctx.call("where.self_out", {"condition": row_seen, "self": probs, "other": zero},
                    [_scratch(ctx, shape, "safe_softmax")])


@lowering("pte", "aten.scaled_dot_product_attention.default")
def scaled_dot_product_attention(ctx, node):
    a = bind(node)
    if a.dropout_p != 0.0:
        raise Unsupported("attention with dropout")
    info = ctx.view.tensor
    q_shape, k_shape, v_shape = (list(info(r.name).shape) for r in (a.query, a.key, a.value))
    if min(len(q_shape), len(k_shape), len(v_shape)) < 3:
        raise Unsupported("attention of a query, key or value of rank < 3")
    k, v = ctx.tensor(a.key), ctx.tensor(a.value)
    if a.enable_gqa:
        k, k_shape = _kv_heads(ctx, k, k_shape, q_shape[-3], "key")
        v, v_shape = _kv_heads(ctx, v, v_shape, q_shape[-3], "value")
    rows, cols, e = q_shape[-2], k_shape[-2], q_shape[-1]
    if not isinstance(e, int):
        raise Unsupported("attention with a symbolic embedding size")
    scale = a.scale if a.scale is not None else 1.0 / math.sqrt(e)
    kt_shape = k_shape[:-2] + [e, cols]
    kt = ctx.call("transpose_copy.int_out", {"self": k, "dim0": -2, "dim1": -1}, [_scratch(ctx, kt_shape, "key_t")])
    batch = q_shape[:-2]
    score_shape = batch + [rows, cols]
    scores = _scratch(ctx, score_shape, "scores")
    matmul_into(ctx, ctx.tensor(a.query), q_shape, kt, kt_shape, scores, score_shape)
    scaled = ctx.call("mul.Scalar_out", {"self": scores, "other": float(scale)},
                      [_scratch(ctx, score_shape, "scaled")])
    masked = _masked(ctx, a, scaled, score_shape, rows, cols)
    probs = _safe_softmax(ctx, masked if masked is not None else scaled, score_shape, masked is not None)
    out = ctx.output(node)
    matmul_into(ctx, probs, score_shape, v, v_shape, out, list(info(node.outputs[0].value.name).shape))
    return out.name
