"""benchmarks/bench_llm.py end to end at a few MB: the generator (a random-init Llama exported
with a dynamic batch and sequence, in its own process), one side (pt2x's ONNX, in its own
process, watched from /proc) and its parity run (ONNX Runtime at batch 1 and 2 against the
eager logits), as the script's ``main`` calls them. The LLM sizes themselves are the lead's
run (docs/llm.md)."""

from __future__ import annotations

import math
import sys

import pytest
from workshop import load_script

pytest.importorskip("transformers")
pytest.importorskip("onnxruntime")

bench = load_script("bench_llm")


def test_plan_hits_the_sizes():
    for gb in (0.004, 0.25, 1, 3, 6):
        cfg = bench.plan(gb)
        got = bench.weight_bytes(cfg, cfg["num_hidden_layers"]) / 1e9
        assert abs(got - gb) / gb < 0.1, (gb, cfg, got)
    big = bench.plan(6)
    assert big["num_hidden_layers"] <= 12 and big["hidden_size"] >= 4096  # few wide layers: cheap to export


def test_tiny_decoder_through_pt2x_onnx(tmp_path):
    out = str(tmp_path)
    model = bench.generate(0.003, out, timeout=300)
    assert not model["cached"]
    assert model["weight_bytes"] == bench.weight_bytes(model["config"], model["config"]["num_hidden_layers"])
    model["size"] = 0.003
    assert bench.generate(0.003, out)["cached"]  # the same config is reused, not exported again

    row = bench.run_side("pt2x-onnx", model, out, timeout=300)
    assert row["error"] is None, row.get("stderr_tail")
    for key in ("wall_s", "cpu_s", "peak_rss_mb", "peak_anon_mb", "peak_file_mb"):
        assert math.isfinite(row[key]) and row[key] > 0, (key, row[key])
    assert row["peak_anon_mb"] <= row["peak_rss_mb"]
    assert row["output_bytes"] >= model["weight_bytes"]
    p = row["parity"]
    assert p["ok"] and p["b1"] < bench.TOL and p["b2"] < bench.TOL, p
    line = bench.table([row]).splitlines()[-1]
    assert "| pt2x-onnx |" in line and line.endswith("| ok |"), line


def test_a_failing_child_is_a_row_not_a_crash(tmp_path):
    run = bench.measure([sys.executable, "-c", "import sys; print('about to fail', file=sys.stderr); sys.exit(3)"])
    assert run["exit"] == 3 and run["error"] == "exit 3: about to fail"
    killed = bench.measure([sys.executable, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"])
    assert killed["error"] == "killed by SIGKILL"
    capped = bench.measure([sys.executable, "-c", "b = bytearray(2 * 10**9)"], cap_gb=1)
    assert capped["error"].startswith("exit 1: MemoryError"), capped["error"]
    row = {"tool": "pt2x-tflite", "size": 0.25, "weight_bytes": 2 ** 28, **run}
    assert "FAILED: exit 3: about to fail" in bench.table([row])
