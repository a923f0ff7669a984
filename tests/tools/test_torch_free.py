"""The torch-free paths — Python API and CLI — run in a process where ``import torch`` fails."""

from __future__ import annotations

import glob
import json
import os

import pytest

from torchfree import run_cli_torch_free, run_torch_free
from paths import PT2_FIXTURES

FIX = os.path.join(PT2_FIXTURES)


def test_import_and_load_without_torch():
    code = f"""
    import glob, json
    import pt2x, pt2x.schema, pt2x.serde, pt2x.converters, pt2x.tools.cli
    from pt2x.serde.validate import validate_archive
    out = {{}}
    for p in sorted(glob.glob({FIX!r} + "/torch-*/*.pt2")):
        a = pt2x.serde.load(p)
        m = a.models["model"]
        errors = [f for f in validate_archive(a) if f.severity == "error"]
        out[p] = [len(m.state_dict), sum(x.nbytes for x in m.state_dict.values()), len(errors)]
    try:
        import torch
        out["torch"] = "importable"
    except ImportError:
        out["torch"] = "blocked"
    print(json.dumps(out))
    """
    r = run_torch_free(code)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out.pop("torch") == "blocked"
    assert len(out) == 63
    assert all(errors == 0 for _, _, errors in out.values())
    assert out[os.path.join(FIX, "torch-2.6.0", "mlp_dynamic.pt2")][:2] == [4, 848]
    assert out[os.path.join(FIX, "torch-2.5.1", "mlp_dynamic.pt2")][:2] == [4, 848]  # schema 7.3, upgraded


def test_cli_inspect_json_without_torch():
    r = run_cli_torch_free("inspect", "--json", os.path.join(FIX, "torch-2.13.0", "mlp_dynamic.pt2"))
    assert r.returncode == 0, r.stderr
    s = json.loads(r.stdout)
    m = s["models"]["model"]
    assert m["schema_version"] == "8.20"
    assert m["range_constraints"] == {"s77": [1, 64]}
    assert m["ops"] == {"torch.ops.aten.linear.default": 2, "torch.ops.aten.relu.default": 1}
    user_in = [e for e in m["inputs"] if e["kind"] == "user_input"]
    assert user_in == [{"kind": "user_input", "name": "x", "dtype": "float", "shape": ["s77", 8]}]
    assert m["weights"] == {"count": 4, "bytes": 848}
    assert [x["kind"] for x in m["not_loaded"]] == ["sample_inputs"]


def test_cli_inspect_text_without_torch():
    r = run_cli_torch_free("inspect", os.path.join(FIX, "torch-2.8.0", "cond.pt2"))
    assert r.returncode == 0, r.stderr
    assert "torch.ops.higher_order.cond" in r.stdout and "schema 8.8" in r.stdout


def test_cli_validate_without_torch(tmp_path):
    files = sorted(glob.glob(os.path.join(FIX, "torch-*", "*.pt2")))
    r = run_cli_torch_free("validate", "--json", *files[:3])
    assert r.returncode == 0, r.stderr
    assert all(x["valid"] for x in json.loads(r.stdout))
    bad = tmp_path / "bad.pt2"
    bad.write_bytes(b"PK\x05\x06" + b"\0" * 18)
    r = run_cli_torch_free("validate", str(bad))
    assert r.returncode == 2 and "unreadable" in r.stderr
