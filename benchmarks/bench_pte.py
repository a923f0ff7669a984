"""Benchmark: ``to_pte(delegate="none")`` (pt2x, torch-free) vs exir's ``to_edge(ep).to_executorch()`` on the same .pt2.

Not a test. The programs are exported by this venv's torch and saved with ``torch.export.save``
(``tests/support/pte_zoo.py``'s MLP, CNN and block, a wide MLP with 64 MB of weights, and
torchvision's resnet18 at random init), then every side runs in its own fresh process:

  * pt2x: ``to_pte(src, dst, delegate="none")`` in a process where ``import torch`` fails; the conversion's time
    in process (``perf_counter`` around the call), the whole process's wall time, and its peak
    RSS (``VmHWM``);
  * exir (executorch 1.5.1): ``torch.export.load(src)`` then ``to_edge(ep).to_executorch()`` and
    the buffer written; the same three numbers (the in-process time covers to_edge, to_executorch
    and the write, not the load).

Both files are then run in ExecuTorch's runtime (another process) on inputs of the example
shapes (max abs diff against torch eager of the loaded .pt2), and their sizes and arena sizes
(``non_const_buffer_sizes``) are printed.

    python -m benchmarks.bench_pte [--models mlp,cnn,block,mlp_wide,resnet18] [--runs 3] [--out bench-out/pte]
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

    sys.modules["torch"] = None
    t0 = time.perf_counter()
    from pt2x.converters import to_pte
    t1 = time.perf_counter()
    to_pte(sys.argv[1], sys.argv[2], delegate="none")  # portable kernels, as exir's to_edge().to_executorch()
    t2 = time.perf_counter()
    print(json.dumps({"convert_s": t2 - t1, "import_s": t1 - t0,
                      "peak_rss_mb": hwm()}))
""")

EXIR = textwrap.dedent("""
    import sys, time, json

    def hwm():  # this process's peak RSS (VmHWM: ru_maxrss would count the parent's at fork)
        with open("/proc/self/status") as f:
            return next(int(l.split()[1]) for l in f if l.startswith("VmHWM")) / 1024

    import torch
    from executorch.exir import to_edge
    ep = torch.export.load(sys.argv[1])
    t1 = time.perf_counter()
    et = to_edge(ep).to_executorch()
    with open(sys.argv[2], "wb") as f:
        f.write(et.buffer)
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
    import sys, json
    import torch
    from executorch.runtime import Runtime
    ep = torch.export.load(sys.argv[1])
    torch.manual_seed(0)
    inputs = [torch.randn(*[int(d) for d in shape.split("x")]) for shape in sys.argv[3:]]
    with open(sys.argv[2], "rb") as f:
        data = f.read()
    program = Runtime.get().load_program(data)  # reads ``data`` in place: keep both referenced
    method = program.load_method("forward")
    got = method.execute(inputs)
    with torch.no_grad():
        want = ep.module()(*inputs)
    want = want if isinstance(want, (tuple, list)) else (want,)
    print(json.dumps({"max_abs_diff": max(float((g - w).abs().max()) for g, w in zip(got, want))}))
""")


def _max_diff(src: str, pte: str, inputs) -> float:
    """ExecuTorch's run of ``pte`` against torch eager of ``src``, in a child process."""
    shapes = ["x".join(map(str, t.shape)) for t in inputs]
    return _child(RUN, src, pte, *shapes)[0]["max_abs_diff"]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="mlp,cnn,block,mlp_wide,resnet18")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--out", default=os.path.join(ROOT, "bench-out", "pte"))
    args = ap.parse_args(argv)
    ensure_support("benchmarks.bench_pte")  # pte_zoo and torchvision_ops (tests/support) on PYTHONPATH
    import torch

    os.makedirs(args.out, exist_ok=True)
    programs = _programs()
    rows = []
    for name in args.models.split(","):
        make, make_inputs = programs[name]
        torch.manual_seed(0)
        m = make().eval()
        inputs = make_inputs()
        src = os.path.join(args.out, f"{name}.pt2")
        torch.export.save(torch.export.export(m, inputs), src)
        row = {"model": name, "pt2_mb": os.path.getsize(src) / 2**20}
        for side, code in (("pt2x", PT2X), ("exir", EXIR)):
            dst = os.path.join(args.out, f"{name}.{side}.pte")
            runs = [_child(code, src, dst) for _ in range(args.runs)]
            row[f"{side}_convert_s"] = statistics.median(r[0]["convert_s"] for r in runs)
            row[f"{side}_process_s"] = statistics.median(r[1] for r in runs)
            row[f"{side}_peak_rss_mb"] = max(r[0]["peak_rss_mb"] for r in runs)
            row[f"{side}_pte_bytes"] = os.path.getsize(dst)
            row[f"{side}_arena_bytes"] = _arena(dst)
            row[f"{side}_max_abs_diff"] = _max_diff(src, dst, inputs)
        row["convert_ratio_exir_over_pt2x"] = row["exir_convert_s"] / row["pt2x_convert_s"]
        rows.append(row)
        print(json.dumps(row), flush=True)
    print()
    print("| model | .pt2 MB | pt2x convert s | exir convert s | exir/pt2x | pt2x process s | exir process s "
          "| pt2x peak RSS MB | exir peak RSS MB | .pte bytes pt2x / exir | arena pt2x / exir | max abs diff pt2x / exir |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['model']} | {r['pt2_mb']:.1f} | {r['pt2x_convert_s']:.3f} | {r['exir_convert_s']:.3f} | "
              f"{r['convert_ratio_exir_over_pt2x']:.0f}x | {r['pt2x_process_s']:.2f} | {r['exir_process_s']:.2f} | "
              f"{r['pt2x_peak_rss_mb']:.0f} | {r['exir_peak_rss_mb']:.0f} | {r['pt2x_pte_bytes']} / {r['exir_pte_bytes']} | "
              f"{r['pt2x_arena_bytes']} / {r['exir_arena_bytes']} | {r['pt2x_max_abs_diff']:.2e} / {r['exir_max_abs_diff']:.2e} |")
    with open(os.path.join(args.out, "results.json"), "w") as f:
        json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
