"""to_pte's parity on the portable kernels (``delegate="none"``; the XNNPACK delegate's is
test_pte_xnnpack.py): programs torch exports at test time, converted where ``import torch``
fails, run in ExecuTorch's runtime and compared with torch eager (float32 tolerance from
verification/compare.py's table, at the parity tests' scale)."""

from __future__ import annotations

import pytest

pytest.importorskip("executorch", reason="executorch is not installed (pip install executorch==1.5.1): "
                                         "the .pte files are checked by running them in its runtime")

import pte_zoo  # noqa: E402


@pytest.mark.parametrize("name", sorted(pte_zoo.PROGRAMS))
def test_matches_torch_eager(name):
    pte_zoo.check(name, **pte_zoo.PORTABLE)


def test_dynamic_batch_past_its_bound_is_refused_by_the_runtime():
    import torch

    with pytest.raises(RuntimeError):
        pte_zoo.run(pte_zoo.converted("mlp_dynamic", **pte_zoo.PORTABLE), [torch.randn(65, 8)])


def test_max_dims_bounds_an_unbounded_batch(tmp_path):
    import torch

    class Lin(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = torch.nn.Linear(4, 3)

        def forward(self, x):
            return self.fc(x).reshape(x.shape[0], 3, 1)

    torch.manual_seed(0)
    m = Lin().eval()
    ep = torch.export.export(m, (torch.randn(2, 4),), dynamic_shapes={"x": {0: torch.export.Dim("b")}})
    path = str(tmp_path / "lin.pt2")
    torch.export.save(ep, path)
    (symbol,) = [str(s) for s in ep.range_constraints]
    data = pte_zoo.convert_torch_free("to_pte", path, max_dims={symbol: 8}, **pte_zoo.PORTABLE)
    for b in (1, 8):
        x = torch.randn(b, 4)
        (got,) = pte_zoo.run(data, [x])
        torch.testing.assert_close(got, m(x).detach().reshape(b, 3, 1), rtol=1e-5, atol=1e-6)


def test_one_element_lists_of_2d_ops_mean_both_dims(tmp_path):
    """aten.conv2d/max_pool2d/avg_pool2d given [2] for a pair (ATen expands it)."""
    import torch

    class M(torch.nn.Module):
        def forward(self, x, w):
            y = torch.ops.aten.conv2d.default(x, w, None, [2], [1], [1], 1)
            y = torch.ops.aten.max_pool2d.default(y, [2], [1], [0], [1], False)
            return torch.ops.aten.avg_pool2d.default(y, [2], [2], [1])

    args = (torch.randn(1, 3, 12, 12), torch.randn(4, 3, 3, 3))
    path = str(tmp_path / "pairs.pt2")
    torch.export.save(torch.export.export(M(), args), path)
    (got,) = pte_zoo.run(pte_zoo.convert_torch_free("to_pte", path, **pte_zoo.PORTABLE), args)
    torch.testing.assert_close(got, M()(*args), rtol=1e-4, atol=1e-5)


def test_weights_stored_strided_in_the_archive(tmp_path):
    """A parameter that is a transposed view (torch.export.save keeps its storage and strides)."""
    import torch

    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.randn(6, 4).t())  # [4, 6], strides (1, 4)
            self.b = torch.nn.Parameter(-torch.zeros(6))
            self.c = torch.nn.Parameter(torch.zeros(6))

        def forward(self, x):
            return torch.nn.functional.linear(x, self.w.t(), self.b) + self.c

    torch.manual_seed(0)
    m = M()
    assert not m.w.is_contiguous()
    path = str(tmp_path / "strided.pt2")
    x = torch.randn(2, 4)
    torch.export.save(torch.export.export(m, (x,)), path)
    (got,) = pte_zoo.run(pte_zoo.convert_torch_free("to_pte", path, **pte_zoo.PORTABLE), [x])
    torch.testing.assert_close(got, m(x).detach(), rtol=1e-5, atol=1e-6)
