"""The lowering registry: backend -> ATen overload -> function.

Keys are targets as ``Node.target`` spells them, without the ``torch.ops.`` prefix:
``aten.add.Tensor``, ``higher_order.cond``, ``_operator.mul``, ``my_lib.my_op.default``.
Each backend decides the signature of its lowerings (ONNX: ``fn(ctx, node)``; see the
backend's README section). Register your own for a custom operator::

    from pt2x.converters.registry import lowering

    @lowering("onnx", "my_lib.my_op.default")
    def _(ctx, node):
        ...

A backend imports its own op modules before it looks anything up, and user
registrations made before or after that win over nothing silently: registering a target
twice raises unless ``override=True``.
"""

from __future__ import annotations

from typing import Callable

__all__ = ["canonical", "lowering", "register", "unregister", "get", "targets"]

_TABLES: dict[str, dict[str, Callable]] = {}


def canonical(target: str) -> str:
    """``torch.ops.aten.add.Tensor`` -> ``aten.add.Tensor``; other spellings unchanged."""
    return target[len("torch.ops."):] if target.startswith("torch.ops.") else target


def register(backend: str, target: str, fn: Callable, *, override: bool = False) -> Callable:
    table = _TABLES.setdefault(backend, {})
    key = canonical(target)
    if key in table and not override and table[key] is not fn:
        raise ValueError(f"{backend}: {key} already has a lowering ({table[key].__module__}."
                         f"{table[key].__qualname__}); pass override=True to replace it")
    table[key] = fn
    return fn


def lowering(backend: str, *targets: str, override: bool = False) -> Callable[[Callable], Callable]:
    """Decorator: register the function as the lowering of each of ``targets``."""

    def deco(fn: Callable) -> Callable:
        for t in targets:
            register(backend, t, fn, override=override)
        return fn

    return deco


def unregister(backend: str, target: str) -> None:
    _TABLES.get(backend, {}).pop(canonical(target), None)


def get(backend: str, target: str) -> Callable | None:
    return _TABLES.get(backend, {}).get(canonical(target))


def targets(backend: str) -> list[str]:
    return sorted(_TABLES.get(backend, {}))
