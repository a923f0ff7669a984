"""Copies of real ``.pt2`` archives with their model JSON edited, for tests of what a reader,
the planner or ``validate`` makes of one changed field."""

from __future__ import annotations

import json
import os
import zipfile

from pt2x.serde.archive.zip_writer import write_archive


def patched(tmp_path, src: str, edit) -> str:
    """A copy of ``src`` whose model JSON went through ``edit(doc)``; other members unchanged."""
    with zipfile.ZipFile(src) as z:
        members = [(n, z.read(n)) for n in z.namelist()]
    out = []
    for name, body in members:
        if name.endswith("models/model.json"):
            doc = json.loads(body)
            edit(doc)
            body = json.dumps(doc).encode()
        out.append((name, body))
    dst = tmp_path / ("patched-" + os.path.basename(src))
    write_archive(dst, out)
    return str(dst)
