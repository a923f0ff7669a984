"""A static picture of a program for people without Model Explorer: ``pt2x inspect M.pt2 --graph OUT.svg``.

The main graph (``program_graph``) is drawn with Graphviz's ``dot`` (Debian's ``graphviz``; a
``.dot`` output needs no Graphviz), collapsed by module to a readable size: the deepest module
level at which the picture has at most ``MAX_BOXES`` boxes is folded: every node in a module of
that level is drawn as its module's box (``layer1.0``, with its class and how many operators it holds).
Weights and ``getitem`` nodes are not drawn (a box counts its weights); edges between boxes are
drawn once. With node data (``--node-data``, as ``pt2x verify --node-data`` writes it) each box
takes the color of its worst node and says its error over the tolerance, and the box holding the
first diverging node is drawn as that node is in Model Explorer (``overlay.FIRST``).

Every name is escaped before it reaches ``dot``; ``dot`` reads the graph from its standard input
and runs with a time limit.
"""

from __future__ import annotations

import os
import shutil
import subprocess

from .overlay import FIRST

__all__ = ["MAX_BOXES", "dot_text", "write_picture", "DOT_TIMEOUT_S"]

MAX_BOXES = 60
DOT_TIMEOUT_S = 120.0
_MAX_LABEL = 48  # characters of a name shown in a box
_WEIGHT_KINDS = {"parameter", "buffer", "tensor constant"}
_FORMATS = {".svg": "svg", ".png": "png"}


def _attr(node: dict, key: str) -> str | None:
    return next((kv["value"] for kv in node.get("attrs", ()) if kv["key"] == key), None)


def _short(text: str) -> str:
    return text if len(text) <= _MAX_LABEL else text[: _MAX_LABEL - 3] + "..."


def _quoted(text: str) -> str:
    """``text`` as a DOT string: backslashes and quotes escaped, line breaks as ``\\n``, other
    control characters dropped."""
    out = []
    for c in text:
        if c in '\\"':
            out.append("\\" + c)
        elif c == "\n":
            out.append("\\n")
        elif c.isprintable():
            out.append(c)
    return '"' + "".join(out) + '"'


def _graph_data(node_data: dict | None, graph_id: str) -> dict:
    """The node data for ``graph_id`` from a ``ModelNodeData`` (by graph id) or a ``GraphNodeData``
    (one graph) dict."""
    if not node_data:
        return {}
    if isinstance(node_data.get("results"), dict) and "results" not in node_data["results"]:
        return node_data
    return node_data.get(graph_id) or {}


def _value_text(name: str, value: float) -> str:
    """A result as a box says it: ``14.3 x tol`` for an error-over-tolerance overlay."""
    return f"{value:.3g} x tol" if name.startswith("error / tolerance") else f"{value:.3g}"


def _box_of(namespace: str, depth: int) -> str:
    return "/".join(namespace.split("/")[:depth]) if namespace else ""


def _drawn(graph: dict) -> list[dict]:
    """The nodes drawn: no weights, no getitems."""
    return [n for n in graph["nodes"] if n["label"] != "getitem" and _attr(n, "kind") not in _WEIGHT_KINDS]


def _levels(namespace: str) -> int:
    return len(namespace.split("/")) if namespace else 0


def _box(node: dict, depth: int) -> str:
    """What ``node`` is drawn as when the modules ``depth`` levels deep are folded: the box of its
    module at that level, or itself when it sits higher."""
    return "module:" + _box_of(node["namespace"], depth) if _levels(node["namespace"]) >= depth else node["id"]


def _depth(nodes: list[dict]) -> int:
    """The deepest module level to fold at which the picture has at most ``MAX_BOXES`` boxes (at
    least 1: top-level modules are always folded when the picture is larger; one past the deepest
    module: nothing folded)."""
    best = 1
    for depth in range(1, max((_levels(n["namespace"]) for n in nodes), default=0) + 2):
        if len({_box(n, depth) for n in nodes}) > MAX_BOXES:
            break
        best = depth
    return best


def dot_text(graph: dict, node_data: dict | None = None) -> str:
    """The DOT source of ``graph`` (a Model Explorer graph dict), collapsed by module, colored by
    ``node_data``."""
    data = _graph_data(node_data, graph["id"])
    results, value_name = data.get("results", {}), str(data.get("name", ""))
    module_attrs = graph.get("groupNodeAttributes") or {}
    nodes = _drawn(graph)
    depth = _depth(nodes)
    box: dict[str, str] = {}  # node id -> the box drawn for it
    members: dict[str, list[dict]] = {}
    for n in nodes:
        b = _box(n, depth)
        box[n["id"]] = b
        members.setdefault(b, []).append(n)
    # a getitem or a weight is drawn as what it belongs to: its source, or the box of its readers
    item_source = {n["id"]: n["incomingEdges"][0]["sourceNodeId"] for n in graph["nodes"]
                   if n["label"] == "getitem" and n.get("incomingEdges")}
    weights = {n["id"]: n for n in graph["nodes"] if _attr(n, "kind") in _WEIGHT_KINDS}

    def drawn_as(node_id: str) -> str | None:
        seen = 0
        while node_id in item_source and seen < 64:
            node_id, seen = item_source[node_id], seen + 1
        return box.get(node_id)

    lines = ["digraph program {", '  graph [rankdir=TB, fontname="Helvetica", nodesep=0.25, ranksep=0.35];',
             '  node [shape=box, style="rounded,filled", fillcolor="#ffffff", fontname="Helvetica", fontsize=10];',
             '  edge [color="#607d8b", arrowsize=0.6];']
    weight_count: dict[str, int] = {}
    box_results: dict[str, list[dict]] = {}  # box -> the node data of the nodes drawn as it
    edges: set[tuple[str, str]] = set()
    for n in graph["nodes"]:
        target = drawn_as(n["id"])
        if target is None:
            continue
        if n["id"] in results:
            box_results.setdefault(target, []).append(results[n["id"]])
        for e in n.get("incomingEdges", ()):
            src = e["sourceNodeId"]
            if src in weights:
                weight_count[target] = weight_count.get(target, 0) + 1
                continue
            source = drawn_as(src)
            if source is not None and source != target:
                edges.add((source, target))
    for b, group in members.items():
        lines.append(f"  {_quoted(b)} [{_box_style(b, group, box_results.get(b, []), value_name, module_attrs, weight_count.get(b, 0))}];")
    order = {b: i for i, b in enumerate(members)}
    for s, t in sorted(edges, key=lambda e: (order[e[0]], order[e[1]])):
        lines.append(f"  {_quoted(s)} -> {_quoted(t)};")
    lines.append("}")
    return "\n".join(lines) + "\n"


def _box_style(b: str, group: list[dict], found: list[dict], value_name: str, module_attrs: dict, weights: int) -> str:
    """A box's DOT attributes: its label (a module's path, class and size, or a node's id and
    label), and the color of its worst node data (``found``), the first divergence first."""
    if b.startswith("module:"):
        namespace = b[len("module:"):]
        info = module_attrs.get(namespace, {})
        label = [_short(info.get("module", namespace.replace("/", "."))), _short(info.get("class", "").rsplit(".", 1)[-1]),
                 f"{len(group)} ops"]
        shape = ', shape=box3d'
    else:
        n = group[0]
        label = [_short(n["id"])] + ([_short(n["label"])] if n["label"] != n["id"] else [])
        shape = ', shape=ellipse' if _attr(n, "kind") or n["label"] == "output" else ""
    if weights:
        label.append(f"{weights} weight{'s' if weights > 1 else ''}")
    style = f"label={_quoted(chr(10).join(x for x in label if x))}{shape}"
    if found:
        first = [r for r in found if r.get("bgColor") == FIRST[0]]
        worst = first[0] if first else max(found, key=lambda r: r.get("value", 0))
        label.append(("first divergence: " if first else "") + _value_text(value_name, worst["value"]))
        style = f"label={_quoted(chr(10).join(x for x in label if x))}{shape}, fillcolor={_quoted(worst.get('bgColor', '#ffffff'))}"
        if worst.get("textColor"):
            style += f", fontcolor={_quoted(worst['textColor'])}"
        if first:
            style += ", penwidth=2.5"
    return style


def write_picture(graph: dict, out: str, node_data: dict | None = None) -> None:
    """Write the picture of ``graph`` to ``out``: ``.svg`` or ``.png`` (Graphviz's ``dot``), or
    ``.dot`` (the DOT source). Raises ``Pt2UsageError`` for another suffix or without ``dot``."""
    from ..serde.atomic_write import write_atomically
    from ..serde.errors import Pt2UsageError

    suffix = os.path.splitext(out)[1].lower()
    text = dot_text(graph, node_data)
    if suffix == ".dot":
        write_atomically(out, lambda f: f.write(text.encode("utf-8")))
        return
    if suffix not in _FORMATS:
        raise Pt2UsageError(f"cannot write {out}: the picture is .svg, .png or .dot")
    dot = shutil.which("dot")
    if dot is None:
        raise Pt2UsageError("drawing a picture needs Graphviz's dot (Debian: apt-get install graphviz); "
                            "--graph OUT.dot writes the DOT source without it")
    try:
        proc = subprocess.run([dot, f"-T{_FORMATS[suffix]}"], input=text.encode("utf-8"), capture_output=True,
                              timeout=DOT_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise Pt2UsageError(f"Graphviz's dot took longer than {DOT_TIMEOUT_S:g} s") from None
    if proc.returncode != 0:
        tail = proc.stderr.decode(errors="replace").strip().splitlines()[-1:] or [""]
        raise Pt2UsageError(f"Graphviz's dot failed (exit {proc.returncode}: {tail[0][:200]})")
    write_atomically(out, lambda f: f.write(proc.stdout))
