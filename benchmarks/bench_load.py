"""Benchmark: cold, torch-free ``pt2x.serde.load`` against ``import torch; torch.export.load``.

Each measurement is a fresh Python process (interpreter start, imports, load, every weight
touched), run one at a time so thread pools never compete; wall time, and CPU time (user +
sys) and peak RSS from the child's own rusage. Every child reads its modules' bytecode from
one cache in ``--out`` (``PYTHONPYCACHEPREFIX``, filled by a discarded first run of each
side), as an installed package's bytecode is written once: pip wrote torch's at install, while
pt2x here is an editable checkout, which ``PYTHONDONTWRITEBYTECODE`` would otherwise make
every run compile anew. A third row is the floor: a bare zipfile + json + numpy
memmap script that builds no typed objects.

    python -m benchmarks.bench_load [--runs 5] [--out bench-out]

Needs torch (to export and save the model once). Prints medians and ratios.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

MODEL = "encoder12.pt2"

PT2X = """
import sys, numpy as np
import pt2x.serde as serde
a = serde.load(sys.argv[1])
m = a.models["model"]
total = 0.0
for arr in list(m.state_dict.values()) + list(m.constants.values()):
    total += float(arr.sum(dtype=np.float64))  # touch every byte
print(len(m.program.graph_module.graph.nodes), total)
"""

TORCH = """
import sys, torch
ep = torch.export.load(sys.argv[1])
total = 0.0
for t in list(ep.state_dict.values()) + [c for c in ep.constants.values() if isinstance(c, torch.Tensor)]:
    total += float(t.double().sum())
print(len(ep.graph.nodes), total)
"""

FLOOR = """
import sys, json, struct, zipfile, numpy as np
p = sys.argv[1]
z = zipfile.ZipFile(p)
raw = open(p, "rb")
root = z.namelist()[0].split("/")[0]
prog = json.loads(z.read(f"{root}/models/model.json"))
cfg = json.loads(z.read(f"{root}/data/weights/model_weights_config.json"))["config"]
total = 0.0
for fqn, meta in cfg.items():
    info = z.getinfo(f"{root}/data/weights/{meta['path_name']}")
    raw.seek(info.header_offset + 26)
    n, e = struct.unpack("<HH", raw.read(4))  # the local header's lengths, not the directory's
    off = info.header_offset + 30 + n + e
    if info.file_size:
        total += float(np.memmap(p, dtype=np.float32, mode="r", offset=off, shape=(info.file_size // 4,)).sum(dtype=np.float64))
print(len(prog["graph_module"]["graph"]["nodes"]), total)
"""


def make_model(path: str) -> None:
    import torch

    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(256, 8, 1024, dropout=0.0, batch_first=True)
    model = torch.nn.TransformerEncoder(layer, 12, enable_nested_tensor=False).eval()
    x = torch.randn(2, 16, 256)
    ep = torch.export.export(model, (x,), dynamic_shapes=({0: torch.export.Dim("batch", max=64)},))
    torch.export.save(ep, path)


def _env(out: str) -> dict:
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPYCACHEPREFIX=os.path.abspath(os.path.join(out, "pycache")))
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


ENV = _env("bench-out")


def run_once(code: str, path: str) -> tuple[float, str]:
    """(wall seconds, stdout) of one fresh process."""
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", code, path], capture_output=True, text=True, env=ENV)
    wall = time.perf_counter() - t0
    if proc.returncode:
        raise SystemExit(f"child failed:\n{proc.stderr}")
    return wall, proc.stdout.strip()


def measure(code: str, path: str, runs: int) -> tuple[float, float, float, str]:
    run_once(code, path)  # fills the bytecode cache; not counted
    walls, rss, cpus, out = [], [], [], ""
    for _ in range(runs):
        w, out = run_once(code, path)
        walls.append(w)
        r, c = _rusage(code, path)
        rss.append(r)
        cpus.append(c)
    return statistics.median(walls), statistics.median(rss), statistics.median(cpus), out


def _rusage(code: str, path: str) -> tuple[float, float]:
    """(peak RSS in MiB, CPU seconds) of one run, from the rusage of a wrapper process's child."""
    wrapper = (
        "import resource, subprocess, sys\n"
        "subprocess.run([sys.executable, '-c', sys.argv[1], sys.argv[2]], check=True, stdout=subprocess.DEVNULL)\n"
        "r = resource.getrusage(resource.RUSAGE_CHILDREN)\n"
        "print(r.ru_maxrss, r.ru_utime + r.ru_stime)\n"
    )
    out = subprocess.run([sys.executable, "-c", wrapper, code, path], capture_output=True, text=True, check=True, env=ENV)
    rss, cpu = out.stdout.split()
    return int(rss) / 1024, float(cpu)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--out", default="bench-out")
    args = ap.parse_args()
    global ENV
    ENV = _env(args.out)
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, MODEL)
    if not os.path.exists(path):
        make_model(path)
    print(f"model: 12-layer nn.TransformerEncoder (d_model 256, ff 1024), {os.path.getsize(path) / 1e6:.1f} MB; {args.runs} cold runs each")
    rows = {}
    for name, code in (("torch.export.load", TORCH), ("pt2x.serde.load", PT2X), ("zipfile+json floor", FLOOR)):
        rows[name] = measure(code, path, args.runs)
        wall, rss, cpu, out = rows[name]
        print(f"  {name:<20} wall {wall:6.3f} s   CPU {cpu:6.3f} s   peak RSS {rss:6.1f} MiB   ({out})")
    tw, tr, tc, _ = rows["torch.export.load"]
    pw, pr, pc, _ = rows["pt2x.serde.load"]
    fw, fr, fc, _ = rows["zipfile+json floor"]
    print(f"pt2x vs torch: {tw / pw:.1f}x faster (wall), {tc / pc:.1f}x (CPU), {pr / tr:.2f}x the memory "
          f"(goal: >= 25x, <= 0.25x); load average {os.getloadavg()[0]:.1f}")
    print(f"pt2x vs floor: {pw / fw:.2f}x the time, {pc / fc:.2f}x the CPU, {pr / fr:.2f}x the memory")


if __name__ == "__main__":
    main()
