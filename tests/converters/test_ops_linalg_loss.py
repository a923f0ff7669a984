"""converters/onnx/ops_linalg.py and ops_loss.py: products, trace, determinants, norms, distances,
trapezoid, gradient and the losses, each on a program torch exports at test time, converted to ONNX
(run in ONNX Runtime) and TFLite (run in LiteRT), compared with eager. Integer products must be exact
(values past float32's 2**24 and int8 wrap-around), floats include NaN where a clamp must keep it,
0-d and empty inputs where torch takes them."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
import torch
import torch.nn.functional as F

from pt2x.converters import to_onnx
from pt2x.converters.errors import UnsupportedOpsError

pytest.importorskip("ai_edge_litert", reason="LiteRT runs the converted files")
from op_parity import Fn as _Fn, check_both  # noqa: E402


def _r(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def _i(*shape, lo=-9, hi=10, dtype=torch.int64, seed=0):
    return torch.randint(lo, hi, shape, dtype=dtype, generator=torch.Generator().manual_seed(seed))


# sums past float32's 24 bits that stay inside int32 (LiteRT computes int64 in int32: docs/tflite.md)
_BIG = torch.tensor([30001, 3, -20011], dtype=torch.int64)
_HUGE = torch.tensor([2**40 + 1, 3, -(2**35) + 7], dtype=torch.int64)  # products past float64's 53 bits
_NAN = torch.tensor([0.5, float("nan"), -2.0, float("inf"), 0.0])

CASES = {
    # products
    "trace": (torch.trace, (_r(5, 7),)),
    "trace_int": (torch.trace, (_i(7, 5),)),
    "trace_int8_to_int64": (torch.trace, (torch.full((3, 3), 100, dtype=torch.int8),)),
    "dot": (torch.dot, (_r(5), _r(5, seed=1))),
    "dot_int_exact": (torch.dot, (_BIG, _BIG)),
    "dot_int8_wraps": (torch.dot, (torch.tensor([1, 2], dtype=torch.int8), torch.tensor([100, 100], dtype=torch.int8))),
    "dot_empty": (torch.dot, (torch.zeros(0), torch.zeros(0))),
    "vdot_int": (torch.vdot, (_i(5), _i(5, seed=1))),
    "vecdot": (lambda x, y: torch.linalg.vecdot(x, y, dim=0), (_r(4, 3), _r(4, 1, seed=1))),
    "inner_float": (torch.inner, (_r(2, 5), _r(3, 5, seed=1))),
    "inner_int_3d": (torch.inner, (_i(2, 5), _i(2, 3, 5, seed=1))),
    "inner_0d": (torch.inner, (torch.tensor(2.5), _r(5, 5))),
    "outer_bool": (torch.outer, (torch.tensor([True, False, True]), torch.tensor([True, False]))),
    "outer_int": (torch.outer, (_BIG, _i(4))),
    "mv": (torch.mv, (_r(5, 10), _r(10, seed=1))),
    "mv_int_exact": (torch.mv, (torch.stack([_BIG, -_BIG]), _BIG)),
    "addmv_beta_alpha": (lambda s, m, v: torch.addmv(s, m, v, beta=0.5, alpha=2.0), (_r(5), _r(5, 3), _r(3))),
    "addmv_beta0_ignores_nan": (lambda s, m, v: torch.addmv(s, m, v, beta=0), (torch.full((4,), float("nan")),
                                                                               _r(4, 3), _r(3))),
    "addr_int": (lambda s, a, b: torch.addr(s, a, b, beta=2, alpha=3), (_i(5, 4), _i(5), _i(4))),
    "addr_bool": (torch.addr, (torch.tensor(False), torch.tensor([True, False]), torch.tensor([True, True, False]))),
    "addbmm": (torch.addbmm, (_r(5, 4), _r(3, 5, 2), _r(3, 2, 4))),
    "addbmm_int_0d": (torch.addbmm, (torch.tensor(7), _i(3, 5, 2), _i(3, 2, 4))),
    "tensordot_float": (lambda a, b: torch.tensordot(a, b, dims=([0, 1], [2, 0])), (_r(2, 3, 4), _r(3, 5, 2))),
    "tensordot_int_outer": (lambda a, b: torch.tensordot(a, b, dims=0), (_i(2, 3), _i(2))),
    "tensordot_size1_pair": (lambda a, b: torch.tensordot(a, b, dims=([0, 1], [2, 0])), (_r(1, 1, 3), _r(2, 1, 2))),
    "tensordot_size1_pair_int8": (lambda a, b: torch.tensordot(a, b, dims=([0, 1], [2, 0])),
                                  (_i(1, 1, 3, dtype=torch.int8), _i(2, 1, 2, lo=-100, hi=100, dtype=torch.int8))),
    "multi_dot_vectors": (lambda a, b, c: torch.linalg.multi_dot([a, b, c]), (_r(3), _r(3, 4), _r(4))),
    "multi_dot_empty": (lambda a, b: torch.linalg.multi_dot([a, b]), (torch.zeros(2, 0), torch.zeros(0, 2))),
    "multi_dot_int": (lambda a, b, c: torch.linalg.multi_dot([a, b, c]), (_i(2, 3), _i(3, 3), _i(3, 2))),
    "matrix_power_5": (lambda a: torch.linalg.matrix_power(a, 5), (_r(2, 3, 3) / 2,)),
    "matrix_power_0": (lambda a: torch.linalg.matrix_power(a, 0), (_r(2, 3, 3),)),
    "matrix_power_int": (lambda a: torch.linalg.matrix_power(a, 3), (_i(3, 3),)),
    # determinants
    "det_3x3": (torch.linalg.det, (_r(4, 3, 3),)),
    "det_0x0": (torch.linalg.det, (torch.zeros(2, 0, 0),)),
    "logdet_2x2": (torch.logdet, (_r(3, 2, 2),)),
    "slogdet_1x1": (torch.linalg.slogdet, (_r(4, 1, 1),)),
    "matrix_rank_empty": (torch.linalg.matrix_rank, (torch.zeros(3, 0),)),
    "pinv_empty": (torch.linalg.pinv, (torch.zeros(3, 0),)),
    "qr_empty": (torch.linalg.qr, (torch.zeros(2, 5, 0),)),
    "qr_empty_r": (lambda x: torch.linalg.qr(x, mode="r"), (torch.zeros(0, 4),)),
    # norms and distances
    "linalg_norm_vector": (torch.linalg.norm, (_r(5),)),
    "linalg_norm_empty": (torch.linalg.norm, (torch.zeros(0),)),
    "linalg_norm_p3_dim": (lambda x: torch.linalg.norm(x, 3, dim=1, keepdim=True), (_r(2, 4),)),
    "linalg_norm_matrix_inf": (lambda x: torch.linalg.norm(x, float("inf")), (_r(3, 4),)),
    "matrix_norm_fro": (lambda x: torch.linalg.matrix_norm(x, "fro", keepdim=True), (_r(2, 3, 4),)),
    "matrix_norm_minus1": (lambda x: torch.linalg.matrix_norm(x, -1, dim=(0, 2)), (_r(3, 2, 4),)),
    "dist_0d": (lambda x, y: torch.dist(x, y, 2), (_r(3, 4), torch.tensor(0.5))),
    "dist_p0": (lambda x, y: torch.dist(x, y, 0), (_r(3, 4), _NAN[:4])),
    "pairwise_distance_int": (F.pairwise_distance, (_i(2, 3), _i(2, 3, seed=1))),
    "pairwise_distance_int8_wraps": (F.pairwise_distance, (torch.tensor([100], dtype=torch.int8),
                                                           torch.tensor([-100], dtype=torch.int8))),
    "pairwise_distance_1d_p1": (lambda x, y: F.pairwise_distance(x, y, p=1, keepdim=True), (_r(3), _r(3, seed=1))),
    "renorm": (lambda x: torch.renorm(x, 2, 1, 0.5), (_r(3, 4, 2),)),
    "renorm_p1_last": (lambda x: torch.renorm(x, 1, -1, 1.0), (_r(3, 4),)),
    # integration and differences
    "trapezoid_x": (lambda y, x: torch.trapezoid(y, x), (_r(2, 3), _r(2, 3, seed=1))),
    "trapezoid_x1d_int": (lambda y, x: torch.trapezoid(y, x, dim=0), (_i(4, 3), _i(4, seed=1))),
    "trapz_empty": (lambda y, x: torch.trapz(y, x), (torch.zeros(2, 0), torch.zeros(2, 0))),
    "trapezoid_dx": (lambda y: torch.trapezoid(y, dx=0.5, dim=0), (_i(4, 3),)),
    "cumulative_trapezoid_x_int": (lambda y, x: torch.cumulative_trapezoid(y, x), (_i(2, 5), _i(2, 5, seed=1))),
    "cumulative_trapezoid_dx": (lambda y: torch.cumulative_trapezoid(y, dx=2.0), (_r(3, 4),)),
    "gradient_int_spacing": (lambda x: torch.gradient(x, spacing=2.0), (_i(5),)),
    "gradient_2d_edge2": (lambda x: torch.gradient(x, edge_order=2), (_r(4, 5),)),
    "gradient_dim_list": (lambda x: torch.gradient(x, spacing=[0.5], dim=[1]), (_r(3, 4),)),
    # losses
    "cosine_embedding_2d": (lambda a, b, t: F.cosine_embedding_loss(a, b, t, margin=0.3, reduction="none"),
                            (_r(5, 4), _r(5, 4, seed=1), torch.tensor([1, -1, 1, -1, 0]))),
    "cosine_embedding_bool": (lambda a, b, t: F.cosine_embedding_loss(a, b, t, reduction="sum"),
                              (torch.tensor([True, False, True]), torch.tensor([True, True, False]), torch.tensor(True))),
    "cosine_embedding_int": (F.cosine_embedding_loss, (_i(4, 3), _i(4, 3, seed=1), torch.tensor([1, -1, -1, 1]))),
    "margin_ranking_int_0d": (lambda a, b, t: F.margin_ranking_loss(a, b, t, margin=0.5, reduction="sum"),
                              (torch.tensor(3), torch.tensor(5), torch.tensor(-1))),
    "margin_ranking_nan": (lambda a, b, t: F.margin_ranking_loss(a, b, t, reduction="none"),
                           (_NAN, _r(5), torch.tensor([1.0, -1.0, 1.0, -1.0, 1.0]))),
    "poisson_nll_full": (lambda x, t: F.poisson_nll_loss(x, t, log_input=False, full=True, reduction="none"),
                         (_r(5).abs() + 0.1, torch.tensor([0.0, 1.0, 2.0, 3.5, 7.0]))),
    "poisson_nll_int": (lambda x, t: F.poisson_nll_loss(x, t, full=True, reduction="sum"), (_i(5, lo=0, hi=4), _i(5, lo=0, hi=5))),
    "triplet_swap_p1": (lambda a, p, n: F.triplet_margin_loss(a, p, n, p=1, swap=True, reduction="none"),
                        (_r(4, 6), _r(4, 6, seed=1), _r(4, 6, seed=2))),
    "triplet_int": (F.triplet_margin_loss, (_i(4, 6), _i(4, 6, seed=1), _i(4, 6, seed=2))),
    "triplet_with_distance": (lambda a, p, n: F.triplet_margin_with_distance_loss(a, p, n, margin=1e-6),
                              (_r(5, 10), _r(5, 10, seed=1), _r(5, 10, seed=2))),
    "hinge_embedding": (lambda x, t: F.hinge_embedding_loss(x, t, margin=0.7, reduction="none"),
                        (_NAN, torch.tensor([1.0, -1.0, -1.0, 1.0, 0.0]))),
    "hinge_embedding_0d": (F.hinge_embedding_loss, (torch.tensor(0.3), torch.tensor(-1.0))),
    "kl_div": (lambda x, t: F.kl_div(x, t, reduction="none"), (_r(5), torch.tensor([0.0, 0.5, float("nan"), 2.0, 1.0]))),
    "kl_div_log_target": (lambda x, t: F.kl_div(x, t, reduction="sum", log_target=True), (_r(5), _r(5, seed=1))),
    "soft_margin": (lambda x, t: F.soft_margin_loss(x, t, reduction="none"), (_r(5) * 40, torch.tensor([1.0, -1, 1, -1, 1]))),
    "bce_clamps_log": (lambda x, t: F.binary_cross_entropy(x, t, reduction="none"),
                       (torch.tensor([0.0, 1.0, 0.3, 1.0, 0.0]), torch.tensor([1.0, 0.0, 0.5, 1.0, 0.0]))),
    "bce_weight_0d": (lambda x, t, w: F.binary_cross_entropy(x, t, weight=w), (torch.tensor(0.25), torch.tensor(1.0),
                                                                               torch.tensor(2.0))),
    "multi_margin": (lambda x, y, w: F.multi_margin_loss(x, y, p=2, margin=0.7, weight=w, reduction="none"),
                     (_r(4, 5), torch.tensor([0, 4, 2, 2]), _r(5).abs())),
    "multi_margin_1d": (F.multi_margin_loss, (_r(5), torch.tensor(3))),
    "multi_margin_0d": (F.multi_margin_loss, (torch.tensor(0.5), torch.tensor(0))),
    "multilabel_margin": (lambda x, y: F.multilabel_margin_loss(x, y, reduction="none"),
                          (_r(3, 4), torch.tensor([[3, 0, -1, 1], [0, 1, 2, 3], [-1, 2, 0, 1]]))),
    "multilabel_margin_1d": (F.multilabel_margin_loss, (_r(5), torch.tensor([3, 0, -1, 1, 2]))),
    # the elementwise regression losses (ops_regression_loss): both branches, NaN, broadcast, 0-d
    "l1": (lambda x, t: F.l1_loss(x, t, reduction="none"), (_NAN, _r(5, seed=1))),
    "l1_0d_mean": (F.l1_loss, (torch.tensor(0.5), torch.tensor(-2.0))),
    "mse_sum": (lambda x, t: F.mse_loss(x, t, reduction="sum"), (_r(3, 4), _r(3, 4, seed=1))),
    "huber": (lambda x, t: F.huber_loss(x, t, reduction="none", delta=0.7), (_NAN * 2, _r(5, seed=1))),
    "huber_mean": (lambda x, t: F.huber_loss(x, t, delta=1.5), (_r(4, 5) * 3, _r(4, 5, seed=1))),
    "smooth_l1": (lambda x, t: F.smooth_l1_loss(x, t, reduction="none", beta=0.5), (_NAN * 2, _r(5, seed=1))),
    "smooth_l1_beta0": (lambda x, t: F.smooth_l1_loss(x, t, beta=0.0), (_r(4) * 3, _r(4, seed=1))),
}


@pytest.mark.parametrize("name", list(CASES))
def test_lowering_matches_eager(name, tmp_path):
    fn, args = CASES[name]
    check_both(fn, *args, tmp_path=tmp_path)


@pytest.mark.parametrize("fn", [torch.dot, torch.outer, torch.mv, lambda a, b: torch.tensordot(a, b, dims=1)])
def test_int64_products_exact_in_onnx(fn, tmp_path):
    # no float MatMul in between: ONNX Runtime's int64 Mul/ReduceSum wrap exactly as torch
    a = torch.stack([_HUGE, -_HUGE]) if fn is torch.mv else _HUGE
    path = str(tmp_path / "case.pt2")
    torch.export.save(torch.export.export(_Fn(fn), (a, _HUGE)), path)
    sess = ort.InferenceSession(to_onnx(path).SerializeToString(), providers=["CPUExecutionProvider"])
    got = sess.run(None, dict(zip([i.name for i in sess.get_inputs()], [a.numpy(), _HUGE.numpy()])))[0]
    np.testing.assert_array_equal(got, fn(a, _HUGE).numpy())


@pytest.mark.parametrize("fn, args, reason", [
    (lambda x: torch.linalg.matrix_norm(x, "nuc"), (_r(3, 3),), "singular values"),
    (lambda x: torch.linalg.matrix_norm(x, 2), (_r(3, 3),), "singular values"),
    (torch.linalg.det, (_r(4, 4),), "up to 3x3"),
    (torch.linalg.qr, (_r(3, 2),), "QR decomposition"),
    (lambda x: torch.linalg.matrix_power(x, -1), (_r(2, 2),), "negative ones need the inverse"),
    (lambda s, m, v: torch.addmv(s, m, v, alpha=0), (_r(3), _r(3, 2), _r(2)), "alpha=0"),
])
def test_refused_cleanly(fn, args, reason, tmp_path):
    path = str(tmp_path / "case.pt2")
    torch.export.save(torch.export.export(_Fn(fn), tuple(args)), path)
    with pytest.raises(UnsupportedOpsError, match=reason):
        to_onnx(path)
