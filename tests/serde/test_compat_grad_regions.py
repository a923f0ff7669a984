"""Grad-mode regions (``torch.no_grad()`` blocks) written for torch 2.5/2.6: inlined where exact, else refused.

torch 2.13 keeps the block as a ``wrap_with_set_grad_enabled`` node, which 2.5.1 and 2.6.0 cannot
load; ``serde.compat.grad_regions`` splices the subgraph in when no tensor entering it can require
grad (HF Llama/Qwen2's rotary embedding: an int64 position tensor and a buffer). The programs are
exported here by torch; the real 2.5.1/2.6.0 run is ``scripts/check_old_torch.py``.
"""

from __future__ import annotations

import io
import json
import zipfile

import pytest
import torch

import pt2x.serde as serde
from pt2x.serde.compat import plan as compat_plan
from pt2x.serde.compat import target as compat

REGION = "torch.ops.higher_order.wrap_with_set_grad_enabled"


class Rotary(torch.nn.Module):
    """HF's rotary embedding in small: the no_grad block reads an int64 tensor and a buffer."""

    def __init__(self):
        super().__init__()
        self.register_buffer("inv_freq", torch.linspace(0.1, 1.0, 4), persistent=False)
        self.proj = torch.nn.Linear(8, 8)

    def forward(self, x):
        pos = torch.arange(x.shape[1]).unsqueeze(0)
        with torch.no_grad():
            freqs = pos[..., None].float() * self.inv_freq
            emb = torch.cat([freqs, freqs], dim=-1)
            cos, sin = emb.cos(), emb.sin()
        return self.proj(x) * cos + x * sin


class ParamInRegion(torch.nn.Module):
    """A no_grad block reading a parameter: inlined, its outputs would require grad (not exact)."""

    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(8, 8)

    def forward(self, x):
        with torch.no_grad():
            y = self.proj(x).sin()
        return y + x


def exported(module_cls) -> bytes:
    torch.manual_seed(0)
    buf = io.BytesIO()
    torch.export.save(torch.export.export(module_cls().eval(), (torch.randn(1, 5, 8),)), buf)
    return buf.getvalue()


def program_json(data: bytes) -> dict:
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        (member,) = [n for n in z.namelist() if n.endswith(("models/model.json", "serialized_exported_program.json"))]
        return json.loads(z.read(member))


def targets(doc: dict) -> list[str]:
    return [n["target"] for n in doc["graph_module"]["graph"]["nodes"]]


@pytest.fixture(scope="module")
def rotary() -> bytes:
    return exported(Rotary)


def test_region_torch_2_13_writes(rotary):
    # the form this module guards against: if torch stops writing the HOP, these tests test nothing
    assert REGION in targets(program_json(rotary))


@pytest.mark.parametrize("release", ["torch==2.5", "torch==2.6"])
def test_region_without_grad_inputs_is_inlined(rotary, release):
    doc = program_json(rotary)
    (at,) = [i for i, n in enumerate(doc["graph_module"]["graph"]["nodes"]) if n["target"] == REGION]
    region = doc["graph_module"]["graph"]["nodes"][at]
    inner = [n["target"] for n in region["inputs"][1]["arg"]["as_graph"]["graph"]["nodes"]]
    out, findings = compat.downgrade(doc, release)
    assert not [f for f in findings if f.severity == "error"], [str(f) for f in findings]
    assert "target-inlined-grad-region" in {f.code for f in findings}
    written = targets(out)
    assert REGION not in written
    assert written[at:at + len(inner)] == inner  # spliced in order where the region stood
    values = out["graph_module"]["graph"]["tensor_values"]
    assert all(o["as_tensor"]["name"] in values for o in region["outputs"])


def test_region_kept_for_torch_2_7(rotary):
    out, findings = compat.downgrade(program_json(rotary), "torch==2.7")
    assert REGION in targets(out) and "target-inlined-grad-region" not in {f.code for f in findings}


def test_planner_writes_it_for_2_5(rotary):
    with serde.load(io.BytesIO(rotary)) as a:
        plan = compat_plan.plan_for_target(a, "torch==2.5")
    assert plan.writable, [str(f) for f in plan.blockers]
    members = dict(plan.members)
    written = json.loads(bytes(members["serialized_exported_program.json"]))
    assert written["schema_version"] == {"major": 7, "minor": 3}
    assert REGION not in targets(written) and "aten.cos.default" in " ".join(targets(written))


def test_written_for_2_6_runs_equal_in_torch(rotary, tmp_path):
    # the inlined program, written for 2.6 (8.x, flat zip), loads in this torch and computes eager's outputs
    path = tmp_path / "rotary_2_6.pt2"
    compat_plan.write_for_target(rotary, str(path), "torch==2.6")
    ep = torch.export.load(str(path))
    assert REGION not in [str(n.target) for n in ep.graph.nodes]
    torch.manual_seed(0)
    eager = Rotary().eval()
    x = torch.randn(1, 5, 8)
    torch.testing.assert_close(ep.module()(x), eager(x), rtol=0, atol=0)


def test_region_reading_a_parameter_is_refused():
    out, findings = compat.downgrade(program_json(exported(ParamInRegion)), "torch==2.5")
    errs = [f for f in findings if f.severity == "error"]
    assert [f.code for f in errs] == ["target-unrunnable-node"] and "wrap_with_set_grad_enabled" in errs[0].message
    assert REGION in targets(out)


@pytest.mark.parametrize("edit", ["rename_sub_input", "rename_sub_output", "clash", "mode_not_bool"])
def test_region_not_as_expected_is_refused(rotary, edit):
    doc = program_json(rotary)
    graph = doc["graph_module"]["graph"]
    (region,) = [n for n in graph["nodes"] if n["target"] == REGION]
    sub = region["inputs"][1]["arg"]["as_graph"]["graph"]
    if edit == "rename_sub_input":
        sub["inputs"][0]["as_tensor"]["name"] = "elsewhere"
    elif edit == "rename_sub_output":
        sub["outputs"][0]["as_tensor"]["name"] = "elsewhere"
    elif edit == "clash":
        inner_only = next(n for n in sub["tensor_values"] if n not in graph["tensor_values"])
        graph["tensor_values"][inner_only] = sub["tensor_values"][inner_only]
    else:
        region["inputs"][0]["arg"] = {"as_int": 0}
    _, findings = compat.downgrade(doc, "torch==2.5")
    assert "target-unrunnable-node" in {f.code for f in findings if f.severity == "error"}


def test_hostile_region_shapes_end_in_findings(rotary):
    # whatever a file holds in and around the region, downgrade answers with findings, never a crash
    import copy

    base = program_json(rotary)
    (at,) = [i for i, n in enumerate(base["graph_module"]["graph"]["nodes"]) if n["target"] == REGION]
    paths = [("inputs", 1, "arg", "as_graph"), ("inputs", 1, "arg", "as_graph", "graph", "tensor_values"),
             ("inputs", 1, "arg", "as_graph", "graph", "nodes"), ("inputs", 1, "arg", "as_graph", "graph", "inputs"),
             ("inputs", 2, "arg"), ("inputs",), ("outputs",)]
    for path in paths:
        for junk in (None, [1], 7, "x", {"as_tensor": []}):
            doc = copy.deepcopy(base)
            holder = doc["graph_module"]["graph"]["nodes"][at]
            for key in path[:-1]:
                holder = holder[key]
            holder[path[-1]] = junk
            _, findings = compat.downgrade(doc, "torch==2.5")
            if not isinstance(junk, dict):  # a dict of the wrong content may pass here; the reader names it
                assert "target-unrunnable-node" in {f.code for f in findings if f.severity == "error"}, (path, junk)
    for edit in ("signature", "tensor_values", "dtype"):
        doc = copy.deepcopy(base)
        gm = doc["graph_module"]
        if edit == "signature":
            gm["signature"]["input_specs"] = 5
        elif edit == "tensor_values":
            gm["graph"]["tensor_values"] = [1]
        else:
            name = gm["graph"]["nodes"][at]["inputs"][2]["arg"]["as_tensor"]["name"]
            gm["graph"]["tensor_values"][name]["dtype"] = [5]
        compat.downgrade(doc, "torch==2.5")  # findings or a Pt2Error, never a crash in the inliner
