"""``pt2x scan PATH|GLOB|URL... [--target torch==X] [--convert onnx,tflite] [--jobs N] [--ray [ADDRESS]]
[--out results.jsonl] [--resume] [--timeout S] [--memory MB] [--json]``.

Checks a fleet of artifacts (``tools/scan/``; ``docs/scan.md``): one JSON line per artifact in
``--out``, then the summary (a table, or JSON with ``--json``) on stdout. Exit 0 when every
artifact's verdict is ``ok``; 1 when any had findings, was unreadable, crashed, timed out or
ran out of memory (the scan itself completed); 2 for a usage error (no artifact found, a bad
option, an output that cannot be written, a missing extra: ``pt2x[ray]``, ``pt2x[fsspec]``).
"""

from __future__ import annotations

import argparse
import os

from .terminal import json_text, say


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("scan", help="check many artifacts (folders, globs, URLs) on a process pool or Ray")
    p.add_argument("paths", nargs="+", metavar="PATH", help="a .pt2 file, a folder (walked for *.pt2), a glob, or an fsspec URL")
    p.add_argument("--target", help="a torch release that must read each artifact, e.g. torch==2.10 (or a schema version)")
    p.add_argument("--convert", default="", help="conversions to try in memory, comma-separated: onnx,tflite")
    p.add_argument("--jobs", type=int, default=None, help="worker processes (default: the CPUs); with --ray, a local Ray's CPUs")
    p.add_argument("--ray", nargs="?", const="", default=None, metavar="ADDRESS",
                   help="run as Ray tasks: no ADDRESS starts a local Ray, an ADDRESS joins that cluster (pt2x[ray])")
    p.add_argument("--out", help="write one JSON line per artifact here")
    p.add_argument("--resume", action="store_true", help="skip the artifacts --out already holds")
    p.add_argument("--timeout", type=float, default=60.0, help="seconds per artifact (default 60)")
    p.add_argument("--memory", type=int, default=2048, metavar="MB",
                   help="memory per worker past its size after start-up, MiB (default 2048)")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.set_defaults(func=run)


def _options(args: argparse.Namespace):
    from ..serde.errors import Pt2UsageError
    from .scan.options import CONVERTERS, ScanOptions

    convert = tuple(c.strip() for c in args.convert.split(",") if c.strip())
    unknown = [c for c in convert if c not in CONVERTERS]
    if unknown:
        raise Pt2UsageError(f"--convert {','.join(unknown)}: expected a comma-separated list of {', '.join(CONVERTERS)}")
    if args.target:
        from ..serde.compat.releases import target_snapshot

        target_snapshot(args.target)  # a bad or unknown target is a usage error before any work
    _check_extras(convert)
    if args.ray:
        from .scan.ray_runner import check_address

        check_address(args.ray)  # nothing listening: one line now, not Ray's retries for a minute
    if args.timeout <= 0:
        raise Pt2UsageError(f"--timeout {args.timeout:g}: expected a positive number of seconds")
    if args.memory <= 0:
        raise Pt2UsageError(f"--memory {args.memory}: expected a positive number of MiB")
    if args.jobs is not None and args.jobs < 1:
        raise Pt2UsageError(f"--jobs {args.jobs}: expected at least 1")
    if args.resume and not args.out:
        raise Pt2UsageError("--resume needs --out: the results of the former run are read from it")
    return ScanOptions(target=args.target, convert=tuple(dict.fromkeys(convert)), timeout=args.timeout,
                       memory_mb=args.memory)


def _check_extras(convert: tuple[str, ...]) -> None:
    """Each asked-for conversion's package, imported now: a missing extra is a usage error
    (``MissingExtraError``, exit 2) before any artifact is read, not a finding on every one."""
    from .scan.check import converter

    for name in convert:
        converter(name)


def _cpus() -> int:
    """The CPUs this process may run on (a container's share, not the host's count)."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def run(args: argparse.Namespace) -> int:
    from .cli import EXIT_FINDINGS, EXIT_OK
    from .scan.driver import scan

    options = _options(args)
    jobs = args.jobs or _cpus()
    summary = scan(args.paths, options, jobs=jobs, ray=args.ray is not None, address=args.ray or None,
                   out=args.out, resume=args.resume)
    if args.json:
        print(json_text(summary.as_dict(), indent=2))
    else:
        say(summary.table())
    return EXIT_OK if summary.all_ok else EXIT_FINDINGS
