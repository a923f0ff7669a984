"""Benchmark: two .tflite files of the same program timed against each other in LiteRT.

Not a test. For a second machine where only the runtime is installed (the device machine's quiet
CPU: ``pip install ai-edge-litert`` and this file, no torch, no pt2x): bench_tflite.py makes the
files (pt2x's and litert-torch's, or bench_quantized.py's float and int8), this times them.

Two measurements, each at ``--threads`` threads with LiteRT's default op resolver (XNNPACK):

  * **separate processes**: ``--rounds`` rounds, A then B, each a fresh process (pinned to
    ``--core`` when given) that resizes the input to the array's shape, warms up 30 runs and
    prints the median of ``--runs``; the figure is the median over rounds. Each side pays its own
    process start and memory placement, as a user's does.
  * **one process, interleaved**: both interpreters in one process, A and B invoked alternately
    ``--runs`` x 5 times; the medians' ratio and the 10th percentiles' ratio. This cancels the
    machine's slow drifts (clock, neighbours), which on a shared VM move single rounds by 1.5x.

    python -m benchmarks.time_tflite_pair A.tflite B.tflite --inputs inputs.npz [--key x0_0]
        [--rounds 9] [--runs 300] [--threads 1] [--core 5]

``--inputs``: an .npy array, or an .npz with ``--key`` (bench_tflite.py's ``<model>_inputs.npz``
holds the example batch as ``x0_0``). Prints each side's milliseconds and the ratio A / B (< 1: A is
faster).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys

# one child source for both measurements: one file -> its median (ms, JSON); two -> interleaved
_CHILD = r'''
import sys, time, json, numpy as np
from ai_edge_litert.interpreter import Interpreter
inputs, key, runs, threads, paths = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5:]
x = np.load(inputs)
x = x[key] if hasattr(x, "files") else x
its = []
for p in paths:
    it = Interpreter(model_path=p, num_threads=threads)
    d = it.get_input_details()[0]
    if list(d["shape"]) != list(x.shape):
        it.resize_tensor_input(d["index"], list(x.shape))
    it.allocate_tensors()
    it.set_tensor(d["index"], x.astype(d["dtype"]))
    its.append(it)
for it in its:
    for _ in range(30 if len(its) == 1 else 50):
        it.invoke()
ts = [[] for _ in its]
for _ in range(runs):
    for k, it in enumerate(its):
        t = time.perf_counter(); it.invoke(); ts[k].append(time.perf_counter() - t)
ms = [1000 * float(np.median(t)) for t in ts]
if len(its) == 1:
    print(json.dumps(ms[0]))
else:
    print(f"one process, interleaved: A {ms[0]:.3f} ms, B {ms[1]:.3f} ms, A / B {ms[0] / ms[1]:.3f} "
          f"(10th percentiles {float(np.percentile(ts[0], 10) / np.percentile(ts[1], 10)):.3f})")
'''


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("--inputs", required=True)
    ap.add_argument("--key", default="x0_0")
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--runs", type=int, default=300)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--core", help="taskset -c this CPU list for every child")
    args = ap.parse_args(argv)
    pin = ["taskset", "-c", args.core] if args.core else []
    rounds: list[list[float]] = [[], []]
    for _ in range(args.rounds):
        for k, path in enumerate((args.a, args.b)):
            r = subprocess.run(pin + [sys.executable, "-c", _CHILD, args.inputs, args.key, str(args.runs),
                                      str(args.threads), path], capture_output=True, text=True)
            if r.returncode:
                print(r.stderr[-2000:], file=sys.stderr)
                return 1
            rounds[k].append(json.loads(r.stdout.strip().splitlines()[-1]))
    ma, mb = statistics.median(rounds[0]), statistics.median(rounds[1])
    print(f"A = {args.a}\nB = {args.b}\n{args.threads} thread(s), {args.rounds} rounds of {args.runs} runs")
    print(f"separate processes: A {ma:.3f} ms, B {mb:.3f} ms, A / B {ma / mb:.3f}; "
          f"rounds A {[round(v, 3) for v in rounds[0]]} B {[round(v, 3) for v in rounds[1]]}")
    r = subprocess.run(pin + [sys.executable, "-c", _CHILD, args.inputs, args.key, str(args.runs * 5),
                              str(args.threads), args.a, args.b], capture_output=True, text=True)
    print(r.stdout.strip() if r.returncode == 0 else r.stderr[-2000:])
    return r.returncode


if __name__ == "__main__":
    sys.exit(main())
