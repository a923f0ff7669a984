"""The ``pt2x`` command: a thin layer over the public API.

Each subcommand lives in its own module ``pt2x.tools.cmd_<name>`` exposing
``register(subparsers)``; the module is imported only when listed here, so
``pt2x inspect`` never imports onnx or torch.

Exit codes everywhere: 0 ok, 1 findings / incompatible, 2 unreadable input or usage error
(every ``Pt2Error``, a missing optional dependency, an input or output path that cannot be
used: one line on stderr, no traceback), 3 internal error (a bug in pt2x: the traceback is
printed, since hiding it would hide the bug).
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import importlib
import os
import stat
import sys
import traceback
from typing import Iterator

COMMANDS = ("inspect", "validate", "convert", "verify", "schema", "scan")
EXIT_OK, EXIT_FINDINGS, EXIT_USAGE, EXIT_INTERNAL = 0, 1, 2, 3

# errors of a write that carry no file name but are about the output (disk full, quota...)
_WRITE_ERRNOS = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS}


def build_parser() -> argparse.ArgumentParser:
    from .. import __version__

    parser = argparse.ArgumentParser(prog="pt2x", description="Read, validate and convert torch.export .pt2 files.")
    parser.add_argument("--version", action="version", version=f"pt2x {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    for name in COMMANDS:
        try:
            module = importlib.import_module(f"{__package__}.cmd_{name}")
        except ModuleNotFoundError as e:
            if e.name == f"{__package__}.cmd_{name}":
                continue  # not built yet
            raise
        module.register(sub)
    return parser


def check_input(path: str) -> None:
    """Raise ``Pt2UsageError`` (one line naming ``path``) unless ``path`` is a readable regular file.

    Checked before opening, so a FIFO or device never blocks or floods the reader.
    """
    from ..serde.errors import Pt2UsageError

    try:
        st = os.stat(path)
    except OSError as e:
        raise Pt2UsageError(f"cannot read {path}: {_reason(e)}") from None
    if stat.S_ISDIR(st.st_mode):
        raise Pt2UsageError(f"cannot read {path}: it is a directory")
    if not stat.S_ISREG(st.st_mode):
        raise Pt2UsageError(f"cannot read {path}: not a regular file")
    if not os.access(path, os.R_OK):
        raise Pt2UsageError(f"cannot read {path}: permission denied")


def check_output(path: str) -> None:
    """Raise ``Pt2UsageError`` (one line naming ``path``) when ``path`` plainly cannot be written.

    Checked before any work, so a long conversion does not end in a path error. What only
    the write itself can tell (a full disk, a race) is caught by ``writing``.
    """
    from ..serde.errors import Pt2UsageError

    folder = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        raise Pt2UsageError(f"cannot write {path}: it is a directory")
    if not os.path.exists(folder):
        raise Pt2UsageError(f"cannot write {path}: folder {os.path.dirname(path) or folder} does not exist")
    if not os.path.isdir(folder):
        raise Pt2UsageError(f"cannot write {path}: {os.path.dirname(path)} is not a folder")
    if os.path.exists(path) and not os.path.isfile(path):  # a FIFO would block the write, a device be replaced
        raise Pt2UsageError(f"cannot write {path}: not a regular file (pt2x replaces the file it writes)")
    target = path if os.path.exists(path) else folder
    if not os.access(target, os.W_OK):
        err = errno.EROFS if _read_only(folder) else errno.EACCES
        raise Pt2UsageError(f"cannot write {path}: {os.strerror(err).lower()}")


def _read_only(folder: str) -> bool:
    try:
        return bool(os.statvfs(folder).f_flag & os.ST_RDONLY)
    except (OSError, AttributeError):
        return False


def _reason(e: OSError) -> str:
    """``e``'s reason in words, without the errno and path Python adds."""
    return (e.strerror or str(e)).lower()


@contextlib.contextmanager
def writing(path: str) -> Iterator[None]:
    """Turn an ``OSError`` about ``path`` (or its folder, or a full disk) into a one-line ``Pt2UsageError``.

    Any other ``OSError`` is left alone: it is not the user's output path, so it may be a bug.
    """
    from ..serde.errors import Pt2UsageError

    try:
        yield
    except OSError as e:
        if not _about_output(e, path):
            raise
        raise Pt2UsageError(f"cannot write {path}: {_reason(e)}") from None


def _about_output(e: OSError, path: str) -> bool:
    if e.filename is None:
        return e.errno in _WRITE_ERRNOS
    folder = os.path.dirname(os.path.abspath(path))
    mine = (os.path.abspath(os.fsdecode(f)) for f in (e.filename, e.filename2) if f is not None)
    return any(f == os.path.abspath(path) or os.path.dirname(f) == folder for f in mine)


def main(argv: list[str] | None = None) -> int:
    from ..serde.errors import Pt2Error

    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except Pt2Error as e:  # the input, a path, an option or a missing extra: the user can act on it
        from .terminal import say_error

        say_error(f"pt2x {args.command}", str(e))
        return EXIT_USAGE
    except BrokenPipeError:
        return EXIT_OK
    except KeyboardInterrupt:
        print(f"pt2x {args.command}: interrupted", file=sys.stderr)
        return 130
    except Exception:
        traceback.print_exc()
        print(f"pt2x {args.command}: internal error: this is a bug in pt2x; please report it with the traceback above",
              file=sys.stderr)
        return EXIT_INTERNAL


if __name__ == "__main__":
    sys.exit(main())
