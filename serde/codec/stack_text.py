"""The text form of a node's stack metadata in torch's export schema (``nn_module_stack``,
``source_fn_stack``, ``torch_fn``): entries joined by ``;``, each entry's fields by commas, where a
type may hold commas inside brackets (``Seq[int, int]``). A fact of torch's serializer; read by the
torch bridge (``serde/torch``) and, without torch, by the converters (``converters/aten/module_stack``)."""

from __future__ import annotations

__all__ = ["ENTRY_SEPARATOR", "split_fields"]

ENTRY_SEPARATOR = ";"


def split_fields(entry: str) -> list[str]:
    """``entry`` split at the commas outside ``()`` and ``[]``."""
    out, start, depth = [], 0, 0
    for i, c in enumerate(entry):
        if c in "[(":
            depth += 1
        elif c in ")]":
            depth -= 1
        elif c == "," and depth == 0:
            out.append(entry[start:i])
            start = i + 1
    out.append(entry[start:])
    return out
