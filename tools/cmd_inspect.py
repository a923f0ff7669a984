"""``pt2x inspect FILE [--json]``: what is in a .pt2, read without torch."""

from __future__ import annotations

import argparse
import json

from .summary import archive_summary


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("inspect", help="show models, signature, shapes, ranges, ops and weights of a .pt2")
    p.add_argument("file")
    p.add_argument("--json", action="store_true", help="machine-readable output (stable keys; see README)")
    p.set_defaults(func=run)


def _shape(e: dict) -> str:
    if "dtype" not in e:
        return ""
    return f"{e['dtype']}[{', '.join(str(x) for x in e['shape'])}]"


def run(args: argparse.Namespace) -> int:
    from ..serde import load

    with load(args.file) as archive:
        s = archive_summary(archive)
    if args.json:
        print(json.dumps(s, indent=2))
        return 0
    print(f"{s['file']}: layout {s['layout']}, {len(s['models'])} model(s)")
    for name, m in s["models"].items():
        print(f"\nmodel {name!r}: schema {m['schema_version']}, written by torch {m['torch_version']}, verifiers {m['verifiers']}")
        print(f"  inputs:")
        for e in m["inputs"]:
            tgt = f" -> {e['target']}" if "target" in e else ""
            print(f"    {e['kind']:<16} {e.get('name')}{tgt} {_shape(e)}".rstrip())
        print(f"  outputs:")
        for e in m["outputs"]:
            tgt = f" -> {e['target']}" if "target" in e else ""
            print(f"    {e['kind']:<16} {e.get('name')}{tgt} {_shape(e)}".rstrip())
        if m["range_constraints"]:
            print("  range constraints:")
            for sym, (lo, hi) in m["range_constraints"].items():
                print(f"    {lo if lo is not None else '-inf'} <= {sym} <= {hi if hi is not None else 'inf'}")
        print(f"  nodes: {m['node_count']}")
        for op, n in m["ops"].items():
            print(f"    {n:>5}  {op}")
        print(f"  module call graph: {', '.join(e['fqn'] or '<root>' for e in m['module_call_graph'])}")
        print(f"  weights: {m['weights']['count']} tensors, {m['weights']['bytes']} bytes; constants: {m['constants']['count']} tensors, {m['constants']['bytes']} bytes")
        for x in m["not_loaded"]:
            print(f"  not loaded: {x['member']}{' (' + x['fqn'] + ')' if x['fqn'] else ''}: {x['reason']}")
        for f in m["unknown_fields"]:
            print(f"  unknown field (kept): {f}")
    for x in s["not_loaded"]:
        print(f"not loaded: {x['member']}: {x['reason']}")
    for n in s["unrecognized_members"]:
        print(f"unrecognized member (kept, not interpreted): {n}")
    if s["extra_files"]:
        print(f"extra files: {', '.join(s['extra_files'])}")
    return 0
