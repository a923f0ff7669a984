"""One JSON document against one torch release's schema: can its reader read it, and a copy it can.

Why: ``torch.export.load`` in release R accepts any file of R's schema *major* but
fails (KeyError, TypeError, SerializeError) on content R's schema does not know.
Whether a document is readable is therefore decided by its content, not its minor
version. This module walks a model program or payload config (plain JSON) against the
release's snapshot (``serde.compat.releases``) in one of two modes. No torch import.

* ``check_program_json`` -- findings that block (or warn about) reading the document as is.
* ``downgrade`` -- the document rewritten for the release, with its findings (errors block).
  Besides dropping fields, it respells node forms another release parses differently when
  the respelling is exact, else blocks (``serde.compat.node_forms``). Across the one major
  break, an 8.x program is written down to 7.3 (torch 2.5) with ``serde.compat.schema7``'s
  respellings, and a 7.x program is upgraded (``codec.upgrade``) before an 8.x target's walk.

Archives (layouts, every document, what to write) are the planner's: ``serde.compat.plan``.

Facts about torch readers used here (from each release's ``torch/_export/serde/serialize.py``):
``_dict_to_dataclass`` in torch <= 2.8 builds structs with ``cls(**data)``, so an unknown
key raises TypeError; from 2.9 on it skips keys the dataclass does not declare. Every
release raises KeyError on an unknown union member (``type_hints[key]``) and fails on an
enum number it has no mapping for. Only the schema major is compared on load.
"""

from __future__ import annotations

import copy
from typing import Any

from ...schema.snapshot import parse_type_string, pt2x_types
from ...schema.version import READ_MAJOR
from ..codec.upgrade import UPGRADE_FROM_MAJOR, declared_version, upgrade_to_current
from ..errors import SchemaVersionError
from ..findings import Finding
from .grad_regions import inline_grad_regions
from .node_forms import flag_hop_outputs, has_hop_flag, respell_hop_outputs, unrunnable_nodes
from .releases import FLOAT_STRINGS_SINCE, LENIENT_SINCE, target_snapshot
from .schema7 import MAJOR as SCHEMA7_MAJOR, RESPELLED as SCHEMA7_RESPELLED, NoForm, omitted

__all__ = ["check_program_json", "downgrade"]

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


# ------------------------------------------------------------------- defaults


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
        self.respelled = SCHEMA7_RESPELLED if self.version[0] == SCHEMA7_MAJOR else {}
        self.findings: list[Finding] = []
        self._counts: dict[tuple[str, str], list] = {}
        self._source_types = pt2x_types()

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
        sub = f"{path}.{key}".lstrip(".")
        if (name, key) in self.respelled:
            return {key: self._respell(name, key, x, sub)}
        return {key: self.value(x, parse_type_string(members[key]["type"]), sub)}

    def _struct(self, v: Any, name: str, fields: dict, path: str) -> Any:
        if not isinstance(v, dict):
            return self._mismatch(v, f"{name} (an object)", path)
        out = {}
        for key, x in v.items():
            sub = f"{path}.{key}".lstrip(".")
            if (name, key) in self.respelled:
                out[key] = self._respell(name, key, x, sub)
            elif key in fields and self.rewrite and self.respelled and omitted(fields[key], x):
                continue  # as torch 2.5's writer does
            elif key in fields:
                out[key] = self.value(x, parse_type_string(fields[key]["type"]), sub)
            elif self._unknown_field(name, key, x, sub):
                out[key] = x
        for key, spec in fields.items():
            if key not in v and "default" not in spec:
                self._report(
                    "error", "target-missing-field", f"{name}.{key}", path or "<root>",
                    f"{name}.{key} is required by torch {self.label} but absent",
                )
        return out

    def _respell(self, name: str, key: str, x: Any, path: str) -> Any:
        """A field schema 7.3 spells differently (``serde.compat.schema7``): its 7.3 form when
        rewriting, else a blocker unless it already has that form."""
        row = self.respelled[(name, key)]
        try:
            new = row.to_7(x)
        except NoForm as e:
            self._report("error", "target-no-schema7-form", row.where, path,
                         f"{row.where} = {e} (torch {self.label} reads {row.schema7})")
            return x
        if self.rewrite:
            return new
        if type(new) is not type(x) or new != x:
            self._report("error", "target-schema7-form", row.where, path,
                         f"{row.where} is written in schema 8's form ({row.schema8}); torch {self.label} reads "
                         f"{row.schema7} (convert --to pt2 respells it)")
        return x

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


# -------------------------------------------------------------------- checking


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


def check_program_json(program_json: Any, target, *, root: str = "ExportedProgram", member: str | None = None) -> list[Finding]:
    """Findings for reading one JSON document (a model, or a PayloadConfig) with ``target``'s reader."""
    version, label, snap = target_snapshot(target)
    findings = []
    if root == "ExportedProgram":
        bad = _major_finding(version, declared_version(program_json), label, member)
        if bad:
            return _across_major_findings(bad, program_json, version, member)
        findings.extend(unrunnable_nodes(program_json, version, label, member))
        if has_hop_flag(snap):
            findings.extend(flag_hop_outputs(program_json, label, member, rewrite=False))
    walk = _Walk(snap, version, label, member=member, rewrite=False)
    walk.value(program_json, ("name", root), "")
    findings.extend(walk.finish())
    return findings


def _across_major_findings(bad: Finding, program_json: Any, version: tuple[int, int], member: str | None) -> list[Finding]:
    """For a program of the other major: the major finding, saying whether convert can write it
    across the major, then whatever would still block once it does."""
    if not isinstance(program_json, dict) or _across_major(program_json, version, "", member)[1] is not None:
        return [bad]
    said = Finding(bad.severity, bad.code, bad.message + " (pt2x convert --to pt2 --target-schema writes it across the major)",
                   bad.member, bad.path)
    return [said, *(f for f in downgrade(program_json, version, member=member)[1] if f.severity == "error")]


# ----------------------------------------------------------------- downgrading


def downgrade(program_json: dict, target, *, root: str = "ExportedProgram", member: str | None = None) -> tuple[dict, list[Finding]]:
    """``program_json`` (plain dicts, as from ``json_codec.encode`` or ``json.loads``) rewritten for ``target``.

    Drops fields the target does not know when they hold their default, or when losing
    them does not change the program (with a warning); non-finite floats take the
    target's spelling; ``schema_version`` becomes the target's. Across the major break, an
    8.x program is written down to 7.3 (``serde.compat.schema7``'s respellings) and a 7.x one is
    first upgraded to 8.x (``codec.upgrade``). Returns the new dict and the findings; any
    ``error`` finding is a blocker and the dict must not be written. The input is not modified.
    """
    version, label, snap = target_snapshot(target)
    if root == "ExportedProgram":
        lifted, bad = _across_major(program_json, version, label, member)
        if bad:
            return copy.deepcopy(program_json), [bad]
        program_json = lifted
    findings: list[Finding] = []
    if root == "ExportedProgram":
        program_json = copy.deepcopy(program_json)
        findings.extend(inline_grad_regions(program_json, version, label, member))
        findings.extend(unrunnable_nodes(program_json, version, label, member))
        if has_hop_flag(snap):
            findings.extend(flag_hop_outputs(program_json, label, member, rewrite=True))
        else:
            findings.extend(respell_hop_outputs(program_json, label, member))
    walk = _Walk(snap, version, label, member=member, rewrite=True)
    out = walk.value(program_json, ("name", root), "")
    findings.extend(walk.finish())
    if root == "ExportedProgram" and isinstance(out, dict):
        out["schema_version"] = {"major": version[0], "minor": version[1]}
    return out, findings


def _across_major(program_json: dict, version: tuple[int, int], label: str, member: str | None) -> tuple[dict, Finding | None]:
    """The program in a major ``downgrade`` can write for ``version`` from: as it is when the majors
    match or it is 8.x for a 7.x target (the walk respells), upgraded when it is 7.x for an 8.x
    target; else a blocker."""
    file_version = declared_version(program_json)
    if file_version is not None and file_version[0] == UPGRADE_FROM_MAJOR and version[0] == READ_MAJOR:
        try:
            return upgrade_to_current(program_json, member=member), None
        except SchemaVersionError as e:
            return program_json, Finding("error", "target-schema-major", e.reason, member, e.path)
    if file_version is not None and file_version[0] == READ_MAJOR and version[0] == SCHEMA7_MAJOR:
        return program_json, None
    return program_json, _major_finding(version, file_version, label, member)
