"""Writing an ONNX model whose weights are not in memory: each initializer's bytes are streamed
into the file once, from the archive's memory map (``lazy_initializers``) or from the tensor.

Two layouts, both atomic (``serde.atomic_write``: a failed write leaves the old files):

* **one file**, while the initializers fit protobuf's 2 GiB message limit (``EXTERNAL_THRESHOLD``).
  The model is serialised without its large initializers, and the ``initializer`` entries of the
  graph are appended in protobuf's wire format with their ``raw_data`` written straight from the
  arrays (repeated fields may come in any order, so any protobuf reader reads the same model);
* **external data**, past it or on request: every initializer of ``MIN_EXTERNAL_BYTES`` and more
  goes to ``<name>.data`` beside the model, each at an offset aligned for memory mapping
  (``ALIGN_LARGE`` for tensors of ``ALIGN_LARGE_FROM`` bytes and more, else ``ALIGN``), as ONNX's
  external-data spec describes (``location``, ``offset``, ``length``).

Afterwards the model's skeleton initializers point at the bytes just written (the ``.data`` file,
or their place inside the one file): the ``ModelProto`` stays valid and weightless, like
``onnx.load(path, load_external_data=False)``. Initializers that held their own bytes keep them.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np
import onnx
from onnx import TensorProto

from ...serde.atomic_write import write_atomically, write_files_atomically
from ..errors import ConversionError
from .lazy_initializers import is_lazy, store_of

__all__ = ["write_model", "EXTERNAL_THRESHOLD", "MIN_EXTERNAL_BYTES", "ALIGN", "ALIGN_LARGE"]

EXTERNAL_THRESHOLD = 2**31 - 2**24  # protobuf's 2 GiB message limit, with room for the graph
MIN_EXTERNAL_BYTES = 1024  # smaller initializers stay in the model file (onnx.save_model's size_threshold)
ALIGN = 4096  # a page: the offsets ONNX Runtime memory-maps on Linux
ALIGN_LARGE = 65536  # the allocation granularity on Windows, where ONNX Runtime maps too
ALIGN_LARGE_FROM = 1 << 20
_CHUNK = 64 << 20  # bytes written per call (a progress tick)


@dataclass
class _Entry:
    tensor: TensorProto
    nbytes: int
    offset: int = 0  # where its bytes start in the file they go to


def write_model(m: onnx.ModelProto, path: str, *, external: bool | None = None,
                threshold: int = EXTERNAL_THRESHOLD, progress=None) -> str:
    """Write ``m`` to ``path``; returns the layout, ``"single file"`` or ``"external data"``.
    ``external``: ``None`` chooses by size (past ``threshold`` bytes of initializers), ``True``
    forces external data, ``False`` one file (a ``ConversionError`` past ``threshold``).
    ``progress(done, total)`` is called as weight bytes are written."""
    size = sum(_nbytes(t) for t in m.graph.initializer)
    if external is None:
        external = size > threshold
    elif not external and size > threshold:
        raise ConversionError(f"the model's initializers take {size} bytes, past protobuf's 2 GiB limit for one "
                              "ONNX file: write them as external data (--external-data)")
    entries = [_Entry(t, _nbytes(t)) for t in m.graph.initializer
               if is_lazy(t) or len(t.raw_data) >= MIN_EXTERNAL_BYTES]
    if external and entries:
        _write_external(m, path, entries, progress)
        return "external data"
    _write_single(m, path, [e for e in entries if is_lazy(e.tensor)], progress)
    return "single file"


def _nbytes(t: TensorProto) -> int:
    return int(store_of(t).array(t).nbytes) if is_lazy(t) else len(t.raw_data)


def _aligned(offset: int, nbytes: int) -> int:
    a = ALIGN_LARGE if nbytes >= ALIGN_LARGE_FROM else ALIGN
    return -(-offset // a) * a


def _bytes_of(t: TensorProto):
    """``t``'s bytes as a flat uint8 array: a view of the memory map when the weight is stored
    contiguous, else this one tensor made contiguous (or computed) now."""
    if not is_lazy(t):
        return np.frombuffer(t.raw_data, np.uint8)
    arr = np.ascontiguousarray(np.asarray(store_of(t).array(t)))
    return arr.reshape(-1).view(np.uint8)


class _Progress:
    def __init__(self, entries: list[_Entry], progress):
        self.total, self.done, self.report = sum(e.nbytes for e in entries), 0, progress

    def write(self, f, data) -> None:
        for k in range(0, len(data), _CHUNK):
            f.write(data[k:k + _CHUNK])
            self.done += min(_CHUNK, len(data) - k)
            if self.report is not None:
                self.report(self.done, self.total)


def _point_at(t: TensorProto, location: str, offset: int, nbytes: int) -> None:
    t.ClearField("raw_data")
    del t.external_data[:]
    t.data_location = TensorProto.EXTERNAL
    for key, value in (("location", location), ("offset", str(offset)), ("length", str(nbytes))):
        entry = t.external_data.add()
        entry.key, entry.value = key, value


def _write_external(m: onnx.ModelProto, path: str, entries: list[_Entry], progress) -> None:
    location = os.path.basename(path) + ".data"
    offset = 0
    for e in entries:
        e.offset = _aligned(offset, e.nbytes)
        offset = e.offset + e.nbytes
    copy = _with_external(m, entries, location)
    model_bytes = copy.SerializeToString()
    del copy

    def fill(f):
        out = _Progress(entries, progress)
        for e in entries:
            if e.offset > f.tell():
                f.write(b"\0" * (e.offset - f.tell()))
            out.write(f, _bytes_of(e.tensor))

    write_files_atomically([(path + ".data", fill), (path, lambda f: f.write(model_bytes))])
    _repoint(m, entries, location)  # the tensors that held their bytes keep them


def _with_external(m: onnx.ModelProto, entries: list[_Entry], location: str) -> onnx.ModelProto:
    """A copy of ``m`` whose ``entries`` point at ``location`` (the copy holds no weight bytes:
    they are cleared from it before anything large is copied)."""
    moved = {e.tensor.name: e for e in entries}
    shell = _shell(m)
    for t in m.graph.initializer:
        e = moved.get(t.name)
        c = shell.graph.initializer.add()
        if e is None:
            c.CopyFrom(t)
        else:
            c.name, c.data_type = t.name, t.data_type
            c.dims.extend(t.dims)
            if t.doc_string:
                c.doc_string = t.doc_string
            _point_at(c, location, e.offset, e.nbytes)
    return shell


def _shell(m: onnx.ModelProto) -> onnx.ModelProto:
    """A copy of ``m`` whose graph has no initializers (none is copied, large or small)."""
    shell = onnx.ModelProto()
    _copy_fields(m, shell, "graph")
    _copy_fields(m.graph, shell.graph, "initializer")
    return shell


def _copy_fields(src, dst, skip: str) -> None:
    for fd, value in src.ListFields():
        if fd.name == skip:
            continue
        if _repeated(fd):
            getattr(dst, fd.name).extend(value)
        elif fd.message_type is not None:
            getattr(dst, fd.name).CopyFrom(value)
        else:
            setattr(dst, fd.name, value)


def _repeated(fd) -> bool:
    """Whether a field is repeated (protobuf 6 has ``is_repeated``; older releases ``label``)."""
    flag = getattr(fd, "is_repeated", None)
    return bool(flag) if flag is not None else fd.label == fd.LABEL_REPEATED


def _repoint(m: onnx.ModelProto, entries: list[_Entry], location: str) -> None:
    """The model's skeletons now point at the bytes just written (``location``, their offsets)."""
    where = {e.tensor.name: e for e in entries if is_lazy(e.tensor)}
    for t in m.graph.initializer:
        e = where.get(t.name)
        if e is not None and is_lazy(t):
            _point_at(t, location, e.offset, e.nbytes)


# ---------------------------------------------------------------- one file, streamed

def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _key(field: int) -> bytes:  # a length-delimited field's key (wire type 2)
    return _varint(field << 3 | 2)


_GRAPH, _INITIALIZER, _RAW_DATA = 7, 5, 9  # ModelProto.graph, GraphProto.initializer, TensorProto.raw_data


def _write_single(m: onnx.ModelProto, path: str, lazy: list[_Entry], progress) -> None:
    if not lazy:
        model_bytes = m.SerializeToString()
        write_atomically(path, lambda f: f.write(model_bytes))
        return
    names = {e.tensor.name for e in lazy}
    shell = _shell(m)
    shell.graph.initializer.extend(t for t in m.graph.initializer if t.name not in names)
    graph_head = shell.graph.SerializeToString()
    shell.ClearField("graph")
    head = shell.SerializeToString()
    heads = [_tensor_head(e.tensor) for e in lazy]
    sizes = [len(h) + len(_key(_RAW_DATA)) + len(_varint(e.nbytes)) + e.nbytes for h, e in zip(heads, lazy)]
    graph_len = len(graph_head) + sum(len(_key(_INITIALIZER)) + len(_varint(s)) + s for s in sizes)
    pos = len(head) + len(_key(_GRAPH)) + len(_varint(graph_len)) + len(graph_head)
    for h, e, s in zip(heads, lazy, sizes):
        pos += len(_key(_INITIALIZER)) + len(_varint(s)) + len(h) + len(_key(_RAW_DATA)) + len(_varint(e.nbytes))
        e.offset = pos
        pos += e.nbytes

    def fill(f):
        f.write(head + _key(_GRAPH) + _varint(graph_len) + graph_head)
        out = _Progress(lazy, progress)
        for h, e, s in zip(heads, lazy, sizes):
            f.write(_key(_INITIALIZER) + _varint(s) + h + _key(_RAW_DATA) + _varint(e.nbytes))
            out.write(f, _bytes_of(e.tensor))

    write_atomically(path, fill)
    _repoint(m, lazy, os.path.basename(path))


def _tensor_head(t: TensorProto) -> bytes:
    """A tensor's fields but its data, serialised (its ``raw_data`` field follows it)."""
    h = TensorProto(name=t.name, data_type=t.data_type, dims=list(t.dims))
    if t.doc_string:
        h.doc_string = t.doc_string
    return h.SerializeToString()
