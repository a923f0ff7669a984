"""GPU parity: ONNX Runtime's CUDAExecutionProvider vs torch CUDA, TF32 off on both sides.

Skips (saying which) when torch has no CUDA device or onnxruntime lacks the CUDA provider
(the CPU wheel). Run with ``pytest -m gpu``."""

from __future__ import annotations

import copy

import pytest
import torch

import onnx_zoo

pytestmark = pytest.mark.gpu

GPU_CASES = ["mlp_dynamic", "conv_bn_pool", "transformer_encoder", "cnn_upsample", "lstm", "sdpa_masks_gqa",
             "fp16_mlp", "hf_bert", "hf_llama"]


def _require_gpu():
    if not torch.cuda.is_available():
        pytest.skip("torch.cuda.is_available() is False: no CUDA device for torch")
    import onnxruntime as ort

    if "CUDAExecutionProvider" not in ort.get_available_providers():
        pytest.skip(f"onnxruntime {ort.__version__} lacks CUDAExecutionProvider "
                    f"(has {ort.get_available_providers()}): install onnxruntime-gpu")


def _converted(name: str) -> bytes:
    """pt2x's ONNX of the case. A GPU machine's image may hold another torch than the pinned one
    (2026-11-26: torch 2.11.0+cu130, whose export cannot prove the guard transformers' Llama puts
    on a dynamic seq): that torch's export failure skips, naming it; under the pinned torch it fails."""
    import pathlib
    import tomllib

    extras = tomllib.loads((pathlib.Path(__file__).parents[2] / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    pinned = next(r.split("==")[1] for r in extras["test"] if r.replace(" ", "").startswith("torch=="))
    try:
        return onnx_zoo.converted(name)
    except torch._dynamo.exc.UserError as e:
        if torch.__version__.split("+")[0] == pinned:
            raise
        pytest.skip(f"torch {torch.__version__} (not the pinned {pinned}) cannot export {name}: "
                    f"{str(e).splitlines()[0][:160]}")


@pytest.mark.parametrize("name", GPU_CASES)
def test_onnx_cuda_parity(name):
    _require_gpu()
    if "hf" in onnx_zoo.case(name).tags:
        pytest.importorskip("transformers")
    from tolerances import assert_close

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    sess = onnx_zoo.ort_session(_converted(name), "CUDAExecutionProvider", {"use_tf32": 0})
    assert "CUDAExecutionProvider" in sess.get_providers()
    for label, args, kwargs in onnx_zoo.input_sets(name):
        torch.manual_seed(0)
        module = onnx_zoo.case(name).make().cuda()
        cuda = lambda t: t.cuda() if isinstance(t, torch.Tensor) else t  # noqa: E731
        with torch.no_grad():
            out = module(*[cuda(a) for a in copy.deepcopy(args)], **{k: cuda(v) for k, v in kwargs.items()})
        expected = [e.cpu() if isinstance(e, torch.Tensor) else e for e in onnx_zoo._leaves(out)]
        got = onnx_zoo.run(sess, [a for a in onnx_zoo._leaves((args, kwargs)) if isinstance(a, torch.Tensor)])
        for i, (e, g) in enumerate(zip(expected, got)):
            assert_close(g, onnx_zoo.to_numpy(e), e.dtype, what=f"{name} {label} output {i} (CUDA)", scale=10)
