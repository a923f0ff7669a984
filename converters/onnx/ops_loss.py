"""Loss lowerings: cross_entropy (class indices or probabilities), nll_loss,
binary_cross_entropy(_with_logits), the margin and embedding losses, poisson_nll, kl_div, and the
norms they (and linalg) build on: vector/matrix norms, dist, pairwise_distance, renorm.

Class-index targets use ONNX's NegativeLogLikelihoodLoss (weights and ``ignore_index`` as torch:
a weighted mean divides by the weights of the targets counted); probability targets and the
logits loss are composed. ``reduction`` is torch's enum: 0 none, 1 mean, 2 sum.
"""

from __future__ import annotations

import math

import numpy as np

from ..aten import dtypes
from ..aten.args import bind
from ..aten.dtypes import ST
from ..aten.registry import lowering
from ..errors import Unsupported
from .ops_reduce import extreme
from .shapes import axes_const

_REDUCTIONS = {0: "none", 1: "mean", 2: "sum"}


def _reduction(value) -> str:
    if value not in _REDUCTIONS:
        raise Unsupported(f"loss reduction {value!r}")
    return _REDUCTIONS[value]


def _reduce(ctx, loss: str, rank: int, reduction: str) -> str:
    if reduction == "none" or rank == 0:
        return loss
    return _mean(ctx, loss, None) if reduction == "mean" else ctx.op("ReduceSum", loss, keepdims=0)


def _mean(ctx, x: str, axes) -> str:
    """The mean over ``axes`` (None: all), NaN over no elements as torch's (ReduceMean gives 0):
    the sum divided by the count."""
    ax = None if axes is None else axes_const(ctx, axes)
    s = ctx.op("ReduceSum", x, ax, keepdims=0)
    count = ctx.op("Size", x) if axes is None else ctx.op(
        "ReduceProd", ctx.op("Gather", ctx.op("Shape", x), ax, axis=0), keepdims=0)
    return ctx.op("Div", s, ctx.op("CastLike", count, s))


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


# ------------------------------------------------------------------ shared pieces


def _op(ctx, op: str, st, *xs):
    """``op`` over ``xs`` (in ``st``'s compute type) as torch computes it in dtype ``st``: rounded
    back through ``st`` (integers wrap, float16 rounds) when it is computed wider."""
    c = ctx.compute_type(st)
    r = ctx.op(op, *xs)
    return r if c == st else ctx.cast(ctx.cast(r, c, st), st, c)


def _no_bools(ctx, *refs):
    if any(ctx.dtype(r) == ST.BOOL for r in refs):
        raise Unsupported("a loss of boolean inputs")


def _clamp0(ctx, x, cst):
    """``clamp_min(x, 0)``, NaN kept."""
    zero = ctx.const(0, cst)
    return ctx.op("Where", ctx.op("Less", x, zero), zero, x)


def _target(ctx, ref):
    """``target`` in a type its values compare in exactly (booleans as int32)."""
    st = ctx.dtype(ref)
    c = ST.INT if st == ST.BOOL else ctx.compute_type(st)
    return ctx.t(ref, c), c


def _static(value, what: str):
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        raise Unsupported(f"{what} computed at run time")
    return value


def _diff(ctx, x1, x2, cst):
    """``x1 - x2`` in their promoted dtype (integers wrap as torch's), then in ``cst``."""
    st = dtypes.promote_types(ctx.dtype(x1), ctx.dtype(x2))
    if st == ST.BOOL:
        raise Unsupported("a difference of booleans")
    c = ctx.compute_type(st)
    return ctx.cast(_op(ctx, "Sub", st, ctx.t(x1, c), ctx.t(x2, c)), c, cst)


def vector_norm(ctx, x, p, axes, keepdim: bool, cst):
    """``(sum |x|^p)^(1/p)`` over ``axes`` of the ONNX value ``x`` (in float ``cst``): 1, 2 and
    +-inf by ONNX's reductions, 0 counts the non-zeros (NaN counts); no axes: each element alone."""
    p = _static(p, "a norm's order")
    x = ctx.op("Abs", x)
    if p == 0:
        x = ctx.cast(ctx.op("Not", ctx.op("Equal", x, ctx.const(0, cst))), ST.BOOL, cst)
    if not axes:
        return x
    ax, k = axes_const(ctx, axes), int(bool(keepdim))
    if p in (math.inf, -math.inf):
        return extreme(ctx, "ReduceMax" if p > 0 else "ReduceMin", x, ax, k, cst)
    op = {1: "ReduceL1", 2: "ReduceL2", 0: "ReduceSum"}.get(p)
    if op is not None:
        return ctx.op(op, x, ax, keepdims=k)
    s = ctx.op("ReduceSum", ctx.op("Pow", x, ctx.const(p, cst)), ax, keepdims=k)
    return ctx.op("Pow", s, ctx.const(1.0 / p, cst))


def _pairwise(ctx, x1, x2, p, eps, keepdim, cst):
    """torch's ``norm(x1 - x2 + eps, p, dim=-1)`` (the difference in the operands' dtype)."""
    d = ctx.op("Add", _diff(ctx, x1, x2, cst), ctx.const(_static(eps, "eps"), cst))
    rank = max(ctx.rank(x1), ctx.rank(x2))
    return vector_norm(ctx, d, p, [rank - 1] if rank else [], keepdim, cst)



# ------------------------------------------------------------------ margin and embedding losses


def _where_target(ctx, t, tc, value: int, then, cst, equal: bool = True):
    """``then`` where ``target == value`` (``!=`` with ``equal=False``), else 0."""
    cond = ctx.op("Equal", t, ctx.const(value, tc))
    return ctx.op("Where", cond if equal else ctx.op("Not", cond), then, ctx.const(0, cst))


@lowering("onnx", "aten.cosine_embedding_loss.default")
def cosine_embedding_loss(ctx, node):
    """``1 - cos`` where target is 1, ``max(cos - margin, 0)`` where it is -1, else 0; ``cos`` over the
    last dim, 1e-12 added to each squared magnitude (as torch; integer products summed in int64)."""
    a = bind(node, "input1", "input2", "target", "margin", "reduction")
    out, cst = _io(ctx)
    td = ctx.rank(a.target)
    if td not in (0, 1) or ctx.rank(a.input1) != td + 1 or ctx.rank(a.input2) != td + 1:
        raise Unsupported("cosine_embedding_loss of inputs not one dim above the target")
    st = dtypes.promote_types(ctx.dtype(a.input1), ctx.dtype(a.input2))
    ax = axes_const(ctx, [td])

    def psum(u, v):  # torch's (u * v).sum(td)
        if dtypes.is_floating(st):
            c = ctx.compute_type(st)
            return ctx.cast(ctx.op("ReduceSum", _op(ctx, "Mul", st, ctx.t(u, c), ctx.t(v, c)), ax, keepdims=0), c, cst)
        if st == ST.BOOL:
            prod = ctx.cast(ctx.op("And", ctx.t(u, ST.BOOL), ctx.t(v, ST.BOOL)), ST.BOOL, ST.LONG)
        else:
            c = ctx.compute_type(st)
            prod = ctx.cast(_op(ctx, "Mul", st, ctx.t(u, c), ctx.t(v, c)), c, ST.LONG)
        return ctx.cast(ctx.op("ReduceSum", prod, ax, keepdims=0), ST.LONG, cst)

    eps = ctx.const(1e-12, cst)
    m1, m2 = ctx.op("Add", psum(a.input1, a.input1), eps), ctx.op("Add", psum(a.input2, a.input2), eps)
    cos = ctx.op("Div", psum(a.input1, a.input2), ctx.op("Sqrt", ctx.op("Mul", m1, m2)))
    pos = ctx.op("Sub", ctx.const(1, cst), cos)
    neg = _clamp0(ctx, ctx.op("Sub", cos, ctx.const(_static(a.margin, "margin"), cst)), cst)
    t, tc = _target(ctx, a.target)
    loss = ctx.op("Add", _where_target(ctx, t, tc, 1, pos, cst), _where_target(ctx, t, tc, -1, neg, cst))
    return ctx.cast(_reduce(ctx, loss, td, _reduction(a.reduction)), cst, out)


@lowering("onnx", "aten.margin_ranking_loss.default")
def margin_ranking_loss(ctx, node):
    """``max(-target * (input1 - input2) + margin, 0)`` (integer parts exact)."""
    a = bind(node, "input1", "input2", "target", "margin", "reduction")
    out, cst = _io(ctx)
    _no_bools(ctx, a.input1, a.input2, a.target)
    tt = ctx.dtype(a.target)
    st = dtypes.promote_types(tt, dtypes.promote_types(ctx.dtype(a.input1), ctx.dtype(a.input2)))
    c, ct = ctx.compute_type(st), ctx.compute_type(tt)
    neg_t = ctx.cast(_op(ctx, "Neg", tt, ctx.t(a.target, ct)), ct, c)
    prod = ctx.cast(_op(ctx, "Mul", st, neg_t, _diff(ctx, a.input1, a.input2, c)), c, cst)
    loss = _clamp0(ctx, ctx.op("Add", prod, ctx.const(_static(a.margin, "margin"), cst)), cst)
    rank = max(ctx.rank(a.input1), ctx.rank(a.input2), ctx.rank(a.target))
    return ctx.cast(_reduce(ctx, loss, rank, _reduction(a.reduction)), cst, out)


@lowering("onnx", "aten.hinge_embedding_loss.default")
def hinge_embedding_loss(ctx, node):
    """``max(margin - x, 0)`` where target != 1, plus ``x`` where target != -1."""
    a = bind(node, "self", "target", "margin", "reduction")
    out, cst = _io(ctx)
    x = ctx.t(a.self, cst)
    t, tc = _target(ctx, a.target)
    clamp = _clamp0(ctx, ctx.op("Sub", ctx.const(_static(a.margin, "margin"), cst), x), cst)
    loss = ctx.op("Add", _where_target(ctx, t, tc, 1, clamp, cst, equal=False),
                  _where_target(ctx, t, tc, -1, x, cst, equal=False))
    rank = max(ctx.rank(a.self), ctx.rank(a.target))
    return ctx.cast(_reduce(ctx, loss, rank, _reduction(a.reduction)), cst, out)


@lowering("onnx", "aten.triplet_margin_loss.default")
def triplet_margin_loss(ctx, node):
    """``max(margin + d(a, p) - d(a, n), 0)``, d the pairwise distance (``swap``: d(a, n) is the
    smaller of it and d(p, n), NaN kept)."""
    a = bind(node, "anchor", "positive", "negative", "margin", "p", "eps", "swap", "reduction")
    out, cst = _io(ctx)
    dpos = _pairwise(ctx, a.anchor, a.positive, a.p, a.eps, False, cst)
    dneg = _pairwise(ctx, a.anchor, a.negative, a.p, a.eps, False, cst)
    if a.swap:
        dsw = _pairwise(ctx, a.positive, a.negative, a.p, a.eps, False, cst)
        take = ctx.op("Or", ctx.op("Less", dsw, dneg), ctx.op("Not", ctx.op("Equal", dsw, dsw)))
        dneg = ctx.op("Where", take, dsw, dneg)
    loss = _clamp0(ctx, ctx.op("Sub", ctx.op("Add", ctx.const(_static(a.margin, "margin"), cst), dpos), dneg), cst)
    rank = max(ctx.rank(a.anchor), ctx.rank(a.positive), ctx.rank(a.negative)) - 1
    return ctx.cast(_reduce(ctx, loss, rank, _reduction(a.reduction)), cst, out)


# ------------------------------------------------------------------ pointwise losses


@lowering("onnx", "aten.poisson_nll_loss.default")
def poisson_nll_loss(ctx, node):
    """``exp(x) - t x`` (log_input) or ``x - t log(x + eps)``; ``full`` adds Stirling's
    ``t log t - t + log(2 pi t) / 2`` where t > 1."""
    a = bind(node, "input", "target", "log_input", "full", "eps", "reduction")
    out, cst = _io(ctx)
    _no_bools(ctx, a.input, a.target)
    x, t = ctx.t(a.input, cst), ctx.t(a.target, cst)
    if a.log_input:
        a.declare("eps")  # only the log(x + eps) form reads it
        st = dtypes.promote_types(ctx.dtype(a.input), ctx.dtype(a.target))
        c = ctx.compute_type(st)
        tx = ctx.cast(_op(ctx, "Mul", st, ctx.t(a.target, c), ctx.t(a.input, c)), c, cst)
        loss = ctx.op("Sub", ctx.op("Exp", x), tx)
    else:
        log = ctx.op("Log", ctx.op("Add", x, ctx.const(_static(a.eps, "eps"), cst)))
        loss = ctx.op("Sub", x, ctx.op("Mul", t, log))
    if a.full:
        half_log = ctx.op("Mul", ctx.const(0.5, cst), ctx.op("Log", ctx.op("Mul", ctx.const(2 * math.pi, cst), t)))
        stirling = ctx.op("Add", ctx.op("Sub", ctx.op("Mul", t, ctx.op("Log", t)), t), half_log)
        one = ctx.const(1, cst)
        loss = ctx.op("Add", loss, ctx.op("Where", ctx.op("LessOrEqual", t, one), ctx.const(0, cst), stirling))
    rank = max(ctx.rank(a.input), ctx.rank(a.target))
    return ctx.cast(_reduce(ctx, loss, rank, _reduction(a.reduction)), cst, out)


@lowering("onnx", "aten.kl_div.default")
def kl_div(ctx, node):
    """``xlogy(t, t) - t x``, or ``exp(t) (t - x)`` with ``log_target``."""
    a = bind(node, "self", "target", "reduction", "log_target")
    out, cst = _io(ctx)
    x, t = ctx.t(a.self, cst), ctx.t(a.target, cst)
    if a.log_target:
        loss = ctx.op("Mul", ctx.op("Exp", t), ctx.op("Sub", t, x))
    else:
        zero = ctx.const(0, cst)
        tlogt = ctx.op("Where", ctx.op("Equal", t, zero), zero, ctx.op("Mul", t, ctx.op("Log", t)))
        xlogy = ctx.op("Where", ctx.op("Not", ctx.op("Equal", t, t)), t, tlogt)  # NaN target: NaN
        loss = ctx.op("Sub", xlogy, ctx.op("Mul", t, x))
    rank = max(ctx.rank(a.self), ctx.rank(a.target))
    return ctx.cast(_reduce(ctx, loss, rank, _reduction(a.reduction)), cst, out)


@lowering("onnx", "aten.soft_margin_loss.default")
def soft_margin_loss(ctx, node):
    """``log(1 + exp(-x t))``."""
    a = bind(node, "self", "target", "reduction")
    out, cst = _io(ctx)
    z = ctx.op("Mul", ctx.op("Neg", ctx.t(a.self, cst)), ctx.t(a.target, cst))
    loss = ctx.op("Log", ctx.op("Add", ctx.const(1, cst), ctx.op("Exp", z)))
    rank = max(ctx.rank(a.self), ctx.rank(a.target))
    return ctx.cast(_reduce(ctx, loss, rank, _reduction(a.reduction)), cst, out)


@lowering("onnx", "aten.binary_cross_entropy.default")
def binary_cross_entropy(ctx, node):
    """``(t - 1) max(log(1 - x), -100) - t max(log x, -100)`` (torch's clamp of the logs; NaN kept),
    times ``weight``."""
    a = bind(node, "self", "target", "weight", "reduction")
    out, cst = _io(ctx)
    x, t = ctx.t(a.self, cst), ctx.t(a.target, cst)
    one, floor = ctx.const(1, cst), ctx.const(-100, cst)

    def clamped_log(v):
        lg = ctx.op("Log", v)
        return ctx.op("Where", ctx.op("Less", lg, floor), floor, lg)

    loss = ctx.op("Sub", ctx.op("Mul", ctx.op("Sub", t, one), clamped_log(ctx.op("Sub", one, x))),
                  ctx.op("Mul", t, clamped_log(x)))
    if a.weight is not None:
        loss = ctx.op("Mul", loss, ctx.t(a.weight, cst))
    rank = max(ctx.rank(a.self), ctx.rank(a.target), 0 if a.weight is None else ctx.rank(a.weight))
    return ctx.cast(_reduce(ctx, loss, rank, _reduction(a.reduction)), cst, out)


# ------------------------------------------------------------------ multi-class margin losses


def _classes(ctx, ref, what: str):
    """``ref`` ([N, C], [C] or 0-d: one class) as [N, C], its class count C (an int, or a 0-d
    int64 value when dynamic) and the class indices [C]."""
    shape = ctx.info(ref).shape
    if len(shape) > 2:
        raise Unsupported(f"{what} of a {len(shape)}-d input")
    cst = ctx.compute_type(ctx.dtype(ref))
    x = ctx.t(ref, cst)
    x = x if len(shape) == 2 else ctx.op("Reshape", x, ctx.ints([1, -1]))
    c = 1 if not shape else shape[-1]
    if isinstance(c, int):
        ctx.reserve_array([c], 8, f"{what} classes")
        return x, c, ctx.const(np.arange(c, dtype=np.int64), ST.LONG)
    n = ctx.op("Squeeze", ctx.dim(ref, -1), axes_const(ctx, [0]))
    zero, one = (ctx.const(np.array(v, np.int64), ST.LONG) for v in (0, 1))
    return x, n, ctx.op("Range", zero, n, one)


def _per_sample(ctx, per, ref, reduction):
    """Reduces the per-sample losses [N]: 'none' gives [N] ([] for an input of rank <= 1)."""
    if reduction != "none" and ctx.rank(ref) == 2 and ctx.info(ref).shape[0] == 0:
        raise Unsupported("a multi-class margin loss of no samples reduced (torch's kernel leaves it uninitialised)")
    if reduction == "none":
        return per if ctx.rank(ref) == 2 else ctx.op("Reshape", per, ctx.ints([]))
    return _mean(ctx, per, [0]) if reduction == "mean" else ctx.op("ReduceSum", per, axes_const(ctx, [0]), keepdims=0)


def _divide_by(ctx, s, c, cst):
    return ctx.op("Div", s, ctx.const(c, cst) if isinstance(c, int) else ctx.cast(c, ST.LONG, cst))


@lowering("onnx", "aten.multi_margin_loss.default")
def multi_margin_loss(ctx, node):
    """Per sample: ``sum over i != y of max(margin - x[y] + x[i], 0)^p * w[y] / C`` (p 1 or 2)."""
    a = bind(node, "self", "target", "p", "margin", "weight", "reduction")
    out, cst = _io(ctx)
    p, margin = _static(a.p, "multi_margin_loss's p"), _static(a.margin, "margin")
    if p not in (1, 2):
        raise Unsupported(f"multi_margin_loss with p={p} (torch takes 1 or 2)")
    x, c, classes = _classes(ctx, a.self, "multi_margin_loss")
    y = ctx.op("Reshape", ctx.t(a.target, ST.LONG), ctx.ints([-1, 1]))
    xy = ctx.op("GatherElements", x, y, axis=1)
    z = ctx.op("Add", ctx.op("Sub", ctx.const(margin, cst), xy), x)
    h = z if p == 1 else ctx.op("Mul", z, z)
    if a.weight is not None:
        h = ctx.op("Mul", h, ctx.op("Gather", ctx.t(a.weight, cst), y, axis=0))
    zero = ctx.const(0, cst)
    keep = ctx.op("And", ctx.op("Greater", z, zero), ctx.op("Not", ctx.op("Equal", classes, y)))
    per = _divide_by(ctx, ctx.op("ReduceSum", ctx.op("Where", keep, h, zero), axes_const(ctx, [1]), keepdims=0), c, cst)
    return ctx.cast(_per_sample(ctx, per, a.self, _reduction(a.reduction)), cst, out)


@lowering("onnx", "aten.multilabel_margin_loss.default")
def multilabel_margin_loss(ctx, node):
    """Per sample: the targets are ``y`` up to its first -1; ``sum over targets j and non-targets i of
    max(1 - x[j] + x[i], 0) / C``."""
    a = bind(node, "self", "target", "reduction")
    out, cst = _io(ctx)
    x, c, classes = _classes(ctx, a.self, "multilabel_margin_loss")
    y = ctx.t(a.target, ST.LONG)
    y = y if ctx.rank(a.target) == 2 else ctx.op("Reshape", y, ctx.ints([1, -1]))
    ends = ctx.cast(ctx.op("Equal", y, ctx.const(-1, ST.LONG)), ST.BOOL, ST.INT)
    valid = ctx.op("Equal", ctx.op("CumSum", ends, ctx.const(np.array(1, np.int64), ST.LONG)), ctx.const(0, ST.INT))
    yv = ctx.op("Where", valid, y, ctx.const(0, ST.LONG))
    # is_target[n, i]: some valid j has y[n, j] == i ([N, C(j), C(i)] reduced over j)
    hit = ctx.op("And", ctx.op("Equal", ctx.op("Unsqueeze", yv, axes_const(ctx, [2])), classes),
                 ctx.op("Unsqueeze", valid, axes_const(ctx, [2])))
    is_target = ctx.op("ReduceMax", ctx.cast(hit, ST.BOOL, ST.INT), axes_const(ctx, [1]), keepdims=1)  # [N, 1, C]
    xj = ctx.op("Unsqueeze", ctx.op("GatherElements", x, yv, axis=1), axes_const(ctx, [2]))  # [N, C(j), 1]
    z = ctx.op("Add", ctx.op("Sub", ctx.const(1, cst), xj), ctx.op("Unsqueeze", x, axes_const(ctx, [1])))
    zero = ctx.const(0, cst)
    keep = ctx.op("And", ctx.op("And", ctx.op("Unsqueeze", valid, axes_const(ctx, [2])),
                                ctx.op("Equal", is_target, ctx.const(0, ST.INT))), ctx.op("Greater", z, zero))
    s = ctx.op("ReduceSum", ctx.op("Where", keep, z, zero), axes_const(ctx, [1, 2]), keepdims=0)
    return ctx.cast(_per_sample(ctx, _divide_by(ctx, s, c, cst), a.self, _reduction(a.reduction)), cst, out)
