"""The Model Explorer adapter on the whole model zoo: every real model loads torch-free, with torch's ids.

Not a test (tests/explorer/test_adapter.py runs the fixtures and the small zoo in CI). Each model
of tests/support/model_zoo.py, in each form (as exported, and after ``run_decompositions()``),
runs in its own subprocess: export with a dynamic batch, ``torch.export.save``, then the adapter
as Model Explorer's server runs it, where ``import torch`` fails (``explorer_check``), and the
node ids of every graph compared with the FX node names ``torch.export.load`` gives. Prints a
table and writes JSON.

    python -m scripts.explorer_zoo [--models a,b] [--forms exported,decomposed] [--timeout 900]
                                   [--out explorer-zoo.json]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the repository
SUPPORT = os.path.join(ROOT, "tests", "support")
FORMS = ("exported", "decomposed")


def worker(name: str, form: str) -> dict:
    """One model in one form (run in a child whose PYTHONPATH holds tests/support)."""
    import torch
    from explorer_check import check_well_formed, convert_torch_free, fx_node_names
    from model_zoo import MODELS, export

    zm = MODELS[name]
    torch.manual_seed(0)
    with tempfile.TemporaryDirectory(prefix="pt2x-explorer-zoo-") as d:
        path = os.path.join(d, f"{name}.pt2")
        torch.export.save(export(zm, zm.build().eval(), form), path)
        want = {k: sorted(v) for k, v in fx_node_names(torch.export.load(path)).items()}
        t = time.perf_counter()
        resp = convert_torch_free([path])[path]
        adapter_s = time.perf_counter() - t
    if "error" in resp:
        return {"model": name, "form": form, "outcome": "refused", "error": f"{resp['error']}: {resp['message'][:300]}"}
    check_well_formed(resp["graphs"])
    got = {g["id"]: sorted(n["id"] for n in g["nodes"]) for g in resp["graphs"]}
    nodes = sum(len(v) for v in got.values())
    outcome = "match" if got == want else "ids differ"
    diff = sorted(set(got.get("graph", [])) ^ set(want.get("graph", [])))[:10]
    return {"model": name, "form": form, "outcome": outcome, "graphs": len(got), "nodes": nodes,
            "namespaces": len({n["namespace"] for g in resp["graphs"] for n in g["nodes"]}),
            "adapter_process_s": round(adapter_s, 2), **({"differing_ids": diff} if diff else {})}


def run_one(name: str, form: str, timeout: float) -> dict:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([SUPPORT, os.path.dirname(ROOT), ROOT,
                                                       os.environ.get("PYTHONPATH", "")]))
    cmd = [sys.executable, "-m", "scripts.explorer_zoo", "--worker", name, form]
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env, cwd=ROOT)
    except subprocess.TimeoutExpired:
        return {"model": name, "form": form, "outcome": "timeout"}
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("{")]
    if r.returncode != 0 or not lines:
        return {"model": name, "form": form, "outcome": "crash", "error": r.stderr.strip()[-400:]}
    return json.loads(lines[-1])


def _model_names() -> list[str]:
    from scripts.run_model_zoo import model_names

    return model_names()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m scripts.explorer_zoo", description=__doc__.split("\n\n")[0])
    p.add_argument("--models", default=None, help="comma-separated zoo model names (default: all)")
    p.add_argument("--forms", default=",".join(FORMS))
    p.add_argument("--timeout", type=float, default=900.0, help="seconds per model and form")
    p.add_argument("--out", default=None, help="write the results as JSON")
    p.add_argument("--worker", nargs=2, metavar=("MODEL", "FORM"), help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.worker:
        print(json.dumps(worker(*args.worker)))
        return 0
    names = args.models.split(",") if args.models else _model_names()
    results = []
    for name in names:
        for form in args.forms.split(","):
            res = run_one(name, form, args.timeout)
            results.append(res)
            print(f"{name:34} {form:10} {res['outcome']:10} graphs {res.get('graphs', '-'):>2} "
                  f"nodes {res.get('nodes', '-'):>5} namespaces {res.get('namespaces', '-'):>4} "
                  f"adapter process {res.get('adapter_process_s', '-')} s {res.get('error', '')[:120]}", flush=True)
    ok = sum(r["outcome"] == "match" for r in results)
    print(f"{ok}/{len(results)} load torch-free with torch's node ids")
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            json.dump(results, f, indent=1)
    return 0 if ok == len(results) else 1


if __name__ == "__main__":
    sys.exit(main())
