"""The model-zoo parity suite's models: real third-party architectures, random init, no downloads.

Shared by ``tests/converters/test_model_zoo.py`` and ``tests/converters/pte/test_pte_model_zoo.py``
(CI subsets) and ``scripts/run_model_zoo.py`` (the whole list, each model/form in its own
subprocess). Per model and form (``exported`` = the training IR ``torch.export.export`` gives,
``decomposed`` = after ``run_decompositions()``): export with a dynamic batch,
``torch.export.save``, convert the file where ``import torch`` fails
(``torchfree.convert_torch_free``) and run the result on two batch sizes against torch eager, for
one target (``TARGETS``):

* ``onnx``: ``pt2x.converters.to_onnx``, ONNX Runtime CPU. The outcome is ``match``, ``mismatch``
  (a failure: a silently wrong model), ``refused`` (pt2x raised, with its message),
  ``converter_error`` or ``ort_error``;
* ``pte``: ``pt2x.converters.to_pte``, ExecuTorch's runtime (``executorch.runtime``, portable
  kernels). The outcome is ``match``, ``wrong`` (a silently wrong model), ``refused`` (with the
  unsupported-operator report) or ``error`` (the converter crashed, or the runtime rejected the
  file at load or failed running it: ``at`` says which).

Weights and BatchNorm statistics are re-drawn (``redraw``) so the reference output is neither
constant nor near zero; ``check`` asserts its std. A degenerate reference matches anything.

torchvision from the registry is a CUDA build: next to the CPU torch its C++ ops do not
register and ``import torchvision`` fails ("operator torchvision::nms does not exist").
``torchvision_ops.register_torchvision_ops`` defines ``torchvision::nms`` (pure torch, CPU) and declares
``qnms`` before the import; torchvision's own fake kernels then register. Only detection models
call them, and those do not export with torch 2.13 (data-dependent guards), so they are not here.
Run as a script for one model/form: ``python tests/support/model_zoo.py NAME FORM [--torch-onnx]
[--target pte]`` prints one JSON line.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import os
import sys
import tempfile
import time
from typing import Callable

import numpy as np
import torch
from torchvision_ops import register_torchvision_ops

BATCHES = (1, 3)  # the two batch sizes checked; the export's dynamic batch is Dim(1..8)
MIN_STD = 1e-2  # the eager output's std must exceed this on every batch
FORMS = ("exported", "decomposed")
TARGETS = ("onnx", "pte")

def missing_libraries() -> list[str]:
    """The zoo's libraries that cannot be imported here (after the nms workaround)."""
    out = []
    for name in ("torchvision", "timm", "transformers"):
        if importlib.util.find_spec(name) is None:
            out.append(name)
            continue
        try:
            if name == "torchvision":
                register_torchvision_ops()
            __import__(name)
        except Exception as e:  # noqa: BLE001 - reported as the skip reason
            out.append(f"{name} ({type(e).__name__}: {str(e)[:80]})")
    return out


if importlib.util.find_spec("torchvision") is not None:
    register_torchvision_ops()  # transformers imports torchvision too, whenever it is installed


# ----------------------------------------------------------------------- weights


@torch.no_grad()
def redraw(model: torch.nn.Module, seed: int = 0, calibrate: torch.Tensor | None = None) -> torch.nn.Module:
    """Re-draw every parameter: fan-in scaled normal weights, biases N(0, 0.1), 1-D weights (norm
    scales) U(0.5, 1.5). BatchNorm statistics: measured on ``calibrate`` (one train-mode pass of
    the BatchNorms only), then running_mean += N(0, 0.1) and running_var *= U(0.5, 2). Drawn
    statistics alone make activations shrink layer by layer in a deep CNN, until the output is
    the head's bias whatever the input (a degenerate reference)."""
    g = torch.Generator().manual_seed(seed)
    for mod in model.modules():
        for pname, p in mod.named_parameters(recurse=False):
            if p.dim() >= 2:
                p.copy_(torch.randn(p.shape, generator=g) / p[0].numel() ** 0.5)
            elif pname == "weight":
                p.copy_(torch.rand(p.shape, generator=g) + 0.5)
            else:
                p.copy_(torch.randn(p.shape, generator=g) * 0.1)
    bns = [m for m in model.modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)]
    model.eval()
    if bns and calibrate is not None:
        for bn in bns:
            bn.reset_running_stats()
            bn.momentum = None  # cumulative average: exactly the calibration batch's statistics
            bn.train()
        model(calibrate)
        model.eval()
    for bn in bns:
        if bn.running_mean is not None:
            bn.running_mean.add_(torch.randn(bn.running_mean.shape, generator=g) * 0.1)
            bn.running_var.mul_(torch.rand(bn.running_var.shape, generator=g) * 1.5 + 0.5)
    return model


# ----------------------------------------------------------------------- models


class FirstTensor(torch.nn.Module):
    """Wraps a model whose output is a dict/ModelOutput/tuple: returns one tensor of it."""

    def __init__(self, model: torch.nn.Module, key):
        super().__init__()
        self.model, self.key = model, key

    def forward(self, x):
        out = self.model(x)
        return out[self.key]


@dataclasses.dataclass(frozen=True)
class ZooModel:
    name: str
    source: str  # library and constructor, for the table
    build: Callable[[], torch.nn.Module]
    make_input: Callable[[int], torch.Tensor]  # batch -> one input
    scale: float = 10.0  # times the float32 tolerance (deep nets accumulate reassociation error)
    why: str = ""  # what the model covers


def _image(size: int) -> Callable[[int], torch.Tensor]:
    return lambda b: torch.randn(b, 3, size, size, generator=torch.Generator().manual_seed(100 + b))


def _tokens(vocab: int, seq: int) -> Callable[[int], torch.Tensor]:
    return lambda b: torch.randint(0, vocab, (b, seq), generator=torch.Generator().manual_seed(200 + b))


def _audio(samples: int) -> Callable[[int], torch.Tensor]:
    return lambda b: torch.randn(b, samples, generator=torch.Generator().manual_seed(300 + b))


def _tv(ctor: str, **kw) -> Callable[[], torch.nn.Module]:
    def build():
        register_torchvision_ops()
        import torchvision

        return getattr(torchvision.models, ctor)(weights=None, **kw)
    return build


def _tv_seg(ctor: str) -> Callable[[], torch.nn.Module]:
    def build():
        register_torchvision_ops()
        import torchvision

        m = getattr(torchvision.models.segmentation, ctor)(weights=None, weights_backbone=None, num_classes=5)
        return FirstTensor(m, "out")
    return build


def _timm(name: str, **kw) -> Callable[[], torch.nn.Module]:
    def build():
        register_torchvision_ops()
        import timm

        return timm.create_model(name, pretrained=False, **kw)
    return build


def _hf_decoder(kind: str) -> Callable[[], torch.nn.Module]:
    def build():
        import transformers as tr

        cfg_cls, model_cls = {"llama": (tr.LlamaConfig, tr.LlamaModel),
                              "qwen2": (tr.Qwen2Config, tr.Qwen2Model)}[kind]
        cfg = cfg_cls(vocab_size=128, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                      use_cache=False)
        return FirstTensor(model_cls(cfg), "last_hidden_state")
    return build


def _hf_wav2vec2() -> torch.nn.Module:
    import transformers as tr

    cfg = tr.Wav2Vec2Config(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
                            conv_dim=(16, 16, 16), conv_stride=(5, 4, 2), conv_kernel=(10, 4, 2),
                            num_conv_pos_embeddings=16, num_conv_pos_embedding_groups=4,
                            do_stable_layer_norm=False, feat_extract_norm="group")
    return FirstTensor(tr.Wav2Vec2Model(cfg), "last_hidden_state")


MODELS: dict[str, ZooModel] = {m.name: m for m in (
    ZooModel("tv_mobilenet_v3_small", "torchvision mobilenet_v3_small", _tv("mobilenet_v3_small"), _image(64),
             why="depthwise, squeeze-excite, hardswish/hardsigmoid"),
    ZooModel("tv_efficientnet_b0", "torchvision efficientnet_b0", _tv("efficientnet_b0"), _image(64),
             why="depthwise, squeeze-excite, SiLU"),
    ZooModel("tv_resnet18", "torchvision resnet18", _tv("resnet18"), _image(64), why="residual CNN"),
    ZooModel("tv_swin_t", "torchvision swin_t", _tv("swin_t"), _image(64),
             why="shifted-window attention (mask built by in-place writes through slices)"),
    ZooModel("tv_lraspp_mobilenet_v3_large", "torchvision lraspp_mobilenet_v3_large",
             _tv_seg("lraspp_mobilenet_v3_large"), _image(64), why="segmentation head, hardswish, resize"),
    ZooModel("tv_deeplabv3_mobilenet_v3_large", "torchvision deeplabv3_mobilenet_v3_large",
             _tv_seg("deeplabv3_mobilenet_v3_large"), _image(64), why="ASPP, dilated convs, segmentation"),
    ZooModel("timm_vit_tiny", "timm vit_tiny_patch16_224 (img_size=64)",
             _timm("vit_tiny_patch16_224", img_size=64), _image(64), why="vision transformer"),
    ZooModel("timm_mobilenetv3_small_050", "timm mobilenetv3_small_050",
             _timm("mobilenetv3_small_050"), _image(64), why="timm depthwise/SE/hard activations"),
    ZooModel("timm_levit_128s", "timm levit_128s (img_size=64)", _timm("levit_128s", img_size=64), _image(64),
             why="LeViT: reshape_as, attention biases, hardswish"),
    ZooModel("hf_wav2vec2", "transformers Wav2Vec2Model (tiny config)", _hf_wav2vec2, _audio(1600),
             why="audio encoder: conv feature extractor, weight-norm positional conv"),
    ZooModel("hf_llama_gqa", "transformers LlamaModel (tiny, 4 heads / 2 kv heads)", _hf_decoder("llama"),
             _tokens(128, 16), why="decoder LM: rotary, GQA, RMSNorm, causal mask"),
    ZooModel("hf_qwen2_gqa", "transformers Qwen2Model (tiny, 4 heads / 2 kv heads)", _hf_decoder("qwen2"),
             _tokens(128, 16), why="decoder LM: rotary, GQA, qkv bias"),
)}


# ----------------------------------------------------------------------- export and check


def export(zm: ZooModel, model: torch.nn.Module, form: str) -> torch.export.ExportedProgram:
    batch = torch.export.Dim("batch", min=1, max=8)
    ep = torch.export.export(model, (zm.make_input(2),), dynamic_shapes=({0: batch},), strict=False)
    return ep.run_decompositions() if form == "decomposed" else ep


def _ort_outputs(model_bytes: bytes, x: torch.Tensor) -> np.ndarray:
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = 2
    sess = ort.InferenceSession(model_bytes, so, providers=["CPUExecutionProvider"])
    return sess.run(None, {sess.get_inputs()[0].name: x.numpy()})[0]


def references(zm: ZooModel, model) -> dict[int, tuple[torch.Tensor, torch.Tensor]]:
    """batch -> (input, eager output), after asserting the output is not degenerate: its std
    exceeds MIN_STD on every batch, and so does its spread across the samples of a batch."""
    refs = {}
    for b in BATCHES:
        x = zm.make_input(b)
        with torch.no_grad():
            refs[b] = (x, model(x))
    for b, (_, ref) in refs.items():
        std = float(ref.float().std())
        assert std > MIN_STD, f"degenerate reference: eager output std {std:.3g} at batch {b}"
    ref = refs[max(BATCHES)][1].float()
    spread = float(ref.std(0).mean())
    assert spread > MIN_STD, f"degenerate reference: the output barely depends on the input ({spread:.3g})"
    return refs


def _compare(zm: ZooModel, model, model_bytes: bytes, run: Callable | None = None) -> dict:
    """batch -> max abs diff and the reference's std; ``run(x)`` is the converted model's output
    (ONNX Runtime on ``model_bytes`` by default). Raises AssertionError on a mismatch."""
    from tolerances import assert_close

    run = run or (lambda x: _ort_outputs(model_bytes, x))
    worst = {}
    for b, (x, ref) in references(zm, model).items():
        got = run(x)
        assert_close(got, ref.numpy(), ref.dtype, what=f"{zm.name} batch {b}", scale=zm.scale)
        worst[b] = {"max_abs_diff": float(np.abs(got.astype(np.float64) - ref.numpy()).max()),
                    "ref_std": float(ref.std())}
    return worst


def _pt2x_convert(path: str) -> bytes:
    """pt2x's ONNX of the saved program, converted where ``import torch`` fails."""
    from torchfree import convert_torch_free

    return convert_torch_free("to_onnx", path)


def _torch_onnx_convert(ep) -> bytes:
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        prog = torch.onnx.export(ep, (), dynamo=True, verbose=False)
    return prog.model_proto.SerializeToString()


def _outcome(fn: Callable[[], bytes], zm, model, refusal: type | None = None) -> dict:
    """Convert with ``fn`` and compare: match / mismatch / refused (the converter raised)."""
    t = time.perf_counter()
    try:
        model_bytes = fn()
    except Exception as e:  # noqa: BLE001 - the refusal is the outcome, recorded with its message
        # pt2x refuses with a Pt2Error; anything else from it is a converter crash
        kind = "refused" if refusal is None or isinstance(e, refusal) else "converter_error"
        return {"outcome": kind, "error": f"{type(e).__name__}: {str(e)[:400]}"}
    convert_s = time.perf_counter() - t
    try:
        detail = _compare(zm, model, model_bytes)
    except AssertionError as e:
        return {"outcome": "mismatch", "error": str(e)[:400], "convert_s": convert_s}
    except Exception as e:  # noqa: BLE001 - ORT failed to load or run the converted model
        return {"outcome": "ort_error", "error": f"{type(e).__name__}: {str(e)[:400]}", "convert_s": convert_s}
    return {"outcome": "match", "convert_s": convert_s, "batches": detail}


def _error(e: BaseException) -> str:
    return f"{type(e).__name__}: {str(e)[:400]}"


def _pte_method(data: bytes) -> tuple:
    """ExecuTorch's program of the .pte ``data`` and its ``forward`` (the runtime reads ``data``
    in place: the caller keeps it and the program referenced while the method runs)."""
    from executorch.runtime import Runtime

    program = Runtime.get().load_program(data)
    return program, program.load_method("forward")


def _pte_outcome(zm: ZooModel, model, path: str) -> dict:
    """``to_pte`` of ``path`` where ``import torch`` fails, run in ExecuTorch's runtime against
    eager: match / wrong / refused (the unsupported-operator report) / error (``at``: convert,
    load or execute)."""
    from pt2x.converters.errors import UnsupportedOpsError
    from pt2x.serde.errors import Pt2Error
    from torchfree import convert_torch_free

    t = time.perf_counter()
    try:
        data = convert_torch_free("to_pte", path)
    except Pt2Error as e:
        out = {"outcome": "refused", "error": _error(e)}
        if isinstance(e, UnsupportedOpsError):
            out["ops"] = {p.target: {"count": p.count, "reasons": list(p.reasons)} for p in e.ops}
        return out
    except Exception as e:  # noqa: BLE001 - anything but a Pt2Error is a converter crash
        return {"outcome": "error", "at": "convert", "error": _error(e)}
    result = {"convert_s": time.perf_counter() - t, "pte_bytes": len(data)}
    try:
        _program, method = _pte_method(data)
    except Exception as e:  # noqa: BLE001 - the runtime rejected the file at load
        return {"outcome": "error", "at": "load", "error": _error(e), **result}
    try:
        result["batches"] = _compare(zm, model, data, run=lambda x: method.execute([x])[0].numpy())
    except AssertionError as e:
        return {"outcome": "wrong", "error": str(e)[:400], **result}
    except Exception as e:  # noqa: BLE001 - a kernel failed at run time
        return {"outcome": "error", "at": "execute", "error": _error(e), **result}
    return {"outcome": "match", **result}


def check(name: str, form: str, *, target: str = "onnx", torch_onnx: bool = False,
          workdir: str | None = None) -> dict:
    """One model in one form for one target (``TARGETS``): ``{"pt2x": {...outcome...},
    "torch_onnx": {...}?}`` (``torch_onnx``: the ONNX target only)."""
    if target not in TARGETS:
        raise ValueError(f"target {target!r} is none of {TARGETS}")
    zm = MODELS[name]
    torch.manual_seed(0)
    model = redraw(zm.build(), seed=0, calibrate=zm.make_input(8))
    result: dict = {"model": name, "form": form, "source": zm.source, "target": target}
    try:
        ep = export(zm, model, form)
    except Exception as e:  # noqa: BLE001 - torch itself cannot export: recorded, not pt2x's outcome
        result["pt2x"] = {"outcome": "export_failed", "error": f"{type(e).__name__}: {str(e)[:400]}"}
        return result
    try:
        references(zm, model)
    except AssertionError as e:  # a suite bug: a degenerate reference matches anything
        result["pt2x"] = {"outcome": "degenerate_reference", "error": str(e)}
        return result
    from pt2x.serde.errors import Pt2Error

    with tempfile.TemporaryDirectory(dir=workdir) as d:
        path = os.path.join(d, f"{name}.pt2")
        torch.export.save(ep, path)
        if target == "pte":
            result["pt2x"] = _pte_outcome(zm, model, path)
            return result
        result["pt2x"] = _outcome(lambda: _pt2x_convert(path), zm, model, refusal=Pt2Error)
        if torch_onnx:
            result["torch_onnx"] = _outcome(lambda: _torch_onnx_convert(ep), zm, model)
    return result


def main(argv: list[str]) -> int:
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # tolerances.py
    name, form = argv[0], argv[1]
    torch.set_num_threads(2)
    target = argv[argv.index("--target") + 1] if "--target" in argv else "onnx"
    print(json.dumps(check(name, form, target=target, torch_onnx="--torch-onnx" in argv)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
