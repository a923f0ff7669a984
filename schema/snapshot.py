"""The canonical schema snapshot format: build one from the definitions, render, parse, read.

Why a snapshot: schema changes must be reviewed as data. The snapshot is the schema
flattened to names, kinds, torch-style type strings (``List[int]``, ``Optional[X]``,
``Dict[str, X]``), defaults (as ``str(value)``, like torch's ``schema.yaml``) and enum
numbers — the same shape as torch's yaml, so pt2x's snapshot and the imported torch
snapshots (``schema/snapshots/torch/``) diff against each other field by field.

Library code (the compatibility checks read snapshots at run time); the script that writes
``schema/snapshots/pt2x.json`` is ``scripts/gen_schema_snapshot.py``. The checksum line covers
the version and types, so hand edits to a snapshot are detected.

Also here, as data: the torch releases' snapshots (``snapshots/torch/``, imported by
``scripts/import_torch_schemas.py``) with ``torch_releases()`` (release -> schema version and
snapshot file) and ``torch_snapshot(release)``; ``pt2x_types()``, this schema flattened
once; and ``parse_type_string``, the inverse of ``type_string``.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import typing
from functools import lru_cache
from pathlib import Path
from typing import Any

from .kinds import UNKNOWN_FIELDS, SchemaEnum, is_struct, is_union, type_hints

__all__ = [
    "FORMAT",
    "SNAPSHOT_DIR",
    "PT2X_SNAPSHOT",
    "type_string",
    "build_snapshot",
    "make_snapshot",
    "render",
    "parse",
    "read_snapshot",
    "checksum",
    "parse_type_string",
    "pt2x_types",
    "TORCH_SNAPSHOT_DIR",
    "torch_releases",
    "torch_snapshot",
]

FORMAT = "pt2x-schema-snapshot/1"
SNAPSHOT_DIR = Path(__file__).resolve().parent / "snapshots"  # package data
PT2X_SNAPSHOT = SNAPSHOT_DIR / "pt2x.json"
TORCH_SNAPSHOT_DIR = SNAPSHOT_DIR / "torch"
_PRIMITIVES = {int: "int", float: "float", str: "str", bool: "bool"}


def type_string(tp: Any) -> str:
    """Torch's spelling of an annotation: ``Optional[List[str]]``, ``Dict[str, SymInt]``."""
    if tp in _PRIMITIVES:
        return _PRIMITIVES[tp]
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin is typing.Union:
        inner = [a for a in args if a is not type(None)]
        if len(inner) != 1 or len(args) != 2:
            raise TypeError(f"only Optional[X] unions are schema types: {tp!r}")
        return f"Optional[{type_string(inner[0])}]"
    if origin is list:
        return f"List[{type_string(args[0])}]"
    if origin is dict:
        return f"Dict[{type_string(args[0])}, {type_string(args[1])}]"
    if origin is tuple and args == ():
        return "Tuple[()]"
    if isinstance(tp, type) and (is_struct(tp) or is_union(tp) or issubclass(tp, SchemaEnum)):
        return tp.__name__
    raise TypeError(f"not a schema type: {tp!r}")


@lru_cache(maxsize=None)
def parse_type_string(s: str) -> tuple:
    """A snapshot type string as a tree: ``Optional[List[int]]`` -> ("optional", ("list", ("name", "int")))."""
    s = s.strip()
    for head, tag in (("Optional[", "optional"), ("List[", "list")):
        if s.startswith(head) and s.endswith("]"):
            return (tag, parse_type_string(s[len(head):-1]))
    if s.startswith("Dict[") and s.endswith("]"):
        key, _, val = s[5:-1].partition(",")
        if key.strip() != "str":
            raise ValueError(f"schema dict keys must be str: {s}")
        return ("dict", parse_type_string(val))
    if s == "Tuple[()]":
        return ("unit",)
    return ("name", s)


def _type_entry(tp: type) -> dict:
    if isinstance(tp, type) and issubclass(tp, SchemaEnum):
        return {"kind": "enum", "fields": {m.name: int(m.value) for m in tp}}
    hints = type_hints(tp)
    if is_union(tp):
        return {"kind": "union", "fields": {n: {"type": type_string(t)} for n, t in hints.items()}}
    if not is_struct(tp):
        raise TypeError(f"{tp!r} is not a schema struct, union or enum")
    out: dict[str, dict] = {}
    for f in dataclasses.fields(tp):
        if f.name == UNKNOWN_FIELDS:
            continue
        entry = {"type": type_string(hints[f.name])}
        if f.default is not dataclasses.MISSING:
            entry["default"] = str(f.default)
        elif f.default_factory is not dataclasses.MISSING:
            entry["default"] = str(f.default_factory())
        out[f.name] = entry
    return {"kind": "struct", "fields": out}


def checksum(schema_version: list[int], types: dict) -> str:
    """sha256 of the compact JSON of version + types (field order is significant)."""
    blob = json.dumps([list(schema_version), types], separators=(",", ":"), ensure_ascii=True)
    return "sha256:" + hashlib.sha256(blob.encode()).hexdigest()


def make_snapshot(types: dict, schema_version, *, source: str, treespec_version: int | None = None) -> dict:
    """A snapshot dict from already-flattened ``types``; type names sorted (as torch's yaml)."""
    ordered = {name: types[name] for name in sorted(types)}
    version = [int(schema_version[0]), int(schema_version[1])]
    snap = {
        "format": FORMAT,
        "source": source,
        "schema_version": version,
        "checksum": checksum(version, ordered),
        "types": ordered,
    }
    if treespec_version is not None:
        snap["treespec_version"] = int(treespec_version)
    return snap


def build_snapshot(schema_types: dict[str, type] | None = None, schema_version=None, *, source: str = "pt2x") -> dict:
    """Flatten schema definitions (default: pt2x's) into a snapshot dict."""
    if schema_types is None:
        from . import SCHEMA_TYPES as schema_types
    if schema_version is None:
        from .version import SCHEMA_VERSION as schema_version
    from .version import TREESPEC_VERSION

    types = {name: _type_entry(tp) for name, tp in schema_types.items()}
    return make_snapshot(types, schema_version, source=source, treespec_version=TREESPEC_VERSION)


def render(snapshot: dict) -> str:
    """Canonical text: one line per header key and per field, so a schema edit is a one-line diff."""
    dump = lambda v: json.dumps(v, ensure_ascii=True)  # noqa: E731
    lines = ["{"]
    for k, v in snapshot.items():
        if k != "types":
            lines.append(f"  {dump(k)}: {dump(v)},")
    lines.append('  "types": {')
    names = list(snapshot["types"])
    for i, name in enumerate(names):
        entry = snapshot["types"][name]
        lines.append(f"    {dump(name)}: {{")
        lines.append(f'      "kind": {dump(entry["kind"])},')
        lines.append('      "fields": {')
        fnames = list(entry["fields"])
        for j, fname in enumerate(fnames):
            sep = "," if j < len(fnames) - 1 else ""
            lines.append(f"        {dump(fname)}: {dump(entry['fields'][fname])}{sep}")
        lines.append("      }")
        lines.append("    }" + ("," if i < len(names) - 1 else ""))
    lines.append("  }")
    lines.append("}")
    return "\n".join(lines) + "\n"


def parse(text: str | bytes, *, origin: str = "<snapshot>", verify: bool = True) -> dict:
    """Parse snapshot text; refuse a missing field, a wrong format or a bad checksum."""
    try:
        snap = json.loads(text)
    except ValueError as e:
        raise ValueError(f"{origin}: not a schema snapshot (invalid JSON: {e})") from None
    if not isinstance(snap, dict) or snap.get("format") != FORMAT:
        raise ValueError(f"{origin}: not a schema snapshot (format is not {FORMAT!r})")
    for key in ("schema_version", "types", "checksum"):
        if key not in snap:
            raise ValueError(f"{origin}: snapshot lacks {key!r}")
    if verify:
        want = checksum(snap["schema_version"], snap["types"])
        if snap["checksum"] != want:
            raise ValueError(f"{origin}: checksum mismatch (edited by hand? regenerate it): {snap['checksum']} != {want}")
    return snap


def read_snapshot(path: str | Path) -> dict:
    path = Path(path)
    return parse(path.read_bytes(), origin=str(path))


@lru_cache(maxsize=None)
def pt2x_types() -> dict:
    """``build_snapshot()["types"]``, built once: pt2x's own (newest) schema. Shared: do not modify."""
    return build_snapshot()["types"]


@lru_cache(maxsize=None)
def torch_releases() -> dict[str, dict]:
    """torch minor release (``"2.10"``) -> ``{"schema_version": [8, 15], "snapshot": ..., "patches": ...}``."""
    return json.loads((TORCH_SNAPSHOT_DIR / "releases.json").read_text())["releases"]


def torch_snapshot(release: str) -> dict:
    """The snapshot of torch ``release``'s export schema (a key of ``torch_releases()``)."""
    return read_snapshot(TORCH_SNAPSHOT_DIR / torch_releases()[release]["snapshot"])
