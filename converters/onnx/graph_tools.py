"""The ONNX-graph toolkit both targets use: the walk into subgraph attributes (If/Loop/Scan
bodies), a def-use index, unused-node pruning, and the origin stamps on each node.

Each pass is a small unit that edits a model in place; the list-level helpers under it serve the
ONNX target, which prunes its node list before a model exists. Subgraph recursion here is unbounded: an ONNX
model from outside pt2x has been through ``tflite/onnx_check.py`` (``MAX_ONNX_SUBGRAPH_DEPTH``)
before any of this reads it, and pt2x's own models nest only as deep as the program's
control flow (``MAX_SUBGRAPH_DEPTH``).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

import onnx
from onnx import AttributeProto, helper

__all__ = ["DefUse", "attrs", "subgraphs", "walk_nodes", "subgraph_reads", "free_vars", "live_nodes",
           "prune_unused", "ORIGIN_KEYS", "stamp", "origin_of", "copy_stamp", "carry_stamps"]


def attrs(node: onnx.NodeProto) -> dict:
    """The node's attributes, name -> value (``onnx.helper.get_attribute_value``): the one reader
    of ONNX attributes, for both targets."""
    return {a.name: helper.get_attribute_value(a) for a in node.attribute}


def subgraphs(node: onnx.NodeProto) -> Iterator[onnx.GraphProto]:
    """The graphs ``node`` holds in its attributes (If's branches, Loop's and Scan's bodies)."""
    for a in node.attribute:
        if a.type == AttributeProto.GRAPH:
            yield a.g
        elif a.type == AttributeProto.GRAPHS:
            yield from a.graphs


def walk_nodes(g: onnx.GraphProto) -> Iterator[onnx.NodeProto]:
    """Every node of ``g``, each followed by the nodes of its subgraphs, depth first."""
    for node in g.node:
        yield node
        for sg in subgraphs(node):
            yield from walk_nodes(sg)


def producers_of(nodes: Iterable[onnx.NodeProto], names: set[str]) -> dict[str, onnx.NodeProto]:
    """``DefUse.producers`` restricted to ``names``, without building the readers."""
    out = {}
    for n in nodes:
        for o in n.output:
            if o in names:
                out[o] = n
        if n.attribute:
            for sg in subgraphs(n):
                out.update(producers_of(sg.node, names))
    return out


def subgraph_reads(node: onnx.NodeProto) -> set[str]:
    """Every name a node of ``node``'s subgraphs (at any depth) reads: the values a body captures
    from the enclosing scopes, and its own values too (a superset, which is what pruning needs)."""
    names: set[str] = set()
    for sg in subgraphs(node):
        for n in walk_nodes(sg):
            names.update(i for i in n.input if i)
    return names


def free_vars(g: onnx.GraphProto) -> list[str]:
    """Names ``g`` (and the bodies nested in it) read but does not define, in reading order."""
    defined = {i.name for i in g.input} | {t.name for t in g.initializer}
    out: list[str] = []

    def need(n):
        if n and n not in defined and n not in out:
            out.append(n)

    for node in g.node:
        for i in node.input:
            need(i)
        for sg in subgraphs(node):
            for n in free_vars(sg):
                need(n)
        defined.update(o for o in node.output if o)
    return out


@dataclass
class DefUse:
    """Who defines and who reads each value name, across subgraphs: ``producers[name]`` is the
    node making it (at any depth); ``readers[name]`` lists a node once per input slot reading it,
    at any depth, and once more each enclosing node whose bodies read it (a capture is a read of
    the If/Loop/Scan node too); ``outputs`` are the graph's outputs, read by the caller."""

    producers: dict[str, onnx.NodeProto] = field(default_factory=dict)
    readers: dict[str, list[onnx.NodeProto]] = field(default_factory=dict)
    outputs: set[str] = field(default_factory=set)

    @classmethod
    def of_nodes(cls, nodes: Iterable[onnx.NodeProto], outputs: Iterable[str], *, nested: bool = True) -> DefUse:
        """The index of ``nodes``; ``nested=False`` leaves out the nodes inside their bodies (their
        captures still count as reads of the enclosing node)."""
        du = cls(outputs=set(outputs))
        du._add(nodes, nested)
        return du

    @classmethod
    def of_graph(cls, g: onnx.GraphProto, *, nested: bool = True) -> DefUse:
        return cls.of_nodes(g.node, [o.name for o in g.output], nested=nested)

    def _add(self, nodes: Iterable[onnx.NodeProto], nested: bool = True) -> None:
        readers, producers = self.readers, self.producers
        for n in nodes:
            for i in n.input:
                if i:
                    readers.setdefault(i, []).append(n)
            bodies = list(subgraphs(n)) if n.attribute else []
            if bodies:
                for i in sorted(subgraph_reads(n)):
                    readers.setdefault(i, []).append(n)
            for o in n.output:
                if o:
                    producers[o] = n
            if nested:
                for sg in bodies:
                    self._add(sg.node)

    def sole_reader(self, name: str) -> onnx.NodeProto | None:
        """The one node reading ``name`` where exactly one does and it is no graph output."""
        rs = self.readers.get(name, [])
        return rs[0] if len(rs) == 1 and name not in self.outputs else None

    def reader_node(self, name: str) -> onnx.NodeProto | None:
        """The one node reading ``name`` (in one input slot or several) where exactly one does and
        it is no graph output."""
        rs = self.readers.get(name, [])
        return rs[0] if rs and name not in self.outputs and all(r is rs[0] for r in rs) else None


def live_nodes(nodes: list[onnx.NodeProto], outputs: Iterable[str]) -> tuple[list[onnx.NodeProto], set[str]]:
    """The nodes of ``nodes`` (in order) that ``outputs`` need, directly or through subgraphs,
    and every name those nodes read with ``outputs`` (an initializer outside it is unused)."""
    used = set(outputs)
    keep = []
    for n in reversed(nodes):
        if any(o in used for o in n.output):
            keep.append(n)
            used.update(n.input)
            used.discard("")  # an omitted optional input names nothing
            if n.attribute:
                used |= subgraph_reads(n)
    keep.reverse()
    return keep, used


def prune_unused(m: onnx.ModelProto) -> None:
    """Drop the main graph's nodes and initializers nothing reads (graph outputs and subgraph
    captures count as reads)."""
    g = m.graph
    keep, used = live_nodes(list(g.node), [o.name for o in g.output])
    inits = [t for t in g.initializer if t.name in used]
    if len(keep) != len(g.node) or len(inits) != len(g.initializer):
        del g.node[:]
        g.node.extend(keep)
        del g.initializer[:]
        g.initializer.extend(inits)


# --- origin stamps: the ATen node each ONNX node was made from (docs/onnx.md) ---------------

ORIGIN_KEYS = ("pt2x.aten_node", "pt2x.aten_target", "pt2x.module_path")


def stamp(node: onnx.NodeProto, aten_node: str, aten_target: str, module_path: str | None) -> None:
    """Record on ``node`` (``metadata_props``) the ATen node it was made from, its target and the
    module path the node came from (absent where the program records none)."""
    stamp_entries(node, origin_entries(aten_node, aten_target, module_path))


def origin_entries(aten_node: str, aten_target: str, module_path: str | None) -> list[onnx.StringStringEntryProto]:
    """A stamp's ``metadata_props`` entries in ``ORIGIN_KEYS`` order, a None value left out: made
    once per ATen node, copied onto each ONNX node it made (``stamp_entries``)."""
    values = (aten_node, aten_target, module_path)
    return [onnx.StringStringEntryProto(key=k, value=v) for k, v in zip(ORIGIN_KEYS, values) if v is not None]


def stamp_entries(node: onnx.NodeProto, entries: list[onnx.StringStringEntryProto]) -> None:
    """Add each of ``entries`` whose key ``node`` does not hold yet (a fresh node: all, in one copy)."""
    if node.metadata_props:
        have = {p.key for p in node.metadata_props}
        entries = [e for e in entries if e.key not in have]
    node.metadata_props.extend(entries)


def origin_of(node: onnx.NodeProto) -> dict[str, str]:
    """The stamp of ``node``: its ``ORIGIN_KEYS`` entries present, by key ({} when unstamped)."""
    return {p.key: p.value for p in node.metadata_props if p.key in ORIGIN_KEYS}


def copy_stamp(src: onnx.NodeProto, dst: onnx.NodeProto) -> None:
    """``dst`` (a node rewritten from ``src``) keeps ``src``'s stamp."""
    have = {p.key for p in dst.metadata_props}
    for key, value in origin_of(src).items():
        if key not in have:
            dst.metadata_props.add(key=key, value=value)


def carry_stamps(src: onnx.ModelProto, dst: onnx.ModelProto) -> onnx.ModelProto:
    """Stamp ``dst``'s unstamped nodes from the node of ``src`` that made the same output: for
    a rewrite that drops ``metadata_props`` (onnx's version converter does) but keeps names.
    Returns ``dst``."""
    by_output = {o: n for n in walk_nodes(src.graph) if origin_of(n) for o in n.output if o}
    for n in walk_nodes(dst.graph):
        was = next((by_output[o] for o in n.output if o in by_output), None)
        if was is not None and not origin_of(n):
            copy_stamp(was, n)
    return dst
