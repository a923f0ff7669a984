"""Files whose content torch would execute are never "valid", "ok", or written.

Each hostile archive is built from a real ``torch.export.save`` file with one member or field
replaced by content torch runs: a pickle calling ``posix.system`` (as sample inputs, a pickled
constant, an extra file, a torch.save zip or a bare pickle, behind a harmless first pickle) and a
shape expression sympy would ``eval``. The payload would create a marker file; after every verb
(inspect, validate, scan, convert --to pt2, the planner and ``pt2x.serde.save``) the marker does
not exist, and each verb gives its refusal: inspect and validate exit 1 naming the member and the
code, scan's verdict is ``findings``, convert writes nothing (exit 1) unless the sample inputs are
dropped on request.
"""

from __future__ import annotations

import io
import json
import os
import pickle
import zipfile

import pytest

from pt2x.serde import load
from pt2x.serde.code_bearing import EXPRESSION_FIELDS, code_findings as archive_findings
from pt2x.serde.codec.weights_only import TORCH_WEIGHTS_ONLY_GLOBALS, outside_weights_only
from pt2x.serde.compat.plan import TargetNotWritable, plan_for_target, writable_for_target
from pt2x.tools.cli import main
from pt2x.tools.scan.check import check_artifact
from pt2x.tools.scan.options import ScanOptions
from paths import PT2_FIXTURES

BASE = os.path.join(PT2_FIXTURES, "torch-2.13.0", "mlp_dynamic.pt2")
ROOT = "mlp_dynamic/"


class _Runs:
    """Pickles as a call of ``posix.system(command)``: the object is never unpickled here."""

    def __init__(self, command: str):
        self.command = command

    def __reduce__(self):
        return (os.system, (self.command,))


def _payload(marker) -> bytes:
    return pickle.dumps(_Runs(f"touch {marker}"), protocol=2)


def _torch_save_zip(data_pkl: bytes) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("archive/data.pkl", data_pkl)
        z.writestr("archive/byteorder", "little")
        z.writestr("archive/version", "3\n")
    return buf.getvalue()


def _rebuild(dst, replace: dict[str, bytes], add: dict[str, bytes] | None = None, base: str = BASE) -> str:
    with zipfile.ZipFile(base) as src, zipfile.ZipFile(dst, "w") as out:
        for info in src.infolist():
            out.writestr(info.filename, replace.get(info.filename, src.read(info)))
        for name, body in (add or {}).items():
            out.writestr(name, body)
    return str(dst)


def _fixture(release: str) -> str:
    return os.path.join(PT2_FIXTURES, f"torch-{release}", "mlp_dynamic.pt2")


def _with_pickled_weight(dst, payload: bytes) -> str:
    """fc1.weight as a ``use_pickle`` payload (torch.load(weights_only=False) in torch) that calls."""
    config = ROOT + "data/weights/model_weights_config.json"
    with zipfile.ZipFile(BASE) as z:
        doc = json.loads(z.read(config))
    meta = doc["config"]["fc1.weight"]
    meta["use_pickle"] = True
    return _rebuild(dst, {config: json.dumps(doc).encode(), ROOT + "data/weights/" + meta["path_name"]: _torch_save_zip(payload)})


def _with_expression(dst, text: str, where: str = "sizes") -> str:
    with zipfile.ZipFile(BASE) as z:
        doc = json.loads(z.read(ROOT + "models/model.json"))
    values = doc["graph_module"]["graph"]["tensor_values"]
    meta = next(v for v in values.values() if any("as_expr" in s for s in v["sizes"]))
    field = meta[where]
    k = next((i for i, s in enumerate(field) if "as_expr" in s), 0)
    field[k] = {"as_expr": {"expr_str": text, "hint": None}}
    return _rebuild(dst, {ROOT + "models/model.json": json.dumps(doc).encode()})


def _cases(tmp_path, marker) -> dict[str, tuple[str, str]]:
    """name -> (file, code it must be reported with)."""
    payload = _payload(marker)
    hidden = pickle.dumps(1, protocol=2) + payload  # a harmless first pickle, the call after it
    evil = f"__import__('os').system('touch {marker}')"
    return {
        "sample-inputs-zip": (_rebuild(tmp_path / "a.pt2", {ROOT + "data/sample_inputs/model.pt": _torch_save_zip(payload)}), "unsafe-pickle"),
        "sample-inputs-bare": (_rebuild(tmp_path / "b.pt2", {ROOT + "data/sample_inputs/model.pt": payload}), "unsafe-pickle"),
        "sample-inputs-second-pickle": (_rebuild(tmp_path / "c.pt2", {ROOT + "data/sample_inputs/model.pt": hidden}), "unsafe-pickle"),
        "sample-inputs-not-a-pickle": (_rebuild(tmp_path / "d.pt2", {ROOT + "data/sample_inputs/model.pt": b"\x00garbage"}), "unsafe-pickle"),
        "extra-file": (_rebuild(tmp_path / "e.pt2", {}, {ROOT + "extra/notes.pkl": payload}), "unsafe-pickle"),
        "pickled-weight": (_with_pickled_weight(tmp_path / "h.pt2", payload), "unsafe-pickle"),
        "torch-2.8-sample-inputs": (_rebuild(tmp_path / "i.pt2", {"mlp_dynamic/data/sample_inputs/model.pt": payload}, base=_fixture("2.8.0")), "unsafe-pickle"),
        "torch-2.6-sample-inputs": (_rebuild(tmp_path / "j.pt2", {"serialized_example_inputs.pt": payload}, base=_fixture("2.6.0")), "unsafe-pickle"),
        "expression-size": (_with_expression(tmp_path / "f.pt2", evil), "bad-expression"),
        "expression-stride": (_with_expression(tmp_path / "g.pt2", evil, "strides"), "bad-expression"),
    }


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("hostile")
    marker = tmp / "MARKER"
    cases = _cases(tmp, marker)
    yield cases, marker
    assert not marker.exists()


def _cli(capsys, *argv) -> tuple[int, str]:
    rc = main([str(a) for a in argv])
    out = capsys.readouterr()
    return rc, out.out + out.err


NAMES = ["sample-inputs-zip", "sample-inputs-bare", "sample-inputs-second-pickle", "sample-inputs-not-a-pickle",
         "extra-file", "pickled-weight", "torch-2.8-sample-inputs", "torch-2.6-sample-inputs",
         "expression-size", "expression-stride"]


@pytest.mark.parametrize("name", NAMES)
def test_inspect_and_validate_refuse(hostile, capsys, name):
    cases, marker = hostile
    path, code = cases[name]
    rc, text = _cli(capsys, "inspect", path)
    assert rc == 1 and ("UNSAFE" in text or "INVALID" in text), text
    rc, text = _cli(capsys, "validate", "--json", path)
    result = json.loads(text)
    assert rc == 1 and result["valid"] is False and result["readable"] is True
    assert any(f["code"] == code and f["severity"] == "error" for f in result["findings"]), result
    rc, text = _cli(capsys, "validate", "--target", "torch==2.10", path)
    assert rc == 1 and "INVALID" in text and "cannot write" in text
    assert not marker.exists()


@pytest.mark.parametrize("name", NAMES)
def test_scan_verdict_is_not_ok(hostile, name):
    cases, marker = hostile
    path, code = cases[name]
    result = check_artifact(path, ScanOptions(target="torch==2.10"))
    assert result["verdict"] == "findings" and result["writable"] is False
    assert any(f["code"] == code for f in result["findings"])
    assert not marker.exists()


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("schema", ["8.15", "8.8"])
def test_convert_to_pt2_writes_nothing(hostile, capsys, tmp_path, name, schema):
    cases, marker = hostile
    path, code = cases[name]
    out = tmp_path / "out.pt2"
    rc, text = _cli(capsys, "convert", path, "--to", "pt2", "--target-schema", schema, "-o", out)
    assert rc == 1 and not out.exists(), text
    assert "not written" in text
    with load(path) as archive:
        for target in (schema, "8.2"):
            plan = plan_for_target(archive, target)
            assert not plan.writable and plan.members == []
            assert not writable_for_target(archive, target)
    assert not marker.exists()


def test_drop_sample_inputs_writes_the_rest(hostile, capsys, tmp_path):
    """``--drop-sample-inputs`` writes the hostile sample inputs empty in a torch 2.9+ layout (as
    torch writes a program without example inputs); torch then loads the program, nothing ran."""
    cases, marker = hostile
    path, _ = cases["sample-inputs-zip"]
    out = tmp_path / "dropped.pt2"
    rc, text = _cli(capsys, "convert", path, "--to", "pt2", "--target-schema", "8.15", "--drop-sample-inputs", "-o", out)
    assert rc == 0, text
    with zipfile.ZipFile(out) as z:
        assert z.read(ROOT + "data/sample_inputs/model.pt") == b""
    rc, text = _cli(capsys, "validate", out)
    assert rc == 0, text
    torch = pytest.importorskip("torch")
    ep = torch.export.load(str(out))
    assert ep.module()(torch.randn(3, 8)).shape[0] == 3
    # the older layouts need sample inputs: the flag does not make them writable
    rc, text = _cli(capsys, "convert", path, "--to", "pt2", "--target-schema", "8.8", "--drop-sample-inputs", "-o", tmp_path / "o.pt2")
    assert rc == 1 and not (tmp_path / "o.pt2").exists()
    # a hostile expression is never dropped
    rc, _ = _cli(capsys, "convert", cases["expression-size"][0], "--to", "pt2", "--target-schema", "8.15", "--drop-sample-inputs", "-o", tmp_path / "p.pt2")
    assert rc == 1 and not (tmp_path / "p.pt2").exists()
    assert not marker.exists()


def test_scan_cli_verdict(hostile, capsys, tmp_path):
    cases, marker = hostile
    results = tmp_path / "r.jsonl"
    path, _ = cases["sample-inputs-bare"]
    rc, _ = _cli(capsys, "scan", path, "--target", "torch==2.10", "--jobs", "1", "--out", results)
    assert rc == 1
    (record,) = [json.loads(line) for line in results.read_text().splitlines()]
    assert record["verdict"] == "findings"
    assert not marker.exists()


def test_save_refuses_a_pickle_torch_would_run(hostile, tmp_path):
    """``pt2x.serde.save(..., target_schema=)`` goes through the same planner: an extra file that
    is a pickle torch would run blocks the write."""
    torch = pytest.importorskip("torch")
    import pt2x.serde

    cases, marker = hostile
    ep = torch.export.export(torch.nn.Linear(4, 2), (torch.randn(3, 4),))
    dst = tmp_path / "saved.pt2"
    with pytest.raises(TargetNotWritable) as e:
        pt2x.serde.save(ep, dst, target_schema="8.15", extra_files={"notes.pkl": _payload(marker)})
    assert any(f.code == "unsafe-pickle" for f in e.value.findings)
    assert not dst.exists() and not marker.exists()
    pt2x.serde.save(ep, dst, target_schema="8.15")  # the program itself is data only
    with load(dst) as archive:
        assert writable_for_target(archive, "8.15")


def test_real_files_have_no_code_bearing_findings():
    from pt2x.serde.code_bearing import code_findings

    for release in sorted(os.listdir(PT2_FIXTURES)):
        folder = os.path.join(PT2_FIXTURES, release)
        for name in sorted(os.listdir(folder)) if os.path.isdir(folder) else []:
            if name.endswith(".pt2"):
                try:
                    archive = load(os.path.join(folder, name))
                except Exception:  # noqa: BLE001 - fixtures pt2x refuses are other tests' business
                    continue
                with archive:
                    assert code_findings(archive) == [], (release, name)


def test_weights_only_table():
    """The table holds torch's facts: protocol 2 spells builtins ``__builtin__``; posix is outside."""
    assert outside_weights_only(["__builtin__.set", "collections.OrderedDict", "torch._utils._rebuild_tensor_v2"]) == []
    assert outside_weights_only(["posix.system", "builtins.eval", "<dynamic>"]) == ["posix.system", "builtins.eval", "<dynamic>"]
    assert len(TORCH_WEIGHTS_ONLY_GLOBALS) == 144


def test_expression_fields_are_every_symexpr_in_the_schema():
    """``EXPRESSION_FIELDS`` names every field of the schema that holds a SymInt/SymFloat/SymBool."""
    import dataclasses
    import typing

    from pt2x.schema import definitions as d

    found: dict[str, set[str]] = {}
    for name, cls in vars(d).items():
        if not dataclasses.is_dataclass(cls) or name in ("SymInt", "SymFloat", "SymBool"):
            continue
        for f in dataclasses.fields(cls):
            text = str(f.type)
            if any(t in text.replace("Argument", "") for t in ("SymInt", "SymFloat", "SymBool")):
                found.setdefault(name, set()).add(f.name)
    assert found == {k: set(v) for k, v in EXPRESSION_FIELDS.items()}


def test_extra_files_that_only_look_like_pickles_are_data(tmp_path):
    """torch never unpickles extra files: a zip without data.pkl or bytes starting like a pickle
    are left alone; only a real pickle naming a refused global is reported."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("notes.txt", "hello")
    path = _rebuild(tmp_path / "x.pt2", {}, {ROOT + "extra/a.zip": buf.getvalue(), ROOT + "extra/b.bin": b"\x80\x02garbage"})
    with load(path) as archive:
        assert [f for f in archive_findings(archive) if f.code == "unsafe-pickle"] == []
