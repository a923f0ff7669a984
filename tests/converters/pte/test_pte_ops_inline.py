"""Wrapper regions inlined on the pte target (``ops_inline.py``): a ``torch.no_grad()`` block inside
the exported module (``wrap_with_set_grad_enabled``, as a rotary embedding writes it) reading an
input, a buffer and a value computed before it, with a dynamic batch; each exported at test time,
converted where ``import torch`` fails and run in ExecuTorch's runtime against eager."""

from __future__ import annotations

import pytest

pytest.importorskip("executorch", reason="executorch is not installed (pip install executorch==1.5.1): "
                                         "the .pte files are checked by running them in its runtime")

import torch  # noqa: E402

from pte_parity import check  # noqa: E402


class Rotary(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("inv_freq", 1.0 / 10000 ** (torch.arange(0, 8, 2).float() / 8), persistent=False)
        self.proj = torch.nn.Linear(8, 8)

    def forward(self, x):
        h = self.proj(x)
        with torch.no_grad():
            pos = torch.arange(x.shape[1]).float()
            freqs = pos[:, None] * self.inv_freq[None, :]
            emb = torch.cat([freqs, freqs], -1)
            cos, sin = emb.cos(), emb.sin()
        return h * cos + torch.relu(h) * sin


def _x(b):
    return torch.randn(b, 5, 8, generator=torch.Generator().manual_seed(b))


def test_no_grad_block_is_inlined(tmp_path):
    torch.manual_seed(0)
    m = Rotary().eval().requires_grad_(False)
    ep_nodes = [str(n.target) for n in torch.export.export(m, (_x(2),)).graph.nodes]
    assert any("wrap_with_set_grad_enabled" in t for t in ep_nodes), ep_nodes  # the program has the wrapper
    check(m, _x(2), tmp_path=tmp_path, dynamic=True, runs=[(_x(1),), (_x(4),)])
