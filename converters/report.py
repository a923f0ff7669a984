"""The unsupported-operator report: one error naming every operator a target cannot
convert, with counts and an example node each, instead of the first failure.

``Problems`` takes plain descriptions (the operator, the node's name, the reason, where the
node came from), so every target reports into it alike: the ATen front end describes its
nodes (``aten/failures.py``: ``report_node``, ``missing_lowerings``), the TFLite target its
ONNX nodes. A converter collects what its lowerings refuse (``Unsupported``) and the values
the target cannot hold (a graph input or output of a dtype it lacks: ``Problems.add_value``),
and ends with ``Problems.raise_if_any()``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .errors import UnsupportedOpsError

__all__ = ["OpProblem", "Problems", "is_custom_op"]

_BUILTIN_NAMESPACES = ("aten.", "prims.", "quantized_decomposed.", "higher_order.", "_operator.", "math.", "builtins.", "torch.")
_MAX_EXAMPLE_CHARS = 200  # the example node, printed
_MAX_REASONS = 3  # distinct reasons kept per operator


def is_custom_op(op: str) -> bool:
    """An operator outside torch's own namespaces (``my_lib.my_op.default``): the user registers
    its lowering. Values reported with ``add_value`` ("tensor input") are not operators."""
    return not op.startswith(_BUILTIN_NAMESPACES) and " " not in op


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

    def add(self, op: str, node: str, reason: str | None = None, *, call: str | None = None,
            origin: str | None = None) -> None:
        """One unsupported node: ``op`` (its operator as the report lists it, ``aten.add.Tensor``,
        ``ONNX Conv``), ``node`` (its name), ``reason`` (why it was refused), ``call`` (the node
        printed with its arguments, the operator's example; default ``node = op()``) and
        ``origin`` (the node it was made from, e.g. ``ATen node 'conv2d'``, added to the reason)."""
        p = self.ops.get(op)
        if p is None:
            p = self.ops[op] = OpProblem(op, example=(call or f"{node} = {op}()")[:_MAX_EXAMPLE_CHARS])
        p.count += 1
        if reason and origin:
            reason = f"{reason} (from {origin})"
        if reason and reason not in p.reasons and len(p.reasons) < _MAX_REASONS:
            p.reasons.append(reason)

    def add_value(self, what: str, name: str, reason: str) -> None:
        """A value the target cannot hold (``what``: "tensor input", "graph output", ...),
        reported like an unsupported operator."""
        self.add(what, name, reason)

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
            lines.append("    from pt2x.converters.aten.registry import lowering")
            lines.append(f"    @lowering({self.backend!r}, {custom[0]!r})")
            lines.append("    def my_op(ctx, node): ...   # see pt2x/converters/README.md")
        return "\n".join(lines)

    def raise_if_any(self) -> None:
        if self.ops:
            raise UnsupportedOpsError(self.message(), list(self.ops.values()), member=self.member)

