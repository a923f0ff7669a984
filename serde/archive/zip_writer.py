"""Writes PT2 zip archives: deterministic bytes, aligned members, atomic replacement.

Deterministic: fixed timestamps and member order chosen by the caller, no random ids,
so saving the same program twice gives identical files. Aligned: each member's data
starts on a 64-byte boundary (padding in the local header's extra field, as torch's
own writer does) so readers can memory-map tensors in place. Atomic: a path target is
written through ``serde.atomic_write`` (a temporary file beside it, renamed over it), so a
crash leaves either the old file or the new one, with the mode ``open(path, "wb")`` gives.
"""

from __future__ import annotations

import io
import os
import struct
import zipfile
from typing import BinaryIO, Iterable

from ..atomic_write import write_atomically
from ..errors import Pt2UsageError

__all__ = ["ALIGNMENT", "write_archive"]

ALIGNMENT = 64
_FIXED_TIME = (1980, 1, 1, 0, 0, 0)
_PAD_HEADER_ID = 0x4246  # "FB", the id torch's writer uses for its padding field
_LOCAL_HEADER = 30


def _zinfo(name: str, offset: int) -> zipfile.ZipInfo:
    info = zipfile.ZipInfo(name, date_time=_FIXED_TIME)
    info.compress_type = zipfile.ZIP_STORED
    info.external_attr = 0o644 << 16
    info.create_system = 3
    start = offset + _LOCAL_HEADER + len(name.encode("utf-8"))
    pad = (-(start + 4)) % ALIGNMENT
    info.extra = struct.pack("<HH", _PAD_HEADER_ID, pad) + b"\0" * pad
    return info


def _write(fp: BinaryIO, members: Iterable[tuple[str, bytes | bytearray | memoryview]]) -> None:
    seen: set[str] = set()
    with zipfile.ZipFile(fp, "w", zipfile.ZIP_STORED, allowZip64=True) as zf:
        for name, data in members:
            if name in seen:
                raise Pt2UsageError(f"duplicate archive member {name!r}")
            seen.add(name)
            info = _zinfo(name, zf.fp.tell())
            with zf.open(info, "w", force_zip64=len(data) >= zipfile.ZIP64_LIMIT) as out:
                out.write(data)


def write_archive(dst: str | os.PathLike | BinaryIO, members: Iterable[tuple[str, bytes | bytearray | memoryview]]) -> None:
    """Write ``members`` (full member names, in order) as a stored zip to ``dst``.

    ``dst`` is a path (written atomically) or a writable binary file object. A path that
    cannot be written raises ``OSError`` naming ``dst`` (not the temporary file).
    """
    if not isinstance(dst, (str, os.PathLike)):
        _write(dst, members)
        return
    write_atomically(dst, lambda f: _write(f, members))


def to_bytes(members: Iterable[tuple[str, bytes]]) -> bytes:
    """The archive as bytes (for tests and in-memory use)."""
    buf = io.BytesIO()
    _write(buf, members)
    return buf.getvalue()
