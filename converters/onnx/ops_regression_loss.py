"""Elementwise regression losses: l1_loss, mse_loss, huber_loss and smooth_l1_loss, each of
``|self - target|`` (broadcast, as torch's kernels), then reduced (``none``, ``mean``, ``sum``).
Floating dtypes only (torch's kernels take no integers), computed in the output's compute type;
NaN propagates (a comparison with NaN is false, and the other branch carries it)."""

from __future__ import annotations

from ..aten.args import bind
from ..aten.registry import lowering
from ..errors import Unsupported
from .ops_loss import _io, _reduce, _reduction


def _static(value, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise Unsupported(f"{what} computed at run time")
    return float(value)


def _abs_diff(ctx, a, cst) -> str:
    return ctx.op("Abs", ctx.op("Sub", ctx.t(a.self, cst), ctx.t(a.target, cst)))


def _reduced(ctx, a, loss: str, out, cst) -> str:
    rank = max(ctx.rank(a.self), ctx.rank(a.target))
    return ctx.cast(_reduce(ctx, loss, rank, _reduction(a.reduction)), cst, out)


def _half_square(ctx, d: str, cst) -> str:
    """``0.5 * d * d`` in torch's order."""
    return ctx.op("Mul", ctx.op("Mul", ctx.const(0.5, cst), d), d)


def _below(ctx, d: str, limit: float, cst, quadratic: str, linear: str) -> str:
    """``quadratic`` where ``d < limit``, else ``linear`` (NaN: ``linear``, which carries it)."""
    return ctx.op("Where", ctx.op("Less", d, ctx.const(limit, cst)), quadratic, linear)


@lowering("onnx", "aten.l1_loss.default")
def l1_loss(ctx, node):
    """``|x - y|``."""
    a = bind(node, "self", "target", "reduction")
    out, cst = _io(ctx)
    return _reduced(ctx, a, _abs_diff(ctx, a, cst), out, cst)


@lowering("onnx", "aten.mse_loss.default")
def mse_loss(ctx, node):
    """``(x - y)^2``."""
    a = bind(node, "self", "target", "reduction")
    out, cst = _io(ctx)
    d = ctx.op("Sub", ctx.t(a.self, cst), ctx.t(a.target, cst))
    return _reduced(ctx, a, ctx.op("Mul", d, d), out, cst)


@lowering("onnx", "aten.huber_loss.default")
def huber_loss(ctx, node):
    """``0.5 d^2`` where ``d = |x - y| < delta``, else ``delta (d - 0.5 delta)``."""
    a = bind(node, "self", "target", "reduction", "delta")
    delta = _static(a.delta, "huber_loss's delta")
    if not delta > 0:
        raise Unsupported(f"huber_loss with delta={delta} (torch requires delta > 0)")
    out, cst = _io(ctx)
    d = _abs_diff(ctx, a, cst)
    linear = ctx.op("Mul", ctx.const(delta, cst), ctx.op("Sub", d, ctx.const(0.5 * delta, cst)))
    return _reduced(ctx, a, _below(ctx, d, delta, cst, _half_square(ctx, d, cst), linear), out, cst)


@lowering("onnx", "aten.smooth_l1_loss.default")
def smooth_l1_loss(ctx, node):
    """``0.5 d^2 / beta`` where ``d = |x - y| < beta``, else ``d - 0.5 beta``; ``beta = 0`` is l1."""
    a = bind(node, "self", "target", "reduction", "beta")
    beta = _static(a.beta, "smooth_l1_loss's beta")
    if beta < 0:
        raise Unsupported(f"smooth_l1_loss with beta={beta} (torch requires beta >= 0)")
    out, cst = _io(ctx)
    d = _abs_diff(ctx, a, cst)
    if beta == 0:
        return _reduced(ctx, a, d, out, cst)
    quadratic = ctx.op("Div", _half_square(ctx, d, cst), ctx.const(beta, cst))
    linear = ctx.op("Sub", d, ctx.const(0.5 * beta, cst))
    return _reduced(ctx, a, _below(ctx, d, beta, cst, quadratic, linear), out, cst)
