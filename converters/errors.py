"""Exceptions of the converters: all are ``Pt2Error``s, so one ``except Pt2Error`` catches them."""

from __future__ import annotations

from ..serde.errors import Pt2Error

__all__ = ["ConversionError", "Unsupported", "UnsupportedOpsError"]


class ConversionError(Pt2Error):
    """The program cannot be converted (bad option, a value the target format cannot hold)."""


class Unsupported(ConversionError):
    """Raised by a lowering for one node it cannot handle (an argument value, a dtype).

    The converter catches it, keeps going, and reports every such node at the end in one
    ``UnsupportedOpsError`` (see ``report.py``)."""


class UnsupportedOpsError(ConversionError):
    """Every operator the target cannot express, with counts and one example node each.

    ``ops`` is a list of ``report.OpProblem``; ``str(err)`` is the human report."""

    def __init__(self, message: str, ops: list):
        self.ops = ops
        super().__init__(message)
