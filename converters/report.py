"""The unsupported-operator report: one error naming every operator a backend cannot
convert, with counts and an example node each, instead of the first failure.

A converter calls ``missing_lowerings(view, backend)`` before it starts (targets with no
lowering at all), collects ``Unsupported`` raised by lowerings while converting
(``Problems.add``, done by the driver in ``lower.py``) and values the target cannot hold
(a graph input or output of a dtype it lacks, a script object: ``Problems.add_value``),
and ends with ``Problems.raise_if_any()``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..schema import definitions as d
from . import registry
from .errors import UnsupportedOpsError

__all__ = ["OpProblem", "Problems", "missing_lowerings", "is_custom_op"]

_BUILTIN_NAMESPACES = ("aten.", "prims.", "higher_order.", "_operator.", "math.", "builtins.", "torch.")


def is_custom_op(target: str) -> bool:
    """A target outside torch's own namespaces (``my_lib.my_op.default``): the user registers
    its lowering. Values reported with ``add_value`` ("tensor input") are not operators."""
    key = registry.canonical(target)
    return not key.startswith(_BUILTIN_NAMESPACES) and " " not in key


def _describe(node: d.Node) -> str:
    args = []
    for na in node.inputs:
        a = na.arg
        v = a.value
        if a.type == "as_tensor":
            s = v.name
        elif a.type == "as_tensors":
            s = "[" + ", ".join(t.name for t in v) + "]"
        elif a.type == "as_graph":
            s = f"<graph {v.name}>"
        elif a.type in ("as_sym_int", "as_sym_bool", "as_sym_float"):
            s = str(v.value)
        else:
            s = repr(v)
        args.append(f"{na.name}={s}" if na.name else s)
    name = node.name or "?"
    return f"{name} = {registry.canonical(node.target)}({', '.join(args)})"[:200]


@dataclass
class OpProblem:
    target: str  # canonical target
    count: int = 0
    example: str = ""  # the first node, printed
    reasons: list[str] = field(default_factory=list)  # distinct reasons given by lowerings


class Problems:
    """Accumulates unsupported nodes during a conversion."""

    def __init__(self, backend: str, member: str | None = None):
        self.backend = backend
        self.member = member  # the archive member holding the program, named in the error
        self.ops: dict[str, OpProblem] = {}

    def add(self, node: d.Node, reason: str | None = None) -> None:
        key = registry.canonical(node.target)
        p = self.ops.get(key)
        if p is None:
            p = self.ops[key] = OpProblem(key, example=_describe(node))
        p.count += 1
        if reason and reason not in p.reasons and len(p.reasons) < 3:
            p.reasons.append(reason)

    def add_value(self, what: str, name: str, reason: str) -> None:
        """A value the target cannot hold (``what``: "tensor input", "graph output", ...),
        reported like an unsupported operator."""
        self.add(d.Node(target=what, inputs=[], outputs=[], metadata={}, name=name), reason)

    def __bool__(self) -> bool:
        return bool(self.ops)

    def message(self) -> str:
        ops = sorted(self.ops.values(), key=lambda p: (-p.count, p.target))
        total = sum(p.count for p in ops)
        lines = [f"cannot convert to {self.backend}: {len(ops)} unsupported operator(s) in {total} node(s):"]
        for p in ops:
            lines.append(f"  {p.target}  x{p.count}  e.g. {p.example}")
            for r in p.reasons:
                lines.append(f"      reason: {r}")
        custom = [p.target for p in ops if is_custom_op(p.target)]
        if custom:
            lines.append("Custom operators need a lowering registered before converting, e.g.:")
            lines.append("    from pt2x.converters.registry import lowering")
            lines.append(f"    @lowering({self.backend!r}, {custom[0]!r})")
            lines.append("    def my_op(ctx, node): ...   # see pt2x/converters/README.md")
        return "\n".join(lines)

    def raise_if_any(self) -> None:
        if self.ops:
            raise UnsupportedOpsError(self.message(), list(self.ops.values()), member=self.member)


def missing_lowerings(view, backend: str, problems: Problems | None = None, *, known=None) -> Problems:
    """Every node (subgraphs included) whose target has no lowering for ``backend``.
    ``known(target)`` may accept targets the backend handles outside the registry."""
    problems = problems or Problems(backend, getattr(view, "member", None))
    for n in view.walk():
        if registry.get(backend, n.target) is None and not (known and known(n.target)):
            problems.add(n, "no lowering registered")
    return problems
