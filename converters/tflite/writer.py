"""``Program`` -> TFL3 flatbuffer bytes (schema version 3), with the ``flatbuffers`` package
and the builder functions flatc generated from pt2x's schema subset (``schema_generated``).

Buffer 0 is the empty buffer every TFLite model starts with; each distinct constant gets a
buffer (16-byte aligned; byte-identical constants share one); metadata entries get one each. Files past flatbuffers' 2 GiB
offset limit are refused.
"""

from __future__ import annotations

import hashlib

import flatbuffers
import numpy as np

from ..errors import ConversionError
from . import schema_generated as fb
from .model import Program, Subgraph

__all__ = ["write", "SCHEMA_VERSION", "FILE_IDENTIFIER"]

SCHEMA_VERSION = 3
FILE_IDENTIFIER = b"TFL3"
_MAX_BYTES = 2**31 - 2**20
_PLACEHOLDER_CODE = 127  # PLACEHOLDER_FOR_GREATER_OP_CODES, the deprecated field's value past 126
# operator versions other than 1 (LiteRT registers BROADCAST_TO from version 2: 1 was a placeholder)
_VERSION = {"BROADCAST_TO": 2}


def _camel(snake: str) -> str:
    return "".join(p[:1].upper() + p[1:] for p in snake.split("_"))


def _int_vector(b: flatbuffers.Builder, values, dtype=np.int32, what: str = "an int vector") -> int:
    values = list(values)
    info = np.iinfo(dtype)
    bad = next((v for v in values if not info.min <= v <= info.max), None)
    if bad is not None:
        raise ConversionError(f"{what}: {bad} does not fit TFLite's {np.dtype(dtype).name}")
    return b.CreateNumpyVector(np.asarray(values, dtype=dtype))


def _table_vector(b: flatbuffers.Builder, offsets: list[int]) -> int:
    b.StartVector(4, len(offsets), 4)
    for o in reversed(offsets):
        b.PrependUOffsetTRelative(o)
    return b.EndVector()


def _options(b: flatbuffers.Builder, name: str, fields: dict) -> int:
    """One BuiltinOptions table: scalar fields, and int lists as int32 vectors."""
    vectors = {k: _int_vector(b, v, what=f"{name}.{k}") for k, v in fields.items() if isinstance(v, (list, tuple))}
    getattr(fb, f"{name}Start")(b)
    for k, v in fields.items():
        getattr(fb, f"{name}Add{_camel(k)}")(b, vectors.get(k, v))
    return getattr(fb, f"{name}End")(b)


class _Buffers:
    """The model's buffers; byte-identical constants share one (tied weights: an embedding
    read by GATHER and the same matrix read by the LM head's FULLY_CONNECTED)."""

    def __init__(self):
        self.data: list[bytes | None] = [None]  # buffer 0: empty
        self._index: dict = {}

    def add(self, data: bytes) -> int:
        key = hashlib.sha256(data).digest()
        if key not in self._index:
            self.data.append(data)
            self._index[key] = len(self.data) - 1
        return self._index[key]

    def build(self, b: flatbuffers.Builder) -> int:
        offs = []
        for d in self.data:
            vec = None
            if d:
                b.StartVector(1, len(d), 16)
                b.head = b.head - len(d)
                b.Bytes[b.head:b.head + len(d)] = d
                vec = b.EndVector()
            fb.BufferStart(b)
            if vec is not None:
                fb.BufferAddData(b, vec)
            offs.append(fb.BufferEnd(b))
        return _table_vector(b, offs)


def _tensor(b, t, buffers: _Buffers) -> int:
    name = b.CreateString(t.name)
    shape = sig = None
    if t.shape is not None:
        shape = _int_vector(b, [1 if d < 0 else d for d in t.shape], what=f"the shape of tensor {t.name!r}")
        if any(d < 0 for d in t.shape):
            sig = _int_vector(b, t.shape, what=f"the shape of tensor {t.name!r}")
    buf = buffers.add(np.ascontiguousarray(t.data).tobytes()) if t.data is not None else 0
    quant = _quantization(b, t.quant) if t.quant is not None else None
    fb.TensorStart(b)
    if shape is not None:
        fb.TensorAddShape(b, shape)
        fb.TensorAddHasRank(b, True)
    fb.TensorAddType(b, t.dtype)
    fb.TensorAddBuffer(b, buf)
    fb.TensorAddName(b, name)
    if sig is not None:
        fb.TensorAddShapeSignature(b, sig)
    if quant is not None:
        fb.TensorAddQuantization(b, quant)
    return fb.TensorEnd(b)


def _quantization(b, q) -> int:
    """A ``QuantizationParameters`` table: float32 scales, int64 zero points, the dimension."""
    scale = b.CreateNumpyVector(np.asarray(q.scale, np.float32))
    zero_point = b.CreateNumpyVector(np.asarray(q.zero_point, np.int64))
    fb.QuantizationParametersStart(b)
    fb.QuantizationParametersAddScale(b, scale)
    fb.QuantizationParametersAddZeroPoint(b, zero_point)
    fb.QuantizationParametersAddQuantizedDimension(b, q.dimension)
    return fb.QuantizationParametersEnd(b)


def _subgraph(b, g: Subgraph, buffers: _Buffers, opcode_index) -> int:
    tensors = _table_vector(b, [_tensor(b, t, buffers) for t in g.tensors])
    ops = []
    for op in g.ops:
        ins, outs = _int_vector(b, op.inputs), _int_vector(b, op.outputs)
        opt = _options(b, *op.options) if op.options else None
        fb.OperatorStart(b)
        fb.OperatorAddOpcodeIndex(b, opcode_index(op))
        fb.OperatorAddInputs(b, ins)
        fb.OperatorAddOutputs(b, outs)
        if opt is not None:
            fb.OperatorAddBuiltinOptionsType(b, getattr(fb.BuiltinOptions, op.options[0]))
            fb.OperatorAddBuiltinOptions(b, opt)
        ops.append(fb.OperatorEnd(b))
    ops_vec = _table_vector(b, ops)
    ins, outs = _int_vector(b, g.inputs), _int_vector(b, g.outputs)
    name = b.CreateString(g.name)
    fb.SubGraphStart(b)
    fb.SubGraphAddTensors(b, tensors)
    fb.SubGraphAddInputs(b, ins)
    fb.SubGraphAddOutputs(b, outs)
    fb.SubGraphAddOperators(b, ops_vec)
    fb.SubGraphAddName(b, name)
    return fb.SubGraphEnd(b)


def _opcodes(b, codes: list[tuple[str, int]]) -> int:
    offs = []
    for c, version in codes:
        value = getattr(fb.BuiltinOperator, c)
        fb.OperatorCodeStart(b)
        fb.OperatorCodeAddDeprecatedBuiltinCode(b, min(value, _PLACEHOLDER_CODE))
        fb.OperatorCodeAddVersion(b, version)
        fb.OperatorCodeAddBuiltinCode(b, value)
        offs.append(fb.OperatorCodeEnd(b))
    return _table_vector(b, offs)


def _signature(b, p: Program) -> int:
    g = p.subgraphs[0]

    def maps(names, indices):
        offs = []
        for n, i in zip(names, indices):
            s = b.CreateString(n)
            fb.TensorMapStart(b)
            fb.TensorMapAddName(b, s)
            fb.TensorMapAddTensorIndex(b, i)
            offs.append(fb.TensorMapEnd(b))
        return _table_vector(b, offs)

    ins, outs = maps(p.signature_inputs, g.inputs), maps(p.signature_outputs, g.outputs)
    key = b.CreateString("serving_default")
    fb.SignatureDefStart(b)
    fb.SignatureDefAddInputs(b, ins)
    fb.SignatureDefAddOutputs(b, outs)
    fb.SignatureDefAddSignatureKey(b, key)
    fb.SignatureDefAddSubgraphIndex(b, 0)
    return _table_vector(b, [fb.SignatureDefEnd(b)])


def _metadata(b, p: Program, buffers: _Buffers) -> int:
    offs = []
    for name, data in p.metadata.items():
        idx = buffers.add(data)
        s = b.CreateString(name)
        fb.MetadataStart(b)
        fb.MetadataAddName(b, s)
        fb.MetadataAddBuffer(b, idx)
        offs.append(fb.MetadataEnd(b))
    return _table_vector(b, offs)


def write(p: Program) -> bytes:
    """The flatbuffer of ``p`` (identifier ``TFL3``, schema version 3)."""
    size = sum(t.data.nbytes for g in p.subgraphs for t in g.tensors if t.data is not None)
    if size > _MAX_BYTES:
        raise ConversionError(f"the model's constants take {size} bytes: a TFLite flatbuffer holds at most 2 GiB")
    codes: list[tuple[str, int]] = []  # (builtin, version): one operator code each
    index: dict[tuple[str, int], int] = {}

    def opcode_index(op) -> int:
        key = (op.code, max(op.version, _VERSION.get(op.code, 1)))
        if key not in index:
            index[key] = len(codes)
            codes.append(key)
        return index[key]

    for g in p.subgraphs:
        for op in g.ops:
            opcode_index(op)
    b = flatbuffers.Builder(1024 + size + size // 8)
    buffers = _Buffers()
    subgraphs = _table_vector(b, [_subgraph(b, g, buffers, opcode_index) for g in p.subgraphs])
    metadata = _metadata(b, p, buffers)
    signature = _signature(b, p) if p.signature_inputs or p.signature_outputs else None
    buffers_vec = buffers.build(b)
    opcodes = _opcodes(b, codes)
    desc = b.CreateString(p.description)
    fb.ModelStart(b)
    fb.ModelAddVersion(b, SCHEMA_VERSION)
    fb.ModelAddOperatorCodes(b, opcodes)
    fb.ModelAddSubgraphs(b, subgraphs)
    fb.ModelAddDescription(b, desc)
    fb.ModelAddBuffers(b, buffers_vec)
    fb.ModelAddMetadata(b, metadata)
    if signature is not None:
        fb.ModelAddSignatureDefs(b, signature)
    b.Finish(fb.ModelEnd(b), file_identifier=FILE_IDENTIFIER)
    return bytes(b.Output())
