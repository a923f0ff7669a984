"""The named data an XNNPACK delegate reads, from its payload: what ``read_pte`` reports as a
plan's ``external_blobs`` (the keys the ``.pte``'s own ``named_data`` lacks, which the runtime then
looks up in the ``.ptd`` given beside it), so ``validate`` and ``verify`` name a missing ``.ptd``
or key before the runtime runs into it (executorch 1.5.1's XNNPACK backend ends the process).

A payload (``XnnpackBackend``'s ``processed`` segment) is the ``XH00`` header (``[4:8]`` magic,
``[8:10]`` u16 length, ``[10:14]`` u32 flatbuffer offset, ``[14:18]`` u32 flatbuffer size), then
the ``XNNGraph`` flatbuffer (``XN01``), whose ``constant_data`` entries
(``ConstantDataOffset``: offset, size, ``named_key``) name the blobs. Read with the reader's bound
checks (``flatbuffer_checks.Checked``): a malformed payload is a ``Pt2FormatError`` naming the delegate.
"""

from __future__ import annotations

import struct

from .flatbuffer_checks import Checked, fail

__all__ = ["BACKEND_ID", "HEADER_MAGIC", "FILE_IDENTIFIER", "payload_keys", "external_blobs"]

# the payload's format, read here and written by xnnpack/payload.py (one table of these facts)
BACKEND_ID = "XnnpackBackend"
MAX_PAYLOAD = 1 << 28  # bytes of one payload read to list its keys (the graph; its constants are named data)
HEADER_MAGIC = b"XH00"
FILE_IDENTIFIER = b"XN01"
_GRAPH_CONSTANT_DATA = 4 + 2 * 8  # XNNGraph field 8: constant_data
_CONSTANT_NAMED_KEY = 4 + 2 * 2  # ConstantDataOffset field 2: named_key


def payload_keys(payload: bytes, path: str) -> list[str]:
    """The named keys of one XNNPACK payload, in order (``path``: the delegate, for errors)."""
    if len(payload) < 18 or payload[4:8] != HEADER_MAGIC:
        fail(f"{path}.processed", f"not an XNNPACK payload (no {HEADER_MAGIC.decode()} header)")
    start, size = struct.unpack_from("<II", payload, 10)
    if start + size > len(payload) or size < 8:
        fail(f"{path}.processed", f"its flatbuffer ({size} bytes at {start}) runs past the payload ({len(payload)} bytes)")
    buf = payload[start:start + size]
    if buf[4:8] != FILE_IDENTIFIER:
        fail(f"{path}.processed", f"the graph's identifier {bytes(buf[4:8])!r} is not {FILE_IDENTIFIER!r}")
    from flatbuffers.table import Table  # the pte extra's; read_pte has checked it is there

    c = Checked(buf, len(buf))
    graph = c.table(Table(buf, c.u32(0, f"{path}.processed")), f"{path}.processed")
    n = c.vector(graph, _GRAPH_CONSTANT_DATA, 4, f"{path}.processed.constant_data", 1 << 20)
    if not n:
        return []
    first = c.target(graph, _GRAPH_CONSTANT_DATA, f"{path}.processed.constant_data") + 4
    keys = []
    for i in range(n):
        at = first + 4 * i
        p = f"{path}.processed.constant_data[{i}]"
        entry = c.table(Table(buf, at + c.u32(at, p)), p)
        key = c.string(entry, _CONSTANT_NAMED_KEY, f"{p}.named_key")
        if key:
            keys.append(key)
    return keys


def external_blobs(k: int, plan: dict, segments: list, named: set, read) -> list[dict]:
    """The keys plan ``k``'s (``plan``: ``read_pte``'s summary of it) XNNPACK delegates read that the
    program's named data (``named``) lacks, each ``{"key", "delegate"}``; ``read(offset, size)``
    gives a segment's bytes (offset from the segment base)."""
    out, seen = [], set()
    for i, d in enumerate(plan["delegates"]):
        path = f"execution_plan[{k}].delegates[{i}]"
        if d["id"] != BACKEND_ID or d["location"] != "segment":
            continue
        seg = segments[d["index"]]
        if seg["size"] > MAX_PAYLOAD:
            fail(f"{path}.processed", f"a {seg['size']}-byte payload, more than pt2x reads ({MAX_PAYLOAD})")
        try:
            keys = payload_keys(read(seg["offset"], seg["size"]), path)
        except (struct.error, IndexError, ValueError, TypeError, OverflowError) as e:  # a read the checks missed
            fail(f"{path}.processed", f"malformed XNNPACK payload ({type(e).__name__}: {e})")
        except OSError as e:
            fail(f"{path}.processed", f"its segment cannot be read: {(e.strerror or str(e)).lower()}")
        for key in keys:
            if key not in named and key not in seen:
                seen.add(key)
                out.append({"key": key, "delegate": path})
    return out
