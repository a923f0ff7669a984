"""``pt2x validate FILE [--json] [--target torch==X.Y | --target-schema M.N]``, and
``pt2x validate FILE.pte [--json] [--target executorch==X.Y] [--data FILE.ptd]`` (``_check_pte``:
a program that reads weights from a ``.ptd`` is checked against it, ``--data`` or the ``.ptd``
beside it), and ``pt2x validate FILE.ptd [--json] [--target executorch==X.Y]`` (``_check_ptd``).

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
import os
import sys

from .terminal import json_text, printable, say


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("validate", help="check a .pt2 (or .pte) is well-formed (and readable by a given torch or ExecuTorch release)")
    p.add_argument("file", nargs="+")
    p.add_argument("--json", action="store_true", help="machine-readable output (stable; see docs/cli.md)")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--target", help="a torch release that must read the file, e.g. torch==2.10 (for a .pte: executorch==1.5)")
    g.add_argument("--target-schema", help="a schema version that must read the file, e.g. 8.15")
    p.add_argument("--no-crc", action="store_true", help="skip the CRC-32 check of every member")
    p.add_argument("--data", default=None, metavar="FILE.ptd",
                   help="for a .pte: the .ptd its external weights are read from (default: the .ptd beside it, M.pte -> M.ptd)")
    p.set_defaults(func=run)


def _check_pte(path: str, target: str | None, data: str | None = None) -> dict:
    """A .pte: read torch-free (every offset and index checked: structural validity), and the
    ``.ptd`` its external tensors are read from (``_data_findings``); with ``--target
    executorch==X.Y``, whether that runtime loads it: the identifier, the schema version, and a
    kernel for every operator (``converters/pte/releases.py``)."""
    from ..converters.pte.reader import read_pte
    from ..converters.pte.releases import missing_kernels, release
    from ..serde.errors import Pt2Error, Pt2UsageError
    from ..serde.findings import Finding
    from .cli import check_input

    findings = []
    try:
        check_input(path)
        if target and not target.strip().startswith("executorch"):
            raise Pt2UsageError(f"a .pte is validated against an ExecuTorch release (--target executorch==X.Y), not {target!r}")
        s = read_pte(path)
    except Pt2Error as e:
        return {"file": path, "valid": False, "readable": False, "target": target, "error": str(e), "findings": []}
    data_used, findings = _data_findings(path, s, data)
    if target:
        rel = release(target)
        if s["schema_version"] > rel.max_schema_version:
            findings.append(Finding("error", "schema-version", f"schema version {s['schema_version']}: ExecuTorch "
                                    f"{rel.name} reads up to {rel.max_schema_version}", path="version"))
        for k, plan in enumerate(s["execution_plans"]):
            for op in missing_kernels(rel, plan["operators"]):
                findings.append(Finding("error", "missing-kernel",
                                        f"ExecuTorch {rel.name}'s portable kernels have no {op} "
                                        f"({plan['operators'][op]} call(s))", path=f"execution_plan[{k}].operators"))
            for d in plan["delegates"]:
                findings.append(Finding("warning", "delegate", f"delegate {d['id']!r}: loads only where its backend "
                                        "is registered (not part of the portable kernels)", path=f"execution_plan[{k}].delegates"))
    valid = not any(f.severity == "error" for f in findings)
    return {"file": path, "valid": valid, "readable": True, "kind": "executorch-program", "target": target,
            "data": data_used, "findings": [f.as_dict() for f in findings]}


def _data_findings(path: str, pte: dict, data: str | None) -> tuple[str | None, list]:
    """The ``.ptd`` a program reads its external tensors from (``data``, else the one beside
    ``path``) and what it lacks (``ptd_reader.check_data``): no such file, a key missing, a key of
    another dtype or shape, an unreadable file. Returns the file used and the findings."""
    from ..converters.pte.ptd import ptd_path
    from ..converters.pte.ptd_reader import check_data, read_ptd, reads_data
    from ..serde.errors import Pt2Error
    from ..serde.findings import Finding

    if not reads_data(pte):
        unused = [Finding("warning", "unused-data", f"the program reads no tensor from a .ptd: {data} is not used")]
        return None, unused if data else []
    where = data or ptd_path(path)
    if data is None and not os.path.isfile(where):
        return None, check_data(pte, None, f"no --data given, and no {where} beside it")
    try:
        ptd = read_ptd(where)
    except Pt2Error as e:
        return where, [Finding("error", "bad-data", f"{where}: {e}")]
    return where, check_data(pte, ptd, where)


def _check_ptd(path: str, target: str | None) -> dict:
    """A .ptd: read torch-free (header, alignment, every offset and index checked); with
    ``--target executorch==X.Y``, whether that runtime reads its schema version."""
    from ..converters.pte.ptd_reader import read_ptd
    from ..converters.pte.releases import release
    from ..serde.errors import Pt2Error, Pt2UsageError
    from ..serde.findings import Finding
    from .cli import check_input

    findings = []
    try:
        check_input(path)
        if target and not target.strip().startswith("executorch"):
            raise Pt2UsageError(f"a .ptd is validated against an ExecuTorch release (--target executorch==X.Y), not {target!r}")
        s = read_ptd(path)
    except Pt2Error as e:
        return {"file": path, "valid": False, "readable": False, "target": target, "error": str(e), "findings": []}
    if target:
        rel = release(target)
        if s["schema_version"] > rel.max_data_version:
            findings.append(Finding("error", "schema-version", f"FlatTensor version {s['schema_version']}: ExecuTorch "
                                    f"{rel.name} reads up to {rel.max_data_version}", path="version"))
    valid = not findings
    return {"file": path, "valid": valid, "readable": True, "kind": "executorch-data", "target": target,
            "findings": [f.as_dict() for f in findings]}


def _check_one(path: str, args: argparse.Namespace) -> dict:
    from ..converters.pte.ptd_reader import is_ptd
    from ..converters.pte.reader import is_pte
    from ..serde import load
    from ..serde.errors import Pt2Error, Pt2UsageError
    from ..serde.archive.loader import AOTI_PACKAGE
    from ..serde.validate import validate_archive
    from .cli import check_input

    target = args.target or args.target_schema
    if is_pte(path):
        return _check_pte(path, args.target or (f"schema=={args.target_schema}" if args.target_schema else None),
                          args.data)
    if is_ptd(path):
        return _check_ptd(path, args.target or (f"schema=={args.target_schema}" if args.target_schema else None))
    if args.data:
        raise Pt2UsageError(f"--data is the .ptd of a .pte; {path} is not a .pte")
    try:
        check_input(path)
        if target and target.strip().startswith("executorch"):
            raise Pt2UsageError(f"{target!r} is an ExecuTorch release: it validates .pte files, not a .pt2")
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
    if target and target.strip().startswith("executorch"):
        from ..converters.pte.releases import release

        release(target)
    elif target:
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
            data = f" with {printable(r['data'])}" if r.get("data") else ""
            say(f"{printable(r['file'])}: {verdict}{tgt}{data}")
            if r["target"] and not r["valid"] and "writable" in r:
                can = "can" if r["writable"] else "cannot"
                say(f"{printable(r['file'])}: pt2x convert --to pt2 --target-schema {r['target']} {can} write a copy that release reads")
    if any(not r["readable"] for r in results):
        return 2
    return 0 if all(r["valid"] for r in results) else 1
