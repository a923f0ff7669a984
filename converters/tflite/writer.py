"""``Program`` -> TFL3 flatbuffer bytes (schema version 3), with the ``flatbuffers`` package
and the builder functions flatc generated from pt2x's schema subset (``schema_generated``).

Buffer 0 is the empty buffer every TFLite model starts with; each distinct constant gets a
buffer (byte-identical constants share one); metadata entries get one each. Two layouts:

- **inline** (every model whose constants fit flatbuffers' 2 GiB offset limit, ``_MAX_BYTES``):
  the constants are ``Buffer.data`` vectors (16-byte aligned) inside the flatbuffer;
- **buffers after** (constants past the limit, or ``buffers_after=True``): the single-file
  layout LiteRT reads past 2 GiB. The flatbuffer holds the graph, the metadata (inline) and,
  for each constant buffer, ``Buffer.offset``/``size``: where its bytes lie in the file, after
  the flatbuffer, each ``AFTER_ALIGNMENT``-aligned. A ``buffer_location`` metadata entry says
  ``outside flatbuffers``, as LiteRT's own exporter marks such files.

``write_file`` streams the second layout: one constant at a time is made contiguous (in
slices of at most ``_CHUNK`` bytes), hashed and written, so the weights (a memory-mapped
archive's views) are never all in memory at once.
"""

from __future__ import annotations

import hashlib
import io
import mmap
import os
from dataclasses import dataclass, field

import flatbuffers
import numpy as np

from ...serde.atomic_write import write_atomically
from ..errors import ConversionError
from . import schema_generated as fb
from .core.model import Program, Subgraph

__all__ = ["write", "write_file", "constant_bytes", "buffers_after_needed", "SCHEMA_VERSION", "FILE_IDENTIFIER",
           "AFTER_ALIGNMENT", "BUFFER_LOCATION"]

SCHEMA_VERSION = 3
FILE_IDENTIFIER = b"TFL3"
_MAX_BYTES = 2**31 - 2**20  # flatbuffers' 2 GiB offset limit, with room for the graph
AFTER_ALIGNMENT = 64  # a buffer after the flatbuffer starts at a multiple of this (LiteRT's host memory alignment)
BUFFER_LOCATION = ("buffer_location", b"outside flatbuffers")  # LiteRT's mark of the buffers-after layout
_CHUNK = 64 << 20  # the most bytes of one constant made contiguous at once while streaming
_PLACEHOLDER_OFFSET = 2**63  # a Buffer.offset while the flatbuffer's size is measured (any non-zero value)
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


@dataclass
class _After:
    """A buffer whose bytes lie in the file after the flatbuffer."""

    offset: int
    size: int


@dataclass
class _Buffers:
    """The model's buffers and which one each tensor and metadata entry reads. An entry is
    ``None`` (empty), a flat uint8 array (inline bytes) or ``_After``. Byte-identical constants
    share one (tied weights: an embedding read by GATHER and the same matrix read by the LM
    head's FULLY_CONNECTED)."""

    of_tensor: list[list[int]]  # [subgraph][tensor] -> buffer (0: not a constant)
    of_metadata: list[int] = field(default_factory=list)
    entries: list = field(default_factory=lambda: [None])  # buffer 0: empty
    _index: dict = field(default_factory=dict)  # sha256 -> buffer
    progress: object = None  # progress(done, total): bytes of constants copied in so far (inline)
    reserved: list | None = None  # streamed inline layout: (builder position, entry), room left unfilled

    @classmethod
    def empty(cls, p: Program) -> _Buffers:
        return cls([[0] * len(g.tensors) for g in p.subgraphs])

    def add(self, entry, key: bytes | None = None) -> int:
        """A new buffer for ``entry``, or the one already holding the bytes of sha256 ``key``."""
        if key is not None and key in self._index:
            return self._index[key]
        self.entries.append(entry)
        if key is not None:
            self._index[key] = len(self.entries) - 1
        return len(self.entries) - 1

    def build(self, b: flatbuffers.Builder) -> int:
        offs = []
        total = sum(int(e.nbytes) for e in self.entries if isinstance(e, (_Source, np.ndarray)))
        done = 0
        for e in self.entries:
            vec = None
            if self.reserved is not None and isinstance(e, (_Source, np.ndarray)) and e.nbytes:
                b.StartVector(1, e.nbytes, 16)
                b.head = b.head - e.nbytes  # room only: the file gets the bytes from the constant
                self.reserved.append((b.head, e))
                vec = b.EndVector()
                e = None
            if isinstance(e, _Source) and e.nbytes:
                e = e.bytes()
            if isinstance(e, np.ndarray) and e.nbytes:
                b.StartVector(1, e.nbytes, 16)
                b.head = b.head - e.nbytes
                b.Bytes[b.head:b.head + e.nbytes] = memoryview(e)
                vec = b.EndVector()
                done += e.nbytes
                if self.progress is not None:
                    self.progress(done, total)
            fb.BufferStart(b)
            if vec is not None:
                fb.BufferAddData(b, vec)
            if isinstance(e, _After):
                fb.BufferAddOffset(b, e.offset)
                fb.BufferAddSize(b, e.size)
            offs.append(fb.BufferEnd(b))
        return _table_vector(b, offs)


def _u8(a) -> np.ndarray:
    """``a``'s bytes in C order as a flat uint8 array (a copy only where ``a`` is not contiguous)."""
    return np.ascontiguousarray(a).reshape(-1).view(np.uint8)


def _digest(u8: np.ndarray) -> bytes:
    return hashlib.sha256(u8).digest()


def _constants(p: Program):
    """(subgraph, tensor, data) of every constant, in the order buffers are given out; ``data``
    as the tensor holds it (an array, a view of the archive's map, or a ``Deferred``)."""
    for gi, g in enumerate(p.subgraphs):
        for ti, t in enumerate(g.tensors):
            if t.data is not None:
                yield gi, ti, t.data


class _Source:
    """An inline buffer's constant, made into bytes only while the flatbuffer copies it in (a
    deferred or non-contiguous constant is never held as bytes beside the others)."""

    def __init__(self, data):
        self.data = data
        self.nbytes = int(data.nbytes)

    def bytes(self) -> np.ndarray:
        return _u8(np.asarray(self.data))


def _inline(p: Program) -> _Buffers:
    """Every constant and metadata entry inside the flatbuffer (the layout under 2 GiB)."""
    bufs = _Buffers.empty(p)
    for gi, ti, a in _constants(p):
        if isinstance(a, np.ndarray) and a.flags.c_contiguous:
            u8 = _u8(a)  # a view: nothing copied
            bufs.of_tensor[gi][ti] = bufs.add(u8, _digest(u8))
        else:
            bufs.of_tensor[gi][ti] = bufs.add(_Source(a), _digest(_u8(np.asarray(a))))
    for data in p.metadata.values():
        u8 = np.frombuffer(data, np.uint8)
        bufs.of_metadata.append(bufs.add(u8, _digest(u8)))
    return bufs


def _add_metadata(bufs: _Buffers, metadata: dict[str, bytes]) -> None:
    """Metadata inside the flatbuffer, sharing buffers among themselves only (never a constant's)."""
    seen: dict[bytes, int] = {}
    for data in metadata.values():
        u8 = np.frombuffer(data, np.uint8)
        key = _digest(u8)
        if key not in seen:
            seen[key] = bufs.add(u8)
        bufs.of_metadata.append(seen[key])


def _placeholders(p: Program, metadata: dict[str, bytes]) -> _Buffers:
    """The buffers-after layout with no constant shared and placeholder offsets: its flatbuffer
    is at least as large as the real one (sharing only drops buffers; the offsets are fixed-width)."""
    bufs = _Buffers.empty(p)
    for gi, ti, a in _constants(p):
        bufs.of_tensor[gi][ti] = bufs.add(_After(_PLACEHOLDER_OFFSET, a.nbytes) if a.nbytes else None)
    _add_metadata(bufs, metadata)
    return bufs


def _stream_constants(p: Program, f, metadata: dict[str, bytes], progress=None) -> _Buffers:
    """Write each distinct constant at the next ``AFTER_ALIGNMENT`` boundary of ``f``, one at a
    time; one whose bytes were written before is taken back and shares that buffer."""
    bufs = _Buffers.empty(p)
    empty = None
    done, total = 0, constant_bytes(p)
    for gi, ti, a in _constants(p):
        if not a.nbytes:
            empty = bufs.add(None) if empty is None else empty
            bufs.of_tensor[gi][ti] = empty
            continue
        start = _pad(f)
        entry = _After(start, a.nbytes)
        index = bufs.add(entry, _write_hashed(f, np.asarray(a)))  # a deferred constant is made now, alone
        done += a.nbytes
        if progress is not None:
            progress(done, total)
        if bufs.entries[index] is not entry:  # the same bytes as an earlier buffer's
            f.seek(start)
            f.truncate()
        bufs.of_tensor[gi][ti] = index
    _add_metadata(bufs, metadata)
    return bufs


def _pad(f) -> int:
    """Zeros up to the next ``AFTER_ALIGNMENT`` boundary of ``f``; that position."""
    pos = f.tell()
    gap = -pos % AFTER_ALIGNMENT
    if gap:
        f.write(bytes(gap))
    return pos + gap


def _write_hashed(f, a: np.ndarray) -> bytes:
    """Write ``a``'s bytes (C order) to ``f`` slice by slice; their sha256."""
    h = hashlib.sha256()
    for part in _slices(a):
        u8 = _u8(part)
        h.update(u8)
        f.write(u8)
    return h.digest()


def _slices(a: np.ndarray, limit: int = _CHUNK):
    """``a`` as consecutive pieces along its leading axes, each of at most ``limit`` bytes where
    one innermost row allows: their bytes one after the other are ``a``'s in C order."""
    if a.ndim == 0 or a.nbytes <= limit:
        yield a
        return
    step = max(1, limit // (a.nbytes // a.shape[0]))
    for i in range(0, a.shape[0], step):
        if step == 1:
            yield from _slices(a[i], limit)
        else:
            yield a[i:i + step]


def _tensor(b, t, buf: int) -> int:
    name = b.CreateString(t.name)
    shape = sig = None
    if t.shape is not None:
        shape = _int_vector(b, [1 if d < 0 else d for d in t.shape], what=f"the shape of tensor {t.name!r}")
        if any(d < 0 for d in t.shape):
            sig = _int_vector(b, t.shape, what=f"the shape of tensor {t.name!r}")
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


def _subgraph(b, g: Subgraph, buffer_of: list[int], opcode_index) -> int:
    tensors = _table_vector(b, [_tensor(b, t, buf) for t, buf in zip(g.tensors, buffer_of)])
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


def _metadata(b, metadata: dict[str, bytes], buffer_of: list[int]) -> int:
    offs = []
    for name, idx in zip(metadata, buffer_of):
        s = b.CreateString(name)
        fb.MetadataStart(b)
        fb.MetadataAddName(b, s)
        fb.MetadataAddBuffer(b, idx)
        offs.append(fb.MetadataEnd(b))
    return _table_vector(b, offs)


def constant_bytes(p: Program) -> int:
    """The bytes of ``p``'s constants, each tensor's counted (shared ones too)."""
    return sum(int(a.nbytes) for _, _, a in _constants(p))


def buffers_after_needed(p: Program, *, limit: int = _MAX_BYTES) -> bool:
    """Whether ``p``'s constants pass ``limit`` (flatbuffers' 2 GiB, less room for the graph):
    the one case the buffers-after layout is chosen unasked."""
    return constant_bytes(p) > limit


def _layout(p: Program, buffers_after: bool | None) -> bool:
    """True for the buffers-after layout: as asked, else when the constants need it."""
    if buffers_after is None:
        return buffers_after_needed(p)
    if not buffers_after and buffers_after_needed(p):
        raise ConversionError(f"the model's constants take {constant_bytes(p)} bytes: a TFLite flatbuffer holds "
                              "at most 2 GiB of them (buffers_after=True writes them after it)")
    return bool(buffers_after)


def write(p: Program, *, buffers_after: bool | None = None) -> bytes:
    """The .tflite file of ``p`` (identifier ``TFL3``, schema version 3), in memory.

    ``buffers_after``: ``None`` keeps the constants inside the flatbuffer while they fit its
    2 GiB and puts them after it past that; ``True`` puts them after it; ``False`` keeps them
    inside (a ``ConversionError`` past 2 GiB)."""
    if not _layout(p, buffers_after):
        return bytes(_inline_file(p))
    f = io.BytesIO()
    _write_after(p, f)
    return f.getvalue()


def write_file(p: Program, path, *, buffers_after: bool | None = None, progress=None) -> bytes | memoryview:
    """Write ``p``'s .tflite file to ``path`` atomically (``serde.atomic_write``), in the layout
    ``write`` picks. Returns the flatbuffer: the whole file in the inline layout (a memoryview
    of the builder's bytes, which were written from it: no copy is made to return it); with the
    buffers after it, the flatbuffer alone (graph and metadata: the constants are only in the
    file), which is streamed one constant at a time and never held whole."""
    if not _layout(p, buffers_after):
        write_atomically(os.fspath(path), lambda f: _write_inline(p, f, progress))
        return _mapped(os.fspath(path))
    out: list[bytes] = []
    write_atomically(os.fspath(path), lambda f: out.append(_write_after(p, f, progress)))
    return out[0]


def _write_inline(p: Program, f, progress=None) -> None:
    """The inline layout into ``f`` without holding the constants: the flatbuffer is built in an
    anonymous memory map with each constant's room reserved and left untouched (unused pages of
    a map take no memory), then written out region by region, each constant's bytes from the
    constant itself, one at a time. The file is the one ``write`` makes, byte for byte."""
    size = _inline_size(p)
    while True:
        room = mmap.mmap(-1, size)
        bufs = _inline(p)
        bufs.reserved = []
        data = _flatbuffer(p, bufs, p.metadata, storage=room)
        if data.obj is room:
            break
        # the builder outgrew the room and went on in a buffer of its own, where the constants'
        # reserved places are not: build again in a larger room (untouched pages cost nothing)
        grown = len(data.obj)
        del data
        room.close()
        size = max(grown, 2 * size) + 4096
    pos, total, done = size - len(data), sum(e.nbytes for _, e in bufs.reserved), 0
    del data
    for start, e in sorted(bufs.reserved, key=lambda r: r[0]):
        f.write(room[pos:start])
        u8 = e.bytes() if isinstance(e, _Source) else e
        for k in range(0, len(u8), _CHUNK):
            f.write(u8[k:k + _CHUNK])
        done += len(u8)
        if progress is not None:
            progress(done, total)
        del u8
        pos = start + e.nbytes
    f.write(room[pos:size])
    room.close()


def _mapped(path: str) -> memoryview:
    """The written file's bytes, read-only, memory-mapped (pages of the file, not a copy)."""
    with open(path, "rb") as f:
        return memoryview(mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ))


def _inline_file(p: Program, progress=None) -> memoryview:
    """The inline layout's file: the flatbuffer with every constant inside it (the builder's
    bytes, copied once from the constants, one at a time)."""
    bufs = _inline(p)
    bufs.progress = progress
    return _flatbuffer(p, bufs, p.metadata, _inline_size(p))


def _inline_size(p: Program) -> int:
    """Room to build the inline file in without the builder growing (growing copies it all):
    the constants, 16-byte alignment each, and a generous bound on everything else."""
    tensors = sum(len(g.tensors) for g in p.subgraphs)
    ops = sum(len(g.ops) for g in p.subgraphs)
    quant = sum(12 * len(t.quant.scale) + 64 for g in p.subgraphs for t in g.tensors if t.quant is not None)
    rest = 4096 + 1024 * tensors + 512 * ops + quant + sum(len(d) + 64 for d in p.metadata.values())
    return constant_bytes(p) + 16 * tensors + rest


def _write_after(p: Program, f, progress=None) -> bytes:
    """The buffers-after layout into the seekable binary file ``f``, empty: room for the
    flatbuffer with no constant shared, the constants after it, then the real flatbuffer in
    that room (zeros fill what it leaves). Returns the flatbuffer."""
    metadata = {**p.metadata, BUFFER_LOCATION[0]: BUFFER_LOCATION[1]}
    room = len(_flatbuffer(p, _placeholders(p, metadata), metadata))
    f.seek(room)
    bufs = _stream_constants(p, f, metadata, progress)
    end = f.tell()
    data = _flatbuffer(p, bufs, metadata)
    if len(data) > room:  # sharing only drops buffers: not expected
        raise ConversionError(f"the TFLite flatbuffer took {len(data)} bytes with its offsets set, "
                              f"past the {room} its measure gave")
    f.seek(0)
    f.write(data)
    f.write(bytes(room - len(data)))
    f.seek(end)
    return bytes(data)


def _flatbuffer(p: Program, bufs: _Buffers, metadata: dict[str, bytes], initial: int = 1024,
                storage=None) -> memoryview:
    """The flatbuffer of ``p``, its buffers as ``bufs`` lays them out."""
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
    b = flatbuffers.Builder(initial if storage is None else 0)
    if storage is not None:  # built back to front in the caller's storage (an anonymous map)
        b.Bytes, b.head = storage, len(storage)
    subgraphs = _table_vector(b, [_subgraph(b, g, of, opcode_index) for g, of in zip(p.subgraphs, bufs.of_tensor)])
    metadata_vec = _metadata(b, metadata, bufs.of_metadata)
    signature = _signature(b, p) if p.signature_inputs or p.signature_outputs else None
    buffers_vec = bufs.build(b)
    opcodes = _opcodes(b, codes)
    desc = b.CreateString(p.description)
    fb.ModelStart(b)
    fb.ModelAddVersion(b, SCHEMA_VERSION)
    fb.ModelAddOperatorCodes(b, opcodes)
    fb.ModelAddSubgraphs(b, subgraphs)
    fb.ModelAddDescription(b, desc)
    fb.ModelAddBuffers(b, buffers_vec)
    fb.ModelAddMetadata(b, metadata_vec)
    if signature is not None:
        fb.ModelAddSignatureDefs(b, signature)
    b.Finish(fb.ModelEnd(b), file_identifier=FILE_IDENTIFIER)
    return memoryview(b.Bytes)[b.Head():]  # the builder's own bytes: no second copy
