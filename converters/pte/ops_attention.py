"""``scaled_dot_product_attention`` decomposed into portable kernels (the library has none for
it): ``softmax(q @ k^T * scale) @ v`` over the batch and head dims flattened into one (views, no
instructions), as ``transpose_copy``, ``bmm``, ``mul.Scalar_out``, ``_softmax``, ``bmm``.

Static shapes, no mask, no dropout, not causal, no grouped-query heads; other forms are refused.
"""

from __future__ import annotations

import math

from ..aten.args import bind
from ..aten.registry import lowering
from ..errors import Unsupported


def _as_3d(ctx, t, what):
    """``t`` viewed as [batch, rows, cols] (its leading dims flattened): no instruction."""
    if t.dynamic or len(t.sizes) < 3:
        raise Unsupported(f"attention with a {what} of dynamic shape or rank < 3")
    v = ctx.scratch(what, (math.prod(t.sizes[:-2]), t.sizes[-2], t.sizes[-1]))
    v.alias_of = t
    return v


@lowering("pte", "aten.scaled_dot_product_attention.default")
def scaled_dot_product_attention(ctx, node):
    a = bind(node)
    if a.attn_mask is not None or a.dropout_p != 0.0 or a.is_causal or a.enable_gqa:
        raise Unsupported("attention with a mask, dropout, is_causal or grouped-query heads")
    q, k, v = (_as_3d(ctx, ctx.tensor(r), w) for r, w in ((a.query, "query"), (a.key, "key"), (a.value, "value")))
    if not (q.sizes[0] == k.sizes[0] == v.sizes[0]):
        raise Unsupported("attention whose query, key and value batch dims differ (broadcasting)")
    b, rows, e = q.sizes
    cols = k.sizes[1]
    scale = a.scale if a.scale is not None else 1.0 / math.sqrt(e)
    kt = ctx.call("transpose_copy.int_out", {"self": k, "dim0": 1, "dim1": 2}, [ctx.scratch("key_t", (b, e, cols))])
    scores = ctx.call("bmm.out", {"self": q, "mat2": kt}, [ctx.scratch("scores", (b, rows, cols))])
    scaled = ctx.call("mul.Scalar_out", {"self": scores, "other": float(scale)}, [ctx.scratch("scaled", (b, rows, cols))])
    probs = ctx.call("_softmax.out", {"self": scaled, "dim": -1, "half_to_float": False},
                     [ctx.scratch("softmax", (b, rows, cols))])
    out = ctx.output(node)
    out3 = ctx.scratch("attention", (b, rows, v.sizes[2]))
    ctx.call("bmm.out", {"self": probs, "mat2": v}, [out3])
    out.alias_of = out3
    return out.name
