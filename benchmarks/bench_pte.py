"""Benchmark: ``to_pte(delegate="none")`` (pt2x, torch-free) vs exir's ``to_edge(ep).to_executorch()`` on the same .pt2.

Not a test. The programs are exported by this venv's torch and saved with ``torch.export.save``:
``tests/support/pte_zoo.py``'s MLP, CNN and block, a wide MLP with 64 MB of weights, torchvision's
resnet18 at random init, and the model zoo's models (``tests/support/model_zoo.py``: weights
re-drawn, exported with its dynamic batch, as exported; ``--models zoo`` names them all). Then
every side runs in its own fresh process:

  * pt2x: ``to_pte(src, dst, delegate="none")`` in a process where ``import torch`` fails; the conversion's time
    in process (``perf_counter`` around the call), the whole process's wall time, and its peak
    RSS (``VmHWM``). The child writes bytecode (``sys.dont_write_bytecode = False``), so the
    modules ``to_pte`` imports lazily load as an installed package's do, torch's and exir's
    already being compiled;
  * exir (executorch 1.5.1): ``torch.export.load(src)`` then ``to_edge(ep).to_executorch()`` and
    the buffer written; the same three numbers (the in-process time covers to_edge, to_executorch
    and the write, not the load). Where exir cannot lower the program, its error is the row's
    exir column.

``--external-weights``: both sides write the weights to a ``.ptd`` beside the ``.pte`` (pt2x's
``to_pte(..., external_weights=True)``; exir's ``ExecutorchBackendConfig(external_constants=True)``
and ``write_tensor_data_to_file``), the runtime loads it (``data_path=``), the bytes column counts
both files, and pt2x's child also samples its own ``RssAnon`` every 0.5 ms (the memory it makes,
without the archive's mapped pages), printed as its peak.

Both files are then run in ExecuTorch's runtime with its portable kernels, in one more process, on
the example inputs: the max abs diff against torch eager of the loaded .pt2, and the median latency
of ``execute`` over ``--latency-runs`` calls after one warm-up, the two files executed in turn (so
other load on the machine weighs on both alike). Their sizes and arena sizes
(``non_const_buffer_sizes``) are printed too.

    python -m benchmarks.bench_pte [--models mlp,cnn,block,mlp_wide,resnet18|zoo|tv_resnet18,...] [--runs 3]
                                   [--latency-runs 20] [--external-weights] [--out bench-out/pte]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import textwrap

from scripts.environment import child_env, ensure_support

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

PT2X = textwrap.dedent("""
    import sys, time, json

    def hwm():  # this process's peak RSS (VmHWM: ru_maxrss would count the parent's at fork)
        with open("/proc/self/status") as f:
            return next(int(l.split()[1]) for l in f if l.startswith("VmHWM")) / 1024

    def anon():  # this process's anonymous resident memory now (RssAnon), MB
        with open("/proc/self/status") as f:
            return next(int(l.split()[1]) for l in f if l.startswith("RssAnon")) / 1024

    peak_anon, done = [0.0], []

    def sample():  # RssAnon every 0.5 ms while to_pte runs
        while not done:
            peak_anon[0] = max(peak_anon[0], anon())
            time.sleep(0.0005)

    sys.modules["torch"] = None
    # bytecode cached as an installed package has it (this machine's PYTHONDONTWRITEBYTECODE would
    # compile every module to_pte imports lazily inside the timed call, torch's and exir's not)
    sys.dont_write_bytecode = False
    t0 = time.perf_counter()
    from pt2x.converters import to_pte
    import threading
    t1 = time.perf_counter()
    before = anon()
    watcher = threading.Thread(target=sample)
    watcher.start()
    try:
        to_pte(sys.argv[1], sys.argv[2], external_weights=sys.argv[3] == "1",
               delegate="none")  # portable kernels, as exir's to_edge().to_executorch()
    except Exception as e:  # pt2x refuses this program: the row records why
        done.append(1)
        print(json.dumps({"error": f"{type(e).__name__}: {str(e).strip().splitlines()[0][:300]}"}))
        sys.exit(0)
    t2 = time.perf_counter()
    done.append(1)
    watcher.join()
    print(json.dumps({"convert_s": t2 - t1, "import_s": t1 - t0, "peak_rss_mb": hwm(),
                      "anon_before_mb": before, "peak_anon_mb": peak_anon[0]}))
""")

EXIR = textwrap.dedent("""
    import sys, time, json

    def hwm():  # this process's peak RSS (VmHWM: ru_maxrss would count the parent's at fork)
        with open("/proc/self/status") as f:
            return next(int(l.split()[1]) for l in f if l.startswith("VmHWM")) / 1024

    import os
    import torch
    from executorch.exir import ExecutorchBackendConfig, to_edge
    ep = torch.export.load(sys.argv[1])
    external = sys.argv[3] == "1"
    t1 = time.perf_counter()
    try:
        et = to_edge(ep).to_executorch(ExecutorchBackendConfig(external_constants=external))
    except Exception as e:  # exir cannot lower this program: the row records why
        print(json.dumps({"error": f"{type(e).__name__}: {str(e).strip().splitlines()[0][:300]}"}))
        sys.exit(0)
    with open(sys.argv[2], "wb") as f:
        f.write(et.buffer)
    if external:  # named after its tag; renamed after the .pte, as pt2x names it
        et.write_tensor_data_to_file(os.path.dirname(sys.argv[2]))
        os.replace(os.path.join(os.path.dirname(sys.argv[2]), "_default_external_constant.ptd"), sys.argv[2][:-4] + ".ptd")
    t2 = time.perf_counter()
    print(json.dumps({"convert_s": t2 - t1, "peak_rss_mb": hwm()}))
""")


def _programs():
    import torch

    import pte_zoo

    class Wide(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.layers = torch.nn.Sequential(*[torch.nn.Sequential(torch.nn.Linear(2048, 2048), torch.nn.ReLU())
                                                for _ in range(4)])

        def forward(self, x):
            return self.layers(x)

    def resnet18():
        from torchvision_ops import register_torchvision_ops

        register_torchvision_ops()  # the registry's torchvision beside the CPU torch (tests/support)
        import torchvision

        return torchvision.models.resnet18(weights=None)

    return {
        "mlp": (lambda: pte_zoo.module("mlp"), lambda: (torch.randn(2, 8),)),
        "cnn": (lambda: pte_zoo.module("cnn"), lambda: (torch.randn(2, 3, 16, 16),)),
        "block": (lambda: pte_zoo.module("block"), lambda: (torch.randn(2, 3, 8),)),
        "mlp_wide": (Wide, lambda: (torch.randn(4, 2048),)),
        "resnet18": (resnet18, lambda: (torch.randn(1, 3, 224, 224),)),
    }


def _export(name: str, programs: dict, src: str) -> tuple:
    """Export and save ``name`` to ``src``: one of ``programs`` at its example inputs (static), or
    a model of the zoo as ``model_zoo.check`` exports it (its weights re-drawn, a dynamic batch of
    1..8, as exported). Returns the example inputs."""
    import torch

    torch.manual_seed(0)
    if name in programs:
        make, make_inputs = programs[name]
        inputs = make_inputs()
        torch.export.save(torch.export.export(make().eval(), inputs), src)
        return inputs
    import model_zoo

    zm = model_zoo.MODELS[name]
    model = model_zoo.redraw(zm.build(), seed=0, calibrate=zm.make_input(8))
    torch.export.save(model_zoo.export(zm, model, "exported"), src)
    return (zm.make_input(2),)


def _child(code: str, *args: str) -> tuple[dict, float]:
    import time

    t = time.perf_counter()
    r = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, env=child_env(), cwd=ROOT)
    wall = time.perf_counter() - t
    if r.returncode != 0:
        raise RuntimeError(f"exit {r.returncode}: {r.stderr[-2000:]}")
    return json.loads(r.stdout.strip().splitlines()[-1]), wall


def _arena(path: str) -> int:
    from pt2x.converters.pte import schema_generated as fb

    with open(path, "rb") as f:
        p = fb.Program.GetRootAs(f.read(), 0)
    return int(p.ExecutionPlan(0).NonConstBufferSizesAsNumpy()[-1])


RUN = textwrap.dedent("""
    import os, sys, json, statistics, time
    import torch
    from executorch.runtime import Runtime
    ep = torch.export.load(sys.argv[1])
    inputs = list(torch.load(sys.argv[2]))
    runs = int(sys.argv[3])
    with torch.no_grad():
        want = ep.module()(*inputs)
    want = want if isinstance(want, (tuple, list)) else (want,)
    loaded, out = {}, {}
    for path in sys.argv[4:]:
        with open(path, "rb") as f:
            data = f.read()
        ptd = path[:-4] + ".ptd"
        program = Runtime.get().load_program(data, data_path=ptd if os.path.exists(ptd) else None)  # reads ``data`` in place
        method = program.load_method("forward")
        got = method.execute(inputs)  # also the warm-up
        loaded[path] = (data, program, method)
        out[path] = {"max_abs_diff": max(float((g - w).abs().max()) for g, w in zip(got, want)), "times": []}
    for _ in range(runs):  # the files in turn: load on the machine weighs on each alike
        for path, (_data, _program, method) in loaded.items():
            t = time.perf_counter()
            method.execute(inputs)
            out[path]["times"].append(time.perf_counter() - t)
    print(json.dumps({p: {"max_abs_diff": o["max_abs_diff"], "latency_ms": statistics.median(o["times"]) * 1e3}
                      for p, o in out.items()}))
""")


def _run_files(src: str, inputs_path: str, runs: int, ptes: list[str]) -> dict:
    """ExecuTorch's portable runs of the ``ptes`` on the saved inputs, in one child process, the files
    executed in turn ``runs`` times: each one's max abs diff against torch eager of ``src`` and its
    median latency."""
    return _child(RUN, src, inputs_path, str(runs), *ptes)[0]


def _side(row: dict, side: str, code: str, src: str, dst: str, args) -> bool:
    """Convert ``src`` to ``dst`` ``args.runs`` times with ``code``; False when the side cannot."""
    runs = [_child(code, src, dst, str(int(args.external_weights))) for _ in range(args.runs)]
    if "error" in runs[0][0]:
        row[f"{side}_error"] = runs[0][0]["error"]
        return False
    row[f"{side}_convert_s"] = statistics.median(r[0]["convert_s"] for r in runs)
    row[f"{side}_process_s"] = statistics.median(r[1] for r in runs)
    row[f"{side}_peak_rss_mb"] = max(r[0]["peak_rss_mb"] for r in runs)
    if "peak_anon_mb" in runs[0][0]:
        row[f"{side}_anon_before_mb"] = max(r[0]["anon_before_mb"] for r in runs)
        row[f"{side}_peak_anon_mb"] = max(r[0]["peak_anon_mb"] for r in runs)
    ptd = dst[:-4] + ".ptd"
    row[f"{side}_pte_bytes"] = os.path.getsize(dst) + (os.path.getsize(ptd) if args.external_weights
                                                        and os.path.exists(ptd) else 0)
    row[f"{side}_arena_bytes"] = _arena(dst)
    return True


def _pair(r: dict, key: str, fmt: str) -> str:
    exir = r.get(f"exir_{key}")
    return f"{format(r[f'pt2x_{key}'], fmt)} / {'-' if exir is None else format(exir, fmt)}"


def _table(rows: list[dict]) -> str:
    lines = ["| model | .pt2 MB | pt2x convert s | exir convert s | exir / pt2x | pt2x process s | exir process s "
             "| pt2x peak RSS MB | exir peak RSS MB | .pte bytes pt2x / exir | arena bytes pt2x / exir "
             "| portable latency ms pt2x / exir | max abs diff pt2x / exir |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if "pt2x_error" in r:
            lines.append(f"| {r['model']} | {r['pt2_mb']:.1f} | refused: {r['pt2x_error'][:80]} |" + " - |" * 10)
            continue
        failed = "exir_error" in r
        cells = [r["model"], f"{r['pt2_mb']:.1f}", f"{r['pt2x_convert_s']:.3f}",
                 f"fails: {r['exir_error'][:80]}" if failed else f"{r['exir_convert_s']:.3f}",
                 "-" if failed else f"{r['convert_ratio_exir_over_pt2x']:.0f}x", f"{r['pt2x_process_s']:.2f}",
                 "-" if failed else f"{r['exir_process_s']:.2f}", f"{r['pt2x_peak_rss_mb']:.0f}",
                 "-" if failed else f"{r['exir_peak_rss_mb']:.0f}", _pair(r, "pte_bytes", "d"),
                 _pair(r, "arena_bytes", "d"), _pair(r, "latency_ms", ".2f"), _pair(r, "max_abs_diff", ".2e")]
        lines.append("| " + " | ".join(c.replace("|", "/") for c in cells) + " |")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="mlp,cnn,block,mlp_wide,resnet18",
                    help="comma-separated: mlp, cnn, block, mlp_wide, resnet18, the model zoo's names, or zoo (all)")
    ap.add_argument("--runs", type=int, default=3, help="conversions per side (medians)")
    ap.add_argument("--latency-runs", type=int, default=20, help="executions per file (median latency)")
    ap.add_argument("--external-weights", action="store_true", help="weights in a .ptd beside each .pte")
    ap.add_argument("--out", default=os.path.join(ROOT, "bench-out", "pte"))
    args = ap.parse_args(argv)
    ensure_support("benchmarks.bench_pte")  # pte_zoo, model_zoo, torchvision_ops (tests/support) on PYTHONPATH
    import torch

    os.makedirs(args.out, exist_ok=True)
    programs = _programs()
    names = args.models.split(",")
    if "zoo" in names:
        import model_zoo

        at = names.index("zoo")
        names[at:at + 1] = list(model_zoo.MODELS)
    rows = []
    for name in names:
        src = os.path.join(args.out, f"{name}.pt2")
        inputs = _export(name, programs, src)
        inputs_path = os.path.join(args.out, f"{name}.inputs.pt")
        torch.save(tuple(inputs), inputs_path)
        row = {"model": name, "pt2_mb": os.path.getsize(src) / 2**20}
        ext = ".ext" if args.external_weights else ""
        files = {side: os.path.join(args.out, f"{name}.{side}{ext}.pte") for side in ("pt2x", "exir")}
        made = [side for side, code in (("pt2x", PT2X), ("exir", EXIR))
                if _side(row, side, code, src, files[side], args)]
        ran = _run_files(src, inputs_path, args.latency_runs, [files[side] for side in made]) if made else {}
        for side in made:
            row[f"{side}_max_abs_diff"] = ran[files[side]]["max_abs_diff"]
            row[f"{side}_latency_ms"] = ran[files[side]]["latency_ms"]
        if "exir_error" not in row and "pt2x_error" not in row:
            row["convert_ratio_exir_over_pt2x"] = row["exir_convert_s"] / row["pt2x_convert_s"]
        rows.append(row)
        print(json.dumps(row), flush=True)
    print()
    print(_table(rows))
    with open(os.path.join(args.out, "results.json"), "w") as f:
        json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
