"""Benchmark: pt2x's int8 .tflite of a PT2E-quantized program vs pt2x's float .tflite of the same
model in LiteRT, and pt2x's QDQ ONNX vs torch.onnx's in ONNX Runtime.

Not a test. Each side runs in its own process:

  * build (torch): torchvision ``resnet18`` / ``mobilenet_v2`` (random weights, seeded), exported
    with a dynamic batch; quantized with torchao's PT2E flow as ``tests/support/pt2e.py`` does
    (``--quantizer xnnpack``: int8 symmetric per-channel weights, int8 activations; or ``x86``),
    calibrated on seeded random data; both saved with ``torch.export.save``; torch.onnx's QDQ
    export of the quantized program (``torch.onnx.export(ep, dynamo=True)``); one input batch.
  * convert (``import torch`` fails): ``pt2x convert --to tflite`` of the float and of the
    quantized program, ``pt2x convert --to onnx`` of the quantized one.
  * run: one process per file and thread count: LiteRT (XNNPACK as shipped) or ONNX Runtime
    (all optimizations), median latency of ``--runs`` invokes after ``--warmup``.

    python tools/scripts/bench_quantized.py [--models resnet18,mobilenet_v2] [--size 224]
        [--threads 1,2] [--quantizer xnnpack] [--out bench-out/quantized] [--json results.json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the repository

BUILD = r"""
import json, os, sys
import numpy as np, torch
sys.path.insert(0, os.path.join(sys.argv[1], "tests", "support"))
import pt2e
from torch.export import Dim
out, names, size, quantizer = sys.argv[2], sys.argv[3].split(","), int(sys.argv[4]), sys.argv[5]
from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e
for name in names:
    torch.manual_seed(0)
    model = pt2e._torchvision(name).eval()
    pt2e._redraw_batchnorm(model, seed=1)  # fresh statistics make the folded BatchNorm an identity
    shape = (3, size, size)
    ex = (torch.randn(2, *shape),)
    dyn = ({0: Dim("batch", min=1, max=8)},)
    with torch.no_grad():
        ep = torch.export.export(model, ex, dynamic_shapes=dyn)
        torch.export.save(ep, f"{out}/{name}_float.pt2")
        prepared = prepare_pt2e(ep.module(), pt2e.make_quantizer(quantizer))
        g = torch.Generator().manual_seed(100)
        for _ in range(2):
            prepared(torch.randn(2, *shape, generator=g))
        q = convert_pt2e(prepared)
        qep = torch.export.export(q, ex, dynamic_shapes=dyn)
        torch.export.save(qep, f"{out}/{name}_int8.pt2")
        torch.onnx.export(qep, f=f"{out}/{name}_torch_onnx.onnx", dynamo=True)
        x = torch.randn(1, *shape, generator=torch.Generator().manual_seed(7))
        np.save(f"{out}/{name}_x.npy", x.numpy())
        np.save(f"{out}/{name}_eager.npy", q(x).numpy())
    print(json.dumps({"model": name}), flush=True)
"""

RUN = r"""
import json, statistics, sys, time
import numpy as np
path, threads, runs, warmup, x_path = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
x = np.load(x_path)
if path.endswith(".tflite"):
    from ai_edge_litert.interpreter import Interpreter
    it = Interpreter(model_path=path, num_threads=threads)
    it.allocate_tensors()
    i, o = it.get_input_details()[0]["index"], it.get_output_details()[0]["index"]
    def call():
        it.set_tensor(i, x); it.invoke(); return it.get_tensor(o)
else:
    import onnxruntime as ort
    so = ort.SessionOptions(); so.intra_op_num_threads = threads; so.inter_op_num_threads = 1
    sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    name = sess.get_inputs()[0].name
    def call():
        return sess.run(None, {name: x})[0]
for _ in range(warmup):
    y = call()
times = []
for _ in range(runs):
    t = time.perf_counter(); y = call(); times.append(time.perf_counter() - t)
np.save(path + ".out.npy", y)
print(json.dumps({"ms": 1000 * statistics.median(times)}))
"""


def _child(argv: list[str], timeout: float = 1800) -> subprocess.CompletedProcess:
    r = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, cwd=ROOT)
    if r.returncode:
        raise SystemExit(f"{' '.join(argv[:4])}... exited {r.returncode}:\n{r.stderr[-2000:]}")
    return r


def _convert(src: str, dst: str, to: str) -> list[str]:
    """``pt2x convert`` where ``import torch`` fails; its printed lines."""
    code = ("import sys; sys.modules['torch'] = None\n"
            "from pt2x.tools.cli import main; sys.exit(main(sys.argv[1:]))")
    r = _child([sys.executable, "-c", code, "convert", src, "--to", to, "-o", dst])
    return r.stdout.strip().splitlines()


def _latency(path: str, threads: int, args, x: str) -> float:
    r = _child([sys.executable, "-c", RUN, path, str(threads), str(args.runs), str(args.warmup), x])
    return json.loads(r.stdout.strip().splitlines()[-1])["ms"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="resnet18,mobilenet_v2")
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--quantizer", default="xnnpack", choices=("xnnpack", "x86"))
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--out", default=os.path.join("bench-out", "quantized"))
    ap.add_argument("--json")
    args = ap.parse_args()
    out = os.path.abspath(args.out)
    os.makedirs(out, exist_ok=True)
    names = args.models.split(",")
    _child([sys.executable, "-c", BUILD, ROOT, out, ",".join(names), str(args.size), args.quantizer])
    rows = []
    import numpy as np

    for name in names:
        base = os.path.join(out, name)
        report = _convert(base + "_int8.pt2", base + "_int8.tflite", "tflite")
        _convert(base + "_float.pt2", base + "_float.tflite", "tflite")
        _convert(base + "_int8.pt2", base + "_pt2x_qdq.onnx", "onnx")
        x, eager = base + "_x.npy", np.load(base + "_eager.npy")
        row = {"model": name, "size": args.size, "quantizer": args.quantizer, "int8_report": report[1:]}
        for kind, path in (("tflite_int8", "_int8.tflite"), ("tflite_float", "_float.tflite"),
                           ("onnx_pt2x_qdq", "_pt2x_qdq.onnx"), ("onnx_torch_qdq", "_torch_onnx.onnx")):
            row[kind] = {t: _latency(base + path, int(t), args, x) for t in args.threads.split(",")}
            if kind != "tflite_float":
                row[kind]["max_abs_vs_eager"] = float(np.abs(np.load(base + path + ".out.npy") - eager).max())
        row["size_bytes"] = {k: os.path.getsize(base + p) for k, p in (("int8", "_int8.tflite"), ("float", "_float.tflite"))}
        rows.append(row)
        print(json.dumps(row), flush=True)
    _table(rows, args.threads.split(","))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores",
                       "rows": rows}, f, indent=1)


def _table(rows: list[dict], threads: list[str]) -> None:
    print("| model | threads | LiteRT int8 ms | LiteRT float ms | float/int8 | ORT pt2x QDQ ms | ORT torch.onnx QDQ ms |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        for t in threads:
            i8, f32 = r["tflite_int8"][t], r["tflite_float"][t]
            print(f"| {r['model']} {r['size']}x{r['size']} | {t} | {i8:.1f} | {f32:.1f} | {f32 / i8:.2f}x | "
                  f"{r['onnx_pt2x_qdq'][t]:.1f} | {r['onnx_torch_qdq'][t]:.1f} |")


if __name__ == "__main__":
    main()
