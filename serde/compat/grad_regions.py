"""Grad-mode regions inlined for releases that cannot load ``wrap_with_set_grad_enabled``, where exact.

Why: torch 2.13 keeps a ``torch.no_grad()`` block (HF Llama/Qwen2's rotary embedding) as a
``torch.ops.higher_order.wrap_with_set_grad_enabled`` node holding a subgraph. torch 2.5 and 2.6
cannot load it (``releases.NODE_TARGETS_RUN_SINCE``), and they have no other form of a grad-mode
region: their ``deserialize_node`` accepts only sym ops, ``HigherOrderOperator`` and ``OpOverload``
targets ("Unsupported target type" for the builtin ``torch._C._set_grad_enabled``; 2.5.1's own
serializer refuses to write that node), and the HOP's module is not imported by ``import torch``.

The one form they load is the subgraph's nodes spliced into the graph, with no grad-mode marker.
That computes the same outputs; it also keeps autograd's answer when no tensor entering the region
can require grad, because then no value made inside it can either, whatever the grad mode. So a
region is inlined only when every tensor argument is an integer/bool tensor or a buffer/constant
input, every subgraph input and output has the name of the argument/result it stands for, and no
name the subgraph defines is taken in the enclosing graph; any other region stays, and the planner
refuses it naming the op (``unrunnable_nodes``). Plain JSON in; mutates the document it is given.
"""

from __future__ import annotations

from typing import Any

from ..findings import Finding
from .releases import NODE_TARGETS_RUN_SINCE

__all__ = ["inline_grad_regions", "GRAD_REGION_TARGET"]

GRAD_REGION_TARGET = "torch.ops.higher_order.wrap_with_set_grad_enabled"

NO_GRAD_DTYPES = frozenset({1, 2, 3, 4, 5, 12, 28, 34, 35})
"""``ScalarType`` codes (uint8, int8, int16, int32, int64, bool, uint16/32/64) of tensors that never require grad."""

_NO_GRAD_INPUT_KINDS = ("buffer", "tensor_constant")


def inline_grad_regions(doc: dict, version: tuple[int, int], label: str, member: str | None) -> list[Finding]:
    """Inline each top-level grad-mode region of ``doc`` that ``version`` cannot load, where exact."""
    if version >= NODE_TARGETS_RUN_SINCE[GRAD_REGION_TARGET][0]:
        return []
    gm = doc.get("graph_module")
    graph = gm.get("graph") if isinstance(gm, dict) else None
    if not isinstance(graph, dict) or not isinstance(graph.get("nodes"), list):
        return []
    no_grad_inputs = _no_grad_input_names(gm.get("signature"))
    inlined, kept = 0, []
    for node in graph["nodes"]:
        is_region = isinstance(node, dict) and node.get("target") == GRAD_REGION_TARGET
        sub = _inlinable_subgraph(node, graph, no_grad_inputs) if is_region else None
        if sub is None:
            kept.append(node)
            continue
        kept.extend(sub["nodes"])
        _merge_values(graph, sub)
        inlined += 1
    if not inlined:
        return []
    graph["nodes"] = kept
    return [Finding("warning", "target-inlined-grad-region",
                    f"{inlined} {GRAD_REGION_TARGET} region(s) inlined for torch {label}, which cannot load the op "
                    "(exact: no tensor entering them can require grad)", member, "graph_module.graph.nodes")]


def _no_grad_input_names(signature: Any) -> set[str]:
    """Names of graph inputs that are buffers or tensor constants."""
    names = set()
    specs = signature.get("input_specs") if isinstance(signature, dict) else None
    for spec in specs if isinstance(specs, list) else []:
        for kind in _NO_GRAD_INPUT_KINDS:
            arg = spec[kind].get("arg") if isinstance(spec, dict) and isinstance(spec.get(kind), dict) else None
            if isinstance(arg, dict) and isinstance(arg.get("name"), str):
                names.add(arg["name"])
    return names


def _tensor_names(args: Any) -> list[str] | None:
    """Names of a list of ``as_tensor`` arguments; None when any is another kind."""
    if not isinstance(args, list):
        return None
    names = []
    for a in args:
        t = a.get("as_tensor") if isinstance(a, dict) and len(a) == 1 else None
        if not isinstance(t, dict) or not isinstance(t.get("name"), str):
            return None
        names.append(t["name"])
    return names


def _inlinable_subgraph(node: dict, graph: dict, no_grad_inputs: set[str]) -> dict | None:
    """The region's subgraph when splicing it in is exact, else None."""
    inputs = node.get("inputs")
    if not isinstance(inputs, list) or len(inputs) < 2:
        return None
    args = [i.get("arg") if isinstance(i, dict) else None for i in inputs]
    mode, sub = args[0], _member(_member(args[1], "as_graph"), "graph")
    if not isinstance(mode, dict) or not isinstance(mode.get("as_bool"), bool) or not isinstance(sub, dict):
        return None
    arg_names, out_names = _tensor_names(args[2:]), _tensor_names(node.get("outputs"))
    if arg_names is None or out_names is None or not isinstance(sub.get("nodes"), list):
        return None
    if _tensor_names(sub.get("inputs")) != arg_names or _tensor_names(sub.get("outputs")) != out_names:
        return None
    values = graph.get("tensor_values")
    if not all(n in no_grad_inputs or _never_requires_grad(_member(_member(values, n), "dtype")) for n in arg_names):
        return None
    if _names_clash(graph, sub, set(arg_names) | set(out_names)):
        return None
    taken = {n.get("name") for n in graph["nodes"] if isinstance(n, dict)} - {None}
    if any(not isinstance(n, dict) or n.get("name") in taken for n in sub["nodes"]):
        return None
    return sub


def _member(x: Any, key: str) -> Any:
    """``x[key]`` when ``x`` is a dict, else None (a hostile file's shapes end in "not inlined")."""
    return x.get(key) if isinstance(x, dict) else None


def _never_requires_grad(dtype: Any) -> bool:
    return type(dtype) is int and dtype in NO_GRAD_DTYPES


_VALUE_TABLES = ("tensor_values", "sym_int_values", "sym_bool_values", "sym_float_values", "custom_obj_values")


def _names_clash(graph: dict, sub: dict, shared: set[str]) -> bool:
    """Whether a name the subgraph defines (other than the shared inputs/outputs) is taken outside it."""
    for table in _VALUE_TABLES:
        inner, outer = sub.get(table, None if table == "tensor_values" else {}), graph.get(table, {})
        if not isinstance(inner, dict) or not isinstance(outer, dict):
            return True
        if any(name in outer for name in inner if name not in shared):
            return True
    return False


def _merge_values(graph: dict, sub: dict) -> None:
    """The subgraph's value tables added to the graph's (shared names keep the graph's entry)."""
    for table in _VALUE_TABLES:
        inner = sub.get(table) or {}
        if inner:
            outer = graph.setdefault(table, {})
            for name, meta in inner.items():
                outer.setdefault(name, meta)
