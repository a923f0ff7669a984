"""What torch's OpInfo suite (scripts/conformance_opinfo.py) found wrong or loud, each pinned by a
program torch exports at test time, converted to ONNX (run in ONNX Runtime) and to TFLite (run in
LiteRT), compared with eager: 0-d inputs (torch reads them as one element along dim 0/-1; ONNX's
axis ops need rank >= 1), empty ones, boolean values, ``p=0`` distances, unbatched adaptive pools."""

from __future__ import annotations

import onnxruntime as ort
import pytest
import torch
import torch.nn.functional as F
from onnx import TensorProto, helper

from pt2x.converters import to_onnx, to_tflite
from pt2x.converters.errors import UnsupportedOpsError

pytest.importorskip("ai_edge_litert", reason="LiteRT runs the converted files")
from op_parity import assert_outputs as _check, check_both, eager as _want, saved as _saved  # noqa: E402


# ---------------------------------------------------------------------------- nonzero


@pytest.mark.parametrize("value", [0, 3])
@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.bool])
def test_nonzero_of_a_0d_tensor_is_n_by_0(value, dtype, tmp_path):
    # was: shape [0, 1] on ONNX (NonZero of a scalar), LiteRT's WHERE refused rank 0 at invoke
    check_both(torch.nonzero, torch.tensor(value, dtype=dtype), tmp_path=tmp_path)


@pytest.mark.parametrize("dtype", [torch.int8, torch.int16])
def test_nonzero_of_int8_int16(dtype, tmp_path):
    # was: ONNX Runtime has no NonZero kernel for them and rejected the file at load
    check_both(torch.nonzero, torch.tensor([[0, 3, 0], [-2, 0, 1]], dtype=dtype), tmp_path=tmp_path)


# ---------------------------------------------------------------------------- index_fill, scatter


@pytest.mark.parametrize("index", [[0], [-1], []])
def test_index_fill_of_a_0d_tensor(index, tmp_path):
    # was: ZeroDivisionError (dim % rank 0) escaping the lowering
    check_both(lambda x, i: x.index_fill(0, i, -1.0), torch.tensor(2.5), torch.tensor(index, dtype=torch.long),
               tmp_path=tmp_path)


def test_index_fill_negative_and_empty_index(tmp_path):
    x = torch.randn(3, 4)
    check_both(lambda x, i: x.index_fill(1, i, 7.0), x, torch.tensor([-1, 1]), tmp_path=tmp_path)
    # no index fills nothing (a max over no rows was INT_MIN: a hit everywhere)
    check_both(lambda x, i: x.index_fill(1, i, 7.0), x, torch.tensor([], dtype=torch.long), tmp_path=tmp_path)


def test_index_fill_of_booleans(tmp_path):
    # was: Where of bool, which ONNX Runtime has no kernel for (rejected at load)
    check_both(lambda x, i, v: x.index_fill(0, i, v), torch.tensor([True, False, False]), torch.tensor([1]),
               torch.tensor(True), tmp_path=tmp_path)


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64])
def test_scatter_add_into_a_0d_tensor(dtype, tmp_path):
    # was: ZeroDivisionError (dim % rank 0) escaping the lowering
    check_both(lambda x, i, s: x.scatter_add(0, i, s), torch.tensor(3, dtype=dtype), torch.tensor(0),
               torch.tensor(2, dtype=dtype), tmp_path=tmp_path)


def test_scatter_into_a_0d_tensor_onnx(tmp_path):
    fn = lambda x, i, s: x.scatter(0, i, s)  # noqa: E731
    args = (torch.tensor(1.5), torch.tensor(0), torch.tensor(-4.0))
    sess = ort.InferenceSession(to_onnx(_saved(fn, args, tmp_path)).SerializeToString(),
                                providers=["CPUExecutionProvider"])
    _check(sess.run(None, {i.name: a.numpy() for i, a in zip(sess.get_inputs(), args)}), _want(fn, args), "onnx")


def test_scatter_add_of_booleans_is_refused_by_tflite(tmp_path):
    # was: LiteRT's ADD refused bool at invoke
    fn = lambda x, i, s: x.scatter_add(0, i, s)  # noqa: E731
    args = (torch.zeros(4, dtype=torch.bool), torch.tensor([0, 2]), torch.tensor([True, True]))
    with pytest.raises(UnsupportedOpsError, match="ScatterElements.*bool"):
        to_tflite(_saved(fn, args, tmp_path))


# ---------------------------------------------------------------------------- distances


@pytest.mark.parametrize("p", [0.0, 0.5, 1.0, 2.0, 3.0, float("inf")])
def test_cdist_orders(p, tmp_path):
    # was: p=0 computed (sum d^0)^(1/0) = inf where torch counts the differing coordinates
    x, y = torch.randn(2, 5, 3), torch.randn(2, 4, 3)
    y[0, 0] = x[0, 0]
    y[0, 1, 0] = x[0, 1, 0]
    check_both(lambda a, b: torch.cdist(a, b, p=p), x, y, tmp_path=tmp_path)


@pytest.mark.parametrize("p", [0.0, 1.5, float("inf")])
def test_pdist_orders(p, tmp_path):
    z = torch.randn(4, 3)
    z[1] = z[0]
    z[2, 0] = z[0, 0]
    check_both(lambda a: torch.pdist(a, p=p), z, tmp_path=tmp_path)


# ---------------------------------------------------------------------------- unbatched adaptive pools


@pytest.mark.parametrize("pool", [F.adaptive_avg_pool1d, F.adaptive_max_pool1d])
@pytest.mark.parametrize("size", [1, 4])
def test_adaptive_pool1d_of_an_unbatched_input(pool, size, tmp_path):
    # was: ONNX Runtime refused GlobalAveragePool of rank 2 at run; LiteRT returned the input ([3, 8], not [3, 1])
    check_both(lambda a: pool(a, size), torch.randn(3, 8), tmp_path=tmp_path)


def test_adaptive_pool2d_of_an_unbatched_input(tmp_path):
    check_both(lambda a: (F.adaptive_avg_pool2d(a, 1), F.adaptive_max_pool2d(a, (2, 3))), torch.randn(3, 8, 6),
               tmp_path=tmp_path)


def test_global_pool_of_rank_2_is_refused_by_tflite():
    # ONNX's global pools need (N, C, spatial...): a rank-2 input reduced no axis in LiteRT
    node = helper.make_node("GlobalAveragePool", ["x"], ["y"])
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 8])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 8])])
    with pytest.raises(UnsupportedOpsError, match="GlobalAveragePool of a rank-2 input"):
        to_tflite(helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)]))


# ---------------------------------------------------------------------------- ops with a dim, on 0-d inputs


ZERO_D = {
    "softmax": lambda a: torch.softmax(a, 0),
    "log_softmax": lambda a: torch.log_softmax(a, -1),
    "safe_softmax": lambda a: torch.ops.aten._safe_softmax(a, 0),
    "topk": lambda a: torch.topk(a, 1, 0),
    "max_dim": lambda a: torch.max(a, 0),
    "min_dim_keepdim": lambda a: torch.min(a, -1, keepdim=True),
    "argmax_dim": lambda a: torch.argmax(a, 0),
    "argmin_dim_keepdim": lambda a: torch.argmin(a, 0, keepdim=True),
    "sort": lambda a: torch.sort(a, 0),
    "argsort": lambda a: torch.argsort(a, 0),
    "cumsum": lambda a: torch.cumsum(a, 0),
    "var": lambda a: torch.var(a, 0, correction=0),
    "var_unbiased": lambda a: torch.var(a, correction=1),  # NaN, as torch gives
    "std_mean": lambda a: torch.std_mean(a, 0, correction=0),
    "flip": lambda a: a.flip(0),
}


@pytest.mark.parametrize("name", sorted(ZERO_D))
@pytest.mark.parametrize("value", [torch.tensor(1.5), torch.tensor(-3)])
def test_op_with_a_dim_on_a_0d_input(name, value, tmp_path):
    # were: files ONNX Runtime rejected at load (Softmax/TopK/ReduceMax/ArgMax/CumSum of rank 0),
    # ZeroDivisionError/IndexError out of sort/argsort/var/flip, IndexError out of the TFLite mapping
    fn = ZERO_D[name]
    if not value.is_floating_point() and name in ("softmax", "log_softmax", "safe_softmax", "var", "var_unbiased",
                                                  "std_mean"):
        pytest.skip("float only in torch")
    # an ascending sort of integers is refused by TFLite (TOPK_V2 of the negated values overflows)
    refuses = "TopK of the smallest integers" if name in ("sort", "argsort") and not value.is_floating_point() else ""
    check_both(fn, value, tmp_path=tmp_path, tflite_refuses=refuses)


def test_topk_k0_of_a_0d_input_is_refused(tmp_path):
    with pytest.raises(UnsupportedOpsError, match="topk of a 0-d tensor"):
        to_onnx(_saved(lambda a: torch.topk(a, 0), (torch.tensor(1.5),), tmp_path))


# ---------------------------------------------------------------------------- booleans, empty tensors


def test_where_and_masked_fill_of_booleans(tmp_path):
    # was: Where of bool values, which ONNX Runtime has no kernel for (rejected at load)
    a, b = torch.tensor([True, False, True, False]), torch.tensor([False, False, True, True])
    check_both(lambda a, b: (torch.where(a, b, a), b.masked_fill(a, True), torch.where(b, True, a)), a, b,
               tmp_path=tmp_path)


def test_softmax_of_an_empty_tensor_is_refused_by_tflite(tmp_path):
    # XNNPACK's delegate failed to prepare the file (loud at load); log_softmax is not delegated and runs
    path = _saved(lambda a: torch.softmax(a, -1), (torch.zeros(5, 0, 0),), tmp_path)
    with pytest.raises(UnsupportedOpsError, match="Softmax of a tensor with no elements"):
        to_tflite(path)
    check_both(lambda a: torch.log_softmax(a, -1), torch.zeros(5, 0, 0), tmp_path=tmp_path)


# ---------------------------------------------------------------------------- integer and boolean compute


def test_clamp_of_booleans_by_tensors(tmp_path):
    # was: Max/Min of bool, which ONNX rejects (and LiteRT's MAXIMUM at invoke)
    x = torch.tensor([True, False, False, True])
    check_both(lambda a, b: (torch.clamp_min(a, b), torch.clamp_max(a, b)), x, torch.tensor(True), tmp_path=tmp_path)
    check_both(lambda a, b: torch.clamp_max(a, b), x, torch.tensor([False, True, False, True]), tmp_path=tmp_path)


@pytest.mark.parametrize("alpha, beta", [(1, 1), (2, 3)])
def test_addmm_of_integers(alpha, beta, tmp_path):
    # was: Gemm of int64, which ONNX Runtime has no kernel for (rejected at load); TFLite refuses the MatMul
    g = torch.Generator().manual_seed(0)
    args = (torch.randint(-5, 5, (2, 3), generator=g), torch.randint(-5, 5, (2, 2), generator=g),
            torch.randint(-5, 5, (2, 3), generator=g))
    check_both(lambda s, a, b: torch.addmm(s, a, b, alpha=alpha, beta=beta), *args, tmp_path=tmp_path,
               tflite_refuses="BATCH_MATMUL has no integer kernel")


def test_rounding_an_integer_is_the_integer(tmp_path):
    # was: Ceil/Floor/Round of int64, which ONNX takes for floats only (rejected at load)
    check_both(lambda a: (a.ceil(), a.floor(), a.round(), a.trunc()), torch.randint(-9, 9, (3, 4)),
               tmp_path=tmp_path)


def test_atan2_at_the_origin(tmp_path):
    # was: atan(0/0) = NaN where torch gives 0 (silently wrong; bool inputs met it in OpInfo)
    y, x = torch.tensor([0.0, 1.0, -1.0, 0.0, 2.0, -0.5]), torch.tensor([0.0, 0.0, 0.0, -1.0, -3.0, 0.0])
    check_both(torch.atan2, y, x, tmp_path=tmp_path)
    check_both(torch.atan2, torch.tensor([True, False, True]), torch.tensor(False), tmp_path=tmp_path)


def test_max_min_of_booleans(tmp_path):
    # was: Max/Min of bool, which ONNX rejects (and LiteRT's MAXIMUM at invoke)
    a, b = torch.tensor([True, False, True, False]), torch.tensor([True, True, False, False])
    check_both(lambda a, b: (torch.maximum(a, b), torch.minimum(a, b), torch.fmax(a, b), torch.fmin(a, b)), a, b,
               tmp_path=tmp_path)


@pytest.mark.parametrize("n", [0, 1, 2])
def test_diff_of_booleans(n, tmp_path):
    # was: n=0 left the value in int32 under a bool output (ONNX Runtime rejected the file, LiteRT gave int32)
    check_both(lambda a: torch.diff(a, n=n), torch.tensor([True, False, False, True, True]), tmp_path=tmp_path)


def test_masked_scatter_of_booleans(tmp_path):
    # was: Where of bool values, which ONNX Runtime has no kernel for (rejected at load)
    g = torch.Generator().manual_seed(0)
    mask = torch.rand(3, 3, generator=g) > 0.5
    check_both(lambda x, m, s: x.masked_scatter(m, s), torch.zeros(3, 3, dtype=torch.bool), mask,
               torch.ones(3, 3, dtype=torch.bool), tmp_path=tmp_path)


def test_matmul_over_an_empty_dim(tmp_path):
    # ONNX Runtime gives the zeros; LiteRT's XNNPACK delegate failed to prepare the file: refused by name
    check_both(torch.matmul, torch.zeros(5, 0), torch.zeros(0, 10), tmp_path=tmp_path,
               tflite_refuses="BATCH_MATMUL of an operand with no elements")
    # with a constant weight it is a FULLY_CONNECTED, which runs (an adaptive pool of an empty batch)
    check_both(lambda a: F.adaptive_avg_pool1d(a, 3), torch.zeros(0, 2, 8), tmp_path=tmp_path)


def test_relu_of_integers(tmp_path):
    # was: Relu of int64, which ONNX Runtime has no kernel for (rejected at load)
    check_both(F.relu, torch.tensor([-3, 0, 4, -1]), tmp_path=tmp_path)


def test_cosine_similarity_of_0d_inputs(tmp_path):
    # was: ReduceSum over axis 0 of a 0-d value (ONNX Runtime rejected the file at load)
    check_both(lambda a, b: F.cosine_similarity(a, b, 0), torch.tensor(1.5), torch.tensor(-2.0), tmp_path=tmp_path)


@pytest.mark.parametrize("fn, args, tflite_refuses", [
    (lambda a: F.avg_pool1d(a, 3), (torch.arange(54).reshape(2, 3, 9),), ""),
    (lambda a: F.max_pool2d(a, 2), (torch.arange(32).reshape(1, 2, 4, 4) % 7,), ""),
    (lambda a, w: F.conv1d(a, w), (torch.arange(18).reshape(1, 3, 6), torch.arange(18).reshape(2, 3, 3) - 9),
     "BATCH_MATMUL has no integer kernel"),
], ids=["avg_pool", "max_pool", "conv"])
def test_integer_pools_and_convolutions(fn, args, tflite_refuses, tmp_path):
    # were: AveragePool/MaxPool/Conv of int64, which ONNX takes for floats only (rejected at load), then
    # refused; now computed exactly in integers (LiteRT has no integer BATCH_MATMUL for the convolution)
    check_both(fn, *args, tmp_path=tmp_path, tflite_refuses=tflite_refuses)


def test_integer_transposed_convolution_is_refused(tmp_path):
    with pytest.raises(UnsupportedOpsError, match="of integers"):
        to_onnx(_saved(lambda a, w: F.conv_transpose1d(a, w), (torch.ones(1, 3, 6, dtype=torch.long),
                                                                 torch.ones(3, 2, 3, dtype=torch.long)), tmp_path))


def test_group_norm_of_an_empty_batch(tmp_path):
    # was: Reshape to [0, groups, -1] of no elements, which ONNX leaves undefined (rejected at load)
    check_both(lambda a, w, b: F.group_norm(a, 1, w, b), torch.zeros(0, 2), torch.randn(2), torch.randn(2),
               tmp_path=tmp_path)
    check_both(lambda a, w, b: F.group_norm(a, 2, w, b), torch.randn(3, 4, 5), torch.randn(4), torch.randn(4),
               tmp_path=tmp_path)


def test_prelu_with_a_0d_weight(tmp_path):
    # was: IndexError out of the lowering (the weight's shape[0] read on a 0-d weight)
    check_both(F.prelu, torch.randn(2, 3, 4), torch.tensor(0.25), tmp_path=tmp_path)
    check_both(F.prelu, torch.randn(1, 0, 3), torch.tensor(0.25), tmp_path=tmp_path)


def test_unfold_of_an_empty_batch(tmp_path):
    # was: Reshape to [0, -1] of no elements (rejected at load)
    check_both(lambda a: F.unfold(a, 2), torch.zeros(0, 1, 5, 5), tmp_path=tmp_path)
    check_both(lambda a: F.unfold(a, 2, padding=1, stride=2), torch.randn(2, 1, 5, 5), tmp_path=tmp_path)


def test_pads_of_no_elements(tmp_path):
    # were: files ONNX Runtime failed at run (wrap of no elements) and LiteRT's MIRROR_PAD refused at allocate
    check_both(lambda a: F.pad(a, (1, 2), mode="replicate"), torch.zeros(0, 3, 3), tmp_path=tmp_path)
    check_both(lambda a: F.pad(a, (1, 2), mode="reflect"), torch.zeros(0, 3, 3), tmp_path=tmp_path,
               tflite_refuses="Pad mode=reflect of a tensor with no elements")
    check_both(lambda a: F.pad(a, (1, 2), mode="circular"), torch.zeros(0, 3, 3), tmp_path=tmp_path)


@pytest.mark.parametrize("pads", [(-4, 5, 0, 0), (0, 0, 2, -4)])
def test_replicate_pad_whose_negative_pad_crops_a_whole_dim(pads, tmp_path):
    # was: ONNX Runtime's Pad failed at run ("zero effective input extent"): now the positive pads, then a Slice
    check_both(lambda a: F.pad(a, pads, mode="replicate"), torch.randn(2, 3, 4, 4), tmp_path=tmp_path)


def test_replicate_pad_with_a_negative_pad(tmp_path):
    check_both(lambda a: F.pad(a, (-1, 2, 1, 0), mode="replicate"), torch.randn(2, 3, 4, 4), tmp_path=tmp_path)


def test_sign_of_booleans(tmp_path):
    # was: Sign of bool, which ONNX rejects (and LiteRT's SIGN at invoke)
    check_both(lambda a: (torch.sign(a), torch.sgn(a)), torch.tensor([True, False, True]), tmp_path=tmp_path)


@pytest.mark.parametrize("x", [torch.tensor([[3, -1], [0, 7]]), torch.tensor([True, False])], ids=["int64", "bool"])
def test_nan_to_num_isnan_isinf_of_integers(x, tmp_path):
    # were: ValueError out of nan_to_num's lowering (np.finfo of an integer), IsNaN/IsInf of integers rejected at load
    check_both(lambda a: (torch.nan_to_num(a), torch.isnan(a), torch.isinf(a)), x, tmp_path=tmp_path)


def test_reshape_to_no_elements(tmp_path):
    # was: a 0 in Reshape's shape read as "copy the input's dim" (rejected at load)
    check_both(lambda a: a.unflatten(0, (2, 2)), torch.zeros(4, 0), tmp_path=tmp_path)
    check_both(lambda a: a.reshape(0, 4), torch.zeros(4, 0), tmp_path=tmp_path)


@pytest.mark.parametrize("index", [[0], 0], ids=["index_1d", "index_0d"])
def test_index_select_of_a_0d_tensor(index, tmp_path):
    # was: Gather of a 0-d value (ONNX Runtime rejected it at load, LiteRT's GATHER at allocate)
    check_both(lambda a, i: torch.index_select(a, 0, i), torch.tensor(2.5), torch.tensor(index), tmp_path=tmp_path)


def test_sort_of_booleans(tmp_path):
    # was: TopK of bool, which ONNX rejects (rejected at load; LiteRT's TOPK_V2 at invoke)
    x = torch.tensor([[True, False, True, False], [False, False, True, True]])
    check_both(lambda a: torch.sort(a, dim=1, descending=True)[0], x, tmp_path=tmp_path)
    fn = lambda a: torch.sort(a, dim=1)[0]  # noqa: E731  (ascending: TFLite refuses TopK of the smallest integers)
    sess = ort.InferenceSession(to_onnx(_saved(fn, (x,), tmp_path)).SerializeToString(),
                                providers=["CPUExecutionProvider"])
    _check(sess.run(None, {sess.get_inputs()[0].name: x.numpy()}), _want(fn, (x,)), "onnx")


def test_one_hot_of_a_0d_index(tmp_path):
    # was: OneHot of 0-d indices (ONNX Runtime rejected the file at load)
    check_both(lambda i: F.one_hot(i, 10), torch.tensor(3), tmp_path=tmp_path)
    check_both(lambda i: F.one_hot(i, 4), torch.tensor([[0, 3], [1, 1]]), tmp_path=tmp_path)


@pytest.mark.parametrize("dtype", [torch.int64, torch.bool])
def test_pixel_shuffle_of_integers(dtype, tmp_path):
    # was: DepthToSpace of int64/bool, which ONNX Runtime has no kernel for (rejected at load)
    x = torch.arange(2 * 8 * 3 * 2).reshape(2, 8, 3, 2).to(dtype)
    check_both(lambda a: F.pixel_shuffle(a, 2), x, tmp_path=tmp_path)


def test_linear_of_integers(tmp_path):
    # was: Gemm of int64, which ONNX Runtime has no kernel for (rejected at load); TFLite refuses the MatMul
    g = torch.Generator().manual_seed(0)
    args = (torch.randint(-5, 5, (2, 3), generator=g), torch.randint(-5, 5, (4, 3), generator=g),
            torch.randint(-5, 5, (4,), generator=g))
    check_both(F.linear, *args, tmp_path=tmp_path, tflite_refuses="BATCH_MATMUL has no integer kernel")


def test_tflite_refuses_what_litert_fails_on_at_run(tmp_path):
    # were: a Gemm/BATCH_MATMUL of an empty batch (XNNPACK failed to prepare it) and an integer POW whose
    # exponent turned out negative (LiteRT failed at invoke): refusals naming the node now
    check_both(F.linear, torch.zeros(0, 3), torch.randn(4, 3), torch.randn(4), tmp_path=tmp_path,
               tflite_refuses="Gemm as a BATCH_MATMUL of an operand with no elements")
    check_both(lambda a, b: a ** b, torch.tensor([2, 3, -1]), torch.tensor([2, 0, 3]), tmp_path=tmp_path,
               tflite_refuses="Pow of integers with an exponent that may be negative")
    check_both(lambda a: a ** 3, torch.tensor([2, 3, -1]), tmp_path=tmp_path)  # a constant exponent still runs


def test_pool_of_an_empty_batch_is_refused_by_tflite(tmp_path):
    # was: XNNPACK's delegate failed to prepare an AVERAGE_POOL_2D of no elements (loud at load)
    check_both(lambda a: F.avg_pool1d(a, 6, 3, 2, ceil_mode=False, count_include_pad=True), torch.zeros(0, 3, 9),
               tmp_path=tmp_path, tflite_refuses="AveragePool of a tensor with no elements")


@pytest.mark.parametrize("reduce", ["sum", "prod", "amax", "amin", "mean"])
@pytest.mark.parametrize("include_self", [False, True])
def test_scatter_reduce_of_0d_inputs(reduce, include_self, tmp_path):
    """scatter_reduce of 0-d tensors (an IndexError escaped with include_self=False): one element
    along dim 0 for ScatterElements, the result back to 0-d. TFLite's SCATTER_ND only adds: the
    other reductions are refused by name."""
    args = (torch.tensor(2.5), torch.tensor(0), torch.tensor(-1.5))

    def fn(x, i, y):
        return x.scatter_reduce(0, i, y, reduce, include_self=include_self)

    check_both(fn, *args, tmp_path=tmp_path, tflite_refuses="" if reduce in ("sum", "mean") else "ScatterElements")


def test_arguments_that_change_no_value_are_honoured(tmp_path):
    """The argument check refused these though they change no value: sort/argsort's stable
    (ONNX's TopK breaks ties by the lower index), cdist's compute_mode (the algorithm), addmm's
    self when beta = 0 (torch ignores it)."""
    x = torch.tensor([[3.0, 1.0, 3.0, 2.0], [1.0, 1.0, 0.0, 1.0]])
    check_both(lambda t: torch.sort(t, dim=1, stable=True), x, tmp_path=tmp_path)
    check_both(lambda t: torch.argsort(t, dim=1, stable=True), x, tmp_path=tmp_path)
    a, b = torch.randn(3, 4), torch.randn(5, 4)
    check_both(lambda p, q: torch.cdist(p, q, compute_mode="donot_use_mm_for_euclid_dist"), a, b, tmp_path=tmp_path)
    m = torch.full((3, 5), float("nan"))
    check_both(lambda s, p, q: torch.addmm(s, p, q, beta=0), m, a, b.T.contiguous(), tmp_path=tmp_path)


_NAN_ROWS = torch.tensor([[1.0, float("nan"), 2.0], [float("nan"), 0.0, -1.0], [3.0, -float("inf"), float("inf")]])


@pytest.mark.parametrize("fn", [
    lambda a: torch.amax(a, 1), lambda a: torch.amin(a, 0), lambda a: torch.max(a), lambda a: a.min(),
    lambda a: a.max(1), lambda a: a.min(1, keepdim=True), lambda a: a.argmax(), lambda a: a.argmin(1),
    lambda a: torch.linalg.vector_norm(a, float("inf"), dim=1), lambda a: torch.linalg.vector_norm(a, -float("inf")),
], ids=["amax", "amin", "max", "min", "max.dim", "min.dim", "argmax", "argmin", "inf-norm", "-inf-norm"])
def test_max_and_min_propagate_nan_as_torch(fn, tmp_path):
    # was silently wrong: ONNX Runtime's ReduceMax/ReduceMin skip a NaN or keep it depending on where
    # it stands ([1, nan, 2] gave 2); torch's max/min/argmax/inf-norms return NaN (its first index)
    check_both(fn, _NAN_ROWS, tmp_path=tmp_path)
