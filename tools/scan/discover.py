"""The artifacts a scan covers: directories (walked for ``*.pt2``), globs, files and fsspec URLs.

Local arguments: a directory is walked recursively for files named ``*.pt2`` (symbolic links
to folders are not followed, so a loop cannot make the walk endless); a glob (``*``, ``?``,
``[``; ``**`` recurses) matches regular files of any name; a plain file is taken as named. A
URL (``s3://bucket/models/``, ``gs://...``, ``file:///srv/pt2/**/*.pt2``) is listed through
fsspec when it is installed (``pip install 'pt2x[fsspec]'`` plus the filesystem's own
package, ``s3fs`` or ``gcsfs``). Only regular files are taken: a FIFO or a device never
reaches a worker. Artifacts come back sorted by location, each once, with their size.
"""

from __future__ import annotations

import glob
import os
import stat
from typing import Iterator, NamedTuple

from ...serde.errors import Pt2UsageError, extra_required

__all__ = ["Artifact", "discover", "is_url", "open_url"]

SUFFIX = ".pt2"
_GLOB_CHARS = frozenset("*?[")


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


def _walk(folder: str) -> Iterator[Artifact]:
    try:
        entries = sorted(os.scandir(folder), key=lambda e: e.name)
    except OSError as e:
        raise Pt2UsageError(f"cannot read {folder}: {(e.strerror or str(e)).lower()}") from None
    for entry in entries:
        if entry.is_dir(follow_symlinks=False):
            yield from _walk(entry.path)
        elif entry.name.endswith(SUFFIX):
            size = _regular_size(entry.path)
            if size is not None:
                yield Artifact(entry.path, size)


def _local(arg: str) -> list[Artifact]:
    if any(c in arg for c in _GLOB_CHARS):
        found = []
        for path in glob.iglob(arg, recursive=True):
            if os.path.isdir(path):
                continue
            size = _regular_size(path)
            if size is not None:
                found.append(Artifact(path, size))
        return found
    if os.path.isdir(arg):
        return list(_walk(arg))
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
        for a in items:
            found.setdefault(a.location, a)
    return sorted(found.values())


def open_url(url: str) -> bytes:
    """The bytes of the artifact at ``url`` (read whole: remote storage cannot be memory-mapped)."""
    fsspec = _fsspec()
    try:
        with fsspec.open(url, "rb") as f:
            return f.read()
    except (OSError, ValueError) as e:
        from ...serde.errors import ArchiveError

        raise ArchiveError(f"cannot read {url}: {type(e).__name__}: {e}") from None
