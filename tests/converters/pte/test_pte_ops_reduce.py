"""Reductions and scans on the pte target (``ops_reduce.py``): cumsum of float32, int64 and bool (an
int64 result), amax/amin and argmax/argmin (NaN propagated as torch), var_mean/var with
corrections, vector norms of orders 1 and 2, with a dynamic batch; each exported at test time,
converted where ``import torch`` fails and run in ExecuTorch's runtime against eager."""

from __future__ import annotations

import pytest

pytest.importorskip("executorch", reason="executorch is not installed (pip install executorch==1.5.1): "
                                         "the .pte files are checked by running them in its runtime")

import torch  # noqa: E402

from pte_parity import check, check_refused  # noqa: E402


def _x(b=3):
    return torch.randn(b, 4, 5, generator=torch.Generator().manual_seed(b))


def test_cumsum_of_each_dtype(tmp_path):
    def f(x):
        return (x.cumsum(-1), torch.cumsum((x > 0).long(), 1), torch.cumsum(x > 0, -1), x.cumsum(0),
                torch.cumsum(x * 2, 2, dtype=torch.int64))  # torch casts each element, then sums

    check(f, _x(), tmp_path=tmp_path, dynamic=True, runs=[(_x(1),), (_x(6),)])


def test_extremes_and_their_positions(tmp_path):
    def f(x):
        return (x.amax(-1), x.amin((0, 2), keepdim=True), x.argmax(1), x.argmin(-1, keepdim=True), x.argmax(),
                torch.amax(x, 1, True))

    check(f, _x(), tmp_path=tmp_path)


def test_extremes_propagate_nan(tmp_path):
    x = _x()
    x[0, 1, 2] = float("nan")
    x[2, 3, 0] = float("nan")
    check(lambda x: (x.amax(-1), x.amin(1), x.argmax(-1), x.argmin(2)), x, tmp_path=tmp_path)


def test_variance_and_norms(tmp_path):
    def f(x):
        v, m = torch.var_mean(x, -1, keepdim=True)
        v0, m0 = torch.var_mean(x, (0, 2), correction=0)
        return (v, m, v0, m0, x.var(1), x.var(-1, unbiased=False), torch.linalg.vector_norm(x, dim=-1),
                torch.linalg.vector_norm(x, 1, (1, 2), keepdim=True), x.norm(dim=1))

    check(f, _x(), tmp_path=tmp_path, dynamic=True, runs=[(_x(2),)])


def test_other_norm_orders_are_refused(tmp_path):
    check_refused(lambda x: torch.linalg.vector_norm(x, 3, -1), _x(), tmp_path=tmp_path, match="order 3")


def test_diff(tmp_path):
    def f(x, n):
        return (torch.diff(x), torch.diff(x, 2, 1), torch.diff(x, dim=-1, prepend=x[:, :, :1] * 2, append=x[:, :, :2]),
                torch.diff(n, dim=0, prepend=n[:1]))

    check(f, _x(), torch.randint(-9, 9, (3, 4)), tmp_path=tmp_path)
