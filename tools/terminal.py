"""Text from a file, made safe to print on a terminal.

A ``.pt2`` is untrusted: its names, targets and messages can hold control characters
(terminal escape sequences), lone surrogates (which no encoding can write) or other
unprintable code points. Every human-readable line the CLI prints goes through ``say``:
printable characters pass unchanged, anything else is shown as its Python escape.
JSON output needs none of this: ``json.dumps`` escapes non-ASCII itself.
"""

from __future__ import annotations

import sys

__all__ = ["printable", "say"]


def printable(text: str) -> str:
    """``text`` with every unprintable character (controls, surrogates, unassigned) escaped."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else ascii(c)[1:-1] for c in text)


def say(line: str = "", *, file=None) -> None:
    """Print one line of human-readable output, each of its lines made printable."""
    print("\n".join(printable(part) for part in str(line).split("\n")), file=file or sys.stdout)
