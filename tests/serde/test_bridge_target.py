"""save(ep, f, target_schema=T) and ``pt2x convert --to pt2 --target-schema T`` are one path.

Both go through ``serde.compat.plan``: where both write, the files are byte for byte the
same (the older layouts for 8.8 and 8.2 included); where they refuse, they name the same blockers;
``validate --target`` calls writable exactly what they write.
"""

from __future__ import annotations

import json

import pytest

pytest.importorskip("torch")

import zoo

import pt2x.serde as serde
from pt2x.serde.compat.plan import TargetNotWritable
from pt2x.serde.errors import Pt2UsageError
from pt2x.serde.torch import api as bridge
from pt2x.tools.cli import main

PROGRAMS = ["mlp_dynamic", "cond", "buffer_mutation", "tied_weights", "dict_inputs"]
TARGETS = [(8, 2), (8, 8), (8, 14), (8, 15), (8, 20)]


def _blockers(findings) -> list[tuple]:
    return sorted((f.code, f.message, f.member, f.path) for f in findings if f.severity == "error")


@pytest.mark.parametrize("target", TARGETS, ids=lambda t: f"{t[0]}.{t[1]}")
@pytest.mark.parametrize("name", PROGRAMS)
def test_save_for_target_is_convert(tmp_path, capsys, name, target):
    ep = zoo.exported(name)
    text = f"{target[0]}.{target[1]}"
    (tmp_path / "plain").mkdir()
    (tmp_path / "converted").mkdir()
    (tmp_path / "saved").mkdir()
    plain, converted, saved = (tmp_path / d / f"{name}.pt2" for d in ("plain", "converted", "saved"))
    bridge.save(ep, plain)

    rc = main(["convert", str(plain), "--to", "pt2", "--target-schema", text, "-o", str(converted)])
    err = capsys.readouterr().err
    try:
        bridge.save(ep, saved, target_schema=target)
        refused = None
    except TargetNotWritable as e:
        refused = e
    assert main(["validate", str(plain), "--target-schema", text, "--json"]) in (0, 1)
    writable = json.loads(capsys.readouterr().out)["writable"]

    assert (rc == 0) == (refused is None) == writable == converted.exists()
    if refused is None:
        assert saved.read_bytes() == converted.read_bytes()
    else:
        assert isinstance(refused, Pt2UsageError) and not saved.exists()
        printed = {line for line in err.splitlines() if line.startswith("error: ")}
        assert printed == {str(f) for f in refused.findings if f.severity == "error"}
        assert _blockers(refused.findings)
    if target < (8, 14) and refused is None:  # torch 2.8 reads only pickled weights, 2.6-2.7 only the flat zip
        with serde.load(saved) as a:
            assert a.layout == ("flat" if target < (8, 8) else "pt2-pickled-weights")


def test_save_for_target_takes_release_text(tmp_path):
    ep = zoo.exported("mlp_dynamic")
    a, b = tmp_path / "a" / "m.pt2", tmp_path / "b" / "m.pt2"
    a.parent.mkdir()
    b.parent.mkdir()
    bridge.save(ep, a, target_schema="torch==2.10")
    bridge.save(ep, b, target_schema=(8, 15))
    assert a.read_bytes() == b.read_bytes()
