"""The results file: one JSON line per artifact, written as each completes, and ``--resume``.

Each line is flushed when written, so a scan that is killed leaves every finished artifact on
disk, and at most its last line cut short. ``--resume`` reads the file back line by line (the
records feed the summary; only their paths are kept, to skip them), drops a last line that was
cut short, and appends what is left to check. A line that is not a record anywhere else means
the file is not a scan's output: that is a usage error, and nothing is overwritten.
"""

from __future__ import annotations

import json
import os
from typing import Iterator

from ...serde.errors import Pt2UsageError
from ..cli import check_output, writing

__all__ = ["ResultsFile"]


class ResultsFile:
    """``path`` opened for a scan: ``previous()`` (with resume) then ``write`` per artifact."""

    def __init__(self, path: str, *, resume: bool):
        check_output(path)
        self.path = path
        self.resume = resume and os.path.exists(path)
        self._f = None

    def previous(self) -> Iterator[dict]:
        """The records a former run left (resume only), after cutting off a truncated last line."""
        if not self.resume:
            return
        keep = 0  # bytes of complete, valid lines
        with writing(self.path), open(self.path, "rb") as f:
            for number, line in enumerate(f, 1):
                record = _record(line)
                if record is None:
                    if line.endswith(b"\n"):
                        raise Pt2UsageError(f"cannot resume from {self.path}: line {number} is not a pt2x scan record")
                    break  # the last line, cut short by a kill: its artifact is checked again
                keep += len(line)
                yield record
        if keep != os.path.getsize(self.path):
            with writing(self.path):
                os.truncate(self.path, keep)

    def write(self, record: dict) -> None:
        if self._f is None:
            with writing(self.path):
                self._f = open(self.path, "a" if self.resume else "w", encoding="utf-8")
        with writing(self.path):
            self._f.write(json.dumps(record) + "\n")
            self._f.flush()

    def close(self) -> None:
        if self._f is not None:
            with writing(self.path):
                self._f.close()
            self._f = None
        elif not self.resume:  # nothing was checked: still leave an empty output, as asked
            with writing(self.path), open(self.path, "w", encoding="utf-8"):
                pass


def _record(line: bytes) -> dict | None:
    if not line.endswith(b"\n"):  # even if it parses: the next record must start a line
        return None
    try:
        record = json.loads(line)
    except ValueError:
        return None
    return record if isinstance(record, dict) and isinstance(record.get("path"), str) and "verdict" in record else None
