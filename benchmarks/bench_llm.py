"""Benchmark: converting LLM-size decoders (0.25-6 GB of float32 weights), time and memory.

Not a test. For each size the script exports transformers' ``LlamaForCausalLM`` at random
init (a ``LlamaConfig`` built here, no downloads) with a dynamic batch and sequence, saves it
with ``torch.export.save`` and keeps it in ``--out`` (made once, reused), together with
torch eager's logits for two short token sequences (batch 1 and 2, ``SEQ`` tokens). Few
layers of large width: the weights hit the size, the graph stays small, exporting is cheap.
The generator is a child process too (peak RSS about the weights plus torch: a 6 GB point
needs ~7 GB of RAM).

Then each side converts the same .pt2, each in its own child process, one at a time:

  * ``pt2x-onnx``: ``python -m pt2x convert X.pt2 --to onnx -o Y.onnx`` (weights beside it in
    ``Y.onnx.data`` past 2 GiB);
  * ``pt2x-tflite``: ``python -m pt2x convert X.pt2 --to tflite -o Y.tflite``;
  * ``torch-onnx``: ``torch.onnx.export(torch.export.load(X.pt2), (), dynamo=True).save(Y)``,
    from the same file (as ``bench_onnx.py``);
  * ``litert-torch``: ``litert_torch.convert(torch.export.load(X.pt2).module(), (ids,))``
    ``.export(Y)`` at the batch-1 example shape (it writes static shapes), run by
    ``--litert-python`` (a venv with ``litert-torch`` and the same torch: never the test venv).

For every child the parent records wall seconds, CPU seconds (user + sys, its rusage from
``wait4``), peak RSS (``ru_maxrss``), and, polled from ``/proc/<pid>/status`` every
``POLL_S``, the peak of ``RssAnon`` (memory the process made: what a conversion really costs)
and of ``RssFile`` (mapped files, e.g. weights read through a memory map, which the kernel can
drop). ``--cap-gb`` puts each child under an address-space limit (``RLIMIT_AS``) so that a
blow-up fails instead of swapping the machine. A failure (exit status, signal, timeout) is a
row of the table with the last line of the child's stderr, never the end of the script.

Parity: a separate child (its memory is not the conversion's) runs the written file in ONNX
Runtime or LiteRT (``ai_edge_litert``; inputs resized with ``resize_tensor_input``) at
batch 1 and 2 and reports the max abs diff against the eager logits.

    python -m benchmarks.bench_llm [--sizes 0.25,1,3,6] [--tools pt2x-onnx,pt2x-tflite,torch-onnx,litert-torch]
        [--out bench-out/llm] [--cap-gb N] [--litert-python PATH] [--keep-outputs] [--timeout S]

Prints the table and writes it (``bench_llm.md``) and the raw rows (``bench_llm.json``) to
``--out``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)  # the repository
TOOLS = ("pt2x-onnx", "pt2x-tflite", "torch-onnx", "litert-torch")
SIZES = "0.25,1,3,6"
SEQ = 8  # tokens in the parity inputs
POLL_S = 0.05
GB = 1e9
MB = 2 ** 20

# ---------------------------------------------------------------------------- the decoders

WIDTHS = (4096, 3072, 2048, 1024, 768, 512, 256, 128, 64)


def plan(size_gb: float) -> dict:
    """A LlamaConfig's numbers whose float32 weights come closest to ``size_gb`` GB: the widest
    hidden size that still leaves room for two layers, then the layer count that fits best."""
    target = size_gb * GB
    best = None
    for hidden in WIDTHS:
        vocab = 32000 if target >= 0.1 * GB else 1000
        head_dim = 128 if hidden >= 1024 else max(16, hidden // 8)
        heads = hidden // head_dim
        kv_heads = max(1, heads // 4)  # grouped-query attention, as current LLMs have
        inter = max(64, round(hidden * 2.6875 / 64) * 64)  # Llama's 11008 / 4096
        cfg = dict(hidden_size=hidden, intermediate_size=inter, num_attention_heads=heads, num_key_value_heads=kv_heads,
                   vocab_size=vocab)
        fixed = weight_bytes(cfg, 0)
        per_layer = weight_bytes(cfg, 1) - fixed
        layers = max(2, round((target - fixed) / per_layer))
        if layers > 12 and hidden != WIDTHS[0]:
            continue  # a narrower width would need more layers still: the widest one that fits won
        got = dict(cfg, num_hidden_layers=layers)
        err = abs(weight_bytes(cfg, layers) - target) / target
        if best is None or err < best[0] - 0.02:
            best = (err, got)
        if err <= 0.08:
            break
    return best[1]


def weight_bytes(cfg: dict, layers: int) -> int:
    """float32 bytes of LlamaForCausalLM's parameters (embedding and head untied)."""
    h, i, v = cfg["hidden_size"], cfg["intermediate_size"], cfg["vocab_size"]
    kv = cfg["num_key_value_heads"] * (h // cfg["num_attention_heads"])
    per_layer = 2 * h * h + 2 * h * kv + 3 * h * i + 2 * h  # q, o; k, v; gate, up, down; two norms
    return 4 * (2 * v * h + h + layers * per_layer)


def _register_torchvision_ops() -> None:
    """transformers imports torchvision when installed; see ``bench_onnx._register_torchvision_ops``."""
    from benchmarks.bench_onnx import _register_torchvision_ops as register

    register()


def generate_child(cfg: dict, dst: str, ref: str) -> dict:
    """(In the generator's own process.) Build, export, save; torch eager's logits for the parity
    inputs into ``ref``. Weights are initialised in place once (transformers' init), the export
    traces with fake tensors and ``torch.export.save`` writes each tensor from its storage: the
    peak is about the weights plus torch."""
    t0 = time.perf_counter()
    import numpy as np
    import torch

    _register_torchvision_ops()
    import transformers

    torch.manual_seed(0)
    config = transformers.LlamaConfig(**cfg, max_position_embeddings=4096, use_cache=False, tie_word_embeddings=False)
    with torch.no_grad():
        model = transformers.LlamaForCausalLM(config).eval()
    t_init = time.perf_counter() - t0

    class Logits(torch.nn.Module):
        def __init__(self, lm):
            super().__init__()
            self.lm = lm

        def forward(self, input_ids):
            return self.lm(input_ids=input_ids, use_cache=False).logits

    wrapped = Logits(model).eval()
    gen = torch.Generator().manual_seed(1)
    ids = {b: torch.randint(0, cfg["vocab_size"], (b, SEQ), generator=gen) for b in (1, 2)}
    with torch.no_grad():
        logits = {b: wrapped(x).numpy() for b, x in ids.items()}
    np.savez(ref, **{f"ids{b}": x.numpy() for b, x in ids.items()}, **{f"logits{b}": y for b, y in logits.items()})
    t = time.perf_counter()
    from torch.export import Dim

    dyn = {"input_ids": {0: Dim("batch", min=1, max=64), 1: Dim("seq", min=2, max=2048)}}
    with torch.no_grad():
        ep = torch.export.export(wrapped, (torch.randint(0, cfg["vocab_size"], (2, 16), generator=gen),), dynamic_shapes=dyn)
    t_export = time.perf_counter() - t
    t = time.perf_counter()
    torch.export.save(ep, dst + ".part")
    os.replace(dst + ".part", dst)
    t_save = time.perf_counter() - t
    weights = sum(v.numel() * v.element_size() for v in ep.state_dict.values())
    return {"weight_bytes": weights, "file_bytes": os.path.getsize(dst), "init_s": t_init, "export_s": t_export,
            "save_s": t_save, "nodes": len(ep.graph.nodes), "config": cfg}


def generate(size_gb: float, out: str, *, cap_gb: float | None = None, timeout: float | None = None) -> dict:
    """The decoder of ``size_gb`` GB in ``out`` (made by a child process unless already there
    with the same config): ``{"pt2", "ref", "weight_bytes", ...}``."""
    cfg = plan(size_gb)
    stem = os.path.join(out, f"llama-{size_gb:g}gb")
    pt2, ref, meta = stem + ".pt2", stem + ".ref.npz", stem + ".json"
    if os.path.exists(meta) and os.path.exists(pt2) and os.path.exists(ref):
        with open(meta) as f:
            info = json.load(f)
        if info.get("config") == cfg:
            return dict(info, pt2=pt2, ref=ref, cached=True)
    os.makedirs(out, exist_ok=True)
    code = ("import json, sys; from benchmarks import bench_llm as b; "
            "print(json.dumps(b.generate_child(json.loads(sys.argv[1]), sys.argv[2], sys.argv[3])))")
    run = measure([sys.executable, "-c", code, json.dumps(cfg), pt2, ref], cap_gb=cap_gb, timeout=timeout,
                  cwd=ROOT)  # benchmarks/ is a package there
    if run["error"]:
        raise RuntimeError(f"generating {pt2} failed: {run['error']}")
    info = json.loads(run["stdout"].strip().splitlines()[-1])
    info["generate"] = {k: run[k] for k in ("wall_s", "cpu_s", "peak_rss_mb", "peak_anon_mb")}
    with open(meta, "w") as f:
        json.dump(info, f, indent=1)
    return dict(info, pt2=pt2, ref=ref, cached=False)


# ---------------------------------------------------------------------------- measuring a child


def _proc_status(pid: int) -> dict[str, int]:
    """RssAnon, RssFile, RssShmem, VmRSS of ``pid`` in bytes ({} once it is gone)."""
    out = {}
    try:
        with open(f"/proc/{pid}/status", "rb") as f:
            for line in f:
                if line.startswith((b"Rss", b"VmRSS")):
                    key, value = line.split(b":", 1)
                    out[key.decode()] = int(value.split()[0]) * 1024
    except (FileNotFoundError, ProcessLookupError, ValueError):
        pass
    return out


def measure(cmd: list[str], *, cap_gb: float | None = None, timeout: float | None = None, env: dict | None = None,
            cwd: str | None = None) -> dict:
    """Run ``cmd`` as a child and watch it: wall and CPU seconds, peak RSS, peak RssAnon and
    RssFile (polled), its exit. ``error`` is None on success, else the reason with the last
    line of its stderr."""
    cap = int(cap_gb * GB) if cap_gb else None

    def limit():
        if cap:
            resource.setrlimit(resource.RLIMIT_AS, (cap, cap))

    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=out, stderr=err, stdin=subprocess.DEVNULL, preexec_fn=limit,
                                env=env if env is not None else dict(os.environ), cwd=cwd)
        peak = {"RssAnon": 0, "RssFile": 0, "VmRSS": 0}
        timed_out = False
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            for key, value in _proc_status(proc.pid).items():
                if key in peak and value > peak[key]:
                    peak[key] = value
            if timeout and time.perf_counter() - t0 > timeout and not timed_out:
                timed_out = True
                proc.kill()
            time.sleep(POLL_S)
        wall = time.perf_counter() - t0
        proc.returncode = code = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        stdout = out.read().decode("utf-8", "replace")
        stderr = err.read().decode("utf-8", "replace")
    error = None
    if code:
        why = "timed out" if timed_out else (f"killed by {signal.Signals(-code).name}" if code < 0 else f"exit {code}")
        lines = [ln.strip() for ln in stderr.splitlines() if ln.strip()]
        error = f"{why}: {lines[-1][:240]}" if lines else why
    return {"wall_s": wall, "cpu_s": usage.ru_utime + usage.ru_stime, "peak_rss_mb": usage.ru_maxrss / 1024,
            "peak_anon_mb": peak["RssAnon"] / MB, "peak_file_mb": peak["RssFile"] / MB, "exit": code, "error": error,
            "stdout": stdout, "stderr_tail": stderr[-4000:]}


# ---------------------------------------------------------------------------- the sides

TORCH_ONNX = r"""
import sys, warnings, logging
warnings.filterwarnings("ignore"); logging.disable(logging.WARNING)
import torch
ep = torch.export.load(sys.argv[1])
torch.onnx.export(ep, (), dynamo=True, verbose=False).save(sys.argv[2])
"""

LITERT_TORCH = r"""
import sys, warnings, logging
warnings.filterwarnings("ignore"); logging.disable(logging.WARNING)
import numpy as np, torch, litert_torch
ids = torch.from_numpy(np.load(sys.argv[2])["ids1"])
module = torch.export.load(sys.argv[1]).module()
litert_torch.convert(module, (ids,)).export(sys.argv[3])
"""

SUFFIX = {"pt2x-onnx": "onnx", "pt2x-tflite": "tflite", "torch-onnx": "onnx", "litert-torch": "tflite"}


def side_command(tool: str, src: str, ref: str, dst: str, litert_python: str | None = None) -> list[str]:
    if tool in ("pt2x-onnx", "pt2x-tflite"):
        return [sys.executable, "-m", "pt2x", "convert", src, "--to", SUFFIX[tool], "-o", dst]
    if tool == "torch-onnx":
        return [sys.executable, "-c", TORCH_ONNX, src, dst]
    if tool == "litert-torch":
        if not litert_python:
            raise ValueError("litert-torch needs --litert-python")
        return [litert_python, "-c", LITERT_TORCH, src, ref, dst]
    raise ValueError(f"unknown tool {tool!r}")


PARITY = r"""
import json, sys
import numpy as np
kind, path, ref = sys.argv[1], sys.argv[2], np.load(sys.argv[3])
out = {}
if kind == "onnx":
    import onnxruntime as ort
    so = ort.SessionOptions(); so.log_severity_level = 3
    s = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])  # by path: external data beside it
    name = s.get_inputs()[0].name
    run = lambda x: s.run(None, {name: x})[0]
else:
    from ai_edge_litert.interpreter import Interpreter
    it = Interpreter(model_path=path)
    i, o = it.get_input_details()[0], it.get_output_details()[0]
    def run(x):
        it.resize_tensor_input(i["index"], list(x.shape))
        it.allocate_tensors()
        it.set_tensor(i["index"], x.astype(i["dtype"]))
        it.invoke()
        return it.get_tensor(o["index"])
for b in (1, 2):
    x, want = ref[f"ids{b}"], ref[f"logits{b}"]
    try:
        got = run(x)
        if got.shape != want.shape:
            out[b] = f"shape {list(got.shape)}, eager {list(want.shape)}"
        else:
            out[b] = float(np.max(np.abs(got.astype(np.float64) - want.astype(np.float64))))
    except Exception as e:
        out[b] = f"{type(e).__name__}: {' '.join(str(e).split())[:160]}"
out["ref_max"] = float(np.max(np.abs(ref["logits1"])))
print(json.dumps(out))
"""

TOL = 1e-3  # max abs diff on logits of magnitude ~1 (random init); float32 through another runtime


def parity(kind: str, path: str, ref: str, *, cap_gb: float | None = None, timeout: float | None = None) -> dict:
    """Max abs diff of the written file against eager, batch 1 and 2, from its own child process."""
    run = measure([sys.executable, "-c", PARITY, kind, path, ref], cap_gb=cap_gb, timeout=timeout)
    if run["error"]:
        return {"error": run["error"], "peak_rss_mb": run["peak_rss_mb"]}
    got = json.loads(run["stdout"].strip().splitlines()[-1])
    res = {f"b{b}": got[str(b)] for b in (1, 2)}
    res["ok"] = all(isinstance(v, float) and v <= TOL for v in res.values())
    res["peak_rss_mb"] = run["peak_rss_mb"]
    return res


def _remove(path: str) -> None:
    for p in (path, path + ".data"):
        if os.path.exists(p):
            os.remove(p)


def _output_bytes(path: str) -> int:
    """The written file and the external data beside it (``<name>.data``, pt2x's and torch.onnx's)."""
    total = 0
    for p in (path, path + ".data"):
        if os.path.exists(p):
            total += os.path.getsize(p)
    return total


def run_side(tool: str, model: dict, out: str, *, cap_gb: float | None = None, timeout: float | None = None,
             litert_python: str | None = None, keep: bool = False, check: bool = True) -> dict:
    """One conversion of ``model`` (from ``generate``) by ``tool`` in a child, then its parity: a row."""
    stem = os.path.splitext(os.path.basename(model["pt2"]))[0]
    dst = os.path.join(out, f"{stem}.{tool}.{SUFFIX[tool]}")
    _remove(dst)
    row = {"tool": tool, "size": model["size"], "weight_bytes": model["weight_bytes"]}
    try:
        cmd = side_command(tool, model["pt2"], model["ref"], dst, litert_python)
    except ValueError as e:
        return dict(row, error=str(e))
    run = measure(cmd, cap_gb=cap_gb, timeout=timeout)
    row.update({k: v for k, v in run.items() if k != "stdout"})
    if not run["error"] and not os.path.exists(dst):
        row["error"] = "no file written"
    if not row["error"]:
        row["output_bytes"] = _output_bytes(dst)
        if check:
            row["parity"] = parity(SUFFIX[tool], dst, model["ref"], cap_gb=cap_gb, timeout=timeout)
    if not keep:
        _remove(dst)
    return row


# ---------------------------------------------------------------------------- the table

HEAD = ("| size | tool | wall s | CPU s | peak RSS MB | peak anon MB | peak file MB | RSS / weights | anon / weights "
        "| output MB | max abs diff b1 / b2 | parity |")


def _cell(v) -> str:
    if isinstance(v, float):
        return f"{v:.1e}"
    return "-" if v is None else str(v).replace("|", "/")


def _verdict(p: dict) -> str:
    """ok, MISMATCH (a number past ``TOL``), or what stopped a batch from running (e.g. a
    static-shape file at batch 2)."""
    parts = []
    for b in ("b1", "b2"):
        v = p[b]
        if not isinstance(v, float):
            parts.append(f"{b} not run: {_cell(v)}")
        elif v > TOL:
            parts.append(f"{b} MISMATCH")
    return "; ".join(parts) or "ok"


def table(rows: list[dict]) -> str:
    lines = [HEAD, "|" + "---|" * HEAD.count(" | ") + "---|"]
    for r in rows:
        w = r["weight_bytes"] / MB
        size = f"{r['size']:g} GB ({w:.0f} MB)"
        if r.get("error"):
            mem = (f"{r['wall_s']:.1f} | {r['cpu_s']:.1f} | {r['peak_rss_mb']:.0f} | {r['peak_anon_mb']:.0f} | "
                   f"{r['peak_file_mb']:.0f} | {r['peak_rss_mb'] / w:.2f} | {r['peak_anon_mb'] / w:.2f}"
                   if "wall_s" in r else "- | - | - | - | - | - | -")
            lines.append(f"| {size} | {r['tool']} | {mem} | - | - | FAILED: {_cell(r['error'])} |")
            continue
        p = r.get("parity") or {}
        if "error" in p:
            diffs, verdict = "-", f"parity run failed: {_cell(p['error'])}"
        elif p:
            diffs = " / ".join(f"{p[b]:.1e}" if isinstance(p[b], float) else "-" for b in ("b1", "b2"))
            verdict = _verdict(p)
        else:
            diffs, verdict = "-", "not checked"
        lines.append(f"| {size} | {r['tool']} | {r['wall_s']:.1f} | {r['cpu_s']:.1f} | {r['peak_rss_mb']:.0f} "
                     f"| {r['peak_anon_mb']:.0f} | {r['peak_file_mb']:.0f} | {r['peak_rss_mb'] / w:.2f} "
                     f"| {r['peak_anon_mb'] / w:.2f} | {r['output_bytes'] / MB:.0f} | {diffs} | {verdict} |")
    return "\n".join(lines)


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), cpu)
    except OSError:
        pass
    ram = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2 ** 30
    return f"{os.cpu_count()}-core {cpu}, {ram:.0f} GiB RAM, Python {platform.python_version()}"


def _versions() -> str:
    from importlib.metadata import PackageNotFoundError, version

    found = []
    for pkg in ("torch", "transformers", "onnx", "onnxruntime", "onnxscript", "ai-edge-litert"):
        try:
            found.append(f"{pkg} {version(pkg)}")
        except PackageNotFoundError:
            pass
    return ", ".join(found)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default=SIZES, help=f"GB of float32 weights, comma-separated (default {SIZES})")
    ap.add_argument("--tools", default=",".join(TOOLS), help=f"sides, comma-separated (default {','.join(TOOLS)})")
    ap.add_argument("--out", default="bench-out/llm", help="where the .pt2 files (kept), outputs and the table go")
    ap.add_argument("--cap-gb", type=float, default=None, help="address-space cap (RLIMIT_AS) for every child, GB")
    ap.add_argument("--timeout", type=float, default=3600, help="seconds a child may run (default 3600)")
    ap.add_argument("--litert-python", default=None,
                    help="python of a venv with litert-torch (and this torch) for the litert-torch side")
    ap.add_argument("--keep-outputs", action="store_true", help="keep the converted files (default: removed after parity)")
    ap.add_argument("--no-parity", action="store_true", help="skip the parity runs")
    a = ap.parse_args(argv)
    tools = [t for t in a.tools.split(",") if t]
    unknown = sorted(set(tools) - set(TOOLS))
    if unknown:
        ap.error(f"unknown tool(s): {','.join(unknown)} (known: {','.join(TOOLS)})")
    try:
        sizes = [float(s) for s in a.sizes.split(",") if s]
    except ValueError:
        ap.error(f"--sizes takes numbers of GB, got {a.sizes!r}")
    if "litert-torch" in tools and not a.litert_python:
        print("litert-torch: no --litert-python given; its rows say so", file=sys.stderr)
    os.makedirs(a.out, exist_ok=True)
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    load_start = os.getloadavg()
    rows, notes = [], []
    for size in sizes:
        model = generate(size, a.out, cap_gb=a.cap_gb, timeout=a.timeout)
        model["size"] = size
        cfg, gen = model["config"], model.get("generate", {})
        note = (f"{size:g} GB: hidden {cfg['hidden_size']}, intermediate {cfg['intermediate_size']}, "
                f"{cfg['num_hidden_layers']} layers, heads {cfg['num_attention_heads']}/{cfg['num_key_value_heads']}, "
                f"vocab {cfg['vocab_size']}; {model['weight_bytes'] / MB:.0f} MB of weights, .pt2 {model['file_bytes'] / MB:.0f} MB, "
                f"{model['nodes']} nodes; generated in {gen.get('wall_s', 0):.0f} s, peak RSS {gen.get('peak_rss_mb', 0):.0f} MB"
                f"{' (cached)' if model['cached'] else ''}")
        notes.append(note)
        print(note, flush=True)
        for tool in tools:
            row = run_side(tool, model, a.out, cap_gb=a.cap_gb, timeout=a.timeout, litert_python=a.litert_python,
                           keep=a.keep_outputs, check=not a.no_parity)
            rows.append(row)
            print(table([row]).splitlines()[-1], flush=True)
    load_end = os.getloadavg()
    header = (f"{started}, {machine()}; load average {load_start[0]:.1f} at the start, {load_end[0]:.1f} at the end; "
              f"{_versions()}; cap {a.cap_gb or 'none'} GB")
    text = "\n".join([header, "", *[f"- {n}" for n in notes], "", table(rows), ""])
    print("\n" + text)
    with open(os.path.join(a.out, "bench_llm.md"), "w") as f:
        f.write(text)
    with open(os.path.join(a.out, "bench_llm.json"), "w") as f:
        json.dump({"header": header, "notes": notes, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
