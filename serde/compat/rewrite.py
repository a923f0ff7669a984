"""``rewrite_for_target``: copy a .pt2 for an older torch release, torch-free.

Why: a file written by a new torch often holds nothing an older release can't read
except a few defaulted fields and a newer ``schema_version``. Rewriting only the JSON
documents (model programs, payload configs) with ``compat.downgrade`` and copying every
other member byte for byte keeps weights, pickles and extra files exactly as they were.
On any blocker nothing is written: a partial or misleading file is worse than none.
"""

from __future__ import annotations

import json
import sys
from typing import TextIO

from . import target as compat
from ..errors import Pt2UsageError
from ..findings import Finding

__all__ = ["plan_rewrite", "rewrite_for_target"]


def _dump(doc) -> bytes:
    # torch writes json.dumps defaults; bare Infinity/NaN appear only for targets that need them
    return json.dumps(doc).encode("utf-8")


def plan_rewrite(archive, target) -> tuple[list[tuple[str, bytes]], list[Finding]]:
    """(members in the archive's order with rewritten JSON documents, findings) for ``target``."""
    version, label, snap = compat.target_snapshot(target)
    findings = list(compat.layout_findings(archive, version, label))
    documents = {}
    for root, member, doc in compat.archive_documents(archive):
        if root == "PayloadConfig" and "PayloadConfig" not in snap["types"]:
            continue
        new, found = compat.downgrade(doc, version, root=root, member=member)
        findings.extend(found)
        documents[member] = _dump(new)
    zr = archive.zip
    members = [(name, documents[name] if name in documents else _body(zr, name)) for name in zr.names]
    return members, findings


def _body(zr, name: str):
    """A member's bytes, unchanged: a view into the map when stored, else decompressed."""
    return zr.view(name) if zr.is_stored(name) else zr.read(name)


def rewrite_for_target(src, dst, target_schema: str | None, *, stream: TextIO | None = None) -> int:
    """Write ``dst``: ``src`` readable by ``target_schema`` (``8.15``, ``torch==2.10``). 0 ok, 1 blocked.

    Findings (blockers and warnings) go to ``stream`` (stderr by default); on a blocker no file is written.
    """
    from ..archive.loader import load
    from ..archive.zip_writer import write_archive

    out = stream if stream is not None else sys.stderr
    if not target_schema:
        raise Pt2UsageError("--target-schema is required with --to pt2 (e.g. 8.15 or torch==2.10)")
    version = compat.parse_target(target_schema)
    archive = load(src)
    try:
        members, findings = plan_rewrite(archive, version)
        for f in findings:
            print(f, file=out)
        if any(f.severity == "error" for f in findings):
            print(f"not written: {src} cannot be made readable by schema {version[0]}.{version[1]}", file=out)
            return 1
        write_archive(dst, members)
    finally:
        archive.close()
    print(f"wrote {dst} for schema {version[0]}.{version[1]}", file=sys.stdout if stream is None else out)
    return 0
