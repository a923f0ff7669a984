"""The results file: one JSON line per artifact, written as each completes, and ``--resume``.

Each line is flushed when written, so a scan that is killed leaves every finished artifact on
disk, and at most its last line cut short. ``--resume`` reads the file back line by line (the
records feed the summary; only their paths are kept, to skip them), drops a last line that was
cut short, and appends what is left to check. A line that is not a record anywhere else means
the file is not a scan's output: that is a usage error, and nothing is overwritten. A record
is checked against ``RECORD``, the one table of the fields the summary reads and their types:
a record with a field of the wrong type (``"error": "boom"``, ``"seconds": "slow"``) was not
written by a scan either, so it is refused the same way, naming the line and the field.
"""

from __future__ import annotations

import json
import math
import os
from typing import Iterator, NamedTuple

from ...serde.errors import Pt2UsageError
from ..cli import check_output, writing
from ..terminal import json_text, printable

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
                problem = shape_problem(record)
                if problem:
                    raise Pt2UsageError(f"cannot resume from {self.path}: line {number} is not a pt2x scan record "
                                        f"({printable(problem)})")
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
            self._f.write(json_text(record) + "\n")
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
    except (ValueError, RecursionError):  # RecursionError: a line of 100,000 nested brackets
        return None
    return record if isinstance(record, dict) and isinstance(record.get("path"), str) and "verdict" in record else None


# -- a record's shape: the fields the summary reads, with their types (others are left alone)


class _Map(NamedTuple):  # {text: value}
    value: object


class _List(NamedTuple):  # [item]
    item: object


class _Fields(NamedTuple):  # {field: spec}, each optional unless in ``required``
    fields: dict
    required: frozenset = frozenset()


_TEXT, _OPTIONAL_TEXT, _FLAG = "text", "text or null", "true or false"
_COUNT, _SECONDS = "a count (an integer >= 0)", "seconds (a number >= 0)"
_ERROR = _Fields({"class": _TEXT, "message": _TEXT, "reason": _TEXT})
_CONVERSION = _Fields({"result": _TEXT, "unsupported": _Map(_COUNT), "error": _ERROR, "seconds": _SECONDS}, frozenset({"result"}))
_MODEL = _Fields({"schema_version": _OPTIONAL_TEXT, "torch_version": _OPTIONAL_TEXT, "node_count": _COUNT,
                  "ops": _Map(_COUNT)})
_FINDING = _Fields({"severity": _TEXT, "code": _TEXT, "message": _TEXT}, frozenset({"severity", "code"}))

RECORD = _Fields({
    "path": _TEXT,
    "verdict": _TEXT,
    "size": _COUNT,
    "seconds": _SECONDS,
    "models": _Map(_MODEL),
    "readable": _FLAG,
    "valid": _FLAG,
    "target": _OPTIONAL_TEXT,
    "findings": _List(_FINDING),
    "findings_total": _COUNT,
    "blockers": _Map(_COUNT),
    "conversions": _Map(_Map(_CONVERSION)),
    "error": _ERROR,
}, frozenset({"path", "verdict"}))
"""The one table of a scan record's fields and their types that ``--resume`` checks."""


def shape_problem(value, spec=RECORD, where: str = "") -> str | None:
    """Where ``value`` differs from ``spec`` and what was expected (``error: a JSON object``), or None."""
    if isinstance(spec, _Fields):
        if not isinstance(value, dict):
            return f"{where or 'the record'}: expected a JSON object"
        missing = sorted(spec.required - value.keys())
        if missing:
            return f"{where or 'the record'}: no {missing[0]!r}"
        for key, sub in spec.fields.items():
            if key in value:
                problem = shape_problem(value[key], sub, f"{where}.{key}" if where else key)
                if problem:
                    return problem
        return None
    if isinstance(spec, (_Map, _List)):
        kind = dict if isinstance(spec, _Map) else list
        if not isinstance(value, kind):
            return f"{where}: expected a JSON {'object' if kind is dict else 'array'}"
        items = value.items() if kind is dict else enumerate(value)
        for key, item in items:
            problem = shape_problem(item, spec.value if kind is dict else spec.item, f"{where}[{key!r}]")
            if problem:
                return problem
        return None
    return None if _SCALAR[spec](value) else f"{where}: expected {spec}"


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value >= 0


_SCALAR = {
    _TEXT: lambda v: isinstance(v, str),
    _OPTIONAL_TEXT: lambda v: v is None or isinstance(v, str),
    _FLAG: lambda v: isinstance(v, bool),
    _COUNT: lambda v: _is_number(v) and isinstance(v, int),
    _SECONDS: _is_number,
}
