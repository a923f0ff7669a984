"""Atomic output files: every file pt2x writes (``.pt2``, ``.onnx`` and its external data, ``.tflite``).

Each destination is written to a temporary file beside it, flushed and synced, and renamed
over it only when every destination of the call is complete: a failed write (a full disk,
``ulimit -f``, an exception while producing the bytes) leaves the old files as they were
and no temporary file behind. The checks, before anything is written:

- a destination that exists must be a regular file: a FIFO would block the writer, and
  renaming over a device, socket or FIFO would replace it (``Pt2UsageError``);
- a directory is an ``IsADirectoryError`` naming it.

A new file gets the mode ``open(path, "wb")`` would give it (an existing file keeps its
mode, a new one ``0o666`` less the umask), as ``torch.export.save`` does; ``tempfile``
alone would leave ``0o600``. An ``OSError`` of the write names the destination, not the
temporary file, so callers can tell it is about their output path.
"""

from __future__ import annotations

import errno
import os
import stat
import tempfile
from typing import BinaryIO, Callable, Sequence

from .errors import Pt2UsageError

__all__ = ["write_atomically", "write_files_atomically", "check_writable_target", "current_umask"]

Fill = Callable[[BinaryIO], None]


def write_atomically(dst: str | os.PathLike, fill: Fill) -> None:
    """Write ``dst`` atomically: ``fill(f)`` writes its bytes into a temporary file beside it."""
    write_files_atomically([(dst, fill)])


def write_files_atomically(files: Sequence[tuple[str | os.PathLike, Fill]]) -> None:
    """Write several files that belong together (a model and its external data): every one
    is complete on disk before the first is renamed into place, in the order given."""
    staged: list[tuple[str, str]] = []
    try:
        for dst, fill in files:
            dst = os.fspath(dst)
            check_writable_target(dst)
            staged.append((_write_temporary(dst, fill), dst))
        for tmp, dst in staged:
            try:
                os.replace(tmp, dst)
            except OSError as e:
                raise _naming(e, dst, tmp) from e
    except BaseException:
        for tmp, _ in staged:
            _remove_quietly(tmp)
        raise


def check_writable_target(dst: str) -> None:
    """Refuse a destination that is a directory or exists as anything but a regular file."""
    try:
        st = os.stat(dst)
    except FileNotFoundError:
        return
    except OSError as e:
        raise _naming(e, dst, None) from e
    if stat.S_ISDIR(st.st_mode):
        raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), dst)
    if not stat.S_ISREG(st.st_mode):  # a FIFO, device or socket
        raise Pt2UsageError(f"cannot write {dst}: not a regular file (pt2x replaces the file it writes)")


def _write_temporary(dst: str, fill: Fill) -> str:
    """A complete, synced temporary copy of ``dst``'s new contents beside it; its path."""
    folder = os.path.dirname(os.path.abspath(dst))
    try:
        fd, tmp = tempfile.mkstemp(prefix=".pt2x-", suffix=".tmp", dir=folder)
    except OSError as e:  # e.g. /proc/self/status: the file exists, its folder takes no new file
        why = f"cannot create a file in its folder ({e.strerror or e})"
        raise type(e)(e.errno, why, dst) from e
    try:
        with os.fdopen(fd, "wb") as f:
            if hasattr(os, "fchmod"):  # POSIX; Windows has no mode bits to honour
                os.fchmod(f.fileno(), _new_file_mode(dst))
            fill(f)
            f.flush()
            os.fsync(f.fileno())
    except BaseException as e:
        _remove_quietly(tmp)
        if isinstance(e, OSError) and e.errno is not None:
            raise _naming(e, dst, tmp) from e
        raise
    return tmp


def _remove_quietly(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


def _naming(e: OSError, dst: str, tmp: str | None) -> OSError:
    """``e`` about ``dst`` when it named no file or the temporary one; else ``e`` itself."""
    if e.filename not in (None, tmp):
        return e
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
