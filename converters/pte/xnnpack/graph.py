"""The XNNGraph pt2x builds for one delegated partition, before it is serialized.

``XGraph.values`` are XNNPACK tensor values (their serialized id is their index), each of an
XNNPACK datatype; a quantized one carries its parameters (``PerTensor``: a scale and a zero point;
``PerChannel``: the dim and a named blob of float32 scales); ``nodes`` are
XNNPACK nodes, each the name of its ``XNodeUnion`` member, the flatbuffer table that member uses,
and that table's fields by name (``input1_id``, ``flags``...); ``constants`` are the named blobs the
values point at (``constant_data`` entry i + 1). The external values are the partition's inputs
(external ids 0..n-1, in the ``DelegateCall``'s argument order) and then its outputs.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["XValue", "XNode", "XGraph", "PerTensor", "PerChannel", "INVALID_ID", "FP32", "FP16", "QINT8", "QCINT8",
           "QCINT32", "EXTERNAL_INPUT", "EXTERNAL_OUTPUT", "FLAG_KEEP_DIMS", "FLAG_TRANSPOSE_WEIGHTS"]

INVALID_ID = 0xFFFFFFFF  # XNN_INVALID_VALUE_ID
# XNNDatatype (schema.fbs)
FP32 = 1  # xnn_datatype_fp32
FP16 = 2  # xnn_datatype_fp16
QINT8 = 3  # xnn_datatype_qint8: int8, one scale and zero point (activations)
QCINT8 = 6  # xnn_datatype_qcint8: int8, a scale per channel, zero point 0 (filters)
QCINT32 = 7  # xnn_datatype_qcint32: int32, a scale per channel, zero point 0 (biases)
EXTERNAL_INPUT = 0x1  # XNN_VALUE_FLAG_EXTERNAL_INPUT
EXTERNAL_OUTPUT = 0x2  # XNN_VALUE_FLAG_EXTERNAL_OUTPUT
FLAG_KEEP_DIMS = 0x40  # XNN_FLAG_KEEP_DIMS (pooling, reductions)
FLAG_TRANSPOSE_WEIGHTS = 0x1  # XNN_FLAG_TRANSPOSE_WEIGHTS: a fully-connected filter stored [in, out]


@dataclass(frozen=True)
class PerTensor:
    scale: float
    zero_point: int


@dataclass(frozen=True)
class PerChannel:
    channel_dim: int
    scales: int  # the constant_data index of the float32 scales
    count: int


@dataclass(eq=False)
class XValue:
    id: int
    dims: tuple
    dtype: int = FP32
    constant: int = 0  # index in constant_data (0: not a constant)
    external_id: int = INVALID_ID
    flags: int = 0
    quant: PerTensor | PerChannel | None = None


@dataclass(eq=False)
class XNode:
    kind: str  # the XNodeUnion member: "XNNConv2d"
    table: str  # the table it is serialized as: "_XNNNodeConv"
    fields: dict  # that table's fields by schema name
    debug_handle: int = 0
    output_min_max: tuple | None = None  # a fused activation's (min, max)


@dataclass
class XGraph:
    values: list = field(default_factory=list)
    nodes: list = field(default_factory=list)
    constants: list = field(default_factory=list)  # constant_data entries 1..: (named key, bytes)
    inputs: list = field(default_factory=list)  # XValues, external ids 0..
    outputs: list = field(default_factory=list)  # XValues, external ids after the inputs
    float_dtype: int = FP32  # the datatype of its float values: FP32, or FP16 for a float16 partition

    def value(self, dims, *, constant: int = 0, dtype: int | None = None, quant=None,
              like: XValue | None = None) -> XValue:
        """A new value of ``dims``: of ``dtype`` (the graph's float datatype by default) and
        ``quant``, or of the datatype and parameters of ``like`` (a transpose or reshape of it)."""
        if like is not None:
            dtype, quant = like.dtype, like.quant
        dtype = self.float_dtype if dtype is None else dtype
        v = XValue(len(self.values), tuple(int(d) for d in dims), dtype, constant, quant=quant)
        self.values.append(v)
        return v

    def constant(self, key: str, nbytes: int) -> int:
        """The ``constant_data`` index of the named blob ``key`` (added once)."""
        for i, (k, _n) in enumerate(self.constants):
            if k == key:
                return i + 1
        self.constants.append((key, nbytes))
        return len(self.constants)

    def node(self, kind: str, table: str, debug_handle: int = 0, **fields) -> XNode:
        n = XNode(kind, table, fields, debug_handle)
        self.nodes.append(n)
        return n

    def drop_unread(self) -> None:
        """Nodes whose results nothing reads and that write no output (a reshape another one
        replaced); their values stay, unused."""
        outputs = {"output_id", "output_value_id", "output_index_id"}
        read = {v.id for v in self.outputs}
        for n in reversed(self.nodes):
            made = [v for k, v in n.fields.items() if k in outputs]
            if not any(m in read for m in made):
                n.fields["__dropped__"] = True
                continue
            read |= {v for k, v in n.fields.items() if k.endswith("_id") and k not in outputs}
        self.nodes = [n for n in self.nodes if not n.fields.pop("__dropped__", False)]

    def mark_externals(self) -> None:
        """External ids and flags: the inputs first, then the outputs."""
        for i, v in enumerate(self.inputs):
            v.external_id, v.flags = i, EXTERNAL_INPUT
        for i, v in enumerate(self.outputs):
            v.external_id, v.flags = len(self.inputs) + i, EXTERNAL_OUTPUT
