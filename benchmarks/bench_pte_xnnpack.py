"""Benchmark: pt2x's XNNPACK-delegated ``.pte`` against exir's of the same program, at 1 thread,
with LiteRT on pt2x's ``.tflite`` of the same program beside them.

Not a test. The programs are ``bench_tflite``'s (its ``EXPORT`` worker: random weights re-drawn as
the model zoo's, a dynamic batch up to 8, inputs of batch 2 and 3 with torch eager's outputs),
and PT2E int8 ``q_resnet18`` / ``q_mobilenet_v2`` (``tests/support/pt2e.py``: executorch's
XNNPACKQuantizer's annotations, inputs of batch 1 and 3). Every side runs in its own process:

  * pt2x: ``to_pte(src, dst, delegate="xnnpack")`` where ``import torch`` fails:
    the conversion's time in process, the file's size;
  * exir (executorch 1.5.1): ``torch.export.load`` then
    ``to_edge_transform_and_lower(ep, partitioner=[XnnpackPartitioner()]).to_executorch()`` and the
    buffer written: the same two numbers (the in-process time leaves out the load);
  * each ``.pte`` in ``executorch.runtime`` (XNNPACK's threadpool set to 1 thread): max abs diff
    against torch eager at both batches, then the median latency of ``--runs`` executions at the
    first batch, after a warm-up; the delegate partitions (``DelegateCall``s) and the portable
    kernel calls left are read from the file (``pt2x.converters.pte.reader``);
  * LiteRT: ``pt2x convert --to tflite`` and ``bench_tflite``'s LiteRT worker at 1 thread.

The runs are interleaved over ``--rounds`` (pt2x, exir, LiteRT, then the reverse order), each
round a fresh process; a latency is the median of the rounds' medians (the fastest single run
beside it: on a shared machine it is the least disturbed).

    python -m benchmarks.bench_pte_xnnpack [--models convbn,mobilenet_v3_small,resnet18,bert,gpt2,zoo,q_resnet18,q_mobilenet_v2]
        [--rounds 3] [--runs 30] [--out bench-out/pte-xnnpack] [--json results.json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time

from benchmarks import bench_tflite_workers as workers
from benchmarks.bench_tflite import MODELS, ZOO_MODELS, _child, _last_json, cold_convert, export_programs
from scripts.environment import ensure_support

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
QUANTIZED = ("q_resnet18", "q_mobilenet_v2")
THREADS = "1"

PT2X = r'''
import json, sys, time
sys.modules["torch"] = None  # any 'import torch' now raises ImportError
from pt2x.converters import to_pte
t = time.perf_counter()
to_pte(sys.argv[1], sys.argv[2], delegate="xnnpack")
print(json.dumps({"convert_s": time.perf_counter() - t}))
'''

EXIR = r'''
import json, sys, time, warnings, logging
warnings.filterwarnings("ignore"); logging.disable(logging.WARNING)
import torch
from executorch.exir import to_edge_transform_and_lower
from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
ep = torch.export.load(sys.argv[1])
t = time.perf_counter()
et = to_edge_transform_and_lower(ep, partitioner=[XnnpackPartitioner()]).to_executorch()
with open(sys.argv[2], "wb") as f:
    f.write(et.buffer)
print(json.dumps({"convert_s": time.perf_counter() - t}))
'''

EXECUTORCH = workers._INPUTS + r'''
import torch
from executorch.runtime import Runtime
from executorch.extension.pybindings import portable_lib
portable_lib._unsafe_reset_threadpool(threads[0])
with open(path, "rb") as f:
    blob = f.read()
program = Runtime.get().load_program(blob)  # reads ``blob`` in place: both stay referenced
method = program.load_method("forward")
t0, t1 = [torch.from_numpy(a) for a in x0], [torch.from_numpy(a) for a in x1]
out = {"example": attempt(lambda: diff(method.execute(t0)[0].numpy(), y0)),
       "resized": attempt(lambda: diff(method.execute(t1)[0].numpy(), y1))}

def timed():
    for _ in range(10):
        method.execute(t0)
    ts = []
    for _ in range(runs):
        t = time.perf_counter(); method.execute(t0); ts.append(time.perf_counter() - t)
    return {"ms": statistics.median(ts) * 1e3, "min_ms": min(ts) * 1e3}

out["latency"] = {str(threads[0]): attempt(timed)}
print(json.dumps(out))
'''

Q_EXPORT = r'''
import json, os, sys, warnings
warnings.filterwarnings("ignore")
import numpy as np
import torch
import pt2e
out, names = sys.argv[1], sys.argv[2].split(",")
for name in names:
    row = {"model": name}
    try:
        q = pt2e.program(name[2:], "xnnpack")
        row["pt2"] = pt2e.save(q.exported, os.path.join(out, name + ".pt2"))
        b0, b1 = pt2e.BATCHES
        (x0,), (x1,) = q.inputs[b0], q.inputs[b1]
        y0, y1 = q.expected[b0], q.expected[b1]
        row["inputs"] = os.path.join(out, name + "_inputs.npz")
        np.savez(row["inputs"], x0_0=x0.numpy(), x1_0=x1.numpy(), y0=y0.numpy(), y1=y1.numpy())
        row["batches"] = [int(x0.shape[0]), int(x1.shape[0])]
        row["max_batch"] = pt2e.MAX_BATCH
        row["params"] = sum(t.numel() for t in q.exported.state_dict.values())
    except Exception as e:
        row["error"] = f"{type(e).__name__}: {str(e)[:300]}"
    print(json.dumps(row), flush=True)
'''


def _export(names: list[str], out: str) -> list[dict]:
    rows = []
    plain = [n for n in names if n not in QUANTIZED]
    if plain:
        rows += export_programs(plain, out)
    quantized = [n for n in names if n in QUANTIZED]
    if quantized:
        _, r = _child([sys.executable, "-c", Q_EXPORT, out, ",".join(quantized)], timeout=1800)
        rows += [json.loads(line) for line in r.stdout.splitlines() if line.startswith("{")]
        if len(rows) != len(names):
            raise RuntimeError(f"quantized export failed (exit {r.returncode}):\n{r.stderr[-3000:]}")
    return sorted(rows, key=lambda row: names.index(row["model"]))


def _convert(code: str, src: str, dst: str, timeout: float) -> dict:
    if os.path.exists(dst):
        os.remove(dst)
    wall, r = _child([sys.executable, "-c", code, src, dst], timeout=timeout)
    res = _last_json(r, "conversion")
    if "error" in res:
        return res
    res.update(process_s=wall, bytes=os.path.getsize(dst), **_structure(dst))
    return res


def _structure(path: str) -> dict:
    """Delegate partitions (DelegateCalls) and the portable kernel calls left, read from the file."""
    from pt2x.converters.pte.reader import read_pte

    plan = read_pte(path)["execution_plans"][0]
    return {"partitions": plan["delegate_calls"], "portable_ops": sum(plan["operators"].values()),
            "portable_kernels": plan["operators"]}


def _run(code: str, path: str, inputs: str, runs: int) -> dict:
    _, r = _child([sys.executable, "-c", code, path, inputs, str(runs), THREADS], timeout=900)
    return _last_json(r, "run")


def bench(row: dict, out: str, args) -> dict:
    name = row["model"]
    res = {"model": name, "batches": row["batches"], "params": row["params"]}
    files = {side: os.path.join(out, f"{name}.{side}.pte") for side in ("pt2x", "exir")}
    res["pt2x"] = _convert(PT2X, row["pt2"], files["pt2x"], 600)
    res["exir"] = _convert(EXIR, row["pt2"], files["exir"], args.exir_timeout)
    tflite = os.path.join(out, f"{name}.pt2x.tflite")
    res["litert"] = cold_convert(row["pt2"], tflite, "tflite", 1)
    sides = {side: (EXECUTORCH, files[side]) for side in ("pt2x", "exir") if "error" not in res[side]}
    if "error" not in res["litert"]:
        sides["litert"] = (workers.LITERT, tflite)
    rounds: dict[str, list] = {side: [] for side in sides}
    for i in range(args.rounds):
        for side in (list(sides) if i % 2 == 0 else list(reversed(sides))):
            code, path = sides[side]
            rounds[side].append(_run(code, path, row["inputs"], args.runs))
    for side, results in rounds.items():
        first = results[0]
        lat = [r["latency"][THREADS] for r in results if "ms" in r.get("latency", {}).get(THREADS, {})]
        ms = [x["ms"] for x in lat]
        best = [x["min_ms"] for x in lat if "min_ms" in x]
        res[side].update(example=first.get("example"), resized=first.get("resized"),
                         load_error=first.get("load_error") or first.get("error"),
                         ms=statistics.median(ms) if ms else None, rounds=ms, min_ms=min(best) if best else None)
    return res


# ----------------------------------------------------------------------- the table


def _cell(x, fmt: str) -> str:
    return "–" if x is None else format(x, fmt)


def _diff(side: dict) -> str:
    if "error" in side:
        return "✗"
    if side.get("load_error"):
        return "✗ load"
    d = [r.get("max_abs_diff") for r in (side.get("example") or {}, side.get("resized") or {})]
    if any(x is None for x in d):
        return "✗"
    return f"{max(d):.1e}"


def table(rows: list[dict]) -> str:
    head = ("| model | pt2x ms | exir ms | pt2x / exir (min: pt2x / exir) | LiteRT ms (pt2x .tflite) | partitions pt2x / exir "
            "| portable ops pt2x / exir | convert s pt2x / exir | exir / pt2x convert | MB pt2x / exir "
            "| max abs diff pt2x / exir / LiteRT |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    notes = []
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['model']} | export failed: {r['error'][:120]} |")
            continue
        p, e, lt = r["pt2x"], r["exir"], r["litert"]
        for side, what in ((p, "pt2x"), (e, "exir"), (lt, "LiteRT")):
            if "error" in side:
                notes.append(f"- {r['model']}, {what}: {side['error'][:300]}")
        ratio = f"{p['ms'] / e['ms']:.2f}" if p.get("ms") and e.get("ms") else "–"
        if p.get("min_ms") and e.get("min_ms"):
            ratio += f" ({p['min_ms']:.2f} / {e['min_ms']:.2f})"
        speed = f"{e['convert_s'] / p['convert_s']:.0f}×" if "convert_s" in p and "convert_s" in e else "–"
        lines.append(
            f"| {r['model']} | {_cell(p.get('ms'), '.2f')} | {_cell(e.get('ms'), '.2f')} | {ratio} "
            f"| {_cell(lt.get('ms'), '.2f')} | {p.get('partitions', '–')} / {e.get('partitions', '–')} "
            f"| {p.get('portable_ops', '–')} / {e.get('portable_ops', '–')} "
            f"| {_cell(p.get('convert_s'), '.2f')} / {_cell(e.get('convert_s'), '.1f')} | {speed} "
            f"| {_cell(p.get('bytes', 0) / 1e6 if 'bytes' in p else None, '.1f')} / "
            f"{_cell(e.get('bytes', 0) / 1e6 if 'bytes' in e else None, '.1f')} "
            f"| {_diff(p)} / {_diff(e)} / {_diff(lt)} |")
    return "\n".join(lines + ([""] + notes if notes else []))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default=",".join(MODELS + ("zoo",) + QUANTIZED))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--runs", type=int, default=30, help="timed executions per round (after 10 warm-up ones)")
    ap.add_argument("--exir-timeout", type=float, default=1800, help="seconds exir may take to lower one program")
    ap.add_argument("--out", default=os.path.join("bench-out", "pte-xnnpack"))
    ap.add_argument("--json", default=None, help="also write every number to this file")
    args = ap.parse_args(argv)
    ensure_support("benchmarks.bench_pte_xnnpack")  # tests/support (model_zoo, pt2e) for the export workers
    names = [n for m in args.models.split(",") for n in (ZOO_MODELS if m == "zoo" else (m,))]
    os.makedirs(args.out, exist_ok=True)
    started = time.strftime("%Y-%m-%d")
    print(f"# {started}, {platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}", flush=True)
    rows = []
    for row in _export(names, args.out):
        rows.append(row if "error" in row else bench(row, args.out, args))
        print(json.dumps(rows[-1]), flush=True)
    print(table(rows))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
