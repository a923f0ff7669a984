"""Text from a file, made safe to print: on a terminal, and in JSON.

A ``.pt2`` is untrusted: its names, targets, versions and messages can hold line breaks (which
would let a file print a line of its own, a forged ``VALID``), control characters and terminal
escape sequences, bidirectional overrides (which reorder what is shown), lone surrogates (which
no encoding can write) or other unprintable code points. ``printable`` is the one escaping
function: every value taken from a file is passed through it where a verb formats its output,
so it stays on its line; anything unprintable is shown as its Python escape (``\\n``,
``\\x1b``, ``\\u202e``, ``\\udcff``). ``say`` prints human-readable text: the line breaks of
the text pt2x itself wrote separate its lines, and each line is made printable again.

JSON output: ``json.dumps`` escapes non-ASCII, but writes a lone surrogate (a file name or
member name that was not UTF-8, decoded with ``surrogateescape``) as ``\\udcff``, which RFC
8259 parsers that check (any that decode to UTF-8) reject. ``json_text`` writes strict JSON:
such a surrogate becomes the six characters of its escape, as text (``"\\\\udcff"``).
"""

from __future__ import annotations

import json
import re
import sys

__all__ = ["printable", "say", "say_error", "json_text", "json_safe_text"]

_ESCAPED_SURROGATE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")


def printable(text) -> str:
    """``text`` (any value; ``str()`` of it) on one line: every unprintable character (line
    breaks, controls, escape sequences, bidi overrides, surrogates, unassigned) escaped."""
    text = str(text)
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else ascii(c)[1:-1] for c in text)


def say(text: str = "", *, file=None) -> None:
    """Print human-readable output: one line per line break pt2x wrote, each made printable.
    Values from a file must already be ``printable`` (so their line breaks are escaped)."""
    print("\n".join(printable(part) for part in str(text).split("\n")), file=file or sys.stdout)


def say_error(prefix: str, message: str, *, file=None) -> None:
    """``prefix: message`` on stderr. An error message can hold text from a file that pt2x did
    not escape (a member name in a report of several lines), so every line after the first is
    indented: no line of it can pass for a line of the verb's own output."""
    first, *rest = str(message).split("\n")
    lines = [f"{prefix}: {first}"] + [line if line[:1].isspace() else "  " + line for line in rest]
    say("\n".join(lines), file=file or sys.stderr)


def json_text(value, **dumps_kwargs) -> str:
    """``json.dumps(value)`` as strict RFC 8259 JSON: lone surrogates written as escaped text."""
    out = json.dumps(value, **dumps_kwargs)
    if dumps_kwargs.get("ensure_ascii", True) and not _ESCAPED_SURROGATE.search(out):
        return out
    return json.dumps(json_safe_value(value), **dumps_kwargs)


def json_safe_value(value):
    """``value`` (str, dict, list, tuple, scalars) as ``json_text`` writes it: every lone
    surrogate in its text escaped, so a record held in memory equals the one read back."""
    if isinstance(value, str):
        return json_safe_text(value)
    if isinstance(value, dict):
        return {(json_safe_text(k) if isinstance(k, str) else k): json_safe_value(v)
                for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe_value(v) for v in value]
    return value


def json_safe_text(text: str) -> str:
    """``text`` as ``json_text`` writes it: each lone surrogate as its escape, in text."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")
