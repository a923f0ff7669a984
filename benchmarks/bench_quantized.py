"""Benchmark: pt2x's int8 .tflite of a PT2E-quantized program vs pt2x's float .tflite of the same
model and litert-torch's int8 .tflite of the same quantized module in LiteRT, and pt2x's QDQ ONNX
vs torch.onnx's in ONNX Runtime.

Not a test. Each side runs in its own process:

  * build (torch): torchvision ``resnet18`` / ``mobilenet_v2`` (random weights, seeded), exported
    with a dynamic batch; quantized with torchao's PT2E flow as ``tests/support/pt2e.py`` does
    (``--quantizer xnnpack``: int8 symmetric per-channel weights, int8 activations; or ``x86``),
    calibrated on seeded random data; both saved with ``torch.export.save``; torch.onnx's QDQ
    export of the quantized program (``torch.onnx.export(ep, dynamo=True)``); one input batch.
    The same calibrated module converted with ``fold_quantize=False`` (weights quantized in the
    graph: the form litert-torch takes; the same numbers) is saved beside it.
  * litert-torch 0.10.0 (its own venv, as ``bench_tflite.py`` makes it; ``--skip-litert-torch``):
    ``litert_torch.convert`` of that module at the example batch (1), told the program is
    statically quantized; its file reads and writes int8, which the run quantizes/dequantizes
    with the file's own parameters.
  * convert (``import torch`` fails): ``pt2x convert --to tflite`` of the float and of the
    quantized program, ``pt2x convert --to onnx`` of the quantized one.
  * run: one process per file and thread count: LiteRT (XNNPACK as shipped) or ONNX Runtime
    (all optimizations), median latency of ``--runs`` invokes after ``--warmup``; for LiteRT the
    number of XNNPACK partitions (DELEGATE nodes after delegation). Parity: max |out - eager|
    in steps of the program's last activation quantize.

    python -m benchmarks.bench_quantized [--models resnet18,mobilenet_v2] [--size 224]
        [--threads 1,2] [--quantizer xnnpack] [--out bench-out/quantized] [--json results.json]
        [--litert-torch-venv PATH] [--skip-litert-torch]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the repository

from scripts.environment import child_env

BUILD = r"""
import copy, json, os, sys
import numpy as np, torch
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
        unfolded = convert_pt2e(copy.deepcopy(prepared), fold_quantize=False)
        q = convert_pt2e(prepared)
        qep = torch.export.export(q, ex, dynamic_shapes=dyn)
        torch.export.save(qep, f"{out}/{name}_int8.pt2")
        torch.export.save(torch.export.export(unfolded, ex, dynamic_shapes=dyn), f"{out}/{name}_int8_unfolded.pt2")
        steps = [float(n.args[1]) for n in qep.graph.nodes
                 if str(n.target).startswith("quantized_decomposed.quantize_per_tensor")]
        with open(f"{out}/{name}_step.json", "w") as f:
            json.dump({"step": steps[-1]}, f)
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
extra = {}
if path.endswith(".tflite"):
    from ai_edge_litert.interpreter import Interpreter
    it = Interpreter(model_path=path, num_threads=threads)
    it.allocate_tensors()
    di, do = it.get_input_details()[0], it.get_output_details()[0]
    if di["dtype"] == np.int8:  # litert-torch's int8 edges: quantize with the file's parameters
        s, z = di["quantization"]
        x = np.clip(np.round(x / s) + z, -128, 127).astype(np.int8)
    def call():
        it.set_tensor(di["index"], x); it.invoke(); y = it.get_tensor(do["index"])
        if y.dtype == np.int8:
            s, z = do["quantization"]
            y = (y.astype(np.float32) - z) * np.float32(s)
        return y
    extra["partitions"] = [op["op_name"] for op in it._get_ops_details()].count("DELEGATE")
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
print(json.dumps({"ms": 1000 * statistics.median(times), **extra}))
"""

LITERT_TORCH = r"""
import sys
import numpy as np, torch, torchao  # torchao registers the quantized_decomposed ops
import litert_torch
from litert_torch.quantize import pt2e_quantizer
from litert_torch.quantize.quant_config import QuantConfig
src, dst, x_path = sys.argv[1:4]
ep = torch.export.load(src)
x = torch.from_numpy(np.load(x_path))
# the quantizer only tells litert-torch the program is statically quantized (its qdq_conversion_mode)
quantizer = pt2e_quantizer.PT2EQuantizer().set_global(
    pt2e_quantizer.get_symmetric_quantization_config(is_per_channel=True))
litert_torch.convert(ep.module(), (x,), quant_config=QuantConfig(pt2e_quantizer=quantizer)).export(dst)
"""


def _child(argv: list[str], timeout: float = 1800) -> subprocess.CompletedProcess:
    r = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, cwd=ROOT, env=child_env())
    if r.returncode:
        raise SystemExit(f"{' '.join(argv[:4])}... exited {r.returncode}:\n{r.stderr[-2000:]}")
    return r


def _convert(src: str, dst: str, to: str) -> list[str]:
    """``pt2x convert`` where ``import torch`` fails; its printed lines."""
    code = ("import sys; sys.modules['torch'] = None\n"
            "from pt2x.tools.cli import main; sys.exit(main(sys.argv[1:]))")
    r = _child([sys.executable, "-c", code, "convert", src, "--to", to, "-o", dst])
    return r.stdout.strip().splitlines()


def _latency(path: str, threads: int, args, x: str) -> dict:
    r = _child([sys.executable, "-c", RUN, path, str(threads), str(args.runs), str(args.warmup), x])
    return json.loads(r.stdout.strip().splitlines()[-1])


def _litert_torch(python: str, base: str) -> bool:
    """litert-torch's int8 .tflite of the unfolded module; False (said on stderr) where it fails."""
    dst = base + "_litert_torch_int8.tflite"
    r = subprocess.run([python, "-c", LITERT_TORCH, base + "_int8_unfolded.pt2", dst, base + "_x.npy"],
                       capture_output=True, text=True, timeout=1800, cwd=ROOT)
    if r.returncode or not os.path.exists(dst):
        print(f"litert-torch failed on {base}: {r.stderr[-1000:]}", file=sys.stderr)
        return False
    return True


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
    ap.add_argument("--litert-torch-venv", help="litert-torch's venv (default: bench_tflite.py's, made when missing)")
    ap.add_argument("--skip-litert-torch", action="store_true")
    args = ap.parse_args()
    litert_python = None
    if not args.skip_litert_torch:
        from benchmarks.bench_tflite import DEFAULT_VENV, ensure_litert_torch_venv

        litert_python = ensure_litert_torch_venv(args.litert_torch_venv or DEFAULT_VENV)
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
        with open(base + "_step.json") as f:
            step = json.load(f)["step"]
        row = {"model": name, "size": args.size, "quantizer": args.quantizer, "int8_report": report[1:],
               "output_step": step}
        files = [("tflite_int8", "_int8.tflite"), ("tflite_float", "_float.tflite"),
                 ("onnx_pt2x_qdq", "_pt2x_qdq.onnx"), ("onnx_torch_qdq", "_torch_onnx.onnx")]
        if litert_python and _litert_torch(litert_python, base):
            files.append(("tflite_litert_torch_int8", "_litert_torch_int8.tflite"))
        for kind, path in files:
            runs = {t: _latency(base + path, int(t), args, x) for t in args.threads.split(",")}
            row[kind] = {t: r["ms"] for t, r in runs.items()}
            if "partitions" in runs[args.threads.split(",")[0]]:
                row[kind]["partitions"] = runs[args.threads.split(",")[0]]["partitions"]
            if kind != "tflite_float":
                off = float(np.abs(np.load(base + path + ".out.npy") - eager).max())
                row[kind]["max_abs_vs_eager"], row[kind]["steps_vs_eager"] = off, off / step
        row["size_bytes"] = {k: os.path.getsize(base + p) for k, p in files if k.startswith("tflite")}
        rows.append(row)
        print(json.dumps(row), flush=True)
    _table(rows, args.threads.split(","))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores",
                       "rows": rows}, f, indent=1)


def _table(rows: list[dict], threads: list[str]) -> None:
    print("| model | threads | LiteRT pt2x int8 ms | LiteRT pt2x float ms | float/int8 | LiteRT litert-torch int8 ms "
          "| XNNPACK partitions pt2x int8 / float / litert-torch | steps off eager pt2x / litert-torch "
          "| ORT pt2x QDQ ms | ORT torch.onnx QDQ ms |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        lt = r.get("tflite_litert_torch_int8")
        for t in threads:
            i8, f32 = r["tflite_int8"][t], r["tflite_float"][t]
            parts = " / ".join(str(x.get("partitions", "-")) if x else "-" for x in (r["tflite_int8"], r["tflite_float"], lt))
            steps = " / ".join(f"{x['steps_vs_eager']:.1f}" if x else "-" for x in (r["tflite_int8"], lt))
            lt_ms = f"{lt[t]:.1f}" if lt else "-"
            print(f"| {r['model']} {r['size']}x{r['size']} | {t} | {i8:.1f} | {f32:.1f} | {f32 / i8:.2f}x | {lt_ms} | "
                  f"{parts} | {steps} | {r['onnx_pt2x_qdq'][t]:.1f} | {r['onnx_torch_qdq'][t]:.1f} |")


if __name__ == "__main__":
    main()
