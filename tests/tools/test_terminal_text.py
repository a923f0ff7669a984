"""Text from a file is printed escaped, on its own line, by every verb: a line break in a member
name or a torch version used to let a file print a line of its own (a forged ``...: valid``).
JSON output is strict RFC 8259: a lone surrogate (a name that is not UTF-8) is written as its
escape in text, checked with a strict parser (every string re-encoded to UTF-8, strict)."""

from __future__ import annotations

import json
import os
import zipfile

import pytest

from pt2x.tools.cli import main
from pt2x.tools.terminal import json_text, printable
from paths import PT2_FIXTURES

MLP = os.path.join(PT2_FIXTURES, "torch-2.13.0", "mlp_dynamic.pt2")
FORGED = "forged.pt2: valid"
HOSTILE = f"2.13\n{FORGED}\r\x1b[32mOK\x1b[0m\u202eevil\u2028x\ud800"


def _strict(value) -> None:
    """Raise unless ``value`` (parsed JSON) holds only text that UTF-8 can encode."""
    if isinstance(value, str):
        value.encode("utf-8", "strict")
    elif isinstance(value, dict):
        for k, v in value.items():
            _strict(k)
            _strict(v)
    elif isinstance(value, list):
        for v in value:
            _strict(v)


def _hostile_copy(dst, text: str = HOSTILE) -> None:
    """MLP with ``text`` as the torch version and as the name of an extra member."""
    with zipfile.ZipFile(MLP) as zin, zipfile.ZipFile(dst, "w") as zout:
        root = zin.namelist()[0].split("/")[0]
        for info in zin.infolist():
            data = zin.read(info.filename)
            if info.filename.endswith("models/model.json"):
                doc = json.loads(data)
                doc["torch_version"] = text
                data = json.dumps(doc).encode()
            zout.writestr(info, data)
        zout.writestr(f"{root}/{text.replace(chr(0xD800), '')}", b"x")


@pytest.mark.parametrize("text,shown", [
    ("a\nb", "a\\nb"), ("\x1b[2J", "\\x1b[2J"), ("\u202eabc", "\\u202eabc"), ("x\udcff", "x\\udcff"),
    ("tab\there", "tab\\there"), ("plain text, ünïcode", "plain text, ünïcode"), (3, "3"),
])
def test_printable_escapes_on_one_line(text, shown):
    assert printable(text) == shown


@pytest.mark.parametrize("command", [["inspect"], ["validate"], ["validate", "--target", "torch==2.10"],
                                     ["scan", "--jobs", "1"]])
def test_no_verb_prints_a_line_a_file_wrote(capsys, tmp_path, command):
    path = tmp_path / "hostile.pt2"
    _hostile_copy(path)
    rc = main([command[0], str(path), *command[1:]])
    out = capsys.readouterr()
    assert rc in (0, 1), out.err
    text = out.out + out.err
    for line in text.splitlines():
        assert not line.startswith(FORGED), line
    assert not any(c in text for c in "\r\x1b\u202e\u2028")
    if command[0] != "validate":  # validate does not print the torch version
        assert f"2.13\\n{FORGED}\\r\\x1b[32mOK" in text


@pytest.mark.parametrize("command", [["inspect", "--json"], ["validate", "--json"], ["scan", "--jobs", "1", "--json"]])
def test_json_output_is_strict(capsys, tmp_path, command):
    """A file name that is not UTF-8 (a lone surrogate once decoded) reaches JSON as text."""
    path = tmp_path / os.fsdecode(b"not-utf8-\xff.pt2")
    _hostile_copy(path)
    rc = main([command[0], str(path), *command[1:]])
    out = capsys.readouterr().out
    assert rc in (0, 1)
    doc = json.loads(out)
    _strict(doc)
    assert "not-utf8-\\\\udcff" in out  # the escape as text: a backslash, then u, d, c, f, f


def test_scan_records_are_strict_and_resume_finds_them(capsys, tmp_path):
    folder = tmp_path / os.fsdecode(b"\xfe\xff")
    folder.mkdir()
    _hostile_copy(folder / "m.pt2")
    out = tmp_path / "results.jsonl"
    main(["scan", str(folder), "--jobs", "1", "--out", str(out)])
    records = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    _strict(records)
    assert len(records) == 1 and records[0]["path"].endswith("\\udcfe\\udcff/m.pt2")
    main(["scan", str(folder), "--jobs", "1", "--out", str(out), "--resume"])
    assert len(out.read_text(encoding="utf-8").splitlines()) == 1  # recognised as done, not checked again
    capsys.readouterr()


def test_json_text_keeps_valid_text_as_json_dumps_writes_it():
    value = {"a": ["ünï", "\U0001F600", 1.5, None], "b\n": True}
    assert json_text(value) == json.dumps(value)
    assert json.loads(json_text({"k\udcff": "v\ud800"})) == {"k\\udcff": "v\\ud800"}


def test_schema_diff_prints_type_names_from_a_file_escaped(capsys, tmp_path):
    from pt2x.schema.snapshot import build_snapshot, make_snapshot, render

    snap = build_snapshot()
    types = {**snap["types"], f"Evil\n{FORGED}\x1b[2J": snap["types"]["ComplexValue"]}
    path = tmp_path / "snapshot.json"
    path.write_text(render(make_snapshot(types, snap["schema_version"], source="a file")))
    rc = main(["schema", "diff", "pt2x", str(path)])
    out = capsys.readouterr().out
    assert rc in (0, 1)
    assert f"Evil\\n{FORGED}\\x1b[2J" in out
    assert not any(line.startswith(FORGED) for line in out.splitlines()) and "\x1b" not in out


def test_an_error_message_cannot_start_a_line_of_its_own(capsys, tmp_path):
    """pt2x's own error text may quote a name from the file unescaped (a member name): after the
    first line, every line of an error is indented, so none passes for a line of output."""
    path = tmp_path / "m.pt2"
    with zipfile.ZipFile(MLP) as zin, zipfile.ZipFile(path, "w") as zout:
        for info in zin.infolist():
            name = info.filename.replace("models/model.json", f"models/model\n{FORGED}.json")
            zout.writestr(name, zin.read(info.filename))
    rc = main(["convert", str(path), "--to", "onnx", "-o", str(tmp_path / "o.onnx")])  # its weights are not found
    err = capsys.readouterr().err
    assert rc == 2 and FORGED in err
    assert all(line.startswith(("pt2x convert: ", " ")) for line in err.splitlines()), err
