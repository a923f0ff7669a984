"""Classification of schema changes (one test per change kind) and ``pt2x schema check|diff``."""

from __future__ import annotations

import copy
import json
import subprocess

import pytest

from pt2x.schema import snapshot
from pt2x.tools.cli import main
from pt2x.schema.diff import RULES, check_version, diff_snapshots, required_bump
from torchfree import run_cli_torch_free

BASE_TYPES = {
    "Node": {
        "kind": "struct",
        "fields": {
            "target": {"type": "str"},
            "inputs": {"type": "List[int]"},
            "label": {"type": "Optional[str]", "default": "None"},
            "flag": {"type": "bool", "default": "False"},
        },
    },
    "Arg": {"kind": "union", "fields": {"as_int": {"type": "int"}, "as_str": {"type": "str"}}},
    "Color": {"kind": "enum", "fields": {"RED": 0, "BLUE": 1}},
    "Extra": {"kind": "struct", "fields": {"x": {"type": "int"}}},
}


def snap(types=None, version=(8, 1)):
    return snapshot.make_snapshot(copy.deepcopy(types or BASE_TYPES), version, source="test")


def edited(fn, version=(8, 1)):
    types = copy.deepcopy(BASE_TYPES)
    fn(types)
    return snap(types, version)


def node(t):
    return t["Node"]["fields"]


def _rename(fields, old, new):
    items = [(new if k == old else k, v) for k, v in fields.items()]
    fields.clear()
    fields.update(items)


# (edit, expected kind, compat, bump)
CASES = {
    "field added with default": (lambda t: node(t).update(extra={"type": "int", "default": "0"}), "field-added-with-default", "both", "minor"),
    "field added without default": (lambda t: node(t).update(extra={"type": "int"}), "field-added-required", "forward", "major"),
    "field removed (had a default)": (lambda t: node(t).pop("flag"), "field-removed-with-default", "both", "minor"),
    "field removed (required)": (lambda t: node(t).pop("inputs"), "field-removed-required", "backward", "major"),
    "field renamed (required)": (lambda t: _rename(node(t), "target", "op"), "field-renamed-required", "neither", "major"),
    "field renamed (defaulted)": (lambda t: _rename(node(t), "flag", "enabled"), "field-removed-with-default", "both", "minor"),
    "field retyped": (lambda t: node(t)["inputs"].update(type="List[str]"), "field-retyped", "neither", "major"),
    "field made optional": (lambda t: node(t)["target"].update(type="Optional[str]"), "field-made-optional", "backward", "minor"),
    "default added": (lambda t: node(t)["target"].update(default="x"), "field-default-added", "both", "minor"),
    "default removed": (lambda t: node(t)["flag"].pop("default"), "field-default-removed", "forward", "major"),
    "default changed": (lambda t: node(t)["flag"].update(default="True"), "field-default-changed", "neither", "major"),
    "fields reordered": (lambda t: t["Node"].update(fields=dict(reversed(list(node(t).items())))), "fields-reordered", "both", "none"),
    "union member added": (lambda t: t["Arg"]["fields"].update(as_bool={"type": "bool"}), "union-member-added", "backward", "minor"),
    "union member removed": (lambda t: t["Arg"]["fields"].pop("as_str"), "union-member-removed", "forward", "major"),
    "union member retyped": (lambda t: t["Arg"]["fields"]["as_int"].update(type="float"), "union-member-retyped", "neither", "major"),
    "enum value added": (lambda t: t["Color"]["fields"].update(GREEN=2), "enum-value-added", "backward", "minor"),
    "enum value removed": (lambda t: t["Color"]["fields"].pop("BLUE"), "enum-value-removed", "forward", "major"),
    "enum value renumbered": (lambda t: t["Color"]["fields"].update(BLUE=5), "enum-value-renumbered", "neither", "major"),
    "enum value renamed": (lambda t: _rename(t["Color"]["fields"], "BLUE", "AZURE"), "enum-value-renamed", "both", "none"),
    "type added": (lambda t: t.update(New={"kind": "struct", "fields": {}}), "type-added", "both", "minor"),
    "type removed": (lambda t: t.pop("Extra"), "type-removed", "forward", "major"),
    "type changed kind": (lambda t: t["Extra"].update(kind="union"), "type-kind-changed", "neither", "major"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_change_kind(case):
    edit, kind, compat, bump = CASES[case]
    result = diff_snapshots(snap(), edited(edit))
    assert [c.kind for c in result.changes] == [kind], [c.message() for c in result.changes]
    (change,) = result.changes
    assert change.compat == compat
    assert change.bump == bump == result.bump
    assert change.as_dict()["why"] == RULES[kind][3]
    # the declared version must carry the bump
    same = diff_snapshots(snap(), edited(edit, version=(8, 1)))
    minor = diff_snapshots(snap(), edited(edit, version=(8, 2)))
    major = diff_snapshots(snap(), edited(edit, version=(9, 1)))
    assert same.carried is (bump == "none")
    assert minor.carried is (bump in ("none", "minor"))
    assert major.carried is True


def test_every_rule_has_a_case():
    assert {kind for _, kind, _, _ in CASES.values()} == set(RULES)


def test_no_change():
    result = diff_snapshots(snap(), snap())
    assert result.changes == [] and result.bump == "none" and result.carried and result.compat == "both"


def test_rename_is_reported_as_removed_plus_added():
    result = diff_snapshots(snap(), edited(lambda t: _rename(node(t), "target", "op")))
    (c,) = result.changes
    assert "renamed 'target' -> 'op'" in c.message() and "removed + added" in c.message()


def test_several_changes_take_the_strictest_bump():
    def edit(t):
        node(t)["extra"] = {"type": "int", "default": "0"}
        t["Color"]["fields"]["GREEN"] = 2
        t["Arg"]["fields"].pop("as_str")

    result = diff_snapshots(snap(), edited(edit, version=(8, 2)))
    assert required_bump(result.changes) == "major"
    assert not result.carried and "needs a major bump" in result.verdict
    assert result.compat == "neither"


def test_check_version():
    assert check_version((8, 15), (8, 14), "none")[0] is False  # backwards
    assert check_version((8, 15), (8, 15), "none") == (True, "no wire change; version 8.15")
    assert check_version((8, 15), (8, 16), "minor")[0]
    assert check_version((8, 15), (9, 0), "minor")[0]
    assert not check_version((8, 15), (8, 99), "major")[0]


# ----------------------------------------------------------- torch's own history


def _diff(a, b, capsys, *extra):
    rc = main(["schema", "diff", a, b, "--json", *extra])
    return rc, json.loads(capsys.readouterr().out)


def test_torch_2_10_to_2_11_is_a_carried_minor(capsys):
    rc, out = _diff("torch==2.10", "2.11", capsys)
    assert rc == 0 and out["bump"] == "minor" and out["ok"]
    kinds = {(c["type"], c["name"]): c["kind"] for c in out["changes"]}
    assert kinds == {("Node", "name"): "field-added-with-default", ("Argument", "as_nested_tensors"): "union-member-added"}
    assert out["backward_compatible"] and not out["forward_compatible"]


def test_torch_2_8_to_2_9_removed_types_in_a_minor(capsys):
    # torch's schema_check asks only a minor bump for removing a whole type; pt2x asks a major.
    rc, out = _diff("2.8", "8.14", capsys)
    removed = sorted(c["type"] for c in out["changes"] if c["kind"] == "type-removed")
    assert removed == ["Model", "Program"]
    assert rc == 1 and out["bump"] == "major" and not out["ok"]


def test_torch_2_5_to_2_6_is_a_major(capsys):
    rc, out = _diff("2.5", "2.6", capsys)
    assert rc == 0 and out["bump"] == "major"
    kinds = {(c["type"], c["name"]): c["kind"] for c in out["changes"]}
    assert kinds[("RangeConstraint", "min_val")] == "field-made-optional"
    assert kinds[("Argument", "as_none")] == "union-member-retyped"


def test_diff_pt2x_against_a_release_text(capsys):
    assert main(["schema", "diff", "torch==2.10", "pt2x"]) == 0
    out = capsys.readouterr().out
    assert "Node.name: field added with default" in out and "ok" in out.splitlines()[-1]


# ----------------------------------------------------------------- schema check


def test_schema_check_committed(capsys):
    assert main(["schema", "check"]) == 0
    assert capsys.readouterr().out.strip().endswith("ok")
    assert main(["schema", "check", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["ok"] and out["changes"] == [] and out["notes"] == []


def _older(tmp_path, version, edit):
    base = snapshot.read_snapshot(snapshot.PT2X_SNAPSHOT)
    types = copy.deepcopy(base["types"])
    edit(types)
    path = tmp_path / "old.json"
    path.write_text(snapshot.render(snapshot.make_snapshot(types, version, source="test")))
    return str(path)


def test_schema_check_against_file_with_carried_bump(tmp_path, capsys):
    # an "older" snapshot without Node.name at 8.17: the current 8.20 carries the minor bump
    old = _older(tmp_path, (8, 17), lambda t: t["Node"]["fields"].pop("name"))
    assert main(["schema", "check", "--against", old, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert [c["kind"] for c in out["changes"]] == ["field-added-with-default"] and out["bump"] == "minor"


def test_schema_check_fails_without_bump(tmp_path, capsys):
    old = _older(tmp_path, (8, 20), lambda t: t["Node"]["fields"].pop("name"))
    assert main(["schema", "check", "--against", old]) == 1
    out = capsys.readouterr().out
    assert "needs a minor bump: 8.20 -> 8.21" in out and out.strip().endswith("FAIL")


def test_schema_check_fails_on_breaking_change(tmp_path, capsys):
    # the "older" schema had a union member the current one lacks: removing it needs a major
    old = _older(tmp_path, (8, 19), lambda t: t["Argument"]["fields"].update(as_blob={"type": "str"}))
    assert main(["schema", "check", "--against", old, "--json"]) == 1
    out = json.loads(capsys.readouterr().out)
    assert out["changes"][0]["kind"] == "union-member-removed" and out["bump"] == "major"


def test_schema_check_against_git_ref(capsys):
    root = snapshot.PT2X_SNAPSHOT.parents[2]
    has = subprocess.run(["git", "-C", str(root), "cat-file", "-e", "HEAD:schema/snapshots/pt2x.json"], capture_output=True)
    if has.returncode != 0:
        pytest.skip("not a git checkout with a committed snapshot")
    assert main(["schema", "check", "--against", "HEAD"]) == 0
    assert "git HEAD" in capsys.readouterr().out


def test_schema_check_errors_exit_2(tmp_path, capsys):
    assert main(["schema", "check", "--against", "no-such-ref-or-file"]) == 2
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    assert main(["schema", "check", "--against", str(bad)]) == 2
    assert main(["schema", "diff", "torch==2.99", "pt2x"]) == 2
    capsys.readouterr()


def test_schema_cli_is_torch_free():
    proc = run_cli_torch_free("schema", "check", "--json")
    assert proc.returncode == 0, proc.stderr
    proc = run_cli_torch_free("schema", "diff", "8.15", "2.14")
    assert proc.returncode == 0, proc.stderr
    proc = run_cli_torch_free("schema", "releases")
    assert proc.returncode == 0 and "torch 2.10  schema 8.15" in proc.stdout
