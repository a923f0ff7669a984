"""``pt2x validate FILE [--json] [--target torch==X.Y | --target-schema M.N]``.

Structural and referential checks (``serde.validate``); with a target, also whether
that torch release can read the file as it is, and whether ``pt2x convert --to pt2
--target-schema`` can write a copy it reads (``writable``). Both answers come from the
one planner, ``serde.compat.plan``, that convert and ``save(target_schema=)`` use.
Exit 0 valid (warnings allowed), 1 findings (an AOTInductor package among them: compiled code,
verdict ``aoti-package``, ``"kind": "aoti-package"``), 2 unreadable or a bad target. ``--json`` prints ``{"file",
"valid", "readable", "target", "findings": [Finding.as_dict()...]}``, plus ``"writable"``
with a target.
"""

from __future__ import annotations

import argparse
import sys

from .terminal import json_text, printable, say


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("validate", help="check a .pt2 is well-formed (and readable by a given torch release)")
    p.add_argument("file", nargs="+")
    p.add_argument("--json", action="store_true", help="machine-readable output (stable; see docs/cli.md)")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--target", help="a torch release that must read the file, e.g. torch==2.10")
    g.add_argument("--target-schema", help="a schema version that must read the file, e.g. 8.15")
    p.add_argument("--no-crc", action="store_true", help="skip the CRC-32 check of every member")
    p.set_defaults(func=run)


def _check_one(path: str, args: argparse.Namespace) -> dict:
    from ..serde import load
    from ..serde.errors import Pt2Error
    from ..serde.archive.loader import AOTI_PACKAGE
    from ..serde.validate import validate_archive
    from .cli import check_input

    target = args.target or args.target_schema
    try:
        check_input(path)
        with load(path) as archive:
            findings = validate_archive(archive, check_crc=not args.no_crc)
            kind = "aoti-package" if archive.layout == AOTI_PACKAGE else "exported-program"
            writable = None
            if target:
                from ..serde.compat.plan import check_target, writable_for_target
                from ..serde.compat.releases import parse_target

                version = parse_target(target)
                findings += check_target(archive, version)
                writable = writable_for_target(archive, version)
    except Pt2Error as e:
        return {"file": path, "valid": False, "readable": False, "target": target, "error": str(e), "findings": []}
    valid = not any(f.severity == "error" for f in findings)
    result = {"file": path, "valid": valid, "readable": True, "kind": kind, "target": target,
              "findings": [f.as_dict() for f in findings]}
    if target:
        result["writable"] = writable
    return result


def _check_target(target: str | None) -> None:
    """A bad or unknown target is a usage error (exit 2, naming the known releases), found
    before any file is read: it says nothing about the files."""
    if target:
        from ..serde.compat.releases import target_snapshot

        target_snapshot(target)


def run(args: argparse.Namespace) -> int:
    _check_target(args.target or args.target_schema)
    results = [_check_one(p, args) for p in args.file]
    if args.json:
        print(json_text(results[0] if len(results) == 1 else results, indent=2))
    else:
        for r in results:
            if not r["readable"]:
                say(f"{printable(r['file'])}: unreadable: {printable(r['error'])}", file=sys.stderr)
                continue
            for f in r["findings"]:
                where = ": ".join(x for x in (f["member"], f["path"]) if x)
                say(f"{printable(r['file'])}: {f['severity']}: {printable(where + ': ' if where else '')}"
                    f"{printable(f['message'])} [{f['code']}]")
            verdict = "aoti-package" if r["kind"] == "aoti-package" else "valid" if r["valid"] else "INVALID"
            tgt = f" for {r['target']}" if r["target"] else ""
            say(f"{printable(r['file'])}: {verdict}{tgt}")
            if r["target"] and not r["valid"]:
                can = "can" if r["writable"] else "cannot"
                say(f"{printable(r['file'])}: pt2x convert --to pt2 --target-schema {r['target']} {can} write a copy that release reads")
    if any(not r["readable"] for r in results):
        return 2
    return 0 if all(r["valid"] for r in results) else 1
