"""Diff two schema snapshots and classify every change by who can still read what.

Why: a schema edit is safe or not depending on the readers in the field. Each change
says whether it is *backward-compatible* (a new reader reads old data) and
*forward-compatible* (an old reader reads new data), and which version bump it needs.
The rules, and where they differ from torch's ``schema_check.py``, ``buf breaking``,
``flatc --conform`` and Avro, are in ``docs/schema-compat.md``.

The reader model behind the rules: a reader ignores (pt2x: keeps) struct fields it does
not know, fills missing fields that have a default, and fails on a missing required
field, an unknown union member or an unknown enum value. Torch 2.9+ and pt2x read so;
torch <= 2.8 also fails on unknown struct fields (``serde/compat/`` handles that for
artifacts).

Bump rule: *major* when a new reader may fail on old data (not backward-compatible) or
every old reader fails on every new file; *minor* for any other wire change (old
readers still read new files that don't use the new thing); *none* when the wire
format is unchanged (reordered fields, a renamed enum name). Pure rules over two
snapshot dicts: where a snapshot comes from (a git ref, a file, a torch release) is
``tools/snapshot_sources.py``. No torch import, no I/O.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "Change",
    "DiffResult",
    "diff_snapshots",
    "required_bump",
    "check_version",
    "BUMPS",
]

BUMPS = ("none", "minor", "major")
_ORDER = {b: i for i, b in enumerate(BUMPS)}

# kind -> (backward, forward, bump, why). One row per change kind; the doc's table mirrors it.
RULES: dict[str, tuple[bool, bool, str, str]] = {
    "type-added": (True, True, "minor", "nothing refers to it until a field or member does (classified on its own)"),
    "type-removed": (False, True, "major", "old data may hold values of it; a new reader cannot decode them"),
    "type-kind-changed": (False, False, "major", "struct/union/enum are encoded differently"),
    "field-added-with-default": (True, True, "minor", "old data lacks it: the default fills in; old readers ignore the key"),
    "field-added-required": (False, True, "major", "old data lacks it and there is no default"),
    "field-removed-with-default": (True, True, "minor", "new readers ignore the stale key; old readers fill the default"),
    "field-removed-required": (True, False, "major", "old readers require it and new data never has it"),
    "field-renamed-required": (False, False, "major", "a required field under a new name: neither side finds its key"),
    "field-retyped": (False, False, "major", "the same key now holds another type"),
    "field-made-optional": (True, False, "minor", "X -> Optional[X]: old readers fail only on a null"),
    "field-default-added": (True, True, "minor", "writers still write the field; old readers still find it"),
    "field-default-removed": (False, True, "major", "old data that omitted the field no longer decodes"),
    "field-default-changed": (False, False, "major", "an omitted field now reads as another value"),
    "fields-reordered": (True, True, "none", "JSON objects are keyed by name"),
    "union-member-added": (True, False, "minor", "old readers fail (KeyError) on files that use it"),
    "union-member-removed": (False, True, "major", "new readers fail on old data that uses it"),
    "union-member-retyped": (False, False, "major", "the same key now holds another type"),
    "enum-value-added": (True, False, "minor", "old readers fail on files that use the new number"),
    "enum-value-removed": (False, True, "major", "new readers fail on old data that uses the number"),
    "enum-value-renumbered": (False, False, "major", "the number on the wire changes meaning"),
    "enum-value-renamed": (True, True, "none", "only the number is on the wire"),
}
_MEMBER_KINDS = {"struct": "field", "union": "union-member", "enum": "enum-value"}


@dataclass(frozen=True)
class Change:
    """One schema change, with its classification (see ``RULES``)."""

    kind: str
    type_name: str
    name: str | None = None  # the field, member or enum value
    old: Any = None
    new: Any = None
    detail: str = ""

    @property
    def backward(self) -> bool:
        return RULES[self.kind][0]

    @property
    def forward(self) -> bool:
        return RULES[self.kind][1]

    @property
    def bump(self) -> str:
        return RULES[self.kind][2]

    @property
    def compat(self) -> str:
        return {(True, True): "both", (True, False): "backward", (False, True): "forward"}.get(
            (self.backward, self.forward), "neither"
        )

    @property
    def where(self) -> str:
        return f"{self.type_name}.{self.name}" if self.name else self.type_name

    def message(self) -> str:
        what = self.kind.replace("-", " ")
        parts = [f"{self.where}: {what}"]
        if self.detail:
            parts.append(f"({self.detail})")
        elif self.old is not None or self.new is not None:
            parts.append(f"({_show(self.old)} -> {_show(self.new)})")
        return " ".join(parts)

    def as_dict(self) -> dict:
        return {
            "kind": self.kind,
            "type": self.type_name,
            "name": self.name,
            "old": self.old,
            "new": self.new,
            "backward_compatible": self.backward,
            "forward_compatible": self.forward,
            "compat": self.compat,
            "bump": self.bump,
            "why": RULES[self.kind][3],
            "message": self.message(),
        }


def _show(v: Any) -> str:
    if v is None:
        return "-"
    return v if isinstance(v, str) else json.dumps(v)


@dataclass
class DiffResult:
    """All changes from ``old`` to ``new``, the bump they need and whether ``new``'s version carries it."""

    old_version: tuple[int, int]
    new_version: tuple[int, int]
    changes: list[Change] = field(default_factory=list)
    old_label: str = "old"
    new_label: str = "new"

    @property
    def bump(self) -> str:
        return required_bump(self.changes)

    @property
    def carried(self) -> bool:
        return check_version(self.old_version, self.new_version, self.bump)[0]

    @property
    def verdict(self) -> str:
        return check_version(self.old_version, self.new_version, self.bump)[1]

    @property
    def compat(self) -> str:
        back = all(c.backward for c in self.changes)
        fwd = all(c.forward for c in self.changes)
        return {(True, True): "both", (True, False): "backward", (False, True): "forward"}.get((back, fwd), "neither")

    def as_dict(self) -> dict:
        return {
            "old": {"label": self.old_label, "schema_version": list(self.old_version)},
            "new": {"label": self.new_label, "schema_version": list(self.new_version)},
            "compat": self.compat,
            "backward_compatible": all(c.backward for c in self.changes),
            "forward_compatible": all(c.forward for c in self.changes),
            "bump": self.bump,
            "ok": self.carried,
            "verdict": self.verdict,
            "changes": [c.as_dict() for c in self.changes],
        }


def required_bump(changes) -> str:
    return max((c.bump for c in changes), key=_ORDER.__getitem__, default="none")


def check_version(old: tuple[int, int], new: tuple[int, int], bump: str) -> tuple[bool, str]:
    """(ok, sentence): does going from version ``old`` to ``new`` carry ``bump``?"""
    old, new = tuple(old), tuple(new)
    o, n = f"{old[0]}.{old[1]}", f"{new[0]}.{new[1]}"
    if new < old:
        return False, f"version goes backwards: {o} -> {n}"
    if bump == "major" and new[0] <= old[0]:
        return False, f"needs a major bump: {o} -> {old[0] + 1}.x, but the version is {n}"
    if bump == "minor" and new[:2] == old[:2]:
        return False, f"needs a minor bump: {o} -> {old[0]}.{old[1] + 1} or later, but the version is {n}"
    if bump == "none":
        return True, f"no wire change; version {n}" + ("" if new == old else f" (was {o})")
    return True, f"{bump} bump {o} -> {n} carried"


# --------------------------------------------------------------------------- diffing


def diff_snapshots(old: dict, new: dict, *, old_label: str = "old", new_label: str = "new") -> DiffResult:
    """Classify every change from snapshot ``old`` to snapshot ``new``."""
    ot, nt = old["types"], new["types"]
    changes: list[Change] = []
    for name in sorted(ot.keys() | nt.keys()):
        if name not in nt:
            changes.append(Change("type-removed", name, old=ot[name]["kind"]))
        elif name not in ot:
            changes.append(Change("type-added", name, new=nt[name]["kind"]))
        elif ot[name]["kind"] != nt[name]["kind"]:
            changes.append(Change("type-kind-changed", name, old=ot[name]["kind"], new=nt[name]["kind"]))
        elif ot[name]["kind"] == "enum":
            changes.extend(_diff_enum(name, ot[name]["fields"], nt[name]["fields"]))
        else:
            changes.extend(_diff_fields(name, ot[name]["kind"], ot[name]["fields"], nt[name]["fields"]))
    return DiffResult(
        tuple(old["schema_version"]), tuple(new["schema_version"]), changes, old_label=old_label, new_label=new_label
    )


def _diff_enum(name: str, old: dict[str, int], new: dict[str, int]) -> list[Change]:
    out = []
    removed = {k: v for k, v in old.items() if k not in new}
    added = {k: v for k, v in new.items() if k not in old}
    renamed_from = {v: k for k, v in removed.items()}
    for k, v in added.items():
        if v in renamed_from:
            src = renamed_from.pop(v)
            out.append(Change("enum-value-renamed", name, k, old=src, new=k, detail=f"{src} -> {k}, both {v}"))
            removed.pop(src)
        else:
            out.append(Change("enum-value-added", name, k, new=v))
    out.extend(Change("enum-value-removed", name, k, old=v) for k, v in removed.items())
    out.extend(
        Change("enum-value-renumbered", name, k, old=old[k], new=new[k])
        for k in old
        if k in new and old[k] != new[k]
    )
    if not out and list(old) != list(new):
        out.append(Change("fields-reordered", name, detail="enum names listed in another order"))
    return out


def _diff_fields(name: str, kind: str, old: dict, new: dict) -> list[Change]:
    out: list[Change] = []
    prefix = _MEMBER_KINDS[kind]
    removed = [k for k in old if k not in new]
    added = [k for k in new if k not in old]
    renames = _pair_renames(old, new, removed, added)
    for src, dst in renames:
        out.append(_renamed(name, kind, src, dst, old[src], new[dst]))
        removed.remove(src)
        added.remove(dst)
    for k in added:
        if kind == "union":
            out.append(Change("union-member-added", name, k, new=new[k]["type"]))
        else:
            has_default = "default" in new[k]
            out.append(
                Change(
                    "field-added-with-default" if has_default else "field-added-required",
                    name,
                    k,
                    new=new[k]["type"] + (f" = {new[k]['default']}" if has_default else ""),
                )
            )
    for k in removed:
        if kind == "union":
            out.append(Change("union-member-removed", name, k, old=old[k]["type"]))
        else:
            has_default = "default" in old[k]
            out.append(
                Change("field-removed-with-default" if has_default else "field-removed-required", name, k, old=old[k]["type"])
            )
    for k in (k for k in old if k in new):
        o, n = old[k], new[k]
        if o["type"] != n["type"]:
            if kind == "union":
                out.append(Change("union-member-retyped", name, k, old=o["type"], new=n["type"]))
            elif n["type"] == f"Optional[{o['type']}]":
                out.append(Change("field-made-optional", name, k, old=o["type"], new=n["type"]))
            else:
                out.append(Change("field-retyped", name, k, old=o["type"], new=n["type"]))
        if kind == "struct":
            od, nd = o.get("default"), n.get("default")
            if od is None and nd is not None:
                out.append(Change("field-default-added", name, k, new=nd))
            elif od is not None and nd is None:
                out.append(Change("field-default-removed", name, k, old=od))
            elif od != nd:
                out.append(Change("field-default-changed", name, k, old=od, new=nd))
    common_old = [k for k in old if k in new]
    common_new = [k for k in new if k in old]
    if common_old != common_new:
        out.append(Change("fields-reordered", name, old=common_old, new=common_new, detail="declaration order differs"))
    return out


def _pair_renames(old: dict, new: dict, removed: list[str], added: list[str]) -> list[tuple[str, str]]:
    """A removed and an added field of the same type at the same position read as a rename."""
    pos_old = {k: i for i, k in enumerate(old)}
    pos_new = {k: i for i, k in enumerate(new)}
    pairs = []
    taken: set[str] = set()
    for src in removed:
        for dst in added:
            if dst in taken:
                continue
            if old[src]["type"] == new[dst]["type"] and pos_old[src] == pos_new[dst]:
                pairs.append((src, dst))
                taken.add(dst)
                break
    return pairs


def _renamed(type_name: str, kind: str, src: str, dst: str, o: dict, n: dict) -> Change:
    """A rename is a removal plus an addition; it takes the stricter classification of the two."""
    detail = f"renamed {src!r} -> {dst!r} (= removed + added)"
    if kind == "union":
        rule = "union-member-removed"
    elif "default" in o:
        rule = "field-removed-with-default" if "default" in n else "field-added-required"
    else:
        rule = "field-removed-required" if "default" in n else "field-renamed-required"
    return Change(rule, type_name, src, old=src, new=dst, detail=detail)
