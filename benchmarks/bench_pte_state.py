"""Benchmark: a stateful program (decoder layers over static KV caches) through ``to_pte`` (pt2x,
torch-free) and exir's ``to_edge(ep).to_executorch()``, then decoded step by step in ExecuTorch.

Not a test. ``tests/support/pte_zoo.py``'s ``KVDecoderLayer`` stacked ``--layers`` deep (each with
its own k/v cache buffers, written by ``index_copy_`` at the input position) is exported by this
venv's torch and saved with ``torch.export.save``; each side converts in its own fresh process
(``bench_pte``'s children: pt2x where ``import torch`` fails, exir under ``torch.no_grad()``, which
its write-back pass needs for parameters loaded from a .pt2). Each file is then loaded once in
ExecuTorch's runtime (another process) and run for ``--steps`` decode steps, against the eager
module called as many times: the max abs diff over every step, and the median time of one step.

    python -m benchmarks.bench_pte_state [--layers 4] [--dim 256] [--max-len 512] [--steps 16] [--runs 3]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import textwrap

from benchmarks.bench_pte import PT2X, ROOT, _arena, _child
from scripts.environment import ensure_support

EXIR = textwrap.dedent("""
    import sys, time, json
    import torch
    from executorch.exir import to_edge

    def hwm():
        with open("/proc/self/status") as f:
            return next(int(l.split()[1]) for l in f if l.startswith("VmHWM")) / 1024

    ep = torch.export.load(sys.argv[1])
    t1 = time.perf_counter()
    with torch.no_grad():
        et = to_edge(ep).to_executorch()
    with open(sys.argv[2], "wb") as f:
        f.write(et.buffer)
    t2 = time.perf_counter()
    print(json.dumps({"convert_s": t2 - t1, "peak_rss_mb": hwm()}))
""")

DECODE = textwrap.dedent("""
    import sys, json, time
    import torch
    from executorch.runtime import Runtime
    from benchmarks.bench_pte_state import decoder
    layers, dim, max_len, steps = (int(x) for x in sys.argv[2].split(","))
    eager = decoder(layers, dim, max_len)
    with open(sys.argv[1], "rb") as f:
        data = f.read()
    program = Runtime.get().load_program(data)  # reads ``data`` in place: keep both referenced
    method = program.load_method("forward")
    g = torch.Generator().manual_seed(1)
    diff, times = 0.0, []
    for s in range(steps):
        x, pos = torch.randn(1, 1, dim, generator=g), torch.tensor([s])
        t = time.perf_counter()
        (got,) = method.execute([x, pos])
        times.append(time.perf_counter() - t)
        with torch.no_grad():
            want = eager(x, pos)
        diff = max(diff, float((got - want).abs().max()))
    times.sort()
    print(json.dumps({"max_abs_diff": diff, "step_ms": 1000 * times[len(times) // 2]}))
""")


def decoder(layers: int, dim: int, max_len: int):
    """``layers`` KV-cache decoder layers (seeded weights), eval mode."""
    import torch

    import pte_zoo

    class Decoder(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.layers = torch.nn.ModuleList(pte_zoo.KVDecoderLayer("index_copy_", batch=1, d=dim, heads=8,
                                                                     max_len=max_len) for _ in range(layers))

        def forward(self, x, pos):
            for layer in self.layers:
                x = layer(x, pos)
            return x

    torch.manual_seed(0)
    return Decoder().eval()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--dim", type=int, default=256)
    ap.add_argument("--max-len", type=int, default=512)
    ap.add_argument("--steps", type=int, default=16)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--out", default=os.path.join(ROOT, "bench-out", "pte_state"))
    args = ap.parse_args(argv)
    ensure_support("benchmarks.bench_pte_state")  # pte_zoo (tests/support) on PYTHONPATH
    import torch

    os.makedirs(args.out, exist_ok=True)
    src = os.path.join(args.out, "decoder.pt2")
    m = decoder(args.layers, args.dim, args.max_len)
    torch.export.save(torch.export.export(m, (torch.randn(1, 1, args.dim), torch.tensor([0]))), src)
    sizes = f"{args.layers},{args.dim},{args.max_len},{args.steps}"
    row = {"layers": args.layers, "dim": args.dim, "max_len": args.max_len, "steps": args.steps,
           "pt2_mb": os.path.getsize(src) / 2**20}
    for side, code in (("pt2x", PT2X), ("exir", EXIR)):
        dst = os.path.join(args.out, f"decoder.{side}.pte")
        runs = [_child(code, src, dst) for _ in range(args.runs)]
        row[f"{side}_convert_s"] = statistics.median(r[0]["convert_s"] for r in runs)
        row[f"{side}_peak_rss_mb"] = max(r[0]["peak_rss_mb"] for r in runs)
        row[f"{side}_pte_bytes"] = os.path.getsize(dst)
        row[f"{side}_arena_bytes"] = _arena(dst)
        row.update({f"{side}_{k}": v for k, v in _child(DECODE, dst, sizes)[0].items()})
    print(json.dumps(row, indent=1))
    with open(os.path.join(args.out, "results.json"), "w") as f:
        json.dump(row, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
