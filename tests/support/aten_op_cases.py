"""Programs of the ATen operators torch.export keeps as written that pt2x lowers once for every
target (issue 33): one tiny module per family, as ``test_onnx_ops.OPS`` spells them
(name -> (function, input factories)), run against eager by tests/converters/test_onnx_ops.py
(ONNX Runtime) and tests/converters/tflite/test_tflite_ops.py (LiteRT).

``TFLITE_REFUSED`` names the families the TFLite target refuses and the words its one report
gives (TFLite's SCATTER_ND adds duplicate indices, so only additive scatters are exact)."""

from __future__ import annotations

import torch
import torch.nn.functional as F

r = torch.randn


def _x(*shape, scale=1.0):
    return lambda: r(*shape) * scale


def _ints(lo, hi, *shape):
    return lambda: torch.randint(lo, hi, shape)


def _special():
    """Values at the edges: zeros, halves (rounding), NaN and infinities."""
    return torch.tensor([[0.0, 0.5, -0.5, 2.5], [float("nan"), float("inf"), -float("inf"), 1e-3],
                         [-2.25, 3.0, -7.0, 0.3]])


def _native_norms(x, g):
    y, mean, rstd = torch.ops.aten.native_layer_norm.default(x, [6], None, None, 1e-5)
    gy, gm, gr = torch.ops.aten.native_group_norm.default(g, None, None, 2, 4, 6, 2, 1e-5)
    return y, mean, rstd, gy, gm, gr


CASES = {
    "pointwise_more": (lambda x, y, s: (
        F.selu(x), F.celu(x, 0.5), F.celu(x), F.threshold(x, 0.1, -2.0), F.softshrink(x, 0.3), F.hardshrink(x, 0.3),
        torch.isfinite(s), F.softshrink(s, 0.5), F.hardshrink(s), torch.exp2(x), torch.square(x),
        torch.logaddexp(x, y), torch.logaddexp2(x, y), torch.logaddexp(s, s), torch.round(x * 10, decimals=2),
        torch.round(x * 100, decimals=-1), torch.divide(x, y.abs() + 1), torch.divide(x, 0.7, rounding_mode="floor"),
        torch.subtract(x, y, alpha=2), torch.multiply(x, y), torch.broadcast_to(x[:1], (3, 4))),
        (_x(3, 4, scale=2.0), _x(3, 4, scale=2.0), _special)),
    "int_more": (lambda a, b: (F.threshold(a, 1, 7), torch.square(a), torch.isfinite(a), torch.cross(a, b, dim=1),
                               torch.cumprod(a, 0), torch.diag(a[:, 0]), torch.diag(a), a.index_add(0, b[0].abs(), b, alpha=2),
                               a.scatter_reduce(1, b.abs() % 3, a, "sum", include_self=False), torch.subtract(a, b)),
                 (_ints(-3, 4, 3, 3), _ints(-2, 3, 3, 3))),
    "linalg_more": (lambda x, v, w1, w2, w, b, g: (
        torch.cross(x, x.flip(0), dim=1), torch.linalg.cross(x, x.roll(1, 0)), torch.diag(v), torch.diag(v, 1),
        torch.diag(v, -2), torch.diag(x), torch.diag(x, 1), torch.diag(x, -1), F.bilinear(w1, w2, w, b),
        F.bilinear(w1[None], w2[None], w), torch.cumprod(x, 1), torch.cumprod(v, 0, dtype=torch.float64),
        torch.linalg.vector_norm(x, 3, dim=1), torch.linalg.vector_norm(x, 0), torch.linalg.vector_norm(x, -float("inf")),
        torch.linalg.vector_norm(x, float("inf"), dim=0, keepdim=True), torch.linalg.vector_norm(x, 0.5, dim=(0, 1)),
        torch.linalg.vector_norm(x, -1, dim=1), x.roll(2), x.roll(-1, 1), *torch.tensor_split(x, 2, 1),
        *torch.tensor_split(v, 3), *torch.tensor_split(x, [1, 3], 0), *torch.tensor_split(v, [2, -1, 9]),
        *_native_norms(x.repeat(1, 2), g)),
        (_x(4, 3), _x(5), _x(2, 3), _x(2, 4), _x(5, 3, 4), _x(5), _x(2, 4, 6))),
    "losses": (lambda x, t, p, wt, x3, t3: (
        F.cross_entropy(x, t), F.cross_entropy(x, t, weight=wt, reduction="sum"),
        F.cross_entropy(x, t, ignore_index=1, reduction="none"), F.cross_entropy(x, p.softmax(1)),
        F.cross_entropy(x, p.softmax(1), weight=wt, label_smoothing=0.2, reduction="none"),
        F.cross_entropy(x3, t3, weight=wt), F.cross_entropy(x[0], t[0]), F.nll_loss(x.log_softmax(1), t, weight=wt),
        F.nll_loss(x.log_softmax(1), t, reduction="none", ignore_index=2),
        F.binary_cross_entropy_with_logits(x, p.sigmoid()),
        F.binary_cross_entropy_with_logits(x, p.sigmoid(), weight=wt, pos_weight=wt.flip(0), reduction="sum"),
        F.binary_cross_entropy_with_logits(x * 30, (p > 0).float(), reduction="none")),
        (_x(3, 5), _ints(0, 5, 3), _x(3, 5), lambda: torch.rand(5) + 0.5, _x(2, 5, 4), _ints(0, 5, 2, 4))),
    "scatters_additive": (lambda x, i, s, j, u: (
        x.index_add(0, i, s), x.index_add(1, torch.tensor([2, 0]), x[:, :2] * 3, alpha=-0.5),
        x.index_add(0, torch.tensor([1, 1, 3]), s), x.index_copy(0, i[:1], s[:1]),
        x.scatter_reduce(0, j, u, "sum"), x.scatter_reduce(1, j % 3, u, "sum", include_self=False),
        x.scatter_reduce(0, j, u, "mean"), x.scatter_reduce(1, j % 3, u, "mean", include_self=False),
        torch.index_put(x, (j[0],), u[0, :3], accumulate=True)),
        (_x(4, 3), lambda: torch.tensor([2, 0, 3]), _x(3, 3), lambda: torch.tensor([[0, 1, 0], [3, 3, 1]]), _x(2, 3))),
    "scatters_other": (lambda x, i, s, j, u: (
        x.index_copy(0, i, s), x.index_copy(1, torch.tensor([2, 0]), x[:, :2] * 3),
        x.scatter_reduce(0, j, u, "prod"), x.scatter_reduce(1, j % 3, u, "amax", include_self=False),
        x.scatter_reduce(0, j, u, "amin"), x.scatter_reduce(0, j, u, "prod", include_self=False)),
        (_x(4, 3), lambda: torch.tensor([2, 0, 3]), _x(3, 3), lambda: torch.tensor([[0, 1, 0], [3, 3, 1]]), _x(2, 3))),
    "float_power": (lambda x: (torch.float_power(x.abs(), 2), torch.float_power(x.abs(), x), torch.float_power(2, x)),
                    (_x(3, 4),)),
}

TFLITE_REFUSED = {
    "scatters_other": "which is exact only for reduction='add'",
}
"""Family -> words of the TFLite refusal (the ONNX scatter reductions SCATTER_ND cannot do)."""
