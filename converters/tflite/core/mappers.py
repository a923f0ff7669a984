"""The ONNX op -> TFLite builtins table: ``MAPPERS[op_type](em, node)``, filled by the
modules of the ``ops`` package with ``@maps("Add", ...)``. A mapper emits through ``emit.Emitter`` and
raises ``Unsupported`` (naming what it cannot express) rather than guess.

An op type has one mapper: registering a second raises ``ValueError`` naming both.
Every registered mapper runs behind ``op_attributes.check_attributes``: a node with an attribute
or value its mapper does not declare (``op_attributes.ATTRIBUTES``) is ``Unsupported`` before
the mapper reads it."""

from __future__ import annotations

import functools

from ..core.op_attributes import check_attributes

__all__ = ["MAPPERS", "maps"]

MAPPERS: dict = {}


def maps(*op_types: str):
    def register(fn):
        @functools.wraps(fn)
        def checked(em, node):
            check_attributes(node)
            return fn(em, node)

        for t in op_types:
            if t in MAPPERS:
                was = MAPPERS[t].__wrapped__
                raise ValueError(f"ONNX {t} already has a TFLite mapper ({was.__module__}.{was.__qualname__}); "
                                 f"{fn.__module__}.{fn.__qualname__} would replace it")
            MAPPERS[t] = checked
        return fn

    return register
