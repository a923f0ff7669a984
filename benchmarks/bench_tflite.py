"""Benchmark: ``pt2x convert --to tflite`` vs litert-torch 0.10.0 from the same .pt2, with ONNX Runtime.

Not a test. The programs are exported by the test venv's torch with a dynamic batch and saved
with ``torch.export.save``, together with inputs of two batch sizes and torch eager's outputs.
Their weights are re-drawn as the model zoo's are (``model_zoo.redraw``: since 2026-11-26 for
convbn, bert and gpt2 too), so no side can drop a LayerNorm of exact 1s and 0s or a zero bias
that random init leaves and a trained model does not have.
Then every side runs in its own process (the sources are in ``benchmarks/bench_tflite_workers.py``):

  * pt2x: ``python -m pt2x convert X.pt2 --to tflite -o Y.tflite`` as a whole cold process with
    ``import torch`` made to fail (median of ``--cold-runs``); file size; LiteRT
    (``ai_edge_litert`` Interpreter, XNNPACK applied by its default op resolver): max abs diff
    against torch eager on the example inputs and after ``resize_tensor_input`` to the second
    batch; median latency at 1 and 2 threads on the example inputs.
  * ONNX Runtime (context): pt2x's ONNX of the same program, the same parity and latencies.
  * litert-torch: in its own venv (made when missing: ``torch==<this torch>`` first, so pip takes
    the local CPU wheel, then ``litert-torch==0.10.0``), ``litert_torch.convert(ep.module(),
    args, dynamic_shapes=...)`` on the loaded .pt2 as one cold process; when the dynamic
    conversion fails, the conversion at the example shapes in another (its time is the one
    reported). Its .tflite is run in the same LiteRT as pt2x's.
  * onnx2tf (with ``--onnx2tf``; ``onnx2tf_side.py``): onnx2tf 1.29.24 in its own venv (made when
    missing; TensorFlow 2.19) converts pt2x's ONNX of the program at the example batch (it writes
    static shapes) as one cold process; its float32 .tflite runs in the same LiteRT.

Ratios: pt2x / litert-torch for cold conversion time and file size (< 1: pt2x is faster,
smaller); pt2x LiteRT / pt2x ORT for latency (< 1: LiteRT is faster).

    python -m benchmarks.bench_tflite [--models convbn,mobilenet_v3_small,resnet18,bert,gpt2|zoo|timm:NAME,...]
        [--threads 1,2] [--out bench-out/tflite] [--json results.json] [--litert-torch-venv PATH] [--skip-litert-torch]
        [--onnx2tf] [--onnx2tf-venv PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time

from benchmarks import bench_tflite_workers as workers
from benchmarks.onnx2tf_side import ONNX2TF, ensure_onnx2tf_venv, onnx2tf_convert
from scripts.environment import child_env

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the repository
MODELS = ("convbn", "mobilenet_v3_small", "resnet18", "bert", "gpt2")
OTHER_MODELS = ("mlp", "resnet", "enc6", "enc12", "efficientnet_b0")  # built by the EXPORT worker too
# the project's model zoo (tests/support/model_zoo.py), by its names; ``--models zoo`` picks them all
ZOO_MODELS = ("tv_mobilenet_v3_small", "tv_efficientnet_b0", "tv_resnet18", "tv_swin_t", "tv_lraspp_mobilenet_v3_large",
              "tv_deeplabv3_mobilenet_v3_large", "timm_vit_tiny", "timm_mobilenetv3_small_050", "timm_levit_128s",
              "hf_wav2vec2", "hf_llama_gqa", "hf_qwen2_gqa")
LITERT_TORCH = "litert-torch==0.10.0"
DEFAULT_VENV = os.path.join(os.path.dirname(ROOT), "venvs", "litert-torch")
DEFAULT_ONNX2TF_VENV = os.path.join(os.path.dirname(ROOT), "venvs", "onnx2tf")
THREADS = "1,2"
MAX_BATCH, SECOND_BATCH = 8, 3


def _child(argv: list[str], timeout: float) -> tuple[float, subprocess.CompletedProcess]:
    """Run a child process: (wall seconds, completed process); one past ``timeout`` is killed and
    reads as exit code -9 with that said on its stderr."""
    t = time.perf_counter()
    try:
        r = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, cwd=ROOT, env=child_env())
    except subprocess.TimeoutExpired:
        r = subprocess.CompletedProcess(argv, -9, "", f"timed out after {timeout:.0f} s")
    return time.perf_counter() - t, r


def _last_json(r: subprocess.CompletedProcess, what: str) -> dict:
    """The child's last stdout line as JSON, or an ``error`` naming what failed."""
    lines = r.stdout.strip().splitlines()
    if r.returncode == 0 and lines:
        try:
            return json.loads(lines[-1])
        except json.JSONDecodeError:
            pass
    tail = " ".join((r.stderr or r.stdout).strip().splitlines()[-3:])[-400:]
    return {"error": f"{what} exited {r.returncode}: {tail}"}


def export_programs(names: list[str], out: str) -> list[dict]:
    """Build, export and save every program in one torch process: one row per model."""
    _, r = _child([sys.executable, "-c", workers.EXPORT, ROOT, out, ",".join(names), str(MAX_BATCH),
                   str(SECOND_BATCH)], timeout=1800)
    rows = [json.loads(line) for line in r.stdout.splitlines() if line.startswith("{")]
    if r.returncode or len(rows) != len(names):
        raise RuntimeError(f"export failed (exit {r.returncode}):\n{r.stderr[-3000:]}")
    return rows


def cold_convert(src: str, dst: str, to: str, runs: int) -> dict:
    """``python -m pt2x convert`` in fresh processes with torch blocked: median wall seconds, size."""
    times = []
    for _ in range(runs):
        if os.path.exists(dst):
            os.remove(dst)
        wall, r = _child([sys.executable, "-c", workers.PT2X_COLD, "convert", src, "--to", to, "-o", dst], timeout=600)
        if r.returncode:
            return {"error": " ".join((r.stderr or r.stdout).split())[:400]}
        times.append(wall)
    return {"cold_s": statistics.median(times), "bytes": os.path.getsize(dst)}


def run_model(code: str, path: str, inputs: str, runs: int, what: str, threads: str = THREADS) -> dict:
    """Parity and latency of one converted file in its runtime's own process."""
    _, r = _child([sys.executable, "-c", code, path, inputs, str(runs), threads], timeout=900)
    res = _last_json(r, what)
    if code is workers.LITERT:  # the interpreter says so on stderr when it applies the delegate
        res["xnnpack_applied"] = "XNNPACK delegate" in r.stderr
    return res


def ensure_litert_torch_venv(venv: str) -> str:
    """The venv's python, after making the venv where it is missing. torch goes in first, pinned
    to this torch's release, so that pip takes the local CPU wheel and litert-torch keeps it."""
    python = os.path.join(venv, "bin", "python")
    check = [python, "-c", "import litert_torch"]
    if os.path.exists(python) and subprocess.run(check, capture_output=True).returncode == 0:
        return python
    from importlib.metadata import version

    torch_release = version("torch").split("+")[0]
    steps = [[sys.executable, "-m", "venv", venv],
             [python, "-m", "pip", "install", "-q", f"torch=={torch_release}"],
             [python, "-m", "pip", "install", "-q", LITERT_TORCH]]
    for step in steps:
        print("$", " ".join(step), flush=True)
        subprocess.run(step, check=True, timeout=3600)
    subprocess.run(check, check=True)
    return python


def litert_torch_convert(python: str, row: dict, dst: str) -> dict:
    """litert-torch's conversion with the dynamic batch, and where that fails, at the example
    shapes (what a user then gets). Each is one cold process (imports, load, convert, write):
    ``cold_s`` is the successful one's, so a failed attempt does not count against it."""
    res = {}
    for mode in ("dynamic", "static"):
        if os.path.exists(dst):
            os.remove(dst)
        wall, r = _child([python, "-c", workers.LITERT_TORCH, row["pt2"], row["inputs"], dst, str(MAX_BATCH), mode],
                         timeout=1800)
        got = _last_json(r, "litert-torch")
        if "error" not in got and os.path.exists(dst):
            res.update(got, cold_s=wall, bytes=os.path.getsize(dst), dynamic=mode == "dynamic")
            return res
        if mode == "dynamic":
            res.update(dynamic=False, dynamic_error=got.get("error", "no file written"), dynamic_attempt_s=wall)
        else:
            res["error"] = got.get("error", "no file written")
    return res


def merge_rounds(rounds: list[dict]) -> dict:
    """One runtime result from several rounds: parity from the first (it is deterministic),
    latency per thread count as the median of the rounds' medians (each kept under ``rounds``)."""
    first = rounds[0]
    if "error" in first or "load_error" in first:
        return first
    merged = {**first, "latency": {}}
    for n, lat in first["latency"].items():
        ms = [r["latency"][n]["ms"] for r in rounds if "ms" in r.get("latency", {}).get(n, {})]
        merged["latency"][n] = {**lat, "ms": statistics.median(ms), "rounds": ms} if ms else lat
    return merged


def bench(row: dict, out: str, args, litert_python: str | None, onnx2tf_python: str | None = None) -> dict:
    """Convert one program with every side, then time the converted files in alternating rounds
    (each file in its own process each round), so that the machine's drift hits all sides alike."""
    name = row["model"]
    pt2x_tfl, pt2x_onnx, lt_tfl, o2t_tfl = (os.path.join(out, f"{name}.{f}") for f in
                                            ("pt2x.tflite", "pt2x.onnx", "litert_torch.tflite", "onnx2tf.tflite"))
    res = {"model": name, "batches": row["batches"], "params": row["params"]}
    runs = {}  # where the result goes -> (worker, file, what)
    res["pt2x"] = cold_convert(row["pt2"], pt2x_tfl, "tflite", args.cold_runs)
    if "error" not in res["pt2x"]:
        runs["pt2x"] = (workers.LITERT, pt2x_tfl, "LiteRT")
    res["ort"] = cold_convert(row["pt2"], pt2x_onnx, "onnx", 1)
    if "error" not in res["ort"]:
        runs["ort"] = (workers.ORT, pt2x_onnx, "ONNX Runtime")
    if litert_python:
        res["litert_torch"] = litert_torch_convert(litert_python, row, lt_tfl)
        if "error" not in res["litert_torch"]:
            runs["litert_torch"] = (workers.LITERT, lt_tfl, "LiteRT")
    if onnx2tf_python and "error" not in res["ort"]:
        res["onnx2tf"] = onnx2tf_convert(onnx2tf_python, pt2x_onnx, o2t_tfl, batch=row["batches"][0])
        if "error" not in res["onnx2tf"]:
            runs["onnx2tf"] = (workers.LITERT, o2t_tfl, "LiteRT")
    rounds: dict[str, list[dict]] = {side: [] for side in runs}
    for i in range(args.rounds):
        for side in (list(runs) if i % 2 == 0 else list(reversed(runs))):
            code, path, what = runs[side]
            rounds[side].append(run_model(code, path, row["inputs"], args.latency_runs, what, args.threads))
    for side, results in rounds.items():
        merged = merge_rounds(results)
        if side == "ort":
            res["ort"].update(merged)  # next to the ONNX conversion's time and size
        else:
            res[side]["litert"] = merged
    return res


# ----------------------------------------------------------------------- the tables


class Notes:
    """Errors too long for a cell: the cell shows ``✗[n]``, the note is printed below the tables.
    One note per distinct (what, error), naming every model it hit."""

    def __init__(self):
        self.found: dict[tuple[str, str], list[str]] = {}  # (what, error) -> models, in order

    def ref(self, model: str, what: str, error: str) -> str:
        models = self.found.setdefault((what, error), [])
        models.append(model)
        return f"✗[{list(self.found).index((what, error)) + 1}]"

    def numbered(self) -> list[str]:
        return [f"- [{i + 1}] {', '.join(models)}: {what}: {error if len(error) <= 240 else error[:240] + '…'}"
                for i, ((what, error), models) in enumerate(self.found.items())]


def _parity(notes: Notes, model: str, what: str, res: dict | None) -> str:
    if res is None:
        return "–"
    if "error" in res:
        return notes.ref(model, what, res["error"])
    return f"{res['max_abs_diff']:.1e}"


def _ms(res: dict | None, n: str) -> float | None:
    lat = ((res or {}).get("latency") or {}).get(n) or {}
    return lat.get("ms")


def _f(x: float | None, fmt: str) -> str:
    return "–" if x is None else format(x, fmt)


def _ratio(a: float | None, b: float | None) -> str:
    return "–" if a is None or b is None else f"{a / b:.2f}"


def _converted(notes: Notes, r: dict, side: str, label: str) -> tuple[str, dict, dict]:
    """A side's conversion cell, its conversion result and its LiteRT result ({} when none).
    A conversion that failed, or a file LiteRT cannot load, becomes a note."""
    conv = r.get(side)
    if conv is None:
        return "skipped", {}, {}
    run = conv.get("litert") or {}
    if "error" in conv:
        return notes.ref(r["model"], f"{label}: not converted", conv["error"]), {}, {}
    cell = f"{conv['cold_s']:.2f} s"
    if "load_error" in run:
        return f"{cell} {notes.ref(r['model'], f'{label}: LiteRT cannot load it', run['load_error'])}", conv, {}
    return cell, conv, run


def _dynamic(notes: Notes, r: dict) -> str:
    lt = r.get("litert_torch") or {}
    if "dynamic" not in lt:
        return "–"
    return "yes" if lt["dynamic"] else notes.ref(r["model"], "litert-torch with dynamic_shapes", lt["dynamic_error"])


def _mb(conv: dict) -> str:
    return f"{conv['bytes'] / 1e6:.2f}" if "bytes" in conv else "–"


def conversion_table(rows: list[dict], notes: Notes) -> str:
    head = ("| model | params | pt2x cold convert | litert-torch cold convert | pt2x / litert-torch "
            "| MB pt2x / litert-torch | pt2x max abs diff: example / resized "
            "| litert-torch dynamic batch | litert-torch max abs diff: example / resized |")
    lines = [head, "|" + "---|" * 9]
    for r in rows:
        m = r["model"]
        p_cell, p, p_run = _converted(notes, r, "pt2x", "pt2x")
        lt_cell, lt, lt_run = _converted(notes, r, "litert_torch", "litert-torch")
        p_parity = " / ".join(_parity(notes, m, f"pt2x {k}", p_run.get(k)) for k in ("example", "resized"))
        dynamic = _dynamic(notes, r)
        lt_parity = " / ".join(_parity(notes, m, f"litert-torch {k}", lt_run.get(k)) for k in ("example", "resized"))
        lines.append(f"| {m} | {r['params'] / 1e6:.2f} M | {p_cell} | {lt_cell} "
                     f"| {_ratio(p.get('cold_s'), lt.get('cold_s'))} | {_mb(p)} / {_mb(lt)} "
                     f"| {p_parity} | {dynamic} | {lt_parity} |")
    return "\n".join(lines)


def latency_table(rows: list[dict]) -> str:
    head = ("| model | batch | LiteRT pt2x ms 1T / 2T | ORT (pt2x ONNX) ms 1T / 2T | LiteRT / ORT 1T / 2T "
            "| LiteRT litert-torch ms 1T / 2T | LiteRT pt2x / litert-torch 1T "
            "| LiteRT onnx2tf ms 1T / 2T | LiteRT pt2x / onnx2tf 1T "
            "| XNNPACK partitions pt2x / litert-torch / onnx2tf |")
    lines = [head, "|" + "---|" * 10]
    for r in rows:
        p = (r.get("pt2x") or {}).get("litert")
        o = r.get("ort")
        lt = (r.get("litert_torch") or {}).get("litert")
        o2t = (r.get("onnx2tf") or {}).get("litert")
        cells = [f"{_f(_ms(x, '1'), '.2f')} / {_f(_ms(x, '2'), '.2f')}" for x in (p, o, lt, o2t)]
        for i, x in ((0, p), (2, lt), (3, o2t)):
            if x and x.get("xnnpack_applied") is False:
                cells[i] += " (no XNNPACK)"
        ratio = f"{_ratio(_ms(p, '1'), _ms(o, '1'))} / {_ratio(_ms(p, '2'), _ms(o, '2'))}"
        parts = " / ".join(_f(((x or {}).get("latency") or {}).get("1", {}).get("delegate_partitions"), "d")
                           for x in (p, lt, o2t))
        lines.append(f"| {r['model']} | {r['batches'][0]} | {cells[0]} | {cells[1]} | {ratio} "
                     f"| {cells[2]} | {_ratio(_ms(p, '1'), _ms(lt, '1'))} "
                     f"| {cells[3]} | {_ratio(_ms(p, '1'), _ms(o2t, '1'))} | {parts} |")
    return "\n".join(lines)


def onnx2tf_table(rows: list[dict], notes: Notes) -> str:
    """onnx2tf's conversion of pt2x's ONNX: cold time, size, parity (only when it was run)."""
    lines = ["| model | onnx2tf cold convert | MB | max abs diff: example / resized (static shapes) |", "|---|---|---|---|"]
    for r in rows:
        cell, conv, run = _converted(notes, r, "onnx2tf", "onnx2tf")
        parity = " / ".join(_parity(notes, r["model"], f"onnx2tf {k}", run.get(k)) for k in ("example", "resized"))
        lines.append(f"| {r['model']} | {cell} | {_mb(conv)} | {parity} |")
    return "\n".join(lines)


def _matches(res: dict | None) -> bool:
    """Within float32 parity: the project's float32 tolerance scaled for a model (x10), on the
    largest output magnitude: max abs diff <= 1e-4 + 1e-3 * max |torch eager|."""
    return bool(res) and "max_abs_diff" in res and res["max_abs_diff"] <= 1e-4 + 1e-3 * res["ref_max_abs"]


def summary(rows: list[dict]) -> list[str]:
    """One line per converter: converted, loaded and matching on the example batch, after a resize."""
    lines = []
    for side, label in (("pt2x", "pt2x"), ("litert_torch", "litert-torch"), ("onnx2tf", "onnx2tf")):
        done = [r for r in rows if side in r]
        if not done:
            continue
        runs = [r[side].get("litert") or {} for r in done if "error" not in r[side]]
        loaded = [x for x in runs if "load_error" not in x]
        dynamic = sum(1 for r in done if r[side].get("dynamic")) if side == "litert_torch" else None
        lines.append(f"- {label}: converted {len(runs)}/{len(done)}"
                     + ("" if dynamic is None else f" (with the dynamic batch: {dynamic})")
                     + f", LiteRT loads {len(loaded)}, matches torch on the example batch "
                     f"{sum(_matches(x.get('example')) for x in loaded)}, after resize_tensor_input to "
                     f"another batch {sum(_matches(x.get('resized')) for x in loaded)}")
    return lines


def report(rows: list[dict]) -> str:
    notes = Notes()
    parts = [*summary(rows), "", conversion_table(rows, notes), "", latency_table(rows)]
    if any("onnx2tf" in r for r in rows):
        parts += ["", onnx2tf_table(rows, notes)]
    if notes.found:
        parts += ["", *notes.numbered()]
    return "\n".join(parts)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default=",".join(MODELS),
                    help="comma-separated, from: " + ", ".join(MODELS + OTHER_MODELS + ZOO_MODELS)
                    + "; 'zoo' stands for the model zoo's 12; a model sweep spec (timm:NAME, tv:NAME, "
                    "hf:NAME; tests/support/sweep.py) builds that model at the sweep's small size")
    ap.add_argument("--out", default="bench-out/tflite", help="folder for the .pt2, inputs and converted files")
    ap.add_argument("--json", default=None, help="also write the raw results here")
    ap.add_argument("--litert-torch-venv", default=DEFAULT_VENV,
                    help=f"litert-torch's venv, made here when missing (default: {DEFAULT_VENV})")
    ap.add_argument("--skip-litert-torch", action="store_true", help="leave out the litert-torch side")
    ap.add_argument("--onnx2tf", action="store_true",
                    help="add onnx2tf's conversion of pt2x's ONNX (minutes per model; TensorFlow in its own venv)")
    ap.add_argument("--onnx2tf-venv", default=DEFAULT_ONNX2TF_VENV,
                    help=f"onnx2tf's venv, made here when missing (default: {DEFAULT_ONNX2TF_VENV})")
    ap.add_argument("--cold-runs", type=int, default=3, help="cold pt2x conversions per model (median)")
    ap.add_argument("--latency-runs", type=int, default=100, help="timed invocations per thread count (median)")
    ap.add_argument("--rounds", type=int, default=3,
                    help="latency processes per converted file, the sides alternating (median of medians)")
    ap.add_argument("--threads", default=THREADS, help="thread counts to time, comma-separated (default 1,2)")
    a = ap.parse_args(argv)
    a.models = ",".join(",".join(ZOO_MODELS) if m == "zoo" else m for m in a.models.split(","))
    unknown = sorted(m for m in set(a.models.split(",")) - set(MODELS + OTHER_MODELS + ZOO_MODELS) if ":" not in m)
    if unknown:
        ap.error(f"unknown model(s): {', '.join(unknown)}")
    out = os.path.abspath(a.out)
    os.makedirs(out, exist_ok=True)
    litert_python = None if a.skip_litert_torch else ensure_litert_torch_venv(os.path.abspath(a.litert_torch_venv))
    onnx2tf_python = ensure_onnx2tf_venv(os.path.abspath(a.onnx2tf_venv)) if a.onnx2tf else None
    rows = []
    for row in export_programs(a.models.split(","), out):
        if "error" in row:
            print(f"{row['model']}: torch could not export it: {row['error']}", flush=True)
            continue
        rows.append(bench(row, out, a, litert_python, onnx2tf_python))
        print(f"{row['model']}: done", flush=True)
        if a.json:  # written as it goes: a long run keeps what it measured
            with open(a.json, "w") as f:
                json.dump(rows, f, indent=1)
    from importlib.metadata import version

    print(f"\n{time.strftime('%Y-%m-%d')}, {os.cpu_count()}-core {platform.machine()}, Python "
          f"{platform.python_version()}, torch {version('torch')}, ai-edge-litert {version('ai-edge-litert')}, "
          f"onnxruntime {version('onnxruntime')}, {'' if litert_python else 'no '}{LITERT_TORCH}"
          f"{', ' + ONNX2TF if onnx2tf_python else ''}\n")
    print(report(rows))


if __name__ == "__main__":
    main()
