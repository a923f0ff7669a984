"""Failures while converting, reported as ``Pt2Error``s that say where they happened.

A lowering is ordinary Python over program data: a value the prechecks did not foresee
can still make it raise ``IndexError``, numpy a ``MemoryError``, protobuf a ``ValueError``.
``stage`` turns whatever a conversion step raised (declaring inputs, assembling and
serialising the model) into a ``ConversionError`` naming the archive member and the step
(the ATen front end's ``aten/failures.py`` does the same for one lowering, naming its
node). ``KeyboardInterrupt`` and ``SystemExit`` are never caught (they are not
``Exception``s); ``MemoryError`` and ``RecursionError`` are.
"""

from __future__ import annotations

from contextlib import contextmanager

from ..serde.errors import Pt2Error, Pt2FormatError
from .errors import ConversionError
from .limits import MAX_MESSAGE_CHARS

__all__ = ["located", "message_of", "stage", "safe_text"]


def safe_text(s: str, limit: int = MAX_MESSAGE_CHARS) -> str:
    """``s`` cut to ``limit`` characters, lone surrogates escaped (so it can be printed)."""
    s = s if len(s) <= limit else s[:limit] + "..."
    return s.encode("utf-8", "backslashreplace").decode("utf-8")


def message_of(exc: BaseException) -> str:
    """``ValueError: bad value``: the exception's class and text, printable."""
    text = str(exc)
    return f"{type(exc).__name__}: {safe_text(text)}" if text else type(exc).__name__


def located(exc: Exception, member: str | None, what: str) -> Pt2Error:
    """``exc`` raised during step ``what``, as a ``Pt2Error`` naming ``member``."""
    if isinstance(exc, (ConversionError, Pt2FormatError)) and exc.member is not None:
        return exc
    if isinstance(exc, Pt2FormatError):
        try:
            return type(exc)(exc.reason, member=member, path=exc.path)
        except Exception:
            pass
    if isinstance(exc, ConversionError) and type(exc) is not ConversionError:
        return exc  # report errors (UnsupportedOpsError) carry their own text
    reason = exc.reason if isinstance(exc, ConversionError) else f"{what}: {message_of(exc)}"
    return ConversionError(reason, member=member)


@contextmanager
def stage(member: str | None, what: str, *, passthrough: tuple = ()):
    """Run a conversion step; any ``Exception`` leaves as a ``Pt2Error`` naming ``member``,
    except the types in ``passthrough`` (``OSError`` while writing the output file is not
    the input's fault)."""
    try:
        yield
    except passthrough:
        raise
    except Exception as e:
        err = located(e, member, what)
        if err is e:
            raise
        raise err from e
