"""``pt2x schema check|diff|releases``: review schema changes as compatibility verdicts.

``check`` diffs the current definitions (``schema/definitions.py``, declared version
``schema/version.py``) against the committed snapshot, another snapshot file, or the
snapshot at a git ref, and fails when the declared version does not carry the bump the
changes need. ``diff A B`` does the same between any two of ``pt2x``, ``committed``,
``torch==2.10`` / ``2.10`` / ``8.15``, a snapshot or schema.yaml file, or a git ref.
The rules are in ``schema/diff.py``; where a snapshot comes from, in ``tools/snapshot_sources.py``. Exit: 0 ok, 1 incompatible (bump missing), 2 error.
"""

from __future__ import annotations

import argparse
import json
import sys

from ..serde.errors import Pt2UsageError
from .terminal import json_text, printable


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("schema", help="check schema changes and compare with torch releases' schemas")
    verbs = p.add_subparsers(dest="schema_command", required=True)

    c = verbs.add_parser("check", help="classify changes since the snapshot; fail if the version bump is missing")
    c.add_argument("--against", default="committed", help="snapshot file, release (torch==2.10, 8.15) or git ref "
                   "(its schema/snapshots/pt2x.json); default: the committed snapshot")
    c.add_argument("--json", action="store_true", help="machine-readable result")
    c.set_defaults(func=run_check)

    d = verbs.add_parser("diff", help="classify the changes from schema A to schema B")
    d.add_argument("a", help="pt2x | committed | torch==2.10 | 2.10 | 8.15 | FILE | GIT-REF")
    d.add_argument("b", help="same forms as A")
    d.add_argument("--json", action="store_true", help="machine-readable result")
    d.set_defaults(func=run_diff)

    r = verbs.add_parser("releases", help="list torch releases and the schema version each writes")
    r.add_argument("--json", action="store_true")
    r.set_defaults(func=run_releases)


def _resolve(spec: str):
    from .snapshot_sources import resolve_snapshot

    try:
        return resolve_snapshot(spec)
    except (ValueError, OSError) as e:
        raise Pt2UsageError(str(e)) from None


def _print(result, out=None) -> None:
    out = out or sys.stdout
    ov, nv = result.old_version, result.new_version
    print(f"{printable(result.old_label)} ({ov[0]}.{ov[1]}) -> {printable(result.new_label)} ({nv[0]}.{nv[1]})", file=out)
    if not result.changes:
        print("  no changes", file=out)
    for c in result.changes:
        print(f"  {c.compat:<8} {c.bump:<5} {printable(c.message())}", file=out)  # names from the schema files
    yes = {True: "yes", False: "no"}
    back = all(c.backward for c in result.changes)
    fwd = all(c.forward for c in result.changes)
    print(f"backward-compatible (new reader, old data): {yes[back]}; forward-compatible (old reader, new data): {yes[fwd]}", file=out)
    print(f"bump needed: {result.bump}; {result.verdict}", file=out)
    print("ok" if result.carried else "FAIL", file=out)


def _emit(result, as_json: bool, extra: dict | None = None) -> int:
    if as_json:
        body = result.as_dict()
        body.update(extra or {})
        print(json_text(body, indent=1))
    else:
        _print(result)
        for note in (extra or {}).get("notes", []):
            print(f"note: {printable(note)}")
    return 0 if result.carried else 1


def run_check(args: argparse.Namespace) -> int:
    from ..schema.snapshot import build_snapshot, render
    from ..schema.diff import diff_snapshots

    old, old_label = _resolve(args.against)
    new = build_snapshot()
    result = diff_snapshots(old, new, old_label=old_label, new_label="pt2x (schema/definitions.py)")
    notes = []
    if args.against == "committed" and render(old) != render(new):
        notes.append("the committed snapshot is stale: run python -m scripts.gen_schema_snapshot and commit it")
    return _emit(result, args.json, {"notes": notes})


def run_diff(args: argparse.Namespace) -> int:
    from ..schema.diff import diff_snapshots

    a, la = _resolve(args.a)
    b, lb = _resolve(args.b)
    return _emit(diff_snapshots(a, b, old_label=la, new_label=lb), args.json)


def run_releases(args: argparse.Namespace) -> int:
    from ..schema.snapshot import torch_releases

    rel = torch_releases()
    if args.json:
        print(json.dumps({r: v["schema_version"] for r, v in rel.items()}, indent=1))
        return 0
    for r, v in rel.items():
        print(f"torch {r:<5} schema {v['schema_version'][0]}.{v['schema_version'][1]:<3} ({', '.join(v['patches'])})")
    return 0
