"""Loss lowerings: cross_entropy (class indices or probabilities), nll_loss, and
binary_cross_entropy_with_logits.

Class-index targets use ONNX's NegativeLogLikelihoodLoss (weights and ``ignore_index`` as torch:
a weighted mean divides by the weights of the targets counted); probability targets and the
logits loss are composed. ``reduction`` is torch's enum: 0 none, 1 mean, 2 sum.
"""

from __future__ import annotations

from ..aten import dtypes
from ..aten.args import bind
from ..aten.dtypes import ST
from ..aten.registry import lowering
from ..errors import Unsupported
from .shapes import axes_const

_REDUCTIONS = {0: "none", 1: "mean", 2: "sum"}


def _reduction(value) -> str:
    if value not in _REDUCTIONS:
        raise Unsupported(f"loss reduction {value!r}")
    return _REDUCTIONS[value]


def _reduce(ctx, loss: str, rank: int, reduction: str) -> str:
    if reduction == "none" or rank == 0:
        return loss
    return ctx.op("ReduceMean" if reduction == "mean" else "ReduceSum", loss, keepdims=0)


def _io(ctx):
    out = ctx.out_info().dtype
    cst = ctx.compute_type(out)
    if not dtypes.is_floating(cst):
        raise Unsupported(f"a loss of {out.name}")
    return out, cst


def _class_nll(ctx, logp: str, a, reduction: str, rank: int, cst) -> str:
    """NegativeLogLikelihoodLoss of log-probabilities ``logp`` [N, C, ...] (or [C], unbatched)."""
    target = ctx.t(a.target, ST.LONG)
    w = None if a.weight is None else ctx.t(a.weight, cst)
    if rank == 1:  # unbatched: [C] and a 0-d target, as a batch of one
        logp = ctx.op("Unsqueeze", logp, axes_const(ctx, [0]))
        target = ctx.op("Unsqueeze", target, axes_const(ctx, [0]))
    r = ctx.op("NegativeLogLikelihoodLoss", logp, target, w, reduction=reduction, ignore_index=int(a.ignore_index))
    if rank == 1 and reduction == "none":
        r = ctx.op("Squeeze", r, axes_const(ctx, [0]))
    return r


@lowering("onnx", "aten.nll_loss_nd.default", "aten.nll_loss.default", "aten.nll_loss2d.default")
def nll_loss(ctx, node):
    a = bind(node, "self", "target", "weight", "reduction", "ignore_index")
    out, cst = _io(ctx)
    rank = ctx.rank(a.self)
    if rank == 0:
        raise Unsupported("nll_loss of a 0-d input")
    r = _class_nll(ctx, ctx.t(a.self, cst), a, _reduction(a.reduction), rank, cst)
    return ctx.cast(r, cst, out)


@lowering("onnx", "aten.cross_entropy_loss.default")
def cross_entropy(ctx, node):
    """log_softmax over the classes (dim 1; 0 unbatched), then the NLL of class indices, or
    ``-sum(p * log_softmax)`` of probabilities (label smoothing mixes ``ls / C`` into them)."""
    a = bind(node, "self", "target", "weight", "reduction", "ignore_index", "label_smoothing")
    out, cst = _io(ctx)
    rank = ctx.rank(a.self)
    if rank == 0:
        raise Unsupported("cross_entropy of a 0-d input")
    reduction = _reduction(a.reduction)
    ls = a.label_smoothing
    if not isinstance(ls, (int, float)):
        raise Unsupported("cross_entropy with label_smoothing computed at run time")
    cdim = 0 if rank == 1 else 1
    logp = ctx.op("LogSoftmax", ctx.t(a.self, cst), axis=cdim)
    if not dtypes.is_floating(ctx.dtype(a.target)):
        if ls:
            raise Unsupported(f"cross_entropy of class indices with label_smoothing={ls}")
        return ctx.cast(_class_nll(ctx, logp, a, reduction, rank, cst), cst, out)
    p = ctx.t(a.target, cst)
    if ls:
        classes = ctx.info(a.self).shape[cdim]
        if not isinstance(classes, int):
            raise Unsupported("cross_entropy with label_smoothing over a dynamic class count")
        p = ctx.op("Add", ctx.op("Mul", p, ctx.const(1 - ls, cst)), ctx.const(ls / classes, cst))
    terms = ctx.op("Mul", logp, p)
    if a.weight is not None:
        w = ctx.t(a.weight, cst)
        if rank > 2:
            w = ctx.op("Reshape", w, ctx.ints([-1] + [1] * (rank - 2)))
        terms = ctx.op("Mul", terms, w)
    loss = ctx.op("Neg", ctx.op("ReduceSum", terms, axes_const(ctx, [cdim]), keepdims=0))
    return ctx.cast(_reduce(ctx, loss, rank - 1, reduction), cst, out)


@lowering("onnx", "aten.binary_cross_entropy_with_logits.default")
def bce_with_logits(ctx, node):
    """torch's stable form: ``(1 - t) x + (1 + (pw - 1) t) (log(1 + exp(-|x|)) + max(-x, 0))``,
    times ``weight``, then reduced."""
    a = bind(node, "self", "target", "weight", "pos_weight", "reduction")
    out, cst = _io(ctx)
    x, t = ctx.t(a.self, cst), ctx.t(a.target, cst)
    one, zero = ctx.const(1, cst), ctx.const(0, cst)
    soft = ctx.op("Add", ctx.op("Log", ctx.op("Add", one, ctx.op("Exp", ctx.op("Neg", ctx.op("Abs", x))))),
                  ctx.op("Max", ctx.op("Neg", x), zero))
    if a.pos_weight is not None:
        lw = ctx.op("Add", one, ctx.op("Mul", ctx.op("Sub", ctx.t(a.pos_weight, cst), one), t))
        soft = ctx.op("Mul", lw, soft)
    loss = ctx.op("Add", ctx.op("Mul", ctx.op("Sub", one, t), x), soft)
    if a.weight is not None:
        loss = ctx.op("Mul", loss, ctx.t(a.weight, cst))
    rank = ctx.out_info().rank if _reduction(a.reduction) == "none" else max(ctx.rank(a.self), ctx.rank(a.target))
    return ctx.cast(_reduce(ctx, loss, rank, _reduction(a.reduction)), cst, out)
