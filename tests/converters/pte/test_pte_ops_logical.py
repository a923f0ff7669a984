"""Selections and boolean logic on the pte target (``ops_logical.py``): where (broadcasting; float32,
int64 and bool), masked_fill with -inf, logical_not/and/or/xor, bitwise and/or/xor and ``&``/``|``
of bool and int64 tensors, any over one dim, several and all; each exported at test time, converted
where ``import torch`` fails and run in ExecuTorch's runtime against eager."""

from __future__ import annotations

import pytest

pytest.importorskip("executorch", reason="executorch is not installed (pip install executorch==1.5.1): "
                                         "the .pte files are checked by running them in its runtime")

import torch  # noqa: E402

from pte_parity import check, check_refused  # noqa: E402


def _args(b=2):
    g = torch.Generator().manual_seed(b)
    return torch.randn(b, 3, 4, generator=g), torch.randint(-3, 4, (b, 3, 4), generator=g)


def test_where_broadcasts_and_keeps_each_dtype(tmp_path):
    def f(x, n):
        c = x > 0
        return (torch.where(c, x, x[:1] * 2), torch.where(c[:, :, :1], n, n * 2),
                torch.where(n > 0, c, ~c))

    check(f, *_args(), tmp_path=tmp_path, dynamic=True, runs=[_args(1), _args(4)])


def test_masked_fill_with_minus_inf_then_softmax(tmp_path):
    def f(x, n):
        return torch.softmax(x.masked_fill(n < 0, float("-inf")), -1), n.masked_fill(n == 0, 9)

    g = torch.Generator().manual_seed(5)
    n = torch.randint(-3, 4, (2, 3, 4), generator=g)
    n[..., 0] = 1  # no row all masked
    check(f, torch.randn(2, 3, 4, generator=g), n, tmp_path=tmp_path)


def test_logical_and_bitwise_ops(tmp_path):
    def f(x, n):
        a, b = x > 0, n > 0
        return (torch.logical_not(x), ~a, torch.logical_and(a, b), torch.logical_or(x, n), torch.logical_xor(a, n),
                a & b, a | b, a ^ b, n & 5 * 0 + n, torch.bitwise_or(n, n.neg()), torch.bitwise_xor(n, n + 1))

    check(f, *_args(), tmp_path=tmp_path)


def test_any_over_dims(tmp_path):
    def f(x, n):
        c = x > 1.0
        return c.any(-1), c.any(1, keepdim=True), c.any(), torch.any(n > 2, dim=(0, 2)), x.any(0)

    check(f, *_args(3), tmp_path=tmp_path)


def test_where_and_masked_fill_with_numbers_and_0d_values(tmp_path):
    def f(x, n):
        c = x > 0
        return (torch.where(c, x, 0.5), torch.where(c, -1.0, x), torch.where(c, 2, n), torch.where(c, 1.0, 0.0),
                x.masked_fill(c, torch.tensor(7.0)), n & 3, n | 4, (n > 0) ^ True)

    check(f, *_args(), tmp_path=tmp_path)


def test_masked_fill_with_a_value_of_another_dtype_is_refused(tmp_path):
    check_refused(lambda x, n: x.masked_fill(n > 0, torch.tensor(2)), *_args(), tmp_path=tmp_path,
                  match="not 0-d of self's dtype")
