"""Group norm, weight norm and 1-D convolutions on the pte target (``ops_norm.py``, ``ops_nn.py``):
group_norm of 3-D and 4-D inputs with a dynamic batch, native_group_norm's three outputs,
_weight_norm over a dim and over the whole tensor (``dim=-1``), conv1d with strides, dilation,
groups and no bias (wav2vec2's feature extractor and positional conv); each exported at test time,
converted where ``import torch`` fails and run in ExecuTorch's runtime against eager."""

from __future__ import annotations

import pytest

pytest.importorskip("executorch", reason="executorch is not installed (pip install executorch==1.5.1): "
                                         "the .pte files are checked by running them in its runtime")

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from pte_parity import check, check_refused  # noqa: E402


def _g(seed=0):
    return torch.Generator().manual_seed(seed)


def test_group_norm_with_a_dynamic_batch(tmp_path):
    w, b = torch.rand(6, generator=_g(1)) + 0.5, torch.randn(6, generator=_g(2))

    def f(x, y):
        return F.group_norm(x, 3, w, b, eps=1e-4), F.group_norm(y, 2), F.group_norm(y, 6, w, b)

    def args(n):
        return torch.randn(n, 6, 10, generator=_g(n)) * 3 + 1, torch.randn(n, 6, 4, 5, generator=_g(n + 10))

    check(f, *args(2), tmp_path=tmp_path, dynamic=True, runs=[args(1), args(5)])


def test_native_group_norm_gives_mean_and_rstd(tmp_path):
    w, b = torch.rand(6, generator=_g(1)) + 0.5, torch.randn(6, generator=_g(2))
    check(lambda x: torch.ops.aten.native_group_norm(x, w, b, 2, 6, 12, 3, 1e-5),
          torch.randn(2, 6, 3, 4, generator=_g()), tmp_path=tmp_path)


def test_weight_norm(tmp_path):
    v, g2, g0 = torch.randn(4, 3, 5, generator=_g(3)), torch.rand(1, 1, 5, generator=_g(4)), torch.rand(4, 1, 1)

    def f(x):
        return (torch._weight_norm(v * x, g2, 2), torch._weight_norm(v + x, g0, 0),
                torch._weight_norm(v - x, torch.tensor(2.0), -1))

    check(f, torch.randn(1, 1, 5, generator=_g(5)), tmp_path=tmp_path)


def test_conv1d(tmp_path):
    w1, w2 = torch.randn(8, 1, 10, generator=_g(6)) * 0.3, torch.randn(8, 4, 3, generator=_g(7)) * 0.3
    bias = torch.randn(8, generator=_g(8))

    def f(x):
        y = F.conv1d(x, w1, stride=5)
        return F.conv1d(y, w2, bias, padding=2, dilation=2, groups=2), y

    check(f, torch.randn(2, 1, 60, generator=_g(9)), tmp_path=tmp_path, dynamic=True,
          runs=[(torch.randn(1, 1, 60, generator=_g(10)),)])


def test_conv1d_with_same_padding_is_refused(tmp_path):
    w = torch.randn(4, 2, 3, generator=_g(11))
    check_refused(lambda x: F.conv1d(x, w, padding="same"), torch.randn(1, 2, 9), tmp_path=tmp_path,
                  match="padding='same'")
