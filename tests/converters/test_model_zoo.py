"""The model-zoo parity suite, CI subset: real torchvision/transformers models (random init,
weights and BatchNorm statistics re-drawn so the reference is not degenerate), exported with a
dynamic batch as exported and after ``run_decompositions()``, converted by pt2x from the saved
.pt2, run in ONNX Runtime CPU on batches 1 and 3 against torch eager. The whole zoo is
``python -m scripts.run_model_zoo`` (docs/onnx.md, "Model zoo"). Each case matches, or is refused
for a reason listed here; a mismatch is never acceptable."""

from __future__ import annotations

import pytest
import torch

import model_zoo

_MISSING = model_zoo.missing_libraries()

# (model, form) -> reasons pt2x may give for refusing it (a substring of the error); a match is
# always acceptable. None today: swin_t's shifted-window mask (in-place writes into slices of a
# new_zeros tensor) goes through the view-mutation pass, and its decomposed form's as_strided
# with a symbolic batch is a reshape of contiguous memory.
ALLOWED_REFUSALS: dict[tuple[str, str], tuple[str, ...]] = {}
CASES = [("tv_mobilenet_v3_small", "exported"), ("tv_mobilenet_v3_small", "decomposed"),
         ("hf_llama_gqa", "exported"), ("hf_llama_gqa", "decomposed"),
         ("hf_wav2vec2", "exported"), ("tv_lraspp_mobilenet_v3_large", "exported"), ("timm_vit_tiny", "exported"),
         ("tv_swin_t", "exported")]


@pytest.mark.skipif(bool(_MISSING), reason=f"model-zoo libraries not importable: {', '.join(_MISSING)}")
@pytest.mark.parametrize("name,form", CASES, ids=[f"{n}-{f}" for n, f in CASES])
def test_model_zoo(name, form, tmp_path):
    res = model_zoo.check(name, form, workdir=str(tmp_path))["pt2x"]
    if res["outcome"] == "match":
        assert set(res["batches"]) == set(model_zoo.BATCHES)
        return
    allowed = ALLOWED_REFUSALS.get((name, form), ())
    assert res["outcome"] == "refused" and any(r in res["error"] for r in allowed), res


@pytest.mark.skipif(bool(_MISSING), reason=f"model-zoo libraries not importable: {', '.join(_MISSING)}")
def test_degenerate_reference_is_rejected():
    """An output that does not depend on the input would match any converted model."""
    zm = model_zoo.ZooModel("const", "test", torch.nn.Identity, lambda b: torch.randn(b, 4))

    class Const(torch.nn.Module):
        def forward(self, x):
            return x[:, :1] * 0 + torch.arange(4.0)

    with pytest.raises(AssertionError, match="degenerate reference"):
        model_zoo._compare(zm, Const(), b"")
