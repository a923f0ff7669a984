"""ATen nodes named in errors: an unsupported node's entry in the report, a lowering's failure.

``report_node`` and ``missing_lowerings`` describe program nodes to the target-neutral
``report.Problems`` (the operator's canonical target, the node printed as a call);
``lowering_failure`` turns whatever one lowering raised into a ``ConversionError`` naming
the archive member, the node's field path, the node, its target and the lowering function.
"""

from __future__ import annotations

from ...schema import definitions as d
from ...serde.errors import Pt2Error, Pt2FormatError
from ..errors import ConversionError, Unsupported
from ..guard import message_of, safe_text
from ..report import Problems
from . import registry

__all__ = ["describe_node", "describe_call", "report_node", "missing_lowerings", "lowering_name",
           "lowering_failure"]

_MAX_NAME_CHARS = 200  # a node's name or target in a one-line description


def describe_node(node: d.Node) -> str:
    """``node 'add_3' (aten.add.Tensor)``."""
    name = safe_text(repr(node.name or '?'), _MAX_NAME_CHARS)
    return f"node {name} ({safe_text(registry.canonical(node.target), _MAX_NAME_CHARS)})"


def _argument_text(a: d.Argument) -> str:
    v = a.value
    if a.type == "as_tensor":
        return v.name
    if a.type == "as_tensors":
        return "[" + ", ".join(t.name for t in v) + "]"
    if a.type == "as_graph":
        return f"<graph {v.name}>"
    if a.type in ("as_sym_int", "as_sym_bool", "as_sym_float"):
        return str(v.value)
    return repr(v)


def describe_call(node: d.Node) -> str:
    """``add_3 = aten.add.Tensor(x, y, alpha=1)``: the node as the report's example."""
    args = [f"{na.name}={_argument_text(na.arg)}" if na.name else _argument_text(na.arg) for na in node.inputs]
    return f"{node.name or '?'} = {registry.canonical(node.target)}({', '.join(args)})"


def report_node(problems: Problems, node: d.Node, reason: str | None = None) -> None:
    """Record ``node`` as unsupported in ``problems``."""
    problems.add(registry.canonical(node.target), node.name or "?", reason, call=describe_call(node))


def missing_lowerings(view, backend: str, problems: Problems | None = None, *, known=None) -> Problems:
    """Every node (subgraphs included) whose target has no lowering for ``backend``.
    ``known(target)`` may accept targets the backend handles outside the registry."""
    problems = problems or Problems(backend, getattr(view, "member", None))
    for n in view.walk():
        if registry.get(backend, n.target) is None and not (known and known(n.target)):
            report_node(problems, n, "no lowering registered")
    return problems


def lowering_name(fn) -> str:
    """``ops_elementwise.add`` for a lowering defined in ``pt2x.converters.onnx.ops_elementwise``."""
    module = getattr(fn, "__module__", None) or "?"
    qual = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or repr(fn)
    return f"{module.rsplit('.', 1)[-1]}.{qual.replace('.<locals>.', '.')}"


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
    reason = exc.reason if isinstance(exc, ConversionError) else message_of(exc)
    return cls(f"{where}: {reason}", member=member, path=path, node=node.name or "?")
