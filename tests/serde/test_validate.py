"""``pt2x validate``: findings for broken references, with exit codes and stable --json."""

from __future__ import annotations

import io
import json
import zipfile

import pytest
import torch

from pt2x.tools.cli import main
import zoo


def _save(ep, path, edit=None, rel="models/model.json"):
    buf = io.BytesIO()
    torch.export.save(ep, buf)
    with zipfile.ZipFile(buf) as zin, zipfile.ZipFile(path, "w") as zout:
        for info in zin.infolist():
            data = zin.read(info.filename)
            if edit and info.filename.endswith(rel):
                obj = json.loads(data)
                edit(obj)
                data = json.dumps(obj).encode()
            zout.writestr(info.filename, data)
    return str(path)


def _run(capsys, *argv):
    rc = main(list(argv))
    return rc, capsys.readouterr()


def _codes(capsys, path):
    rc, out = _run(capsys, "validate", "--json", path)
    return rc, [f["code"] for f in json.loads(out.out)["findings"]]


@pytest.mark.parametrize("name", ["mlp_dynamic", "cond", "buffer_mutation", "dynamic_reshape", "non_contiguous", "map"])
def test_valid_programs(tmp_path, capsys, name):
    path = _save(zoo.exported(name), tmp_path / "ok.pt2")
    rc, out = _run(capsys, "validate", "--json", path)
    report = json.loads(out.out)
    assert rc == 0 and report["valid"] and report["readable"]
    assert set(report) == {"file", "valid", "readable", "kind", "target", "findings"}
    assert report["kind"] == "exported-program"


def _graph(obj):
    return obj["graph_module"]["graph"]


def test_undefined_value(tmp_path, capsys):
    def edit(obj):
        _graph(obj)["nodes"][1]["inputs"][0]["arg"] = {"as_tensor": {"name": "ghost"}}

    rc, codes = _codes(capsys, _save(zoo.exported("mlp_dynamic"), tmp_path / "a.pt2", edit))
    assert rc == 1 and codes == ["undefined-value"]


def test_value_produced_twice(tmp_path, capsys):
    def edit(obj):
        g = _graph(obj)
        g["nodes"][1]["outputs"] = g["nodes"][0]["outputs"]

    rc, codes = _codes(capsys, _save(zoo.exported("mlp_dynamic"), tmp_path / "a.pt2", edit))
    assert rc == 1 and "redefined-value" in codes


def test_spec_names_missing_input(tmp_path, capsys):
    def edit(obj):
        obj["graph_module"]["signature"]["input_specs"][0]["parameter"]["arg"]["name"] = "nope"

    rc, codes = _codes(capsys, _save(zoo.exported("mlp_dynamic"), tmp_path / "a.pt2", edit))
    assert rc == 1 and "signature-mismatch" in codes


def test_weight_shape_disagrees(tmp_path, capsys):
    def edit(obj):
        _graph(obj)["tensor_values"]["p_fc1_weight"]["sizes"][0] = {"as_int": 99}

    rc, codes = _codes(capsys, _save(zoo.exported("mlp_dynamic"), tmp_path / "a.pt2", edit))
    assert rc == 1 and "weight-mismatch" in codes


def test_weight_missing(tmp_path, capsys):
    def edit(obj):
        del obj["config"]["fc1.bias"]

    path = _save(zoo.exported("mlp_dynamic"), tmp_path / "a.pt2", edit, rel="model_weights_config.json")
    rc, codes = _codes(capsys, path)
    assert rc == 1 and codes.count("missing-weight") == 1


def test_symbol_without_range(tmp_path, capsys):
    pytest.importorskip("pt2x.serde.codec.symbolic")

    def edit(obj):
        obj["range_constraints"] = {}

    rc, codes = _codes(capsys, _save(zoo.exported("mlp_dynamic"), tmp_path / "a.pt2", edit))
    assert rc == 1 and set(codes) == {"unranged-symbol"}


def test_subgraph_checked(tmp_path, capsys):
    def edit(obj):
        for node in _graph(obj)["nodes"]:
            for named in node["inputs"]:
                if "as_graph" in named["arg"]:
                    named["arg"]["as_graph"]["graph"]["nodes"][0]["inputs"][0]["arg"] = {"as_tensor": {"name": "ghost"}}
                    return

    rc, out = _run(capsys, "validate", "--json", _save(zoo.exported("cond"), tmp_path / "a.pt2", edit))
    (f,) = json.loads(out.out)["findings"]
    assert rc == 1 and f["code"] == "undefined-value" and ".as_graph.graph.nodes[0]" in f["path"]


def test_hostile_expression_is_a_finding_and_runs_nothing(tmp_path, capsys):
    pytest.importorskip("pt2x.serde.codec.symbolic")
    marker = tmp_path / "MARKER"

    def edit(obj):
        _graph(obj)["tensor_values"]["x"]["sizes"][0]["as_expr"]["expr_str"] = f"__import__('os').system('touch {marker}')"

    rc, codes = _codes(capsys, _save(zoo.exported("mlp_dynamic"), tmp_path / "a.pt2", edit))
    assert rc == 1 and "bad-expression" in codes
    assert not marker.exists()


def test_corrupt_member_crc(tmp_path, capsys):
    path = tmp_path / "a.pt2"
    torch.export.save(zoo.exported("mlp_dynamic"), path)
    raw = bytearray(path.read_bytes())
    raw[20 + 60] ^= 0xFF  # inside the first weight's bytes (stored, 64-byte aligned)
    path.write_bytes(bytes(raw))
    rc, codes = _codes(capsys, str(path))
    assert rc == 1 and codes == ["crc-mismatch"]


def test_text_output_and_exit_codes(tmp_path, capsys):
    good = _save(zoo.exported("mlp_dynamic"), tmp_path / "good.pt2")
    rc, out = _run(capsys, "validate", good)
    assert rc == 0 and out.out.strip().endswith("good.pt2: valid")
    missing = tmp_path / "missing.pt2"
    rc, out = _run(capsys, "validate", str(missing))
    assert rc == 2
