"""Strict JSON codec: JSON text <-> schema objects, compiled from the schema's annotations.

One decoder and one encoder closure per schema type, built once from
``pt2x.schema.definitions`` (no hand-written function per type). Strict means:
a union has exactly one key and it is a known member; enum values must be declared;
ints are ints (not bools), strings are strings; duplicate object keys are refused.
Fields the schema does not declare (a newer minor's additions) are kept on the object's
``unknown_fields`` and reported in ``DecodeReport``, and the encoder writes them back,
so nothing is silently dropped.

Untrusted text is bounded before and while it is decoded, in time linear in its size
(limits in ``serde.limits``): a pre-scan of the text refuses nesting past MAX_JSON_DEPTH,
numbers past MAX_JSON_NUMBER_DIGITS and strings past MAX_JSON_STRING_BYTES before
``json`` parses it; the decoders refuse lists and objects past MAX_JSON_ITEMS, graphs
past MAX_GRAPH_NODES / MAX_GRAPH_VALUES and subgraphs nested past MAX_SUBGRAPH_DEPTH.
Every failure is a SchemaError or LimitExceededError naming the member and field path,
which is built on the way out of the failure: nothing is decoded twice.
"""

from __future__ import annotations

import json
import math
import re
import sys
import typing
from dataclasses import MISSING, dataclass, field, fields
from operator import length_hint
from typing import Any, Callable

import numpy as np

from ...schema import definitions as d
from ...schema.kinds import UNKNOWN_FIELDS, SchemaEnum, is_struct, is_union, type_hints
from ..errors import LimitExceededError, SchemaError
from ..limits import (
    MAX_GRAPH_NODES,
    MAX_GRAPH_VALUES,
    MAX_JSON_BYTES,
    MAX_JSON_DEPTH,
    MAX_JSON_ITEMS,
    MAX_JSON_NUMBER_DIGITS,
    MAX_JSON_STRING_BYTES,
    MAX_SUBGRAPH_DEPTH,
)

__all__ = ["DecodeReport", "decode", "encode", "loads", "dumps", "parse_json", "parse_json_pairs", "to_plain"]


@dataclass
class DecodeReport:
    """What decoding found but kept: fields not in pt2x's schema, by JSON path."""

    unknown_fields: list[str] = field(default_factory=list)


class _Ctx:
    """Per-decode state: recursion depth, subgraph depth, and the report being filled."""

    __slots__ = ("depth", "graphs", "report")

    def __init__(self, report: DecodeReport):
        self.depth = 0
        self.graphs = 0
        self.report = report


class _PathError(Exception):
    """Internal: a SchemaError (or, with ``limit``, a LimitExceededError) under construction,
    collecting its path on the way out of the failure: each level adds its own part once."""

    def __init__(self, message: str, parts: list[str] | None = None, *, limit: bool = False):
        self.message = message
        self.parts = parts or []
        self.limit = limit


def _at(part: str, err: BaseException) -> _PathError:
    """``err`` as a _PathError with ``part`` (the failing field, key or index) prepended to its path."""
    if type(err) is not _PathError:
        err = _foreign(err)
    err.parts.append(part)
    return err


def _foreign(err: BaseException) -> _PathError:
    """Any other exception met while decoding, as a _PathError (so it too gets its path)."""
    if isinstance(err, RecursionError):
        return _PathError("nested too deeply for Python's recursion limit", limit=True)
    if isinstance(err, MemoryError):
        return _PathError("out of memory while decoding", limit=True)
    return _PathError(f"cannot decode: {type(err).__name__}: {_clip(str(err))}")


def _clip(text: str, limit: int = 120) -> str:
    """``text`` cut to ``limit`` characters (messages quote values from the file)."""
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _short(v: Any, limit: int = 80) -> str:
    """``repr`` of a value from the file, cut to ``limit`` characters for messages and paths."""
    return _clip(repr(v), limit)


def _key_part(k: Any) -> str:
    """A path part for dict key ``k``: ``['name']``."""
    return f"[{_short(k)}]"


# ----------------------------------------------------------------- JSON text level
#
# Before ``json`` sees the text, one linear scan (a few ``bytes`` operations, numpy for large
# texts) checks what ``json`` itself does not bound: nesting depth (its C parser recurses once
# per level), digits in a number (int() of n digits is O(n^2)) and string lengths. It works on
# the text's skeleton (quotes, brackets, digits) and costs about a third of ``json.loads``.
# Then objects are parsed as tuples of (key, value) pairs (``object_pairs_hook=tuple`` runs in
# C), and the decoders, which visit every object anyway, turn them into dicts and refuse
# duplicate keys there. That is twice as fast as a Python hook that checks while parsing.

_QUOTE, _BACKSLASH = 0x22, 0x5C
_OPEN, _CLOSE, _DIGIT, _OTHER = ord("("), ord(")"), ord("0"), ord(" ")
_SKELETON = bytes(
    _QUOTE if c == _QUOTE else _OPEN if c in b"[{" else _CLOSE if c in b"]}" else _DIGIT if 0x30 <= c <= 0x39 else _OTHER
    for c in range(256)
)
"""``bytes.translate`` table to the text's skeleton, same length: '"' stays, brackets become
'(' / ')', ASCII digits '0', everything else ' '."""
_LONG_DIGIT_RUN = b"0" * (MAX_JSON_NUMBER_DIGITS + 1)


class _TextLimit(Exception):
    """Internal: the JSON text breaks a limit at byte ``offset``."""

    def __init__(self, message: str, offset: int):
        self.message = message
        self.offset = offset


_SMALL_TEXT = 1 << 16
"""Texts up to this size are scanned with a few ``bytes`` operations instead of numpy: each
numpy call costs about a microsecond, which is most of the scan of a small file."""
_STRING_MARKS = re.compile(rb'"[^"]*"')


def _skeleton(raw: bytes | bytearray) -> bytes | bytearray:
    """``raw`` through ``_SKELETON`` with escaped quotes blanked: in the result every '"' opens
    or closes a string, and byte offsets are those of ``raw``."""
    if raw.find(b'\\"') < 0:
        return raw.translate(_SKELETON)
    if len(raw) <= _SMALL_TEXT:
        # Left to right, as JSON reads escapes: a pair of backslashes is one escaped backslash;
        # a backslash still before a quote then escapes it. Both are blanked, offsets kept.
        if raw.find(b"\\\\") >= 0:
            raw = raw.replace(b"\\\\", b"__")
        return raw.replace(b'\\"', b"__").translate(_SKELETON)
    a = np.frombuffer(raw, dtype=np.uint8)
    backslashes = np.flatnonzero(a[:-1] == _BACKSLASH)  # a backslash as the last byte escapes nothing
    quotes = backslashes[a[backslashes + 1] == _QUOTE] + 1  # quotes right after a backslash
    longer = quotes[quotes >= 2]
    longer = longer[a[longer - 2] == _BACKSLASH]
    if len(longer):  # after a run of 2+ backslashes: escaped only when the run is odd (a pair is one escaped backslash)
        run_starts = backslashes[np.concatenate(([True], np.diff(backslashes) != 1))]
        starts = run_starts[np.searchsorted(run_starts, longer - 1, side="right") - 1]
        even = longer[(longer - starts) % 2 == 0]  # run length = quote - start
        quotes = np.setdiff1d(quotes, even, assume_unique=True)
    skeleton = raw.translate(_SKELETON)  # a bytearray from a bytearray (the reader's own copy): no second copy
    if not isinstance(skeleton, bytearray):
        skeleton = bytearray(skeleton)
    np.frombuffer(skeleton, dtype=np.uint8)[quotes] = _OTHER
    return skeleton


def _check_numbers(skeleton: bytes | bytearray) -> None:
    """Refuse a number with a run of more than MAX_JSON_NUMBER_DIGITS digits (runs inside strings are text)."""
    start = skeleton.find(_LONG_DIGIT_RUN)
    quotes, counted_to = 0, 0  # quotes before ``counted_to``: each byte is counted once
    while start >= 0:
        quotes += skeleton.count(b'"', counted_to, start)
        if quotes % 2 == 0:  # outside any string
            tail = np.frombuffer(skeleton, dtype=np.uint8)[start:]
            run = int(np.argmax(tail != _DIGIT)) or len(tail)  # the run ends at the first non-digit
            raise _TextLimit(f"JSON number with a run of {run} digits exceeds MAX_JSON_NUMBER_DIGITS={MAX_JSON_NUMBER_DIGITS}", start)
        close = skeleton.find(b'"', start)
        if close < 0:
            return  # inside a string that never closes: json refuses the text
        quotes, counted_to = quotes + 1, close + 1
        start = skeleton.find(_LONG_DIGIT_RUN, counted_to)


def _check_strings(skeleton: bytes | bytearray) -> None:
    """Refuse a string longer than MAX_JSON_STRING_BYTES (quotes pair up in order: open, close)."""
    if len(skeleton) <= MAX_JSON_STRING_BYTES + 2:
        return  # no room for one
    quotes = np.flatnonzero(np.frombuffer(skeleton, dtype=np.uint8) == _QUOTE)
    opens, closes = quotes[0::2], quotes[1::2]
    if not len(closes):
        return
    lengths = closes - opens[: len(closes)] - 1
    i = int(lengths.argmax())
    if lengths[i] > MAX_JSON_STRING_BYTES:
        raise _TextLimit(f"JSON string of {int(lengths[i])} bytes exceeds MAX_JSON_STRING_BYTES={MAX_JSON_STRING_BYTES}", int(opens[i]))


def _check_depth(skeleton: bytes | bytearray) -> None:
    """Refuse nesting past MAX_JSON_DEPTH, counting brackets outside strings.

    Works on the quotes and brackets alone (the skeleton without spaces and digits, a few
    percent of the text)."""
    marks = skeleton.translate(None, b" 0")
    if len(marks) <= _SMALL_TEXT and _shallow(marks):
        return
    _check_depth_exactly(skeleton, marks)


def _shallow(marks: bytes) -> bool:
    """Whether ``marks`` nests at most MAX_JSON_DEPTH deep, by ``bytes`` operations: drop the
    strings, then peel innermost bracket pairs, one level per pass. False: maybe not."""
    # Dropping two adjacent quotes keeps every other byte's side of the string boundaries;
    # what remains of strings (those with brackets inside) is matched from an opening quote.
    outside = marks.replace(b'""', b"")
    if b'"' in outside:
        outside = _STRING_MARKS.sub(b"", outside)
    for _ in range(MAX_JSON_DEPTH):
        if not outside:
            return True
        peeled = outside.replace(b"()", b"")
        if len(peeled) == len(outside):
            return False  # unbalanced: malformed, measured exactly
        outside = peeled
    return not outside


def _check_depth_exactly(skeleton: bytes | bytearray, marks: bytes) -> None:
    """The depth check with numpy: a bracket after an odd number of quotes is inside a string."""
    m = np.frombuffer(marks, dtype=np.uint8)
    inside = (np.cumsum(m == _QUOTE, dtype=np.int8) & 1).view(bool)  # int8 wraps; parity survives
    delta = (m == _OPEN).view(np.int8) - (m == _CLOSE).view(np.int8)
    delta[inside] = 0
    depth = np.cumsum(delta, dtype=np.int32)
    if len(depth) and depth.max() > MAX_JSON_DEPTH:
        k = int(np.argmax(depth > MAX_JSON_DEPTH))
        a = np.frombuffer(skeleton, dtype=np.uint8)
        at = int(np.flatnonzero((a != _OTHER) & (a != _DIGIT))[k])  # the k-th mark's offset in the text
        raise _TextLimit(f"JSON nested deeper than MAX_JSON_DEPTH={MAX_JSON_DEPTH} levels", at)


def check_json_text(raw: bytes | bytearray) -> None:
    """Linear pre-scan of untrusted JSON text for what the ``json`` module does not bound:
    nesting depth, digits in a number, string lengths. Raises ``_TextLimit``.

    Exact for well-formed JSON. On malformed text it may place string boundaries wrongly
    only after the first byte where ``json`` itself stops with an error (a backslash outside
    a string), so ``json`` never gets deeper than the scan saw.
    """
    skeleton = _skeleton(raw)
    _check_numbers(skeleton)
    _check_strings(skeleton)
    if len(raw) > MAX_JSON_DEPTH:  # each level takes a byte: shorter text cannot nest too deeply
        _check_depth(skeleton)


def _where_in_text(raw: bytes, offset: int) -> str:
    line = raw.count(b"\n", 0, offset) + 1
    return f"at line {line} (byte {offset})"


def _dup_key(pairs) -> _PathError:
    seen: set[str] = set()
    dup = next(k for k, _ in pairs if k in seen or seen.add(k))  # type: ignore[func-returns-value]
    return _PathError(f"duplicate JSON key {_short(dup)}")


def _too_many(n: int, what: str) -> _PathError:
    return _PathError(f"{what} of {n} items exceeds MAX_JSON_ITEMS={MAX_JSON_ITEMS}", limit=True)


def _raise_as_pt2(err: _PathError, member: str | None) -> typing.NoReturn:
    path = "".join(reversed(err.parts)).lstrip(".") or "<root>"
    cls = LimitExceededError if err.limit else SchemaError
    raise cls(err.message, member=member, path=path) from None


def to_plain(v: Any, *, member: str | None = None) -> Any:
    """``parse_json_pairs`` output as plain dicts and lists (duplicate keys refused)."""
    try:
        return _plain(v)
    except _PathError as e:
        _raise_as_pt2(e, member)
    except RecursionError:
        raise LimitExceededError("JSON nested too deeply", member=member) from None


def _plain(v: Any) -> Any:
    """Parsed JSON with pair-tuples turned into dicts (for values kept as unknown fields).

    Loops rather than comprehensions so that a failure names the key or index it is under."""
    t = type(v)
    if t is tuple or t is dict:
        if len(v) > MAX_JSON_ITEMS:
            raise _too_many(len(v), "object")
        out = {}
        for k, x in (v if t is tuple else v.items()):
            try:
                out[k] = _plain(x)
            except Exception as e:
                raise _at(f".{k}" if type(k) is str and k.isidentifier() else _key_part(k), e) from None
        if len(out) != len(v):
            raise _dup_key(v)
        return out
    if t is list:
        if len(v) > MAX_JSON_ITEMS:
            raise _too_many(len(v), "list")
        out_list = []
        for i, x in enumerate(v):
            try:
                out_list.append(_plain(x))
            except Exception as e:
                raise _at(f"[{i}]", e) from None
        return out_list
    return v


def _text_of(data: bytes | bytearray | memoryview | str, member: str | None) -> tuple[bytes | bytearray, str]:
    """(UTF-8 bytes, text) of a JSON member, size-checked and scanned before ``json`` sees it."""
    if len(data) > MAX_JSON_BYTES:
        raise LimitExceededError(f"JSON of {len(data)} bytes exceeds MAX_JSON_BYTES={MAX_JSON_BYTES}", member=member)
    if isinstance(data, str):
        text = data
        raw = data.encode("utf-8", "surrogatepass")
    else:
        raw = bytearray(data)  # our own copy (the scan may reuse it), as bytes(data) was before
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise SchemaError(f"not UTF-8 text ({e.reason} at byte {e.start})", member=member) from None
    try:
        check_json_text(raw)
    except _TextLimit as e:
        raise LimitExceededError(f"{e.message} {_where_in_text(raw, e.offset)}", member=member) from None
    return raw, text


def parse_json_pairs(data: bytes | str, *, member: str | None) -> Any:
    """Parse untrusted JSON text with objects as (key, value) pair tuples, for ``decode``."""
    raw, text = _text_of(data, member)
    try:
        return json.loads(text, object_pairs_hook=tuple)
    except RecursionError:  # only from a caller already deep in the stack: depth was checked
        raise LimitExceededError("JSON nested too deeply for the caller's remaining stack", member=member) from None
    except json.JSONDecodeError as e:
        raise SchemaError(f"invalid JSON: {e.msg} at line {e.lineno} column {e.colno}", member=member) from None
    except ValueError as e:  # e.g. Python's own int-digits limit; the scan refuses those first
        raise LimitExceededError(f"JSON value refused by the parser: {_clip(str(e))}", member=member) from None


def parse_json(data: bytes | str, *, member: str) -> Any:
    """Parse untrusted JSON text into plain dicts/lists: UTF-8 only, no duplicate keys, bounded."""
    return to_plain(parse_json_pairs(data, member=member), member=member)


# ------------------------------------------------------------------ compiled decoders
#
# A decoder is ``dec(value, ctx) -> object``. Structs get straight-line generated code (one
# read, one check, one store per field, as dataclasses generate __init__) because decoding
# a large graph is on the cold-load path; everything else is a small closure.

_Decoder = Callable[[Any, _Ctx], Any]
_decoders: dict[Any, _Decoder] = {}
_encoders: dict[Any, Callable[[Any], Any]] = {}
_NONFINITE = {"Infinity": math.inf, "-Infinity": -math.inf, "NaN": math.nan}
_MISSING = object()


def _tname(v: Any) -> str:
    if v is None:
        return "null"
    if type(v) is tuple:
        return "object"
    return type(v).__name__


def _dec_int(v, ctx):
    if type(v) is not int:
        raise _PathError(f"expected int, got {_tname(v)}")
    return v


def _dec_float(v, ctx):
    t = type(v)
    if t is float:
        return v
    if t is int:
        return float(v)
    if t is str and v in _NONFINITE:
        return _NONFINITE[v]
    raise _PathError(f"expected float, got {_tname(v)}")


def _dec_str(v, ctx):
    if type(v) is not str:
        raise _PathError(f"expected str, got {_tname(v)}")
    return v


def _dec_bool(v, ctx):
    if type(v) is not bool:
        raise _PathError(f"expected bool, got {_tname(v)}")
    return v


def _as_dict(v, what: str) -> dict:
    t = type(v)
    if t is tuple:
        out = dict(v)
        if len(out) != len(v):
            raise _dup_key(v)
        return out
    if t is dict:
        return v
    raise _PathError(f"expected {what}, got {_tname(v)}")


def _decoder_for(tp) -> _Decoder:
    dec = _decoders.get(tp)
    if dec is None:
        dec = _sub(tp)
    return dec


def _sub(tp) -> _Decoder:
    if tp in _decoders:
        return _decoders[tp]
    if is_struct(tp) or is_union(tp):
        # Recursive types (Graph <-> Argument) are referenced before they are built.
        _decoders[tp] = lambda v, ctx: _decoders[tp](v, ctx)
    built = _build_decoder(tp)
    _decoders[tp] = built
    return built


def _build_decoder(tp) -> _Decoder:
    prim = {int: _dec_int, float: _dec_float, str: _dec_str, bool: _dec_bool}.get(tp)
    if prim is not None:
        return prim
    origin = typing.get_origin(tp)
    if origin is typing.Union:  # Optional[X]
        (inner,) = [a for a in typing.get_args(tp) if a is not type(None)]
        inner_dec = _sub(inner)

        def dec_optional(v, ctx):
            return None if v is None else inner_dec(v, ctx)

        return dec_optional
    if origin is list:
        (item,) = typing.get_args(tp)
        item_dec = _sub(item)

        def dec_list(v, ctx):
            if type(v) is not list:
                raise _PathError(f"expected list, got {_tname(v)}")
            if len(v) > MAX_JSON_ITEMS:
                raise _too_many(len(v), "list")
            items = iter(v)
            try:
                return [item_dec(x, ctx) for x in items]
            except Exception as e:
                # The comprehension took the failing item from ``items`` before decoding it:
                # its index is what was taken, less one. No item is decoded twice.
                raise _at(f"[{len(v) - length_hint(items) - 1}]", e) from None

        return dec_list
    if origin is dict:
        key, val = typing.get_args(tp)
        if key is not str:
            raise TypeError(f"schema dict keys must be str: {tp}")
        val_dec = _sub(val)

        def dec_dict(v, ctx):
            v = _as_dict(v, "object")
            if len(v) > MAX_JSON_ITEMS:
                raise _too_many(len(v), "object")
            out = {}
            for k, x in v.items():
                try:
                    out[k] = val_dec(x, ctx)
                except Exception as e:
                    raise _at(_key_part(k), e) from None
            return out

        return dec_dict
    if isinstance(tp, type) and issubclass(tp, SchemaEnum):
        return _enum_decoder(tp)
    if is_union(tp):
        return _union_decoder(tp)
    if is_struct(tp):
        return _struct_decoder(tp)
    raise TypeError(f"no JSON decoder for {tp!r}")


def _enum_decoder(tp: type[SchemaEnum]) -> _Decoder:
    by_value = {m.value: m for m in tp}

    def dec_enum(v, ctx):
        if type(v) is not int:
            raise _PathError(f"expected {tp.__name__} (an int), got {_tname(v)}")
        m = by_value.get(v)
        if m is None:
            raise _PathError(f"{v} is not a {tp.__name__} value (known: {sorted(by_value)})")
        return m

    return dec_enum


_RECURSIVE = {d.Graph, d.Argument}


def _enter(ctx: _Ctx) -> None:
    """One level deeper into a recursive type (Argument, Graph): bounded, whatever built ``data``."""
    ctx.depth += 1
    if ctx.depth > MAX_JSON_DEPTH:
        raise _PathError(f"schema objects nested deeper than MAX_JSON_DEPTH={MAX_JSON_DEPTH}", limit=True)


def _enter_graph(ctx: _Ctx) -> None:
    """Into a Graph: the root graph, or a subgraph nested ``ctx.graphs - 1`` deep."""
    _enter(ctx)
    ctx.graphs += 1
    if ctx.graphs > MAX_SUBGRAPH_DEPTH + 1:
        raise _PathError(f"subgraphs nested deeper than MAX_SUBGRAPH_DEPTH={MAX_SUBGRAPH_DEPTH}", limit=True)


def _leave_graph(ctx: _Ctx) -> None:
    ctx.depth -= 1
    ctx.graphs -= 1


def _graph_limits(graph: d.Graph) -> None:
    """Counts a decoded Graph may not exceed (its own nodes and values; subgraphs count on their own)."""
    od = graph.__dict__
    if len(od["nodes"]) > MAX_GRAPH_NODES:
        raise _PathError(f"graph of {len(od['nodes'])} nodes exceeds MAX_GRAPH_NODES={MAX_GRAPH_NODES}", [".nodes"], limit=True)
    values = sum(len(od[f]) for f in ("tensor_values", "sym_int_values", "sym_bool_values", "sym_float_values", "custom_obj_values"))
    if values > MAX_GRAPH_VALUES:
        raise _PathError(f"graph of {values} named values exceeds MAX_GRAPH_VALUES={MAX_GRAPH_VALUES}", limit=True)


def _keys_of(v) -> str:
    keys = [k for k, _ in v] if type(v) is tuple else list(v)
    shown = ", ".join(_short(k, 40) for k in keys[:5])
    return f"[{shown}{', ...' if len(keys) > 5 else ''}]" if keys else "none"


_ANNOTATIONS: dict[tuple[str, str], Any] = {}
"""(module, annotation text) -> the type it names, evaluated once per process."""


def _hints(tp) -> dict[str, Any]:
    """``schema.kinds.type_hints(tp)`` for the decoders, cheaper on a cold start.

    The schema's annotations are strings (``from __future__ import annotations``), and
    ``typing.get_type_hints`` compiles every one of them anew for every class (a ForwardRef
    each: ~220 compiles to build the ExportedProgram decoder). The same few dozen texts
    (``int``, ``List[Argument]``, ``Optional[str]``) are evaluated here once each, in the
    class's module, which is what ``get_type_hints`` evaluates them in for a schema class
    (no schema class shadows a module-level name). Anything else falls back to it."""
    names = tp._fields if is_union(tp) else tuple(f.name for f in fields(tp) if f.name != UNKNOWN_FIELDS)
    own = tp.__dict__.get("__annotations__", {})
    module = sys.modules.get(tp.__module__)
    if module is None or any(type(own.get(n)) is not str for n in names) or any(n in tp.__dict__ for n in ("List", "Dict", "Optional")):
        return type_hints(tp)
    out = {}
    for n in names:
        key = (tp.__module__, own[n])
        hint = _ANNOTATIONS.get(key, _MISSING)
        if hint is _MISSING:
            hint = _ANNOTATIONS[key] = eval(own[n], vars(module))  # the schema's own annotation text, never file content
        out[n] = hint
    return out


def _first_use(table: dict, key: str, tp) -> _Decoder:
    """A stand-in for ``tp``'s decoder in ``table[key]``: builds it on its first call and puts it
    there. A union's members are built when a file first holds one, so a load does not generate
    (and compile) decoders for the many members its program never uses (of the 48 struct and
    union decoders an ExportedProgram reaches, a transformer encoder uses 25)."""

    def first(v, ctx):
        real = _sub(tp)
        table[key] = real
        return real(v, ctx)

    return first


def _union_decoder(tp) -> _Decoder:
    members: dict[str, _Decoder] = {}
    for name, t in _hints(tp).items():
        members[name] = _decoders.get(t) or _first_use(members, name, t)
    name = tp.__name__
    new = tp.__new__

    def member_of(v):
        t = type(v)
        if t is tuple and len(v) == 1:
            return v[0]
        if t is dict and len(v) == 1:
            return next(iter(v.items()))
        if t is tuple or t is dict:
            raise _PathError(f"union {name} needs exactly one key, got {_keys_of(v)}")
        raise _PathError(f"expected {name} (a single-key object), got {_tname(v)}")

    def unknown(key):
        return _PathError(f"{_short(key)} is not a member of union {name} (a newer schema's?)")

    def dec_union(v, ctx):
        if type(v) is tuple and len(v) == 1:  # the common case, inline
            key, x = v[0]
        else:
            key, x = member_of(v)
        member_dec = members.get(key)
        if member_dec is None:
            raise unknown(key)
        obj = new(tp)
        od = obj.__dict__
        od["type"] = key
        try:
            od["value"] = member_dec(x, ctx)
        except Exception as e:
            raise _at(f".{key}", e) from None
        return obj

    if tp not in _RECURSIVE:
        return dec_union

    def dec_recursive_union(v, ctx):
        _enter(ctx)
        try:
            return dec_union(v, ctx)
        finally:
            ctx.depth -= 1

    return dec_recursive_union


def _unknown_fields(v: dict, names: frozenset, type_name: str, ctx: _Ctx) -> dict:
    """The fields of struct object ``v`` that pt2x's schema lacks (a newer minor's), as plain JSON; reported."""
    if len(v) > MAX_JSON_ITEMS:
        raise _too_many(len(v), f"{type_name} object")
    extra = {}
    for k, x in v.items():
        if k not in names:
            try:
                extra[k] = _plain(x)
            except Exception as e:
                raise _at(f".{_clip(k, 80)}", e) from None
    ctx.report.unknown_fields.extend(f"{type_name}.{k}" for k in extra)
    return extra


_PRIM_CHECK = {int: "type(x) is not int", str: "type(x) is not str", bool: "type(x) is not bool"}
_POST_CHECKS: dict[Any, Callable[[Any], None]] = {d.Graph: _graph_limits}
"""Checks run on a decoded struct before it is returned (counts over several of its fields)."""


def _struct_decoder(tp) -> _Decoder:
    """Generate a straight-line decoder for one struct from its annotations."""
    hints = _hints(tp)
    declared = [f for f in fields(tp) if f.name != UNKNOWN_FIELDS]
    name = tp.__name__
    env: dict[str, Any] = {
        "_cls": tp, "_new": tp.__new__, "_MISSING": _MISSING, "_PathError": _PathError, "_at": _at,
        "_tname": _tname, "_dup_key": _dup_key, "_unknown_fields": _unknown_fields, "_enter": _enter,
        "_enter_graph": _enter_graph, "_leave_graph": _leave_graph, "_post": _POST_CHECKS.get(tp),
        "_names": frozenset(hints), "_UNKNOWN": UNKNOWN_FIELDS,
    }
    recursive = tp in _RECURSIVE
    lines = [
        "def dec(v, ctx):",
        "    t = type(v)",
        "    if t is tuple:",
        "        pairs = v",
        "        v = dict(pairs)",
        "        if len(v) != len(pairs):",
        "            raise _dup_key(pairs)",
        "    elif t is not dict:",
        f"        raise _PathError(f'expected {name} (an object), got {{_tname(v)}}')",
    ]
    if recursive:
        lines += ["    _enter_graph(ctx)" if tp is d.Graph else "    _enter(ctx)", "    try:"]
    ind = "        " if recursive else "    "
    lines += [f"{ind}obj = _new(_cls)", f"{ind}od = obj.__dict__"]
    for i, f in enumerate(declared):
        fname, ftype = f.name, hints[f.name]
        lines.append(f"{ind}x = v.get({fname!r}, _MISSING)")
        lines.append(f"{ind}if x is _MISSING:")
        if f.default is not MISSING:
            env[f"_dv{i}"] = f.default
            lines.append(f"{ind}    od[{fname!r}] = _dv{i}")
        elif f.default_factory is not MISSING:
            env[f"_df{i}"] = f.default_factory
            lines.append(f"{ind}    od[{fname!r}] = _df{i}()")
        else:
            lines.append(f"{ind}    raise _PathError({name + ' is missing required field ' + repr(fname)!r})")
        check = _PRIM_CHECK.get(ftype)
        if check is not None:
            lines += [
                f"{ind}elif {check}:",
                f"{ind}    raise _at('.{fname}', _PathError('expected {ftype.__name__}, got ' + _tname(x)))",
                f"{ind}else:",
                f"{ind}    od[{fname!r}] = x",
            ]
        else:
            env[f"_d{i}"] = _sub(ftype)
            lines += [
                f"{ind}else:",
                f"{ind}    try:",
                f"{ind}        od[{fname!r}] = _d{i}(x, ctx)",
                f"{ind}    except Exception as e:",
                f"{ind}        raise _at('.{fname}', e) from None",
            ]
    lines += [
        f"{ind}if len(v) != {len(declared)} and not v.keys() <= _names:",
        f"{ind}    od[_UNKNOWN] = _unknown_fields(v, _names, {name!r}, ctx)",
        f"{ind}else:",
        f"{ind}    od[_UNKNOWN] = {{}}",
    ]
    if tp in _POST_CHECKS:
        lines.append(f"{ind}_post(obj)")
    lines.append(f"{ind}return obj")
    if recursive:
        lines += ["    finally:", "        _leave_graph(ctx)" if tp is d.Graph else "        ctx.depth -= 1"]
    exec(compile("\n".join(lines), f"<pt2x decoder for {name}>", "exec"), env)  # our own generated code, never file content
    return env["dec"]


def decode(tp, data: Any, *, member: str | None = None, report: DecodeReport | None = None):
    """Decode parsed JSON ``data`` (dicts or pair-tuples) into schema type ``tp``, in one pass.

    Any failure is a SchemaError (LimitExceededError for a limit) naming ``member`` and the
    field path, built on the way out of the failure: nothing is decoded twice to find it.
    """
    ctx = _Ctx(report if report is not None else DecodeReport())
    try:
        return _decoder_for(tp)(data, ctx)
    except _PathError as e:
        _raise_as_pt2(e, member)
    except RecursionError:
        raise LimitExceededError("schema objects nested too deeply", member=member) from None
    except Exception as e:  # the root object itself (each level below converts its own, with a path)
        _raise_as_pt2(_foreign(e), member)


def loads(tp, data: bytes | str, *, member: str, report: DecodeReport | None = None):
    """Parse untrusted JSON text and decode it as ``tp``."""
    return decode(tp, parse_json_pairs(data, member=member), member=member, report=report)


# ------------------------------------------------------------------ compiled encoders


def _enc_float(v):
    if v != v:
        return "NaN"
    if v == math.inf:
        return "Infinity"
    if v == -math.inf:
        return "-Infinity"
    return v


def _ident(v):
    return v


def _encoder_for(tp):
    enc = _encoders.get(tp)
    if enc is None:
        _encoders[tp] = lambda v: _encoders[tp](v)  # recursion placeholder
        enc = _build_encoder(tp)
        _encoders[tp] = enc
    return enc


def _build_encoder(tp):
    if tp in (int, str, bool):
        return _ident
    if tp is float:
        return _enc_float
    origin = typing.get_origin(tp)
    if origin is typing.Union:
        (inner,) = [a for a in typing.get_args(tp) if a is not type(None)]
        inner_enc = _encoder_for(inner)
        return lambda v: None if v is None else inner_enc(v)
    if origin is list:
        (item,) = typing.get_args(tp)
        item_enc = _encoder_for(item)
        if item_enc is _ident:
            return list
        return lambda v: [item_enc(x) for x in v]
    if origin is dict:
        _, val = typing.get_args(tp)
        val_enc = _encoder_for(val)
        return lambda v: {k: val_enc(x) for k, x in v.items()}
    if isinstance(tp, type) and issubclass(tp, SchemaEnum):
        return int
    if is_union(tp):
        members = {n: _encoder_for(t) for n, t in type_hints(tp).items()}
        return lambda v: {v.type: members[v.type](v.value)}
    if is_struct(tp):
        specs = [(n, _encoder_for(t)) for n, t in type_hints(tp).items()]

        def enc_struct(v):
            od = v.__dict__
            out = {n: e(od[n]) for n, e in specs}
            extra = od.get(UNKNOWN_FIELDS)
            if extra:
                out.update(extra)
            return out

        return enc_struct
    raise TypeError(f"no JSON encoder for {tp!r}")


def encode(obj) -> Any:
    """A schema object as plain JSON-able Python data, in torch's field order."""
    return _encoder_for(type(obj))(obj)


def dumps(obj) -> str:
    """JSON text for a schema object, written as ``torch.export.save`` writes it."""
    return json.dumps(encode(obj))
