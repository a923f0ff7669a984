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

__all__ = ["DecodeReport", "decode", "encode", "loads", "dumps", "parse_json"]


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


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict:
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen: set[str] = set()
        dup = next(k for k, _ in pairs if k in seen or seen.add(k))  # type: ignore[func-returns-value]
        raise _PathError(f"duplicate JSON key {dup!r}")
    return obj


def parse_json(data: bytes | str, *, member: str) -> Any:
    """Parse untrusted JSON text: UTF-8 only, no duplicate keys, bounded size and depth."""
    if len(data) > MAX_JSON_BYTES:
        raise LimitExceededError(f"JSON of {len(data)} bytes exceeds {MAX_JSON_BYTES}", member=member)
    if isinstance(data, (bytes, bytearray, memoryview)):
        try:
            data = bytes(data).decode("utf-8")
        except UnicodeDecodeError as e:
            raise SchemaError(f"not UTF-8 text ({e.reason} at byte {e.start})", member=member) from None
    try:
        return json.loads(data, object_pairs_hook=_no_duplicates)
    except _PathError as e:
        raise SchemaError(e.message, member=member) from None
    except RecursionError:
        raise LimitExceededError("JSON nested too deeply", member=member) from None
    except json.JSONDecodeError as e:
        raise SchemaError(f"invalid JSON: {e.msg} at line {e.lineno} column {e.colno}", member=member) from None


# ------------------------------------------------------------------ compiled decoders

_Decoder = Callable[[Any, _Ctx], Any]
_decoders: dict[Any, _Decoder] = {}
_encoders: dict[Any, Callable[[Any], Any]] = {}
_NONFINITE = {"Infinity": math.inf, "-Infinity": -math.inf, "NaN": math.nan}


def _tname(v: Any) -> str:
    return "null" if v is None else type(v).__name__


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


def _decoder_for(tp) -> _Decoder:
    dec = _decoders.get(tp)
    if dec is None:
        dec = _build_decoder(tp)
        _decoders[tp] = dec
    return dec


def _lazy(tp) -> _Decoder:
    # Recursive types (Graph <-> Argument) are referenced before they are built.
    def dec(v, ctx):
        return _decoders[tp](v, ctx)

    return dec


def _build_decoder(tp) -> _Decoder:
    if tp is int:
        return _dec_int
    if tp is float:
        return _dec_float
    if tp is str:
        return _dec_str
    if tp is bool:
        return _dec_bool
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
            out = []
            for i, x in enumerate(v):
                try:
                    out.append(item_dec(x, ctx))
                except _PathError as e:
                    raise _at(f"[{i}]", e) from None
            return out

        return dec_list
    if origin is dict:
        key, val = typing.get_args(tp)
        if key is not str:
            raise TypeError(f"schema dict keys must be str: {tp}")
        val_dec = _sub(val)

        def dec_dict(v, ctx):
            if type(v) is not dict:
                raise _PathError(f"expected object, got {_tname(v)}")
            out = {}
            for k, x in v.items():
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


def _sub(tp) -> _Decoder:
    if (is_struct(tp) or is_union(tp)) and tp not in _decoders:
        _decoders[tp] = _lazy(tp)  # placeholder breaks the recursion
        built = _build_decoder(tp)
        _decoders[tp] = built
        return built
    return _decoder_for(tp)


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


def _union_decoder(tp) -> _Decoder:
    members = {name: _sub(t) for name, t in type_hints(tp).items()}
    name = tp.__name__
    recursive = tp in _RECURSIVE

    def dec_union(v, ctx):
        if type(v) is not dict:
            raise _PathError(f"expected {name} (a single-key object), got {_tname(v)}")
        if len(v) != 1:
            raise _PathError(f"union {name} needs exactly one key, got {sorted(v) or 'none'}")
        ((key, x),) = v.items()
        member_dec = members.get(key)
        if member_dec is None:
            raise _PathError(f"{key!r} is not a member of union {name} (a newer schema's?)")
        if recursive:
            ctx.depth += 1
            if ctx.depth > MAX_JSON_DEPTH:
                raise _PathError(f"nesting deeper than {MAX_JSON_DEPTH}")
        try:
            obj = tp.__new__(tp)
            object.__setattr__(obj, "type", key)
            object.__setattr__(obj, "value", member_dec(x, ctx))
            return obj
        except _PathError as e:
            raise _at(f".{key}", e) from None
        finally:
            if recursive:
                ctx.depth -= 1

    return dec_union


def _struct_decoder(tp) -> _Decoder:
    hints = type_hints(tp)
    declared = [f for f in fields(tp) if f.name != UNKNOWN_FIELDS]
    specs = []
    for f in declared:
        if f.default is not MISSING:
            default = (lambda v=f.default: v)
        elif f.default_factory is not MISSING:
            default = f.default_factory
        else:
            default = None
        specs.append((f.name, _sub(hints[f.name]), default))
    names = frozenset(hints)
    name = tp.__name__
    recursive = tp in _RECURSIVE

    def dec_struct(v, ctx):
        if type(v) is not dict:
            raise _PathError(f"expected {name} (an object), got {_tname(v)}")
        if recursive:
            ctx.depth += 1
            if ctx.depth > MAX_JSON_DEPTH:
                raise _PathError(f"nesting deeper than {MAX_JSON_DEPTH}")
        obj = tp.__new__(tp)
        od = obj.__dict__
        try:
            for fname, fdec, default in specs:
                if fname in v:
                    try:
                        od[fname] = fdec(v[fname], ctx)
                    except _PathError as e:
                        raise _at(f".{fname}", e) from None
                elif default is not None:
                    od[fname] = default()
                else:
                    raise _PathError(f"{name} is missing required field {fname!r}")
        finally:
            if recursive:
                ctx.depth -= 1
        extra = {k: x for k, x in v.items() if k not in names} if len(v) > len(od) else {}
        od[UNKNOWN_FIELDS] = extra
        if extra:
            ctx.report.unknown_fields.extend(f"{name}.{k}" for k in extra)
        return obj

    return dec_struct


def decode(tp, data: Any, *, member: str | None = None, report: DecodeReport | None = None):
    """Decode parsed JSON ``data`` into schema type ``tp``; errors name ``member`` and the path."""
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
    return decode(tp, parse_json(data, member=member), member=member, report=report)


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
