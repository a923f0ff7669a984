"""Reductions and scans: ``cumsum``, ``amax``/``amin``, ``argmax``/``argmin``, ``var``/``var_mean``
(a correction), ``linalg_vector_norm`` (orders 1 and 2, composed); each a portable kernel.
``sum`` and ``mean`` are in ``ops_elementwise``.

``cumsum``'s output (int64 for an integer or bool input, as torch) is the node's; a ``dtype``
argument other than the output's is impossible (the output's metadata holds it).
"""

from __future__ import annotations

from ..aten.args import bind
from ..aten.registry import lowering
from ..errors import Unsupported


@lowering("pte", "aten.cumsum.default")
def cumsum(ctx, node):
    a = bind(node)
    a.declare("dtype")  # the output's metadata holds the dtype torch accumulates in
    return ctx.call("cumsum.out", {"self": a.self, "dim": a.dim, "dtype": None}, [ctx.output(node)]).name


def _extreme(op: str):
    def lower(ctx, node):
        a = bind(node)
        return ctx.call(f"{op}.out", {"self": a.self, "dim": a.dim, "keepdim": a.keepdim}, [ctx.output(node)]).name

    lower.__name__ = op
    return lower


for _op in ("amax", "amin", "argmax", "argmin"):
    lowering("pte", f"aten.{_op}.default")(_extreme(_op))


def _correction(a) -> object:
    """``var``'s correction: ``correction`` when given, else 1 (``unbiased``, the default) or 0."""
    if "correction" in a:
        return a.correction
    return 1 if a.get("unbiased", True) else 0


@lowering("pte", "aten.var_mean.correction", "aten.var_mean.dim")
def var_mean(ctx, node):
    a = bind(node)
    outs = [ctx.output(node, 0), ctx.output(node, 1)]
    ctx.call("var_mean.correction_out", {"self": a.self, "dim": a.dim, "correction": _correction(a),
                                         "keepdim": a.keepdim}, outs)
    return [o.name for o in outs]


@lowering("pte", "aten.var.correction", "aten.var.dim")
def var(ctx, node):
    a = bind(node)
    return ctx.call("var.correction_out", {"self": a.self, "dim": a.dim, "correction": _correction(a),
                                           "keepdim": a.keepdim}, [ctx.output(node)]).name


@lowering("pte", "aten.linalg_vector_norm.default")
def linalg_vector_norm(ctx, node):
    """Order 2: ``sqrt(sum(x * x))``; order 1: ``sum(abs(x))`` (no portable norm kernel). Other
    orders, and a ``dtype``, are refused."""
    a = bind(node)
    if a.dtype is not None:
        raise Unsupported("linalg_vector_norm with a dtype")
    if a.ord not in (1, 2):
        raise Unsupported(f"linalg_vector_norm of order {a.ord} (orders 1 and 2 are converted)")
    x = ctx.tensor(a.self)
    shape = ctx.view.tensor(a.self.name).shape
    if a.ord == 2:
        terms = ctx.call("mul.out", {"self": x, "other": x}, [ctx.scratch("square", shape)])
    else:
        terms = ctx.call("abs.out", {"self": x}, [ctx.scratch("abs", shape)])
    out = ctx.output(node)
    if a.ord == 1:
        return ctx.call("sum.IntList_out", {"self": terms, "dim": a.dim, "keepdim": a.keepdim, "dtype": None},
                        [out]).name
    total = ctx.call("sum.IntList_out", {"self": terms, "dim": a.dim, "keepdim": a.keepdim, "dtype": None},
                     [ctx.scratch("sum", ctx.view.tensor(node.outputs[0].value.name).shape)])
    return ctx.call("sqrt.out", {"self": total}, [out]).name
