"""The committed schema snapshots: current, canonical, checksummed, torch-comparable."""

from __future__ import annotations

import json
from dataclasses import field
from pathlib import Path
from typing import Dict, List, Optional

import pytest

from pt2x.schema import SCHEMA_TYPES
from pt2x.schema.kinds import SchemaEnum, Union, struct, union
from pt2x.schema.version import SCHEMA_VERSION
from pt2x.schema.snapshot import TORCH_SNAPSHOT_DIR as TORCH_DIR, torch_releases
from pt2x.schema import snapshot
from pt2x.tools import snapshot_sources
from workshop import load_script

gen = load_script("gen_schema_snapshot")
imp = load_script("import_torch_schemas")



def test_committed_snapshot_is_current():
    # Fails when schema/definitions.py changed without regenerating the snapshot.
    want = snapshot.render(snapshot.build_snapshot())
    have = snapshot.PT2X_SNAPSHOT.read_text()
    assert have == want, "schema/snapshots/pt2x.json is stale: run python -m scripts.gen_schema_snapshot"
    assert gen.main(["--check"]) == 0


def test_snapshot_header_and_checksum():
    snap = snapshot.read_snapshot(snapshot.PT2X_SNAPSHOT)
    assert snap["schema_version"] == list(SCHEMA_VERSION)
    assert snap["checksum"] == snapshot.checksum(snap["schema_version"], snap["types"])
    assert set(snap["types"]) == set(SCHEMA_TYPES)
    assert list(snap["types"]) == sorted(snap["types"])  # sorted like torch's yaml
    text = snapshot.PT2X_SNAPSHOT.read_text()
    assert any(line.strip().startswith('"checksum": "sha256:') for line in text.splitlines())


def test_hand_edit_is_detected(tmp_path):
    text = snapshot.PT2X_SNAPSHOT.read_text().replace('"index": {"type": "Optional[int]"', '"index": {"type": "int"', 1)
    bad = tmp_path / "bad.json"
    bad.write_text(text)
    with pytest.raises(ValueError, match="checksum mismatch"):
        snapshot.read_snapshot(bad)


def test_type_strings_are_torch_style():
    types = snapshot.read_snapshot(snapshot.PT2X_SNAPSHOT)["types"]
    assert types["SymExpr"]["fields"]["hint"] == {"type": "Optional[SymExprHint]", "default": "None"}
    assert types["Argument"]["fields"]["as_string_to_argument"] == {"type": "Dict[str, Argument]"}
    assert types["Argument"]["fields"]["as_ints"] == {"type": "List[int]"}
    assert types["Graph"]["fields"]["is_single_tensor_return"] == {"type": "bool", "default": "False"}
    assert types["ExportedProgram"]["fields"]["torch_version"] == {"type": "str", "default": "<=2.4"}
    assert types["ModuleCallSignature"]["fields"]["forward_arg_names"]["type"] == "Optional[List[str]]"
    assert types["ScalarType"] == {"kind": "enum", "fields": {m.name: m.value for m in SCHEMA_TYPES["ScalarType"]}}


def test_pt2x_schema_equals_torch_8_20():
    # pt2x's definitions follow torch's published 8.20 schema field for field.
    ours = snapshot.read_snapshot(snapshot.PT2X_SNAPSHOT)
    torch_214 = snapshot.read_snapshot(TORCH_DIR / "torch-2.14.json")
    assert ours["types"] == torch_214["types"]
    assert ours["schema_version"] == torch_214["schema_version"] == [8, 20]


class Color(SchemaEnum):
    RED = 1
    BLUE = 3


@struct
class Leaf:
    name: str
    tags: List[str] = field(default_factory=list)


@union
class Choice(Union):
    as_leaf: Leaf
    as_map: Dict[str, Leaf]


@struct
class Root:
    choice: Choice
    color: Optional[Color] = None


def test_build_snapshot_from_other_definitions():
    # Types defined at module level: annotations are strings resolved in this module.
    snap = snapshot.build_snapshot({"Color": Color, "Leaf": Leaf, "Choice": Choice, "Root": Root}, (1, 2), source="test")
    t = snap["types"]
    assert list(t) == ["Choice", "Color", "Leaf", "Root"]
    assert t["Leaf"]["fields"] == {"name": {"type": "str"}, "tags": {"type": "List[str]", "default": "[]"}}
    assert t["Choice"] == {"kind": "union", "fields": {"as_leaf": {"type": "Leaf"}, "as_map": {"type": "Dict[str, Leaf]"}}}
    assert t["Root"]["fields"]["color"] == {"type": "Optional[Color]", "default": "None"}
    assert t["Color"]["fields"] == {"RED": 1, "BLUE": 3}
    assert snapshot.parse(snapshot.render(snap)) == snap


RELEASES = ["2.5", "2.6", "2.7", "2.8", "2.9", "2.10", "2.11", "2.12", "2.13", "2.14", "2.15"]


def test_release_schema_map():
    rel = torch_releases()
    assert list(rel) == RELEASES
    versions = {r: tuple(v["schema_version"]) for r, v in rel.items()}
    assert versions == {
        "2.5": (7, 3), "2.6": (8, 2), "2.7": (8, 7), "2.8": (8, 8), "2.9": (8, 14), "2.10": (8, 15),
        "2.11": (8, 17), "2.12": (8, 20), "2.13": (8, 20), "2.14": (8, 20), "2.15": (8, 20),
    }
    assert "2.14.1" in rel["2.14"]["patches"]


@pytest.mark.parametrize("release", RELEASES)
def test_torch_snapshot_files(release):
    info = torch_releases()[release]
    path = TORCH_DIR / info["snapshot"]
    snap = snapshot.read_snapshot(path)  # checksum verified
    assert snap["schema_version"] == info["schema_version"]
    assert snapshot.render(snap) == path.read_text()  # canonical form
    assert "ExportedProgram" in snap["types"]


def test_importer_reproduces_committed_snapshot(tmp_path):
    # Rerun the importer on the schema.yaml of the installed torch (2.13) through --tree.
    torch_yaml = Path(pytest.importorskip("torch").__file__).parent / "_export" / "serde" / "schema.yaml"
    import torch

    version = torch.__version__.split("+")[0]
    tree = tmp_path / "tree" / version
    tree.mkdir(parents=True)
    (tree / "schema.yaml").write_text(torch_yaml.read_text())
    out = tmp_path / "out"
    assert imp.main(["--tree", str(tmp_path / "tree"), "-o", str(out)]) == 0
    rel = ".".join(version.split(".")[:2])
    made = snapshot.read_snapshot(out / f"torch-{rel}.json")
    committed = snapshot.read_snapshot(TORCH_DIR / f"torch-{rel}.json")
    assert made["types"] == committed["types"]
    assert made["schema_version"] == committed["schema_version"]
    index = json.loads((out / "releases.json").read_text())["releases"]
    assert index[rel]["torch_checksum"] == torch_releases()[rel]["torch_checksum"]


def test_importer_refuses_tampered_yaml():
    torch_yaml = Path(pytest.importorskip("torch").__file__).parent / "_export" / "serde" / "schema.yaml"
    text = torch_yaml.read_text().replace("as_none:\n      type: bool", "as_none:\n      type: int", 1)
    with pytest.raises(ValueError, match="checksum"):
        snapshot_sources.snapshot_from_yaml(text, source="tampered")
