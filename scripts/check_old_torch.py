"""Do the files pt2x writes for torch 2.5-2.8 load and run in those real releases? (issues 13, 24)

Not a test: it needs venvs with the real old wheels (several GB of CUDA builds each), so it
stays out of CI and its result table goes in docs/schema-compat.md. Three steps:

1. ``--make-venvs``: ``<venvs>/torch-<release>`` with ``pip install torch==<release> numpy``
   (skipped where the venv already imports torch).
2. In this interpreter (the test venv's torch): every zoo program (tests/support/zoo.py; with
   ``--model-zoo``, also tests/support/model_zoo.py's torchvision/timm/HF models) is exported,
   saved with pt2x, and written with pt2x's planner for each target schema (8.8 for torch 2.8,
   8.2 for torch 2.6, 7.3 for torch 2.5), with two input sets and the outputs this torch computes
   for each (in order, by one module) in an ``.npz``. Where the planner refuses, its blockers are
   recorded and no file is written.
3. In each old venv, ``tests/support/old_torch_worker.py`` loads every written file with
   ``torch.export.load``, compares its outputs on both input sets, and checks that
   ``torch.export.save`` of the loaded program loads and runs again.

    python -m scripts.check_old_torch [--venvs /work/venvs] [--releases 2.8.0,2.7.1,2.6.0,2.5.1]
        [--cases a,b] [--exportdb] [--model-zoo all|a,b] [--make-venvs] [--work DIR] [--json OUT] [--markdown OUT]

This script imports no torch itself; the zoo modules it loads do (as the tests do).
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import platform
import subprocess
import sys
import tempfile
import time

from scripts.environment import ensure_support

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the repository
SUPPORT = os.path.join(ROOT, "tests", "support")
WORKER = os.path.join(SUPPORT, "old_torch_worker.py")
RELEASES = ("2.8.0", "2.7.1", "2.6.0", "2.5.1")
"""The releases this script checks (the schema written for each: ``target_schema``)."""
DEFAULT_RELEASES = "2.8.0,2.6.0"
DEEP_TOLERANCE = {"rtol": 1e-4, "atol": 1e-4}
"""The model zoo's deep nets against another torch build's CPU kernels (reassociation across
dozens of layers); the zoo's small programs keep the worker's float32 default."""


def target_schema(release: str) -> tuple[int, int]:
    """The schema pt2x writes for torch ``release`` (``serde.compat.releases``' table)."""
    from pt2x.serde.compat.releases import parse_target

    return parse_target(f"torch=={release}")


# ------------------------------------------------------------------------ venvs


def venv_python(venvs: str, release: str) -> str:
    return os.path.join(venvs, f"torch-{release}", "bin", "python")


def torch_version(python: str) -> str | None:
    """``torch.__version__`` in ``python``'s environment, or None when it has no torch."""
    if not os.path.exists(python):
        return None
    r = subprocess.run([python, "-c", "import torch; print(torch.__version__)"], capture_output=True, text=True, timeout=300)
    return r.stdout.strip() if r.returncode == 0 else None


def make_venv(venvs: str, release: str) -> None:
    """``<venvs>/torch-<release>`` with that torch and numpy, unless it already imports torch."""
    python = venv_python(venvs, release)
    if torch_version(python):
        return
    folder = os.path.dirname(os.path.dirname(python))
    subprocess.run([sys.executable, "-m", "venv", folder], check=True)
    subprocess.run([python, "-m", "pip", "install", "-q", f"torch=={release}", "numpy"], check=True)


# ------------------------------------------------------------------ tree coding


def encode(x, arrays: dict, prefix: str):
    """A JSON tree for inputs ``x``; tensors go to ``arrays`` (bfloat16 as float32, dtype kept)."""
    if hasattr(x, "detach") and hasattr(x, "dtype"):
        name = f"{prefix}{len(arrays)}"
        dtype = str(x.dtype).removeprefix("torch.")
        t = x.detach().cpu()
        arrays[name] = (t.float() if dtype == "bfloat16" else t).numpy().copy()
        return {"tensor": name, "dtype": dtype}
    if isinstance(x, tuple):
        return {"tuple": [encode(v, arrays, prefix) for v in x]}
    if isinstance(x, list):
        return {"list": [encode(v, arrays, prefix) for v in x]}
    if isinstance(x, dict):
        return {"dict": [[k, encode(v, arrays, prefix)] for k, v in x.items()]}
    return {"value": x}


def output_leaves(x) -> list:
    """Outputs flattened as the worker flattens them (tensors as numpy, bfloat16 as float32)."""
    import numpy as np

    if hasattr(x, "detach") and hasattr(x, "dtype"):
        t = x.detach().cpu()
        return [(t.float() if str(t.dtype) == "torch.bfloat16" else t).numpy().copy()]
    if isinstance(x, (tuple, list)):
        return [leaf for v in x for leaf in output_leaves(v)]
    if isinstance(x, dict):
        return [leaf for v in x.values() for leaf in output_leaves(v)]
    return [] if x is None else [np.asarray(x)]


def clone_tree(x):
    if hasattr(x, "clone") and hasattr(x, "dtype"):
        return x.clone()
    if isinstance(x, (tuple, list)):
        return type(x)(clone_tree(v) for v in x)
    if isinstance(x, dict):
        return {k: clone_tree(v) for k, v in x.items()}
    return x


# ---------------------------------------------------------------- the new side


def perturbed(x, gen):
    """``x`` with every floating-point tensor re-drawn (same shape and dtype); the rest as is
    (integer tensors are often indices, Python values configuration)."""
    if hasattr(x, "dtype") and hasattr(x, "is_floating_point"):
        import torch

        return torch.randn(x.shape, generator=gen).to(x.dtype) if x.is_floating_point() else x.clone()
    if isinstance(x, (tuple, list)):
        return type(x)(perturbed(v, gen) for v in x)
    if isinstance(x, dict):
        return {k: perturbed(v, gen) for k, v in x.items()}
    return x


def zoo_programs(names: list[str]):
    """(name, ExportedProgram or the reason it is not exportable, two input sets) for zoo cases:
    the example inputs, and the case's second inputs where it has them, else the example inputs
    with their floats re-drawn (seed 1)."""
    import torch

    import zoo  # the tests' zoo (imports torch; tests/support, see main)

    for name in names:
        try:
            ep = zoo.exported(name)
        except zoo.NotExportable as e:
            yield name, f"not exportable here: {e}", None, None
            continue
        case = zoo.all_cases()[name]
        first = ep.example_inputs
        if case.second_args is not None:
            second = (case.second_args(), case.second_kwargs() if case.second_kwargs else first[1])
        else:
            second = perturbed(first, torch.Generator().manual_seed(1))
        yield name, ep, [first, second], None


def model_zoo_programs(names: list[str] | None):
    """The model zoo's third-party models (tests/support/model_zoo.py: torchvision, timm, HF
    transformers; random weights, no downloads), exported with a dynamic batch; inputs at batch 1 and 3."""
    import model_zoo  # tests/support (see main)

    for name in names or list(model_zoo.MODELS):
        zm = model_zoo.MODELS[name]
        try:
            model = model_zoo.redraw(zm.build(), calibrate=zm.make_input(4))
            ep = model_zoo.export(zm, model, "exported")
        except Exception as e:  # noqa: BLE001 - reported in the table
            yield name, f"not exportable here: {type(e).__name__}: {str(e)[:160]}", None, None
            continue
        yield name, ep, [((zm.make_input(b),), {}) for b in model_zoo.BATCHES], DEEP_TOLERANCE


def write_files(programs, targets: dict[str, tuple[int, int]], work: str) -> dict:
    """Save and plan every program: ``{case: {"targets": {release: {...}}, "error"}}`` plus manifests.

    ``programs`` yields (name, ExportedProgram or an error text, input sets, the worker's
    tolerances or None for its float32 default). The outputs of each
    set are computed here, in order, by one module (a program that mutates its buffers carries
    its state from the first set into the second; the worker runs them the same way).
    """
    import numpy as np

    from pt2x.serde import save
    from pt2x.serde.compat.plan import TargetNotWritable, write_for_target

    results: dict = {}
    manifests: dict[str, list] = {r: [] for r in targets}
    for name, ep, input_sets, tolerance in programs:
        row: dict = {"targets": {}, "error": None}
        results[name] = row
        if isinstance(ep, str):
            row["error"] = ep
            continue
        src = os.path.join(work, f"{name}.pt2")
        save(ep, src)  # before running: a mutating program advances its buffers when run
        arrays: dict = {}
        trees = []
        module = ep.module()
        for k, (args, kwargs) in enumerate(input_sets):
            trees.append(encode((clone_tree(args), clone_tree(kwargs)), arrays, f"in{k}_"))
            outputs = output_leaves(module(*clone_tree(args), **clone_tree(kwargs)))
            arrays.update({f"out{k}_{i}": a for i, a in enumerate(outputs)})
        npz = os.path.join(work, f"{name}.npz")
        np.savez(npz, **arrays)
        for release, version in targets.items():
            dst = os.path.join(work, f"{name}-{version[0]}.{version[1]}.pt2")
            try:
                plan = write_for_target(src, dst, version)
            except TargetNotWritable as e:
                row["targets"][release] = {"written": False, "blockers": [str(f) for f in e.plan.blockers]}
                continue
            row["targets"][release] = {"written": True, "warnings": sorted({f.code for f in plan.findings})}
            entry = {"case": name, "file": dst, "npz": npz, "inputs": trees}
            manifests[release].append({**entry, **(tolerance or {})})
    for release, entries in manifests.items():
        with open(os.path.join(work, f"manifest-{release}.json"), "w", encoding="utf-8") as f:
            json.dump(entries, f)
    return results


# ---------------------------------------------------------------- the old side


def check_release(python: str, manifest: str, timeout: float) -> dict[str, dict]:
    """Run the worker in the old venv: ``{case: result}``; a crash marks every case not yet reported."""
    r = subprocess.run([python, WORKER, manifest], capture_output=True, text=True, timeout=timeout)
    out = {}
    for line in r.stdout.splitlines():
        if line.startswith("{"):
            row = json.loads(line)
            out[row["case"]] = row
    with open(manifest, encoding="utf-8") as f:
        for entry in json.load(f):
            if entry["case"] not in out:
                out[entry["case"]] = {"case": entry["case"], "load": False, "outputs": False, "resave": False,
                                      "error": f"worker exited {r.returncode}: {r.stderr.strip()[-300:]}"}
    return out


# ------------------------------------------------------------------------ report


def _cell(target: dict | None, check: dict | None) -> str:
    if target is None:
        return "-"
    if not target["written"]:
        return "refused: " + "; ".join(b.split(" [")[0][:90] for b in target["blockers"][:2])
    if check is None:
        return "written, not checked"
    if check["resave"]:
        return "loads, outputs equal, re-saves"
    if check["outputs"]:
        return "loads, outputs equal; re-save FAILED: " + (check["error"] or "")[:120]
    return ("loads; outputs DIFFER: " if check["load"] else "load FAILED: ") + (check["error"] or "")[:160]


def markdown(results: dict, checks: dict, versions: dict) -> str:
    releases = list(versions)
    schemas = {r: "%d.%d" % target_schema(r) for r in releases}
    head = "| program | " + " | ".join(f"torch {versions[r]} (schema {schemas[r]})" for r in releases) + " |"
    lines = [head, "|" + " --- |" * (len(releases) + 1)]
    for name, row in results.items():
        if row["error"]:
            lines.append(f"| {name} | " + " | ".join(row["error"][:80] for _ in releases) + " |")
            continue
        cells = [_cell(row["targets"].get(r), checks.get(r, {}).get(name)) for r in releases]
        lines.append(f"| {name} | " + " | ".join(c.replace("|", "/") for c in cells) + " |")
    return "\n".join(lines)


def summary(results: dict, checks: dict, releases: list[str]) -> dict:
    out = {}
    for r in releases:
        rows = [row["targets"].get(r) for row in results.values() if not row["error"]]
        written = [n for n, row in results.items() if not row["error"] and row["targets"][r]["written"]]
        good = [n for n in written if checks.get(r, {}).get(n, {}).get("resave")]
        out[r] = {"programs": len(rows), "written": len(written), "refused": len(rows) - len(written),
                  "loaded_equal_resaved": len(good), "failed": sorted(set(written) - set(good))}
    return out


def main(argv: list[str] | None = None) -> int:
    ensure_support("scripts.check_old_torch")  # the tests' zoo (tests/support) on PYTHONPATH
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--venvs", default="/work/venvs", help="folder holding torch-<release>/ venvs")
    p.add_argument("--releases", default=DEFAULT_RELEASES, help="comma-separated, from " + ", ".join(RELEASES))
    p.add_argument("--cases", default=None, help="comma-separated zoo programs (default: the zoo's own cases)")
    p.add_argument("--exportdb", action="store_true", help="also every ExportDB example the zoo holds")
    p.add_argument("--model-zoo", default=None, metavar="NAMES",
                   help="also the model zoo's third-party models (torchvision, timm, HF): 'all' or comma-separated names")
    p.add_argument("--make-venvs", action="store_true", help="create missing venvs with pip install torch==<release>")
    p.add_argument("--work", default=None, help="folder for the written files (default: a temporary one)")
    p.add_argument("--timeout", type=float, default=1800, help="seconds for each old venv's worker")
    p.add_argument("--json", default=None, help="write the full results here")
    p.add_argument("--markdown", default=None, help="write the result table here")
    args = p.parse_args(argv)

    releases = [r.strip() for r in args.releases.split(",") if r.strip()]
    unknown = [r for r in releases if r not in RELEASES]
    if unknown:
        p.error(f"not a release this script checks: {unknown}; known: {list(RELEASES)}")
    if args.make_venvs:
        for r in releases:
            make_venv(args.venvs, r)
    versions = {}
    for r in releases:
        versions[r] = torch_version(venv_python(args.venvs, r))
        if versions[r] is None:
            p.error(f"{venv_python(args.venvs, r)} has no torch; run with --make-venvs")

    import zoo

    names = args.cases.split(",") if args.cases else [c.name for c in zoo.CUSTOM_CASES]
    if args.exportdb and not args.cases:
        names += [c.name for c in zoo.exportdb_cases()]
    work = args.work or tempfile.mkdtemp(prefix="pt2x-old-torch-")
    os.makedirs(work, exist_ok=True)
    t0 = time.time()
    programs = zoo_programs(names)
    if args.model_zoo:
        chosen = None if args.model_zoo == "all" else args.model_zoo.split(",")
        programs = itertools.chain(programs, model_zoo_programs(chosen))
    results = write_files(programs, {r: target_schema(r) for r in releases}, work)
    checks = {r: check_release(venv_python(args.venvs, r), os.path.join(work, f"manifest-{r}.json"), args.timeout)
              for r in releases}
    report = {
        "date": time.strftime("%Y-%m-%d", time.gmtime()),
        "machine": f"{platform.machine()} {platform.system()}, {os.cpu_count()} cores",
        "exporting_torch": sys.modules["torch"].__version__,  # imported by the zoo
        "old_torch": versions,
        "seconds": round(time.time() - t0, 1),
        "summary": summary(results, checks, releases),
        "results": results,
        "checks": checks,
    }
    table = markdown(results, checks, versions)
    print(table)
    print(json.dumps({k: report[k] for k in ("date", "machine", "exporting_torch", "old_torch", "seconds", "summary")}, indent=2))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(report, f, indent=2)
    if args.markdown:
        with open(args.markdown, "w", encoding="utf-8") as f:
            f.write(table + "\n")
    failed = any(s["failed"] for s in report["summary"].values())
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
