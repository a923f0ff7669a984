"""Per-channel scales and shifts folded into the neighbouring layers' weights (``fold_affine.py``):
programs torch exports (a pre-norm MLP, GPT-2's ``view(-1, C)`` + ``addmm``, ConvNeXt's layer
scale, a conv's channel scale, GPT-2's fused q/k/v projection), run in LiteRT (XNNPACK on and off) against torch eager after a
resize of the dynamic batch, with the operator counts saying what was folded and what had to
stay (a LayerNorm output that a residual also reads, a scale with a zero).
"""

from __future__ import annotations

import collections

import numpy as np
import pytest
import torch

from litert_child import assert_each_matches, run_in_child
from tflite_zoo import converted_with_batches, op_names
from pt2x.converters import to_tflite


def _ops(data: bytes) -> collections.Counter:
    return collections.Counter(op_names(data))


def _randomize(module: torch.nn.Module) -> torch.nn.Module:
    """LayerNorm weights and biases away from 1 and 0 (so a fold that drops them is seen)."""
    with torch.no_grad():
        for m in module.modules():
            if isinstance(m, torch.nn.LayerNorm):
                m.weight.uniform_(0.5, 1.5)
                m.bias.uniform_(-0.5, 0.5)
    return module.eval()


class PreNormMlp(torch.nn.Module):
    """LayerNorm -> Linear -> GELU -> Linear: the norm's weight and bias go into the first layer."""

    def __init__(self):
        super().__init__()
        self.norm = torch.nn.LayerNorm(16)
        self.fc1, self.fc2 = torch.nn.Linear(16, 32), torch.nn.Linear(32, 16)

    def forward(self, x):
        return self.fc2(torch.nn.functional.gelu(self.fc1(self.norm(x))))


class Gpt2Style(torch.nn.Module):
    """LayerNorm -> view(-1, C) -> addmm into two projections (the RESHAPE keeps the last axis)."""

    def __init__(self):
        super().__init__()
        self.norm = torch.nn.LayerNorm(16)
        self.w1, self.w2 = torch.nn.Parameter(torch.randn(16, 24)), torch.nn.Parameter(torch.randn(16, 8))
        self.b1, self.b2 = torch.nn.Parameter(torch.randn(24)), torch.nn.Parameter(torch.randn(8))

    def forward(self, x):
        h = self.norm(x).view(-1, 16)
        return torch.addmm(self.b1, h, self.w1).sum(-1) + torch.addmm(self.b2, h, self.w2).sum(-1)


class LayerScale(torch.nn.Module):
    """ConvNeXt's block tail: Linear, then a learned per-channel scale, then the residual."""

    def __init__(self, zero: bool = False):
        super().__init__()
        self.fc = torch.nn.Linear(16, 16)
        scale = torch.rand(16) + 0.5
        if zero:
            scale[3] = 0.0
        self.gamma = torch.nn.Parameter(scale)

    def forward(self, x):
        return x + self.gamma * self.fc(x)


class ConvScale(torch.nn.Module):
    """A conv (NCHW) times a per-channel constant."""

    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(4, 6, 3, padding=1)
        self.s = torch.nn.Parameter(torch.rand(1, 6, 1, 1) + 0.5)

    def forward(self, x):
        return self.conv(x) * self.s


class FusedQkv(torch.nn.Module):
    """GPT-2's fused projection: one Linear, SPLIT into q, k, v along the last axis; q scaled
    after its split into heads, k right after the SPLIT: both fold into their rows only."""

    def __init__(self):
        super().__init__()
        self.c_attn = torch.nn.Linear(16, 48)

    def forward(self, x):
        q, k, v = self.c_attn(x).split(16, dim=2)
        q = q.view(q.shape[0], 5, 2, 8) * 0.5
        return torch.cat([q.flatten(2), k * 0.7, v], -1)


class ResidualNorm(torch.nn.Module):
    """Post-norm: the LayerNorm output goes to a Linear and to the residual: nothing to fold."""

    def __init__(self):
        super().__init__()
        self.norm = torch.nn.LayerNorm(16)
        self.fc = torch.nn.Linear(16, 16)

    def forward(self, x):
        h = self.norm(x)
        return h + self.fc(h)


# (module, input shape without the batch, MUL count, ADD count in the file)
CASES = {
    "pre-norm mlp": (PreNormMlp, (5, 16), 2, 1),  # the norm's d·d and d·rsqrt; its eps ADD
    "gpt2 view+addmm": (Gpt2Style, (5, 16), 2, 2),  # + the final sum's ADD
    "layer scale": (LayerScale, (5, 16), 0, 1),  # the residual
    "layer scale with a 0 (kept)": (lambda: LayerScale(zero=True), (5, 16), 1, 1),
    "conv channel scale": (ConvScale, (4, 7, 7), 0, 0),
    "post-norm residual (kept)": (ResidualNorm, (5, 16), 3, 3),  # + the norm's scale and shift
    "fused q/k/v split": (FusedQkv, (5, 16), 0, 0),
}


@pytest.fixture(scope="module", params=list(CASES))
def converted(request, tmp_path_factory):
    make, shape, n_mul, n_add = CASES[request.param]
    torch.manual_seed(0)
    model = _randomize(make())
    x2, x3 = torch.randn(2, *shape), torch.randn(3, *shape)
    folder = tmp_path_factory.mktemp("affine")
    data, xs, want = converted_with_batches(model, x2, x3, folder)
    return data, xs, want, (n_mul, n_add), str(folder / "model.pt2")


def test_folded_operators(converted):
    data, _, _, (n_mul, n_add), _ = converted
    ops = _ops(data)
    assert (ops["MUL"], ops["ADD"]) == (n_mul, n_add), ops


@pytest.mark.parametrize("xnnpack", [True, False], ids=["xnnpack", "builtin"])
def test_folded_files_match_eager(converted, xnnpack):
    data, xs, want, _, _ = converted
    assert_each_matches(data, xs, want, xnnpack=xnnpack, tol=2e-5)


def test_locate_pairs_no_folded_value(converted):
    """``verify --locate`` on a correct folded file finds no divergence: a tensor a fold made hold
    other numbers than the program value it was named after (the scaled layer output, the
    RESHAPE of the value before the affine) is renamed, not paired."""
    from pt2x.verification import verify

    data, _, _, _, pt2 = converted
    report = verify(pt2, data, locate=True)
    assert report.ok and report.divergence is None and report.compared_values >= 1, report.divergence


def test_locate_on_gpt2_after_the_folds(tmp_path):
    """GPT-2 (transformers, 2 blocks): the q/k scale folded into the fused c_attn and each
    LayerNorm's affine into the Linear after its view; a correct file reported a divergence at
    addmm (h.0.attn.c_attn) before the folded tensors were renamed."""
    pytest.importorskip("transformers")
    import onnx_zoo
    from pt2x.verification import verify

    class FirstOutput(torch.nn.Module):
        def __init__(self, model):
            super().__init__()
            self.model = model

        def forward(self, ids):
            return self.model(ids)[0]

    torch.manual_seed(0)
    model = FirstOutput(onnx_zoo.hf_gpt2()).eval()
    ids = torch.randint(0, 100, (2, 8), generator=torch.Generator().manual_seed(1))
    ep = torch.export.export(model, (ids,), dynamic_shapes=({0: torch.export.Dim("batch", min=1, max=4)},))
    path = str(tmp_path / "gpt2.pt2")
    torch.export.save(ep, path)
    data = to_tflite(path)
    assert b"/folded_scale" in data and b"/before_affine" in data
    report = verify(path, data, locate=True)
    assert report.ok and report.divergence is None and report.compared_values >= 30, report.divergence


class TiedHead(torch.nn.Module):
    """A token embedding whose weights the LM head after a final LayerNorm shares (GPT-2): the
    norm's scale and shift stay, so the file holds the weights once."""

    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(300, 16)
        self.norm = torch.nn.LayerNorm(16)
        self.head = torch.nn.Linear(16, 300, bias=False)
        self.head.weight = self.emb.weight

    def forward(self, ids):
        return self.head(self.norm(self.emb(ids)))


def test_shared_weights_are_not_copied_by_a_fold(tmp_path):
    torch.manual_seed(0)
    model = _randomize(TiedHead())
    ids = torch.randint(0, 300, (2, 5))
    ep = torch.export.export(model, (ids,), dynamic_shapes=({0: torch.export.Dim("batch", min=1, max=8)},))
    torch.export.save(ep, str(tmp_path / "tied.pt2"))
    data = to_tflite(str(tmp_path / "tied.pt2"))
    ops = _ops(data)
    assert ops["MUL"] == 3 and ops["FULLY_CONNECTED"] == 1, ops  # d·d, d·rsqrt and the norm's weight
    assert len(data) < 2 * 300 * 16 * 4, len(data)  # one copy of the 19.2 KB weights
    got = run_in_child([(data, [ids.numpy().astype(np.int64)])], xnnpack=True)[0]
    assert not isinstance(got, str), got
    with torch.no_grad():
        np.testing.assert_allclose(got[0], model(ids).numpy(), rtol=2e-5, atol=2e-5)
