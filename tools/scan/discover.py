"""The artifacts a scan covers: directories (walked for ``*.pt2``), globs, files and fsspec URLs.

Local arguments: a directory is walked recursively for files named ``*.pt2``; a glob (``*``,
``?``, ``[``; ``**`` recurses) matches regular files of any name; a plain file is taken as
named. Both walks are iterative (depth costs no stack), never enter a symbolic link to a
folder, enter each folder once (by device and inode), and list a bounded number of entries,
so a link loop, a bind mount or ``/proc`` cannot make them endless or repeat a file. A
URL (``s3://bucket/models/``, ``gs://...``, ``file:///srv/pt2/**/*.pt2``) is listed through
fsspec when it is installed (``pip install 'pt2x[fsspec]'`` plus the filesystem's own
package, ``s3fs`` or ``gcsfs``). Only regular files are taken: a FIFO or a device never
reaches a worker. Artifacts come back sorted by location, each file once (by its real path), with its size.
"""

from __future__ import annotations

import fnmatch
import os
import stat
from typing import Iterator, NamedTuple

from ...serde.errors import Pt2UsageError, extra_required

__all__ = ["Artifact", "discover", "is_url", "open_url"]

SUFFIX = ".pt2"
_GLOB_CHARS = frozenset("*?[")
MAX_LISTED_ENTRIES = 20_000_000  # folder entries one argument's walk may list (a /proc or a FUSE mount is not a registry)


def is_url(location: str) -> bool:
    """Whether ``location`` names a file through fsspec (``s3://``, ``gs://``, ``file://``...)."""
    return "://" in location


class Artifact(NamedTuple):
    location: str  # a local path as the user wrote it (joined with what the walk found), or a URL
    size: int


def _fsspec():
    with extra_required("pt2x scan of a URL", "fsspec", "fsspec"):
        import fsspec
    return fsspec


def _regular_size(path: str) -> int | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_size if stat.S_ISREG(st.st_mode) else None


def _split_glob(pattern: str) -> tuple[str, list[str]]:
    """``pattern`` as the folder its walk starts in (its leading parts with no glob character)
    and the parts left to match; a trailing ``**`` matches every file below, as ``**/*``."""
    parts = pattern.split(os.sep)
    lead = 0
    while lead < len(parts) - 1 and not any(c in parts[lead] for c in _GLOB_CHARS):
        lead += 1
    base = os.sep.join(parts[:lead]) or (os.sep if pattern.startswith(os.sep) else "")
    rest = [p for p in parts[lead:] if p]
    if rest and rest[-1] == "**":
        rest.append("*")
    return base, rest


def _matches(name: str, part: str, hidden: bool) -> bool:
    if name.startswith(".") and not hidden and not part.startswith("."):
        return False  # as the shell and glob: ``*`` does not match a hidden name
    return fnmatch.fnmatchcase(name, part)


def _listing(folder: str) -> list[os.DirEntry]:
    """The entries of ``folder``; none when it vanished while the walk ran (a process in /proc)."""
    try:
        with os.scandir(folder or ".") as it:
            return list(it)
    except (FileNotFoundError, NotADirectoryError):
        return []
    except OSError as e:
        raise Pt2UsageError(f"cannot read {folder}: {(e.strerror or str(e)).lower()}") from None


def _walk(base: str, parts: list[str], *, hidden: bool) -> Iterator[Artifact]:
    """The regular files under ``base`` whose path below it matches ``parts`` (``**``: any number
    of folders). Iterative, so depth costs no stack; a symbolic link to a folder is never
    entered, and a folder is entered once per pattern position by (device, inode), so links,
    bind mounts and loops cannot repeat or prolong it; at most ``MAX_LISTED_ENTRIES`` entries."""
    stack, entered, listed = [(base, 0)], set(), 0
    while stack:
        folder, i = stack.pop()
        try:
            st = os.stat(folder or ".")
        except OSError:
            continue
        if (st.st_dev, st.st_ino, i) in entered:
            continue
        entered.add((st.st_dev, st.st_ino, i))
        part, last = parts[i], i == len(parts) - 1
        if part == "**":
            stack.append((folder, i + 1))  # ``**`` as no folder at all
        entries = _listing(folder)
        listed += len(entries)
        if listed > MAX_LISTED_ENTRIES:
            raise Pt2UsageError(f"stopped listing {base or '.'} after {MAX_LISTED_ENTRIES:,} entries: name a narrower folder or glob")
        for entry in entries:
            path = os.path.join(folder, entry.name) if folder else entry.name
            real_folder = entry.is_dir(follow_symlinks=False)
            if part == "**":
                if real_folder and _matches(entry.name, "*", hidden):
                    stack.append((path, i))
            elif not _matches(entry.name, part, hidden):
                continue
            elif not last:
                if real_folder:
                    stack.append((path, i + 1))
            elif not real_folder:
                size = _regular_size(path)
                if size is not None:
                    yield Artifact(path, size)


def _local(arg: str) -> list[Artifact]:
    if any(c in arg for c in _GLOB_CHARS):
        base, parts = _split_glob(arg)
        return list(_walk(base, parts, hidden=False)) if parts else []
    if os.path.isdir(arg):
        return list(_walk(arg, ["**", "*" + SUFFIX], hidden=True))
    from ..cli import check_input

    check_input(arg)  # missing, unreadable, not a regular file: one line, exit 2
    return [Artifact(arg, os.stat(arg).st_size)]


def _remote(url: str) -> list[Artifact]:
    fsspec = _fsspec()
    try:
        fs, _, paths = fsspec.get_fs_token_paths(url)
        found = []
        for path in paths:
            if fs.isdir(path):
                infos = fs.find(path, detail=True).values()
                infos = [i for i in infos if i["name"].endswith(SUFFIX)]
            else:
                infos = [fs.info(path)]
            for info in infos:
                if info.get("type") == "file":
                    found.append(Artifact(fs.unstrip_protocol(info["name"]), int(info.get("size") or 0)))
        return found
    except (OSError, ValueError, ImportError) as e:  # unknown protocol, its package missing, no such bucket
        raise Pt2UsageError(f"cannot list {url}: {type(e).__name__}: {e}") from None


def discover(args: list[str]) -> list[Artifact]:
    """Every artifact the arguments name, sorted by location and without duplicates.

    An argument that names nothing (a glob with no match, an empty folder) is a usage error:
    a fleet scan that silently covered nothing would pass CI for the wrong reason.
    """
    found: dict[str, Artifact] = {}
    for arg in args:
        items = _remote(arg) if is_url(arg) else _local(arg)
        if not items:
            raise Pt2UsageError(f"no artifacts in {arg}" + ("" if is_url(arg) or any(c in arg for c in _GLOB_CHARS)
                                                         else f" (a folder is walked for *{SUFFIX} files)"))
        for a in sorted(items):  # of two names for one file, the first in order is kept
            found.setdefault(_identity(a.location), a)
    return sorted(found.values())


def _identity(location: str) -> str:
    """A file named twice (through a symbolic link, ``./``, ``..``) is one artifact; hard links,
    separate names of one inode, stay separate artifacts, as the user sees them."""
    return location if is_url(location) else os.path.realpath(location)


def open_url(url: str) -> bytes:
    """The bytes of the artifact at ``url`` (read whole: remote storage cannot be memory-mapped)."""
    fsspec = _fsspec()
    try:
        with fsspec.open(url, "rb") as f:
            return f.read()
    except (OSError, ValueError) as e:
        from ...serde.errors import ArchiveError

        raise ArchiveError(f"cannot read {url}: {type(e).__name__}: {e}") from None
