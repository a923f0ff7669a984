"""Benchmark: ``pt2x convert`` vs ``torch.onnx.export(ep, dynamo=True)`` from the same .pt2.

Not a test. For each model the parent exports with torch and saves a .pt2; then each side
runs in its own subprocess:
  * conversion time in process (after imports, one warm-up, median of several runs);
  * conversion as a whole cold process (``python -c`` that imports, loads and writes);
  * ONNX node count of the written model;
  * ONNX Runtime CPU median latency of both models on the same inputs, interleaved in one
    subprocess, at 1 and at 2 intra-op threads.
Ratios are torch/pt2x for times (higher is better for pt2x), pt2x/torch for nodes and
latency (<= 1.0 is the goal).

    python -m benchmarks.bench_onnx [--models mlp,convbn,resnet,enc6,enc12,gpt2,bert] [--out bench-out/onnx]

CNNs (``convbn``: a conv-bn-relu stack with a depthwise stage; ``resnet``: resnet-like basic
blocks with downsampling shortcuts) are built from torch.nn, with BatchNorm statistics re-drawn.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

MODELS = ("mlp", "convbn", "resnet", "enc6", "enc12", "gpt2", "bert")


def _cnn(name):
    """A conv-bn-relu stack (``convbn``) or resnet-like basic blocks (``resnet``), eval mode,
    with BatchNorm statistics and affine parameters re-drawn so the BNs do something."""
    import torch
    from torch import nn

    def cbr(cin, cout, stride=1, groups=1, relu=True):
        layers = [nn.Conv2d(cin, cout, 3, stride, 1, groups=groups, bias=False), nn.BatchNorm2d(cout)]
        return nn.Sequential(*layers, *([nn.ReLU()] if relu else []))

    class Block(nn.Module):
        def __init__(self, cin, cout, stride):
            super().__init__()
            self.body = nn.Sequential(cbr(cin, cout, stride), cbr(cout, cout, relu=False))
            self.short = (nn.Identity() if stride == 1 and cin == cout else
                          nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout)))

        def forward(self, x):
            return torch.relu(self.body(x) + self.short(x))

    if name == "convbn":
        m = nn.Sequential(cbr(3, 32, 2), cbr(32, 32, groups=32), cbr(32, 64), cbr(64, 64, 2, groups=64),
                          cbr(64, 128), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(128, 10))
    else:
        m = nn.Sequential(cbr(3, 32, 2), Block(32, 32, 1), Block(32, 64, 2), Block(64, 64, 1), Block(64, 128, 2),
                          nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(128, 10))
    for mod in m.modules():
        if isinstance(mod, nn.BatchNorm2d):
            with torch.no_grad():
                mod.running_mean.normal_(0, 0.5)
                mod.running_var.uniform_(0.5, 2.0)
                mod.weight.uniform_(0.5, 1.5)
                mod.bias.normal_(0, 0.2)
    return m

PT2X_INPROC = r"""
import json, statistics, sys, time
t0 = time.perf_counter()
from pt2x.converters import to_onnx
from pt2x.converters.onnx import converter
converter._load_lowerings()
t_import = time.perf_counter() - t0
src, dst, runs = sys.argv[1], sys.argv[2], int(sys.argv[3])
to_onnx(src)  # warm-up
times = []
for _ in range(runs):
    t = time.perf_counter(); m = to_onnx(src); times.append(time.perf_counter() - t)
converter.save(m, dst)
print(json.dumps({"import_s": t_import, "convert_s": statistics.median(times), "nodes": len(m.graph.node)}))
"""

TORCH_INPROC = r"""
import json, statistics, sys, time, warnings, logging
warnings.filterwarnings("ignore"); logging.disable(logging.WARNING)
t0 = time.perf_counter()
import torch
t_import = time.perf_counter() - t0
src, dst, runs = sys.argv[1], sys.argv[2], int(sys.argv[3])
def convert():
    ep = torch.export.load(src)
    return torch.onnx.export(ep, (), dynamo=True, verbose=False)
convert()  # warm-up
times = []
for _ in range(runs):
    t = time.perf_counter(); prog = convert(); times.append(time.perf_counter() - t)
prog.save(dst)
import onnx
m = onnx.load(dst)
print(json.dumps({"import_s": t_import, "convert_s": statistics.median(times), "nodes": len(m.graph.node)}))
"""

PT2X_COLD = "import sys; from pt2x.converters import to_onnx; to_onnx(sys.argv[1], sys.argv[2])"
TORCH_COLD = ("import sys, warnings; warnings.filterwarnings('ignore'); import torch; "
              "torch.onnx.export(torch.export.load(sys.argv[1]), (), dynamo=True).save(sys.argv[2])")

LATENCY = r"""
import json, statistics, sys, time
import numpy as np, onnxruntime as ort
paths, inputs, runs, threads = json.loads(sys.argv[1]), np.load(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
feeds_list = [inputs[k] for k in sorted(inputs.files)]
sessions, results, ts = {}, {}, {}
for side, path in paths.items():
    so = ort.SessionOptions(); so.log_severity_level = 3; so.intra_op_num_threads = threads
    s = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    sessions[side] = (s, {i.name: a for i, a in zip(s.get_inputs(), feeds_list)})
    ts[side] = []
for _ in range(10):  # warm both
    for side, (s, feeds) in sessions.items():
        results[side] = s.run(None, feeds)[0]
for i in range(runs):  # interleaved, alternating which side goes first
    order = list(sessions) if i % 2 == 0 else list(reversed(sessions))
    for side in order:
        s, feeds = sessions[side]
        t = time.perf_counter(); s.run(None, feeds); ts[side].append(time.perf_counter() - t)
out = {side: statistics.median(v) for side, v in ts.items()}
out["max_abs_diff"] = float(np.max(np.abs(results["pt2x"].astype(np.float64) - results["torch"].astype(np.float64))))
print(json.dumps(out))
"""


def build(name):
    """(module, example args, dynamic_shapes) — random init, no downloads."""
    import torch
    from torch.export import Dim

    torch.manual_seed(0)
    batch = Dim("batch", min=1, max=64)
    if name == "mlp":
        m = torch.nn.Sequential(torch.nn.Linear(256, 1024), torch.nn.GELU(), torch.nn.Linear(1024, 1024),
                                torch.nn.GELU(), torch.nn.Linear(1024, 10))
        return m, (torch.randn(8, 256),), ({0: batch},)
    if name in ("convbn", "resnet"):
        return _cnn(name), (torch.randn(4, 3, 64, 64),), ({0: batch},)
    if name in ("enc6", "enc12"):
        layer = torch.nn.TransformerEncoderLayer(256, 8, 1024, dropout=0.0, batch_first=True)
        m = torch.nn.TransformerEncoder(layer, 6 if name == "enc6" else 12, enable_nested_tensor=False)
        return m, (torch.randn(4, 32, 256),), ({0: batch},)
    _register_torchvision_ops()  # transformers imports torchvision whenever it is installed
    import transformers as t

    class Wrap(torch.nn.Module):
        def __init__(self, model, key):
            super().__init__()
            self.model, self.key = model, key

        def forward(self, ids):
            return getattr(self.model(ids), self.key)

    if name == "gpt2":
        cfg = t.GPT2Config(vocab_size=1000, n_embd=128, n_layer=4, n_head=4, n_positions=128, use_cache=False)
        m = Wrap(t.GPT2LMHeadModel(cfg), "logits")
    else:
        cfg = t.BertConfig(vocab_size=1000, hidden_size=128, num_hidden_layers=4, num_attention_heads=4,
                           intermediate_size=512, max_position_embeddings=128)
        m = Wrap(t.BertModel(cfg), "last_hidden_state")
    return m, (torch.randint(0, 1000, (2, 32)),), {"ids": {0: batch}}


def _run(code, *args, timeout=900):
    r = subprocess.run([sys.executable, "-c", code, *map(str, args)], capture_output=True, text=True, timeout=timeout)
    if r.returncode:
        raise RuntimeError(f"subprocess failed:\n{r.stderr[-3000:]}")
    return r


def _cold(code, src, dst, repeat):
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        _run(code, src, dst)
        times.append(time.perf_counter() - t)
    return statistics.median(times)


# ORT intra-op threads the latency is measured at: 1 is steady on a shared machine; 2 is what
# ORT picks by default on this 2-core box (its spinning threads make it the noisier figure).
THREADS = (1, 2)


def bench(name, out, runs_pt2x=20, runs_torch=3, cold_pt2x=3, cold_torch=1, latency_runs=200):
    import numpy as np
    import torch

    m, args, dyn = build(name)
    ep = torch.export.export(m.eval(), args, dynamic_shapes=dyn)
    src = os.path.join(out, f"{name}.pt2")
    torch.export.save(ep, src)
    np.savez(os.path.join(out, f"{name}_inputs.npz"), **{f"a{i}": a.numpy() for i, a in enumerate(args)})
    paths = {"pt2x": os.path.join(out, f"{name}.pt2x.onnx"), "torch": os.path.join(out, f"{name}.torch.onnx")}
    p = json.loads(_run(PT2X_INPROC, src, paths["pt2x"], runs_pt2x).stdout.strip().splitlines()[-1])
    t = json.loads(_run(TORCH_INPROC, src, paths["torch"], runs_torch).stdout.strip().splitlines()[-1])
    p["cold_s"] = _cold(PT2X_COLD, src, paths["pt2x"] + ".cold", cold_pt2x)
    t["cold_s"] = _cold(TORCH_COLD, src, paths["torch"] + ".cold", cold_torch)
    lat = {n: json.loads(_run(LATENCY, json.dumps(paths), os.path.join(out, f"{name}_inputs.npz"), latency_runs, n)
                         .stdout.strip().splitlines()[-1]) for n in THREADS}
    return {"model": name, "pt2x": p, "torch": t, "latency": lat}


def table(rows):
    lat_head = " | ".join(f"ORT ms pt2x / torch ({n}t) | ratio ({n}t)" for n in THREADS)
    head = (f"| model | convert pt2x | convert torch | × | cold pt2x | cold torch | × | nodes pt2x / torch "
            f"| {lat_head} | max abs diff |")
    lines = [head, "|" + "---|" * (9 + 2 * len(THREADS))]
    for r in rows:
        p, t, lat = r["pt2x"], r["torch"], r["latency"]
        lat_cells = " | ".join(f"{lat[n]['pt2x'] * 1e3:.3f} / {lat[n]['torch'] * 1e3:.3f} "
                               f"| {lat[n]['pt2x'] / lat[n]['torch']:.2f}" for n in THREADS)
        lines.append(
            f"| {r['model']} | {p['convert_s'] * 1e3:.1f} ms | {t['convert_s'] * 1e3:.0f} ms "
            f"| {t['convert_s'] / p['convert_s']:.0f}× | {p['cold_s']:.2f} s | {t['cold_s']:.2f} s "
            f"| {t['cold_s'] / p['cold_s']:.1f}× | {p['nodes']} / {t['nodes']} "
            f"| {lat_cells} | {lat[THREADS[0]]['max_abs_diff']:.1e} |")
    return "\n".join(lines)



def _register_torchvision_ops() -> None:
    """torchvision (the test extra's, a CUDA build) fails to import next to the CPU torch unless
    its ``nms`` is defined first; the definition lives in tests/support/torchvision_ops.py,
    loaded here by path."""
    import importlib.util

    path = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests", "support",
                        "torchvision_ops.py")
    if importlib.util.find_spec("torchvision") is None or not os.path.exists(path):
        return
    spec = importlib.util.spec_from_file_location("torchvision_ops", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.register_torchvision_ops()


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--out", default="bench-out/onnx")
    ap.add_argument("--json", default=None, help="also write the raw results here")
    a = ap.parse_args(argv)
    os.makedirs(a.out, exist_ok=True)
    rows = []
    for name in a.models.split(","):
        rows.append(bench(name, a.out))
        print(table(rows[-1:]).splitlines()[-1], flush=True)
    import onnxruntime
    import platform

    print(f"\n{time.strftime('%Y-%m-%d')}, {os.cpu_count()}-core {platform.machine()}, Python {platform.python_version()}, "
          f"onnxruntime {onnxruntime.__version__}\n")
    print(table(rows))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
