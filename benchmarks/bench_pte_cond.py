"""Benchmark: ``torch.cond`` programs through ``to_pte`` (pt2x) and exir's ``to_edge(ep).to_executorch()``.

Not a test. The programs of ``tests/support/pte_cond_zoo.py`` (weights in branches, two outputs, a
nested cond, a static view of a cond's output, a SymBool predicate on a dynamic batch, a predicate
input), each exported and saved by this venv's torch, converted by both in this process (pt2x
from the saved file, exir from the exported program), and run in ExecuTorch's runtime on inputs
that take every branch, each set twice in turn on one loaded method. Prints the arena
(``non_const_buffer_sizes[1]``) and file bytes of each, pt2x's conversion time (median of
``--runs``), and the largest abs difference from torch eager over every run.

    python -m benchmarks.bench_pte_cond [--runs 5] [--out bench-out/pte_cond]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

from scripts.environment import ensure_support

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _max_diff(data: bytes, cases) -> float:
    import pte_cond_zoo

    worst = 0.0
    for _inputs, want, got in pte_cond_zoo.run_each_twice(data, cases):
        worst = max([worst] + [float((g - w).abs().max()) for g, w in zip(got, want)])
    return worst


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--out", default=os.path.join(ROOT, "bench-out", "pte_cond"))
    args = ap.parse_args(argv)
    ensure_support("benchmarks.bench_pte_cond")  # pte_cond_zoo (tests/support) on PYTHONPATH
    import pte_cond_zoo
    import torch
    from executorch.exir import to_edge

    from pt2x.converters import to_pte
    from pt2x.converters.pte.reader import read_pte

    os.makedirs(args.out, exist_ok=True)
    print("| program | arena bytes pt2x / exir | .pte bytes pt2x / exir | pt2x convert ms | "
          "max abs diff pt2x / exir |")
    print("|---|---|---|---|---|")
    for name in pte_cond_zoo.PROGRAMS:
        src = os.path.join(args.out, f"{name}.pt2")
        m, inputs = pte_cond_zoo.export(name, src)
        times = []
        for _ in range(args.runs):
            t = time.perf_counter()
            ours = to_pte(src)
            times.append(time.perf_counter() - t)
        theirs = to_edge(torch.export.load(src)).to_executorch().buffer
        cases = [(i, pte_cond_zoo.eager(m, i)) for i in inputs]
        arena = [read_pte(d)["execution_plans"][0]["non_const_buffer_sizes"][1] for d in (ours, theirs)]
        diffs = [_max_diff(data, cases) for data in (ours, theirs)]
        print(f"| {name} | {arena[0]} / {arena[1]} | {len(ours)} / {len(theirs)} | "
              f"{statistics.median(times) * 1000:.1f} | {diffs[0]:.2e} / {diffs[1]:.2e} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
