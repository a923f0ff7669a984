"""Indexing on the pte target (``ops_index.py``): advanced indexing (one index tensor, several
broadcast together, ``None`` dims, negative indices, a table of positions as swin's relative
position bias reads it), index_select and gather, with a dynamic batch; each exported at test time,
converted where ``import torch`` fails and run in ExecuTorch's runtime against eager."""

from __future__ import annotations

import pytest

pytest.importorskip("executorch", reason="executorch is not installed (pip install executorch==1.5.1): "
                                         "the .pte files are checked by running them in its runtime")

import torch  # noqa: E402

from pte_parity import check  # noqa: E402


class BiasTable(torch.nn.Module):
    """A weight read at a buffer of positions (swin's relative position bias), and by a runtime index."""

    def __init__(self):
        super().__init__()
        self.table = torch.nn.Parameter(torch.randn(9, 2))
        self.register_buffer("pos", torch.randint(0, 9, (4, 4)))

    def forward(self, x, i):
        bias = self.table[self.pos.view(-1)].view(4, 4, 2).permute(2, 0, 1)
        return x + bias, x[:, i], x[i, :, :, i]


def _x(b=3):
    return torch.randn(b, 2, 4, 4, generator=torch.Generator().manual_seed(b))


def test_advanced_indexing(tmp_path):
    torch.manual_seed(0)
    m = BiasTable().eval().requires_grad_(False)
    i = torch.tensor([1, -1, 0])
    check(m, _x(), i, tmp_path=tmp_path)


def test_index_with_broadcast_indices_and_a_dynamic_batch(tmp_path):
    rows, cols = torch.tensor([[0], [2]]), torch.tensor([1, 3, -1])
    check(lambda x: (x[:, :, rows, cols], x[:, 1, rows]), _x(), tmp_path=tmp_path, dynamic=True,
          runs=[(_x(1),), (_x(5),)])


def test_index_select_and_gather(tmp_path):
    def f(x, i, g):
        return torch.index_select(x, 2, i), torch.gather(x, 3, g), x.index_select(0, i[1:2])

    g = torch.randint(0, 4, (3, 2, 4, 2), generator=torch.Generator().manual_seed(1))
    check(f, _x(), torch.tensor([3, 0, 0, 2]), g, tmp_path=tmp_path)


def test_scatters_and_index_put(tmp_path):
    def f(x, src, i):
        return (torch.slice_scatter(x, src[:, :, :2], 2, 1, 5, 2), torch.select_scatter(x, src[:, 0], 1, -1),
                torch.index_put(x, (i,), src[0, 0, 0] * 0 + 1.5),
                torch.index_put(x, (i, torch.tensor([0, 1, 1])), src[0, 0], accumulate=True),
                x.index_put((i,), torch.tensor(9.0)))

    g = torch.Generator().manual_seed(0)
    check(f, _x(), torch.randn(3, 2, 4, 4, generator=g), torch.tensor([2, 0, 2]), tmp_path=tmp_path)


def test_in_place_writes_through_slices(tmp_path):
    """swin's shifted-window mask: a new tensor written region by region through slices
    (``fill_``, ``copy_``, the view-mutation pass's slice_scatter/select_scatter write-backs)."""
    def f(x):
        m = x.new_zeros((6, 6))
        cnt = 0
        for h in (slice(0, -3), slice(-3, -1), slice(-1, None)):
            for w in (slice(0, -3), slice(-3, None)):
                m[h, w] = cnt
                cnt += 1
        m[0].copy_(x[0, 0, 0, :1].expand(6))
        y = x.clone()
        y[:, 1, :, 2:].fill_(-1.0)
        return m, y, torch.as_strided(x.sum(-1, keepdim=True), (x.shape[0], 2, 4, 1), (8, 4, 1, 1))

    check(f, _x(), tmp_path=tmp_path, dynamic=True, runs=[(_x(1),), (_x(4),)])
