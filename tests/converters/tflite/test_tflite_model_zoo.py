"""The model-zoo suite for TFLite, CI subset: real torchvision/transformers models (random init,
weights and BatchNorm statistics re-drawn by ``model_zoo.redraw`` so the reference is not
degenerate), exported with a dynamic batch, saved, converted by ``to_tflite`` from the .pt2 and
run in LiteRT (XNNPACK) on batches 1 and 3 after a resize, against torch eager. The whole zoo's
outcome is in docs/tflite.md."""

from __future__ import annotations

import os

import pytest
import torch

import model_zoo
import tflite_zoo
from tolerances import TFLITE_SCALE, assert_close
from torchfree import convert_torch_free

_MISSING = model_zoo.missing_libraries()
CASES = [("tv_mobilenet_v3_small", "exported"), ("hf_llama_gqa", "exported")]


def check(name: str, form: str, workdir: str) -> dict:
    """batch -> max abs diff; raises AssertionError on a mismatch (the caller's verdict)."""
    zm = model_zoo.MODELS[name]
    torch.manual_seed(0)
    model = model_zoo.redraw(zm.build(), seed=0, calibrate=zm.make_input(8))
    path = os.path.join(workdir, f"{name}-{form}.pt2")
    torch.export.save(model_zoo.export(zm, model, form), path)
    it = tflite_zoo.interpreter(convert_torch_free("to_tflite", path))  # where import torch fails
    worst = {}
    for b, (x, ref) in model_zoo.references(zm, model).items():
        (got, *_) = tflite_zoo.run(it, [x.numpy()])
        assert_close(got, ref.numpy(), ref.dtype, what=f"{name} {form} batch {b}",
                     scale=zm.scale * TFLITE_SCALE.get(str(ref.dtype).replace("torch.", ""), 1.0))
        worst[b] = float(abs(got - ref.numpy()).max())
    return worst


@pytest.mark.skipif(bool(_MISSING), reason=f"model-zoo libraries not importable: {', '.join(_MISSING)}")
@pytest.mark.parametrize("name,form", CASES, ids=[f"{n}-{f}" for n, f in CASES])
def test_model_zoo(name, form, tmp_path):
    worst = check(name, form, str(tmp_path))
    assert set(worst) == set(model_zoo.BATCHES)
