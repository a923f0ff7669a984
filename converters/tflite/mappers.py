"""The ONNX op -> TFLite builtins table: ``MAPPERS[op_type](em, node)``, filled by the
``ops_*`` modules with ``@maps("Add", ...)``. A mapper emits through ``emit.Emitter`` and
raises ``Unsupported`` (naming what it cannot express) rather than guess."""

from __future__ import annotations

__all__ = ["MAPPERS", "maps"]

MAPPERS: dict = {}


def maps(*op_types: str):
    def register(fn):
        for t in op_types:
            MAPPERS[t] = fn
        return fn

    return register
