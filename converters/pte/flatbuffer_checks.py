"""Bound checks over flatbuffer bytes that nothing in them is trusted by: before a table, vector
or string is used its position, vtable and length are checked to lie inside the buffer, and the
work is bounded. Every failure is a ``Pt2FormatError`` naming the field (``path``). Shared by the
readers of the ``.pte`` (``reader.py``), the ``.ptd`` (``ptd_reader.py``) and an XNNPACK payload
(``delegate_reader.py``).
"""

from __future__ import annotations

import struct

from ...serde.errors import Pt2FormatError

__all__ = ["Checked", "fail", "MAX_ITEMS", "MAX_STRING", "MAX_FLATBUFFER"]

MAX_ITEMS = 20_000_000  # vector elements read in all, over one buffer
MAX_STRING = 1 << 20
MAX_FLATBUFFER = 2**31 - 1  # the most bytes a flatbuffer can address (32-bit offsets)


def fail(path: str, message: str):
    raise Pt2FormatError(message, path=path)


class Checked:
    """Bounds checks over the flatbuffer bytes ``buf`` (``n`` of them) and the work budget."""

    def __init__(self, buf, n: int):
        self.buf, self.n, self.items = buf, n, 0

    def u32(self, at: int, path: str) -> int:
        if at < 0 or at + 4 > self.n:
            fail(path, f"offset {at} is outside the flatbuffer ({self.n} bytes)")
        return struct.unpack_from("<I", self.buf, at)[0]

    def table(self, tab, path: str):
        """``tab`` (a flatbuffers ``Table``) after checking its position and vtable."""
        pos, n = tab.Pos, self.n
        if pos < 0 or pos + 4 > n:
            fail(path, f"table at {pos} is outside the flatbuffer ({n} bytes)")
        vt = pos - struct.unpack_from("<i", self.buf, pos)[0]
        if vt < 0 or vt + 4 > n:
            fail(path, f"vtable at {vt} is outside the flatbuffer ({n} bytes)")
        vt_len, obj_len = struct.unpack_from("<HH", self.buf, vt)
        if vt_len < 4 or vt_len % 2 or vt + vt_len > n or obj_len < 4 or pos + obj_len > n:
            fail(path, f"malformed vtable (length {vt_len}, table size {obj_len})")
        for slot in range(4, vt_len, 2):
            field = struct.unpack_from("<H", self.buf, vt + slot)[0]
            if field and (field < 4 or field >= obj_len):
                fail(path, f"field {(slot - 4) // 2} at {field} is outside its table ({obj_len} bytes)")
        return tab

    def target(self, tab, slot: int, path: str) -> int | None:
        """Where the offset field at ``slot`` points (checked), or None when it is absent."""
        o = tab.Offset(slot)
        if not o:
            return None
        at = tab.Pos + o
        dest = at + self.u32(at, path)
        if dest + 4 > self.n:
            fail(path, f"points at {dest}, outside the flatbuffer ({self.n} bytes)")
        return dest

    def vector(self, tab, slot: int, elem: int, path: str, limit: int) -> int:
        """The length of the vector at ``slot`` (0 when absent) after checking it fits."""
        dest = self.target(tab, slot, path)
        if dest is None:
            return 0
        length = self.u32(dest, path)
        if length > limit:
            fail(path, f"{length} entries, more than pt2x reads ({limit})")
        if dest + 4 + length * elem > self.n:
            fail(path, f"{length} entries of {elem} bytes run past the flatbuffer's end ({self.n} bytes)")
        self.items += length
        if self.items > MAX_ITEMS:
            fail(path, f"the file holds more than {MAX_ITEMS} vector entries, more than pt2x reads")
        return length

    def vector_values(self, tab, slot: int, fmt: str, path: str, limit: int) -> list:
        length = self.vector(tab, slot, struct.calcsize(fmt), path, limit)
        if not length:
            return []
        dest = self.target(tab, slot, path) + 4
        return list(struct.unpack_from(f"<{length}{fmt}", self.buf, dest))

    def string(self, tab, slot: int, path: str) -> str | None:
        dest = self.target(tab, slot, path)
        if dest is None:
            return None
        length = self.vector(tab, slot, 1, path, MAX_STRING)
        raw = bytes(self.buf[dest + 4: dest + 4 + length])
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            fail(path, "not UTF-8 text")

    def index(self, value: int, count: int, what: str, path: str, optional: bool = False) -> int:
        if not (0 <= value < count or (optional and value == -1)):
            fail(path, f"{what} index {value} is out of range (the plan has {count})")
        return value
