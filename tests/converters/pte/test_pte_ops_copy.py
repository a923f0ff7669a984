"""Casts, copies and views by another tensor on the pte target (``ops_shape.py``): the ``to``
overloads (dtype and layout, device, other), ``type_as``, the inference identities (``detach``,
``alias``, a lifted constant's ``lift_fresh_copy``), ``reshape_as``/``view_as``, ``squeeze``, with a
dynamic batch; each exported at test time, converted where ``import torch`` fails and run in
ExecuTorch's runtime against eager (dtype, shape and values)."""

from __future__ import annotations

import pytest

pytest.importorskip("executorch", reason="executorch is not installed (pip install executorch==1.5.1): "
                                         "the .pte files are checked by running them in its runtime")

import torch  # noqa: E402

from pte_parity import check  # noqa: E402


def _x(b=2):
    return torch.randn(b, 1, 6, generator=torch.Generator().manual_seed(b)) * 4


def test_casts_identities_and_views_by_another_tensor(tmp_path):
    def f(x):
        n = torch.ops.aten.to.dtype_layout(x, dtype=torch.int64, layout=torch.strided, device="cpu")
        y = x.to("cpu", torch.float32) + torch.tensor([1.5, -2.0, 0.5, 3.0, 1.0, 2.0])  # a lifted constant
        return (n, (x > 0).to(x), x.type_as(n), torch.ops.aten.detach.default(y),
                torch.ops.aten.alias.default(y) * 2, x.squeeze(), y.reshape_as(x.squeeze(1)), x.view_as(y))

    check(f, _x(), tmp_path=tmp_path, dynamic=True, runs=[(_x(3),), (_x(5),)])  # squeeze: the batch is never 1


def test_fill_of_a_number_and_a_0d_tensor(tmp_path):
    check(lambda x: (torch.ops.aten.fill.Tensor(x, torch.tensor(2.5)), torch.ops.aten.fill.Scalar(x, -1)), _x(),
          tmp_path=tmp_path, dynamic=True, runs=[(_x(4),)])
