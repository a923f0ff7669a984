"""Cumulative products: ``cumprod`` as a Hillis-Steele scan (ONNX has CumProd only from opset 26).

Along a dim of static length n, ceil(log2 n) steps of ``y = y * shift(y, s)`` for s = 1, 2, 4, ...,
where ``shift`` moves the values s places along the dim and pads with ones (Slice + Pad, which
the TFLite target maps). The products are grouped differently from a left-to-right loop: equal
up to float rounding, exact for integers.
"""

from __future__ import annotations

import numpy as np

from ..aten.args import bind
from ..aten.dtypes import ST
from ..aten.registry import lowering
from ..errors import Unsupported


@lowering("onnx", "aten.cumprod.default")
def cumprod(ctx, node):
    a = bind(node, "self", "dim")
    a.declare("dtype")  # the output's dtype, computed in
    out = ctx.out_info().dtype
    cst = ctx.compute_type(out)
    if cst in (ST.BOOL, ST.INT) and out != ST.INT:
        cst = ST.LONG
    y = ctx.t(a.self, cst)
    rank = ctx.rank(a.self)
    if rank == 0:
        return ctx.cast(y, cst, out)
    dim = a.dim % rank
    n = ctx.info(a.self).shape[dim]
    if not isinstance(n, int):
        raise Unsupported("cumprod along a dynamic dim")
    one = ctx.const(1, cst)
    s = 1
    while s < n:
        pads = np.zeros(2 * rank, np.int64)
        pads[dim] = s
        head = ctx.op("Slice", y, ctx.ints([0]), ctx.ints([n - s]), ctx.ints([dim]))
        y = ctx.op("Mul", y, ctx.op("Pad", head, ctx.const(pads, ST.LONG), one))
        s *= 2
    return ctx.cast(y, cst, out)
