"""Benchmark: two .pte files of the same program timed against each other in ExecuTorch's runtime.

Not a test. ``bench_pte_xnnpack.py`` makes the files (pt2x's and exir's XNNPACK-delegated ``.pte``
of one program, and the program's inputs); on a shared machine its rounds move by more than the
two files differ, so this re-times a pair, at ``--threads`` threads (XNNPACK's threadpool):

  * **separate processes**: ``--rounds`` rounds, A then B (B then A on odd rounds), each a fresh
    process that loads the file, warms up 10 runs and prints the median of ``--runs``; the figure
    is the median over rounds, and the fastest round's;
  * **one process, interleaved**: both methods loaded in one process and executed alternately
    ``--runs`` x 5 times; the medians' ratio. This cancels the machine's slow drifts.

    python -m benchmarks.time_pte_pair A.pte B.pte --inputs M_inputs.npz [--rounds 10] [--runs 200] [--threads 1]

``--inputs``: ``bench_tflite``'s ``<model>_inputs.npz`` (the example batch as ``x0_0``, ``x0_1``...).
Prints each side's milliseconds and the ratios A / B (< 1: A is faster).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys

_LOAD = r'''
import json, sys, time, statistics
import numpy as np, torch
from executorch.runtime import Runtime
from executorch.extension.pybindings import portable_lib
portable_lib._unsafe_reset_threadpool(int(sys.argv[3]))
d = np.load(sys.argv[2])
xs = [torch.from_numpy(d[k]) for k in sorted(k for k in d.files if k.startswith("x0_"))]

def method(path):
    blob = open(path, "rb").read()
    program = Runtime.get().load_program(blob)
    return blob, program, program.load_method("forward")  # the program reads blob in place: keep all
'''

SEPARATE = _LOAD + r'''
_keep = method(sys.argv[1])
m = _keep[2]
for _ in range(10):
    m.execute(xs)
ts = []
for _ in range(int(sys.argv[4])):
    t = time.perf_counter(); m.execute(xs); ts.append(time.perf_counter() - t)
print(json.dumps(statistics.median(ts) * 1e3))
'''

INTERLEAVED = _LOAD + r'''
a, b = method(sys.argv[1]), method(sys.argv[5])
for _ in range(10):
    a[2].execute(xs); b[2].execute(xs)
ta, tb = [], []
for _ in range(int(sys.argv[4]) * 5):
    t = time.perf_counter(); a[2].execute(xs); ta.append(time.perf_counter() - t)
    t = time.perf_counter(); b[2].execute(xs); tb.append(time.perf_counter() - t)
print(json.dumps([statistics.median(ta) * 1e3, statistics.median(tb) * 1e3]))
'''


def _run(code: str, *args) -> object:
    r = subprocess.run([sys.executable, "-c", code, *map(str, args)], capture_output=True, text=True, timeout=900)
    if r.returncode:
        raise SystemExit(f"the runtime's process failed:\n{r.stderr[-2000:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("a")
    p.add_argument("b")
    p.add_argument("--inputs", required=True)
    p.add_argument("--rounds", type=int, default=10)
    p.add_argument("--runs", type=int, default=200)
    p.add_argument("--threads", type=int, default=1)
    args = p.parse_args(argv)
    ms = {args.a: [], args.b: []}
    for r in range(args.rounds):
        for path in ((args.a, args.b) if r % 2 == 0 else (args.b, args.a)):
            ms[path].append(_run(SEPARATE, path, args.inputs, args.threads, args.runs))
    med = {k: statistics.median(v) for k, v in ms.items()}
    low = {k: min(v) for k, v in ms.items()}
    one_a, one_b = _run(INTERLEAVED, args.a, args.inputs, args.threads, args.runs, args.b)
    print(json.dumps({"a": args.a, "b": args.b, "separate_ms": [med[args.a], med[args.b]],
                      "separate_ratio": med[args.a] / med[args.b], "fastest_round_ratio": low[args.a] / low[args.b],
                      "interleaved_ms": [one_a, one_b], "interleaved_ratio": one_a / one_b}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
