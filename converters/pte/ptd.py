"""The ``.ptd`` pt2x writes beside a ``.pte`` (``to_pte(..., external_weights=True)``): ExecuTorch's
FlatTensor data file (``flat_tensor.fbs``, file identifier ``FT01``), holding the weights the
program reads by key. The layout, as exir's ``FlatTensorSerializer`` writes it::

    [0:4]    root offset              [4:8] "FT01"
    [8:56]   header: "FH01", u32 length (40), u64 flatbuffer offset (48: the header's room),
             u64 flatbuffer size (without the header), u64 segment base offset, u64 segment
             data size; zero-padded to 48 bytes (16-aligned, the flatbuffer's alignment)
    [56:]    the rest of the FlatTensor flatbuffer (which so spans [0, 48 + its size))
    pad to SEGMENT_ALIGNMENT, then the segments, each SEGMENT_ALIGNMENT-aligned from the base

``FlatTensor``: version 0, ``segments`` (offset from the base, size), ``named_data`` (key ->
segment index, ``TensorLayout``: scalar type, sizes, dim order). What exir's
``to_executorch(ExecutorchBackendConfig(external_constants=True))`` writes, and so what pt2x
writes:

* the keys are the weights' fully qualified names (``fc1.weight``, ``bn.running_mean``);
  byte-identical weights share one segment under their two keys;
* every weight the program reads goes there but the lifted tensor constants (placeholders named
  ``*_lifted_tensor*``, tensors made inside ``forward``), which exir's ``external_constants_pass``
  leaves in the ``.pte``'s constant segment, and a weight the program also reads through a
  static view (``w.reshape(4, 6)``: a tensor of other sizes sharing its bytes), which stays in the
  ``.pte`` too: the runtime checks an external tensor's sizes against its key's layout, so a view
  cannot name the weight's key (exir folds such views into constants of their own);
* delegated, the XNNPACK payloads' constants (the program's named blobs, ``Plan.named_data``) go
  there too, each a segment of its own under its key, with no tensor layout (a blob, as exir's
  ``NamedDataStore`` writes one): the runtime gives the backend one map of the ``.pte``'s named
  data and the ``.ptd``'s;
* the ``.pte`` does not name the file: the runtime is given its path (``load_program(pte,
  data_path=...)``). exir's ``write_tensor_data_to_file(dir)`` names it after its tag,
  ``_default_external_constant.ptd``; pt2x names it after the ``.pte`` (``M.pte`` -> ``M.ptd``),
  as ExecuTorch's examples rename it.

Each weight is streamed from the archive's memory map into the file once (``segments.stream``,
the same routine as the ``.pte``'s constant segment).
"""

from __future__ import annotations

import io
import os
import struct
from dataclasses import dataclass, field

import flatbuffers
import numpy as np

from ..errors import ConversionError
from . import flat_tensor_generated as ft
from .constants import constant_buffers, used_weights
from .flatbuffer_build import finished, table_vector
from .program import Plan, TensorValue
from .segments import Packing, align, pack, stream, stream_blob

__all__ = ["DataFile", "external_weights", "ptd_bytes", "data_writer", "ptd_path", "FILE_IDENTIFIER", "HEADER_MAGIC",
           "HEADER_LENGTH", "HEADER_ROOM", "SEGMENT_ALIGNMENT", "VERSION", "LIFTED_TENSOR"]

FILE_IDENTIFIER = b"FT01"
HEADER_MAGIC = b"FH01"
HEADER_LENGTH = 40
HEADER_ROOM = 48  # the header padded to 16 bytes: what is inserted after the identifier
SEGMENT_ALIGNMENT = 128  # exir's FlatTensorConfig.segment_alignment
VERSION = 0  # FlatTensor.version (the runtime's kMaxSupportedSchemaVersion)
LIFTED_TENSOR = "_lifted_tensor"  # exir keeps these placeholders' constants in the .pte


@dataclass
class DataFile:
    """The ``.ptd``'s contents: which weight is where, under which key."""

    keys: dict  # weight placeholder -> its key (fully qualified name), in first-use order
    segment_of: dict  # weight placeholder -> its segment index
    layouts: dict  # weight placeholder -> (ExecuTorch scalar type, sizes)
    packing: Packing  # the weights' segments: arrays and offsets from the segment base
    blobs: list = field(default_factory=list)  # NamedData: the delegates' constants, a segment each after the weights'

    def blob_offsets(self) -> tuple[list[int], int]:
        """Each blob's offset from the segment base, and the segments' total size."""
        out, at = [], self.packing.size
        for blob in self.blobs:
            at = align(at, SEGMENT_ALIGNMENT)
            out.append(at)
            at += blob.nbytes
        return out, at

    def refs(self) -> dict:
        """What the ``.pte``'s tensors name (``writer.flatbuffer``'s ``external``)."""
        return {name: (key, self.segment_of[name]) for name, key in self.keys.items()}


def external_weights(plan: Plan, weights: dict) -> DataFile | None:
    """The weights ``plan`` reads that go to the ``.ptd``, and its named blobs (the delegates'
    constants: the ``.pte`` then holds none, ``writer.Segments.of(..., named_elsewhere=True)``);
    None when there are neither.
    ``weights``: the program's (``ProgramView.weights``)."""
    used = used_weights(plan)
    viewed = {v.storage().weight for v in plan.values if isinstance(v, TensorValue) and v.alias_of is not None}
    names = [n for n in used if LIFTED_TENSOR not in n and n not in viewed]
    blobs = list(plan.named_data)
    if not names and not blobs:
        return None
    arrays, buffer_of = constant_buffers(plan, weights, leave_out=frozenset(used) - set(names))
    tensors = {v.weight: v for v in plan.values if isinstance(v, TensorValue) and v.weight}
    data = DataFile({n: weights[n].fqn for n in names}, {n: buffer_of[n] - 1 for n in names},
                    {n: (tensors[n].scalar_type, tuple(tensors[n].sizes)) for n in names},
                    pack(arrays, SEGMENT_ALIGNMENT), blobs)
    sizes = {data.keys[n]: tensors[n].nbytes for n in names}
    for blob in blobs:  # a delegate reading a weight as it is names it by its key: one entry serves both
        if blob.key in sizes and blob.nbytes != sizes[blob.key]:
            raise ConversionError(f"the .ptd would name two entries {blob.key!r} (a weight and a delegate's constant)")
    data.blobs = [blob for blob in blobs if blob.key not in sizes]
    return data


def _flat_tensor(data: DataFile) -> bytes:
    """The ``FlatTensor`` flatbuffer (no header yet)."""
    b = flatbuffers.Builder(1024)
    named = []
    for name, key in data.keys.items():
        scalar_type, sizes = data.layouts[name]
        k = b.CreateString(key)
        sizes_vec = b.CreateNumpyVector(np.asarray(sizes, dtype=np.int32))
        dim_order = b.CreateNumpyVector(np.arange(len(sizes), dtype=np.uint8))
        ft.TensorLayoutStart(b)
        ft.TensorLayoutAddScalarType(b, scalar_type)
        ft.TensorLayoutAddSizes(b, sizes_vec)
        ft.TensorLayoutAddDimOrder(b, dim_order)
        layout = ft.TensorLayoutEnd(b)
        ft.NamedDataStart(b)
        ft.NamedDataAddKey(b, k)
        ft.NamedDataAddSegmentIndex(b, data.segment_of[name])
        ft.NamedDataAddTensorLayout(b, layout)
        named.append(ft.NamedDataEnd(b))
    first = len(data.packing.arrays)
    for i, blob in enumerate(data.blobs):  # a blob: no tensor layout
        k = b.CreateString(blob.key)
        ft.NamedDataStart(b)
        ft.NamedDataAddKey(b, k)
        ft.NamedDataAddSegmentIndex(b, first + i)
        named.append(ft.NamedDataEnd(b))
    segments = []
    places = list(zip(data.packing.offsets, (a.nbytes for a in data.packing.arrays)))
    places += list(zip(data.blob_offsets()[0], (blob.nbytes for blob in data.blobs)))
    for off, size in places:
        ft.DataSegmentStart(b)
        ft.DataSegmentAddOffset(b, off)
        ft.DataSegmentAddSize(b, size)
        segments.append(ft.DataSegmentEnd(b))
    segments_vec, named_vec = table_vector(b, segments), table_vector(b, named)
    ft.FlatTensorStart(b)
    ft.FlatTensorAddVersion(b, VERSION)
    ft.FlatTensorAddSegments(b, segments_vec)
    ft.FlatTensorAddNamedData(b, named_vec)
    return finished(b, ft.FlatTensorEnd(b), FILE_IDENTIFIER, "the .ptd's")


def _head(data: DataFile) -> tuple[bytes, int]:
    """The flatbuffer with its header inserted after the identifier (the root offset moved past
    it), and the segment base offset."""
    body = _flat_tensor(data)
    base = align(len(body) + HEADER_ROOM, SEGMENT_ALIGNMENT)
    header = HEADER_MAGIC + struct.pack("<IQQQQ", HEADER_LENGTH, HEADER_ROOM, len(body), base, data.blob_offsets()[1])
    root = struct.unpack_from("<I", body, 0)[0] + HEADER_ROOM
    return struct.pack("<I", root) + body[4:8] + header.ljust(HEADER_ROOM, b"\0") + body[8:], base


def _write(f, data: DataFile) -> None:
    head, base = _head(data)
    f.write(head)
    f.write(b"\0" * (base - len(head)))
    stream(f, data.packing)
    at = data.packing.size
    for blob, off in zip(data.blobs, data.blob_offsets()[0]):
        f.write(b"\0" * (off - at))
        stream_blob(f, blob)
        at = off + blob.nbytes


def ptd_bytes(data: DataFile) -> bytes:
    buf = io.BytesIO()
    _write(buf, data)
    return buf.getvalue()


def data_writer(data: DataFile):
    """What fills the ``.ptd`` (``serde.atomic_write``'s ``Fill``)."""
    return lambda f: _write(f, data)


def ptd_path(pte_path) -> str:
    """The ``.ptd`` beside a ``.pte``: ``M.pte`` -> ``M.ptd`` (another name: the suffix added)."""
    path = os.fspath(pte_path)
    return (path[:-4] if path.lower().endswith(".pte") else path) + ".ptd"
