"""The QDQ pass: a model's DequantizeLinear -> op -> QuantizeLinear patterns run in LiteRT's int8
kernels (``qdq_plan`` finds them, ``qdq_conv``/``qdq_elementwise``/``qdq_movement`` emit them).

``install(em)`` gives the emitter a mapper for each node the pass takes over (``Emitter.node_mappers``):

- a pattern's op: its int8 builtins, reading and writing int8 tensors with their parameters;
- its QuantizeLinear and fused Relu/Clip: nothing (the kernel wrote the quantized value);
- the QuantizeLinear of a quantized value computed in float: QUANTIZE (float -> int8);
- a DequantizeLinear that only patterns read: nothing; one that a float op also reads: DEQUANTIZE.

So QUANTIZE and DEQUANTIZE appear only where float and int8 regions meet. A model without any
pattern is left to ``ops.quantize`` (QuantizeLinear/DequantizeLinear computed exactly in float).
LiteRT's QUANTIZE rounds a value exactly halfway between two steps away from zero where ONNX
rounds it to even: at such ties the int8 model's input may differ by one step.

``QuantizationReport`` says which ops run in int8 and which stay float, and why; the converter
records it in the model's metadata (``pt2x`` entry, key ``quantization``); ``describe_tflite`` gives
the lines ``pt2x convert`` prints.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field

from ..core.emit import Emitter
from ..core.model import Tensor
from ..core.model import TensorType as T
from ..core.op_attributes import check_attributes
from .qdq_params import storage_quant
from .qdq_plan import Plan, find_patterns
from .qdq_registry import INT8_OPS, Pattern, append, clamp_to_six

__all__ = ["install", "QuantizationReport", "describe", "describe_tflite"]


@dataclass
class QuantizationReport:
    int8: dict[str, int] = field(default_factory=dict)  # ONNX op type -> how many run in int8
    float_ops: list[dict] = field(default_factory=list)  # {"op", "node", "reason"} of ops kept float

    def as_dict(self) -> dict:
        return {"int8": dict(sorted(self.int8.items())), "float": self.float_ops}


def _load_kernels() -> None:
    from . import qdq_conv, qdq_elementwise, qdq_movement  # noqa: F401  (fill INT8_OPS)


def install(em: Emitter) -> QuantizationReport | None:
    """Take over the QDQ nodes of ``em``'s graph; the report, or None for a graph without Q/DQ."""
    if not any(n.op_type in ("QuantizeLinear", "DequantizeLinear") for n in em.graph.node):
        return None
    _load_kernels()
    plan = find_patterns(em)
    report = QuantizationReport(dict(Counter(p.node.op_type for p in plan.patterns.values())),
                                [{"op": n.op_type, "node": n.name or n.output[0], "reason": r}
                                 for n, r in plan.float_ops])
    if plan.patterns:
        _take_over(em, plan)
    return report


def _take_over(em: Emitter, plan: Plan) -> None:
    for name, p in plan.patterns.items():
        em.node_mappers[name] = _kernel(p)
    for name in plan.absorbed:
        em.node_mappers[name] = _nothing
    for node in em.graph.node:
        out = node.output[0] if node.output else ""
        if out in plan.absorbed:
            continue
        if node.op_type == "QuantizeLinear" and out in plan.values:
            em.node_mappers[out] = _quantize(plan)
        elif node.op_type == "DequantizeLinear" and out in plan.dq_absorbed:
            em.node_mappers[out] = _nothing
        elif node.op_type == "DequantizeLinear" and node.input[0] in plan.values:
            em.node_mappers[out] = _dequantize


def _kernel(p: Pattern):
    def run(em: Emitter, node) -> None:
        check_attributes(node)
        INT8_OPS[node.op_type].emit(em, p)
        if p.six is not None:
            clamp_to_six(em, p)

    return run


def _nothing(em: Emitter, node) -> None:
    return None


def _quantize(plan: Plan):
    def run(em: Emitter, node) -> None:
        name = node.output[0]
        y = em.sub.add(Tensor(name, T.INT8, em.shape(name), quant=storage_quant(plan.values[name])))
        append(em, "QUANTIZE", [em.t(node.input[0])], [y])
        em.bind(name, y)

    return run


def _dequantize(em: Emitter, node) -> None:
    x = em.t(node.input[0])
    y = em.sub.add(Tensor(node.output[0], T.FLOAT32, em.shape(node.output[0])))
    append(em, "DEQUANTIZE", [x], [y])
    em.bind(node.output[0], y)


def describe_tflite(data: bytes) -> list[str]:
    """``describe`` of a .tflite pt2x wrote (its ``pt2x`` metadata); [] for one without Q/DQ."""
    from .. import schema_generated as fb

    model = fb.Model.GetRootAs(data, 0)
    for i in range(model.MetadataLength()):
        entry = model.Metadata(i)
        if entry.Name() == b"pt2x":
            return describe(model.Buffers(entry.Buffer()).DataAsNumpy().tobytes())
    return []


def describe(metadata: bytes | None) -> list[str]:
    """Lines saying which ops run in int8 and which stay float (from the ``pt2x`` metadata)."""
    if not metadata:
        return []
    q = json.loads(metadata).get("quantization")
    if not q:
        return []
    lines = [f"int8: {sum(q['int8'].values())} ops ({', '.join(f'{k} {v}' for k, v in q['int8'].items()) or 'none'})"]
    counts = Counter(f["op"] for f in q["float"])
    lines.append(f"float between DequantizeLinear/QuantizeLinear: {len(q['float'])} ops"
                 + (f" ({', '.join(f'{k} {v}' for k, v in sorted(counts.items()))})" if counts else ""))
    for f in q["float"]:
        lines.append(f"  {f['op']} {f['node']}: {f['reason']}")
    return lines
