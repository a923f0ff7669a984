"""Where ``pt2x schema check|diff`` finds a schema snapshot: the definitions, a file, a release, a git ref.

Why here: finding a snapshot does I/O (files, ``git show``) and reaches into layers
above ``schema/`` (a torch release through ``serde.compat.releases``, a torch
``schema.yaml`` through ``scripts/import_torch_schemas.py``); the rules that compare two
snapshots stay in ``schema/diff.py``, which reads neither.
"""

from __future__ import annotations

import hashlib
import re
import subprocess
from pathlib import Path

from ..schema.snapshot import PT2X_SNAPSHOT, build_snapshot, make_snapshot, parse, read_snapshot
from ..serde.errors import MissingExtraError, Pt2UsageError

__all__ = ["resolve_snapshot", "snapshot_from_yaml"]

_TORCH_SPEC = re.compile(r"^(?:torch==)?(\d+)\.(\d+)(?:\.\d+)?$")


def resolve_snapshot(spec: str, *, repo_root: Path | None = None) -> tuple[dict, str]:
    """(snapshot, label) for ``pt2x`` (the current definitions), ``committed``, ``torch==2.10``,
    ``2.10``, ``8.15`` (a torch release's schema), a snapshot/schema.yaml file, or a git ref
    (its committed ``schema/snapshots/pt2x.json``)."""
    if spec == "pt2x":
        return build_snapshot(), "pt2x (schema/definitions.py)"
    if spec == "committed":
        return read_snapshot(PT2X_SNAPSHOT), f"committed {PT2X_SNAPSHOT.name}"
    path = Path(spec)
    if path.is_file():
        return _read_file(path), str(path)
    if _TORCH_SPEC.match(spec) or spec.startswith("schema=="):
        return _from_release(spec)
    return _from_git(spec, repo_root), f"git {spec}"


def _from_release(spec: str) -> tuple[dict, str]:
    from ..serde.compat.releases import parse_target, release_snapshot

    release, snap = release_snapshot(parse_target(spec))
    return snap, f"torch {release}"


def _read_file(path: Path) -> dict:
    data = path.read_bytes()
    if path.suffix in (".yaml", ".yml"):
        return snapshot_from_yaml(data.decode("utf-8"), source=str(path))[0]
    return parse(data, origin=str(path))


def _from_git(ref: str, repo_root: Path | None) -> dict:
    root = repo_root or PT2X_SNAPSHOT.parents[2]
    rel = PT2X_SNAPSHOT.relative_to(root).as_posix()
    proc = subprocess.run(["git", "-C", str(root), "show", f"{ref}:{rel}"], capture_output=True)
    if proc.returncode != 0:
        msg = proc.stderr.decode(errors="replace").strip().splitlines()
        raise ValueError(f"{ref!r} is neither a snapshot file, a release, nor a git ref with {rel}: {msg[-1] if msg else ''}")
    return parse(proc.stdout, origin=f"{ref}:{rel}")


_VERSION_KEYS = ("SCHEMA_VERSION", "TREESPEC_VERSION")
"""Top-level keys of torch's schema.yaml that are versions, not types."""


def snapshot_from_yaml(text: str, *, source: str) -> tuple[dict, str]:
    """(snapshot, torch's checksum) from a schema.yaml's text; raises if its checksum is wrong."""
    try:
        import yaml
    except ImportError as e:
        raise MissingExtraError("reading torch's schema.yaml", "yaml", "yaml") from e

    found = re.search(r"checksum<<([A-Fa-f0-9]{64})>>", text)
    data = yaml.load(text, Loader=yaml.SafeLoader)
    if not isinstance(data, dict) or "SCHEMA_VERSION" not in data:
        raise Pt2UsageError(f"{source}: not a torch export schema.yaml (no SCHEMA_VERSION)")
    real = hashlib.sha256(repr(data).strip().encode()).hexdigest()
    if found is None or found.group(1).lower() != real:
        raise Pt2UsageError(f"{source}: torch checksum line does not match the yaml content")
    types = {k: v for k, v in data.items() if k not in _VERSION_KEYS}
    snap = make_snapshot(types, data["SCHEMA_VERSION"], source=source, treespec_version=data.get("TREESPEC_VERSION"))
    return snap, real
