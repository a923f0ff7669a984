"""Elementwise math on the pte target (``ops_elementwise.py``): pow (tensor ** number, tensor ** tensor,
number ** tensor), fmod of float32 and int64 and remainder of float32 (signs; 1.5.1's integer remainder is
refused: it keeps the dividend's sign), rsub, and the unary functions;
each exported at test time, converted where ``import torch`` fails and run in ExecuTorch's runtime
against eager."""

from __future__ import annotations

import pytest

pytest.importorskip("executorch", reason="executorch is not installed (pip install executorch==1.5.1): "
                                         "the .pte files are checked by running them in its runtime")

import torch  # noqa: E402

from pte_parity import check, check_refused  # noqa: E402


def _x():
    return torch.randn(3, 5, generator=torch.Generator().manual_seed(0)) * 3


def test_powers(tmp_path):
    def f(x):
        a = x.abs() + 0.5
        return x ** 2, x.pow(3.0), a ** -0.5, a ** x.clamp(-2, 2), 2.0 ** x, torch.square(x)

    check(f, _x(), tmp_path=tmp_path)


def test_fmod_and_remainder_keep_torch_signs(tmp_path):
    def f(x, n):
        return (torch.fmod(x, 1.5), torch.remainder(x, 1.5), torch.fmod(x, x.flip(1) + 0.1), x % -2.0,
                torch.remainder(x, x.flip(0) - 0.2), torch.fmod(n, 4), torch.fmod(n, -3), torch.fmod(n, n.abs() + 1))

    check(f, _x(), torch.arange(-7, 8).reshape(3, 5), tmp_path=tmp_path)


@pytest.mark.parametrize("fn", [lambda n: n % 4, lambda n: torch.remainder(n, n.abs() + 1)], ids=["scalar", "tensor"])
def test_integer_remainder_is_refused(tmp_path, fn):
    """1.5.1's portable remainder gives an int64 result the dividend's sign (-7 % 4 == -3; torch: 1)."""
    check_refused(fn, torch.arange(-7, 8), tmp_path=tmp_path, match="remainder.*not known to take int64")


def test_rsub_and_unary_functions(tmp_path):
    def f(x):
        p = x.abs() + 0.1
        return (1.0 - x, torch.rsub(x, 2.0, alpha=3.0), torch.reciprocal(p), torch.floor(x), torch.ceil(x),
                torch.trunc(x), torch.sign(x), torch.log1p(p), torch.expm1(x), torch.log2(p), torch.tan(x * 0.3),
                torch.atan(x))

    check(f, _x(), tmp_path=tmp_path)
