"""Checked, zero-copy access to the members of a zip archive held in a buffer.

Python's ``zipfile`` parses the central directory; this module then checks every
entry before any byte is used, and hands out stored members as ``memoryview`` slices
of the buffer (a memory map for files), so weights are never copied. Nested zips
(torch.save pickles stored inside a .pt2) are read the same way from a slice.

Checked: unreadable or truncated directories, duplicate names (torch reads the first,
``zipfile`` the last — ambiguous, so refused), names that are absolute, contain ``..``,
backslashes, NUL or empty parts, encrypted members, unknown compression methods,
declared sizes or offsets past the buffer, local headers that disagree with the
directory, and compressed members past ``limits.MAX_COMPRESSION_RATIO`` or
``limits.MAX_UNCOMPRESSED_MEMBER``.
"""

from __future__ import annotations

import io
import mmap
import os
import struct
import zipfile
import zlib
from typing import BinaryIO

from ..errors import ArchiveError, LimitExceededError
from ..limits import MAX_COMPRESSION_RATIO, MAX_MEMBERS, MAX_UNCOMPRESSED_MEMBER

__all__ = ["ZipReader", "open_buffer", "check_member_name"]

_LOCAL_SIG = b"PK\x03\x04"
# What zipfile raises on a corrupt directory (NotImplementedError: a bogus "version needed";
# UnicodeDecodeError: a name flagged UTF-8 that isn't). All mean "unreadable archive".
_ZIPFILE_ERRORS = (
    zipfile.BadZipFile, zipfile.LargeZipFile, ValueError, EOFError, OSError, struct.error,
    IndexError, KeyError, OverflowError, NotImplementedError, UnicodeDecodeError,
)
_LOCAL_LEN = 30


class _ViewFile(io.RawIOBase):
    """A seekable read-only file over a memoryview, so ``zipfile`` reads without copying it all."""

    def __init__(self, view: memoryview):
        self._view = view
        self._pos = 0

    def readable(self):
        return True

    def seekable(self):
        return True

    def tell(self):
        return self._pos

    def seek(self, offset, whence=os.SEEK_SET):
        base = {os.SEEK_SET: 0, os.SEEK_CUR: self._pos, os.SEEK_END: len(self._view)}[whence]
        self._pos = max(0, base + offset)
        return self._pos

    def readinto(self, b):
        chunk = self._view[self._pos : self._pos + len(b)]
        n = len(chunk)
        b[:n] = chunk
        self._pos += n
        return n


def check_member_name(name: str, *, where: str) -> None:
    """Refuse names that could escape a folder or mean different things to different readers."""
    bad = None
    if not name:
        bad = "empty member name"
    elif name.startswith(("/", "\\")) or (len(name) > 1 and name[1] == ":"):
        bad = "absolute member name"
    elif "\\" in name:
        bad = "backslash in member name"
    elif "\0" in name:
        bad = "NUL in member name"
    else:
        parts = name.rstrip("/").split("/")
        if any(p in ("", ".", "..") for p in parts):
            bad = "'.', '..' or empty path component in member name"
    if bad:
        raise ArchiveError(f"{bad}: {name!r}", member=where)


class ZipReader:
    """The members of one zip archive in ``buffer``, checked; ``label`` names it in errors."""

    def __init__(self, buffer: memoryview, *, label: str = "", source: str = "<archive>"):
        # label: prefix for member names of a nested zip ("outer/member.pt"); source: names the whole.
        self.label = label
        self._buf = buffer
        whole = label or source
        try:
            zf = zipfile.ZipFile(_ViewFile(buffer))
            infos = zf.infolist()
        except _ZIPFILE_ERRORS as e:
            raise ArchiveError(f"not a readable zip archive ({e})", member=whole) from None
        if len(infos) > MAX_MEMBERS:
            raise LimitExceededError(f"{len(infos)} members exceed {MAX_MEMBERS}", member=whole)
        self._infos: dict[str, zipfile.ZipInfo] = {}
        for index, info in enumerate(infos):
            self._check(info, index, whole)
            self._infos[info.filename] = info
        self._data_start: dict[str, int] = {}
        # member -> its pickle scan (payload.member_globals): scanned once however many readers ask
        self.pickle_scans: dict[str, object] = {}

    @property
    def names(self) -> list[str]:
        return list(self._infos)

    def __contains__(self, name: str) -> bool:
        return name in self._infos

    def size(self, name: str) -> int:
        return self._infos[name].file_size

    def is_stored(self, name: str) -> bool:
        return self._infos[name].compress_type == zipfile.ZIP_STORED

    def _where(self, name: str) -> str:
        return f"{self.label}!{name}" if self.label else name

    def _check(self, info: zipfile.ZipInfo, index: int, whole: str) -> None:
        name = info.filename
        # A member with an empty name is named by its place in the directory instead.
        where = self._where(name) if name else f"{whole}: zip entry {index} (empty name)"
        if name in self._infos:
            raise ArchiveError("duplicate member name (readers disagree on which copy counts)", member=where)
        check_member_name(name, where=where)
        if info.flag_bits & 0x1:
            raise ArchiveError("encrypted member", member=where)
        if info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
            raise ArchiveError(f"unsupported compression method {info.compress_type}", member=where)
        if info.file_size < 0 or info.compress_size < 0 or info.header_offset < 0:
            raise ArchiveError("negative size or offset in the zip directory", member=where)
        end = info.header_offset + _LOCAL_LEN + info.compress_size
        if end > len(self._buf):
            raise ArchiveError(
                f"declared size {info.compress_size} at offset {info.header_offset} runs past the archive's {len(self._buf)} bytes",
                member=where,
            )
        if info.compress_type == zipfile.ZIP_STORED:
            if info.compress_size != info.file_size:
                raise ArchiveError("stored member whose sizes disagree", member=where)
        else:
            if info.file_size > MAX_UNCOMPRESSED_MEMBER:
                raise LimitExceededError(
                    f"compressed member inflates to {info.file_size} bytes, over {MAX_UNCOMPRESSED_MEMBER}", member=where
                )
            if info.file_size > MAX_COMPRESSION_RATIO * max(info.compress_size, 1):
                raise LimitExceededError(
                    f"compression ratio {info.file_size / max(info.compress_size, 1):.0f}:1 exceeds {MAX_COMPRESSION_RATIO}:1",
                    member=where,
                )

    def _start(self, name: str) -> int:
        start = self._data_start.get(name)
        if start is not None:
            return start
        info = self._infos[name]
        where = self._where(name)
        off = info.header_offset
        header = bytes(self._buf[off : off + _LOCAL_LEN])
        if len(header) < _LOCAL_LEN or header[:4] != _LOCAL_SIG:
            raise ArchiveError("no local header where the directory says", member=where)
        name_len, extra_len = struct.unpack("<HH", header[26:30])
        local_name = bytes(self._buf[off + _LOCAL_LEN : off + _LOCAL_LEN + name_len])
        if local_name.decode("utf-8", "replace") != name and local_name.decode("cp437", "replace") != name:
            raise ArchiveError(f"local header names {local_name!r}, directory names {name!r}", member=where)
        start = off + _LOCAL_LEN + name_len + extra_len
        if start + info.compress_size > len(self._buf):
            raise ArchiveError("member data runs past the end of the archive", member=where)
        self._data_start[name] = start
        return start

    def view(self, name: str) -> memoryview:
        """A stored member's bytes, zero-copy; a compressed one's, inflated (bounded)."""
        if name not in self._infos:
            raise ArchiveError("member is missing", member=self._where(name))
        info = self._infos[name]
        start = self._start(name)
        raw = self._buf[start : start + info.compress_size]
        if info.compress_type == zipfile.ZIP_STORED:
            return raw
        d = zlib.decompressobj(-15)
        try:
            out = d.decompress(raw, info.file_size + 1)
        except zlib.error as e:
            raise ArchiveError(f"corrupt deflate data ({e})", member=self._where(name)) from None
        if len(out) != info.file_size:
            raise ArchiveError(
                f"inflates to {len(out)}{'+' if len(out) > info.file_size else ''} bytes, directory says {info.file_size}",
                member=self._where(name),
            )
        return memoryview(out)

    def read(self, name: str) -> bytes:
        return bytes(self.view(name))

    def crc_ok(self, name: str) -> bool:
        """Whether the member's bytes match its CRC-32 (costs a full read; used by validate)."""
        return (zlib.crc32(self.view(name)) & 0xFFFFFFFF) == self._infos[name].CRC


def open_buffer(src: str | os.PathLike | BinaryIO | bytes | bytearray | memoryview) -> tuple[memoryview, str, object]:
    """The bytes of ``src`` as a memoryview (a read-only memory map for files), its label, and a keep-alive handle."""
    if isinstance(src, (bytes, bytearray, memoryview)):
        return memoryview(src).cast("B"), "<bytes>", None
    if isinstance(src, (str, os.PathLike)):
        path = os.fspath(src)
        try:
            with open(path, "rb") as f:
                size = os.fstat(f.fileno()).st_size
                if size == 0:
                    raise ArchiveError("empty file, not a zip archive", member=os.path.basename(path))
                mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        except OSError as e:
            from ..errors import Pt2UsageError

            raise Pt2UsageError(f"cannot open {path}: {e.strerror}") from e  # ENOMEM: a caller's oom
        return memoryview(mm), os.path.basename(path), mm
    # A binary file object: memory-map it when it has a real descriptor, else read it.
    label = _file_label(src)
    try:
        fd = src.fileno()
        mm = mmap.mmap(fd, 0, access=mmap.ACCESS_READ)
        return memoryview(mm), label, mm
    except (AttributeError, OSError, ValueError, io.UnsupportedOperation):
        data = src.read()
        return memoryview(data), label, None


def _file_label(f: object) -> str:
    """How errors name an archive given as a file object: its name, as text (``os.fdopen`` names are ints)."""
    name = getattr(f, "name", None)
    if isinstance(name, (str, bytes, os.PathLike)):
        return os.fsdecode(name) or "<file>"
    return f"<file descriptor {name}>" if isinstance(name, int) else "<file>"
