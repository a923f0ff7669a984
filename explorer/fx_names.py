"""The names torch gives a program's nodes when it loads the file: Model Explorer's node ids.

Model Explorer's own ``.pt2`` adapter (which needs torch) names each node after its FX node, so
node data written for one loads on the other only when the ids agree. These are facts of torch's
deserializer (``torch._export.serde.serialize``) and of FX's name allocation
(``torch.fx.graph._Namespace.create_name``), restated without torch:

* a placeholder is named after its graph input;
* a node is named after ``Node.name`` where the file has it (schema 8.x, torch 2.6 on); else after
  its one output value when it has exactly one; else FX makes a name from the target;
* a node with several outputs (a list, or several values) is followed by one ``getitem`` node per
  value, named after the value (a nested list first gets an FX-made ``getitem`` of its own); a
  higher-order call whose single tensor is returned as a one-element tuple gets one too;
* a node whose only output is ``as_none`` is renamed ``<target>_unused``;
* names are made unique per graph: ``name``, then ``name_1``, ``name_2``...; a Python keyword
  or builtin (``sum``, ``input``) starts at ``_1``;
* the graph's output node is ``output``.
"""

from __future__ import annotations

import builtins
import keyword
import re

__all__ = ["FxNames", "target_base_name", "target_label"]

_NAME = re.compile(r"^([a-zA-Z_][0-9a-zA-Z_]*?)(?:_(\d+))?$")
_ILLEGAL = re.compile(r"[^0-9a-zA-Z_]+")
_SNAKE = re.compile(r"(?<=[a-z])([A-Z])")
_RESERVED = frozenset(keyword.kwlist) | frozenset(dir(builtins))


class FxNames:
    """One graph's name allocator, as FX's."""

    def __init__(self):
        self._used: set[str] = set()
        self._base_count: dict[str, int] = {}

    def keep(self, name: str) -> str:
        """Record ``name`` as given (a placeholder keeps its graph input's name)."""
        self._used.add(name)
        return name

    def create(self, candidate: str) -> str:
        match = _NAME.match(candidate)
        if match is None:
            candidate = _ILLEGAL.sub("_", candidate) or "_unnamed"
            if candidate[0].isdigit():
                candidate = f"_{candidate}"
            match = _NAME.match(candidate)
        base, num = match.group(1, 2)
        if num is None or candidate in self._used:
            num = self._base_count.get(base, 0)
            if candidate in _RESERVED:
                num += 1
                candidate = f"{base}_{num}"
        else:
            num = int(num)
        while candidate in self._used:
            num += 1
            candidate = f"{base}_{num}"
        self._used.add(candidate)
        self._base_count[base] = num
        return candidate


def _op_parts(target: str) -> list[str]:
    """``torch.ops.aten.add.Tensor`` -> [aten, add, Tensor]; ``torch.ops.higher_order.cond`` ->
    [higher_order, cond]; ``_operator.getitem`` -> [getitem]."""
    if target.startswith("torch.ops."):
        return target[len("torch.ops."):].split(".")
    return [target.rsplit(".", 1)[-1]]


def target_base_name(target: str) -> str:
    """What FX names a node of ``target`` when it is given no name: the operator's ``__name__``
    (``add.Tensor``, ``cond``, ``getitem``) in snake case."""
    parts = _op_parts(target)
    op = ".".join(parts[1:]) if len(parts) > 2 or (len(parts) == 2 and parts[0] != "higher_order") else parts[-1]
    return _SNAKE.sub(r"_\1", op).lower()


def target_label(target: str) -> str:
    """A node's label, as Model Explorer's ``.pt2`` adapter writes it: the overload packet
    (``aten.linear``), a higher-order operator's name (``cond``), or the function's (``getitem``)."""
    parts = _op_parts(target)
    label = f"{parts[0]}.{parts[1]}" if len(parts) >= 3 else parts[-1]
    return label.replace("/", "\u2215")  # Model Explorer reads "/" as a namespace separator
