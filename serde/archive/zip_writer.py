"""Writes PT2 zip archives: deterministic bytes, aligned members, atomic replacement.

Deterministic: fixed timestamps and member order chosen by the caller, no random ids,
so saving the same program twice gives identical files. Aligned: each member's data
starts on a 64-byte boundary (padding in the local header's extra field, as torch's
own writer does) so readers can memory-map tensors in place. Atomic: a path target is
written to a temporary file beside it and renamed over it, so a crash leaves either
the old file or the new one. The new file gets the mode a plain ``open(path, "wb")``
would give it (an existing file's mode, else ``0o666`` less the umask), as
``torch.export.save`` does; ``tempfile`` alone would leave it ``0o600``.
"""

from __future__ import annotations

import errno
import io
import os
import stat
import struct
import tempfile
import zipfile
from typing import BinaryIO, Iterable

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
    dst = os.fspath(dst)
    if os.path.isdir(dst):
        raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), dst)
    if os.path.exists(dst) and not os.path.isfile(dst):  # a device, FIFO, socket: renaming over it would replace it
        raise Pt2UsageError(f"cannot write {dst}: not a regular file (pt2x replaces the file it writes)")
    folder = os.path.dirname(os.path.abspath(dst))
    try:
        fd, tmp = tempfile.mkstemp(prefix=".pt2x-", suffix=".tmp", dir=folder)
    except OSError as e:
        raise _naming(e, dst) from e
    try:
        with os.fdopen(fd, "wb") as f:
            if hasattr(os, "fchmod"):  # POSIX; Windows has no mode bits to honour
                os.fchmod(f.fileno(), _new_file_mode(dst))
            _write(f, members)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, dst)
    except BaseException as e:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        if isinstance(e, OSError) and e.errno is not None and e.filename in (None, tmp):
            raise _naming(e, dst) from e
        raise


def _naming(e: OSError, dst: str) -> OSError:
    """The same kind of ``OSError`` as ``e``, about ``dst`` rather than a temporary file."""
    return type(e)(e.errno, e.strerror, dst)


def _new_file_mode(dst: str) -> int:
    """The permission bits ``open(dst, "wb")`` would leave: an existing file's, else 0o666 less the umask."""
    try:
        st = os.stat(dst)
        if stat.S_ISREG(st.st_mode):
            return stat.S_IMODE(st.st_mode) & 0o777
    except OSError:
        pass
    return 0o666 & ~current_umask()


def current_umask() -> int:
    """The process umask, read without changing it where the OS allows (Linux' /proc)."""
    try:
        with open("/proc/self/status", "rb") as f:
            for line in f:
                if line.startswith(b"Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)  # elsewhere: set and restore (not thread-safe, but brief)
    os.umask(mask)
    return mask


def to_bytes(members: Iterable[tuple[str, bytes]]) -> bytes:
    """The archive as bytes (for tests and in-memory use)."""
    buf = io.BytesIO()
    _write(buf, members)
    return buf.getvalue()
