"""Failures while converting, reported as ``Pt2Error``s that say where they happened.

A lowering is ordinary Python over program data: a value the prechecks did not foresee
can still make it raise ``IndexError``, numpy a ``MemoryError``, protobuf a ``ValueError``.
``lowering_failure`` turns whatever one lowering raised into a ``ConversionError`` naming
the archive member, the node's field path, the node, its target and the lowering
function; ``stage`` does the same for the steps around the lowerings (declaring inputs,
assembling and serialising the model), naming the step. ``KeyboardInterrupt`` and
``SystemExit`` are never caught (they are not ``Exception``s); ``MemoryError`` and
``RecursionError`` are.
"""

from __future__ import annotations

from contextlib import contextmanager

from ..schema import definitions as d
from ..serde.errors import Pt2Error, Pt2FormatError
from . import registry
from .errors import ConversionError, Unsupported
from .limits import MAX_MESSAGE_CHARS

__all__ = ["describe_node", "lowering_name", "lowering_failure", "located", "stage", "safe_text"]


def safe_text(s: str, limit: int = MAX_MESSAGE_CHARS) -> str:
    """``s`` cut to ``limit`` characters, lone surrogates escaped (so it can be printed)."""
    s = s if len(s) <= limit else s[:limit] + "..."
    return s.encode("utf-8", "backslashreplace").decode("utf-8")


def describe_node(node: d.Node) -> str:
    """``node 'add_3' (aten.add.Tensor)``."""
    return f"node {safe_text(repr(node.name or '?'), 200)} ({safe_text(registry.canonical(node.target), 200)})"


def lowering_name(fn) -> str:
    """``ops_elementwise.add`` for a lowering defined in ``pt2x.converters.onnx.ops_elementwise``."""
    module = getattr(fn, "__module__", None) or "?"
    qual = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or repr(fn)
    return f"{module.rsplit('.', 1)[-1]}.{qual.replace('.<locals>.', '.')}"


def _message(exc: BaseException) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {safe_text(text)}" if text else type(exc).__name__


def lowering_failure(exc: Exception, view, node: d.Node, fn) -> Pt2Error:
    """The error to raise for ``exc`` escaping ``fn(ctx, node)`` (``view``: the node's graph).

    An error that already names its node (raised inside a subgraph) is returned as is; a
    ``Pt2FormatError`` (a shape expression that does not evaluate) keeps its class and
    gains the member and node; anything else becomes a ``ConversionError``."""
    if isinstance(exc, ConversionError) and exc.node is not None:
        return exc
    member = getattr(view, "member", None)
    path = view.node_path(node) if hasattr(view, "node_path") else None
    where = f"{describe_node(node)}, lowering {lowering_name(fn)}"
    if isinstance(exc, Pt2FormatError):
        if exc.member is not None and exc.member != member:
            return exc
        try:
            return type(exc)(f"{where}: {exc.reason}", member=member, path=exc.path or path)
        except Exception:  # a subclass with another constructor: fall through
            pass
    cls = Unsupported if isinstance(exc, Unsupported) else ConversionError
    reason = exc.reason if isinstance(exc, ConversionError) else _message(exc)
    return cls(f"{where}: {reason}", member=member, path=path, node=node.name or "?")


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
    reason = exc.reason if isinstance(exc, ConversionError) else f"{what}: {_message(exc)}"
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
