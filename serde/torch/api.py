"""pt2x <-> torch: save torch ``ExportedProgram``s as PT2 archives, convert to and from
pt2x's schema. Torch is imported lazily, inside the functions.

Saving: ``save(ep, f)`` writes what ``torch.export.save(ep, f)`` writes (same member
names, model JSON, weight configs and bytes), deterministically (the same program
saved twice gives identical bytes) and atomically (a path target is replaced only
once the whole archive is written). Loading lives in ``bridge_import`` (re-exported
here).
"""

from __future__ import annotations

import json
import os
from typing import Any

from ..errors import MissingExtraError, Pt2UsageError

__all__ = ["save", "to_schema", "load_exported_program", "from_schema"]


def _import_torch(feature: str):
    """``torch``, for ``feature``; when it is not installed, a ``MissingExtraError`` naming ``pt2x[torch]``."""
    try:
        import torch
    except ModuleNotFoundError as e:
        if e.name != "torch":
            raise
        raise MissingExtraError(feature, "torch", "torch") from e
    return torch


def _archive_root(f) -> str:
    """The top folder torch's writer uses: the file's stem for paths, else ``archive``."""
    if isinstance(f, (str, os.PathLike)):
        stem = os.path.splitext(os.path.basename(os.fspath(f)))[0]
        return stem or "archive"
    return "archive"


def _downgrade(program_json: bytes, target) -> bytes:
    try:
        from ..compat.target import downgrade  # written by the compatibility half
    except ImportError:
        # TODO(issue 3): serde/compat.py has no ``downgrade`` yet; test target_schema then.
        raise Pt2UsageError(f"target_schema={target!r}: schema downgrade is not available yet") from None
    data, findings = downgrade(json.loads(program_json), tuple(target))
    errors = [f for f in findings if getattr(f, "severity", "error") == "error"]
    if errors:
        raise Pt2UsageError(
            f"program cannot be written as schema {target[0]}.{target[1]}: " + "; ".join(str(f) for f in errors)
        )
    return json.dumps(data).encode("utf-8")


def save(
    ep_or_eps,
    f,
    *,
    extra_files: dict[str, str | bytes] | None = None,
    target_schema: tuple[int, int] | None = None,
    opset_version: dict[str, int] | None = None,
    pickle_protocol: int = 2,
) -> None:
    """Write one ``ExportedProgram`` (as model ``model``) or a ``{name: ExportedProgram}``
    dict to ``f`` (a path, written atomically, or a writable binary file object).

    ``target_schema=(major, minor)`` writes each model's JSON downgraded to that schema
    version (via ``pt2x.serde.compat.target.downgrade``); refused when something would be lost.
    """
    torch = _import_torch("pt2x.serde.save")

    from . import serialize as bx
    from ..archive.zip_writer import write_archive
    from ..codec.json_codec import dumps
    from ..archive.package import archive_members

    if isinstance(ep_or_eps, torch.export.ExportedProgram):
        eps = {"model": ep_or_eps}
    elif isinstance(ep_or_eps, dict) and all(isinstance(v, torch.export.ExportedProgram) for v in ep_or_eps.values()):
        eps = dict(ep_or_eps)
    else:
        raise Pt2UsageError(f"save() takes an ExportedProgram or a dict of them, got {type(ep_or_eps).__name__}")
    for name in eps:
        if not isinstance(name, str) or not name or "/" in name:
            raise Pt2UsageError(f"invalid model name {name!r}")
    models = {}
    for name, ep in eps.items():
        m = bx.export_model(ep, opset_version=opset_version, pickle_protocol=pickle_protocol)
        if target_schema is not None:
            m.program = _downgrade(dumps(m.program).encode("utf-8"), target_schema)
        models[name] = m
    write_archive(f, archive_members(models, extra_files, root=_archive_root(f)))


def to_schema(ep, *, opset_version: dict[str, int] | None = None):
    """pt2x's schema ``ExportedProgram`` for a torch ``ExportedProgram``."""
    _import_torch("pt2x.serde.to_schema")
    from .serialize import to_schema as _to_schema

    return _to_schema(ep, opset_version=opset_version)


def load_exported_program(*args: Any, **kwargs: Any):
    """A torch ``ExportedProgram`` from a PT2 archive (see ``bridge_import``)."""
    _import_torch("pt2x.serde.load_exported_program")
    from .deserialize import load_exported_program as _load

    return _load(*args, **kwargs)


def from_schema(*args: Any, **kwargs: Any):
    """A torch ``ExportedProgram`` from a schema program and its tensors (see ``bridge_import``)."""
    _import_torch("pt2x.serde.from_schema")
    from .deserialize import from_schema as _from_schema

    return _from_schema(*args, **kwargs)
