"""Torch releases as compatibility targets: which schema each wrote, and what each reads.

Why: ``torch.export.load`` in release R accepts any file of R's schema *major* but fails
(KeyError, TypeError, SerializeError) on content R's schema does not know, so a target is
a release's schema snapshot plus a few facts about its reader. The snapshots and the
release table are data in ``schema/snapshots/torch/`` (read by ``schema.snapshot``);
this module turns a user's target text into one of them and holds the reader facts, each
from that release's ``torch/_export/serde/serialize.py``. No torch import.

* ``parse_target`` -- ``torch==2.10``, ``2.10``, ``8.15`` -> schema version (8, 15).
* ``release_snapshot`` / ``target_snapshot`` -- the snapshot a schema version or target stands for.
* ``LENIENT_SINCE``, ``FLOAT_STRINGS_SINCE``, ``PT2_ARCHIVE_SINCE``, ``RAW_WEIGHTS_SINCE`` -- what
  each release's reader accepts; ``NODE_TARGETS_RUN_SINCE`` -- ops a release reads but cannot run.
"""

from __future__ import annotations

import re

from ...schema.snapshot import torch_releases, torch_snapshot
from ..errors import Pt2UsageError

__all__ = [
    "parse_target",
    "release_snapshot",
    "target_snapshot",
    "LENIENT_SINCE",
    "FLOAT_STRINGS_SINCE",
    "PT2_ARCHIVE_SINCE",
    "RAW_WEIGHTS_SINCE",
    "NODE_TARGETS_RUN_SINCE",
]

LENIENT_SINCE = (8, 14)
"""torch 2.9 (8.14) is the first whose reader ignores unknown struct fields: ``_dict_to_dataclass``
in torch <= 2.8 builds structs with ``cls(**data)`` and raises TypeError on an unknown key."""
FLOAT_STRINGS_SINCE = (8, 7)
"""torch 2.7 (8.7) and later read non-finite floats written as "Infinity"/"-Infinity"/"NaN"; 2.6 does not."""
PT2_ARCHIVE_SINCE = (8, 8)
"""torch 2.8 (8.8) is the first to read the PT2 archive layout (models/<m>.json); 2.6-2.7 read the flat zip."""
RAW_WEIGHTS_SINCE = (8, 14)
"""torch 2.9 (8.14) is the first to read raw weights with <m>_weights_config.json; 2.8 reads only data/weights/<m>.pt."""

NODE_TARGETS_RUN_SINCE = {
    "torch.ops.higher_order.while_loop": (
        (8, 7),
        "its deserializer rebuilds carried_inputs as a list, which its while_loop refuses "
        "('carried_inputs must be a tuple'; torch 2.6.0 fails so on its own saved while_loop, and 2.5.1 on the one pt2x writes for it; 2.7.1 runs it)",
    ),
    "torch.ops.higher_order.wrap_with_set_grad_enabled": (
        (8, 7),
        "its reader resolves torch.ops.higher_order.* by name and `import torch` before 2.7 does not import "
        "torch._higher_order_ops.wrap, which defines this op, so torch.export.load fails ('Unsupported target "
        "type'; checked: 2.5.1 and 2.6.0 fail, and load it once that module is imported by hand; 2.7.1 runs it). "
        "convert inlines a region only where no tensor entering it can require grad (serde.compat.grad_regions); "
        "run_decompositions() before saving inlines any region",
    ),
    "torch.ops.higher_order.wrap_with_autocast": (
        (8, 7),
        "defined in torch._higher_order_ops.wrap, which `import torch` before 2.7 does not import, so the "
        "reader cannot resolve the op (as for wrap_with_set_grad_enabled, checked with 2.5.1, 2.6.0 and 2.7.1)",
    ),
}
"""Node target -> (first schema whose release loads and runs it, why older ones do not)."""

_RELEASE = re.compile(r"^torch==(\d+)\.(\d+)(?:\.(\d+))?(?:[+.\w]*)$")
_PLAIN = re.compile(r"^(?:schema==)?(\d+)\.(\d+)(?:\.(\d+))?$")


def _known() -> str:
    return ", ".join(f"{r} ({v['schema_version'][0]}.{v['schema_version'][1]})" for r, v in torch_releases().items())


def parse_target(text: str) -> tuple[int, int]:
    """Schema version meant by ``torch==2.10`` / ``2.10`` (a torch release) or ``8.15`` / ``schema==8.15``.

    A bare ``2.x`` is a torch release (no file carries schema 2.x); ``7.x``/``8.x``... are schema versions.
    """
    s = str(text).strip()
    m = _RELEASE.match(s)
    is_release = m is not None
    if not m:
        m = _PLAIN.match(s)
        if not m:
            raise Pt2UsageError(f"target {text!r}: expected torch==X.Y, X.Y (a torch release) or a schema version "
                                f"like 8.15; known releases: {_known()}")
        is_release = not s.startswith("schema==") and int(m.group(1)) == 2
    major, minor = int(m.group(1)), int(m.group(2))
    if not is_release:
        return major, minor
    info = torch_releases().get(f"{major}.{minor}")
    if info is None:
        raise Pt2UsageError(f"target {text!r}: no schema known for torch {major}.{minor}; known releases: {_known()}")
    return tuple(info["schema_version"])  # type: ignore[return-value]


def release_snapshot(version: tuple[int, int]) -> tuple[str, dict]:
    """(releases, snapshot) of the torch release(s) that shipped schema ``version``; label like ``2.9``."""
    rels = [r for r, v in torch_releases().items() if tuple(v["schema_version"]) == tuple(version)]
    if not rels:
        raise Pt2UsageError(f"no torch release shipped schema {version[0]}.{version[1]}; known: {_known()}")
    return "/".join(rels), torch_snapshot(rels[0])


def target_snapshot(target) -> tuple[tuple[int, int], str, dict]:
    """(schema version, release label, snapshot) for a target given as text or (major, minor)."""
    version = parse_target(target) if isinstance(target, str) else (int(target[0]), int(target[1]))
    label, snap = release_snapshot(version)
    return version, label, snap
