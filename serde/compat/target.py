"""Can an older torch read this artifact, and how to make one it can.

Why: ``torch.export.load`` in release R accepts any file of R's schema *major* but
fails (KeyError, TypeError, SerializeError) on content R's schema does not know.
Whether a file is readable is therefore decided by its content, not its minor version.
This module answers that question from the imported torch snapshots
(``schema/snapshots/torch/``) and rewrites JSON for an older release where the content
allows. No torch import.

* ``parse_target`` -- ``torch==2.10``, ``2.10``, ``8.15`` -> schema version (8, 15).
* ``check_target`` -- findings that block (or warn about) reading an archive with a release.
* ``downgrade`` -- a model JSON rewritten for an older release, or the blockers.
* ``upgrade_to_current`` -- a schema 7.x (torch 2.5) model JSON lifted to 8.x.

Facts about torch readers used here (from each release's ``torch/_export/serde/serialize.py``):
``_dict_to_dataclass`` in torch <= 2.8 builds structs with ``cls(**data)``, so an unknown
key raises TypeError; from 2.9 on it skips keys the dataclass does not declare. Every
release raises KeyError on an unknown union member (``type_hints[key]``) and fails on an
enum number it has no mapping for. Only the schema major is compared on load.
"""

from __future__ import annotations

import copy
import json
import re
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterator

from ..errors import Pt2UsageError, SchemaVersionError
from ..findings import Finding

__all__ = [
    "parse_target",
    "releases",
    "release_snapshot",
    "target_snapshot",
    "check_target",
    "check_program_json",
    "layout_findings",
    "archive_documents",
    "downgrade",
    "upgrade_to_current",
    "LENIENT_SINCE",
]

_TORCH_DIR = Path(__file__).resolve().parents[2] / "schema" / "snapshots" / "torch"
LENIENT_SINCE = (8, 14)
"""First released schema (torch 2.9) whose reader ignores unknown struct fields; older ones raise TypeError."""

_RELEASE = re.compile(r"^torch==(\d+)\.(\d+)(?:\.(\d+))?(?:[+.\w]*)$")
_PLAIN = re.compile(r"^(?:schema==)?(\d+)\.(\d+)(?:\.(\d+))?$")


# ------------------------------------------------------------------------ releases


@lru_cache(maxsize=None)
def releases() -> dict[str, dict]:
    """torch minor release (``"2.10"``) -> ``{"schema_version": [8, 15], "snapshot": ..., ...}``."""
    return json.loads((_TORCH_DIR / "releases.json").read_text())["releases"]


def _known() -> str:
    return ", ".join(f"{r} ({v['schema_version'][0]}.{v['schema_version'][1]})" for r, v in releases().items())


def parse_target(text: str) -> tuple[int, int]:
    """Schema version meant by ``torch==2.10`` / ``2.10`` (a torch release) or ``8.15`` / ``schema==8.15``.

    A bare ``2.x`` is a torch release (no file carries schema 2.x); ``7.x``/``8.x``... are schema versions.
    """
    s = str(text).strip()
    m = _RELEASE.match(s)
    is_release = m is not None
    if not m:
        m = _PLAIN.match(s)
        if not m:
            raise Pt2UsageError(f"target {text!r}: expected torch==X.Y, X.Y (a torch release) or a schema version like 8.15")
        is_release = not s.startswith("schema==") and int(m.group(1)) == 2
    major, minor = int(m.group(1)), int(m.group(2))
    if not is_release:
        return major, minor
    info = releases().get(f"{major}.{minor}")
    if info is None:
        raise Pt2UsageError(f"target {text!r}: no schema known for torch {major}.{minor}; known releases: {_known()}")
    return tuple(info["schema_version"])  # type: ignore[return-value]


def _releases_with(version: tuple[int, int]) -> list[str]:
    return [r for r, v in releases().items() if tuple(v["schema_version"]) == tuple(version)]


def release_snapshot(version: tuple[int, int]) -> tuple[str, dict]:
    """(releases, snapshot) of the torch release(s) that shipped schema ``version``."""
    from ...schema.snapshot import read_snapshot

    rels = _releases_with(version)
    if not rels:
        raise Pt2UsageError(
            f"no torch release shipped schema {version[0]}.{version[1]}; known: {_known()}"
        )
    return "/".join(rels), read_snapshot(_TORCH_DIR / releases()[rels[0]]["snapshot"])


def target_snapshot(target) -> tuple[tuple[int, int], str, dict]:
    """(schema version, release label, snapshot) for a target given as text or (major, minor)."""
    version = parse_target(target) if isinstance(target, str) else (int(target[0]), int(target[1]))
    label, snap = release_snapshot(version)
    return version, label, snap


# ------------------------------------------------------------- what each release reads

FLOAT_STRINGS_SINCE = (8, 7)
"""torch 2.7 (8.7) and later read non-finite floats written as "Infinity"/"-Infinity"/"NaN"; 2.6 does not."""
PT2_ARCHIVE_SINCE = (8, 8)
"""torch 2.8 (8.8) is the first to read the PT2 archive layout (models/<m>.json); 2.6-2.7 read the flat zip."""
RAW_WEIGHTS_SINCE = (8, 14)
"""torch 2.9 (8.14) is the first to read raw weights with <m>_weights_config.json; 2.8 reads only data/weights/<m>.pt."""
_NONFINITE = {"Infinity": float("inf"), "-Infinity": float("-inf"), "NaN": float("nan")}

# Fields whose non-default value changes what the program computes or returns: a downgrade
# that would drop one is refused rather than warned about.
_KEEP_MEANING = frozenset(
    {
        "GraphModule.treespec_namedtuple_fields",
        "Node.is_hop_single_tensor_return",
        "Graph.sym_float_values",
        "Graph.custom_obj_values",
        "Graph.is_single_tensor_return",
    }
)
_MAX_PER_KIND = 20  # findings of one code at one field before they are summarized


# ------------------------------------------------------------------- type strings


@lru_cache(maxsize=None)
def _parse_type(s: str) -> tuple:
    """``Optional[List[int]]`` -> ("optional", ("list", ("name", "int")))."""
    s = s.strip()
    for head, tag in (("Optional[", "optional"), ("List[", "list")):
        if s.startswith(head) and s.endswith("]"):
            return (tag, _parse_type(s[len(head):-1]))
    if s.startswith("Dict[") and s.endswith("]"):
        key, _, val = s[5:-1].partition(",")
        if key.strip() != "str":
            raise ValueError(f"schema dict keys must be str: {s}")
        return ("dict", _parse_type(val))
    if s == "Tuple[()]":
        return ("unit",)
    return ("name", s)


def _default_value(text: str | None) -> Any:
    """The JSON value a snapshot default string stands for (torch writes ``str(value)``)."""
    return {"None": None, "[]": [], "{}": {}, "False": False, "True": True}.get(text, text)


# ------------------------------------------------------------------------- walker


class _Walk:
    """Walk model JSON against one release's snapshot; optionally rebuild it for that release.

    ``check`` mode reports what the release's reader would trip on; ``rewrite`` mode also
    returns a copy with droppable unknown fields removed and floats in the release's form.
    """

    def __init__(self, snap: dict, version: tuple[int, int], label: str, *, member: str | None, rewrite: bool):
        self.types = snap["types"]
        self.version = tuple(version)
        self.label = label
        self.member = member
        self.rewrite = rewrite
        self.lenient = self.version >= LENIENT_SINCE
        self.float_strings = self.version >= FLOAT_STRINGS_SINCE
        self.findings: list[Finding] = []
        self._counts: dict[tuple[str, str], list] = {}
        self._source_types = _current_types()

    # findings are grouped per (code, Type.field) so a 10k-node graph gives a readable list
    def _report(self, severity: str, code: str, key: str, path: str, message: str, *, lost: bool = False) -> None:
        group = self._counts.setdefault((code, key), [0, 0, path, severity, message])
        group[0] += 1
        group[1] += int(lost)
        if severity == "error" and group[0] <= _MAX_PER_KIND:
            self.findings.append(Finding("error", code, message, self.member, path))

    def finish(self) -> list[Finding]:
        for (code, key), (count, lost, first, severity, message) in self._counts.items():
            if severity == "error":
                if count > _MAX_PER_KIND:
                    self.findings.append(
                        Finding("error", code, f"{key}: {count - _MAX_PER_KIND} more like the above", self.member, first)
                    )
                continue
            extra = f" ({count} places" + (f", {lost} with a non-default value" if lost else "") + "; first shown)"
            self.findings.append(Finding(severity, code, message + extra, self.member, first))
        return self.findings

    def value(self, v: Any, t: tuple, path: str) -> Any:
        tag = t[0]
        if tag == "optional":
            return None if v is None else self.value(v, t[1], path)
        if tag == "list":
            if not isinstance(v, list):
                return self._mismatch(v, "a list", path)
            return [self.value(x, t[1], f"{path}[{i}]") for i, x in enumerate(v)]
        if tag == "dict":
            if not isinstance(v, dict):
                return self._mismatch(v, "an object", path)
            return {k: self.value(x, t[1], f"{path}[{k!r}]") for k, x in v.items()}
        if tag == "unit":
            return v if v == [] else self._mismatch(v, "[] (an empty tuple)", path)
        name = t[1]
        if name == "float":
            return self._float(v, path)
        if name in ("int", "str", "bool"):
            ok = {"int": type(v) is int, "str": type(v) is str, "bool": type(v) is bool}[name]
            return v if ok else self._mismatch(v, name, path)
        entry = self.types.get(name)
        if entry is None:
            self._report("error", "target-unknown-type", name, path, f"torch {self.label} has no type {name}")
            return v
        kind = entry["kind"]
        if kind == "enum":
            if type(v) is not int or v not in entry["fields"].values():
                self._report(
                    "error", "target-unknown-enum-value", f"{name}={v}", path,
                    f"{name} value {v!r} is unknown to torch {self.label} (its reader fails on it)",
                )
            return v
        if kind == "union":
            return self._union(v, name, entry["fields"], path)
        return self._struct(v, name, entry["fields"], path)

    def _mismatch(self, v: Any, want: str, path: str) -> Any:
        self._report("error", "target-type-mismatch", path, path, f"torch {self.label} expects {want} here, got {type(v).__name__}")
        return v

    def _float(self, v: Any, path: str) -> Any:
        if type(v) in (int, float):
            if isinstance(v, float) and (v != v or v in (float("inf"), float("-inf"))) and self.float_strings:
                return ("NaN" if v != v else "Infinity" if v > 0 else "-Infinity") if self.rewrite else v
            return v
        if type(v) is str and v in _NONFINITE:
            if self.float_strings:
                return v
            if self.rewrite:
                return _NONFINITE[v]  # written back as a bare Infinity/NaN token, which 2.6's json.loads reads
            self._report(
                "error", "target-float-string", "float", path,
                f"non-finite float written as the string {v!r}; torch {self.label} reads only the bare JSON token",
            )
            return v
        return self._mismatch(v, "float", path)

    def _union(self, v: Any, name: str, members: dict, path: str) -> Any:
        if not isinstance(v, dict) or len(v) != 1:
            return self._mismatch(v, f"{name} (a single-key object)", path)
        ((key, x),) = v.items()
        if key not in members:
            self._report(
                "error", "target-unknown-union-member", f"{name}.{key}", f"{path}.{key}".lstrip("."),
                f"{name}.{key} is not in torch {self.label}'s schema (its reader raises KeyError)",
            )
            return v
        return {key: self.value(x, _parse_type(members[key]["type"]), f"{path}.{key}".lstrip("."))}

    def _struct(self, v: Any, name: str, fields: dict, path: str) -> Any:
        if not isinstance(v, dict):
            return self._mismatch(v, f"{name} (an object)", path)
        out = {}
        for key, x in v.items():
            sub = f"{path}.{key}".lstrip(".")
            if key in fields:
                out[key] = self.value(x, _parse_type(fields[key]["type"]), sub)
            elif self._unknown_field(name, key, x, sub):
                out[key] = x
        for key, spec in fields.items():
            if key not in v and "default" not in spec:
                self._report(
                    "error", "target-missing-field", f"{name}.{key}", path or "<root>",
                    f"{name}.{key} is required by torch {self.label} but absent",
                )
        return out

    def _unknown_field(self, name: str, key: str, x: Any, path: str) -> bool:
        """Report a field the release does not know; True to keep it in a rewrite."""
        where = f"{name}.{key}"
        src = self._source_types.get(name, {}).get("fields", {}).get(key)
        has_default = src is not None and "default" in src
        is_default = has_default and x == _default_value(src["default"])
        if self.rewrite:
            if is_default:
                return False
            if where in _KEEP_MEANING or not has_default:
                self._report(
                    "error", "target-unknown-field", where, path,
                    f"{where} holds a value torch {self.label} cannot represent (not in its schema); it cannot be dropped",
                )
                return True
            self._report(
                "warning", "target-dropped-field", where, path,
                f"{where} dropped for torch {self.label} (not in its schema; its value is lost)", lost=True,
            )
            return False
        if not self.lenient:
            self._report(
                "error", "target-unknown-field", where, path,
                f"{where} is not in torch {self.label}'s schema; its reader builds structs with cls(**data) and raises TypeError",
            )
        elif not has_default or (where in _KEEP_MEANING and not is_default):
            self._report(
                "error", "target-unknown-field", where, path,
                f"{where} is not in torch {self.label}'s schema; it would be ignored, changing the program",
            )
        else:
            self._report(
                "warning", "target-ignored-field", where, path,
                f"{where} is not in torch {self.label}'s schema; its reader ignores it", lost=not is_default,
            )
        return True


@lru_cache(maxsize=None)
def _current_types_cached() -> str:
    from ...schema.snapshot import build_snapshot

    return json.dumps(build_snapshot()["types"])


def _current_types() -> dict:
    """pt2x's own schema (the newest pt2x knows): where unknown fields' defaults are looked up."""
    return json.loads(_current_types_cached())


# ---------------------------------------------------------------- public: checking


def _major_finding(version: tuple[int, int], file_version, label: str, member: str | None) -> Finding | None:
    if file_version is None:
        return Finding("error", "target-schema-major", "no schema_version in the program", member, "schema_version")
    if int(file_version[0]) != version[0]:
        return Finding(
            "error", "target-schema-major",
            f"file has schema {file_version[0]}.{file_version[1]}; torch {label} reads only {version[0]}.x",
            member, "schema_version",
        )
    return None


def _file_version(program_json: Any) -> tuple[int, int] | None:
    sv = program_json.get("schema_version") if isinstance(program_json, dict) else None
    if isinstance(sv, dict) and type(sv.get("major")) is int and type(sv.get("minor")) is int:
        return sv["major"], sv["minor"]
    return None


def check_program_json(program_json: Any, target, *, root: str = "ExportedProgram", member: str | None = None) -> list[Finding]:
    """Findings for reading one JSON document (a model, or a PayloadConfig) with ``target``'s reader."""
    version, label, snap = target_snapshot(target)
    findings = []
    if root == "ExportedProgram":
        bad = _major_finding(version, _file_version(program_json), label, member)
        if bad:
            return [bad]
    walk = _Walk(snap, version, label, member=member, rewrite=False)
    walk.value(program_json, ("name", root), "")
    findings.extend(walk.finish())
    return findings


def layout_findings(archive, version: tuple[int, int], label: str) -> list[Finding]:
    """Blockers from the archive's layout alone: which layouts release ``label`` (schema ``version``) reads."""
    layout = getattr(archive, "layout", "pt2")
    raw = any(getattr(m, "weights_config", None) is not None or getattr(m, "constants_config", None) is not None
              for m in archive.models.values())
    if layout == "flat":
        return []
    if version < PT2_ARCHIVE_SINCE:
        return [Finding("error", "target-archive-layout",
                        f"PT2 archive layout (models/<name>.json); torch {label} reads only the flat zip "
                        "(serialized_exported_program.json), which pt2x does not write", getattr(archive, "source", None))]
    if raw and version < RAW_WEIGHTS_SINCE:
        return [Finding("error", "target-archive-layout",
                        f"weights/constants stored as raw files with *_config.json; torch {label} reads only "
                        "pickled data/weights/<model>.pt", getattr(archive, "source", None))]
    return []


def archive_documents(archive) -> Iterator[tuple[str, str, Any]]:
    """(root type, member, parsed JSON) for every model program and payload config, as stored."""
    from ..codec.json_codec import encode, parse_json

    zr = getattr(archive, "zip", None)
    prefix = f"{archive.root}/" if getattr(archive, "root", "") else ""
    for name, model in archive.models.items():
        if zr is not None and model.json_member in zr:
            yield "ExportedProgram", model.json_member, parse_json(zr.read(model.json_member), member=model.json_member)
        else:
            yield "ExportedProgram", model.json_member, encode(model.program)
        for kind in ("weights", "constants"):
            member = f"{prefix}data/{kind}/{name}_{kind}_config.json"
            if zr is not None and member in zr:
                yield "PayloadConfig", member, parse_json(zr.read(member), member=member)


def check_target(archive, target) -> list[Finding]:
    """Can torch release ``target`` (text like ``torch==2.10`` / ``8.15``, or (8, 15)) load ``archive``?

    Errors are blockers (each with member and field path); warnings are content the
    release reads but ignores. An empty list means it loads as is.
    """
    version, label, snap = target_snapshot(target)
    findings = layout_findings(archive, version, label)
    for root, member, doc in archive_documents(archive):
        if root == "PayloadConfig" and "PayloadConfig" not in snap["types"]:
            continue  # already a layout blocker
        findings.extend(check_program_json(doc, version, root=root, member=member))
    return findings


# -------------------------------------------------------------- public: downgrading


def downgrade(program_json: dict, target, *, root: str = "ExportedProgram", member: str | None = None) -> tuple[dict, list[Finding]]:
    """``program_json`` (plain dicts, as from ``json_codec.encode`` or ``json.loads``) rewritten for ``target``.

    Drops fields the target does not know when they hold their default, or when losing
    them does not change the program (with a warning); non-finite floats take the
    target's spelling; ``schema_version`` becomes the target's. Returns the new dict and
    the findings; any ``error`` finding is a blocker and the dict must not be written.
    The input is not modified.
    """
    version, label, snap = target_snapshot(target)
    if root == "ExportedProgram":
        bad = _major_finding(version, _file_version(program_json), label, member)
        if bad:
            return copy.deepcopy(program_json), [bad]
    walk = _Walk(snap, version, label, member=member, rewrite=True)
    out = walk.value(program_json, ("name", root), "")
    findings = walk.finish()
    if root == "ExportedProgram" and isinstance(out, dict):
        out["schema_version"] = {"major": version[0], "minor": version[1]}
    return out, findings


# ---------------------------------------------------------------- public: upgrading

UPGRADE_FROM_MAJOR = 7
UPGRADED_VERSION = (8, 0)
"""What an upgraded 7.x program declares: it uses nothing added after 8.0."""


class _NotMechanical(Exception):
    def __init__(self, path: str, why: str):
        self.path, self.why = path, why


class _Upgrade:
    """Schema 7.x JSON -> 8.x JSON, walking torch 2.5's schema (7.3) and pt2x's side by side.

    What changed from 7.3 to 8.x that shows in JSON (facts from the two releases'
    schema.yaml and serialize.py): ``as_none`` in Argument/ConstantValue/OptionalTensorArgument
    went from ``Tuple[()]`` (written ``[]``) to ``bool`` (written ``true``);
    RangeConstraint.min_val/max_val went from ``int`` (torch 2.5 wrote +/-inf as bare
    ``Infinity`` tokens) to ``Optional[int]`` (unbounded is ``null``). ConstantInputSpec was
    renamed InputToConstantInputSpec (type names are not in the JSON) and SymExprHint's
    members were reordered (no JSON change). Everything else 8.x added has a default.
    """

    def __init__(self, src: dict, dst: dict):
        self.src, self.dst = src, dst

    def value(self, v: Any, s: tuple, d: tuple, path: str) -> Any:
        if s[0] == "optional" or d[0] == "optional":
            if v is None:
                if d[0] != "optional":
                    raise _NotMechanical(path, "null where schema 8 requires a value")
                return None
            return self.value(v, s[1] if s[0] == "optional" else s, d[1] if d[0] == "optional" else d, path)
        if s[0] == "unit":
            if d == ("name", "bool") and v == []:
                return True
            raise _NotMechanical(path, f"{_clip(v)} where () was expected")
        if s[0] != d[0]:
            raise _NotMechanical(path, f"type changed from {s} to {d}")
        if s[0] == "list":
            if not isinstance(v, list):
                raise _NotMechanical(path, "expected a list")
            return [self.value(x, s[1], d[1], f"{path}[{i}]") for i, x in enumerate(v)]
        if s[0] == "dict":
            if not isinstance(v, dict):
                raise _NotMechanical(path, "expected an object")
            return {k: self.value(x, s[1], d[1], f"{path}[{_clip(repr(k))}]") for k, x in v.items()}
        sname, dname = s[1], d[1]
        if sname in ("int", "float", "str", "bool") or dname in ("int", "float", "str", "bool"):
            if sname != dname:
                raise _NotMechanical(path, f"{sname} became {dname}")
            return v
        se, de = self.src[sname], self.dst[dname]
        if se["kind"] != de["kind"]:
            raise _NotMechanical(path, f"{sname} is a {se['kind']} in 7.x but {dname} is a {de['kind']} in 8.x")
        if de["kind"] == "enum":
            if v not in de["fields"].values():
                raise _NotMechanical(path, f"{dname} value {_clip(v)} unknown")
            return v
        if not isinstance(v, dict):
            raise _NotMechanical(path, f"expected {sname} (an object)")
        if de["kind"] == "union" and len(v) != 1:
            raise _NotMechanical(path, f"union {sname} needs exactly one key")
        out = {}
        for key, x in v.items():
            sub = f"{path}.{_clip(key, 80)}".lstrip(".")
            if key not in se["fields"]:
                raise _NotMechanical(sub, f"{sname}.{_clip(key)} is not in schema 7.3 either")
            if key not in de["fields"]:
                raise _NotMechanical(sub, f"{sname}.{_clip(key)} has no schema 8 counterpart")
            st, dt = _parse_type(se["fields"][key]["type"]), _parse_type(de["fields"][key]["type"])
            if (sname, key) in (("RangeConstraint", "min_val"), ("RangeConstraint", "max_val")):
                out[key] = self._bound(x, sub)
            else:
                out[key] = self.value(x, st, dt, sub)
        return out

    @staticmethod
    def _bound(x: Any, path: str) -> Any:
        if isinstance(x, float) and x in (float("inf"), float("-inf")):
            return None
        if x in ("Infinity", "-Infinity"):
            return None
        if type(x) is int:
            return x
        raise _NotMechanical(path, f"range bound {_clip(x)} is neither an int nor infinite")


def upgrade_to_current(program_json: dict, *, member: str | None = None) -> dict:
    """A schema 7.x (torch 2.5) program JSON rewritten as schema 8.x; 8.x is returned unchanged.

    Raises ``SchemaVersionError`` ("unsupported: schema 7.x, written by torch 2.5; supported
    8.0-8.N") for another major, a 7.x minor newer than torch 2.5's 7.3, or content that
    has no mechanical 8.x form; the error names ``member`` (the archive member the JSON
    came from) and the field path.
    """
    from ...schema.version import READ_MAJOR, SCHEMA_VERSION

    version = _file_version(program_json)
    if version is not None and version[0] == READ_MAJOR:
        return program_json
    written = program_json.get("torch_version") if isinstance(program_json, dict) else None
    written = _clip(written) if written is not None else None
    if version is None or version[0] != UPGRADE_FROM_MAJOR:
        got = f"{version[0]}.{version[1]}" if version else "unknown"
        raise SchemaVersionError(
            f"unsupported: schema {got}, written by torch {written or 'unknown'}; supported {READ_MAJOR}.0–{READ_MAJOR}.{SCHEMA_VERSION[1]}"
            f" (and {UPGRADE_FROM_MAJOR}.x via upgrade)",
            member=member, path="schema_version",
        )
    rels = [r for r, v in releases().items() if v["schema_version"][0] == UPGRADE_FROM_MAJOR]
    head = (
        f"unsupported: schema {version[0]}.{version[1]}, written by torch {written or '/'.join(rels) or '2.5'}; "
        f"supported {READ_MAJOR}.0–{READ_MAJOR}.{SCHEMA_VERSION[1]}"
    )
    known = {tuple(releases()[r]["schema_version"]): r for r in rels}
    newest = max(known) if known else (UPGRADE_FROM_MAJOR, 0)
    if version > newest:
        raise SchemaVersionError(f"{head}: no upgrade from {version[0]}.{version[1]} (newest known 7.x is {newest[0]}.{newest[1]})",
                                 member=member, path="schema_version")
    from ...schema.snapshot import read_snapshot

    src = read_snapshot(_TORCH_DIR / releases()[known[newest]]["snapshot"])["types"]
    dst = _current_types()
    try:
        out = _Upgrade(src, dst).value(program_json, ("name", "ExportedProgram"), ("name", "ExportedProgram"), "")
    except _NotMechanical as e:
        raise SchemaVersionError(f"{head}: {e.why} (no mechanical upgrade)", member=member, path=e.path or "<root>") from None
    except RecursionError:  # the reader bounds nesting first; this guards callers with their own JSON
        raise SchemaVersionError(f"{head}: nested too deeply to upgrade", member=member, path="<root>") from None
    out["schema_version"] = {"major": UPGRADED_VERSION[0], "minor": UPGRADED_VERSION[1]}
    return out


def _clip(value: Any, limit: int = 40) -> str:
    """A value from the file for a message: at most ``limit`` characters."""
    text = value if isinstance(value, str) else repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
