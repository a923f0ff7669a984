"""The one exception family pt2x raises for bad input.

Every message names where the problem is: the archive member and, inside JSON, the
field path (``models/model.json: graph_module.graph.nodes[3].inputs[0].arg``). Callers
catch ``Pt2Error``; nothing from ``zipfile``, ``json``, ``pickle`` or numpy leaks out.
"""

from __future__ import annotations

import contextlib
from typing import Iterator

__all__ = [
    "Pt2Error",
    "Pt2FormatError",
    "ArchiveError",
    "LimitExceededError",
    "SchemaError",
    "SchemaVersionError",
    "UnsafeContentError",
    "SymbolicExprError",
    "TensorDataError",
    "Pt2UsageError",
    "MissingExtraError",
    "extra_required",
]


class Pt2Error(Exception):
    """Root of pt2x's exceptions."""


class Pt2UsageError(Pt2Error, ValueError):
    """The caller asked for something that does not exist (a model name, an option)."""


class MissingExtraError(Pt2UsageError, ImportError):
    """An optional dependency is not installed; the message names the extra that brings it.

    Also an ``ImportError`` (``name`` is the missing module), so ``except ImportError`` works.
    """

    def __init__(self, feature: str, module: str, extra: str):
        self.feature, self.extra = feature, extra
        message = f"{feature} needs {module!r}, which is not installed: pip install 'pt2x[{extra}]'"
        Pt2UsageError.__init__(self, message)
        self.name = module
        self.msg = message

    def __reduce__(self):
        return type(self), (self.feature, self.name, self.extra)


@contextlib.contextmanager
def extra_required(feature: str, module: str, extra: str) -> Iterator[None]:
    """Around an optional ``import module``: its absence becomes a ``MissingExtraError`` naming
    ``pt2x[extra]``; a module missing *inside* it (a broken installation) stays what it is.
    The import statement stays at the call site, where the import contracts can see it."""
    try:
        yield
    except ModuleNotFoundError as e:
        if e.name != module:
            raise
        raise MissingExtraError(feature, module, extra) from e


class Pt2FormatError(Pt2Error):
    """The file is not a well-formed .pt2 archive. ``member`` and ``path`` locate the fault."""

    def __init__(self, message: str, *, member: str | None = None, path: str | None = None):
        self.member = member
        self.path = path
        self.reason = message
        where = ": ".join(p for p in (member, path) if p)
        super().__init__(f"{where}: {message}" if where else message)


class ArchiveError(Pt2FormatError):
    """The zip container itself: layout, member names, compression, sizes."""


class LimitExceededError(ArchiveError):
    """A size, ratio, count or depth past one of the limits in ``serde.limits``."""


class SchemaError(Pt2FormatError):
    """JSON that does not match the export schema (types, unions, enums, keys)."""


class SchemaVersionError(SchemaError):
    """A schema version this pt2x cannot read (another major)."""


class UnsafeContentError(Pt2FormatError):
    """Content that would run code if loaded (pickle globals, native libraries)."""


class SymbolicExprError(Pt2FormatError):
    """A shape expression outside the restricted grammar."""


class TensorDataError(Pt2FormatError):
    """Tensor bytes that do not fit their metadata (extent, item size, dtype)."""
