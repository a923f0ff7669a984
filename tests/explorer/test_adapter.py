"""The Model Explorer adapter (``pt2x.explorer``): every fixture and zoo program read where ``import
torch`` fails, through Model Explorer's own extension manager, into its own graph classes (strictly:
a key they do not know fails); node ids equal the FX node names ``torch.export.load`` gives, so
node data made for Model Explorer's built-in ``.pt2`` adapter loads on this one; namespaces follow
the module calls; inputs and weights carry dtype, symbolic shape and size; hostile files are
refused with the reader's error and nothing in them runs."""

from __future__ import annotations

import glob
import io
import os
import pickle
import zipfile

import pytest
import torch

import zoo
from explorer_check import check_well_formed, convert_torch_free, fx_node_names
from paths import REPO

FIXTURES = sorted(glob.glob(os.path.join(REPO, "tests", "fixtures", "pt2", "*", "*.pt2")))

@pytest.fixture(scope="module")
def zoo_files(tmp_path_factory) -> dict[str, tuple[str, dict]]:
    """Every exportable zoo program, saved: name -> (path, torch's FX node names of the loaded file)."""
    d = tmp_path_factory.mktemp("explorer_zoo")
    out = {}
    for name in zoo.exportable_names():
        path = str(d / f"{name}.pt2")
        torch.export.save(zoo.exported(name), path)
        out[name] = (path, fx_node_names(torch.export.load(path)))
    return out


class _Outputs(torch.nn.Module):
    """Nodes of several outputs: a list (unbind, split), a tuple with unused members (layer norm's
    mean and rstd after decomposition, max pool's indices)."""

    def forward(self, x):
        a, b, c = x.unbind(1)
        d, e = torch.split(x, [1, 2], dim=1)
        pooled = torch.nn.functional.max_pool2d(x.unsqueeze(0), 2, return_indices=True)[0]
        norm = torch.nn.functional.layer_norm(a + b * c, (4,))
        return norm + d.sum() + e.mean() + pooled.sum()


@pytest.fixture(scope="module")
def outputs_file(tmp_path_factory) -> tuple[str, dict]:
    path = str(tmp_path_factory.mktemp("outputs") / "outputs.pt2")
    torch.export.save(torch.export.export(_Outputs(), (torch.randn(4, 3, 4),)).run_decompositions(), path)
    return path, fx_node_names(torch.export.load(path))


@pytest.fixture(scope="module")
def converted(zoo_files, outputs_file) -> dict:
    return convert_torch_free(FIXTURES + [p for p, _ in zoo_files.values()] + [outputs_file[0]])


def test_every_fixture_loads_torch_free(converted):
    for path in FIXTURES:
        resp = converted[path]
        assert "error" not in resp, (path, resp)
        check_well_formed(resp["graphs"])
        assert resp["graphs"][0]["id"] == "graph"


def test_node_ids_are_torch_fx_names(converted, zoo_files, outputs_file):
    """Fixtures torch 2.13 loads, every zoo program, and nodes of several outputs: the same ids in
    every graph, subgraphs included."""
    path, fx = outputs_file
    mine = {g["id"]: sorted(n["id"] for n in g["nodes"]) for g in converted[path]["graphs"]}
    assert mine == {k: sorted(v) for k, v in fx.items()}
    compared = 0
    for path in FIXTURES:
        try:
            ep = torch.export.load(path)
        except Exception:  # noqa: BLE001 - torch 2.5's flat layout and one 2.6 cond: torch itself refuses them
            continue
        mine = {g["id"]: sorted(n["id"] for n in g["nodes"]) for g in converted[path]["graphs"]}
        assert mine == {k: sorted(v) for k, v in fx_node_names(ep).items()}, path
        compared += 1
    for name, (path, fx) in zoo_files.items():
        resp = converted[path]
        assert "error" not in resp, (name, resp)
        check_well_formed(resp["graphs"])
        mine = {g["id"]: sorted(n["id"] for n in g["nodes"]) for g in resp["graphs"]}
        assert mine == {k: sorted(v) for k, v in fx.items()}, name
        compared += 1
    assert compared >= 40 + len(zoo_files)
    control_flow = {g["id"] for name in ("cond", "while_loop", "map") for g in converted[zoo_files[name][0]]["graphs"]}
    assert {"graph/cond.true_graph_0", "graph/cond.false_graph_0", "graph/while_loop.while_loop_cond_graph_0",
            "graph/while_loop.while_loop_body_graph_0", "graph/map_impl.body_graph_0"} <= control_flow


class _Inner(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(4, 4, 3, padding=1)
        self.bn = torch.nn.BatchNorm2d(4)

    def forward(self, x):
        return torch.relu(self.bn(self.conv(x)))


class _Nested(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = torch.nn.Conv2d(3, 4, 1)
        self.blocks = torch.nn.ModuleList([_Inner(), _Inner()])
        self.blocks[1].conv = self.blocks[0].conv  # one weight read from two modules
        self.head = torch.nn.Linear(4, 2)

    def forward(self, x):
        y = self.blocks[1](self.blocks[0](self.stem(x)))
        return self.head(y.mean(dim=(2, 3)))


@pytest.fixture(scope="module")
def nested(tmp_path_factory) -> dict:
    path = str(tmp_path_factory.mktemp("nested") / "nested.pt2")
    ep = torch.export.export(_Nested().eval(), (torch.randn(2, 3, 8, 8),),
                             dynamic_shapes=({0: torch.export.Dim("batch", min=1, max=16)},))
    torch.export.save(ep, path)
    (graph,) = convert_torch_free([path])[path]["graphs"]
    return {n["id"]: n for n in graph["nodes"]} | {"": graph}


def _attrs(node: dict) -> dict:
    return {kv["key"]: kv["value"] for kv in node["attrs"]}


def _meta(node: dict) -> dict:
    return {kv["key"]: kv["value"] for kv in node["outputsMetadata"][0]["attrs"]}


def _by_label(nested: dict, label: str) -> list[dict]:
    return [n for k, n in nested.items() if k and n["label"] == label]


def test_namespaces_follow_module_calls(nested):
    assert sorted(n["namespace"] for n in _by_label(nested, "aten.conv2d")) == ["blocks.0/conv", "blocks.1/conv", "stem"]
    assert [n["namespace"] for n in _by_label(nested, "aten.linear")] == ["head"]
    assert [n["namespace"] for n in _by_label(nested, "aten.mean")] == [""]
    # a weight sits in the deepest module all its readers share: the tied conv weight at the top
    assert nested["p_blocks_1_conv_weight"]["namespace"] == ""
    assert nested["p_blocks_0_conv_weight"]["namespace"] == "blocks.0/conv"  # its tied twin is read instead
    assert nested["p_blocks_0_bn_weight"]["namespace"] == "blocks.0/bn"
    assert nested["b_blocks_1_bn_num_batches_tracked"]["namespace"] == "blocks.1/bn"  # read by nothing: its module
    groups = nested[""]["groupNodeAttributes"]
    assert groups["blocks.1/bn"] == {"module": "blocks.1.bn", "class": "torch.nn.modules.batchnorm.BatchNorm2d"}
    assert groups[""]["range s77"] == "[1, 16]"


def test_inputs_and_weights_carry_dtype_shape_and_size(nested):
    x = nested["x"]
    assert _attrs(x) == {"kind": "user input", "dtype": "float32", "shape": "[s77, 3, 8, 8]"}
    assert _meta(x) == {"tensor_name": "x", "tensor_shape": "float32[s77, 3, 8, 8]"}
    w = _attrs(nested["p_head_weight"])
    assert w == {"kind": "parameter", "fqn": "head.weight", "dtype": "float32", "shape": "[2, 4]", "size": "32 bytes"}
    assert _attrs(nested["b_blocks_0_bn_running_mean"])["kind"] == "buffer"
    assert not any(kv["key"] == "__value" for k, n in nested.items() if k for kv in n.get("attrs", ()))  # no bytes
    (linear,) = _by_label(nested, "aten.linear")
    assert _meta(linear)["tensor_shape"] == "float32[s77, 2]"
    assert _attrs(nested["output"]) == {"output 0": f"{linear['id']}: float32[s77, 2]"}
    conv = _attrs(next(n for n in _by_label(nested, "aten.conv2d") if n["namespace"] == "stem"))
    assert conv["target"] == "torch.ops.aten.conv2d.default" and conv["weight"] == "p_stem_weight"
    assert conv["module"] == "stem (torch.nn.modules.conv.Conv2d)"


class _Boom:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def _with_boom(torch_zip: bytes, marker) -> bytes:
    """A ``torch.save`` zip whose ``data.pkl`` would run ``os.system`` when unpickled."""
    src, buf = zipfile.ZipFile(io.BytesIO(torch_zip)), io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for name in src.namelist():
            z.writestr(name, pickle.dumps(_Boom(marker)) if name.endswith("/data.pkl") else src.read(name))
    return buf.getvalue()


def test_hostile_files_are_refused_and_nothing_runs(tmp_path):
    marker = tmp_path / "MARKER"
    src = os.path.join(REPO, "tests", "fixtures", "pt2", "torch-2.6.0", "mlp_dynamic.pt2")
    with zipfile.ZipFile(src) as z:
        members = [(n, z.read(n)) for n in z.namelist()]
    pickled = str(tmp_path / "pickled.pt2")
    with zipfile.ZipFile(pickled, "w") as z:
        for name, data in members:
            z.writestr(name, _with_boom(data, marker) if name.endswith("serialized_state_dict.pt") else data)
    truncated = str(tmp_path / "truncated.pt2")
    with open(src, "rb") as f, open(truncated, "wb") as g:
        g.write(f.read()[:300])
    not_a_zip = str(tmp_path / "text.pt2")
    with open(not_a_zip, "w") as f:
        f.write("import os; os.system('touch MARKER')")
    aoti = os.path.join(REPO, "tests", "fixtures", "aoti", "linear_cpu.pt2")  # compiled code, never loaded
    out = convert_torch_free([pickled, truncated, not_a_zip, aoti])
    for path in (pickled, truncated, not_a_zip, aoti):
        assert out[path]["error"].endswith("Error") and out[path]["message"], out[path]
    assert out[aoti]["error"] == "UnsafeContentError" and "an AOTInductor package" in out[aoti]["message"]
    assert "posix.system" in out[pickled]["message"] or "fc1.weight" in out[pickled]["message"], out[pickled]
    assert not marker.exists()
