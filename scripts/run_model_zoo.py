"""The model-zoo parity suite, whole: real torchvision/timm/transformers models, random init.

Not a test (tests/converters/test_model_zoo.py and tests/converters/pte/test_pte_model_zoo.py run
CI subsets). Each model and form (as exported, and after ``run_decompositions()``) runs in its
own subprocess with a timeout, so one crash or hang does not end the run: export with a dynamic
batch, save, convert with pt2x where ``import torch`` fails, run against torch eager on batches 1
and 3. ``--target onnx`` (the default): ``to_onnx`` in ONNX Runtime CPU (and, with
``--torch-onnx``, the same for ``torch.onnx.export(ep, dynamo=True)`` as a report column; needs
the ``bench`` extra). ``--target pte``: ``to_pte`` in ExecuTorch's runtime, each model ending as
match, wrong, refused (the operators the report names) or error. The models and the check live
in tests/support/model_zoo.py. Prints a table and writes JSON; exits 1 when a model is silently
wrong (mismatch, wrong) or, on pte, errors.

    python -m scripts.run_model_zoo [--target onnx|pte] [--models a,b] [--forms exported,decomposed]
                              [--torch-onnx] [--timeout 600] [--out model-zoo.json]
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import platform
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the repository
WORKER = os.path.join(ROOT, "tests", "support", "model_zoo.py")
FORMS = ("exported", "decomposed")
TARGETS = ("onnx", "pte")
# outcomes that fail the run: a silently wrong model; on pte also a file the runtime rejects or fails
# running, and a worker that crashed
FAILURES = {"onnx": ("mismatch",), "pte": ("wrong", "error", "crash")}


def model_names() -> list[str]:
    """The zoo's model names, read from the worker's source (this script imports no torch)."""
    tree = ast.parse(open(WORKER, encoding="utf-8").read())
    names = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "ZooModel" and node.args:
            first = node.args[0]
            if isinstance(first, ast.Constant) and isinstance(first.value, str):
                names.append(first.value)
    return names


def run_one(name: str, form: str, *, torch_onnx: bool, timeout: float, target: str = "onnx") -> dict:
    cmd = [sys.executable, WORKER, name, form, "--target", target] + (["--torch-onnx"] if torch_onnx else [])
    env = dict(os.environ, PYTHONPATH=os.path.dirname(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    t = time.perf_counter()
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        return {"model": name, "form": form, "pt2x": {"outcome": "timeout", "error": f"over {timeout:.0f} s"}}
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("{")]
    if r.returncode != 0 or not lines:
        return {"model": name, "form": form,
                "pt2x": {"outcome": "crash", "error": f"rc={r.returncode}: {r.stderr.strip()[-400:]}"}}
    out = json.loads(lines[-1])
    out["wall_s"] = time.perf_counter() - t
    return out


def _cell(res: dict | None) -> str:
    if res is None:
        return "-"
    o = res["outcome"]
    if o == "match":
        return "match (max diff %.2g)" % max(b["max_abs_diff"] for b in res["batches"].values())
    if o == "refused" and res.get("ops"):
        return "refused: " + ", ".join(f"{op} x{v['count']}" for op, v in res["ops"].items())
    at = f" at {res['at']}" if res.get("at") else ""
    return f"{o}{at}: {res.get('error', '')[:70]}"


def table(results: list[dict], torch_onnx: bool) -> str:
    head = ["model", "form", "pt2x"] + (["torch.onnx"] if torch_onnx else [])
    rows = [[r["model"], r["form"], _cell(r.get("pt2x"))] + ([_cell(r.get("torch_onnx"))] if torch_onnx else [])
            for r in results]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(c.replace("|", "/") for c in row) + " |" for row in rows]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", help="comma-separated subset (default: all): " + ",".join(model_names()))
    ap.add_argument("--forms", default=",".join(FORMS))
    ap.add_argument("--target", choices=TARGETS, default="onnx", help="the converter and runtime to check")
    ap.add_argument("--torch-onnx", action="store_true", help="also convert with torch.onnx.export (report column)")
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds per model and form")
    ap.add_argument("--out", default="model-zoo.json")
    args = ap.parse_args(argv)
    if args.torch_onnx and args.target != "onnx":
        ap.error("--torch-onnx is a column of the onnx target")
    names = args.models.split(",") if args.models else model_names()
    unknown = sorted(set(names) - set(model_names()))
    if unknown:
        ap.error(f"unknown models: {', '.join(unknown)}")
    results = []
    for name in names:
        for form in args.forms.split(","):
            res = run_one(name, form, torch_onnx=args.torch_onnx, timeout=args.timeout, target=args.target)
            print(f"{name:34s} {form:10s} {_cell(res.get('pt2x'))}", flush=True)
            results.append(res)
    meta = {"date": time.strftime("%Y-%m-%d"), "machine": f"{platform.machine()}, {os.cpu_count()} CPUs",
            "python": platform.python_version(), "target": args.target}
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump({"meta": meta, "results": results}, f, indent=1)
    print()
    print(table(results, args.torch_onnx))
    counts: dict[str, int] = {}
    for r in results:
        o = r.get("pt2x", {}).get("outcome", "?")
        counts[o] = counts.get(o, 0) + 1
    print()
    print(json.dumps(counts))
    bad = [r for r in results if r.get("pt2x", {}).get("outcome") in FAILURES[args.target]]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
