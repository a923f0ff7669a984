"""The ``pt2x`` command: a thin layer over the public API.

Each subcommand lives in its own module ``pt2x.tools.cmd_<name>`` exposing
``register(subparsers)``; the module is imported only when listed here, so
``pt2x inspect`` never imports onnx or torch.
Exit codes everywhere: 0 ok, 1 findings / incompatible, 2 unreadable input or usage error.
"""

from __future__ import annotations

import argparse
import importlib
import sys

COMMANDS = ("inspect", "validate", "convert", "schema")


def build_parser() -> argparse.ArgumentParser:
    from .. import __version__

    parser = argparse.ArgumentParser(prog="pt2x", description="Read, validate and convert torch.export .pt2 files.")
    parser.add_argument("--version", action="version", version=f"pt2x {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    for name in COMMANDS:
        try:
            module = importlib.import_module(f"{__package__}.cmd_{name}")
        except ModuleNotFoundError as e:
            if e.name == f"{__package__}.cmd_{name}":
                continue  # not built yet
            raise
        module.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    from ..serde.errors import Pt2Error

    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except Pt2Error as e:
        print(f"pt2x {args.command}: {e}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
