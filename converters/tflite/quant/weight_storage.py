"""Weight-only storage options for a float program (``to_tflite(weights=...)``): the float32
constants of a converted ``Program`` stored smaller, activations staying float32.

* ``"fp16"``: every float32 constant of at least ``MIN_ELEMENTS`` elements (``..weight_quant``) is stored as float16
  and read through a ``DEQUANTIZE`` (float16 -> float32), as TFLite's own converter writes
  float16 weights. LiteRT dequantizes a constant once; XNNPACK folds the DEQUANTIZE of a static
  float16 tensor into the weights it packs, so the partitions are those of the float file.
* ``"int8"``: dynamic-range quantization. The weights of the operators in ``INT8_WEIGHTS`` (and the table a GATHER reads: embeddings) are
  stored as symmetric per-channel int8 (zero point 0, scale ``max|w| / 127`` per output channel,
  written as TFLite quantization parameters). Where LiteRT has a hybrid kernel (float input, int8
  weights) the operator reads the int8 tensor itself (``route`` ``"hybrid"``); elsewhere the int8
  tensor is read through a ``DEQUANTIZE`` (``"dequantize"``). Other constants stay float32.

Only constants holding the values of an ONNX initializer (the program's weights, or a fold of
them: transposed, reshaped, sliced by the ONNX graph) are stored: ``store_weights``' ``sources``,
compared by an order-free fingerprint of their float32 bit patterns, so a transposed weight
matches. Constants a mapper builds (a resize's interpolation matrix, a DFT's cos/sin matrix, a
gate's slice of an RNN weight) stay float32.

A constant that cannot be stored so keeps float32 and is listed in the returned report: float16
holds no finite value above 65504, int8 no non-finite value, and a channel whose largest magnitude
is too small for a float32 scale keeps its tensor float. An all-zero channel gets scale 1 (its
weights are 0 exactly). This pass runs after the layout and shape passes, on the tensors those
chose; it adds operators but never reorders them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import numpy as np

from ...onnx.lazy_initializers import array_of
from ...weight_quant import MIN_ELEMENTS, NotStorable, check_weight_option, describe, quantize_symmetric, to_float16
from ..core.model import Op, Program, Quantization, Subgraph, Tensor, TensorType
from ..core.op_versions import dequantize_version, hybrid_version

__all__ = ["INT8_WEIGHTS", "WeightReport", "store_weights", "METADATA_KEY", "describe_weights"]

METADATA_KEY = "weights"  # the report's entry in the file's "pt2x" metadata


@dataclass(frozen=True)
class Int8Weight:
    """Where an operator reads its weights: the input slot, the weight's output-channel axis
    (TFLite's ``quantized_dimension``) and the route (``"hybrid"``: the float operator reads int8
    weights itself, ``"dequantize"``: through a DEQUANTIZE to float32)."""

    slot: int
    axis: int
    route: str


# measured with ai-edge-litert 2.3.0 (tests/converters/test_tflite_weights.py checks each route)
INT8_WEIGHTS = {
    "CONV_2D": Int8Weight(1, 0, "hybrid"),  # filter [O, H, W, I]
    "DEPTHWISE_CONV_2D": Int8Weight(1, 3, "dequantize"),  # filter [1, H, W, O]
    "FULLY_CONNECTED": Int8Weight(1, 0, "hybrid"),  # weights [O, I]
    "BATCH_MATMUL": Int8Weight(1, -1, "dequantize"),  # rhs [..., K, N]
    "TRANSPOSE_CONV": Int8Weight(1, 0, "dequantize"),  # filter [O, H, W, I]
    "CONV_3D": Int8Weight(1, 4, "dequantize"),  # filter [D, H, W, I, O]
    "GATHER": Int8Weight(0, 0, "dequantize"),  # an embedding table [rows, ...]: a scale per row
}


@dataclass
class WeightReport:
    """What the pass did: per route, the operator codes whose weights it stored (with counts),
    and the constants it left float32 with the reason."""

    option: str
    stored: dict[str, int] = field(default_factory=dict)  # "CONV_2D hybrid" / "float16" -> count
    kept_float: list[str] = field(default_factory=list)

    def count(self, key: str) -> None:
        self.stored[key] = self.stored.get(key, 0) + 1


def store_weights(program: Program, weights: str, sources=None) -> WeightReport:
    """Rewrite ``program``'s float32 constants as ``weights`` says (``WEIGHT_OPTIONS``); the
    report is also recorded in the file's ``pt2x`` metadata under ``METADATA_KEY``. ``sources``:
    the arrays the stored constants must hold the values of (``onnx_weights``); None: any."""
    check_weight_option(weights)
    report = WeightReport(weights)
    known = None if sources is None else {_fingerprint(a) for a in sources if a.size >= MIN_ELEMENTS}
    for sub in program.subgraphs:
        (_store_fp16 if weights == "fp16" else _store_int8)(sub, report, known)
    _record(program, report)
    return report


def describe_weights(data: bytes) -> list[str]:
    """What a .tflite pt2x wrote with ``weights=`` stored (its ``pt2x`` metadata); [] for none."""
    from .. import schema_generated as fb

    model = fb.Model.GetRootAs(data, 0)
    for i in range(model.MetadataLength()):
        entry = model.Metadata(i)
        if entry.Name() == b"pt2x":
            return describe(json.loads(model.Buffers(entry.Buffer()).DataAsNumpy().tobytes()).get(METADATA_KEY))
    return []


def _record(program: Program, report: WeightReport) -> None:
    meta = json.loads(program.metadata["pt2x"]) if "pt2x" in program.metadata else {}
    meta[METADATA_KEY] = {"option": report.option, "stored": report.stored, "kept_float": report.kept_float}
    program.metadata["pt2x"] = json.dumps(meta, sort_keys=True).encode()


def onnx_weights(model) -> list[np.ndarray]:
    """The float initializers of an ONNX model and of the graphs inside it, as float32 arrays."""
    from onnx import AttributeProto, TensorProto

    floats = (TensorProto.FLOAT, TensorProto.FLOAT16, TensorProto.BFLOAT16, TensorProto.DOUBLE)
    out, graphs = [], [model.graph]
    while graphs:
        g = graphs.pop()
        out += [array_of(t).astype(np.float32) for t in g.initializer if t.data_type in floats]
        graphs += [a.g for n in g.node for a in n.attribute if a.type == AttributeProto.GRAPH]
        graphs += [x for n in g.node for a in n.attribute if a.type == AttributeProto.GRAPHS for x in a.graphs]
    return out


def _fingerprint(a: np.ndarray) -> tuple[int, int, int]:
    """The same for any order of the same float32 values (sums of their bit patterns, mod 2**64)."""
    bits = np.ascontiguousarray(a, np.float32).view(np.uint32).ravel().astype(np.uint64)
    return a.size, int(bits.sum(dtype=np.uint64)), int((bits * bits).sum(dtype=np.uint64))


def _large_float_constants(sub: Subgraph, known) -> dict[int, list[tuple[Op, int]]]:
    """Float32 constants of ``MIN_ELEMENTS`` and more (holding a ``known`` array's values, when
    given) -> their readers (op, slot), in op order; a subgraph input or output is left alone."""
    edges = set(sub.inputs) | set(sub.outputs)
    position = {id(op): k for k, op in enumerate(sub.ops)}
    found: dict[int, list[tuple[Op, int]]] = {}
    for i, ops in sub.uses.readers.items():
        t = sub.tensors[i] if i >= 0 and ops else None
        if (t is None or i in edges or t.data is None or t.dtype != TensorType.FLOAT32
                or t.data.size < MIN_ELEMENTS or (known is not None and _fingerprint(t.data) not in known)):
            continue
        distinct = {id(op): op for op in ops}.values()
        found[i] = sorted(((op, slot) for op in distinct for slot, j in enumerate(op.inputs) if j == i),
                          key=lambda r: (position[id(r[0])], r[1]))
    return dict(sorted(found.items(), key=lambda kv: (position[id(kv[1][0][0])], kv[1][0][1])))


def _dequantized(sub: Subgraph, index: int, stored: Tensor, first_reader: Op) -> Op:
    """Tensor ``index`` becomes the float32 output of a DEQUANTIZE of ``stored`` (added), placed
    right before ``first_reader`` (so XNNPACK finds it in the partition of the operator that
    packs the weights, not as a value another partition produces); the DEQUANTIZE is returned."""
    source = sub.add(stored)
    t = sub.tensors[index]
    t.data = None
    op = Op("DEQUANTIZE", [source], [index], version=dequantize_version(stored))
    sub.insert_op(sub.position(first_reader), op)
    return op


# ---- float16 ------------------------------------------------------------------------------


def _store_fp16(sub: Subgraph, report: WeightReport, known) -> None:
    for index, readers in _large_float_constants(sub, known).items():
        t = sub.tensors[index]
        try:
            half = to_float16(t.data)
        except NotStorable as e:
            report.kept_float.append(f"{t.name}: {e}")
            continue
        _dequantized(sub, index, Tensor(f"{t.name}.fp16", TensorType.FLOAT16, list(t.shape), half), readers[0][0])
        report.count("float16")


# ---- int8 (dynamic range) -----------------------------------------------------------------


def _store_int8(sub: Subgraph, report: WeightReport, known) -> None:
    for index, readers in _large_float_constants(sub, known).items():
        routes = {op.code: INT8_WEIGHTS.get(op.code) for op, _ in readers}
        weight_readers = [(op, slot) for op, slot in readers
                          if routes[op.code] is not None and routes[op.code].slot == slot]
        if not weight_readers:
            continue  # not an operator's weights: stays float32
        axes = {routes[op.code].axis % sub.tensors[index].data.ndim for op, _ in weight_readers}
        if len(axes) != 1:
            report.kept_float.append(f"{sub.tensors[index].name}: read as weights along different axes")
            continue
        _quantize_weight(sub, index, readers, weight_readers, axes.pop(), report)


def _quantize_weight(sub, index, readers, weight_readers, axis: int, report: WeightReport) -> None:
    """Store tensor ``index`` as per-channel int8 along ``axis``; hybrid readers read the int8
    tensor, every other reader the float32 DEQUANTIZE of it."""
    t = sub.tensors[index]
    try:
        q, scale = quantize_symmetric(t.data, axis)
    except NotStorable as e:
        report.kept_float.append(f"{t.name}: {e}")
        return
    quant = Quantization(tuple(float(s) for s in scale), (0,) * len(scale), axis)
    stored = Tensor(f"{t.name}.int8", TensorType.INT8, list(t.shape), q, quant)
    hybrid = [(op, slot) for op, slot in weight_readers if INT8_WEIGHTS[op.code].route == "hybrid"]
    if len(hybrid) == len(readers):  # every reader takes int8 weights: the tensor itself becomes int8
        t.dtype, t.data, t.quant = TensorType.INT8, q, quant
    else:
        dq = _dequantized(sub, index, stored, readers[0][0])
        source = dq.inputs[0]
        for op, slot in hybrid:
            sub.rewire(op, inputs=op.inputs[:slot] + [source] + op.inputs[slot + 1:])
    for op, _ in hybrid:
        x, w = sub.tensors[op.inputs[0]], sub.tensors[op.inputs[1]]
        op.version = max(op.version, hybrid_version(op.code, x, w, len(scale) > 1))
    for op, _ in weight_readers:
        report.count(f"{op.code} {INT8_WEIGHTS[op.code].route}")
