"""A verification's per-value errors as Model Explorer node data: where the converted file parts
from its reference, node by node.

``pt2x verify --locate`` compares every value the converted file and the reference both hold
(paired by name and shape, never by origin stamp alone: a tensor a rewrite changed carries the
name of the value it now holds, so a convolution with a BatchNorm folded in is compared as the
BatchNorm's output, and the convolution's own value is not compared at all). ``overlays`` turns
the report's ``values`` into node data (``node_data_builder.ModelNodeData``/``GraphNodeData``
as JSON):

* ``ratio``, on the program's graph (node ids as ``program_graph`` and Model Explorer's own
  ``.pt2`` adapter give them): each compared ATen node's worst error over what its tolerance allows
  (``verification/compare.py``; 1 is the tolerance), colored in ``BANDS``: within it (at most a
  tenth of it), near it (up to the tolerance), past it; the first diverging node in ``FIRST``;
* ``max_abs`` and ``max_rel``, the same nodes and colors, with the raw differences as values;
* ``converted``: the ratio on the converted file's main graph, keyed as Model Explorer's ONNX
  adapter (``model-explorer-onnx``: the ONNX node's name, ``<node_i>`` when it has none) and its
  TFLite adapter (the operator's index) name nodes. A converted node that writes a compared value
  takes that value's; one that writes only values the reference lacks (a lowering's inner nodes,
  a layout transpose) takes the value of the first compared value it helps compute (the nodes
  ``verify`` lists under "computed by"); an ONNX node in neither takes the value of the ATen node
  its origin stamp names, when that node's value was compared.

Values the runs do not share (a view TFLite never materializes, a value inside a ``cond`` body)
have no entry: the node is left uncolored, which means "not compared", never "equal".
"""

from __future__ import annotations

import math

from ..verification.report import Report, ValueDifference

__all__ = ["BANDS", "FIRST", "RATIO_CAP", "overlays", "overlay_files", "band", "converted_node_id"]

BANDS: tuple[tuple[float, str, str], ...] = (
    # (upper bound of the ratio, background, name)
    (0.1, "#a5d6a7", "within tolerance"),
    (1.0, "#ffe082", "near tolerance"),
    (math.inf, "#ef9a9a", "past tolerance"),
)
"""Error over tolerance -> color. Healthy float32 conversions sit far below a tenth of the
tolerance (ONNX Runtime against torch eager: about 1e-3 of it; LiteRT's XNNPACK: about 1e-2)."""

FIRST = ("#b71c1c", "#ffffff")
"""Background and text of the first diverging node (and of its ATen operator node, for a getitem)."""

RATIO_CAP = 1e6
"""Ratios are written at most this (JSON has no infinity: a shape that differs is infinitely far)."""


def band(ratio: float) -> tuple[str, str]:
    """(background color, band name) of an error-over-tolerance ratio."""
    for bound, color, name in BANDS:
        if ratio <= bound:
            return color, name
    return BANDS[-1][1], BANDS[-1][2]


def _threshold_items() -> list[dict]:
    return [{"value": min(bound, RATIO_CAP), "bgColor": color} for bound, color, _ in BANDS]


def _graph_node_data(name: str, results: dict[str, dict], thresholds: bool) -> dict:
    data = {"name": name, "results": results}
    if thresholds:
        data["thresholds"] = _threshold_items()
    return data


def _result(value: float, ratio: float, first: bool) -> dict:
    bg, text = FIRST if first else (band(ratio)[0], None)
    out = {"value": min(float(value), RATIO_CAP) if math.isfinite(value) else RATIO_CAP, "bgColor": bg}
    if text:
        out["textColor"] = text
    return out


# ----------------------------------------------------------------------------- program graph

def _value_nodes(graph: dict) -> tuple[dict[str, str], dict[str, str]]:
    """Value name -> the node holding it; a getitem node -> the node it takes an item of."""
    holder, item_of = {}, {}
    for node in graph["nodes"]:
        for meta in node.get("outputsMetadata", ()):
            for kv in meta["attrs"]:
                if kv["key"] == "tensor_name":
                    holder[kv["value"]] = node["id"]
        if node["label"] == "getitem" and node.get("incomingEdges"):
            item_of[node["id"]] = node["incomingEdges"][0]["sourceNodeId"]
    return holder, item_of


def _program_results(report: Report, graph: dict, field: str) -> dict[str, dict]:
    holder, item_of = _value_nodes(graph)
    first = report.divergence.tensor if report.divergence else None
    if first is not None and first not in holder:  # a value of the converted file only: its ATen node
        first = next((v.tensor for v in report.values if v.aten_node == report.divergence.aten_node
                      and v.tensor in holder), None)
    results: dict[str, dict] = {}
    worst: dict[str, ValueDifference] = {}  # a node of several outputs: its worst getitem
    for v in report.values:
        node = holder.get(v.tensor)
        if node is None or v.aten_node is None:
            continue
        results[node] = _result(getattr(v, field), v.ratio, v.tensor == first)
        op = item_of.get(node)
        if op is not None and (op not in worst or v.ratio > worst[op].ratio):
            worst[op] = v
    for op, v in worst.items():
        results[op] = _result(getattr(v, field), v.ratio, v.tensor == first)
    return results


# --------------------------------------------------------------------------- converted graph

def converted_node_id(target: str, key: str) -> str:
    """verify's name of a converted node (the ONNX node's name, ``#i`` for an unnamed one or a TFLite
    operator) -> the id Model Explorer's adapter gives it."""
    if key.startswith("#") and key[1:].isdigit():
        return key[1:] if target == "tflite" else f"<node_{key[1:]}>"
    return key


def _converted_results(report: Report, stamps: dict[str, str]) -> dict[str, dict]:
    """``stamps``: an ONNX node as verify names it -> the ATen node its origin stamp names ({} for TFLite)."""
    first = report.divergence.tensor if report.divergence else None
    target = report.target
    written: dict[str, list[ValueDifference]] = {}
    for v in report.values:  # the writer of each compared value: its worst, marked when one is the first
        written.setdefault(converted_node_id(target, v.converted_node), []).append(v)
    results: dict[str, dict] = {}
    for node, values in written.items():
        worst = max(values, key=lambda v: v.ratio)
        results[node] = _result(worst.ratio, worst.ratio, any(v.tensor == first for v in values))
    for v in report.values:  # then the nodes that helped compute it, the first value they feed
        for key in v.computed_by:
            results.setdefault(converted_node_id(target, key), _result(v.ratio, v.ratio, False))
    by_aten = {}
    for v in report.values:
        if v.aten_node is not None:
            by_aten.setdefault(v.aten_node, v)
    for key, aten in stamps.items():
        v = by_aten.get(aten)
        if v is not None:
            results.setdefault(converted_node_id(target, key), _result(v.ratio, v.ratio, False))
    return results


# ------------------------------------------------------------------------------------ entry

def overlays(report: Report, program_graph: dict, converted_stamps: dict[str, str] | None = None) -> dict[str, dict]:
    """Node data from a located ``report``: ``ratio``, ``max_abs``, ``max_rel`` (``ModelNodeData``
    for the program's main graph ``program_graph``) and ``converted`` (``GraphNodeData`` for the
    converted file's main graph, whichever id its adapter gives it)."""
    if not report.located:
        raise ValueError("node data needs a report made with locate=True")
    against = f"{report.target} vs {report.reference}"
    gid = program_graph["id"]
    out = {
        "ratio": {gid: _graph_node_data(f"error / tolerance ({against})", _program_results(report, program_graph, "ratio"), True)},
        "max_abs": {gid: _graph_node_data(f"max abs error ({against})", _program_results(report, program_graph, "max_abs"), False)},
        "max_rel": {gid: _graph_node_data(f"max rel error ({against})", _program_results(report, program_graph, "max_rel"), False)},
        "converted": _graph_node_data(f"error / tolerance ({against})",
                                      _converted_results(report, converted_stamps or {}), True),
    }
    return out


def overlay_files(report: Report, model, converted, out_path: str, model_name: str = "model") -> list[tuple[str, dict]]:
    """The node-data files of ``pt2x verify --locate --node-data OUT.json``, as (path, JSON):
    ``OUT.json`` (error / tolerance on the program's graph), ``OUT.max_abs.json``,
    ``OUT.max_rel.json``, and ``OUT.<onnx|tflite>.json`` (on the converted file's graph)."""
    from .program_graph import program_graphs

    mains = [g for g in program_graphs(model) if "/" not in g["id"]]  # subgraph ids hold their parents'
    main = mains[0] if len(mains) == 1 else next(g for g in mains if g["id"] == model_name)
    stamps = {}
    if report.target == "onnx":
        from ..verification.locate import onnx_node_origins
        from ..verification.runners import load_onnx

        stamps = onnx_node_origins(converted if hasattr(converted, "graph") else load_onnx(converted, report.converted))
    data = overlays(report, main, stamps)
    stem = out_path[: -len(".json")] if out_path.endswith(".json") else out_path
    return [(out_path, data["ratio"]), (f"{stem}.max_abs.json", data["max_abs"]),
            (f"{stem}.max_rel.json", data["max_rel"]), (f"{stem}.{report.target}.json", data["converted"])]
