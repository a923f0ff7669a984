"""Benchmark: pt2x's conversion time and output bytes under two (or more) checkouts of pt2x.

Not a test. Each checkout (a repository root, e.g. made with ``git worktree add /tmp/old REV``)
converts the same .pt2 programs in its own process: one warm-up conversion, then ``--reps``
timed ones, recording wall time, process CPU time (steadier than wall time on a shared
machine) and the sha256 of the output. The checkouts take turns, ``--rounds`` times, the order
alternating; each program's figure is the best round's median (and minimum) over its reps. The
table gives the last checkout over the first per program, the median of those ratios, and
whether every output is byte-identical.

    python -m benchmarks.bench_revisions --target onnx old=/tmp/wt-old new=. a.pt2 b.pt2 ...
        [--target tflite] [--rounds 3] [--reps 5] [--json out.json]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

_KEYS = ("cpu_median_ms", "cpu_min_ms", "wall_median_ms")


def _child(target: str, reps: int, programs: list[str]) -> dict:
    """In the child process, whose ``PYTHONPATH`` starts with a folder holding a ``pt2x`` link to
    the checkout (``_run_side``; ``--child`` names that folder, for the process list)."""
    from pt2x.converters.onnx.converter import to_onnx
    from pt2x.converters.tflite.converter import to_tflite

    convert = (lambda p: to_onnx(p).SerializeToString()) if target == "onnx" else to_tflite
    out = {}
    for p in programs:
        try:
            data = convert(p)
        except Exception as e:  # noqa: BLE001 - a program one checkout refuses is reported, not fatal
            out[p] = {"error": f"{type(e).__name__}: {str(e)[:200]}"}
            continue
        walls, cpus = [], []
        for _ in range(reps):
            w, c = time.perf_counter(), time.process_time()
            convert(p)
            walls.append(time.perf_counter() - w)
            cpus.append(time.process_time() - c)
        out[p] = {"cpu_median_ms": 1e3 * statistics.median(cpus), "cpu_min_ms": 1e3 * min(cpus),
                  "wall_median_ms": 1e3 * statistics.median(walls), "sha256": hashlib.sha256(data).hexdigest()}
    return out


def _run_side(checkout: str, args, links: str) -> dict:
    root = os.path.join(links, os.path.basename(os.path.abspath(checkout)) + str(abs(hash(checkout))))
    if not os.path.exists(root):
        os.makedirs(root)
        os.symlink(os.path.abspath(checkout), os.path.join(root, "pt2x"))
    path = os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH", "")) if p)
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", PYTHONPATH=path)
    r = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", root, "--target", args.target,
                        "--reps", str(args.reps), *args.programs], env=env, capture_output=True, text=True, check=True)
    return json.loads(r.stdout.strip().splitlines()[-1])


def _table(names: list[str], runs: dict[str, list[dict]], programs: list[str]) -> dict:
    best = {n: {p: {k: min(r[p][k] for r in runs[n]) for k in _KEYS} for p in programs
                if all(k in runs[n][0].get(p, {}) for k in _KEYS)} for n in names}
    common = [p for p in programs if all(p in best[n] for n in names)]
    first, last = names[0], names[-1]
    summary = {}
    for k in _KEYS:
        print(f"== {k} (best of {len(runs[first])} rounds)")
        print("program".ljust(28) + "".join(n.rjust(10) for n in names) + f"  {last}/{first}")
        ratios = []
        for p in common:
            v = [best[n][p][k] for n in names]
            ratios.append(v[-1] / v[0])
            print(os.path.basename(p)[:27].ljust(28) + "".join(f"{x:10.1f}" for x in v) + f"  {ratios[-1]:.3f}")
        summary[k] = statistics.median(ratios) if ratios else None
        print(f"median per-program ratio {summary[k]:.3f}" if ratios else "no program converted on every side")
    same = all(len({runs[n][0][p].get("sha256") for n in names}) == 1 for p in common)
    print("outputs byte-identical on every side:", same, f"({len(common)} programs)")
    for p in programs:
        errors = {n: runs[n][0].get(p, {}).get("error") for n in names if runs[n][0].get(p, {}).get("error")}
        if errors:
            print("  not converted:", os.path.basename(p), errors)
    return {"best": best, "median_ratio": summary, "identical": same}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--target", choices=("onnx", "tflite"), default="onnx")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--json", help="also write the raw results here")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("sides_and_programs", nargs="+", metavar="NAME=CHECKOUT ... PROGRAM.pt2 ...")
    args = ap.parse_args(argv)
    if args.child:
        print(json.dumps(_child(args.target, args.reps, args.sides_and_programs)))
        return 0
    sides = [a.split("=", 1) for a in args.sides_and_programs if "=" in a]
    args.programs = [a for a in args.sides_and_programs if "=" not in a]
    if len(sides) < 2 or not args.programs:
        ap.error("give two or more NAME=CHECKOUT and one or more programs")
    runs: dict[str, list[dict]] = {n: [] for n, _ in sides}
    with tempfile.TemporaryDirectory(prefix="pt2x-bench-revisions-") as links:
        for r in range(args.rounds):
            for name, checkout in (sides if r % 2 == 0 else sides[::-1]):
                runs[name].append(_run_side(checkout, args, links))
    result = _table([n for n, _ in sides], runs, args.programs)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"runs": runs, **result}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
