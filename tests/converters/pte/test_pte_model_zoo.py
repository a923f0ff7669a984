"""The model-zoo suite on the pte target, CI subset: real torchvision/transformers models (random
init, weights and BatchNorm statistics re-drawn by ``model_zoo.redraw`` so the reference is not
degenerate), exported with a dynamic batch, saved, converted by ``to_pte`` where ``import torch``
fails and run in ExecuTorch's runtime (portable kernels) on batches 1 and 3 against torch eager,
under the ONNX zoo's tolerances (``model_zoo.check(..., target="pte")``). resnet18 is the residual
CNN; the GQA Llama, as exported, carries the rest: its causal-mask construction (arange, cumsum,
index, where, logic), rotary embedding in a no-grad region, RMSNorm (pow, rsqrt), attention with a
mask and grouped-query heads, all over a dynamic batch. The whole zoo is
``python -m scripts.run_model_zoo --target pte`` (docs/pte.md, "Model zoo")."""

from __future__ import annotations

import pytest

pytest.importorskip("executorch", reason="executorch is not installed (pip install executorch==1.5.1): "
                                         "the .pte files are checked by running them in its runtime")

import model_zoo  # noqa: E402

_MISSING = model_zoo.missing_libraries()
CASES = [("tv_resnet18", "exported"), ("hf_llama_gqa", "exported")]


@pytest.mark.skipif(bool(_MISSING), reason=f"model-zoo libraries not importable: {', '.join(_MISSING)}")
@pytest.mark.parametrize("name,form", CASES, ids=[f"{n}-{f}" for n, f in CASES])
def test_pte_model_zoo(name, form, tmp_path):
    res = model_zoo.check(name, form, target="pte", workdir=str(tmp_path))["pt2x"]
    assert res["outcome"] == "match", res
    assert set(res["batches"]) == set(model_zoo.BATCHES)
