"""Import torch's published export schemas into ``schema/snapshots/torch/`` as data.

Why: compatibility checks (``validate --target``, ``convert --target-schema``,
``schema diff torch==2.10 pt2x``) need each release's schema without that release
installed. Each release's ``torch/_export/serde/schema.yaml`` is flattened into the
same canonical snapshot format as pt2x's own (``scripts/gen_schema_snapshot.py``), and
``releases.json`` maps release -> schema version. Rerun it when torch releases.

Sources (any mix, later ones win for the same release):

* ``--wheels DIR``: torch wheels (``torch-2.10.0-*.whl``); the yaml is read out of the zip
  (e.g. ``pip download torch==2.10.0 --no-deps --only-binary=:all: --platform
  macosx_11_0_arm64 -d DIR`` — the smallest wheels).
* ``--tree DIR``: ``DIR/<version>/schema.yaml`` files.
* ``--git GIT_DIR --ref v2.6.0 --ref v2.7.0 ...``: ``git show <ref>:torch/_export/serde/schema.yaml``
  in a pytorch/pytorch clone (the release is the ref without its ``v``).

Needs PyYAML (a development dependency); the committed JSON files need nothing.
Torch's own ``checksum<<...>>`` line is verified (sha256 of ``repr`` of the loaded yaml).
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import zipfile
from pathlib import Path

from pt2x.schema.snapshot import TORCH_SNAPSHOT_DIR, render
from pt2x.tools.snapshot_sources import snapshot_from_yaml

__all__ = ["TORCH_DIR", "YAML_PATH", "collect", "write_all", "main"]

TORCH_DIR = TORCH_SNAPSHOT_DIR
YAML_PATH = "torch/_export/serde/schema.yaml"
_WHEEL = re.compile(r"torch-(\d+\.\d+\.\d+)(?:[-+][^/]*)?\.whl$")


def _minor_release(version: str) -> str:
    major, minor = version.split(".")[:2]
    return f"{int(major)}.{int(minor)}"


def _from_wheels(folder: Path):
    for whl in sorted(folder.glob("torch-*.whl")):
        m = _WHEEL.search(whl.name)
        if not m:
            continue
        with zipfile.ZipFile(whl) as z:
            text = z.read(YAML_PATH).decode("utf-8")
            git = re.search(r"git_version = '([0-9a-f]{40})'", z.read("torch/version.py").decode("utf-8"))
        yield m.group(1), text, f"git {git.group(1)}" if git else "wheel"


def _from_tree(folder: Path):
    for yml in sorted(folder.glob("*/schema.yaml")):
        yield yml.parent.name, yml.read_text(encoding="utf-8"), str(yml)


def _from_git(git_dir: str, refs: list[str]):
    for ref in refs:
        text = subprocess.run(
            ["git", "--git-dir", git_dir, "show", f"{ref}:{YAML_PATH}"], check=True, capture_output=True, text=True
        ).stdout
        yield ref.lstrip("v"), text, f"git {ref}"


def _key(version: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", version)[:3])


def collect(sources) -> dict[str, dict]:
    """Per minor release (``"2.10"``): its snapshot from the newest patch, and every patch seen.

    Patch releases of one minor must carry the same schema; a difference is an error.
    """
    found: dict[str, dict] = {}
    for version, text, origin in sources:
        rel = _minor_release(version)
        snap, torch_sum = snapshot_from_yaml(text, source=f"torch {version}")
        entry = found.setdefault(rel, {"patches": {}, "snapshot": None, "origins": {}})
        entry["patches"][version] = (snap, torch_sum)
        entry["origins"][version] = origin
    for rel, entry in found.items():
        patches = sorted(entry["patches"], key=_key)
        sums = {entry["patches"][p][1] for p in patches}
        if len(sums) != 1:
            raise ValueError(f"torch {rel}: patch releases {patches} have different schemas")
        newest = patches[-1]
        snap = dict(entry["patches"][newest][0])
        snap["source"] = f"torch {', '.join(patches)}: {YAML_PATH}"
        entry.update(snapshot=snap, patches=patches, torch_checksum=sums.pop())
    return found


def write_all(found: dict[str, dict], out_dir: Path = TORCH_DIR) -> list[Path]:
    """Write ``torch-<rel>.json`` per release and merge ``releases.json`` (release -> schema)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    index_path = out_dir / "releases.json"
    index = json.loads(index_path.read_text())["releases"] if index_path.exists() else {}
    written = []
    for rel, entry in found.items():
        path = out_dir / f"torch-{rel}.json"
        path.write_text(render(entry["snapshot"]))
        written.append(path)
        index[rel] = {
            "schema_version": entry["snapshot"]["schema_version"],
            "patches": entry["patches"],
            "snapshot": path.name,
            "torch_checksum": entry["torch_checksum"],
            "origins": {p: entry["origins"][p] for p in entry["patches"]},
        }
    ordered = {k: index[k] for k in sorted(index, key=_key)}
    about = "torch release -> export schema version (SCHEMA_VERSION in torch/_export/serde/schema.yaml); scripts/import_torch_schemas.py"
    lines = ["{", f'  "about": {json.dumps(about)},', '  "releases": {']
    for i, rel in enumerate(ordered):
        sep = "," if i < len(ordered) - 1 else ""
        lines.append(f"    {json.dumps(rel)}: {json.dumps(ordered[rel])}{sep}")
    lines += ["  }", "}"]
    index_path.write_text("\n".join(lines) + "\n")
    written.append(index_path)
    return written


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="import_torch_schemas", description=__doc__.splitlines()[0])
    ap.add_argument("--wheels", type=Path, help="folder of torch-*.whl files")
    ap.add_argument("--tree", type=Path, help="folder of <version>/schema.yaml files")
    ap.add_argument("--git", help="git dir of a pytorch/pytorch clone (with --ref)")
    ap.add_argument("--ref", action="append", default=[], help="release tag, e.g. v2.10.0 (repeatable)")
    ap.add_argument("-o", "--out", type=Path, default=TORCH_DIR, help="output folder (default: %(default)s)")
    args = ap.parse_args(argv)
    sources = []
    if args.wheels:
        sources.extend(_from_wheels(args.wheels))
    if args.tree:
        sources.extend(_from_tree(args.tree))
    if args.git:
        sources.extend(_from_git(args.git, args.ref))
    if not sources:
        ap.error("give at least one of --wheels, --tree, --git/--ref")
    found = collect(sources)
    for path in write_all(found, args.out):
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
