"""Artifact compatibility with torch releases: check_target, downgrade, the planner (write_for_target), 7.x upgrade."""

from __future__ import annotations

import copy
import json
import math
import os
import zipfile

import numpy as np
import pytest

import pt2x.serde as serde
from pt2x.schema import definitions as d
from pt2x.serde.compat import plan as compat_plan
from pt2x.serde.compat import releases as compat_releases
from pt2x.serde.compat import target as compat
from pt2x.serde.codec import upgrade as compat_upgrade
from pt2x.serde.codec import json_codec
from pt2x.serde.archive.zip_writer import write_archive
from pt2x.serde.errors import Pt2UsageError, SchemaVersionError
from pt2x.tools.cli import main
from archive_edits import patched
from paths import FIXTURES

PT2 = os.path.join(FIXTURES, "pt2")
CASES = ["bf16_linear", "buffer_mutation", "cond", "conv_bn_pool", "dict_inputs", "lifted_constant",
         "mlp_core_aten", "mlp_dynamic", "tied_weights"]


def fixture(release: str, case: str) -> str:
    return os.path.join(PT2, f"torch-{release}", f"{case}.pt2")


def model_json(path: str) -> tuple[str, dict]:
    with zipfile.ZipFile(path) as z:
        (member,) = [n for n in z.namelist() if n.endswith("models/model.json")]
        return member, json.loads(z.read(member))


def nodes(doc):
    """Every Node object in a program JSON, subgraphs included."""
    if isinstance(doc, dict):
        if {"target", "inputs", "outputs", "metadata"} <= doc.keys():
            yield doc
        for v in doc.values():
            yield from nodes(v)
    elif isinstance(doc, list):
        for v in doc:
            yield from nodes(v)


def errors(findings):
    return [f for f in findings if f.severity == "error"]


def rewrite_for_target(src, dst, target) -> int:
    """``pt2x convert SRC --to pt2 --target-schema TARGET -o DST``: 0 written, 1 blocked."""
    return main(["convert", str(src), "--to", "pt2", "--target-schema", target, "-o", str(dst)])


# --------------------------------------------------------------------- parse_target


@pytest.mark.parametrize(
    "text, want",
    [("torch==2.10", (8, 15)), ("2.10", (8, 15)), ("torch==2.14.1", (8, 20)), ("2.6", (8, 2)),
     ("8.15", (8, 15)), ("schema==8.15", (8, 15)), ("7.3", (7, 3)), (" torch==2.9.0 ", (8, 14))],
)
def test_parse_target(text, want):
    assert compat_releases.parse_target(text) == want


@pytest.mark.parametrize("text", ["torch==2.4", "2.99", "latest", "8", "torch=2.10"])
def test_parse_target_refuses(text):
    with pytest.raises(Pt2UsageError):
        compat_releases.parse_target(text)


def test_target_without_a_released_snapshot():
    with pytest.raises(Pt2UsageError, match="no torch release shipped schema 8.16"):
        compat_releases.target_snapshot("8.16")


# ------------------------------------------------------------------- check_target


def test_new_file_for_old_release_passes_with_warnings():
    # 2.14.1 writes Node.name (8.17); torch 2.10's reader skips unknown keys -> warnings only.
    with serde.load(fixture("2.14.1", "cond")) as a:
        findings = compat_plan.check_target(a, "torch==2.10")
    assert errors(findings) == []
    (w,) = findings
    assert w.code == "target-ignored-field" and "Node.name" in w.message and "6 places" in w.message
    assert w.member == "cond/models/model.json" and w.path == "graph_module.graph.nodes[0].name"


@pytest.mark.parametrize("case", CASES)
def test_old_file_for_new_release_passes(case):
    with serde.load(fixture("2.10.0", case)) as a:
        assert compat_plan.check_target(a, "torch==2.14") == []
        assert compat_plan.check_target(a, (8, 15)) == []


def test_strict_release_blocks_unknown_fields():
    # torch <= 2.8 builds structs with cls(**data): an unknown key is a TypeError.
    with serde.load(fixture("2.14.1", "cond")) as a:
        findings = compat_plan.check_target(a, "torch==2.8")
    codes = {f.code for f in errors(findings)}
    assert codes == {"target-archive-layout", "target-unknown-field"}
    paths = {f.path for f in findings if f.code == "target-unknown-field"}
    assert "guards_code" in paths
    assert "graph_module.graph.nodes[2].inputs[1].arg.as_graph.graph.nodes[0].name" in paths


def test_flat_zip_only_release_blocks_pt2_layout():
    with serde.load(fixture("2.14.1", "mlp_dynamic")) as a:
        findings = compat_plan.check_target(a, "2.6")
    assert findings[0].code == "target-archive-layout" and "flat zip" in findings[0].message


def test_schema_major_must_match():
    with serde.load(fixture("2.14.1", "mlp_dynamic")) as a:
        findings = compat_plan.check_target(a, "7.3")
    assert any(f.code == "target-schema-major" for f in findings)


def test_unknown_enum_value_and_union_member_block(tmp_path):
    def edit(doc):
        g = doc["graph_module"]["graph"]
        name = next(iter(g["tensor_values"]))
        g["tensor_values"][name]["dtype"] = d.ScalarType.UINT32.value  # new in 8.20
        g["nodes"][1]["inputs"][0]["arg"] = {"as_float_lists": [[1.0, 2.0]]}  # new in 8.20
        edit.where = "graph_module.graph.nodes[1].inputs[0].arg.as_float_lists"
        edit.name = name

    path = patched(tmp_path, fixture("2.14.1", "mlp_dynamic"), edit)
    with serde.load(path) as a:
        assert errors(compat_plan.check_target(a, "2.14")) == []
        findings = errors(compat_plan.check_target(a, "torch==2.10"))
    by_code = {f.code: f for f in findings}
    assert set(by_code) == {"target-unknown-enum-value", "target-unknown-union-member"}
    assert by_code["target-unknown-union-member"].path == edit.where
    assert by_code["target-unknown-enum-value"].path == f"graph_module.graph.tensor_values[{edit.name!r}].dtype"
    assert by_code["target-unknown-enum-value"].member == "mlp_dynamic/models/model.json"
    # still fine for the releases that know them
    with serde.load(path) as a:
        assert errors(compat_plan.check_target(a, "2.12")) == []


def test_check_target_via_validate_cli(capsys):
    assert main(["validate", fixture("2.14.1", "cond"), "--target", "torch==2.10"]) == 0
    assert "valid for torch==2.10" in capsys.readouterr().out
    assert main(["validate", fixture("2.14.1", "cond"), "--target-schema", "8.8", "--json"]) == 1
    out = json.loads(capsys.readouterr().out)
    assert not out["valid"] and any(f["code"] == "target-unknown-field" for f in out["findings"])


# ---------------------------------------------------------------------- downgrade


def test_downgrade_drops_defaults_and_sets_version():
    _, doc = model_json(fixture("2.14.1", "cond"))
    before = copy.deepcopy(doc)
    for node in nodes(doc):
        node["name"] = None  # holds the default: dropped silently
    out, findings = compat.downgrade(doc, "torch==2.8")
    assert findings == []
    assert out["schema_version"] == {"major": 8, "minor": 8}
    assert "guards_code" not in out and all("name" not in n for n in nodes(out))
    assert compat.check_program_json(out, "2.8") == []  # decodes cleanly against 8.8
    assert doc["graph_module"]["graph"]["nodes"][0]["name"] is None and before["guards_code"] == doc["guards_code"]


def test_downgrade_warns_when_dropping_a_value():
    member, doc = model_json(fixture("2.14.1", "cond"))
    out, findings = compat.downgrade(doc, "8.15", member=member)
    (w,) = findings
    assert w.severity == "warning" and w.code == "target-dropped-field" and w.member == member
    assert compat.check_program_json(out, "8.15") == []


def test_downgrade_refuses_meaningful_fields():
    _, doc = model_json(fixture("2.14.1", "dict_inputs"))
    doc["graph_module"]["treespec_namedtuple_fields"] = {"Point": {"field_names": ["x", "y"]}}
    _, findings = compat.downgrade(doc, "2.6")
    assert any(f.code == "target-unknown-field" and f.path == "graph_module.treespec_namedtuple_fields" for f in errors(findings))


def test_downgrade_spells_infinity_for_2_6():
    _, doc = model_json(fixture("2.14.1", "mlp_dynamic"))
    node = doc["graph_module"]["graph"]["nodes"][0]
    node["inputs"].append({"name": "bound", "arg": {"as_float": "Infinity"}, "kind": 2})
    assert any(f.code == "target-float-string" for f in compat.check_program_json(doc, "2.6"))
    out, findings = compat.downgrade(doc, "2.6")
    assert not errors(findings)
    assert math.isinf(out["graph_module"]["graph"]["nodes"][0]["inputs"][-1]["arg"]["as_float"])
    assert json.dumps(out).count("Infinity") == 1  # a bare token, as torch 2.6 wrote it
    assert compat.check_program_json(out, "2.6") == []
    # 2.7+ keep the string form
    out, _ = compat.downgrade(doc, "2.7")
    assert out["graph_module"]["graph"]["nodes"][0]["inputs"][-1]["arg"]["as_float"] == "Infinity"


def test_downgrade_of_encoded_program():
    with serde.load(fixture("2.13.0", "conv_bn_pool")) as a:
        doc = json_codec.encode(a.model().program)
    out, findings = compat.downgrade(doc, (8, 14))
    assert not errors(findings) and compat.check_program_json(out, (8, 14)) == []
    json_codec.decode(d.ExportedProgram, out)  # still a valid 8.x program for pt2x


def test_downgrade_major_mismatch_is_a_blocker():
    # 8.x -> 7.3 is a downgrade across the major (test_compat_schema7.py); any other major has no route
    _, doc = model_json(fixture("2.14.1", "cond"))
    _, findings = compat.downgrade({**doc, "schema_version": {"major": 9, "minor": 0}}, "7.3")
    assert [f.code for f in findings] == ["target-schema-major"]
    _, findings = compat.downgrade({**doc, "schema_version": {"major": 6, "minor": 1}}, "8.20")
    assert [f.code for f in findings] == ["target-schema-major"]
    out, findings = compat.downgrade(doc, "7.3")
    assert not errors(findings) and out["schema_version"] == {"major": 7, "minor": 3}


# -------------------------------------------------------------- rewrite_for_target


@pytest.mark.parametrize("case", CASES)
def test_rewrite_2_14_for_2_10(tmp_path, case, capsys):
    src = fixture("2.14.1", case)
    dst = tmp_path / f"{case}.pt2"
    assert rewrite_for_target(src, dst, "8.15") == 0
    with serde.load(dst) as a:
        assert a.schema_version == (8, 15)
        assert compat_plan.check_target(a, "torch==2.10") == []
        with serde.load(src) as b:
            np.testing.assert_equal(
                {k: np.asarray(v) for k, v in a.model().state_dict.items()},
                {k: np.asarray(v) for k, v in b.model().state_dict.items()},
            )
    with zipfile.ZipFile(src) as zs, zipfile.ZipFile(dst) as zd:
        assert zs.namelist() == zd.namelist()
        changed = [n for n in zs.namelist() if zs.read(n) != zd.read(n)]
    assert changed == [f"{case}/models/model.json"]


def with_native_code(tmp_path, src: str) -> str:
    """A copy of ``src`` holding an AOTInductor member, which the older layouts have no place for."""
    with zipfile.ZipFile(src) as z:
        members = [(n, z.read(n)) for n in z.namelist()]
    root = members[0][0].split("/", 1)[0]
    dst = tmp_path / ("native-" + os.path.basename(src))
    write_archive(dst, [*members, (f"{root}/data/aotinductor/model/model.so", b"\x7fELF")])
    return str(dst)


def test_rewrite_blocked_writes_nothing(tmp_path, capsys):
    dst = tmp_path / "out.pt2"
    assert rewrite_for_target(with_native_code(tmp_path, fixture("2.14.1", "cond")), dst, "torch==2.8") == 1
    assert not dst.exists()
    err = capsys.readouterr().err
    assert "target-archive-layout" in err and "aotinductor" in err and "not written" in err


def test_convert_cli(tmp_path, capsys):
    dst = tmp_path / "o.pt2"
    assert main(["convert", fixture("2.13.0", "tied_weights"), "--to", "pt2", "--target-schema", "torch==2.9", "-o", str(dst)]) == 0
    with serde.load(dst) as a:
        assert a.schema_version == (8, 14) and compat_plan.check_target(a, "2.9") == []
    assert main(["convert", fixture("2.13.0", "tied_weights"), "--to", "pt2", "-o", str(dst)]) == 2
    capsys.readouterr()


def test_torch_2_13_loads_rewritten_2_14_file(tmp_path):
    torch = pytest.importorskip("torch")
    for case in ("cond", "mlp_dynamic", "conv_bn_pool"):
        dst = tmp_path / f"{case}.pt2"
        assert rewrite_for_target(fixture("2.14.1", case), dst, "8.15") == 0
        ep = torch.export.load(str(dst))
        data = np.load(fixture("2.14.1", case).replace(".pt2", ".npz"))
        ins = [torch.from_numpy(data[k]) for k in sorted((k for k in data if k.startswith("in_")), key=lambda k: int(k[3:]))]
        out = ep.module()(*ins)
        out = out[0] if isinstance(out, (tuple, list)) else out
        np.testing.assert_allclose(out.detach().numpy(), data["out_0"], rtol=1e-5, atol=1e-5)


# --------------------------------------------------------------------- 7.x upgrade


def as_schema_7(doc: dict) -> dict:
    """Write an 8.x program the way torch 2.5 (schema 7.3) did: () for as_none, inf bounds, no 8.x fields."""
    _, _, snap7 = compat_releases.target_snapshot((7, 3))
    doc, _ = compat.downgrade({**doc, "schema_version": {"major": 7, "minor": 3}}, (7, 3))

    def walk(v):
        if isinstance(v, dict):
            return {k: ([] if k == "as_none" and x is True else walk(x)) for k, x in v.items()}
        if isinstance(v, list):
            return [walk(x) for x in v]
        return v

    doc = walk(doc)
    for rc in doc["range_constraints"].values():
        rc["min_val"] = -math.inf if rc["min_val"] is None else rc["min_val"]
        rc["max_val"] = math.inf if rc["max_val"] is None else rc["max_val"]
    assert "ExportedProgram" in snap7["types"]
    return doc


def test_upgrade_7_to_8():
    _, doc8 = model_json(fixture("2.14.1", "mlp_dynamic"))
    doc8["range_constraints"] = {"s0": {"min_val": 1, "max_val": None}}
    doc8["graph_module"]["graph"]["outputs"].append({"as_none": True})
    doc7 = as_schema_7(doc8)
    text = json.dumps(doc7)  # as torch 2.5 wrote it: bare Infinity, [] for None
    assert "Infinity" in text and '"as_none": []' in text
    up = compat_upgrade.upgrade_to_current(json.loads(text))
    assert up["schema_version"] == {"major": 8, "minor": 0}
    assert up["range_constraints"] == {"s0": {"min_val": 1, "max_val": None}}
    assert up["graph_module"]["graph"]["outputs"][-1] == {"as_none": True}
    program = json_codec.decode(d.ExportedProgram, up)
    assert len(program.graph_module.graph.nodes) == len(doc8["graph_module"]["graph"]["nodes"])


def test_upgrade_leaves_8x_alone():
    _, doc = model_json(fixture("2.14.1", "cond"))
    assert compat_upgrade.upgrade_to_current(doc) is doc


def test_upgrade_refuses_what_is_not_mechanical():
    _, doc8 = model_json(fixture("2.14.1", "mlp_dynamic"))
    doc7 = as_schema_7(doc8)
    doc7["graph_module"]["graph"]["outputs"].append({"as_mystery": 1})
    with pytest.raises(SchemaVersionError, match=r"unsupported: schema 7\.3, written by torch .*; supported 8\.0–8\.20") as e:
        compat_upgrade.upgrade_to_current(doc7)
    assert e.value.path.startswith("graph_module.graph.outputs[")


def test_upgrade_refuses_other_majors():
    with pytest.raises(SchemaVersionError, match=r"unsupported: schema 6\.1"):
        compat_upgrade.upgrade_to_current({"schema_version": {"major": 6, "minor": 1}})
    with pytest.raises(SchemaVersionError, match=r"newest known 7\.x is 7\.3"):
        compat_upgrade.upgrade_to_current({"schema_version": {"major": 7, "minor": 9}})


def test_reader_upgrades_a_7x_archive(tmp_path):
    src = fixture("2.14.1", "mlp_dynamic")
    def edit(doc):
        v7 = as_schema_7(doc)
        doc.clear()
        doc.update(v7)

    path = patched(tmp_path, src, edit)
    with serde.load(path) as a:
        assert a.schema_version == (8, 0)
        assert a.model().program.graph_module.graph.nodes


@pytest.mark.parametrize("case", CASES)
def test_flat_2_6_file_reads_everywhere(case):
    # torch 2.6's flat zip: readable by 2.6 itself and by every later 8.x release, except its
    # higher-order-op outputs (cond's 1-tuple as one as_tensors list), which 2.8+ reject.
    with serde.load(fixture("2.6.0", case)) as a:
        assert a.layout == "flat"
        for target in ("2.6", "2.8", "torch==2.10", "2.14"):
            findings = compat_plan.check_target(a, target)
            if case == "cond" and target != "2.6":
                assert [(f.code, f.severity) for f in findings] == [("target-hop-output-form", "error")], target
            else:
                assert findings == [], target


def test_rewrite_flat_archive_keeps_layout(tmp_path):
    src, dst = fixture("2.6.0", "mlp_dynamic"), tmp_path / "flat.pt2"
    assert rewrite_for_target(src, dst, "torch==2.6") == 0
    with zipfile.ZipFile(src) as zs, zipfile.ZipFile(dst) as zd:
        assert zs.namelist() == zd.namelist()
        assert [n for n in zs.namelist() if zs.read(n) != zd.read(n)] == []  # already 8.2 content
    with serde.load(dst) as a:
        assert a.layout == "flat" and compat_plan.check_target(a, "2.6") == []


# ------------------------------------------------------- one planner, every path

PLAN_TARGETS = ["7.3", "8.8", "8.14", "8.15", "8.20"]
RELEASES = ["2.5.1", "2.6.0", "2.8.0", "2.10.0", "2.14.1"]


@pytest.mark.parametrize("target", PLAN_TARGETS)
@pytest.mark.parametrize("release", RELEASES)
def test_validate_verdict_is_what_convert_writes(tmp_path, capsys, release, target):
    # validate --target and convert --to pt2 --target-schema ask the same planner: for every
    # fixture, "valid for the target" and "writable" are exactly "convert writes a file".
    for case in CASES:
        src, dst = fixture(release, case), tmp_path / f"{release}-{case}.pt2"
        assert main(["validate", src, "--target-schema", target, "--json"]) in (0, 1)
        verdict = json.loads(capsys.readouterr().out)
        rc = main(["convert", src, "--to", "pt2", "--target-schema", target, "-o", str(dst)])
        capsys.readouterr()
        assert rc in (0, 1) and (rc == 0) == dst.exists()
        # readable as is implies writable; a layout the target cannot read is written in one it can
        assert verdict["writable"] == (rc == 0) and (verdict["writable"] or not verdict["valid"]), (
            release, case, target, verdict["findings"])
        if rc == 0:
            with serde.load(dst) as a:
                assert compat_plan.check_target(a, target) == [], (release, case, target, a.layout)


@pytest.mark.parametrize("target", ["8.2", "8.8", "8.14", "8.20"])
def test_writable_for_target_is_the_plans_verdict(tmp_path, target):
    # validate --target and pt2x scan ask writable_for_target, which skips building the members
    # (an older layout re-pickles every weight): it must say what the full plan says
    sources = [fixture("2.14.1", "mlp_dynamic"), fixture("2.8.0", "cond"), fixture("2.6.0", "tied_weights"),
               with_native_code(tmp_path, fixture("2.14.1", "cond"))]
    verdicts = []
    for src in sources:
        with serde.load(src) as a:
            verdicts.append(compat_plan.writable_for_target(a, target))
            assert verdicts[-1] == compat_plan.plan_for_target(a, target).writable, (src, target)
    # compiled code (an AOTInductor member) is never written, for any target (native-code; the
    # older layouts have no place for it either)
    assert verdicts == [True, True, True, False], verdicts


def test_plan_writes_the_layout_older_releases_read():
    # the layout step is the planner's: raw weights are read as is by 2.9+ only, so for 8.8
    # every path writes pickled data/weights/<m>.pt, and for 8.2 the flat zip
    with serde.load(fixture("2.14.1", "mlp_dynamic")) as a:
        assert "target-archive-layout" in {f.code for f in compat_plan.check_target(a, "8.8")}
        plan = compat_plan.plan_for_target(a, "8.8")
        assert plan.writable and not plan.blockers
        assert [n for n, _ in plan.members] == [f"mlp_dynamic/{m}" for m in (
            "models/model.json", "data/weights/model.pt", "data/constants/model.pt", "data/sample_inputs/model.pt",
            "archive_format", "archive_version", ".data/version", "byteorder", ".data/serialization_id")]
        flat = compat_plan.plan_for_target(a, "8.2")
        assert [n for n, _ in flat.members] == ["serialized_exported_program.json", "serialized_state_dict.pt",
                                               "serialized_constants.pt", "serialized_example_inputs.pt", "version"]
        assert dict(flat.members)["version"] == b"8.2"
    with serde.load(fixture("2.8.0", "mlp_dynamic")) as a:  # pickled weights: 2.8 reads them as they are
        assert compat_plan.target_layout(a, (8, 8)) is None and compat_plan.plan_for_target(a, "8.8").writable
        assert compat_plan.target_layout(a, (8, 2)) == "flat"


def test_write_for_target_raises_with_the_plan(tmp_path):
    dst = tmp_path / "out.pt2"
    with pytest.raises(compat_plan.TargetNotWritable) as e:
        compat_plan.write_for_target(with_native_code(tmp_path, fixture("2.14.1", "cond")), dst, "torch==2.8")
    assert isinstance(e.value, Pt2UsageError) and not dst.exists()
    assert "target-archive-layout" in {f.code for f in e.value.plan.blockers}
    plan = compat_plan.write_for_target(fixture("2.14.1", "cond"), dst, (8, 15))
    assert plan.writable and plan.version == (8, 15) and dst.exists()
