"""The model sweep: every architecture of timm, torchvision and a list of transformers, through pt2x.

Not a test (CI runs a stratified sample: tests/converters/test_sweep_sample.py). Each model runs
in its own subprocess with a time limit (``tests/support/sweep.py check SPEC``: random init, no
downloads, a small input where the model allows, exported with a dynamic batch, converted by
pt2x to ONNX and to TFLite where ``import torch`` fails and by ``torch.onnx.export(ep,
dynamo=True)`` as the anchor, each compared with torch eager at batches 1 and 3 in ONNX Runtime
and LiteRT/XNNPACK). One JSON line per model goes to ``--out`` as it finishes; a rerun skips the
specs already there (resumable). Then a table by family: exported, pt2x ONNX, pt2x TFLite,
torch.onnx, silently wrong, and the refusals grouped by operator.

    python -m scripts.sweep_models [--libs timm,tv,hf] [--filter 'timm:vit_*'] [--all | --per-family N]
        [--sample N --seed S | --cheapest N --max-params 100] [--anchor always|on-miss] [--limit N]
        [--jobs 2] [--timeout 1800] [--size 64] [--out sweep.jsonl] [--ray [ADDRESS]] [--table-only]

By default one model per family (timm's model module; torchvision and transformers are one
family each). ``--sample N`` draws N specs stratified over the families (round robin over
shuffled families). ``--cheapest N`` takes the N smallest by parameter count (counted once on
the meta device, no weights allocated, cached in ``params.json`` beside ``--out``), every
family's smallest before any family's second; models over ``--max-params`` million are left
out with the reason printed. ``--anchor on-miss`` (the way to run a big sweep) runs torch.onnx
only for a model pt2x refused, failed or got wrong on some target: a model pt2x converts with
parity everywhere meets the bar whatever torch.onnx does, and torch.onnx is the slow part; its
line says ``"anchor": "not run (pt2x matched)"`` and the table counts it so. Run it under
``nice -n 19`` on a shared machine.
"""

from __future__ import annotations

import argparse
import collections
import fnmatch
import json
import os
import random
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor, as_completed

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the repository
WORKER = os.path.join(ROOT, "tests", "support", "sweep.py")
LIBS = ("timm", "tv", "hf")
TARGETS = ("onnx", "tflite", "torch_onnx")
ANCHOR_NOT_RUN = "not run (pt2x matched)"
"""The ``anchor`` of a record whose torch.onnx conversion ``--anchor on-miss`` skipped (tests/support/sweep.py)."""
ONE_THREAD = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def _env() -> dict:
    return dict(os.environ, **ONE_THREAD, CI="true",
                PYTHONPATH=os.path.dirname(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))


def registry() -> list[dict]:
    """Every spec and its family, listed by a child (this script imports no torch)."""
    r = subprocess.run([sys.executable, WORKER, "list"], capture_output=True, text=True, env=_env(), check=True)
    return json.loads(r.stdout.strip().splitlines()[-1])


def stratified(entries: list[dict], n: int, seed: int) -> list[dict]:
    """``n`` entries, round robin over the families (each family's models and the family order shuffled)."""
    rng = random.Random(seed)
    groups = collections.defaultdict(list)
    for e in entries:
        groups[e["family"]].append(e)
    order = sorted(groups)
    rng.shuffle(order)
    for f in order:
        rng.shuffle(groups[f])
    out, depth = [], 0
    while len(out) < n and any(len(groups[f]) > depth for f in order):
        out += [groups[f][depth] for f in order if len(groups[f]) > depth][: n - len(out)]
        depth += 1
    return out


# ----------------------------------------------------------------------- the cheapest first


def param_counts(specs: list[str], cache: str, jobs: int) -> dict[str, int | None]:
    """Parameters per spec (None: not buildable on the meta device), counted by children on the meta
    device, ``jobs`` shards at once, kept in the JSON file ``cache`` (counted once, reused by reruns)."""
    counts = _read_json(cache)
    todo = [s for s in specs if s not in counts]
    if todo:
        print(f"counting the parameters of {len(todo)} models (meta device) into {cache}", flush=True)
        shards = [todo[i::max(1, jobs)] for i in range(max(1, jobs))]
        lock = threading.Lock()

        def count(shard: list[str]) -> None:
            p = subprocess.Popen([sys.executable, WORKER, "params"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                 stderr=subprocess.DEVNULL, text=True, env=_env())
            p.stdin.write("\n".join(shard))
            p.stdin.close()
            for line in p.stdout:
                if line.startswith("{"):
                    rec = json.loads(line)
                    with lock:
                        counts[rec["spec"]] = rec["params"]
                        _write_json(cache, counts)
            p.wait()

        with ThreadPoolExecutor(max_workers=len(shards)) as pool:
            list(pool.map(count, shards))
    return counts


def _read_json(path: str) -> dict:
    if not os.path.exists(path):
        return {}
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def _write_json(path: str, value: dict) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(value, f, indent=0, sort_keys=True)
    os.replace(tmp, path)


def cheapest(entries: list[dict], n: int, counts: dict, max_params: float) -> tuple[list[dict], list[str]]:
    """The ``n`` cheapest entries by parameter count, stratified: each family's cheapest member in
    ascending order, then each family's second, and so on. Also the reasons entries were left out."""
    skipped, groups = [], collections.defaultdict(list)
    for e in entries:
        c = counts.get(e["spec"])
        if c is None:
            skipped.append(f"{e['spec']}: parameter count unknown (not buildable on the meta device)")
        elif c > max_params:
            skipped.append(f"{e['spec']}: {c / 1e6:.0f} M parameters, over --max-params {max_params / 1e6:.0f} M")
        else:
            groups[e["family"]].append(e)
    for members in groups.values():
        members.sort(key=lambda e: (counts[e["spec"]], e["spec"]))
    out, depth = [], 0
    while len(out) < n and any(len(m) > depth for m in groups.values()):
        level = sorted((m[depth] for m in groups.values() if len(m) > depth), key=lambda e: (counts[e["spec"]], e["spec"]))
        out += level[: n - len(out)]
        depth += 1
    return out, skipped


def select(entries: list[dict], args) -> list[dict]:
    entries = [e for e in entries if e["spec"].split(":")[0] in args.libs.split(",")]
    if args.filter:
        entries = [e for e in entries if fnmatch.fnmatch(e["spec"], args.filter)]
    if args.cheapest:
        cache = args.params_cache or os.path.join(os.path.dirname(os.path.abspath(args.out)), "params.json")
        counts = param_counts([e["spec"] for e in entries], cache, args.jobs)
        chosen, skipped = cheapest(entries, args.cheapest, counts, args.max_params * 1e6)
        print(f"{len(skipped)} left out of the --cheapest selection" + "".join(f"\n  {r}" for r in skipped[:20])
              + ("\n  ..." if len(skipped) > 20 else ""), flush=True)
        return chosen
    if args.sample:
        return stratified(entries, args.sample, args.seed)
    if not args.all:
        seen = collections.Counter()
        kept = []
        for e in entries:
            if seen[e["family"]] < args.per_family:
                seen[e["family"]] += 1
                kept.append(e)
        entries = kept
    return entries[: args.limit] if args.limit else entries


def run_one(spec: str, size: int, targets: str, timeout: float, anchor: str = "always") -> dict:
    """One spec in its own subprocess: its JSON line, or why it gave none."""
    cmd = [sys.executable, WORKER, "check", spec, "--size", str(size), "--targets", targets, "--anchor", anchor]
    t = time.perf_counter()
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=_env())
    except subprocess.TimeoutExpired:
        return {"spec": spec, "export": "timeout", "error": f"over {timeout:.0f} s"}
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("{")]
    if r.returncode != 0 or not lines:
        return {"spec": spec, "export": "crash", "error": f"rc={r.returncode}: {r.stderr.strip()[-300:]}"}
    out = json.loads(lines[-1])
    out["wall_s"] = round(time.perf_counter() - t, 1)
    return out


RETRIED = ("timeout", "crash")
"""Outcomes a rerun tries again (a longer --timeout, a machine less loaded); the newer line wins."""


def done_specs(path: str) -> set[str]:
    if not os.path.exists(path):
        return set()
    return {r["spec"] for r in read_records(path) if r.get("export") not in RETRIED}


def _run_local(todo: list[dict], args, record) -> None:
    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        futures = [pool.submit(run_one, e["spec"], args.size, args.targets, args.timeout, args.anchor) for e in todo]
        for fut in as_completed(futures):
            record(fut.result())


def _run_ray(todo: list[dict], args, record) -> None:
    from pt2x.tools.scan.ray_runner import _connect, _ray

    ray = _ray()
    started = _connect(ray, args.jobs, args.ray or None)
    try:
        task = ray.remote(num_cpus=1, max_retries=0)(run_one)
        refs = [task.remote(e["spec"], args.size, args.targets, args.timeout, args.anchor) for e in todo]
        while refs:
            done, refs = ray.wait(refs, num_returns=1)
            record(ray.get(done[0]))
    finally:
        if started:
            ray.shutdown()


# ----------------------------------------------------------------------- the table


def _ok(rec: dict, target: str) -> bool:
    return rec.get(target, {}).get("outcome") == "match"


def family_rows(records: list[dict], families: dict[str, str]) -> list[list]:
    rows = collections.defaultdict(lambda: [0] * 9)
    for rec in records:
        fam = families.get(rec["spec"], rec["spec"].split(":")[0])
        r = rows[fam]
        r[0] += 1
        r[1] += rec.get("export") == "ok"
        r[2] += _ok(rec, "onnx")
        r[3] += _ok(rec, "tflite")
        r[4] += _ok(rec, "torch_onnx")
        r[5] += any(rec.get(t, {}).get("outcome") == "mismatch" for t in ("onnx", "tflite"))
        r[6] += _ok(rec, "torch_onnx") and not _ok(rec, "onnx")
        r[7] += rec.get("anchor") == ANCHOR_NOT_RUN
        r[8] += str(rec.get("reference", "")).startswith("ill-conditioned")
    return [[fam] + r for fam, r in sorted(rows.items())]


def table(records: list[dict], families: dict[str, str]) -> str:
    head = ["family", "models", "exported", "pt2x ONNX", "pt2x TFLite", "torch.onnx", "silently wrong",
            "torch.onnx only", "torch.onnx not run (pt2x matched)", "ill-conditioned reference"]
    rows = family_rows(records, families)
    total = ["all"] + [sum(r[i] for r in rows) for i in range(1, len(head))]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows + [total]]
    return "\n".join(lines)


def refusals(records: list[dict]) -> str:
    """Operators refused (or other failures), per target, with the models they stopped."""
    lines = []
    for target in TARGETS:
        by_op = collections.defaultdict(list)
        for rec in records:
            res = rec.get(target)
            if res and res["outcome"] != "match":
                for op in res.get("ops") or [res["outcome"] + ": " + res.get("error", "")[:120]]:
                    by_op[op].append(rec["spec"])
        if by_op:
            lines.append(f"\n{target}:")
            for op, specs in sorted(by_op.items(), key=lambda kv: -len(kv[1])):
                lines.append(f"  {len(specs):3d}  {op}  ({', '.join(specs[:4])}{' ...' if len(specs) > 4 else ''})")
    return "\n".join(lines)


def read_records(path: str) -> list[dict]:
    """The last line of each spec."""
    with open(path, encoding="utf-8") as f:
        return list({(r := json.loads(ln))["spec"]: r for ln in f if ln.strip()}.values())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--libs", default=",".join(LIBS), help="timm, tv (torchvision), hf (transformers)")
    ap.add_argument("--filter", help="fnmatch pattern over specs, e.g. 'timm:convit*'")
    ap.add_argument("--all", action="store_true", help="every model, not one per family")
    ap.add_argument("--per-family", type=int, default=1, help="models per family (default 1)")
    ap.add_argument("--sample", type=int, help="N specs stratified over the families")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--cheapest", type=int, help="the N smallest by parameter count, every family's first "
                    "before any family's second")
    ap.add_argument("--max-params", type=float, default=100.0, help="millions; --cheapest leaves larger models out")
    ap.add_argument("--params-cache", help="JSON of parameter counts (default: params.json beside --out)")
    ap.add_argument("--anchor", choices=("always", "on-miss"), default="always",
                    help="run torch.onnx on every model, or only where pt2x missed on some target")
    ap.add_argument("--limit", type=int)
    ap.add_argument("--jobs", type=int, default=2, help="models in parallel (one process each)")
    ap.add_argument("--timeout", type=float, default=1800.0, help="seconds per model, all targets (wall clock)")
    ap.add_argument("--size", type=int, default=64, help="input height/width where the model allows")
    ap.add_argument("--targets", default=",".join(TARGETS))
    ap.add_argument("--out", default="sweep.jsonl")
    ap.add_argument("--ray", nargs="?", const="", default=None, help="run on Ray (a cluster ADDRESS, or local)")
    ap.add_argument("--table-only", action="store_true", help="print the table of --out and stop")
    args = ap.parse_args(argv)
    entries = registry()
    families = {e["spec"]: e["family"] for e in entries}
    if not args.table_only:
        chosen = select(entries, args)
        done = done_specs(args.out)
        todo = [e for e in chosen if e["spec"] not in done]
        print(f"{len(chosen)} chosen, {len(chosen) - len(todo)} already in {args.out}, {len(todo)} to run", flush=True)
        lock = threading.Lock()

        def record(rec: dict) -> None:
            with lock, open(args.out, "a", encoding="utf-8") as f:
                f.write(json.dumps(rec) + "\n")
            cells = " ".join(f"{t}={rec.get(t, {}).get('outcome', '-')}" for t in TARGETS[:2])
            cells += f" torch_onnx={rec.get('torch_onnx', {}).get('outcome', rec.get('anchor', '-'))}"
            print(f"{rec['spec']:45s} export={rec.get('export')} {cells}", flush=True)

        (_run_ray if args.ray is not None else _run_local)(todo, args, record)
    records = read_records(args.out) if os.path.exists(args.out) else []
    print()
    print(f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {os.cpu_count()} CPUs, {len(records)} models")
    print(table(records, families))
    print(refusals(records))
    wrong = [r for r in records if any(r.get(t, {}).get("outcome") == "mismatch" for t in ("onnx", "tflite"))]
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
