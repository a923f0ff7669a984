"""Weights an ONNX file keeps beside it (``torch.onnx.export`` writes ``<name>.onnx.data``),
read only after everything about them is checked, and then exactly the bytes they need.

For each tensor whose ``data_location`` is ``EXTERNAL``, before a byte of it is read:

* its ``location`` is a relative file name inside the model's own folder (symlinks resolved),
  naming a regular file (not a FIFO, device or folder, which could block or never end);
* its dims are within the TFLite target's bounds and its type has a fixed size, so the bytes it
  needs are ``elements x itemsize``;
* its ``offset`` and ``length`` (when given) are integers, ``length`` is those bytes, and
  ``offset + bytes`` lies inside the file (without ``length``, the rest of the file from
  ``offset`` must be exactly those bytes).

Then the main graph's tensors of whole-byte types are memory-mapped, not read: each becomes a
view of its file behind a skeleton initializer (``onnx/lazy_initializers.py``), so a model of any
size is converted without its weights in memory, and the TFLite writer copies each one once.
Other tensors (in subgraphs, or of 4- and 2-bit types) are read: exactly those bytes, one
``pread`` of that size. A 96-byte model naming a 3 GiB file for a four-element weight reads 16
bytes; onnx's own loader reads the whole file first.
Failures are ``ConversionError`` naming the initializer and the field.
"""

from __future__ import annotations

import mmap
import os
import stat

import numpy as np
import onnx
from onnx import TensorProto, helper

from ....serde.limits import MAX_TENSOR_RANK
from ...errors import ConversionError
from ...guard import safe_text
from ...limits import MAX_ONNX_DIM
from ...onnx.lazy_initializers import LazyInitializers

__all__ = ["load_external_data"]

_KEYS = ("location", "offset", "length", "checksum", "basepath")


def load_external_data(m: onnx.ModelProto, folder: str, lazy: LazyInitializers | None = None) -> None:
    """Bring in every external tensor of ``m`` (every subgraph counted) from ``folder``, in place:
    the main graph's mapped into ``lazy`` when given, the rest read."""
    from onnx import external_data_helper as ext

    root = os.path.realpath(folder)
    tensors = [t for t in ext._get_all_tensors(m) if t.data_location == TensorProto.EXTERNAL]
    plans = [(t, _plan(t, root)) for t in tensors]  # every check before any read
    mains = {t.name for t in m.graph.initializer}
    maps: dict[str, object] = {}
    for t, (path, offset, nbytes) in plans:
        dtype = _whole_byte_dtype(t)
        if lazy is not None and t.name in mains and dtype is not None:
            arr = _mapped(maps, path, _name(t)).reshape(-1)[offset:offset + nbytes]
            lazy.adopt(t, arr.view(dtype).reshape(tuple(t.dims)))
            continue
        t.raw_data = _read(path, offset, nbytes, _name(t))
        t.data_location = TensorProto.DEFAULT
        del t.external_data[:]


def _whole_byte_dtype(t: TensorProto):
    """The numpy dtype of ``t``'s elements when each takes whole bytes (None for 4- and 2-bit types)."""
    name = TensorProto.DataType.Name(t.data_type)
    if name.startswith(("INT4", "UINT4", "FLOAT4", "INT2", "UINT2")):
        return None
    return np.dtype(helper.tensor_dtype_to_np_dtype(t.data_type))


def _mapped(maps: dict, path: str, what: str) -> np.ndarray:
    """The whole file at ``path`` as a read-only uint8 memory map (one map per file)."""
    if path not in maps:
        try:
            with open(path, "rb") as f:
                if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):  # replaced since it was checked
                    raise ConversionError(f"{what}: its external data file is not a regular file")
                size = os.fstat(f.fileno()).st_size
                mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) if size else b""
        except OSError as e:
            raise ConversionError(f"{what}: cannot map its external weights: {e.strerror or e}") from e
        maps[path] = np.frombuffer(mm, np.uint8)
    return maps[path]


def _name(t: TensorProto) -> str:
    return f"initializer {safe_text(repr(t.name), 200)}"


def _fields(t: TensorProto) -> dict:
    fields: dict = {}
    for e in t.external_data:
        if e.key not in _KEYS:
            raise ConversionError(f"{_name(t)}: external data key {safe_text(repr(e.key), 100)} is not one ONNX "
                                  f"defines ({', '.join(_KEYS)})")
        if e.key in fields:
            raise ConversionError(f"{_name(t)}: external data key {e.key!r} is given twice")
        fields[e.key] = e.value
    return fields


def _plan(t: TensorProto, root: str) -> tuple[str, int, int]:
    """(path, offset, bytes) to read for ``t``, every field checked."""
    fields = _fields(t)
    nbytes = _needed_bytes(t)
    path = _path(t, fields.get("location", ""), root)
    offset = _integer(t, fields, "offset", 0)
    length = _integer(t, fields, "length", None)
    size = os.stat(path).st_size
    if length is not None and length != nbytes:
        raise ConversionError(f"{_name(t)}: external data length is {length} bytes, its dims {list(t.dims)} and "
                              f"type {TensorProto.DataType.Name(t.data_type)} need {nbytes}")
    if length is None and size - offset != nbytes:
        raise ConversionError(f"{_name(t)}: its external file holds {max(0, size - offset)} bytes after offset "
                              f"{offset} and no length is given; its dims {list(t.dims)} need {nbytes}")
    if offset + nbytes > size:
        raise ConversionError(f"{_name(t)}: external data at offset {offset}, {nbytes} bytes, passes the end of "
                              f"its file ({size} bytes)")
    return path, offset, nbytes


def _path(t: TensorProto, loc, root: str) -> str:
    if not isinstance(loc, str) or "\x00" in loc:  # protobuf hands over invalid UTF-8 as bytes
        raise ConversionError(f"{_name(t)}: its external data location {safe_text(repr(loc), 200)} is not a "
                              "file name")
    path = os.path.realpath(os.path.join(root, loc))
    if not loc or os.path.isabs(loc) or os.path.commonpath([root, path]) != root:
        raise ConversionError(f"{_name(t)} keeps its data at {safe_text(repr(loc), 200)}, outside the model's folder")
    try:
        mode = os.stat(path).st_mode
    except OSError as e:
        raise ConversionError(f"{_name(t)}: cannot read its external weights: {safe_text(repr(loc), 200)}: "
                              f"{e.strerror or e}") from e
    if not stat.S_ISREG(mode):
        raise ConversionError(f"{_name(t)}: its external data location {safe_text(repr(loc), 200)} is not a "
                              "regular file")
    return path


def _integer(t: TensorProto, fields: dict, key: str, default):
    if key not in fields:
        return default
    text = fields[key]
    if not isinstance(text, str) or not text.isascii() or not text.isdigit() or len(text) > 20:
        raise ConversionError(f"{_name(t)}: external data {key} {safe_text(repr(text), 100)} is not a "
                              "non-negative integer")
    return int(text)


def _needed_bytes(t: TensorProto) -> int:
    """Bytes ``t``'s dims and type need, checked before anything is read."""
    if len(t.dims) > MAX_TENSOR_RANK:
        raise ConversionError(f"{_name(t)} dims: rank {len(t.dims)} is over the limit of {MAX_TENSOR_RANK}")
    for k, d in enumerate(t.dims):
        if not 0 <= d <= MAX_ONNX_DIM:
            raise ConversionError(f"{_name(t)} dims: dim {k} is {d}, outside 0..{MAX_ONNX_DIM}")
    if t.data_type in (TensorProto.STRING, TensorProto.UNDEFINED):
        raise ConversionError(f"{_name(t)}: external data of type {TensorProto.DataType.Name(t.data_type)} has "
                              "no fixed size")
    try:
        np_dtype = helper.tensor_dtype_to_np_dtype(t.data_type)
    except (KeyError, ValueError, TypeError):
        raise ConversionError(f"{_name(t)}: data_type {t.data_type} is not an ONNX tensor type") from None
    name = TensorProto.DataType.Name(t.data_type)
    bits = 4 if name.startswith(("INT4", "UINT4", "FLOAT4")) else 2 if name.startswith(("INT2", "UINT2")) \
        else np.dtype(np_dtype).itemsize * 8
    elements = 1
    for d in t.dims:
        elements *= int(d)
    return (elements * bits + 7) // 8


def _read(path: str, offset: int, nbytes: int, what: str) -> bytes:
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):  # replaced since it was checked
                raise ConversionError(f"{what}: its external data file is not a regular file")
            chunks, done = [], 0
            while done < nbytes:
                chunk = os.pread(fd, min(nbytes - done, 1 << 30), offset + done)
                if not chunk:
                    break
                chunks.append(chunk)
                done += len(chunk)
        finally:
            os.close(fd)
    except OSError as e:
        raise ConversionError(f"{what}: cannot read its external weights: {e.strerror or e}") from e
    if done != nbytes:
        raise ConversionError(f"{what}: its external file ended after {done} of {nbytes} bytes")
    return b"".join(chunks) if len(chunks) != 1 else chunks[0]
