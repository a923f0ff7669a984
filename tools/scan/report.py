"""The scan's summary, built record by record from bounded counters: memory stays flat whatever
the fleet's size.

Counts by verdict, by schema version and torch version (per model), the top errors of the
artifacts that could not be checked (unreadable, crashed, timeout, oom), the target's blockers (by
finding code, counting artifacts), each converter's results with its top unsupported operators
and errors, the slowest artifacts and the failing ones (the first ``TOP`` by path; the count is
exact). Keys taken from files (operator names, messages) go through ``BoundedCounter``, so a
fleet of hostile files cannot grow it without bound. ``as_dict`` is the ``--json`` output,
``table`` the text for a terminal (every value from a file on its row, escaped by ``printable``).
"""

from __future__ import annotations

import heapq
from collections import Counter

from ..terminal import printable

__all__ = ["TOP", "BoundedCounter", "Summary"]

TOP = 10
"""Entries in each top list (blockers, operators, errors, slowest, failing)."""


class BoundedCounter:
    """A ``Counter`` that keeps at most about ``2 * keep`` keys: past that, only the ``keep`` most
    common stay (``dropped`` counts the rest). Counts of keys that stay can be low when many
    distinct keys compete; with fewer than ``keep`` distinct keys they are exact."""

    def __init__(self, keep: int = 1000):
        self.keep, self.counts, self.dropped = keep, Counter(), 0

    def add(self, key, n: int = 1) -> None:
        self.counts[key] += n
        if len(self.counts) > 2 * self.keep:
            kept = dict(self.counts.most_common(self.keep))
            self.dropped += sum(self.counts.values()) - sum(kept.values())
            self.counts = Counter(kept)

    def top(self, n: int | None = None) -> list[tuple]:
        return sorted(self.counts.items(), key=lambda kv: (-kv[1], str(kv[0])))[:n]


class Summary:
    def __init__(self, target: str | None = None, convert: tuple[str, ...] = ()):
        self.target, self.convert = target, convert
        self.artifacts = 0
        self.bytes = 0
        self.verdicts: Counter = Counter()
        self.schema_versions = BoundedCounter()
        self.torch_versions = BoundedCounter()
        self.blockers = BoundedCounter()
        self.refusals = BoundedCounter()  # "Class: reason" of unreadable / crashed / timeout / oom -> artifacts
        self.results = {name: Counter() for name in convert}
        self.unsupported = {name: BoundedCounter() for name in convert}  # op -> artifacts
        self.unsupported_nodes = {name: BoundedCounter() for name in convert}  # op -> nodes
        self.errors = {name: BoundedCounter() for name in convert}  # "Class: message" -> models
        self._slowest: list[tuple[float, str, str]] = []  # min-heap of the TOP largest
        self._failing: list[tuple[str, str, str]] = []  # max-heap (negated path order) of the TOP first
        self.failing = 0

    # -- one record

    def add(self, record: dict) -> None:
        self.artifacts += 1
        self.bytes += int(record.get("size") or 0)
        verdict = record.get("verdict", "crashed")
        self.verdicts[verdict] += 1
        for model in (record.get("models") or {}).values():
            self.schema_versions.add(model.get("schema_version"))
            self.torch_versions.add(model.get("torch_version") or "not recorded")
        if record.get("error"):
            self.refusals.add(_first_line(record["error"]))
        for code in record.get("blockers") or {}:
            self.blockers.add(code)
        for name, per_model in (record.get("conversions") or {}).items():
            if name in self.results:
                self._add_conversions(name, per_model)
        self._rank(record, verdict)

    def _add_conversions(self, name: str, per_model: dict) -> None:
        ops_here: set = set()
        for conv in per_model.values():
            self.results[name][conv["result"]] += 1
            for op, nodes in (conv.get("unsupported") or {}).items():
                ops_here.add(op)
                self.unsupported_nodes[name].add(op, nodes)
            if conv.get("error"):
                self.errors[name].add(_first_line(conv["error"]))
        for op in ops_here:
            self.unsupported[name].add(op)

    def _rank(self, record: dict, verdict: str) -> None:
        path, seconds = record["path"], float(record.get("seconds") or 0.0)
        item = (seconds, path, verdict)
        if len(self._slowest) < TOP:
            heapq.heappush(self._slowest, item)
        elif item > self._slowest[0]:
            heapq.heapreplace(self._slowest, item)
        if verdict != "ok":
            self.failing += 1
            entry = (_Desc(path), verdict, _reason(record))
            if len(self._failing) < TOP:
                heapq.heappush(self._failing, entry)
            elif entry > self._failing[0]:
                heapq.heapreplace(self._failing, entry)

    @property
    def all_ok(self) -> bool:
        return self.failing == 0

    # -- output

    def as_dict(self) -> dict:
        out = {
            "artifacts": self.artifacts,
            "bytes": self.bytes,
            "verdicts": dict(sorted(self.verdicts.items())),
            "schema_versions": dict(self.schema_versions.top()),
            "torch_versions": dict(self.torch_versions.top()),
            "target": self.target,
        }
        out["errors"] = [{"error": e, "artifacts": n} for e, n in self.refusals.top(TOP)]
        if self.target:
            out["blockers"] = [{"code": c, "artifacts": n} for c, n in self.blockers.top(TOP)]
        out["conversions"] = {
            name: {
                "results": dict(sorted(self.results[name].items())),
                "unsupported_ops": [{"op": op, "artifacts": n, "nodes": self.unsupported_nodes[name].counts.get(op, 0)}
                                    for op, n in self.unsupported[name].top(TOP)],
                "errors": [{"error": e, "models": n} for e, n in self.errors[name].top(TOP)],
            }
            for name in self.convert
        }
        out["slowest"] = [{"path": p, "seconds": s, "verdict": v} for s, p, v in sorted(self._slowest, reverse=True)]
        out["failing"] = [{"path": d.path, "verdict": v, "reason": r} for d, v, r in sorted(self._failing, reverse=True)]
        out["failing_total"] = self.failing
        return out

    def table(self) -> str:
        d = self.as_dict()
        lines = [f"{d['artifacts']} artifacts, {d['bytes'] / 1e6:.1f} MB"]
        lines += _section("verdict", d["verdicts"].items())
        lines += _section("schema version (models)", d["schema_versions"].items())
        lines += _section("torch version (models)", d["torch_versions"].items())
        lines += _section("top errors: unreadable, crashed, timeout, oom (artifacts)",
                          ((e["error"], e["artifacts"]) for e in d["errors"]), empty="none")
        if self.target:
            lines += _section(f"blockers for {self.target} (artifacts)", ((b["code"], b["artifacts"]) for b in d["blockers"]),
                              empty="none")
        for name, conv in d["conversions"].items():
            lines += _section(f"{name} conversion (models)", conv["results"].items())
            lines += _section(f"{name}: top unsupported operators (artifacts, nodes)",
                              ((u["op"], f"{u['artifacts']}  {u['nodes']}") for u in conv["unsupported_ops"]), empty="none")
            lines += _section(f"{name}: top errors (models)", ((e["error"], e["models"]) for e in conv["errors"]),
                              empty="none")
        lines += _section("slowest (seconds)", ((s["path"], f"{s['seconds']:.3f}  {s['verdict']}") for s in d["slowest"]))
        failing = ((f["path"], f"{f['verdict']}: {f['reason']}") for f in d["failing"])
        lines += _section(f"failing: {d['failing_total']}" + (f" (first {TOP} by path)" if d["failing_total"] > TOP else ""),
                          failing, empty="none")
        return "\n".join(lines)


class _Desc:
    """A path ordered backwards, so a min-heap of them keeps the first paths in order."""

    __slots__ = ("path",)

    def __init__(self, path: str):
        self.path = path

    def __lt__(self, other: "_Desc") -> bool:
        return self.path > other.path

    def __eq__(self, other) -> bool:
        return isinstance(other, _Desc) and self.path == other.path


def _first_line(error: dict) -> str:
    """``Class: first line of the reason`` (the message without where, so that errors of the
    same kind in different files count together)."""
    message = (error.get("reason") or error.get("message") or "").splitlines()
    return f"{error.get('class')}: {message[0] if message else ''}"[:200]


def _reason(record: dict) -> str:
    """Why an artifact is not ok, in one short line."""
    if record.get("error"):
        return _first_line(record["error"])
    parts = []
    if record.get("blockers"):
        parts.append("blockers " + ", ".join(record["blockers"]))
    errors = sorted({f["code"] for f in record.get("findings", []) if f.get("severity") == "error"} - set(record.get("blockers") or ()))
    if errors:
        parts.append("findings " + ", ".join(errors))
    for name, per_model in (record.get("conversions") or {}).items():
        bad = sorted({c["result"] for c in per_model.values()} - {"ok"})
        if bad:
            parts.append(f"{name} {'/'.join(bad)}")
    return "; ".join(parts)[:200]


def _section(title: str, rows, empty: str | None = None) -> list[str]:
    rows = [(printable(k), printable(v)) for k, v in rows]  # paths, versions, operators, messages: from files
    if not rows and empty is None:
        return []
    out = ["", title]
    if not rows:
        return out + [f"  {empty}"]
    width = min(70, max(len(k) for k, _ in rows))
    return out + [f"  {k:<{width}}  {v}" for k, v in rows]
