"""A finding: one problem (or warning) located in an archive, shared by every checker.

``pt2x validate`` (structure), ``validate --target`` (compatibility with a release)
and the converters' reports all speak this type, so the CLI prints and serializes
them one way. The ``--json`` form of a finding is ``as_dict()`` and is stable.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Finding:
    severity: str  # "error" blocks; "warning" does not
    code: str  # stable machine-readable kind, e.g. "undefined-value"
    message: str
    member: str | None = None  # archive member, e.g. "pkg/models/model.json"
    path: str | None = None  # field path inside it, e.g. "graph_module.graph.nodes[3]"

    def as_dict(self) -> dict:
        return {
            "severity": self.severity,
            "code": self.code,
            "message": self.message,
            "member": self.member,
            "path": self.path,
        }

    def __str__(self) -> str:
        where = ": ".join(p for p in (self.member, self.path) if p)
        return f"{self.severity}: {where + ': ' if where else ''}{self.message} [{self.code}]"
