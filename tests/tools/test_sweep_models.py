"""scripts/sweep_models.py without running a model: the stratified sample, the selection,
resuming (the last line of a spec wins; timeouts and crashes are retried) and the family table."""

from __future__ import annotations

import json
from types import SimpleNamespace

from workshop import load_script

sweep_models = load_script("sweep_models")

ENTRIES = ([{"spec": f"timm:vit_{i}", "family": "timm/vision_transformer"} for i in range(5)]
           + [{"spec": f"timm:resnet{i}", "family": "timm/resnet"} for i in range(3)]
           + [{"spec": "tv:alexnet", "family": "torchvision"}, {"spec": "hf:bert", "family": "transformers"}])


def test_stratified_covers_every_family_before_repeating_one():
    picked = sweep_models.stratified(ENTRIES, 4, seed=1)
    assert len({e["family"] for e in picked}) == 4
    assert sweep_models.stratified(ENTRIES, 4, seed=1) == picked  # derandomized by the seed
    assert len(sweep_models.stratified(ENTRIES, 100, seed=1)) == len(ENTRIES)  # each once


def test_select_one_per_family_by_default_and_filters():
    args = SimpleNamespace(libs="timm,tv,hf", filter=None, sample=None, cheapest=None, seed=0, all=False,
                           per_family=1, limit=None)
    assert [e["spec"] for e in sweep_models.select(ENTRIES, args)] == ["timm:vit_0", "timm:resnet0", "tv:alexnet",
                                                                        "hf:bert"]
    args.libs, args.all = "timm", True
    args.filter = "timm:resnet*"
    assert [e["spec"] for e in sweep_models.select(ENTRIES, args)] == ["timm:resnet0", "timm:resnet1",
                                                                        "timm:resnet2"]


def test_cheapest_takes_every_family_smallest_first_and_says_what_it_left_out():
    counts = {"timm:vit_0": 50, "timm:vit_1": 5, "timm:vit_2": 7, "timm:vit_3": 300e6, "timm:resnet0": 20,
              "timm:resnet1": 1, "timm:resnet2": None, "tv:alexnet": 9, "hf:bert": 2}
    picked, skipped = sweep_models.cheapest(ENTRIES, 5, counts, max_params=100e6)
    # depth 0, ascending: resnet1 (1), bert (2), vit_1 (5), alexnet (9); then depth 1: vit_2 (7)
    assert [e["spec"] for e in picked] == ["timm:resnet1", "hf:bert", "timm:vit_1", "tv:alexnet", "timm:vit_2"]
    assert any(r.startswith("timm:vit_3: 300 M parameters, over --max-params 100 M") for r in skipped)
    assert any(r.startswith("timm:resnet2: parameter count unknown") for r in skipped)
    assert "timm:vit_4" in " ".join(skipped)  # never counted: unknown, left out by name


def test_param_counts_are_cached_and_not_counted_again(tmp_path):
    cache = tmp_path / "params.json"
    cache.write_text(json.dumps({"timm:vit_0": 3}))
    assert sweep_models.param_counts(["timm:vit_0"], str(cache), jobs=2) == {"timm:vit_0": 3}


def _rec(spec, onnx="match", tflite="match", torch_onnx="match", export="ok"):
    rec = {"spec": spec, "export": export}
    for target, outcome in (("onnx", onnx), ("tflite", tflite), ("torch_onnx", torch_onnx)):
        if outcome:
            rec[target] = {"outcome": outcome, "ops": ["aten.foo.default: no lowering"] if outcome == "refused" else []}
    return rec


def test_resume_retries_timeouts_and_the_last_line_wins(tmp_path):
    out = tmp_path / "sweep.jsonl"
    lines = [{"spec": "a", "export": "timeout"}, _rec("b"), {"spec": "c", "export": "crash"}, _rec("c")]
    out.write_text("".join(json.dumps(r) + "\n" for r in lines))
    assert sweep_models.done_specs(str(out)) == {"b", "c"}
    assert [r["export"] for r in sweep_models.read_records(str(out))] == ["timeout", "ok", "ok"]


def test_table_counts_by_family_and_names_silently_wrong():
    families = {e["spec"]: e["family"] for e in ENTRIES}
    records = [_rec("timm:vit_0"), _rec("timm:vit_1", onnx="refused", tflite="refused"),
               _rec("timm:resnet0", tflite="mismatch", torch_onnx="refused"),
               _rec("tv:alexnet", export="failed", onnx=None, tflite=None, torch_onnx=None)]
    rows = {r[0]: r[1:] for r in sweep_models.family_rows(records, families)}
    # models, exported, pt2x ONNX, pt2x TFLite, torch.onnx, silently wrong, torch.onnx only, torch.onnx not run,
    # ill-conditioned reference
    assert rows["timm/vision_transformer"] == [2, 2, 1, 1, 2, 0, 1, 0, 0]
    assert rows["timm/resnet"] == [1, 1, 1, 0, 0, 1, 0, 0, 0]
    assert rows["torchvision"] == [1, 0, 0, 0, 0, 0, 0, 0, 0]
    text = sweep_models.refusals(records)
    assert "aten.foo.default: no lowering  (timm:vit_1)" in text and "mismatch" in text


def test_table_counts_a_skipped_anchor_as_not_run_not_as_a_result():
    rec = _rec("timm:vit_0", torch_onnx=None)
    rec["anchor"] = sweep_models.ANCHOR_NOT_RUN
    rows = {r[0]: r[1:] for r in sweep_models.family_rows([rec], {"timm:vit_0": "timm/vision_transformer"})}
    assert rows["timm/vision_transformer"] == [1, 1, 1, 1, 0, 0, 0, 1, 0]
    assert "torch.onnx not run (pt2x matched)" in sweep_models.table([rec], {})
    assert sweep_models.refusals([rec]) == ""


def test_the_worker_and_the_table_spell_a_skipped_anchor_alike():
    import sweep  # tests/support/sweep.py: the worker that writes the lines the table reads

    assert sweep.ANCHOR_NOT_RUN == sweep_models.ANCHOR_NOT_RUN


def test_an_ill_conditioned_reference_is_counted_apart_from_silently_wrong():
    rec = _rec("timm:resnet0", onnx="ill_conditioned", tflite="ill_conditioned", torch_onnx="ill_conditioned")
    rec["reference"] = "ill-conditioned: float32 eager vs float64 eager: 989/1000 elements differ"
    rows = {r[0]: r[1:] for r in sweep_models.family_rows([rec], {"timm:resnet0": "timm/resnet"})}
    assert rows["timm/resnet"] == [1, 1, 0, 0, 0, 0, 0, 0, 1]


def test_a_miss_is_judged_on_the_batch_it_names():
    """A conversion's miss at batch 3 is judged against float32 vs float64 eager at batch 3: an
    unstable reference there makes it ``ill_conditioned`` (saying the batch); a stable one leaves
    the mismatch standing."""
    import torch

    import sweep

    class Cancelling(torch.nn.Module):  # float32 loses x in (1e8·x + x) - 1e8·x; float64 keeps it
        def forward(self, x):
            return (x * 1e8 + x) - x * 1e8

    class Stable(torch.nn.Module):
        def forward(self, x):
            return x * 2.0

    g = torch.Generator().manual_seed(0)
    for model, want in ((Cancelling(), "ill_conditioned"), (Stable(), "mismatch")):
        refs = {b: (x, model(x)) for b in (1, 3) for x in [torch.randn(b, 8, generator=g)]}
        result = {"onnx": {"outcome": "mismatch", "error": "batch 3: 2/24 elements differ"},
                  "tflite": {"outcome": "match"}}
        sweep._judge_mismatches(result, model, refs, 1.0)
        assert result["onnx"]["outcome"] == want and result["tflite"]["outcome"] == "match", result
        if want == "ill_conditioned":
            assert result["reference"].startswith("ill-conditioned at batch 3"), result
