"""pt2x <-> torch: save torch ``ExportedProgram``s as PT2 archives, convert to and from
pt2x's schema. Torch is imported lazily, inside the functions.

Saving: ``save(ep, f)`` writes what ``torch.export.save(ep, f)`` writes (same member
names, model JSON, weight configs and bytes), deterministically (the same program
saved twice gives identical bytes) and atomically (a path target is replaced only
once the whole archive is written). ``save(..., target_schema=)`` goes through the one
compatibility planner (``serde.compat.plan``). Loading lives in ``deserialize``
(re-exported here).
"""

from __future__ import annotations

import os
import tempfile
from typing import Any

from ..errors import Pt2UsageError, extra_required

__all__ = ["save", "to_schema", "load_exported_program", "from_schema"]


def _import_torch(feature: str):
    """``torch``, for ``feature``; when it is not installed, a ``MissingExtraError`` naming ``pt2x[torch]``."""
    with extra_required(feature, "torch", "torch"):
        import torch
    return torch


def _archive_root(f) -> str:
    """The top folder torch's writer uses: the file's stem for paths, else ``archive``."""
    if isinstance(f, (str, os.PathLike)):
        stem = os.path.splitext(os.path.basename(os.fspath(f)))[0]
        return stem or "archive"
    return "archive"


def save(
    ep_or_eps,
    f,
    *,
    extra_files: dict[str, str | bytes] | None = None,
    target_schema: tuple[int, int] | str | None = None,
    opset_version: dict[str, int] | None = None,
    pickle_protocol: int = 2,
) -> None:
    """Write one ``ExportedProgram`` (as model ``model``) or a ``{name: ExportedProgram}``
    dict to ``f`` (a path, written atomically, or a writable binary file object).

    ``target_schema`` (``(8, 15)``, ``"8.15"`` or ``"torch==2.10"``) writes the archive
    made readable by that release, as ``pt2x convert --to pt2 --target-schema`` does
    (``serde.compat.plan``): for torch 2.8 (8.8) with pickled weights, for 2.6-2.7 (8.2-8.7)
    as the flat zip; refused with ``TargetNotWritable`` (a ``Pt2UsageError`` whose
    ``findings`` name each blocker) when the release cannot read it.
    """
    torch = _import_torch("pt2x.serde.save")
    from ..archive.package import archive_members
    from ..archive.zip_writer import write_archive

    models = _export_models(_programs_to_save(torch, ep_or_eps), opset_version, pickle_protocol)
    members = archive_members(models, extra_files, root=_archive_root(f))
    if target_schema is None:
        write_archive(f, members)
    else:
        _write_for_target(members, f, target_schema)


def _programs_to_save(torch, ep_or_eps) -> dict:
    """``{model name: ExportedProgram}`` from what ``save`` was given; names checked."""
    if isinstance(ep_or_eps, torch.export.ExportedProgram):
        eps = {"model": ep_or_eps}
    elif isinstance(ep_or_eps, dict) and all(isinstance(v, torch.export.ExportedProgram) for v in ep_or_eps.values()):
        eps = dict(ep_or_eps)
    else:
        raise Pt2UsageError(f"save() takes an ExportedProgram or a dict of them, got {type(ep_or_eps).__name__}")
    for name in eps:
        if not isinstance(name, str) or not name or "/" in name:
            raise Pt2UsageError(f"invalid model name {name!r}")
    return eps


def _export_models(eps: dict, opset_version, pickle_protocol: int) -> dict:
    from . import serialize as bx

    return {name: bx.export_model(ep, opset_version=opset_version, pickle_protocol=pickle_protocol) for name, ep in eps.items()}


def _write_for_target(members, f, target_schema) -> None:
    """Write ``members`` to ``f`` made readable by ``target_schema`` through the one planner.

    The archive is first written to a temporary file and loaded back, so ``save(ep, f,
    target_schema=T)`` writes exactly what ``pt2x convert --to pt2 --target-schema T``
    writes from ``save(ep, f)``'s file, and refuses with the same blockers
    (``TargetNotWritable``, a ``Pt2UsageError``); then ``f`` is not touched.
    """
    from ..archive.zip_writer import write_archive
    from ..compat.plan import write_for_target

    with tempfile.TemporaryFile(prefix="pt2x-") as tmp:
        write_archive(tmp, members)
        tmp.flush()
        tmp.seek(0)
        write_for_target(tmp, f, target_schema)


def to_schema(ep, *, opset_version: dict[str, int] | None = None):
    """pt2x's schema ``ExportedProgram`` for a torch ``ExportedProgram``."""
    _import_torch("pt2x.serde.to_schema")
    from .serialize import to_schema as _to_schema

    return _to_schema(ep, opset_version=opset_version)


def load_exported_program(*args: Any, **kwargs: Any):
    """A torch ``ExportedProgram`` from a PT2 archive (see ``deserialize``)."""
    _import_torch("pt2x.serde.load_exported_program")
    from .deserialize import load_exported_program as _load

    return _load(*args, **kwargs)


def from_schema(*args: Any, **kwargs: Any):
    """A torch ``ExportedProgram`` from a schema program and its tensors (see ``deserialize``)."""
    _import_torch("pt2x.serde.from_schema")
    from .deserialize import from_schema as _from_schema

    return _from_schema(*args, **kwargs)
