"""A node's ``nn_module_stack`` as the modules it was called in, outermost first.

torch's serializer writes the stack as ``key,path,type`` entries joined with ``;`` (a fact of
its format; the type may hold commas inside brackets, ``Seq[int, int]``). The root module's
entry has an empty path. Read without torch, by ``verify --locate`` (a module path per node)
and the Model Explorer adapter (namespaces that collapse by module).
"""

from __future__ import annotations

from typing import NamedTuple

from ...schema import definitions as d
from ...serde.codec.stack_text import ENTRY_SEPARATOR, split_fields

__all__ = ["ModuleCall", "module_stack", "module_path"]

class ModuleCall(NamedTuple):
    key: str  # torch's key for the call (L__self___conv1)
    path: str  # the module's attribute path from the root ("" for the root, "layer1.0.conv1")
    type: str  # its class, qualified (torch.nn.modules.conv.Conv2d)


def module_stack(node: d.Node) -> list[ModuleCall]:
    """The calls ``node`` sits in, outermost first; [] where torch recorded none (inputs, bodies
    of ``cond``/``map``). An entry that is not ``key,path,type`` is left out, never guessed."""
    text = dict(node.metadata or {}).get("nn_module_stack")
    if not text:
        return []
    calls = []
    for entry in text.split(ENTRY_SEPARATOR):
        parts = split_fields(entry)
        if len(parts) == 3:
            calls.append(ModuleCall(*parts))
    return calls


def module_path(node: d.Node) -> str | None:
    """The innermost module's path ("" for the exported module itself), or None without a stack."""
    stack = module_stack(node)
    return stack[-1].path if stack else None
