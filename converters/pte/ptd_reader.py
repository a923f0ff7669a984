"""Read an ExecuTorch ``.ptd`` (FlatTensor data file), torch-free and defensively, and check a
``.pte`` against it.

``read_ptd(path_or_bytes)`` -> a summary dict (what ``pt2x inspect`` prints and ``pt2x validate``
checks). Nothing in the file is trusted: the ``FH01`` header's offsets and sizes are checked
against the file, its flatbuffer offset and every segment's start against the alignment the
data needs (``MIN_ALIGNMENT``), the ``FlatTensor`` tables, vectors and strings with the ``.pte``
reader's bounds checks (``flatbuffer_checks.Checked``), every segment index, scalar type, size and dim
order, and each tensor's bytes against its segment. Any failure is a ``Pt2FormatError`` naming
the field (``named_data[3].segment_index``). Only the flatbuffer is read: the segments (the
weights) are checked against the file's size, not loaded.

``check_data(pte, ptd)``: the findings of a ``.pte`` (``read_pte``'s summary) whose external
tensors a ``.ptd`` must hold: each key present, with the dtype and sizes the program declares
(ExecuTorch's runtime checks both when it loads the method, and ends the process on a mismatch),
and each blob its XNNPACK delegates read by key (``external_blobs``: present; a blob has no
layout to check). ``reads_data(pte)``: whether the program reads anything from a ``.ptd``.
"""

from __future__ import annotations

import os
import struct

from ...serde.errors import Pt2FormatError, Pt2UsageError, extra_required
from ...serde.findings import Finding
from .flatbuffer_checks import MAX_FLATBUFFER, Checked, fail
from .reader import _ELEMENT_BYTES, MAX_RANK, _dtype_names, is_flatbuffer_file

__all__ = ["read_ptd", "is_ptd", "check_data", "reads_data", "MIN_ALIGNMENT", "MAX_ENTRIES"]

FILE_IDENTIFIER = b"FT01"
HEADER_MAGIC = b"FH01"
_HEADER_MIN = 40  # magic, length, flatbuffer offset and size, segment base offset and data size
_HEAD_BYTES = 64  # the runtime's FlatTensorHeader::kNumHeadBytes
MIN_ALIGNMENT = 16  # a segment's start in the file, and the flatbuffer offset (a flatbuffer's alignment)
MAX_ENTRIES = 2_000_000  # segments or named data entries read
_SLOT = {"version": 4, "segments": 6, "named_data": 8}
_SEGMENT_SLOT = {"offset": 4, "size": 6}
_NAMED_SLOT = {"key": 4, "segment_index": 6, "tensor_layout": 8}
_LAYOUT_SLOT = {"scalar_type": 4, "sizes": 6, "dim_order": 8}


def is_ptd(path: str) -> bool:
    """Whether ``path`` names a ``.ptd`` (by its name, or by ``FT01`` at bytes 4:8)."""
    return is_flatbuffer_file(path, ".ptd", FILE_IDENTIFIER)


def _header(data: bytes, size: int) -> dict:
    if size < 8:
        fail("file", f"{size} bytes: too short for a .ptd (a flatbuffer needs at least 8)")
    if data[4:8] != FILE_IDENTIFIER:
        fail("file_identifier", f"{data[4:8]!r} is not ExecuTorch's {FILE_IDENTIFIER!r}: not a .ptd file")
    if size < 8 + _HEADER_MIN or data[8:12] != HEADER_MAGIC:
        fail("header", f"no {HEADER_MAGIC.decode()} header at byte 8 (the runtime needs one)")
    length, fb_offset, fb_size, base, data_size = struct.unpack_from("<IQQQQ", data, 12)
    if length < _HEADER_MIN or 8 + length > fb_offset + 8:
        fail("header.length", f"{length}: an FH01 header is at least {_HEADER_MIN} bytes and ends before the flatbuffer resumes")
    if fb_offset % MIN_ALIGNMENT:
        fail("header.flatbuffer_offset", f"{fb_offset} is not a multiple of {MIN_ALIGNMENT}: the flatbuffer's "
                                          "alignment would break")
    end = fb_offset + fb_size
    if fb_size < 8 or end > size:
        fail("header.flatbuffer_size", f"{fb_size} bytes from offset {fb_offset} do not fit the file ({size} bytes)")
    if end > MAX_FLATBUFFER:
        fail("header.flatbuffer_size", f"a {end}-byte flatbuffer, past flatbuffers' 2 GiB limit")
    if base < end or base > size:
        fail("header.segment_base_offset", f"{base} is not between the flatbuffer's end ({end}) and the file's ({size})")
    if base + data_size > size:
        fail("header.segment_data_size", f"{data_size} bytes from {base} run past the file's end ({size})")
    return {"length": length, "flatbuffer_offset": fb_offset, "flatbuffer_size": fb_size,
            "segment_base_offset": base, "segment_data_size": data_size}


def read_ptd(source, name: str | None = None) -> dict:
    """The summary of a ``.ptd`` given as a path or its bytes; ``Pt2FormatError`` when malformed,
    ``Pt2UsageError`` when the path cannot be read."""
    with extra_required("reading a .ptd", "flatbuffers", "pte"):
        import flatbuffers  # noqa: F401  (the generated module needs it)
    if isinstance(source, (bytes, bytearray, memoryview)):
        data = bytes(source)
        header = _header(data, len(data))
        end = header["flatbuffer_offset"] + header["flatbuffer_size"]
        return _summary(data[:end], len(data), name or "<bytes>", header)
    try:
        with open(source, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            header = _header(f.read(_HEAD_BYTES), size)
            end = header["flatbuffer_offset"] + header["flatbuffer_size"]
            f.seek(0)
            data = f.read(end)
    except OSError as e:
        raise Pt2UsageError(f"cannot read {source}: {(e.strerror or str(e)).lower()}") from None
    if len(data) != end:
        fail("file", "the file changed while it was read")
    return _summary(data, size, name or str(source), header)


def _summary(data: bytes, size: int, name: str, header: dict) -> dict:
    where = ["flat_tensor"]
    try:
        return _read(Checked(data, len(data)), size, name, header, where)
    except Pt2FormatError:
        raise
    except (struct.error, IndexError, ValueError, TypeError, OverflowError) as e:
        raise Pt2FormatError(f"malformed flatbuffer ({type(e).__name__}: {e})", path=where[0]) from None


def _read(c: Checked, size: int, name: str, header: dict, where: list) -> dict:
    from . import flat_tensor_generated as ft

    flat = ft.FlatTensor()
    flat.Init(c.buf, c.u32(0, "root"))
    c.table(flat._tab, "flat_tensor")
    segments = _segments(c, flat, header, where)
    named = []
    keys = set()
    for i in range(c.vector(flat._tab, _SLOT["named_data"], 4, "named_data", MAX_ENTRIES)):
        p = f"named_data[{i}]"
        where[0] = p
        entry = _named(c, ft, flat.NamedData(i), p, segments)
        if entry["key"] in keys:
            fail(f"{p}.key", f"{entry['key']!r} is a key of an earlier entry too")
        keys.add(entry["key"])
        named.append(entry)
    return {"file": name, "kind": "executorch-data", "file_identifier": FILE_IDENTIFIER.decode(),
            "schema_version": flat.Version(), "header": header, "size": size, "segments": segments,
            "named_data": named, "data_bytes": sum(s["size"] for s in segments)}


def _segments(c: Checked, flat, header: dict, where: list) -> list[dict]:
    base, room = header["segment_base_offset"], header["segment_data_size"]
    segments = []
    for i in range(c.vector(flat._tab, _SLOT["segments"], 4, "segments", MAX_ENTRIES)):
        p = f"segments[{i}]"
        where[0] = p
        seg = flat.Segments(i)
        c.table(seg._tab, p)
        offset, seg_size = seg.Offset(), seg.Size()
        if offset + seg_size > room:
            fail(p, f"offset {offset} + size {seg_size} runs past the segment data ({room} bytes)")
        if (base + offset) % MIN_ALIGNMENT:
            fail(f"{p}.offset", f"the segment starts at byte {base + offset} of the file, not a multiple of "
                                 f"{MIN_ALIGNMENT}: its tensor's data would be misaligned")
        segments.append({"offset": offset, "size": seg_size})
    return segments


def _named(c: Checked, ft, entry, p: str, segments: list) -> dict:
    c.table(entry._tab, p)
    key = c.string(entry._tab, _NAMED_SLOT["key"], f"{p}.key")
    if not key:
        fail(f"{p}.key", "an entry with no key")
    index = entry.SegmentIndex()
    if index >= len(segments):
        fail(f"{p}.segment_index", f"segment {index} does not exist (the file has {len(segments)})")
    out = {"key": key, "segment_index": index, "bytes": segments[index]["size"]}
    if c.target(entry._tab, _NAMED_SLOT["tensor_layout"], f"{p}.tensor_layout") is not None:
        out.update(_layout(c, ft, entry.TensorLayout(), f"{p}.tensor_layout", segments[index]["size"]))
    return out


def _layout(c: Checked, ft, layout, p: str, seg_size: int) -> dict:
    c.table(layout._tab, p)
    dtype = layout.ScalarType()
    if dtype not in _ELEMENT_BYTES:
        fail(f"{p}.scalar_type", f"{dtype} is not an ExecuTorch scalar type")
    sizes = c.vector_values(layout._tab, _LAYOUT_SLOT["sizes"], "i", f"{p}.sizes", MAX_RANK)
    if any(s < 0 for s in sizes):
        fail(f"{p}.sizes", f"{sizes}: a negative size")
    dim_order = c.vector_values(layout._tab, _LAYOUT_SLOT["dim_order"], "B", f"{p}.dim_order", MAX_RANK)
    if sorted(dim_order) != list(range(len(sizes))):
        fail(f"{p}.dim_order", f"{dim_order} is not an order of the {len(sizes)} dims")
    numel = 1
    for s in sizes:
        numel *= s
    if numel * _ELEMENT_BYTES[dtype] > seg_size:
        fail(p, f"{numel} elements of {_ELEMENT_BYTES[dtype]} bytes do not fit its segment ({seg_size} bytes)")
    return {"dtype": _dtype_names(ft).get(dtype, str(dtype)), "sizes": sizes, "dim_order": dim_order}


def check_data(pte: dict, ptd: dict | None, data_name: str) -> list[Finding]:
    """What the ``.pte`` summary ``pte`` needs of its data file and ``ptd`` (its summary; None:
    there is none, ``data_name`` saying where it was looked for) lacks: ``missing-data``,
    ``missing-key`` and ``data-layout`` errors."""
    wanted = [(k, e) for k, plan in enumerate(pte["execution_plans"]) for e in plan.get("external_tensors", [])]
    blobs = [e for plan in pte["execution_plans"] for e in plan.get("external_blobs", [])]
    if not wanted and not blobs:
        return []
    if ptd is None:
        keys = sorted({e["key"] for _, e in wanted} | {e["key"] for e in blobs})
        return [Finding("error", "missing-data", f"the program reads {len(keys)} tensor(s) from a .ptd "
                        f"({', '.join(keys[:3])}{', ...' if len(keys) > 3 else ''}): {data_name}",
                        path="execution_plan[*].values[*].extra_tensor_info" if wanted else blobs[0]["delegate"])]
    have = {e["key"]: e for e in ptd["named_data"]}
    findings = [Finding("error", "missing-key", f"key {e['key']!r} (a delegate's constant) is not in {data_name}",
                        path=f"{e['delegate']}.processed") for e in blobs if e["key"] not in have]
    for k, e in wanted:
        path = f"execution_plan[{k}].values[{e['value']}].extra_tensor_info"
        entry = have.get(e["key"])
        if entry is None:
            findings.append(Finding("error", "missing-key", f"key {e['key']!r} is not in {data_name}", path=path))
        elif "sizes" in entry and (entry["dtype"], entry["sizes"]) != (e["dtype"], e["sizes"]):
            findings.append(Finding("error", "data-layout", f"key {e['key']!r} is {entry['dtype']}{entry['sizes']} "
                                    f"in {data_name}, {e['dtype']}{e['sizes']} in the program", path=path))
    return findings


def reads_data(pte: dict) -> bool:
    """Whether the program (``read_pte``'s summary) reads a tensor or a delegate's blob from a ``.ptd``."""
    return any(plan.get("external_tensors") or plan.get("external_blobs") for plan in pte["execution_plans"])
