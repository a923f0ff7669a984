"""``pt2x scan --resume`` reads its results file back: a record whose fields have the wrong type
(``"error": "boom"``, ``"verdict": ["ok"]``, ``"seconds": "slow"``, ``"blockers": 5``, ...)
used to crash the summary (exit 3); now the file is refused, exit 2, one line naming the line
and the field, and nothing in it is changed."""

from __future__ import annotations

import json
import os

import pytest

from pt2x.serde.errors import Pt2UsageError
from pt2x.tools.cli import main
from pt2x.tools.scan.results import ResultsFile, shape_problem
from paths import PT2_FIXTURES

MLP = os.path.join(PT2_FIXTURES, "torch-2.13.0", "mlp_dynamic.pt2")
GOOD = {"path": "a.pt2", "size": 10, "verdict": "ok", "seconds": 0.5,
        "models": {"model": {"schema_version": "8.20", "torch_version": None, "node_count": 3, "ops": {"aten.relu": 1}}},
        "readable": True, "valid": True, "target": "torch==2.10", "findings": [{"severity": "warning", "code": "x", "message": "m"}],
        "findings_total": 1, "blockers": {"bad-dtype": 2},
        "conversions": {"onnx": {"model": {"result": "error", "error": {"class": "E", "message": "m"}, "seconds": 0.1}}},
        "error": {"class": "ArchiveError", "message": "m", "reason": "r"}, "a field of a newer pt2x": [1, {"x": None}]}

# (field, value, where the problem is reported)
BAD = [
    ("error", "boom", "error: expected a JSON object"),
    ("verdict", ["ok"], "verdict: expected text"),
    ("seconds", "slow", "seconds: expected seconds"),
    ("seconds", -1, "seconds: expected seconds"),
    ("blockers", 5, "blockers: expected a JSON object"),
    ("blockers", {"bad-dtype": "2"}, "blockers['bad-dtype']: expected a count"),
    ("size", True, "size: expected a count"),
    ("size", 1.5, "size: expected a count"),
    ("models", {"model": {"schema_version": [8, 20]}}, "models['model'].schema_version: expected text or null"),
    ("models", {"model": "x"}, "models['model']: expected a JSON object"),
    ("findings", [{"severity": "error"}], "findings[0]: no 'code'"),
    ("findings", {"code": "x"}, "findings: expected a JSON array"),
    ("conversions", {"onnx": {"model": {"result": 1}}}, "conversions['onnx']['model'].result: expected text"),
    ("conversions", {"onnx": {"model": {"result": "unsupported", "unsupported": {"op": None}}}},
     "conversions['onnx']['model'].unsupported['op']: expected a count"),
    ("error", {"class": "E", "message": {"nested": 1}}, "error.message: expected text"),
    ("valid", "yes", "valid: expected true or false"),
]


def test_a_record_a_scan_writes_has_the_shape():
    assert shape_problem(GOOD) is None
    assert shape_problem({"path": "a.pt2", "verdict": "a verdict of a newer pt2x"}) is None


@pytest.mark.parametrize("field,value,problem", BAD, ids=[f"{f}={v!r}" for f, v, _ in BAD])
def test_a_wrongly_typed_field_refuses_the_file_naming_line_and_field(capsys, tmp_path, field, value, problem):
    out = tmp_path / "results.jsonl"
    lines = [json.dumps({**GOOD, "path": "first.pt2"}), json.dumps({**GOOD, "path": "second.pt2", field: value})]
    out.write_text("\n".join(lines) + "\n")
    before = out.read_bytes()
    rc = main(["scan", MLP, "--jobs", "1", "--out", str(out), "--resume"])
    err = capsys.readouterr().err
    assert rc == 2, err
    (line,) = err.strip().splitlines()
    assert line.startswith(f"pt2x scan: cannot resume from {out}: line 2 is not a pt2x scan record ({problem}")
    assert out.read_bytes() == before


def test_brackets_nested_past_the_recursion_limit(tmp_path):
    out = tmp_path / "results.jsonl"
    out.write_text(json.dumps(GOOD) + "\n" + "[" * 100_000 + "\n")
    with pytest.raises(Pt2UsageError, match="line 2 is not a pt2x scan record"):
        list(ResultsFile(str(out), resume=True).previous())


def test_good_records_resume_and_count_in_the_summary(capsys, tmp_path):
    out = tmp_path / "results.jsonl"
    out.write_text(json.dumps({**GOOD, "path": MLP, "verdict": "findings"}) + "\n")
    assert main(["scan", MLP, "--jobs", "1", "--out", str(out), "--resume", "--json"]) == 1
    summary = json.loads(capsys.readouterr().out)
    assert summary["artifacts"] == 1 and summary["verdicts"] == {"findings": 1}  # taken from the file, not re-checked
    assert len(out.read_text().splitlines()) == 1


def test_the_summary_takes_every_record_the_table_accepts():
    """The record table names what the summary reads: a record that passes it is summarised."""
    from pt2x.tools.scan.report import Summary

    s = Summary("torch==2.10", ("onnx",))
    s.add(GOOD)
    d = s.as_dict()
    assert d["blockers"] == [{"code": "bad-dtype", "artifacts": 1}]
    assert d["conversions"]["onnx"]["errors"] == [{"error": "E: m", "models": 1}]
    assert "not recorded" in d["torch_versions"] and s.table()
