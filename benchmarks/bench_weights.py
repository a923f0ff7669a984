"""Size, accuracy and latency of the weight-only options (``--weights fp16|int8``) on a few
real architectures with random weights (no downloads): torchvision resnet18 and mobilenet_v2 at
224x224, and a BERT of tiny configuration (transformers, 2 layers, hidden 128, vocab 30,522,
64 tokens). Per model: export with a dynamic batch, ``torch.export.save``, convert with pt2x to
ONNX and to TFLite as float32, fp16 and int8, run each file at batch 1 (ONNX Runtime CPU;
LiteRT with XNNPACK as shipped), one thread each, and compare with the float32 file and with
torch eager. The three files of a format are timed in turn, run by run (the best of ``--runs``). Prints a Markdown table (the one in docs/quantization.md) and writes JSON.

    python -m benchmarks.bench_weights [--models resnet18,mobilenet_v2,bert_tiny] [--runs 20]
                                          [--out bench-weights.json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time

import numpy as np
import torch

from scripts.environment import ensure_support

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the repository

OPTIONS = (None, "fp16", "int8")


def redraw(model, **kw):
    """The model zoo's weight re-draw (tests/support/model_zoo.py; see ``main``)."""
    import model_zoo

    return model_zoo.redraw(model, **kw)


def register_torchvision_ops() -> None:
    from torchvision_ops import register_torchvision_ops as register  # tests/support

    register()


def _torchvision(name: str):
    def build():
        register_torchvision_ops()
        import torchvision

        x = torch.randn(1, 3, 224, 224, generator=torch.Generator().manual_seed(1))
        return redraw(getattr(torchvision.models, name)(weights=None), calibrate=torch.randn(4, 3, 224, 224)), x
    return build


def _bert_tiny():
    import transformers as tr

    class LastHidden(torch.nn.Module):
        def __init__(self, m):
            super().__init__()
            self.m = m

        def forward(self, ids):
            return self.m(input_ids=ids).last_hidden_state

    cfg = tr.BertConfig(hidden_size=128, num_hidden_layers=2, num_attention_heads=2, intermediate_size=512)
    ids = torch.randint(0, cfg.vocab_size, (1, 64), generator=torch.Generator().manual_seed(1))
    return redraw(LastHidden(tr.BertModel(cfg))), ids


MODELS = {"resnet18": _torchvision("resnet18"), "mobilenet_v2": _torchvision("mobilenet_v2"), "bert_tiny": _bert_tiny}


def _export(model, x, path: str) -> None:
    batch = torch.export.Dim("batch", min=1, max=8)
    example = torch.cat([x, x])  # batch 2 to export: torch specialises a dimension of size 1
    ep = torch.export.export(model, (example,), dynamic_shapes=({0: batch},))
    torch.export.save(ep, path)


def _best_ms(fns: list, runs: int) -> list[float]:
    """The fastest of ``runs`` calls of each function in milliseconds, the functions run in turn
    (round robin): on a shared machine the best time is the one least disturbed by other work."""
    times = [[] for _ in fns]
    for _ in range(runs):
        for fn, ts in zip(fns, times):
            t = time.perf_counter()
            fn()
            ts.append((time.perf_counter() - t) * 1e3)
    return [min(ts) for ts in times]


def _run_onnx(data: bytes, x: np.ndarray):
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = so.inter_op_num_threads = 1
    sess = ort.InferenceSession(data, so, providers=["CPUExecutionProvider"])
    feed = {sess.get_inputs()[0].name: x}
    return sess.run(None, feed)[0], lambda: sess.run(None, feed)


def _run_tflite(data: bytes, x: np.ndarray):
    from ai_edge_litert.interpreter import Interpreter

    it = Interpreter(model_content=data, num_threads=1)
    d = it.get_input_details()[0]
    it.resize_tensor_input(d["index"], list(x.shape), strict=True)
    it.allocate_tensors()
    it.set_tensor(d["index"], x.astype(d["dtype"]))
    it.invoke()
    out = it.get_tensor(it.get_output_details()[0]["index"])
    return out, it.invoke


def _diff(a: np.ndarray, b: np.ndarray) -> dict:
    d = np.abs(a.astype(np.float64) - b)
    return {"max": float(d.max()), "mean": float(d.mean())}


def measure(name: str, runs: int, workdir: str) -> list[dict]:
    from pt2x.converters import to_onnx, to_tflite

    torch.manual_seed(0)
    model, x = MODELS[name]()
    model.eval()
    with torch.no_grad():
        eager = model(x).numpy()
    path = os.path.join(workdir, f"{name}.pt2")
    _export(model, x, path)
    rows = []
    for target, convert, runner in (("onnx", lambda o: to_onnx(path, weights=o).SerializeToString(), _run_onnx),
                                    ("tflite", lambda o: to_tflite(path, weights=o), _run_tflite)):
        files = [convert(option) for option in OPTIONS]
        ran = [runner(data, x.numpy()) for data in files]
        times = _best_ms([invoke for _, invoke in ran], runs)
        (float_out, _), float_size = ran[0], len(files[0])
        for option, data, (out, _), ms in zip(OPTIONS, files, ran, times):
            rows.append({"model": name, "target": target, "weights": option or "float32", "bytes": len(data),
                         "size_ratio": len(data) / float_size, "vs_float": _diff(out, float_out),
                         "vs_eager": _diff(out, eager), "eager_max_abs": float(np.abs(eager).max()), "ms_1thread": ms})
            print(json.dumps(rows[-1]), file=sys.stderr)
        del ran
    return rows


def table(rows: list[dict]) -> str:
    head = ("| model | format | weights | size (MB) | size ratio | max / mean abs diff vs float32 file "
            "| max / mean abs diff vs eager | eager max abs | best ms, 1 thread |\n|---|---|---|---|---|---|---|---|---|")
    lines = [head]
    for r in rows:
        lines.append(f"| {r['model']} | {r['target']} | {r['weights']} | {r['bytes'] / 1e6:.2f} | {r['size_ratio']:.3f} "
                     f"| {r['vs_float']['max']:.2e} / {r['vs_float']['mean']:.2e} "
                     f"| {r['vs_eager']['max']:.2e} / {r['vs_eager']['mean']:.2e} | {r['eager_max_abs']:.3g} "
                     f"| {r['ms_1thread']:.1f} |")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--out", default="bench-weights.json")
    args = ap.parse_args(argv)
    ensure_support("benchmarks.bench_weights")  # the model zoo (tests/support) on PYTHONPATH
    rows = []
    with tempfile.TemporaryDirectory() as workdir:
        for name in args.models.split(","):
            rows += measure(name, args.runs, workdir)
    meta = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "machine": platform.platform(),
            "cpu_count": os.cpu_count(), "torch": torch.__version__}
    with open(args.out, "w") as f:
        json.dump({"meta": meta, "rows": rows}, f, indent=1)
    print(json.dumps(meta))
    print(table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
