"""Reductions, scans and differences: ``cumsum``, ``diff`` (composed), ``amax``/``amin``,
``argmax``/``argmin``, ``var``/``var_mean`` (a correction), ``linalg_vector_norm`` (orders 1 and 2,
composed); each a portable kernel.
``sum`` and ``mean`` are in ``ops_elementwise``.

``cumsum``'s output dtype (int64 for an integer or bool input, as torch; a ``dtype`` argument's)
is the node's: 1.5.1's kernel casts each element to it before summing, as torch does.
"""

from __future__ import annotations

from ...schema import definitions as d
from ...serde.codec.symbolic import Add, Integer
from ..aten.args import bind
from ..aten.registry import lowering
from ..errors import Unsupported


@lowering("pte", "aten.cumsum.default")
def cumsum(ctx, node):
    a = bind(node)
    a.declare("dtype")  # the output's metadata holds the dtype torch accumulates in
    if ctx.view.tensor(a.self.name).rank == 0:  # the sum of one element: 1.5.1's cumsum.out refuses dim 0 of a 0-d input
        a.declare("dim")
        return ctx.call("dim_order_ops::_to_dim_order_copy.out", {"self": a.self, "dim_order": []},
                        [ctx.output(node)]).name
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
    dims = a.dim
    if len(shape) == 0:  # a 0-d input: every dim is the whole of it, and 1.5.1's sum.IntList_out aborts on dim 0
        dims = None
    if a.ord == 1:
        return ctx.call("sum.IntList_out", {"self": terms, "dim": dims, "keepdim": a.keepdim, "dtype": None},
                        [out]).name
    total = ctx.call("sum.IntList_out", {"self": terms, "dim": dims, "keepdim": a.keepdim, "dtype": None},
                     [ctx.scratch("sum", ctx.view.tensor(node.outputs[0].value.name).shape)])
    return ctx.call("sqrt.out", {"self": total}, [out]).name


def _plus(x, y):
    """The sum of two dims (an expression when either is symbolic)."""
    if isinstance(x, int) and isinstance(y, int):
        return x + y
    return Add(tuple(Integer(v) if isinstance(v, int) else v for v in (x, y)))


@lowering("pte", "aten.diff.default")
def diff(ctx, node):
    """``n`` times ``x[1:] - x[:-1]`` along ``dim`` (``slice_copy.Tensor_out``, ``sub.out``) of ``self``
    with ``prepend``/``append`` concatenated (``cat.out``). Bool (torch's xor) and ``n=0`` are refused."""
    a = bind(node)
    info = ctx.view.tensor(a.self.name)
    if info.dtype == d.ScalarType.BOOL or a.n < 1:
        raise Unsupported("diff of a bool tensor or with n < 1")
    dim = a.dim % info.rank
    parts = [p for p in (a.prepend, a.self, a.append) if p is not None]
    shape = list(info.shape)
    for p in (a.prepend, a.append):
        if p is not None:
            shape[dim] = _plus(shape[dim], ctx.view.tensor(p.name).shape[dim])
    x = ctx.call("cat.out", {"tensors": parts, "dim": dim}, [ctx.scratch("diff_cat", shape)]) if len(parts) > 1 \
        else ctx.tensor(a.self)
    for step in range(a.n):
        shape = shape[:dim] + [_plus(shape[dim], -1)] + shape[dim + 1:]
        ends = [ctx.call("slice_copy.Tensor_out", {"self": x, "dim": dim, "start": start, "end": end, "step": 1},
                         [ctx.scratch(base, shape)]) for base, start, end in (("diff_next", 1, None),
                                                                              ("diff_prev", 0, -1))]
        out = ctx.output(node) if step == a.n - 1 else ctx.scratch("diff", shape)
        x = ctx.call("sub.out", {"self": ends[0], "other": ends[1]}, [out])
    return x.name
