"""Writing for torch 2.5 (schema 7.3) across the major break: serde/compat/schema7.py through the planner.

Torch-free where it can be: torch 2.5.1's own files for the same programs (tests/fixtures/pt2/torch-2.5.1/)
are the golden form. The real torch 2.5.1 loads and runs what pt2x writes in
scripts/check_old_torch.py --releases 2.5.1 (not in CI: a CUDA build of several GB); here
torch 2.13 runs the 2.5.1 fixtures after pt2x writes them up to 8.x.
"""

from __future__ import annotations

import io
import json
import math
import os
import zipfile

import numpy as np
import pytest

import pt2x.serde as serde
from pt2x.schema import definitions as d
from pt2x.schema.diff import diff_snapshots
from pt2x.schema.snapshot import build_snapshot, torch_snapshot
from pt2x.serde.codec.upgrade import declared_version
from pt2x.serde.compat import plan as compat_plan
from pt2x.serde.compat import schema7
from pt2x.serde.compat import target as compat
from pt2x.serde.archive.zip_writer import write_archive
from pt2x.serde.validate import validate_archive
from pt2x.tools.cli import main
from archive_edits import patched
from paths import PT2_FIXTURES

CASES = ["bf16_linear", "buffer_mutation", "cond", "conv_bn_pool", "dict_inputs", "lifted_constant",
         "mlp_core_aten", "mlp_dynamic", "tied_weights"]
FLAT_MEMBERS = ["serialized_exported_program.json", "serialized_state_dict.pt", "serialized_constants.pt",
                "serialized_example_inputs.pt", "version"]
PROGRAM = "serialized_exported_program.json"


def fixture(release: str, case: str) -> str:
    return os.path.join(PT2_FIXTURES, f"torch-{release}", f"{case}.pt2")


def errors(findings):
    return [f for f in findings if f.severity == "error"]


def written_for_2_5(src) -> dict[str, bytes]:
    with serde.load(src) as a:
        plan = compat_plan.plan_for_target(a, "torch==2.5")
    assert plan.writable, [str(f) for f in plan.blockers]
    assert plan.version == (7, 3) and {f.code for f in plan.findings} <= {"target-dropped-field", "target-rewritten-hop-outputs"}
    return {name: bytes(body) for name, body in plan.members}


def as_file(members: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    write_archive(buf, list(members.items()))
    return buf.getvalue()


def program_of(path: str) -> dict:
    with zipfile.ZipFile(path) as z:
        (member,) = [n for n in z.namelist() if n.endswith(("models/model.json", PROGRAM))]
        return json.loads(z.read(member))


# ------------------------------------------------------------------ the table


def test_table_covers_every_respelled_field():
    # every change between 7.3 and pt2x's 8.x that the generic walk cannot do (a field or member
    # both have, declared differently) is a row of schema7.DIFFERENCES, and no row is stale
    walk_handles = {"type-added", "union-member-added", "enum-value-added", "field-added-with-default"}
    changes = diff_snapshots(torch_snapshot("2.5"), build_snapshot()).changes
    need = {f"{c.type_name}.{c.name}" if c.name else c.type_name
            for c in changes if c.kind not in walk_handles and c.kind != "type-removed"}
    assert need == {row.where for row in schema7.DIFFERENCES if row.declared}
    # the one removed type is the renamed constant-input spec (same fields, type names are not in the JSON)
    assert [c.type_name for c in changes if c.kind == "type-removed"] == ["ConstantInputSpec"]
    assert torch_snapshot("2.5")["types"]["ConstantInputSpec"]["fields"] == build_snapshot()["types"]["InputToConstantInputSpec"]["fields"]


# ---------------------------------------------------------- writing, read back


@pytest.mark.parametrize("release", ["2.13.0", "2.6.0", "2.8.0"])
def test_fixtures_written_for_2_5_read_back_as_7_3(release):
    for case in CASES:
        members = written_for_2_5(fixture(release, case))
        assert list(members) == FLAT_MEMBERS and members["version"] == b"7.3", case
        doc = json.loads(members[PROGRAM])
        assert declared_version(doc) == (7, 3)
        with serde.load(as_file(members)) as a:  # pt2x reads its 7.3 back (upgraded, like torch 2.5's own)
            assert a.layout == "flat" and a.schema_version == (8, 0)
            assert errors(validate_archive(a)) == [], case
            assert compat_plan.check_target(a, "torch==2.5") == [], case
            with serde.load(fixture(release, case)) as src:
                for k, v in src.model().state_dict.items():
                    np.testing.assert_array_equal(np.asarray(a.model().state_dict[k]), np.asarray(v))


# the zoo programs the fixtures above do not already cover (transformer_encoder, the slowest to
# export, is left to scripts/check_old_torch.py --releases 2.5.1, which runs every zoo program)
ZOO_CASES = ["dynamic_reshape", "while_loop", "map", "custom_op", "input_mutation", "non_contiguous", "multi_dtype"]


def test_zoo_programs_written_for_2_5():
    pytest.importorskip("torch")
    import zoo

    from pt2x.serde.torch import api as bridge

    for name in ZOO_CASES:
        buf = io.BytesIO()
        bridge.save(zoo.exported(name), buf)
        with serde.load(buf.getvalue()) as a:
            plan = compat_plan.plan_for_target(a, "torch==2.5")
        # while_loop: torch 2.5's deserializer rebuilds carried_inputs as a list (as 2.6's)
        want = {"target-unrunnable-node"} if name == "while_loop" else set()
        assert {f.code for f in plan.blockers} == want, (name, [str(f) for f in plan.blockers])
        if plan.writable:
            with serde.load(as_file({n: bytes(b) for n, b in plan.members})) as b:
                assert errors(validate_archive(b)) == [] and compat_plan.check_target(b, "2.5") == [], name
                if name == "dynamic_reshape":  # symbolic sizes in 2.5's spelling: bare names, infix
                    text = b.zip.read(PROGRAM).decode()
                    assert "Symbol(" not in text and '"expr_str": "s' in text


def test_respellings_across_the_major():
    doc = program_of(fixture("2.13.0", "mlp_dynamic"))
    (sym,) = doc["range_constraints"]
    doc["range_constraints"][sym] = {"min_val": None, "max_val": None}
    doc["graph_module"]["graph"]["outputs"].append({"as_none": True})
    out, findings = compat.downgrade(doc, "torch==2.5")
    assert errors(findings) == []
    text = json.dumps(out)  # bare tokens, as torch 2.5's json.dumps wrote math.inf
    assert f'"{sym}": {{"min_val": -Infinity, "max_val": Infinity}}' in text
    assert out["graph_module"]["graph"]["outputs"][-1] == {"as_none": []}
    assert all("index" not in t["device"] for t in out["graph_module"]["graph"]["tensor_values"].values()
               if "device" in t)
    assert out["schema_version"] == {"major": 7, "minor": 3}
    # what torch 2.5 wrote reads as 7.3 as it is; 8.x's spelling in a 7.3 file is a blocker
    assert compat.check_program_json(json.loads(text), "torch==2.5") == []
    bad = json.loads(text)
    bad["range_constraints"][sym]["max_val"] = None
    (f,) = compat.check_program_json(bad, "torch==2.5")
    assert f.code == "target-schema7-form" and f.path == f"range_constraints[{sym!r}].max_val"


@pytest.mark.parametrize(
    "edit, code, path",
    [
        (lambda g: g["nodes"][0]["inputs"].append({"name": "s", "arg": {"as_sym_float": {"as_name": "f"}}, "kind": 1}),
         "target-unknown-union-member", "graph_module.graph.nodes[0].inputs[{n}].arg.as_sym_float"),
        (lambda g: next(iter(g["tensor_values"].values())).update(dtype=d.ScalarType.UINT16.value),
         "target-unknown-enum-value", "graph_module.graph.tensor_values[{t!r}].dtype"),
        (lambda g: g.update(sym_float_values={"f": {"as_float": 1.5}}),
         "target-unknown-field", "graph_module.graph.sym_float_values"),
        (lambda g: g["outputs"].append({"as_none": False}),
         "target-no-schema7-form", "graph_module.graph.outputs[{o}].as_none"),
    ],
    ids=["sym_float", "uint16", "sym_float_values", "as_none_false"],
)
def test_values_without_a_7_3_form_are_named_blockers(edit, code, path):
    doc = program_of(fixture("2.13.0", "mlp_dynamic"))
    g = doc["graph_module"]["graph"]
    where = path.format(n=len(g["nodes"][0]["inputs"]), t=next(iter(g["tensor_values"])), o=len(g["outputs"]))
    edit(g)
    _, findings = compat.downgrade(doc, "torch==2.5")
    assert [(f.code, f.path) for f in errors(findings)] == [(code, where)]


def test_grad_mode_region_blocks_for_2_5():
    # HF Llama/Qwen2 as torch 2.13 exports them: torch 2.5.1's and 2.6.0's readers cannot resolve
    # the op (checked: 'Unsupported target type'); 2.7.1 runs it
    doc = program_of(fixture("2.13.0", "cond"))
    (node,) = [n for n in doc["graph_module"]["graph"]["nodes"] if n["target"] == "torch.ops.higher_order.cond"]
    node["target"] = "torch.ops.higher_order.wrap_with_set_grad_enabled"
    _, findings = compat.downgrade(doc, "torch==2.5")
    (f,) = errors(findings)
    assert f.code == "target-unrunnable-node" and "wrap_with_set_grad_enabled" in f.message
    assert "run_decompositions()" in f.message
    assert any(f.code == "target-unrunnable-node" for f in compat.downgrade(doc, "torch==2.6")[1])
    assert not any(f.code == "target-unrunnable-node" for f in compat.downgrade(doc, "torch==2.7")[1])


def test_hostile_values_at_respelled_fields_are_findings():
    # whatever a file holds where 7.3 respells, the planner answers with findings naming the field
    doc = program_of(fixture("2.13.0", "mlp_dynamic"))
    (sym,) = doc["range_constraints"]
    doc["range_constraints"][sym]["min_val"] = "a"
    doc["graph_module"]["graph"]["outputs"].append({"as_none": {"x": 1}})
    (name, tv), *_ = [(k, v) for k, v in doc["graph_module"]["graph"]["tensor_values"].items()
                      if "as_expr" in v["sizes"][0]]
    tv["sizes"][0]["as_expr"]["expr_str"] = 7
    for target in ("torch==2.5", "7.3"):
        _, findings = compat.downgrade(doc, target)
        paths = {f.path for f in errors(findings) if f.code == "target-no-schema7-form"}
        assert paths == {f"range_constraints[{sym!r}].min_val", f"graph_module.graph.outputs[{len(doc['graph_module']['graph']['outputs']) - 1}].as_none",
                         f"graph_module.graph.tensor_values[{name!r}].sizes[0].as_expr.expr_str"}, paths
    clean = program_of(fixture("2.13.0", "mlp_dynamic"))
    clean["graph_module"]["graph"]["tensor_values"][name]["sizes"][0]["as_expr"]["expr_str"] = "__import__('os').system('x')"
    _, findings = compat.downgrade(clean, "torch==2.5")  # never evaluated; pt2x's parser refuses it
    assert [(f.code, f.path) for f in errors(findings)] == [
        ("target-no-schema7-form", f"graph_module.graph.tensor_values[{name!r}].sizes[0].as_expr.expr_str")]


def test_validate_target_2_5_gives_the_blockers(tmp_path, capsys):
    def edit(doc):
        g = doc["graph_module"]["graph"]
        next(iter(g["tensor_values"].values()))["dtype"] = d.ScalarType.UINT16.value

    path = patched(tmp_path, fixture("2.13.0", "mlp_dynamic"), edit)
    assert main(["validate", path, "--target", "torch==2.5", "--json"]) == 1
    verdict = json.loads(capsys.readouterr().out)
    assert not verdict["writable"]
    blockers = [(f["code"], f["path"]) for f in verdict["findings"] if f["severity"] == "error"]
    # as it is: a PT2 archive of schema 8 (convert rewrites both); and what convert cannot write: the dtype
    assert {"target-archive-layout", "target-schema-major", "target-unknown-enum-value"} <= {c for c, _ in blockers}
    (where,) = [p for c, p in blockers if c == "target-unknown-enum-value"]
    assert where.startswith("graph_module.graph.tensor_values[") and where.endswith("].dtype")
    dst = tmp_path / "o.pt2"
    assert main(["convert", str(path), "--to", "pt2", "--target-schema", "torch==2.5", "-o", str(dst)]) == 1
    assert not dst.exists() and "target-unknown-enum-value" in capsys.readouterr().err
    # the unedited program converts, and then validates for 2.5 as it is
    assert main(["convert", fixture("2.13.0", "mlp_dynamic"), "--to", "pt2", "--target-schema", "torch==2.5",
                 "-o", str(dst)]) == 0
    assert main(["validate", str(dst), "--target", "torch==2.5"]) == 0
    capsys.readouterr()


# ------------------------------------------------------------ torch 2.5.1's files


def _key_paths(v, path: str, out: set, free: bool = False) -> set:
    """Every JSON key path of a program, list positions and the keys of name-keyed maps collapsed."""
    if isinstance(v, dict):
        for k, x in v.items():
            _key_paths(x, f"{path}.{'*' if free else k}", out,
                       free=k in ("tensor_values", "sym_int_values", "sym_bool_values", "metadata",
                                  "range_constraints", "opset_version", "custom_obj_values"))
    elif isinstance(v, list):
        for x in v:
            _key_paths(x, path + "[]", out)
    else:
        out.add(path)
    return out


@pytest.mark.parametrize("case", ["mlp_dynamic", "mlp_core_aten", "cond", "dict_inputs"])
def test_same_structure_as_torch_2_5_own_file(case):
    # pt2x's 7.3 of the program torch 2.13 wrote vs torch 2.5.1's own file for the same program:
    # the same members, the same JSON keys and the same pickle records (values differ: names, versions)
    mine = written_for_2_5(fixture("2.13.0", case))
    with zipfile.ZipFile(fixture("2.5.1", case)) as z:
        theirs = {n: z.read(n) for n in z.namelist()}
    assert list(mine) == list(theirs)
    assert mine["version"] == theirs["version"] == b"7.3"
    assert _key_paths(json.loads(mine[PROGRAM]), "", set()) == _key_paths(json.loads(theirs[PROGRAM]), "", set())
    for member in ("serialized_state_dict.pt", "serialized_constants.pt"):
        with zipfile.ZipFile(io.BytesIO(mine[member])) as a, zipfile.ZipFile(io.BytesIO(theirs[member])) as b:
            assert a.namelist() == b.namelist(), member


@pytest.mark.parametrize("case", CASES)
def test_torch_2_5_files_read_and_rewrite(case):
    # torch 2.5.1's own files: pt2x reads them (upgraded from 7.3), finds them readable by 2.5 as
    # they are, and writes them for 2.5 again with the same members and JSON
    src = fixture("2.5.1", case)
    with serde.load(src) as a:
        assert compat_plan.check_target(a, "torch==2.5") == []
        assert errors(validate_archive(a)) == []
    members = written_for_2_5(src)
    with zipfile.ZipFile(src) as z:
        assert list(members) == z.namelist()
        assert [n for n in z.namelist() if z.read(n) != members[n]] in ([], [PROGRAM])
        assert json.loads(members[PROGRAM]) == json.loads(z.read(PROGRAM))


@pytest.mark.parametrize("case", ["mlp_dynamic", "cond", "buffer_mutation", "dict_inputs", "bf16_linear"])
def test_torch_2_5_files_written_up_run_in_torch_2_13(tmp_path, case):
    # the other direction across the major: torch 2.13 cannot load 2.5.1's file, but loads and runs
    # what pt2x writes from it for 2.13 (schema 8.20), with the outputs 2.5.1 computed
    torch = pytest.importorskip("torch")
    src, dst = fixture("2.5.1", case), tmp_path / f"{case}.pt2"
    plan = compat_plan.write_for_target(src, dst, "torch==2.13")
    assert plan.writable and program_of(str(dst))["schema_version"] == {"major": 8, "minor": 20}
    ep = torch.export.load(str(dst))
    data = np.load(src.replace(".pt2", ".npz"))
    ins = [data[f"in_{i}"] for i in range(sum(k.startswith("in_") for k in data.files))]
    args, kwargs = ep.example_inputs
    flat, spec = torch.utils._pytree.tree_flatten((args, kwargs))
    assert len(flat) == len(ins)
    feed = [torch.from_numpy(x).to(t.dtype) if isinstance(t, torch.Tensor) else t for x, t in zip(ins, flat)]
    args, kwargs = torch.utils._pytree.tree_unflatten(feed, spec)
    got, _ = torch.utils._pytree.tree_flatten(ep.module()(*args, **kwargs))
    for i, g in enumerate(got):
        np.testing.assert_allclose(g.detach().float().numpy(), data[f"out_{i}"], rtol=1e-5, atol=1e-6)


def test_non_finite_bound_round_trip():
    assert schema7.RESPELLED[("RangeConstraint", "max_val")].to_7(None) == math.inf
    with pytest.raises(schema7.NoForm):
        schema7.RESPELLED[("RangeConstraint", "min_val")].to_7(1.5)
