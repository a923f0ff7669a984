"""Pool indices and unpooling, dropout/softmax backward, index_add/index_copy/scatter_reduce of
0-d and boolean tensors, masked indexing, linspace/logspace, tril/triu_indices, avg_pool's
divisor_override, circular padding: each a program torch exports at test time, converted to ONNX
(run in ONNX Runtime) and to TFLite (run in LiteRT), compared with eager."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
import torch
import torch.nn.functional as F

from pt2x.converters import to_onnx

pytest.importorskip("ai_edge_litert", reason="LiteRT runs the converted files")
from op_parity import assert_outputs as _check, check_both  # noqa: E402


def _randn(*shape):
    return torch.randn(shape, generator=torch.Generator().manual_seed(sum(shape) + len(shape)))


# ------------------------------------------------------------------ pools and unpooling

_WRITE = "reduction='none'"


@pytest.mark.parametrize("n, shape, kernel, stride, ceil", [
    (1, (2, 3, 9), 3, 2, True), (2, (1, 2, 5, 7), 3, 2, True), (2, (2, 5, 6), 2, 1, False),
    (3, (1, 2, 3, 6, 5), 3, 2, True)])
def test_max_pool_indices_within_each_plane(n, shape, kernel, stride, ceil, tmp_path):
    # the indices read: the windows gathered, torch's pick (the first maximum, or the last NaN) on both targets
    pool = {1: F.max_pool1d, 2: F.max_pool2d, 3: F.max_pool3d}[n]
    x = _randn(*shape).round()  # ties
    x.view(-1)[[1, 4, 5]] = float("nan")
    check_both(lambda t: pool(t, kernel, stride, ceil_mode=ceil, return_indices=True), x, tmp_path=tmp_path)


def test_max_pool_indices_of_run_time_sizes_stay_maxpool(tmp_path):
    # spatial sizes known only at run time: MaxPool's indices, less the plane's offset (TFLite has none)
    path = str(tmp_path / "case.pt2")
    x = _randn(2, 3, 8)
    class Pool(torch.nn.Module):
        def forward(self, t):
            return F.max_pool1d(t, 2, 2, return_indices=True)

    ep = torch.export.export(Pool(), (x,), dynamic_shapes=({2: torch.export.Dim("w", min=4, max=64) * 2},))
    torch.export.save(ep, path)
    sess = ort.InferenceSession(to_onnx(path).SerializeToString(), providers=["CPUExecutionProvider"])
    want = [t.numpy() for t in F.max_pool1d(x, 2, 2, return_indices=True)]
    _check(sess.run(None, {sess.get_inputs()[0].name: x.numpy()}), want, "onnx")


def test_max_pool_without_indices_read_stays_tflite(tmp_path):
    # the indices are made only when read: a max pool whose indices nothing reads converts to TFLite
    check_both(lambda x: F.max_pool2d(x, 3, 2, return_indices=True)[0] * 2, _randn(1, 2, 7, 7), tmp_path=tmp_path)


@pytest.mark.parametrize("shape, size", [((1, 4, 4, 3, 5), (2, 3, 5)), ((4, 6, 3), (3, 1)), ((4, 7, 5), (3, 2)),
                                         ((3, 4, 4), (3,))])
def test_adaptive_max_pool_indices(shape, size, tmp_path):
    # windows that overlap or differ in size (7 -> 3) too
    pool = {3: F.adaptive_max_pool3d, 2: F.adaptive_max_pool2d, 1: F.adaptive_max_pool1d}[len(size)]
    check_both(lambda x: pool(x, size, return_indices=True), _randn(*shape), tmp_path=tmp_path)


@pytest.mark.parametrize("n, shape", [(1, (2, 3, 9)), (2, (1, 2, 6, 7)), (2, (2, 6, 7)), (3, (1, 2, 4, 6, 5))])
def test_max_unpool(n, shape, tmp_path):
    pool = {1: F.max_pool1d, 2: F.max_pool2d, 3: F.max_pool3d}[n]
    unpool = {1: F.max_unpool1d, 2: F.max_unpool2d, 3: F.max_unpool3d}[n]
    y, i = pool(_randn(*shape), 2, 2, return_indices=True)
    check_both(lambda v, j: unpool(v, j, 2, 2, output_size=shape[-n:]), y, i, tmp_path=tmp_path,
               tflite_refuses=_WRITE)


def test_max_pool2d_with_indices_backward(tmp_path):
    def fn(g, x):
        _, i = torch.ops.aten.max_pool2d_with_indices(x, [3, 3], [2, 2], [1, 1], [1, 1], True)
        return torch.ops.aten.max_pool2d_with_indices_backward(g, x, [3, 3], [2, 2], [1, 1], [1, 1], True, i)

    check_both(fn, _randn(1, 2, 5, 5), _randn(1, 2, 8, 9), tmp_path=tmp_path)


# ------------------------------------------------------------------ dropout, softmax backward


@pytest.mark.parametrize("train, p", [(False, 0.5), (True, 0.0), (True, 1.0)])
def test_feature_alpha_dropout_without_randomness(train, p, tmp_path):
    x = _randn(2, 3, 4)
    x[0, 0, 0] = float("nan")
    check_both(lambda t: torch.ops.aten.feature_alpha_dropout(t, p, train), x, tmp_path=tmp_path)


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.bool])
@pytest.mark.parametrize("shape", [(), (3, 4)])
def test_native_dropout_backward(dtype, shape, tmp_path):
    g = (_randn(*shape) * 5).to(dtype)
    m = _randn(*shape) > 0
    check_both(lambda a, b: torch.ops.aten.native_dropout_backward(a, b, 1.5), g, m, tmp_path=tmp_path)


@pytest.mark.parametrize("shape, dim", [((), 0), ((4, 5), 1), ((4, 5), -2)])
def test_softmax_backward_data(shape, dim, tmp_path):
    check_both(lambda g, y: torch.ops.aten._softmax_backward_data(g, y, dim, torch.float32),
               _randn(*shape), torch.softmax(_randn(*shape), -1) if shape else torch.tensor(1.0), tmp_path=tmp_path)


# ------------------------------------------------------------------ index_add, index_copy, scatter_reduce


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.bool])
def test_index_add_and_copy_of_0d(dtype, tmp_path):
    x, s = torch.tensor(3).to(dtype), torch.tensor(1).to(dtype)
    alpha = True if dtype == torch.bool else 2
    check_both(lambda a, i, b: (a.index_add(0, i, b, alpha=alpha), a.index_copy(0, i, b)), x, torch.tensor([0]), s,
               tmp_path=tmp_path)


def test_index_add_of_bool_is_an_or(tmp_path):
    x = torch.tensor([[False, True], [False, False], [True, False]])
    s = torch.tensor([[True, True], [False, False], [True, False]])
    check_both(lambda a, i, b: (a.index_add(0, i, b), a.index_add(0, i, b, alpha=False)), x, torch.tensor([1, 1, 0]), s,
               tmp_path=tmp_path)
    check_both(lambda a, i, b: a.index_copy(1, i, b), x, torch.tensor([1, 0]), s[:, :2], tmp_path=tmp_path,
               tflite_refuses=_WRITE)


@pytest.mark.parametrize("reduce", ["sum", "prod", "amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
def test_scatter_reduce_of_bool(reduce, include_self, tmp_path):
    x = torch.tensor([True, True, False, False, True, False])
    src = torch.tensor([False, True, False, True, True, True, False])
    idx = torch.tensor([0, 0, 2, 3, 3, 1, 1])
    check_both(lambda a, i, b: a.scatter_reduce(0, i, b, reduce, include_self=include_self), x, idx, src,
               tmp_path=tmp_path)


# ------------------------------------------------------------------ masked indexing, index_put under a mask


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.bool])
def test_unsafe_masked_index(dtype, tmp_path):
    x = (_randn(5, 6) * 4).to(dtype)
    i, j = torch.arange(-3, 7).reshape(10, 1), torch.arange(9).reshape(1, 9) - 1
    mask = (i >= 0) & (i < 5) & (j >= 0) & (j < 6)
    fill = True if dtype == torch.bool else -8
    check_both(lambda a, m, p, q: torch.ops.aten._unsafe_masked_index(a, m, [p, q], fill), x, mask, i, j,
               tmp_path=tmp_path)


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.bool])
def test_unsafe_masked_index_put_accumulate(dtype, tmp_path):
    x = (_randn(5, 6) * 4).to(dtype)
    i, j = torch.arange(-3, 7).reshape(10, 1), torch.tensor([[0, 2, 2, 7]])
    mask = (i >= 0) & (i < 5) & (j < 6)
    v = (_randn(10, 4) * 3).to(dtype)
    check_both(lambda a, m, p, q, w: torch.ops.aten._unsafe_masked_index_put_accumulate(a, m, [p, q], w),
               x, mask, i, j, v, tmp_path=tmp_path)


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.bool])
@pytest.mark.parametrize("accumulate", [False, True])
def test_index_put_under_a_mask_of_lower_rank(dtype, accumulate, tmp_path):
    x = (_randn(4, 5, 3) * 4).to(dtype)
    rows = torch.tensor([True, False, True, True, False])
    check_both(lambda a, m, v: torch.ops.aten.index_put(a, [None, m], v, accumulate), x, rows,
               (_randn(3) * 2).to(dtype), tmp_path=tmp_path)
    check_both(lambda a, m, v: torch.ops.aten.index_put(a, [m], v, accumulate), x, rows[:4],
               (_randn(1, 5, 3) * 2).to(dtype), tmp_path=tmp_path)


# ------------------------------------------------------------------ linspace, logspace, tril/triu_indices


@pytest.mark.parametrize("log", [False, True])
@pytest.mark.parametrize("dtype", [torch.float32, torch.int64])
@pytest.mark.parametrize("start, end, steps", [(-2.5, 10, 7), (7.3, 2.5, 5), (3, 3, 1), (0, -3, 0)])
def test_linspace_logspace(log, dtype, start, end, steps, tmp_path):
    f, kw = (torch.logspace, dict(base=2.0)) if log else (torch.linspace, {})
    s, e = torch.tensor(start, dtype=torch.float32), torch.tensor(end)
    check_both(lambda a, b: (f(start, end, steps, dtype=dtype, **kw), f(a, b, steps, dtype=dtype, **kw),
                             f(a, end, steps, dtype=dtype, **kw)), s, e, tmp_path=tmp_path)


@pytest.mark.parametrize("row, col, offset", [(0, 0, 0), (4, 6, -1), (5, 3, 2)])
def test_tril_triu_indices(row, col, offset, tmp_path):
    check_both(lambda x: (torch.tril_indices(row, col, offset) + x, torch.triu_indices(row, col, offset) + x),
               torch.tensor(0), tmp_path=tmp_path)


# ------------------------------------------------------------------ batch and instance norm with running statistics


@pytest.mark.parametrize("op, training", [
    (torch.ops.aten.batch_norm.default, True), (torch.ops.aten.native_batch_norm.default, True),
    (torch.ops.aten.native_batch_norm.default, False), (torch.ops.aten._native_batch_norm_legit.default, True),
    (torch.ops.aten._native_batch_norm_legit.default, False)])
def test_batch_norm_with_running_statistics(op, training, tmp_path):
    x, w, b, rm, rv = _randn(3, 2, 4), _randn(2), _randn(2), _randn(2), _randn(2).abs() + 0.5
    if op is torch.ops.aten.batch_norm.default:
        fn = lambda *a: op(a[0], a[1], a[2], a[3], a[4], training, 0.5, 0.6, False)  # noqa: E731
    else:
        fn = lambda *a: op(a[0], a[1], a[2], a[3], a[4], training, 0.5, 0.6)  # noqa: E731
    check_both(fn, x, w, b, rm, rv, tmp_path=tmp_path)


def test_batch_norm_with_update(tmp_path):
    check_both(lambda x, w, b, rm, rv: torch.ops.aten._batch_norm_with_update(x, w, b, rm, rv, 0.5, 0.6),
               _randn(5, 3, 2), _randn(3), _randn(3), _randn(3), _randn(3).abs(), tmp_path=tmp_path)


def test_instance_norm_with_running_statistics(tmp_path):
    check_both(lambda x, rm, rv, w, b: F.instance_norm(x, rm, rv, w, b, use_input_stats=True, momentum=0.5, eps=0.6),
               _randn(2, 5, 6), _randn(5), _randn(5).abs(), _randn(5), _randn(5), tmp_path=tmp_path)


# ------------------------------------------------------------------ circular padding


@pytest.mark.parametrize("pad", [(1, 2), (2, -1), (-1, 2), (1, 1, -2, 1), (0, 3, 2, -1)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.bool])
def test_circular_pad(pad, dtype, tmp_path):
    # was: mixed-sign pads padded before cropping (torch crops first: (2, -1) of 0..4 is 2 3 0 1 2 3)
    shape = (2, 3, 5, 4)[:2 + len(pad) // 2]  # torch pads the last 1 (2) dims of a 3-d (4-d) input
    x = torch.arange(int(np.prod(shape))).reshape(shape).to(dtype)
    check_both(lambda t: F.pad(t, pad, mode="circular"), x, tmp_path=tmp_path)


def test_circular_pad_of_no_elements(tmp_path):
    check_both(lambda t: F.pad(t, (1, 2), mode="circular"), torch.zeros(0, 3, 3), tmp_path=tmp_path)


# ------------------------------------------------------------------ avg_pool's divisor_override


@pytest.mark.parametrize("shape, kernel, stride, padding, ceil", [
    ((1, 3, 9, 9), 3, 1, 1, True), ((1, 3, 9, 9), (4, 2), (3, 2), 1, True), ((3, 8, 7), 2, 2, 0, False)])
def test_avg_pool2d_divisor_override(shape, kernel, stride, padding, ceil, tmp_path):
    check_both(lambda x: F.avg_pool2d(x, kernel, stride, padding, ceil_mode=ceil, count_include_pad=False,
                                      divisor_override=3), _randn(*shape), tmp_path=tmp_path)


# ------------------------------------------------------------------ integer pools (the windows gathered)


@pytest.mark.parametrize("dtype", [torch.int64, torch.int8])
@pytest.mark.parametrize("n, kernel, stride, padding, dilation, ceil", [
    (1, 3, 2, 1, 1, True), (2, 3, 2, 1, 2, False), (2, 2, 1, 0, 1, True), (3, 2, 2, 1, 1, True)])
def test_integer_max_pool_with_indices(dtype, n, kernel, stride, padding, dilation, ceil, tmp_path):
    pool = {1: F.max_pool1d, 2: F.max_pool2d, 3: F.max_pool3d}[n]
    x = torch.randint(-3, 3, (2, 3) + (6, 5, 4)[:n], generator=torch.Generator().manual_seed(n)).to(dtype)  # ties
    check_both(lambda t: pool(t, kernel, stride, padding, dilation, ceil_mode=ceil, return_indices=True), x,
               tmp_path=tmp_path)


@pytest.mark.parametrize("n, kernel, stride, padding, ceil, include_pad, divisor", [
    (1, 3, 2, 1, True, False, None), (2, 3, 2, 1, True, True, None), (2, 3, 1, 1, False, False, -2),
    (3, 2, 2, 1, True, False, None)])
def test_integer_avg_pool(n, kernel, stride, padding, ceil, include_pad, divisor, tmp_path):
    pool = {1: F.avg_pool1d, 2: F.avg_pool2d, 3: F.avg_pool3d}[n]
    kw = dict(divisor_override=divisor) if n > 1 else {}
    x = torch.randint(-20, 20, (2, 3) + (7, 6, 5)[:n], generator=torch.Generator().manual_seed(n))
    check_both(lambda t: pool(t, kernel, stride, padding, ceil_mode=ceil, count_include_pad=include_pad, **kw), x,
               tmp_path=tmp_path)


@pytest.mark.parametrize("n, groups, stride, padding, dilation, bias", [
    (1, 1, 2, 2, 1, True), (2, 2, 1, "same", 2, False), (3, 1, 1, 1, 1, True), (2, 1, 1, 0, 1, True)])
def test_integer_convolution(n, groups, stride, padding, dilation, bias, tmp_path):
    # exact int64 arithmetic (the taps gathered, a MatMul per group); TFLite's BATCH_MATMUL has no integer kernel
    conv = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}[n]
    gen = torch.Generator().manual_seed(n)
    x = torch.randint(-50, 50, (2, 2 * groups) + (6, 5, 4)[:n], generator=gen)
    w = torch.randint(-50, 50, (2 * groups, 2) + (3, 2, 2)[:n], generator=gen)
    args = (x, w, torch.randint(-9, 9, (2 * groups,), generator=gen)) if bias else (x, w)
    check_both(lambda a, k, *b: conv(a, k, b[0] if b else None, stride, padding, dilation, groups), *args,
               tmp_path=tmp_path, tflite_refuses="BATCH_MATMUL has no integer kernel")
