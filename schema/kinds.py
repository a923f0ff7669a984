"""The three kinds of schema type — struct, union, enum — as Python building blocks.

Kept apart from ``definitions.py`` so that file reads as a spec. A struct is a dataclass;
a union is a dataclass-like class whose instances hold exactly one of its declared
fields (JSON: a single-key object); an enum is an ``IntEnum`` (JSON: an int).
"""

from __future__ import annotations

import dataclasses
import enum
import typing
from typing import Any, ClassVar

__all__ = ["struct", "union", "SchemaEnum", "Union", "UNKNOWN_FIELDS", "is_struct", "is_union"]

# Name of the per-object dict that keeps fields a newer minor version added. It is
# not part of equality or repr, and the JSON codec writes it back unchanged.
UNKNOWN_FIELDS = "unknown_fields"


class SchemaEnum(enum.IntEnum):
    """Base of every schema enum: serialized as its integer value."""


def _struct_eq(self, other):
    if type(other) is not type(self):
        return NotImplemented
    a, b = self.__dict__, other.__dict__
    return all(a[k] == b[k] for k in self.__field_names__)


def _struct_repr(self):
    args = ", ".join(f"{k}={self.__dict__[k]!r}" for k in self.__field_names__)
    return f"{type(self).__name__}({args})"


def struct(cls):
    """Declare a schema struct: a dataclass plus a slot for unknown (newer) fields.

    ``__eq__`` and ``__repr__`` are shared functions rather than generated per class:
    importing the schema is on the torch-free loader's cold path.
    """
    cls.__annotations__ = dict(cls.__annotations__)
    cls.__annotations__[UNKNOWN_FIELDS] = "dict"
    setattr(
        cls,
        UNKNOWN_FIELDS,
        dataclasses.field(default_factory=dict, kw_only=True, repr=False, compare=False),
    )
    cls = dataclasses.dataclass(cls, eq=False, repr=False)
    cls.__field_names__ = tuple(f.name for f in dataclasses.fields(cls) if f.name != UNKNOWN_FIELDS)
    cls.__eq__ = _struct_eq
    cls.__hash__ = None
    cls.__repr__ = _struct_repr
    cls.__schema_kind__ = "struct"
    return cls


class Union:
    """Base of every schema union. Construct with exactly one keyword: ``Argument(as_int=3)``.

    ``.type`` is the chosen field's name and ``.value`` its value. Reading any other
    declared field raises ``AttributeError``.
    """

    __schema_kind__: ClassVar[str] = "union"
    _fields: ClassVar[tuple[str, ...]] = ()

    def __init_subclass__(cls, **kw):
        super().__init_subclass__(**kw)
        cls._fields = tuple(k for k in cls.__dict__.get("__annotations__", {}))
        cls._field_set = frozenset(cls._fields)

    def __init__(self, **kw: Any):
        if len(kw) != 1:
            raise TypeError(f"{type(self).__name__} takes exactly one field, got {sorted(kw)}")
        ((name, value),) = kw.items()
        if name not in self._field_set:
            raise TypeError(f"{type(self).__name__} has no field {name!r}")
        object.__setattr__(self, "type", name)
        object.__setattr__(self, "value", value)

    def __getattr__(self, name: str) -> Any:
        if name in type(self)._field_set:
            if name == object.__getattribute__(self, "type"):
                return object.__getattribute__(self, "value")
            raise AttributeError(f"{type(self).__name__}.{name} is not set (it holds {self.type})")
        raise AttributeError(name)

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and other.type == self.type and other.value == self.value

    def __hash__(self):
        return hash(_hash_key(self))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.type}={self.value!r})"


def _hash_key(v):
    """A hashable stand-in for a schema value, built in one pass (each part visited once):
    unions and structs by type and contents, lists as tuples, dicts as sorted item tuples.
    Equal values (``__eq__``) give equal keys, so the hash agrees with equality."""
    if isinstance(v, Union):
        return (type(v).__name__, v.type, _hash_key(v.value))
    if is_struct(type(v)):
        return (type(v).__name__,) + tuple(_hash_key(v.__dict__[k]) for k in v.__field_names__)
    if isinstance(v, list):
        return tuple(_hash_key(x) for x in v)
    if isinstance(v, dict):
        return tuple(sorted((k, _hash_key(x)) for k, x in v.items()))
    return v


def union(cls):
    """Mark a ``Union`` subclass declaration (symmetry with ``@struct``; no runtime change)."""
    if not issubclass(cls, Union):
        raise TypeError(f"{cls.__name__} must subclass schema.kinds.Union")
    return cls


def is_struct(tp) -> bool:
    return getattr(tp, "__schema_kind__", None) == "struct"


def is_union(tp) -> bool:
    return isinstance(tp, type) and issubclass(tp, Union)


def type_hints(cls) -> dict[str, Any]:
    """Resolved annotations of a schema type, in declaration order, without the extras slot."""
    hints = typing.get_type_hints(cls)
    if is_union(cls):
        return {k: hints[k] for k in cls._fields}
    return {f.name: hints[f.name] for f in dataclasses.fields(cls) if f.name != UNKNOWN_FIELDS}
