"""A file larger than ``pt2x scan --memory`` is ``oom`` (mapping it under the worker's address-
space limit fails with ENOMEM), not ``unreadable: Cannot allocate memory``."""

from __future__ import annotations

import json

from pt2x.tools.cli import main


def test_a_file_larger_than_the_memory_limit_is_oom(capsys, tmp_path):
    big = tmp_path / "big.pt2"
    with open(big, "wb") as f:  # sparse: 2 GiB that take no disk
        f.truncate(2 << 30)
    out = tmp_path / "results.jsonl"
    rc = main(["scan", str(big), "--memory", "200", "--jobs", "1", "--out", str(out), "--json"])
    assert rc == 1
    assert json.loads(capsys.readouterr().out)["verdicts"] == {"oom": 1}
    record = json.loads(out.read_text())
    assert record["verdict"] == "oom" and record["error"]["class"] == "OutOfMemory", record
