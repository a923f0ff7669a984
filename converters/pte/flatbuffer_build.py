"""What pt2x's ``.pte``, ``.ptd`` and XNNPACK payload writers share in building flatbuffers: a
vector of tables, and the finished buffer within flatbuffers' 2 GiB limit."""

from __future__ import annotations

import flatbuffers

from ..errors import ConversionError
from .flatbuffer_checks import MAX_FLATBUFFER

__all__ = ["table_vector", "finished"]


def table_vector(b: flatbuffers.Builder, offsets: list) -> int:
    """A vector of the tables at ``offsets``, in that order."""
    b.StartVector(4, len(offsets), 4)
    for o in reversed(offsets):
        b.PrependUOffsetTRelative(o)
    return b.EndVector()


def finished(b: flatbuffers.Builder, root: int, identifier: bytes, what: str) -> bytes:
    """The buffer with ``root`` as its root table and ``identifier``; ``ConversionError`` past the
    2 GiB flatbuffers can address (``what``: the file, for the message)."""
    b.Finish(root, file_identifier=identifier)
    out = bytes(b.Output())
    if len(out) > MAX_FLATBUFFER:
        raise ConversionError(f"{what} flatbuffer passes flatbuffers' 2 GiB limit")
    return out
