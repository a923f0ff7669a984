"""The model sweep's torch side: the registry, and one model's check (build, export, convert, compare).

Used by ``scripts/sweep_models.py`` (the whole registry, each model in its own subprocess:
``python tests/support/sweep.py check SPEC [--anchor on-miss]`` prints one JSON line; ``... list``
prints the registry; ``... params`` counts the parameters of the specs on stdin on the meta device) and by ``tests/converters/test_sweep_sample.py`` (a stratified sample in CI).

A spec is ``timm:<name>``, ``tv:<name>`` (torchvision classification) or ``hf:<arch>`` (a
transformers architecture with a tiny config, ``HF_CONFIGS``). Each model is built with random
init and no downloads, its weights re-drawn (``model_zoo.redraw``) so the reference is not
degenerate, at a small input size where the model takes one (``--size``, else its default),
exported with a dynamic batch (``Dim(1..8)``), saved, and converted

* by pt2x to ONNX and to TFLite in a process where ``import torch`` fails (``torchfree``),
* by ``torch.onnx.export(ep, dynamo=True)`` (the anchor; with ``anchor="on-miss"`` only where
  pt2x missed on some target),

each output compared with torch eager at batches 1 and 3: ONNX Runtime CPU for ONNX, LiteRT
with XNNPACK for TFLite, under ``tolerances.py`` (scaled as the model zoo scales them). Outcomes:
``match``, ``mismatch`` (silently wrong: the worst), ``refused`` (pt2x's own exception, with the
refused operators), ``error`` (the converter or runtime failed otherwise).
"""

from __future__ import annotations

import json
import os
import re
import sys
import tempfile
import time
import warnings
from typing import Callable

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402
import torch  # noqa: E402

import model_zoo  # noqa: E402  (registers torchvision's nms before timm/transformers import it)
from tolerances import MODEL_SCALE, TFLITE_SCALE, assert_close  # noqa: E402

BATCHES = model_zoo.BATCHES
DEFAULT_SIZE = 64
MAX_WEIGHT_BYTES = 1 << 30
"""Models with more weights are reported ``too_large``, not converted: a ModelProto over 2 GiB cannot
be serialized in memory (the comparison here passes models as bytes; pt2x writes such weights as
external data to files), and three conversions of it at once pass a shared machine's memory."""


# ----------------------------------------------------------------------- the registry


def _hf_cfg(name: str):
    import transformers as tr

    small = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64)
    return {
        "bert": (tr.BertConfig, tr.BertModel, dict(vocab_size=128, **small), "tokens"),
        "roberta": (tr.RobertaConfig, tr.RobertaModel, dict(vocab_size=128, **small), "tokens"),
        "distilbert": (tr.DistilBertConfig, tr.DistilBertModel,
                       dict(vocab_size=128, dim=32, n_layers=2, n_heads=2, hidden_dim=64), "tokens"),
        "gpt2": (tr.GPT2Config, tr.GPT2Model, dict(vocab_size=128, n_embd=32, n_layer=2, n_head=2, use_cache=False),
                 "tokens"),
        "llama": (tr.LlamaConfig, tr.LlamaModel, dict(vocab_size=128, num_key_value_heads=1, use_cache=False,
                                                       max_position_embeddings=64, **small), "tokens"),
        "qwen2": (tr.Qwen2Config, tr.Qwen2Model, dict(vocab_size=128, num_key_value_heads=1, use_cache=False,
                                                       max_position_embeddings=64, **small), "tokens"),
        "mistral": (tr.MistralConfig, tr.MistralModel, dict(vocab_size=128, num_key_value_heads=1, use_cache=False,
                                                             max_position_embeddings=64, **small), "tokens"),
        "vit": (tr.ViTConfig, tr.ViTModel, dict(image_size=32, patch_size=8, **small), "image32"),
        "convnext": (tr.ConvNextConfig, tr.ConvNextModel,
                     dict(hidden_sizes=[8, 16, 32, 64], depths=[1, 1, 1, 1]), "image64"),
        "wav2vec2": (tr.Wav2Vec2Config, tr.Wav2Vec2Model,
                     dict(conv_dim=(16, 16, 16), conv_stride=(5, 4, 2), conv_kernel=(10, 4, 2),
                          num_conv_pos_embeddings=16, num_conv_pos_embedding_groups=4, **small), "audio"),
    }[name]


HF_ARCHS = ("bert", "roberta", "distilbert", "gpt2", "llama", "qwen2", "mistral", "vit", "convnext", "wav2vec2")


def registry() -> list[dict]:
    """Every spec with its family: timm's module, ``torchvision``, ``transformers``."""
    import timm
    import torchvision
    from timm.models import _registry

    out = [{"spec": f"timm:{n}", "family": "timm/" + _registry._model_to_module.get(n, "?")}
           for n in timm.list_models()]
    out += [{"spec": f"tv:{n}", "family": "torchvision"} for n in torchvision.models.list_models(torchvision.models)]
    out += [{"spec": f"hf:{n}", "family": "transformers"} for n in HF_ARCHS]
    return out


# ----------------------------------------------------------------------- building


def _timm(name: str, size: int | None) -> tuple[torch.nn.Module, tuple]:
    """At ``size`` (img_size where the model takes one), or at its default input size (None)."""
    import timm

    if size is not None:
        try:
            return timm.create_model(name, pretrained=False, img_size=size), (3, size, size)
        except Exception:  # noqa: BLE001 - no img_size argument: convolutional, any size it can reduce
            pass
    model = timm.create_model(name, pretrained=False)
    shape = tuple(model.pretrained_cfg.get("input_size", (3, 224, 224)))
    return model, shape if size is None else (shape[0], size, size)


def _tv(name: str, size: int | None) -> tuple[torch.nn.Module, tuple]:
    import torchvision

    size = size or 224
    kw = {"image_size": size} if name.startswith("vit_") else {}
    return torchvision.models.get_model(name, weights=None, **kw), (3, size, size)


class _FirstTensor(torch.nn.Module):
    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, x):
        return self.model(x)[0]


def _hf(name: str, size: int) -> tuple[torch.nn.Module, tuple]:
    cfg_cls, model_cls, kw, kind = _hf_cfg(name)
    model = _FirstTensor(model_cls(cfg_cls(**kw)))
    shape = {"tokens": ("tokens", 128, 16), "image32": (3, 32, 32), "image64": (3, 64, 64), "audio": (1600,)}[kind]
    return model, shape


def build(spec: str, size: int) -> tuple[torch.nn.Module, tuple]:
    lib, name = spec.split(":", 1)
    return {"timm": _timm, "tv": _tv, "hf": _hf}[lib](name, size)


def make_input(shape: tuple, batch: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(100 + batch)
    if shape[0] == "tokens":
        return torch.randint(0, shape[1], (batch, shape[2]), generator=g)
    return torch.randn(batch, *shape, generator=g)


def _first_tensor(out):
    """A classifier's logits, or the first tensor of whatever a model returns."""
    while not isinstance(out, torch.Tensor):
        out = out[0] if isinstance(out, (tuple, list)) else next(iter(out.values()))
    return out


# ----------------------------------------------------------------------- checking


def _ort(model_bytes: bytes, x: np.ndarray) -> np.ndarray:
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    sess = ort.InferenceSession(model_bytes, so, providers=["CPUExecutionProvider"])
    return sess.run(None, {sess.get_inputs()[0].name: x})[0]


def _litert(model_bytes: bytes) -> Callable[[np.ndarray], np.ndarray]:
    import tflite_zoo

    it = tflite_zoo.interpreter(model_bytes)
    return lambda x: tflite_zoo.run(it, [x])[0]


def _refused_ops(e: Exception) -> list[str]:
    ops = getattr(e, "ops", None)
    if ops:
        return sorted({f"{p.target}: {p.reasons[0][:120]}" if p.reasons else p.target for p in ops})
    return [f"{type(e).__name__}: {str(e).splitlines()[0][:160]}" if str(e) else type(e).__name__]


def _outcome(convert: Callable[[], bytes], run_with: Callable, refs: dict, scale: float, pt2x: bool) -> dict:
    from pt2x.serde.errors import Pt2Error

    t = time.perf_counter()
    try:
        model_bytes = convert()
    except Exception as e:  # noqa: BLE001 - the refusal is the outcome
        refused = isinstance(e, Pt2Error) if pt2x else True
        return {"outcome": "refused" if refused else "error", "ops": _refused_ops(e),
                "error": f"{type(e).__name__}: {str(e)[:300]}"}
    convert_s = round(time.perf_counter() - t, 2)
    worst = {}
    try:
        run = run_with(model_bytes)
        for b, (x, ref) in refs.items():
            got = run(x.numpy())
            assert_close(got, ref.numpy(), ref.dtype, what=f"batch {b}", scale=scale)
            worst[b] = float(np.abs(got.astype(np.float64) - ref.numpy()).max())
    except AssertionError as e:
        return {"outcome": "mismatch", "error": str(e)[:300], "convert_s": convert_s}
    except Exception as e:  # noqa: BLE001 - the runtime rejected the model
        return {"outcome": "error", "error": f"runtime: {type(e).__name__}: {str(e)[:300]}", "convert_s": convert_s}
    return {"outcome": "match", "convert_s": convert_s, "max_abs_diff": worst}


def _torch_onnx(ep) -> bytes:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return torch.onnx.export(ep, (), dynamo=True, verbose=False).model_proto.SerializeToString()


ANCHOR_MODES = ("always", "on-miss")
"""When torch.onnx runs: on every model, or only where pt2x missed (refused, failed or was wrong on
a target it ran): a model pt2x converts with parity on every target needs no anchor to compare with."""
ANCHOR_NOT_RUN = "not run (pt2x matched)"


def check(spec: str, *, size: int = DEFAULT_SIZE, targets=("onnx", "tflite", "torch_onnx"),
          workdir: str | None = None, anchor: str = "always") -> dict:
    """One spec: ``{"spec", "input", "export": ok|failed|degenerate, "onnx"/"tflite"/"torch_onnx": outcome,
    "anchor": ran|not run (pt2x matched)}``."""
    from torchfree import convert_torch_free

    result: dict = {"spec": spec}
    t = time.perf_counter()
    try:
        model, shape, ep = _exported(spec, size)
    except Exception as e:  # noqa: BLE001 - torch (or the library) cannot build or export it
        result.update(export="failed", error=f"{type(e).__name__}: {str(e)[:300]}")
        return result
    result["input"] = list(shape)
    result["export_s"] = round(time.perf_counter() - t, 2)
    nbytes = sum(p.numel() * p.element_size() for p in model.parameters())
    if nbytes > MAX_WEIGHT_BYTES:
        result.update(export="too_large", error=f"{nbytes / 2**30:.1f} GiB of weights")
        return result
    refs = {}
    with torch.no_grad():
        for b in BATCHES:
            x = make_input(shape, b)
            refs[b] = (x, model(x).float())
    spread = float(refs[max(BATCHES)][1].std(0).mean()) if max(BATCHES) > 1 else 1.0
    if not all(float(r.std()) > model_zoo.MIN_STD for _, r in refs.values()) or spread <= model_zoo.MIN_STD:
        result["export"] = "degenerate"  # an output that hardly depends on the input matches anything
        return result
    result["export"] = "ok"
    scale = 10.0 * MODEL_SCALE["float32"]
    with tempfile.TemporaryDirectory(dir=workdir) as d:
        path = os.path.join(d, "model.pt2")
        torch.export.save(ep, path)
        if "onnx" in targets:
            result["onnx"] = _outcome(lambda: convert_torch_free("to_onnx", path), _ort_runner, refs, scale, True)
        if "tflite" in targets:
            result["tflite"] = _outcome(lambda: convert_torch_free("to_tflite", path), _litert, refs,
                                        scale * TFLITE_SCALE["float32"], True)
        if "torch_onnx" in targets:
            if anchor == "always" or not _pt2x_matched(result, targets):
                result["anchor"] = "ran"
                result["torch_onnx"] = _outcome(lambda: _torch_onnx(ep), _ort_runner, refs, scale, False)
            else:
                result["anchor"] = ANCHOR_NOT_RUN
    _judge_mismatches(result, model, refs, scale)
    return result


def _judge_mismatches(result: dict, model, refs: dict, scale: float) -> None:
    """Where a conversion missed eager, ask whether eager itself is stable: when float32 eager is
    off float64 eager by more than the same tolerance, float32 rounding alone decides the output
    (a random-init model with huge logits), so no float32 conversion can be judged by it. Such a
    miss is ``ill_conditioned`` (the record says by how much), not ``mismatch``."""
    missed = [t for t in TARGET_NAMES if result.get(t, {}).get("outcome") == "mismatch"]
    if not missed:
        return
    # the batch each miss names ("batch 3: ..."), else the first: float32 eager judged where it was missed
    batches = {int(m.group(1)) for t in missed
               if (m := re.match(r"batch (\d+):", result[t].get("error", ""))) and int(m.group(1)) in refs}
    for b in sorted(batches or {min(refs)}):
        if not _eager_stable(result, missed, model, refs[b], scale):
            return


def _eager_stable(result: dict, missed: list[str], model, x_ref, scale: float) -> bool:
    """False (and the misses marked) where float32 eager is off float64 eager on this batch."""
    x, ref = x_ref
    try:
        with torch.no_grad():
            exact = model.double()(x.double()).double()
        assert_close(ref.numpy(), exact.numpy(), ref.dtype, what="float32 eager vs float64 eager", scale=scale)
    except AssertionError as e:
        result["reference"] = f"ill-conditioned at batch {x.shape[0]}: " + str(e)[:200]
        for t in missed:
            result[t]["outcome"] = "ill_conditioned"
        return False
    except Exception as e:  # noqa: BLE001 - no float64 forward: the mismatch stands
        result["reference"] = f"float64 eager failed: {type(e).__name__}: {str(e)[:160]}"
        return False
    return True


TARGET_NAMES = ("onnx", "tflite", "torch_onnx")


def _pt2x_matched(result: dict, targets) -> bool:
    """Every pt2x target asked for matched (so the anchor has nothing to decide)."""
    return all(result[t]["outcome"] == "match" for t in ("onnx", "tflite") if t in targets)


def _exported(spec: str, size: int):
    """(model, input shape, exported program) at ``size``, else at the model's default size."""
    try:
        return _exported_at(spec, size)
    except Exception:  # noqa: BLE001 - too small for it (a window, a stride): its own size next
        if spec.startswith("hf:"):
            raise
        return _exported_at(spec, None)


def _exported_at(spec: str, size: int | None):
    torch.manual_seed(0)
    model, shape = build(spec, size)
    model = _Wrapped(model)
    model = model_zoo.redraw(model, seed=0, calibrate=make_input(shape, 8) if shape[0] != "tokens" else None)
    batch = torch.export.Dim("batch", min=1, max=8)
    return model, shape, torch.export.export(model, (make_input(shape, 2),), dynamic_shapes=({0: batch},), strict=False)


def param_count(spec: str) -> int:
    """Parameters (and buffers) of the model at its default configuration, built on the meta device
    (no weights allocated, nothing initialised)."""
    with torch.device("meta"):
        model, _ = build(spec, None)
    return sum(t.numel() for t in [*model.parameters(), *model.buffers()])


def _ort_runner(model_bytes: bytes) -> Callable[[np.ndarray], np.ndarray]:
    return lambda x: _ort(model_bytes, x)


class _Wrapped(torch.nn.Module):
    """One float tensor out, whatever the model returns (logits, a ModelOutput, a tuple)."""

    def __init__(self, model):
        super().__init__()
        self.model = model.eval()

    def forward(self, x):
        return _first_tensor(self.model(x))


def main(argv: list[str]) -> int:
    torch.set_num_threads(1)
    if argv[0] == "list":
        print(json.dumps(registry()))
        return 0
    if argv[0] == "params":  # one JSON line per spec on stdin, as each is counted
        for spec in sys.stdin.read().split():
            try:
                print(json.dumps({"spec": spec, "params": param_count(spec)}), flush=True)
            except Exception as e:  # noqa: BLE001 - a model that cannot be built on meta: size unknown
                print(json.dumps({"spec": spec, "params": None, "error": f"{type(e).__name__}: {str(e)[:200]}"}),
                      flush=True)
        return 0
    spec, rest = argv[1], argv[2:]
    anchor = rest[rest.index("--anchor") + 1] if "--anchor" in rest else "always"
    size = int(rest[rest.index("--size") + 1]) if "--size" in rest else DEFAULT_SIZE
    targets = tuple(rest[rest.index("--targets") + 1].split(",")) if "--targets" in rest else ("onnx", "tflite",
                                                                                               "torch_onnx")
    print(json.dumps(check(spec, size=size, targets=targets, anchor=anchor)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
