"""The upgrader from older schema majors: a schema 7.x (torch 2.5) program JSON lifted to 8.x.

Why: torch 2.5 wrote schema 7.3, and its files are still around; the rest of pt2x reads
only 8.x. The loader passes every program JSON through ``upgrade_to_current`` before
decoding: 8.x comes back unchanged; 7.x is rewritten field by field, walking torch 2.5's
schema snapshot and pt2x's side by side, and refused (``SchemaVersionError`` naming the
member and field path) where a change is not mechanical. Release facts come from the
torch snapshots in ``schema/snapshots/torch/``. No torch import.

* ``declared_version`` -- the ``schema_version`` a program JSON declares, or None.
* ``upgrade_to_current`` -- 7.x -> 8.x (8.x unchanged; other majors refused).
"""

from __future__ import annotations

from typing import Any

from ...schema.snapshot import parse_type_string, pt2x_types, torch_releases, torch_snapshot
from ...schema.version import READ_MAJOR, SCHEMA_VERSION
from ..errors import SchemaVersionError

__all__ = ["declared_version", "upgrade_to_current", "UPGRADE_FROM_MAJOR", "UPGRADED_VERSION"]


def declared_version(program_json: Any) -> tuple[int, int] | None:
    """``(major, minor)`` of a program JSON's ``schema_version``; None when absent or malformed."""
    sv = program_json.get("schema_version") if isinstance(program_json, dict) else None
    if isinstance(sv, dict) and type(sv.get("major")) is int and type(sv.get("minor")) is int:
        return sv["major"], sv["minor"]
    return None


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
            st, dt = parse_type_string(se["fields"][key]["type"]), parse_type_string(de["fields"][key]["type"])
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
    version = declared_version(program_json)
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
    rels = [r for r, v in torch_releases().items() if v["schema_version"][0] == UPGRADE_FROM_MAJOR]
    head = (
        f"unsupported: schema {version[0]}.{version[1]}, written by torch {written or '/'.join(rels) or '2.5'}; "
        f"supported {READ_MAJOR}.0–{READ_MAJOR}.{SCHEMA_VERSION[1]}"
    )
    known = {tuple(torch_releases()[r]["schema_version"]): r for r in rels}
    newest = max(known) if known else (UPGRADE_FROM_MAJOR, 0)
    if version > newest:
        raise SchemaVersionError(f"{head}: no upgrade from {version[0]}.{version[1]} (newest known 7.x is {newest[0]}.{newest[1]})",
                                 member=member, path="schema_version")
    src = torch_snapshot(known[newest])["types"]
    dst = pt2x_types()
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
