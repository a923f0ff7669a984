"""Weight-only options for the ONNX target (``to_onnx(weights=...)``): float32 initializers
stored smaller, every operator still computing in float32. Runs on the assembled model.

* ``"int8"``: the weights of ``Conv``, ``ConvTranspose``, ``Gemm`` (B), ``MatMul`` (a constant
  second operand of rank >= 2) and the table ``Gather`` reads (embeddings) of at least ``MIN_ELEMENTS`` elements become symmetric per-channel
  int8 initializers (``weight_quant.quantize_symmetric``, along ``INT8_AXIS``) read through a
  per-axis ``DequantizeLinear`` (opset 13+) whose output keeps the weight's name: the standard
  ONNX weight-only form, which ONNX Runtime runs as float operators on the dequantized weights.
* ``"fp16"``: every float32 initializer of ``MIN_ELEMENTS`` and more is stored as float16 and read
  through ``Cast(to=FLOAT)``. ONNX has no float16 ``DequantizeLinear`` input; the Cast is exact and
  ONNX Runtime folds it into a float32 initializer when the session starts.

An initializer that cannot be stored so (``weight_quant.NotStorable``) stays float32 and is listed
in the model's ``pt2x.weights`` metadata, with what was stored.
"""

from __future__ import annotations

import json

import numpy as np
from onnx import TensorProto, helper, numpy_helper

from .graph_tools import attrs
from .lazy_initializers import array_of
from ..weight_quant import MIN_ELEMENTS, NotStorable, check_weight_option, describe, quantize_symmetric, to_float16

__all__ = ["INT8_AXIS", "METADATA_KEY", "store_weights", "describe_weights"]

METADATA_KEY = "pt2x.weights"


def _gemm_axis(node) -> int:
    trans_b = attrs(node).get("transB", 0)
    return 0 if trans_b else 1  # B is [N, K] transposed, else [K, N]: N is the output channel


# op type -> (the weight's input slot, its output-channel axis given the node and the weight's rank)
INT8_AXIS = {
    "Conv": (1, lambda node, rank: 0),  # [M, C/group, k...]
    "ConvTranspose": (1, lambda node, rank: 1),  # [C, M/group, k...]
    "Gemm": (1, lambda node, rank: _gemm_axis(node)),
    "MatMul": (1, lambda node, rank: rank - 1 if rank >= 2 else None),  # [..., K, N]
    "Gather": (0, lambda node, rank: 0),  # an embedding table [rows, ...]: a scale per row
}


def store_weights(m, weights: str) -> dict:
    """Rewrite ``m``'s float32 initializers as ``weights`` says, in place; returns the report
    (also written to the model's metadata under ``METADATA_KEY``)."""
    check_weight_option(weights)
    g = m.graph
    inits = {t.name: t for t in g.initializer if t.data_type == TensorProto.FLOAT}
    inits = {k: t for k, t in inits.items() if int(np.prod(t.dims)) >= MIN_ELEMENTS}
    for i in g.input:
        inits.pop(i.name, None)  # an initializer that is also a graph input can be overridden: leave it
    taken = _names(g)
    report = {"option": weights, "stored": {}, "kept_float": []}
    plan = _int8_plan(g, inits, report) if weights == "int8" else {name: (None, "float16") for name in inits}
    nodes, stored = [], {}
    for name, (axis, key) in plan.items():
        made = _store(inits[name], axis, taken, report, key)
        if made is not None:
            nodes.append(made[0])
            stored[name] = made[1]
    kept = [t for t in g.initializer if t.name not in stored]
    del g.initializer[:]
    g.initializer.extend(kept + [t for ts in stored.values() for t in ts])
    nodes += list(g.node)  # the new nodes before every reader
    del g.node[:]
    g.node.extend(nodes)
    _record(m, report)
    return report


def _names(g) -> set[str]:
    names = {t.name for t in g.initializer} | {i.name for i in g.input} | {o.name for o in g.output}
    for n in g.node:
        names.update(n.output)
        names.add(n.name)
    return names


def _fresh(base: str, taken: set[str]) -> str:
    name, k = base, 1
    while name in taken:
        name, k = f"{base}_{k}", k + 1
    taken.add(name)
    return name


def _int8_plan(g, inits: dict, report: dict) -> dict[str, tuple[int, str]]:
    """Initializer name -> (its output-channel axis, the report's key: the operators reading it as
    weights), for the weights of ``INT8_AXIS``' operators."""
    axes: dict[str, set] = {}
    readers: dict[str, set] = {}
    for node in g.node:
        slot, axis_of = INT8_AXIS.get(node.op_type, (None, None))
        if slot is None or len(node.input) <= slot or node.input[slot] not in inits:
            continue
        name = node.input[slot]
        axis = axis_of(node, len(inits[name].dims))
        if axis is not None:
            axes.setdefault(name, set()).add(axis)
            readers.setdefault(name, set()).add(node.op_type)
    plan = {}
    for name, found in axes.items():
        if len(found) == 1:
            plan[name] = (found.pop(), "/".join(sorted(readers[name])) + " int8")
        else:
            report["kept_float"].append(f"{name}: read as weights along different axes")
    return plan


def _store(t, axis: int | None, taken: set[str], report: dict, key: str):
    """(the node that makes ``t.name`` float32 again, the initializers it reads) for initializer
    ``t`` stored as float16 (``axis`` None) or int8 along ``axis``; None when it stays float32."""
    w = array_of(t)
    try:
        if axis is None:
            stored = [numpy_helper.from_array(to_float16(w), _fresh(f"{t.name}.fp16", taken))]
            node = helper.make_node("Cast", [stored[0].name], [t.name], to=TensorProto.FLOAT,
                                    name=_fresh(f"{t.name}.cast", taken))
        else:
            q, scale = quantize_symmetric(w, axis)
            stored = [numpy_helper.from_array(q, _fresh(f"{t.name}.int8", taken)),
                      numpy_helper.from_array(scale, _fresh(f"{t.name}.scale", taken)),
                      numpy_helper.from_array(np.zeros(scale.shape, np.int8), _fresh(f"{t.name}.zero_point", taken))]
            node = helper.make_node("DequantizeLinear", [s.name for s in stored], [t.name], axis=axis,
                                    name=_fresh(f"{t.name}.dequantize", taken))
    except NotStorable as e:
        report["kept_float"].append(f"{t.name}: {e}")
        return None
    report["stored"][key] = report["stored"].get(key, 0) + 1
    return node, stored


def describe_weights(m) -> list[str]:
    """What an ONNX model pt2x wrote with ``weights=`` stored (its metadata); [] for none."""
    value = next((p.value for p in m.metadata_props if p.key == METADATA_KEY), None)
    return describe(json.loads(value)) if value else []


def _record(m, report: dict) -> None:
    helper.set_model_props(m, {**{p.key: p.value for p in m.metadata_props},
                               METADATA_KEY: json.dumps(report, sort_keys=True)})
