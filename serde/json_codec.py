"""Strict JSON codec: JSON text <-> schema objects, compiled from the schema's annotations.

One decoder and one encoder closure per schema type, built once from
``pt2x.schema.definitions`` (no hand-written function per type). Strict means:
a union has exactly one key and it is a known member; enum values must be declared;
ints are ints (not bools), strings are strings; duplicate object keys are refused;
nesting is bounded. Fields the schema does not declare (a newer minor's additions)
are kept on the object's ``unknown_fields`` and reported in ``DecodeReport``, and the
encoder writes them back, so nothing is silently dropped.
"""

from __future__ import annotations

import json
import math
import typing
from dataclasses import MISSING, dataclass, field, fields
from typing import Any, Callable

from ..schema import definitions as d
from ..schema.kinds import UNKNOWN_FIELDS, SchemaEnum, is_struct, is_union, type_hints
from .errors import LimitExceededError, SchemaError
from .limits import MAX_JSON_BYTES, MAX_JSON_DEPTH

__all__ = ["DecodeReport", "decode", "encode", "loads", "dumps", "parse_json", "parse_json_pairs", "to_plain"]


@dataclass
class DecodeReport:
    """What decoding found but kept: fields not in pt2x's schema, by JSON path."""

    unknown_fields: list[str] = field(default_factory=list)


class _Ctx:
    __slots__ = ("depth", "report")

    def __init__(self, report: DecodeReport):
        self.depth = 0
        self.report = report


class _PathError(Exception):
    """Internal: a SchemaError under construction, collecting its path on the way out."""

    def __init__(self, message: str, parts: list[str] | None = None):
        self.message = message
        self.parts = parts or []


def _at(part: str, err: _PathError) -> _PathError:
    err.parts.append(part)
    return err


# ----------------------------------------------------------------- JSON text level
#
# Objects are parsed as tuples of (key, value) pairs (``object_pairs_hook=tuple`` runs in C),
# and the decoders, which visit every object anyway, turn them into dicts and refuse
# duplicate keys there. That is twice as fast as a Python hook that checks while parsing.


def _dup_key(pairs) -> _PathError:
    seen: set[str] = set()
    dup = next(k for k, _ in pairs if k in seen or seen.add(k))  # type: ignore[func-returns-value]
    return _PathError(f"duplicate JSON key {dup!r}")


def to_plain(v: Any) -> Any:
    """``parse_json_pairs`` output as plain dicts and lists (duplicate keys refused)."""
    try:
        return _plain(v)
    except _PathError as e:
        raise SchemaError(e.message) from None


def _plain(v: Any) -> Any:
    """Parsed JSON with pair-tuples turned into dicts (for values kept as unknown fields)."""
    t = type(v)
    if t is tuple:
        out = {k: _plain(x) for k, x in v}
        if len(out) != len(v):
            raise _dup_key(v)
        return out
    if t is list:
        return [_plain(x) for x in v]
    if t is dict:
        return {k: _plain(x) for k, x in v.items()}
    return v


def parse_json_pairs(data: bytes | str, *, member: str | None) -> Any:
    """Parse untrusted JSON text with objects as (key, value) pair tuples, for ``decode``."""
    if len(data) > MAX_JSON_BYTES:
        raise LimitExceededError(f"JSON of {len(data)} bytes exceeds {MAX_JSON_BYTES}", member=member)
    if not isinstance(data, str):
        try:
            data = bytes(data).decode("utf-8")
        except UnicodeDecodeError as e:
            raise SchemaError(f"not UTF-8 text ({e.reason} at byte {e.start})", member=member) from None
    try:
        return json.loads(data, object_pairs_hook=tuple)
    except RecursionError:
        raise LimitExceededError("JSON nested too deeply", member=member) from None
    except json.JSONDecodeError as e:
        raise SchemaError(f"invalid JSON: {e.msg} at line {e.lineno} column {e.colno}", member=member) from None


def parse_json(data: bytes | str, *, member: str) -> Any:
    """Parse untrusted JSON text into plain dicts/lists: UTF-8 only, no duplicate keys, bounded."""
    parsed = parse_json_pairs(data, member=member)
    try:
        return _plain(parsed)
    except _PathError as e:
        raise SchemaError(e.message, member=member) from None
    except RecursionError:
        raise LimitExceededError("JSON nested too deeply", member=member) from None


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
            try:
                return [item_dec(x, ctx) for x in v]
            except _PathError as e:
                i = next(i for i, x in enumerate(v) if _fails(item_dec, x, ctx))
                raise _at(f"[{i}]", e) from None

        return dec_list
    if origin is dict:
        key, val = typing.get_args(tp)
        if key is not str:
            raise TypeError(f"schema dict keys must be str: {tp}")
        val_dec = _sub(val)

        def dec_dict(v, ctx):
            out = {}
            for k, x in _as_dict(v, "object").items():
                try:
                    out[k] = val_dec(x, ctx)
                except _PathError as e:
                    raise _at(f"[{k!r}]", e) from None
            return out

        return dec_dict
    if isinstance(tp, type) and issubclass(tp, SchemaEnum):
        return _enum_decoder(tp)
    if is_union(tp):
        return _union_decoder(tp)
    if is_struct(tp):
        return _struct_decoder(tp)
    raise TypeError(f"no JSON decoder for {tp!r}")


def _fails(dec, x, ctx) -> bool:
    try:
        dec(x, ctx)
        return False
    except _PathError:
        return True


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
    ctx.depth += 1
    if ctx.depth > MAX_JSON_DEPTH:
        raise _PathError(f"nesting deeper than {MAX_JSON_DEPTH}")


def _union_decoder(tp) -> _Decoder:
    members = {name: _sub(t) for name, t in type_hints(tp).items()}
    name = tp.__name__
    new = tp.__new__

    def member_of(v):
        t = type(v)
        if t is tuple and len(v) == 1:
            return v[0]
        if t is dict and len(v) == 1:
            return next(iter(v.items()))
        if t is tuple or t is dict:
            keys = [k for k, _ in v] if t is tuple else list(v)
            raise _PathError(f"union {name} needs exactly one key, got {sorted(keys) or 'none'}")
        raise _PathError(f"expected {name} (a single-key object), got {_tname(v)}")

    def unknown(key):
        return _PathError(f"{key!r} is not a member of union {name} (a newer schema's?)")

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
        except _PathError as e:
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


_PRIM_CHECK = {int: "type(x) is not int", str: "type(x) is not str", bool: "type(x) is not bool"}


def _struct_decoder(tp) -> _Decoder:
    """Generate a straight-line decoder for one struct from its annotations."""
    hints = type_hints(tp)
    declared = [f for f in fields(tp) if f.name != UNKNOWN_FIELDS]
    name = tp.__name__
    env: dict[str, Any] = {
        "_cls": tp, "_new": tp.__new__, "_MISSING": _MISSING, "_PathError": _PathError, "_at": _at,
        "_tname": _tname, "_dup_key": _dup_key, "_plain": _plain, "_enter": _enter,
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
        lines += ["    _enter(ctx)", "    try:"]
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
                f"{ind}    except _PathError as e:",
                f"{ind}        raise _at('.{fname}', e) from None",
            ]
    lines += [
        f"{ind}if len(v) != {len(declared)} and not v.keys() <= _names:",
        f"{ind}    extra = {{k: _plain(x) for k, x in v.items() if k not in _names}}",
        f"{ind}    ctx.report.unknown_fields.extend('{name}.' + k for k in extra)",
        f"{ind}    od[_UNKNOWN] = extra",
        f"{ind}else:",
        f"{ind}    od[_UNKNOWN] = {{}}",
        f"{ind}return obj",
    ]
    if recursive:
        lines += ["    finally:", "        ctx.depth -= 1"]
    exec(compile("\n".join(lines), f"<pt2x decoder for {name}>", "exec"), env)  # our own generated code, never file content
    return env["dec"]


def decode(tp, data: Any, *, member: str | None = None, report: DecodeReport | None = None):
    """Decode parsed JSON ``data`` (dicts or pair-tuples) into schema type ``tp``; errors name ``member`` and the path."""
    ctx = _Ctx(report if report is not None else DecodeReport())
    try:
        return _decoder_for(tp)(data, ctx)
    except _PathError as e:
        path = "".join(reversed(e.parts)).lstrip(".")
        raise SchemaError(e.message, member=member, path=path or "<root>") from None
    except RecursionError:
        raise LimitExceededError("schema objects nested too deeply", member=member) from None


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
