"""An ``XGraph`` -> the bytes ExecuTorch's XNNPACK backend receives (``BackendDelegate.processed``).

The layout (the wheel's ``xnnpack_graph_serialize.py`` and the runtime's ``XNNHeader``)::

    [0:4]   zeros                 [4:8]  "XH00"
    [8:10]  u16 header length (30) [10:14] u32 flatbuffer offset   [14:18] u32 flatbuffer size
    [18:22] u32 constant data offset                                [22:30] u64 constant data size
    pad to 16, the ``XNNGraph`` flatbuffer (file identifier "XN01"), pad to 16

No constant data follows: every constant is a named blob of the program (``NamedData``), its
``ConstantDataOffset`` holding the key, offset ``UINT64_MAX`` and its size; entry 0 is the
reserved "not a constant" one (offset 0, size 0, no key: the runtime tells them apart by the
key's presence).
"""

from __future__ import annotations

import struct

import flatbuffers

from ...errors import ConversionError
from ..delegate_reader import FILE_IDENTIFIER, HEADER_MAGIC
from ..flatbuffer_build import table_vector
from . import schema_generated as xfb
from .graph import PerTensor, XGraph, XNode, XValue

__all__ = ["payload", "HEADER_MAGIC", "FILE_IDENTIFIER"]

_HEADER_LENGTH = 30
_ALIGNMENT = 16
_NO_OFFSET = 2**64 - 1  # UINT64_MAX: the data is found by its key
_VERSION = "0"  # XNNGraph.version, as exir writes it


def _align(n: int) -> int:
    return (n + _ALIGNMENT - 1) // _ALIGNMENT * _ALIGNMENT


def _camel(name: str) -> str:
    return "".join(part[:1].upper() + part[1:] for part in name.split("_"))


def _vector(b: flatbuffers.Builder, items, prepend: str, size: int) -> int:
    b.StartVector(size, len(items), size)
    for x in reversed(list(items)):
        getattr(b, prepend)(x)
    return b.EndVector()


def _table(b: flatbuffers.Builder, table: str, fields: dict) -> int:
    """One table of the generated module by its name, its fields set by schema name: lists become
    ``[uint]`` vectors, floats and ints are stored as the schema types them."""
    vectors = {k: _vector(b, v, "PrependUint32", 4) for k, v in fields.items() if isinstance(v, (list, tuple))}
    getattr(xfb, f"{table}Start")(b)
    for k, v in fields.items():
        add = getattr(xfb, f"{table}Add{_camel(k)}", None)
        if add is None:
            raise ConversionError(f"the XNNPACK schema's {table} has no field {k!r}")
        add(b, vectors.get(k, v))
    return getattr(xfb, f"{table}End")(b)


def _quant_params(b: flatbuffers.Builder, q) -> tuple[int, int]:
    """(the XNNQuantParams union's type, its table)."""
    if isinstance(q, PerTensor):
        xfb.PerTensorQuantStart(b)
        xfb.PerTensorQuantAddScale(b, float(q.scale))
        xfb.PerTensorQuantAddZeroPoint(b, int(q.zero_point))
        return xfb.XNNQuantParams.PerTensorQuant, xfb.PerTensorQuantEnd(b)
    scale = _vector(b, [], "PrependFloat32", 4)  # the scales are the named blob at scale_buffer_idx
    xfb.PerChannelQuantStart(b)
    xfb.PerChannelQuantAddScale(b, scale)
    xfb.PerChannelQuantAddChannelDim(b, q.channel_dim)
    xfb.PerChannelQuantAddScaleBufferIdx(b, q.scales)
    xfb.PerChannelQuantAddNumScales(b, q.count)
    return xfb.XNNQuantParams.PerChannelQuant, xfb.PerChannelQuantEnd(b)


def _value(b: flatbuffers.Builder, v: XValue) -> int:
    params = _quant_params(b, v.quant) if v.quant is not None else None
    dims = _vector(b, v.dims, "PrependUint32", 4)
    xfb.XNNTensorValueStart(b)
    xfb.XNNTensorValueAddDatatype(b, v.dtype)
    xfb.XNNTensorValueAddNumDims(b, len(v.dims))
    xfb.XNNTensorValueAddDims(b, dims)
    xfb.XNNTensorValueAddConstantBufferIdx(b, v.constant)
    xfb.XNNTensorValueAddExternalId(b, v.external_id)
    xfb.XNNTensorValueAddFlags(b, v.flags)
    xfb.XNNTensorValueAddIdOut(b, v.id)
    tensor = xfb.XNNTensorValueEnd(b)
    kind = xfb.XValueUnion.XNNTensorValue
    if params is not None:
        xfb.XNNQuantizedTensorValueStart(b)
        xfb.XNNQuantizedTensorValueAddTensorValue(b, tensor)
        xfb.XNNQuantizedTensorValueAddQuantParamsType(b, params[0])
        xfb.XNNQuantizedTensorValueAddQuantParams(b, params[1])
        tensor, kind = xfb.XNNQuantizedTensorValueEnd(b), xfb.XValueUnion.XNNQuantizedTensorValue
    xfb.XValueStart(b)
    xfb.XValueAddXvalueUnionType(b, kind)
    xfb.XValueAddXvalueUnion(b, tensor)
    return xfb.XValueEnd(b)


def _node(b: flatbuffers.Builder, n: XNode) -> int:
    body = _table(b, n.table, n.fields)
    minmax = None
    if n.output_min_max is not None:
        xfb.OutputMinMaxStart(b)
        xfb.OutputMinMaxAddOutputMin(b, float(n.output_min_max[0]))
        xfb.OutputMinMaxAddOutputMax(b, float(n.output_min_max[1]))
        minmax = xfb.OutputMinMaxEnd(b)
    xfb.XNodeStart(b)
    xfb.XNodeAddXnodeUnionType(b, getattr(xfb.XNodeUnion, n.kind))
    xfb.XNodeAddXnodeUnion(b, body)
    xfb.XNodeAddDebugHandle(b, n.debug_handle)
    if minmax is not None:
        xfb.XNodeAddOutputMinMax(b, minmax)
    return xfb.XNodeEnd(b)


def _constant_data(b: flatbuffers.Builder, g: XGraph) -> int:
    entries = []
    xfb.ConstantDataOffsetStart(b)  # entry 0: no data, and no key
    xfb.ConstantDataOffsetAddOffset(b, 0)
    xfb.ConstantDataOffsetAddSize(b, 0)
    entries.append(xfb.ConstantDataOffsetEnd(b))
    for key, nbytes in g.constants:
        k = b.CreateString(key)
        xfb.ConstantDataOffsetStart(b)
        xfb.ConstantDataOffsetAddOffset(b, _NO_OFFSET)
        xfb.ConstantDataOffsetAddSize(b, nbytes)
        xfb.ConstantDataOffsetAddNamedKey(b, k)
        entries.append(xfb.ConstantDataOffsetEnd(b))
    return table_vector(b, entries)


def _flatbuffer(g: XGraph) -> bytes:
    b = flatbuffers.Builder(1024)
    b.ForceDefaults(True)  # every field written, as flatc writes exir's JSON (ids of 0 included)
    values = table_vector(b, [_value(b, v) for v in g.values])
    nodes = table_vector(b, [_node(b, n) for n in g.nodes])
    constant_data = _constant_data(b, g)
    inputs = _vector(b, [v.id for v in g.inputs], "PrependUint32", 4)
    outputs = _vector(b, [v.id for v in g.outputs], "PrependUint32", 4)
    version = b.CreateString(_VERSION)
    xfb.XNNGraphStart(b)
    xfb.XNNGraphAddVersion(b, version)
    xfb.XNNGraphAddXnodes(b, nodes)
    xfb.XNNGraphAddXvalues(b, values)
    xfb.XNNGraphAddNumExterns(b, len(g.inputs) + len(g.outputs))
    xfb.XNNGraphAddInputIds(b, inputs)
    xfb.XNNGraphAddOutputIds(b, outputs)
    xfb.XNNGraphAddConstantData(b, constant_data)
    b.Finish(xfb.XNNGraphEnd(b), file_identifier=FILE_IDENTIFIER)
    return bytes(b.Output())


def payload(g: XGraph) -> bytes:
    """The header, then the flatbuffer (16-aligned); the constants live in the program's named data."""
    fbytes = _flatbuffer(g)
    start = _align(_HEADER_LENGTH)
    header = (b"\0\0\0\0" + HEADER_MAGIC + struct.pack("<HIII", _HEADER_LENGTH, start, len(fbytes), start + _align(len(fbytes)))
              + struct.pack("<Q", 0))
    return header.ljust(start, b"\0") + fbytes.ljust(_align(len(fbytes)), b"\0")

