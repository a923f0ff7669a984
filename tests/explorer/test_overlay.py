"""``pt2x verify --locate --node-data``: each ATen node's error over its tolerance as Model Explorer
node data. A planted fault (one convolution's weight scaled, in pt2x's ONNX and TFLite files) colors
that convolution, marked as the first divergence, and only the nodes that follow it as past the
tolerance; a clean conversion is within it everywhere. The files are read, where ``import torch``
fails, into Model Explorer's own node-data classes (strictly), and their keys are node ids of the
graphs the adapters make: pt2x's for the program, Model Explorer's ONNX adapter
(``model-explorer-onnx``) and its built-in TFLite adapter for the converted files."""

from __future__ import annotations

import json

import onnx
import pytest
import torch

import planted_faults as pf
from pt2x.explorer.overlay import BANDS, FIRST
from pt2x.tools.cli import main
from torchfree import run_torch_free
from verify_block import Block


FAULTED = "conv2d_1"  # conv2's node in the program, the one whose weight the faults scale


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    from pt2x.converters import to_onnx, to_tflite

    d = tmp_path_factory.mktemp("overlay")
    torch.manual_seed(0)
    ep = torch.export.export(Block().eval(), (torch.randn(2, 3, 8, 8),))
    out = {"pt2": str(d / "block.pt2"), "onnx": str(d / "block.onnx"), "tflite": str(d / "block.tflite"), "dir": d}
    torch.export.save(ep, out["pt2"])
    to_onnx(out["pt2"], out["onnx"])
    to_tflite(out["pt2"], out["tflite"])
    bad = pf.scale_onnx_weight(onnx.load(out["onnx"]), "conv2.weight", 1.5)
    out["onnx_bad"] = str(d / "bad.onnx")
    onnx.save(bad, out["onnx_bad"])
    with open(out["tflite"], "rb") as f:
        data, _ = pf.scale_tflite_weight(f.read(), "CONV_2D", 1, 1.5)
    out["tflite_bad"] = str(d / "bad.tflite")
    with open(out["tflite_bad"], "wb") as f:
        f.write(data)
    return out


def _node_data(files, target: str, kind: str, capsys) -> tuple[int, dict[str, str]]:
    nd = str(files["dir"] / f"{target}-{kind}.json")
    rc = main(["verify", files["pt2"], files[target if kind == "clean" else f"{target}_bad"], "--locate", "--node-data", nd])
    capsys.readouterr()
    stem = nd[: -len(".json")]
    return rc, {"ratio": nd, "max_abs": f"{stem}.max_abs.json", "max_rel": f"{stem}.max_rel.json",
                "converted": f"{stem}.{target}.json"}


def _graph(path: str) -> dict:
    from pt2x.explorer.program_graph import program_graphs

    return program_graphs(path)[0]


def _followers(graph: dict, start: str) -> set[str]:
    """``start`` and every node reachable from it."""
    users: dict[str, list[str]] = {}
    for n in graph["nodes"]:
        for e in n["incomingEdges"]:
            users.setdefault(e["sourceNodeId"], []).append(n["id"])
    seen, todo = set(), [start]
    while todo:
        n = todo.pop()
        if n not in seen:
            seen.add(n)
            todo += users.get(n, [])
    return seen


@pytest.mark.parametrize("target", ["onnx", "tflite"])
def test_planted_fault_colors_the_node_and_only_what_follows(files, capsys, target):
    rc, paths = _node_data(files, target, "fault", capsys)
    assert rc == 1
    with open(paths["ratio"]) as f:
        (graph_id, data), = json.load(f).items()
    assert graph_id == "graph" and data["name"].startswith(f"error / tolerance ({target} vs torch eager)")
    results = data["results"]
    past = {node for node, r in results.items() if r["value"] > 1}
    followers = _followers(_graph(files["pt2"]), FAULTED)
    assert FAULTED in past and past <= followers  # the fault and only what follows it
    assert results[FAULTED]["bgColor"] == FIRST[0] and results[FAULTED]["textColor"] == FIRST[1]
    assert {"add", "mean", "linear"} <= past
    before = {node: r for node, r in results.items() if node not in followers}
    # compared, and not past: nothing before the fault is blamed (LiteRT fuses the ReLU into conv1 and keeps
    # their values channels-last: TFLite holds neither as the program has it, so they are not compared)
    assert ({"conv2d", "relu", "mul"} if target == "onnx" else {"mul"}) <= set(before)
    assert all(r["value"] <= 1 and r["bgColor"] in (BANDS[0][1], BANDS[1][1]) for r in before.values())
    assert [t["bgColor"] for t in data["thresholds"]] == [b[1] for b in BANDS]
    with open(paths["max_abs"]) as f:
        abs_results = json.load(f)["graph"]["results"]
    assert set(abs_results) == set(results) and abs_results[FAULTED]["bgColor"] == FIRST[0]
    assert abs_results["mul"]["value"] < 1e-4 < abs_results[FAULTED]["value"]


@pytest.mark.parametrize("target", ["onnx", "tflite"])
def test_clean_conversion_is_within_tolerance_everywhere(files, capsys, target):
    rc, paths = _node_data(files, target, "clean", capsys)
    assert rc == 0
    with open(paths["ratio"]) as f:
        results = json.load(f)["graph"]["results"]
    assert len(results) >= 5
    assert all(r["value"] <= BANDS[0][0] and r["bgColor"] == BANDS[0][1] for r in results.values()), results
    with open(paths["converted"]) as f:
        converted = json.load(f)["results"]
    assert converted and all(r["bgColor"] == BANDS[0][1] for r in converted.values())


# Where `import torch` fails: each file read into Model Explorer's node-data classes (strictly), and
# its keys looked up in the graphs the adapters make of the program and of the converted file.
_CHECK = r"""
import json, sys
from model_explorer.builtin_tflite_flatbuffer_adapter import BuiltinTfliteFlatbufferAdapter
from model_explorer_onnx.main import ONNXAdapter
from pt2x.explorer.main import Pt2xAdapter, as_graph_node_data

program, converted, target, *paths = sys.argv[1:]
settings = {"const_element_count_limit": 16}
ids = {"program": {g.id: {n.id for n in g.nodes} for g in Pt2xAdapter().convert(program, settings)["graphs"]}}
if target == "onnx":
    ids["converted"] = {g.id: {n.id for n in g.nodes} for g in ONNXAdapter().convert(converted, settings)["graphs"]}
else:
    graphs = BuiltinTfliteFlatbufferAdapter().convert(converted, settings)["graphCollections"][0].graphs
    ids["converted"] = {g["id"]: {n["id"] for n in g["nodes"]} for g in graphs}
out = {}
for path in paths:
    with open(path) as f:
        data = json.load(f)
    if "results" in data:  # one graph's node data: it applies to the graph shown, the main one
        main_graph = next(iter(ids["converted"]))
        missing = set(as_graph_node_data(data).results) - ids["converted"][main_graph]
        out[path] = {"graphs": [main_graph], "missing": sorted(missing)}
    else:
        graphs = {gid: as_graph_node_data(d) for gid, d in data.items()}
        missing = {k for gid, d in graphs.items() for k in d.results if k not in ids["program"][gid]}
        out[path] = {"graphs": sorted(graphs), "missing": sorted(missing)}
print(json.dumps(out))
"""


@pytest.mark.parametrize("target", ["onnx", "tflite"])
def test_node_data_loads_into_model_explorer_torch_free(files, capsys, target):
    _, paths = _node_data(files, target, "fault", capsys)
    r = run_torch_free(_CHECK, files["pt2"], files[f"{target}_bad"], target, *paths.values(), timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    checked = json.loads(r.stdout.strip().splitlines()[-1])
    for kind, path in paths.items():
        assert checked[path]["missing"] == [], (kind, checked[path])
    assert checked[paths["ratio"]]["graphs"] == ["graph"]
    with open(paths["converted"]) as f:
        converted = json.load(f)["results"]
    past = {k for k, r in converted.items() if r["value"] > 1}
    assert past and any(r["bgColor"] == FIRST[0] for r in converted.values())
    if target == "onnx":  # the Conv node itself, named after its ATen node
        assert converted[FAULTED]["bgColor"] == FIRST[0]


def test_node_data_needs_locate(files, tmp_path, capsys):
    assert main(["verify", files["pt2"], files["onnx"], "--node-data", str(tmp_path / "x.json")]) == 2
    assert "--node-data needs --locate" in capsys.readouterr().err
    assert not (tmp_path / "x.json").exists()


def test_node_data_loads_on_model_explorers_own_pt2_adapter(files, capsys):
    """Model Explorer's built-in adapter (it needs torch: torch.export.load) names the same nodes:
    the program's node data applies to its graph as well."""
    from model_explorer.builtin_pytorch_exportedprogram_adapter import BuiltinPytorchExportedProgramAdapter

    _, paths = _node_data(files, "onnx", "fault", capsys)
    (graph,) = BuiltinPytorchExportedProgramAdapter().convert(files["pt2"], {"const_element_count_limit": 16})["graphs"]
    with open(paths["ratio"]) as f:
        data = json.load(f)
    assert list(data) == [graph.id]
    assert set(data[graph.id]["results"]) <= {n.id for n in graph.nodes}
    assert FAULTED in {n.id for n in graph.nodes}
