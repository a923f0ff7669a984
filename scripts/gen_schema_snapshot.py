"""Write the canonical schema snapshot, ``schema/snapshots/pt2x.json``, from the definitions.

Run ``python -m scripts.gen_schema_snapshot`` (or ``python -m scripts.gen_schema_snapshot``)
after changing ``schema/definitions.py``;
``--check`` only reports staleness (a test runs it). The format lives in
``pt2x.schema.snapshot``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from pt2x.schema.snapshot import PT2X_SNAPSHOT, build_snapshot, render


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="gen_schema_snapshot", description=__doc__.splitlines()[0])
    ap.add_argument("-o", "--output", default=str(PT2X_SNAPSHOT), help="where to write (default: %(default)s)")
    ap.add_argument("--check", action="store_true", help="only report whether the file is current (exit 1 if stale)")
    args = ap.parse_args(argv)
    text = render(build_snapshot())
    out = Path(args.output)
    current = out.read_text() if out.exists() else None
    if args.check:
        if current != text:
            print(f"{out} is stale: run python -m scripts.gen_schema_snapshot", file=sys.stderr)
            return 1
        print(f"{out} is current")
        return 0
    if current != text:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text)
        print(f"wrote {out}")
    else:
        print(f"{out} unchanged")
    return 0


if __name__ == "__main__":
    sys.exit(main())
