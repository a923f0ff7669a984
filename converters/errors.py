"""Exceptions of the converters: all are ``Pt2Error``s, so one ``except Pt2Error`` catches them."""

from __future__ import annotations

from ..serde.errors import Pt2Error

__all__ = ["ConversionError", "Unsupported", "NotConverted", "UnsupportedOpsError"]


class ConversionError(Pt2Error):
    """The program cannot be converted (bad option, a value the target format cannot hold,
    a program that breaks what the lowerings rely on).

    ``member`` (the archive member holding the program, ``<root>/models/model.json``),
    ``path`` (the field path inside it, ``graph_module.graph.nodes[3]``) and ``node`` (the
    program node's name) locate the fault when known; ``reason`` is the message without them.
    """

    def __init__(self, message: str, *, member: str | None = None, path: str | None = None,
                 node: str | None = None):
        self.member = member
        self.path = path
        self.node = node
        self.reason = message
        where = ": ".join(p for p in (member, path) if p)
        super().__init__(f"{where}: {message}" if where else message)

    def __reduce__(self):
        return _rebuild, (type(self), self.reason, self.member, self.path, self.node)


def _rebuild(cls, reason, member, path, node):
    return cls(reason, member=member, path=path, node=node)


class Unsupported(ConversionError):
    """Raised by a lowering for one node it cannot handle (an argument value, a dtype).

    The converter catches it, keeps going, and reports every such node at the end in one
    ``UnsupportedOpsError`` (see ``report.py``)."""


class NotConverted(Unsupported):
    """A lowering read a value whose producer was not converted (inside a subgraph, say):
    like the consumers of that value in the same graph, the node is skipped, not reported;
    the producer's own report says why."""


class UnsupportedOpsError(ConversionError):
    """Every operator the target cannot express, with counts and one example node each.

    ``ops`` is a list of ``report.OpProblem``; ``str(err)`` is the human report, after the
    archive member when known."""

    def __init__(self, message: str, ops: list, *, member: str | None = None):
        self.ops = ops
        super().__init__(message, member=member)

    def __reduce__(self):
        return _rebuild_ops, (type(self), self.reason, self.ops, self.member)


def _rebuild_ops(cls, reason, ops, member):
    return cls(reason, ops, member=member)
