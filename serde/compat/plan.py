"""The one planner for a target torch release: can it read this archive, and what to write so it can.

Why one: ``pt2x validate --target``, ``pt2x convert --to pt2 --target-schema`` and
``save(ep, f, target_schema=)`` must agree on what a release can read. All three start
from a loaded archive (``save`` loads what it would have written) and go through the
same two steps here: the archive's layout against the layouts the release reads, then
every JSON document (model programs, payload configs) against the release's schema
(``serde.compat.target``). Torch-free; nothing here prints.

* ``check_target(archive, target)`` -- findings for reading the archive *as it is*.
* ``plan_for_target(archive, target)`` -- a ``TargetPlan``: the members to write (JSON
  documents rewritten with ``downgrade``, every other member byte for byte, or the whole
  archive in the older layout the release reads: ``archive.legacy_layout``) and the
  findings; any error is a blocker and then nothing may be written. Content torch would
  execute (``serde.code_bearing``: a pickle outside torch's ``weights_only`` allow-list, a
  shape expression outside pt2x's grammar, compiled code: an AOTInductor package or native code
  beside a program) is always a blocker: pt2x never passes it on.
  ``drop_sample_inputs=True`` writes the sample inputs of a PT2-archive write (torch 2.9+) empty,
  as ``torch.export.save`` does for a program without example inputs (torch reads that as none);
  the older layouts are written with the source's sample inputs, so there it changes nothing.
* ``writable_for_target(archive, target)`` -- whether the plan has no blocker, without its
  members (what ``validate --target`` and ``pt2x scan`` report as ``writable``).
* ``write_for_target(src, dst, target)`` -- load, plan, write; ``TargetNotWritable`` (with
  the plan's findings) when blocked, in which case ``dst`` is not touched.

A rewrite fixes only what a reader trips on and can be dropped or respelled (defaulted
fields, non-finite float spelling, higher-order-op outputs), so whatever reads as is can
also be written. For torch 2.8 (8.8) a raw-weights archive becomes the pickled-weights
layout, and for torch 2.5-2.7 (7.3, 8.2-8.7) the flat zip (``target_layout``), whose ``version``
member is the target's schema; what those cannot hold (several models in a flat zip, pickled
payloads, dtypes without a storage class) blocks.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Iterator

from ..errors import Pt2UsageError
from ..code_bearing import SAMPLE_INPUTS, code_findings, native_findings
from ..findings import Finding
from ..archive.legacy_layout import FLAT, PICKLED, legacy_findings, legacy_members
from .releases import PT2_ARCHIVE_SINCE, RAW_WEIGHTS_SINCE, target_snapshot
from .target import check_program_json, downgrade

__all__ = [
    "TargetPlan",
    "TargetNotWritable",
    "check_target",
    "plan_for_target",
    "writable_for_target",
    "write_for_target",
    "layout_findings",
    "target_layout",
    "archive_documents",
]

Body = Any  # bytes, or a memoryview into the source archive's map
FLAT_VERSION = "version"
"""The flat zip's member holding the schema version (``"8.2"``, ``"7.3"``): rewritten with the target's."""


@dataclass(frozen=True)
class TargetPlan:
    """What writing an archive for schema ``version`` (torch ``label``) takes."""

    version: tuple[int, int]
    label: str
    findings: list[Finding]
    members: list[tuple[str, Body]]  # in the source's order; empty when blocked

    @property
    def blockers(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == "error"]

    @property
    def writable(self) -> bool:
        return not self.blockers


class TargetNotWritable(Pt2UsageError):
    """The archive cannot be made readable by the target; ``plan.findings`` says why (errors block)."""

    def __init__(self, plan: TargetPlan):
        self.plan = plan
        self.findings = plan.findings
        v = plan.version
        super().__init__(
            f"cannot be written as schema {v[0]}.{v[1]} (torch {plan.label}): "
            + "; ".join(str(f) for f in plan.blockers)
        )


# ------------------------------------------------------------------- the two steps


def target_layout(archive, version: tuple[int, int]) -> str | None:
    """The older layout to write for schema ``version``, or None when the archive's own is read as is."""
    if archive.layout == FLAT:
        return None
    if version < PT2_ARCHIVE_SINCE:
        return FLAT
    raw = any(m.weights_config is not None or m.constants_config is not None for m in archive.models.values())
    if raw and version < RAW_WEIGHTS_SINCE:
        return PICKLED
    return None


def layout_findings(archive, version: tuple[int, int], label: str) -> list[Finding]:
    """Blockers for reading the archive *as it is*: which layouts release ``label`` (schema ``version``) reads."""
    layout = target_layout(archive, version)
    if layout == FLAT:
        return [Finding("error", "target-archive-layout",
                        f"PT2 archive layout (models/<name>.json); torch {label} reads only the flat zip "
                        "(serialized_exported_program.json): pt2x convert --to pt2 --target-schema writes it")]
    if layout == PICKLED:
        return [Finding("error", "target-archive-layout",
                        f"weights/constants stored as raw files with *_config.json; torch {label} reads only "
                        "pickled data/weights/<model>.pt: pt2x convert --to pt2 --target-schema writes it")]
    return []


def archive_documents(archive) -> Iterator[tuple[str, str, Any]]:
    """(root type, member, parsed JSON) for every model program and payload config, as stored."""
    from ..codec.json_codec import parse_json

    zr = archive.zip
    prefix = f"{archive.root}/" if archive.root else ""
    for name, model in archive.models.items():
        yield "ExportedProgram", model.json_member, parse_json(zr.read(model.json_member), member=model.json_member)
        for kind in ("weights", "constants"):
            member = f"{prefix}data/{kind}/{name}_{kind}_config.json"
            if member in zr:
                yield "PayloadConfig", member, parse_json(zr.read(member), member=member)


def _target_documents(archive, snap: dict) -> Iterator[tuple[str, str, Any]]:
    """The documents the target's reader parses: payload configs only where it knows the type
    (where it does not, the layout step has already blocked)."""
    for root, member, doc in archive_documents(archive):
        if root == "PayloadConfig" and "PayloadConfig" not in snap["types"]:
            continue
        yield root, member, doc


# ------------------------------------------------------------------------- public


def check_target(archive, target) -> list[Finding]:
    """Can torch release ``target`` (text like ``torch==2.10`` / ``8.15``, or (8, 15)) load ``archive`` as is?

    Errors are blockers (each with member and field path); warnings are content the
    release reads but ignores. An empty list means it loads as is.
    """
    version, label, snap = target_snapshot(target)
    findings = layout_findings(archive, version, label)
    for root, member, doc in _target_documents(archive, snap):
        findings.extend(check_program_json(doc, version, root=root, member=member))
    return findings


def plan_for_target(archive, target, *, drop_sample_inputs: bool = False) -> TargetPlan:
    """The members that make ``archive`` readable by ``target``, and the findings (errors block).

    Where the archive's layout is read as is, every member keeps its name and place and only
    the JSON documents are rewritten (``downgrade``), so weights, pickles and extra files stay
    byte for byte; else the archive is written in the layout the release reads (``target_layout``).
    """
    version, label, layout, findings, documents = _rewrite(archive, target, drop_sample_inputs)
    if any(f.severity == "error" for f in findings):
        return TargetPlan(version, label, findings, [])
    if layout is not None:
        return TargetPlan(version, label, findings, legacy_members(archive, layout, documents, version))
    zr = archive.zip
    for name in _sample_inputs(archive) if drop_sample_inputs else ():
        documents[name] = b""  # what torch.export.save writes for a program without example inputs
    if archive.layout == FLAT and FLAT_VERSION in zr:
        documents[FLAT_VERSION] = f"{version[0]}.{version[1]}".encode("ascii")  # torch compares its major
    members = [(name, documents[name] if name in documents else _body(zr, name)) for name in zr.names]
    return TargetPlan(version, label, findings, members)


def _sample_inputs(archive) -> set[str]:
    """The sample-input members of ``archive`` (what ``drop_sample_inputs`` writes empty)."""
    items = (*(p for m in archive.models.values() for p in m.pickled), *archive.unloaded)
    return {item.member for item in items if item.kind == SAMPLE_INPUTS}


def writable_for_target(archive, target, *, drop_sample_inputs: bool = False) -> bool:
    """``plan_for_target(archive, target).writable`` without building the members, at the cost
    of the JSON documents only (an older layout's members re-pickle every weight)."""
    return not any(f.severity == "error" for f in _rewrite(archive, target, drop_sample_inputs)[3])


def _rewrite(archive, target, drop_sample_inputs: bool = False) -> tuple[tuple[int, int], str, str | None, list[Finding], dict[str, bytes]]:
    """The plan up to its members: (schema version, release label, the older layout to write or
    None, findings, each JSON document rewritten for the target by member)."""
    version, label, snap = target_snapshot(target)
    layout = target_layout(archive, version)
    # the older layouts carry the sample inputs whatever is asked (their readers need them)
    findings = code_findings(archive, drop_sample_inputs=drop_sample_inputs and layout is None)
    findings += native_findings(archive)
    if layout is not None:
        findings += legacy_findings(archive, layout, label)
    documents: dict[str, bytes] = {}
    for root, member, doc in _target_documents(archive, snap):
        new, found = downgrade(doc, version, root=root, member=member)
        findings.extend(found)
        documents[member] = _dump(new)
    return version, label, layout, findings, documents


def write_for_target(src, dst, target, *, drop_sample_inputs: bool = False) -> TargetPlan:
    """Write ``dst``: ``src`` (a .pt2 path, file or bytes) made readable by ``target``; the plan.

    Raises ``TargetNotWritable`` (nothing written) when the plan has a blocker.
    """
    from ..archive.loader import load
    from ..archive.zip_writer import write_archive

    with load(src) as archive:
        plan = plan_for_target(archive, target, drop_sample_inputs=drop_sample_inputs)
        if not plan.writable:
            raise TargetNotWritable(plan)
        write_archive(dst, plan.members)
    return plan


def _dump(doc) -> bytes:
    # torch writes json.dumps defaults; bare Infinity/NaN appear only for targets that need them
    return json.dumps(doc).encode("utf-8")


def _body(zr, name: str):
    """A member's bytes, unchanged: a view into the map when stored, else decompressed."""
    return zr.view(name) if zr.is_stored(name) else zr.read(name)
