"""Node forms one torch release writes and another reads differently: respelled when exact, else blocked.

Why: besides fields and union members (``serde.compat.target``'s walk), releases differ in how
a node's outputs are spelled and in which ops they can run after loading. Facts from each
release's ``torch/_export/serde/serialize.py`` (``serialize_hoo_outputs``, ``deserialize_outputs``)
and from running the files in the real releases (``scripts/check_old_torch.py``):

* higher-order-op outputs: torch 2.6 has no ``Node.is_hop_single_tensor_return``; a 1-tuple
  result is one ``as_tensors`` list and a lone ``as_tensor`` is the tensor itself. 2.7+ write
  one output per element and the flag tells a lone tensor from a 1-tuple.
  ``respell_hop_outputs`` writes 2.6's form, ``flag_hop_outputs`` the 2.7+ one.
* ``unrunnable_nodes``: ops a release reads but cannot run (``releases.NODE_TARGETS_RUN_SINCE``).

Plain JSON in, findings out; the respelling functions mutate the document they are given.
"""

from __future__ import annotations

from typing import Any, Iterator

from ..findings import Finding
from .releases import NODE_TARGETS_RUN_SINCE

__all__ = ["nodes", "has_hop_flag", "respell_hop_outputs", "flag_hop_outputs", "unrunnable_nodes"]

_HOP_PREFIX = "torch.ops.higher_order."


def nodes(doc: Any) -> Iterator[dict]:
    """Every node dict of a program's JSON, subgraphs included (a node has "target" and "outputs")."""
    stack = [doc]
    while stack:
        x = stack.pop()
        if isinstance(x, dict):
            if "target" in x and "outputs" in x and "inputs" in x:
                yield x
            stack.extend(x.values())
        elif isinstance(x, list):
            stack.extend(x)


def has_hop_flag(snap: dict) -> bool:
    return "is_hop_single_tensor_return" in snap["types"].get("Node", {}).get("fields", {})


def respell_hop_outputs(doc: dict, label: str, member: str | None) -> list[Finding]:
    """Respell higher-order-op outputs for a reader without ``Node.is_hop_single_tensor_return`` (torch 2.6).

    From torch 2.7/2.8's serializer: a HOP returning a tuple writes one output per element,
    and ``is_hop_single_tensor_return`` tells a lone tensor from a 1-tuple of it. 2.6's
    reader has no flag: a single ``as_tensor`` output is the tensor itself, and a 1-tuple is
    written as one ``as_tensors`` list (``serialize_hoo_outputs``). So: flag true -> drop it;
    flag false with a lone ``as_tensor`` -> ``[as_tensors: [it]]``; a lone output of another
    kind with flag false has no 2.6 spelling (blocked). Mutates ``doc``.
    """
    rewritten = 0
    findings = []
    for node in nodes(doc):
        if "is_hop_single_tensor_return" not in node:
            continue
        single = node.pop("is_hop_single_tensor_return")
        outs = node["outputs"]
        if not str(node.get("target", "")).startswith(_HOP_PREFIX) or not isinstance(outs, list) or len(outs) != 1:
            if single:
                findings.append(Finding("error", "target-hop-output-form",
                                        f"{node.get('target')} marked as a single-tensor HOP return with {len(outs)} outputs; "
                                        f"torch {label} cannot be told", member, f"node {node.get('name', '?')}"))
            continue
        (out,) = outs
        kind = next(iter(out), None) if isinstance(out, dict) else None
        if single and kind == "as_tensor":
            rewritten += 1
        elif not single and kind == "as_tensor":
            node["outputs"] = [{"as_tensors": [out["as_tensor"]]}]
            rewritten += 1
        elif not single:
            findings.append(Finding(
                "error", "target-hop-output-form",
                f"{node['target']} returns a 1-tuple of {kind}; torch {label} reads a lone output as the value itself",
                member, f"node {node.get('name', '?')}"))
    if rewritten:
        findings.append(Finding(
            "warning", "target-rewritten-hop-outputs",
            f"outputs of {rewritten} higher-order op node(s) respelled in torch {label}'s form "
            "(a 1-tuple as one tensor list; exact)", member, "Node.outputs"))
    return findings


def flag_hop_outputs(doc: dict, label: str, member: str | None, *, rewrite: bool) -> list[Finding]:
    """Torch 2.6's higher-order-op outputs for a reader with ``Node.is_hop_single_tensor_return`` (2.7+).

    A HOP node written by 2.6 has no flag: its 1-tuple result is one ``as_tensors`` list and
    a lone ``as_tensor`` is the tensor itself. 2.7+ readers take a missing flag as "a 1-tuple"
    (2.7 then misreads a lone tensor; 2.8+ also fails on the list). Respelled exactly:
    ``[as_tensors: [t]]`` -> ``[as_tensor: t]`` with the flag false, a lone ``as_tensor`` gets
    the flag true. In check mode each such node is a blocker (what the reader does is wrong).
    Mutates ``doc`` when ``rewrite``.
    """
    found = []
    for node in nodes(doc):
        outs = node["outputs"]
        if ("is_hop_single_tensor_return" in node or not str(node.get("target", "")).startswith(_HOP_PREFIX)
                or not isinstance(outs, list) or len(outs) != 1 or not isinstance(outs[0], dict)):
            continue
        kind = next(iter(outs[0]), None)
        if kind == "as_tensors" and isinstance(outs[0]["as_tensors"], list) and len(outs[0]["as_tensors"]) == 1:
            found.append(node)
            if rewrite:
                node["outputs"] = [{"as_tensor": outs[0]["as_tensors"][0]}]
                node["is_hop_single_tensor_return"] = False
        elif kind == "as_tensor":
            found.append(node)
            if rewrite:
                node["is_hop_single_tensor_return"] = True
    if not found:
        return []
    if rewrite:
        return [Finding("warning", "target-rewritten-hop-outputs",
                        f"outputs of {len(found)} higher-order op node(s) written in torch 2.6's form respelled for "
                        f"torch {label} (is_hop_single_tensor_return set; exact)", member, "Node.outputs")]
    return [Finding("error", "target-hop-output-form",
                    f"{len(found)} higher-order op node(s) ({found[0]['target']}...) in torch 2.6's output form, without "
                    f"is_hop_single_tensor_return; torch {label} misreads or rejects it (convert --to pt2 respells it)",
                    member, "Node.outputs")]


def unrunnable_nodes(doc: Any, version: tuple[int, int], label: str, member: str | None) -> list[Finding]:
    """Blockers for node targets the release reads but cannot run (``NODE_TARGETS_RUN_SINCE``)."""
    counts: dict[str, int] = {}
    for node in nodes(doc):
        target = node.get("target")
        if isinstance(target, str) and target in NODE_TARGETS_RUN_SINCE and version < NODE_TARGETS_RUN_SINCE[target][0]:
            counts[target] = counts.get(target, 0) + 1
    return [Finding("error", "target-unrunnable-node",
                    f"{n} {target} node(s): torch {label} cannot run them: {NODE_TARGETS_RUN_SINCE[target][1]}",
                    member, "graph_module.graph.nodes")
            for target, n in counts.items()]
