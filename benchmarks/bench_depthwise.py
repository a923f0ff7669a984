"""Benchmark: a depthwise convolution in LiteRT with XNNPACK, its kernel whole against split into
parts of at most 25 taps (``converters/tflite/ops/depthwise_split.py``), with ONNX Runtime on pt2x's
ONNX of the same program as the anchor.

Not a test. Each program is one depthwise conv of k x k, SAME, stride 1, over an NHWC input
(permuted to NCHW and back inside the program, so the file has no TRANSPOSE), exported by
torch and converted by pt2x three ways: TFLite as pt2x writes it (split), TFLite with the split
turned off in the converting process (whole, the file before the split existed) and ONNX. Each
file is timed in its own process at 1 thread (``--runs`` invocations after 10 warm-ups,
median), the three sides alternating for ``--rounds`` rounds; the medians of the rounds and
their ratios are printed.

    python -m benchmarks.bench_depthwise [--kernels 3,5,7,9] [--channels 32,96] [--size 64] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

EXPORT = r"""
import sys, numpy as np, torch
k, c, size, out = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
torch.manual_seed(0)
conv = torch.nn.Conv2d(c, c, k, padding=k // 2, groups=c).eval()
class M(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = conv
    def forward(self, x):
        return self.conv(x.permute(0, 3, 1, 2)).permute(0, 2, 3, 1)
x = torch.randn(1, size, size, c)
torch.export.save(torch.export.export(M(), (x,)), out + ".pt2")
np.save(out + "_x.npy", x.numpy())
with torch.no_grad():
    np.save(out + "_ref.npy", M()(x).numpy())
"""

CONVERT = r"""
import sys
from pt2x.converters import to_onnx, to_tflite
from pt2x.converters.tflite.ops import depthwise_split
src, out, how = sys.argv[1:4]
if how == "onnx":
    to_onnx(src, out)
else:
    if how == "whole":
        depthwise_split.plan = lambda kh, kw: None  # the file as it was before the split
    to_tflite(src, out)
"""

TIME = r"""
import json, sys, time, numpy as np
path, xp, refp, runs = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
x, ref = np.load(xp), np.load(refp)
if path.endswith(".tflite"):
    from ai_edge_litert.interpreter import Interpreter
    it = Interpreter(model_path=path, num_threads=1)
    it.allocate_tensors()
    i, o = it.get_input_details()[0]["index"], it.get_output_details()[0]["index"]
    def run():
        it.set_tensor(i, x); it.invoke(); return it.get_tensor(o)
else:
    import onnxruntime as ort
    so = ort.SessionOptions(); so.intra_op_num_threads = 1; so.inter_op_num_threads = 1
    s = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    name = s.get_inputs()[0].name
    def run():
        return s.run(None, {name: x})[0]
y = run()
for _ in range(10):
    run()
ts = []
for _ in range(runs):
    t = time.perf_counter(); run(); ts.append(time.perf_counter() - t)
print(json.dumps({"ms": 1000 * float(np.median(ts)),
                  "diff": float(np.abs(y - ref).max())}))
"""


def _run(code: str, *args) -> str:
    r = subprocess.run([sys.executable, "-c", code, *map(str, args)], capture_output=True, text=True, cwd=ROOT)
    if r.returncode:
        raise SystemExit(f"child failed: {r.stderr.strip().splitlines()[-1:]}")
    return r.stdout


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kernels", default="3,5,7,9")
    ap.add_argument("--channels", default="32,96")
    ap.add_argument("--size", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--runs", type=int, default=100)
    a = ap.parse_args(argv)
    print(f"# {platform.node()} {platform.processor() or platform.machine()}, {os.cpu_count()} cpus, "
          f"load {os.getloadavg()[0]:.1f}; LiteRT with XNNPACK and ONNX Runtime at 1 thread; ms, median of rounds")
    print("kernel  channels  whole    split    ORT      whole/split  split/ORT  max diff (split)")
    with tempfile.TemporaryDirectory() as d:
        for k in map(int, a.kernels.split(",")):
            for c in map(int, a.channels.split(",")):
                base = os.path.join(d, f"dw{k}_{c}")
                _run(EXPORT, k, c, a.size, base)
                files = {"whole": base + "_whole.tflite", "split": base + "_split.tflite", "ort": base + ".onnx"}
                for how, path in files.items():
                    _run(CONVERT, base + ".pt2", path, "onnx" if how == "ort" else how)
                ms: dict[str, list[float]] = {h: [] for h in files}
                diff = 0.0
                for _ in range(a.rounds):
                    for how, path in files.items():
                        r = json.loads(_run(TIME, path, base + "_x.npy", base + "_ref.npy", a.runs).splitlines()[-1])
                        ms[how].append(r["ms"])
                        diff = max(diff, r["diff"]) if how == "split" else diff
                w, s, o = (statistics.median(ms[h]) for h in ("whole", "split", "ort"))
                print(f"{k}x{k}     {c:<8}  {w:<7.3f}  {s:<7.3f}  {o:<7.3f}  {w / s:<11.2f}  {s / o:<9.2f}  {diff:.1e}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
