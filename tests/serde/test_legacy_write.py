"""Writing the layouts torch 2.6-2.9 read (serde/archive/legacy_layout.py through the planner).

Torch-free where it can be: the fixtures written by torch 2.8.0 show the pickles torch
itself wrote for the same programs, so the weights pickles pt2x writes for 8.8 are compared
with those byte for byte. The real old releases load these files in scripts/check_old_torch.py
(not in CI: several GB of wheels); here torch 2.13 loads the weight members with
``torch.load(weights_only=True)``.
"""

from __future__ import annotations

import io
import json
import os
import zipfile

import numpy as np
import pytest

import pt2x.serde as serde
from pt2x.schema import definitions as d
from pt2x.serde.archive.zip_writer import write_archive
from pt2x.serde.compat import plan as compat_plan
from paths import FIXTURES, REPO
from torchfree import run_cli_torch_free, run_torch_free

PT2 = os.path.join(FIXTURES, "pt2")
CASES = ["bf16_linear", "buffer_mutation", "cond", "conv_bn_pool", "dict_inputs", "lifted_constant",
         "mlp_core_aten", "mlp_dynamic", "tied_weights"]


def fixture(release: str, case: str) -> str:
    return os.path.join(PT2, f"torch-{release}", f"{case}.pt2")


def planned(src: str, target) -> dict[str, bytes]:
    with serde.load(src) as a:
        plan = compat_plan.plan_for_target(a, target)
        assert plan.writable, [str(f) for f in plan.blockers]
        return {name: bytes(body) for name, body in plan.members}


def inner(body: bytes) -> dict[str, bytes]:
    with zipfile.ZipFile(io.BytesIO(body)) as z:
        return {n: z.read(n) for n in z.namelist()}


def arrays(archive) -> dict[str, np.ndarray]:
    m = archive.model()
    return {**{f"w:{k}": v for k, v in m.state_dict.items()}, **{f"c:{k}": v for k, v in m.constants.items()}}


def assert_same_tensors(a: dict, b: dict) -> None:
    assert list(a) == list(b)
    for k in a:
        assert a[k].dtype == b[k].dtype and a[k].shape == b[k].shape and a[k].strides == b[k].strides, k
        assert a[k].tobytes() == b[k].tobytes(), k


@pytest.mark.parametrize("case", CASES)
def test_weights_pickles_are_what_torch_2_8_wrote(case):
    # the 2.13 file's raw storages, pickled by pt2x for 8.8 == torch 2.8.0's own pickles of the program
    members = planned(fixture("2.13.0", case), "8.8")
    with zipfile.ZipFile(fixture("2.8.0", case)) as z:
        for kind in ("weights", "constants"):
            mine = inner(members[f"{case}/data/{kind}/model.pt"])
            theirs = inner(z.read(f"{case}/data/{kind}/model.pt"))
            assert mine["archive/data.pkl"] == theirs["archive/data.pkl"], kind
            data = {n: b for n, b in theirs.items() if n.startswith("archive/data/")}
            assert {n: b for n, b in mine.items() if n.startswith("archive/data/")} == data, kind
            assert [n for n in mine if n not in theirs] == []  # same records (serialization ids differ)


@pytest.mark.parametrize("target,layout", [("8.8", "pt2-pickled-weights"), ("8.2", "flat"), ("8.7", "flat")])
@pytest.mark.parametrize("case", ["tied_weights", "cond", "bf16_linear", "lifted_constant"])
def test_written_archive_reads_back_bit_equal(tmp_path, case, target, layout):
    src, dst = fixture("2.14.1", case), tmp_path / f"{case}.pt2"
    compat_plan.write_for_target(src, dst, target)
    with serde.load(dst) as a, serde.load(src) as b:
        assert a.layout == layout and a.schema_version == tuple(int(x) for x in target.split("."))
        assert a.unrecognized == [] and compat_plan.check_target(a, target) == []
        assert_same_tensors(arrays(a), arrays(b))
        if case == "tied_weights":
            m = a.model().state_dict
            assert np.shares_memory(m["emb.weight"], m["head.weight"])


def test_deterministic(tmp_path):
    for target in ("8.8", "8.2"):
        one, two = tmp_path / "one.pt2", tmp_path / "two.pt2"
        compat_plan.write_for_target(fixture("2.14.1", "conv_bn_pool"), one, target)
        compat_plan.write_for_target(fixture("2.14.1", "conv_bn_pool"), two, target)
        assert one.read_bytes() == two.read_bytes()


def test_flat_layout_members(tmp_path):
    members = planned(fixture("2.14.1", "mlp_dynamic"), "torch==2.6")
    assert list(members) == ["serialized_exported_program.json", "serialized_state_dict.pt", "serialized_constants.pt",
                             "serialized_example_inputs.pt", "version"]
    assert members["version"] == b"8.2"
    doc = json.loads(members["serialized_exported_program.json"])
    assert doc["schema_version"] == {"major": 8, "minor": 2}
    with zipfile.ZipFile(fixture("2.14.1", "mlp_dynamic")) as z:  # sample inputs carried as they are
        assert members["serialized_example_inputs.pt"] == z.read("mlp_dynamic/data/sample_inputs/model.pt")
    names = list(inner(members["serialized_state_dict.pt"]))  # torch 2.6's torch.save records
    assert names == ["archive/data.pkl", "archive/byteorder", *[n for n in names if n.startswith("archive/data/")],
                     "archive/version", "archive/.data/serialization_id"]


def test_cond_outputs_take_torch_2_6s_form():
    # 2.6 has no Node.is_hop_single_tensor_return: a 1-tuple HOP result is one as_tensors list
    members = planned(fixture("2.14.1", "cond"), "8.2")
    doc = json.loads(members["serialized_exported_program.json"])
    (node,) = [n for n in doc["graph_module"]["graph"]["nodes"] if n["target"] == "torch.ops.higher_order.cond"]
    with zipfile.ZipFile(fixture("2.6.0", "cond")) as z:
        ref = json.loads(z.read("serialized_exported_program.json"))
    (theirs,) = [n for n in ref["graph_module"]["graph"]["nodes"] if n["target"] == "torch.ops.higher_order.cond"]
    assert node["outputs"] == theirs["outputs"] == [{"as_tensors": [{"name": "getitem"}]}]
    assert "is_hop_single_tensor_return" not in node


def test_2_8_pickles_carried_into_the_flat_zip():
    members = planned(fixture("2.8.0", "tied_weights"), "8.2")
    with zipfile.ZipFile(fixture("2.8.0", "tied_weights")) as z:
        assert members["serialized_state_dict.pt"] == z.read("tied_weights/data/weights/model.pt")


def _edited(tmp_path, src: str, edit) -> str:
    with zipfile.ZipFile(src) as z:
        members = [(n, z.read(n)) for n in z.namelist()]
    dst = tmp_path / ("edited-" + os.path.basename(src))
    write_archive(dst, edit(members))
    return str(dst)


def test_what_the_old_layouts_cannot_hold_blocks(tmp_path):
    def pickled_payload(members):
        out = []
        for name, body in members:
            if name.endswith("model_weights_config.json"):
                doc = json.loads(body)
                first = next(iter(doc["config"].values()))
                first["use_pickle"] = True
                body = json.dumps(doc).encode()
            out.append((name, body))
        return out

    def two_models(members):
        extra = [(n.replace("models/model.json", "models/other.json"), b) for n, b in members if n.endswith("models/model.json")]
        extra += [(n.replace("/model_", "/other_"), b) for n, b in members if n.endswith("_config.json")]
        extra += [(n.replace("/model.pt", "/other.pt"), b) for n, b in members if n.endswith("sample_inputs/model.pt")]
        return members[:1] + extra + members[1:]

    def reinterpreted(members):  # a second tensor viewing the first one's storage as int32
        out = []
        for name, body in members:
            if name.endswith("model_weights_config.json"):
                doc = json.loads(body)
                first, second = list(doc["config"].values())[:2]
                second["path_name"] = first["path_name"]
                second["tensor_meta"]["dtype"] = d.ScalarType.INT.value
                body = json.dumps(doc).encode()
            out.append((name, body))
        return out

    src = fixture("2.14.1", "mlp_dynamic")
    with serde.load(_edited(tmp_path, src, reinterpreted)) as a:
        assert "target-storage-dtypes" in {f.code for f in compat_plan.plan_for_target(a, "8.8").blockers}
    with serde.load(_edited(tmp_path, src, pickled_payload)) as a:
        for target in ("8.8", "8.2"):
            codes = {f.code for f in compat_plan.plan_for_target(a, target).blockers}
            # the member's bytes are raw floats: torch would torch.load them, so they are also not provably data
            assert codes == {"target-pickled-payload", "unsafe-pickle"}
    with serde.load(_edited(tmp_path, src, two_models)) as a:
        assert compat_plan.plan_for_target(a, "8.8").writable
        blockers = compat_plan.plan_for_target(a, "8.2").blockers
        assert [f.code for f in blockers] == ["target-archive-layout"] and "2 models" in blockers[0].message


def test_convert_cli_is_torch_free(tmp_path):
    for target, layout in (("torch==2.8", "pt2-pickled-weights"), ("2.6", "flat")):
        dst = tmp_path / f"{layout}.pt2"
        r = run_cli_torch_free("convert", fixture("2.13.0", "tied_weights"), "--to", "pt2", "--target-schema", target,
                               "-o", str(dst))
        assert r.returncode == 0, r.stderr
        with serde.load(dst) as a:
            assert a.layout == layout


# ---------------------------------------------------------------- with torch 2.13


def test_torch_loads_the_weights_members_with_weights_only():
    torch = pytest.importorskip("torch")
    for target, member in (("8.8", "tied_weights/data/weights/model.pt"), ("8.2", "serialized_state_dict.pt")):
        members = planned(fixture("2.14.1", "tied_weights"), target)
        sd = torch.load(io.BytesIO(members[member]), weights_only=True)
        with serde.load(fixture("2.14.1", "tied_weights")) as b:
            want = b.model().state_dict
            assert list(sd) == list(want)
            for k, t in sd.items():
                assert isinstance(t, torch.nn.Parameter)
                np.testing.assert_array_equal(t.detach().numpy(), want[k])
        assert sd["emb.weight"] is sd["head.weight"]


ZOO_EXPECTED_82 = {"while_loop": {"target-unrunnable-node"}}


def test_planner_findings_on_zoo_programs(tmp_path):
    pytest.importorskip("torch")
    import zoo

    from pt2x.serde.torch import api as bridge

    for case in zoo.CUSTOM_CASES:
        buf = io.BytesIO()
        bridge.save(zoo.exported(case.name), buf)
        with serde.load(buf.getvalue()) as a:
            p88, p82 = compat_plan.plan_for_target(a, "8.8"), compat_plan.plan_for_target(a, "8.2")
        assert p88.writable, (case.name, [str(f) for f in p88.blockers])
        assert {f.code for f in p82.blockers} == ZOO_EXPECTED_82.get(case.name, set()), case.name
        warned = {f.code for f in p82.findings if f.severity == "warning"}
        assert ("target-rewritten-hop-outputs" in warned) == (case.name in ("cond", "map")), case.name
        assert {f.code for f in p88.findings} <= {"target-dropped-field"}, case.name


def test_check_old_torch_report_is_torch_free():
    # scripts/check_old_torch.py needs the old wheels to run; its report is plain code
    r = run_torch_free(
        """
        import sys
        sys.path.insert(0, sys.argv[1])
        from scripts import check_old_torch as c
        results = {
            "a": {"targets": {"2.8.0": {"written": True, "warnings": []},
                              "2.6.0": {"written": False, "blockers": ["error: m: x [target-unrunnable-node]"]}},
                  "error": None},
            "b": {"targets": {}, "error": "not exportable here: b"},
        }
        checks = {"2.8.0": {"a": {"case": "a", "load": True, "outputs": True, "resave": True, "error": None}}, "2.6.0": {}}
        table = c.markdown(results, checks, {"2.8.0": "2.8.0+cu128", "2.6.0": "2.6.0+cu124"})
        assert "| a | loads, outputs equal, re-saves | refused: error: m: x |" in table, table
        s = c.summary(results, checks, ["2.8.0", "2.6.0"])
        assert s["2.8.0"] == {"programs": 1, "written": 1, "refused": 0, "loaded_equal_resaved": 1, "failed": []}
        assert s["2.6.0"]["refused"] == 1 and s["2.6.0"]["failed"] == []
        print("ok")
        """,
        REPO,
    )
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr


@pytest.mark.parametrize("target", ["8.8", "8.2"])
def test_torch_2_13_runs_the_old_layouts(tmp_path, target):
    # the old releases run these files in scripts/check_old_torch.py; torch 2.13 still reads both layouts
    torch = pytest.importorskip("torch")
    import zoo

    from pt2x.serde.torch import api as bridge

    for name in ("tied_weights", "conv_bn_pool", "lifted_constant"):
        ep = zoo.exported(name)
        dst = tmp_path / f"{name}-{target}.pt2"
        bridge.save(ep, dst, target_schema=target)
        loaded = torch.export.load(dst)
        args, kwargs = ep.example_inputs
        torch.testing.assert_close(loaded.module()(*args, **kwargs), ep.module()(*args, **kwargs), rtol=0, atol=0)


def test_2_6_cond_respelled_for_newer_readers(tmp_path):
    # the reverse form: torch 2.8+ cannot read 2.6's cond outputs; convert sets the flag exactly
    src = fixture("2.6.0", "cond")
    members = planned(src, "8.20")
    doc = json.loads(members["serialized_exported_program.json"])
    (node,) = [n for n in doc["graph_module"]["graph"]["nodes"] if n["target"] == "torch.ops.higher_order.cond"]
    assert node["outputs"] == [{"as_tensor": {"name": "getitem"}}] and node["is_hop_single_tensor_return"] is False
    torch = pytest.importorskip("torch")
    dst = tmp_path / "cond.pt2"
    compat_plan.write_for_target(src, dst, "8.20")
    ep = torch.export.load(dst)
    ref = np.load(src.replace(".pt2", ".npz"))
    np.testing.assert_allclose(ep.module()(torch.from_numpy(ref["in_0"])).numpy(), ref["out_0"], rtol=1e-6)
