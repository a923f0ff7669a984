"""Tensors seen with another shape inside a lowering: ``reshaped`` (a view of the same elements: no
instruction when static, ``view_copy.out`` with its dims' run-time values when dynamic) and
``expanded`` (``expand_copy.out`` to a broadcast shape). Shapes are lists of dims as the program's
metadata holds them: ints, or expressions of shape symbols (``product`` multiplies them)."""

from __future__ import annotations

import math

from ...serde.codec.symbolic import Integer, Mul
from .dtypes import schema_dtype

__all__ = ["product", "reshaped", "reshape_into", "expanded", "is_static"]


def is_static(shape) -> bool:
    return all(isinstance(s, (int, Integer)) for s in shape)


def product(dims):
    """The product of ``dims``: an int when every dim is static, else an expression."""
    const = math.prod(int(s) if isinstance(s, Integer) else s for s in dims if isinstance(s, (int, Integer)))
    symbolic = [s for s in dims if not isinstance(s, (int, Integer))]
    if not symbolic:
        return const
    if len(symbolic) == 1 and const == 1:
        return symbolic[0]
    return Mul(((Integer(const),) if const != 1 else ()) + tuple(symbolic))


def reshaped(ctx, x, shape, base: str):
    """``x`` (a ``TensorValue``) seen as ``shape`` (the same number of elements)."""
    sizes, dynamic = ctx.dims(shape, base)
    dtype = schema_dtype(x.scalar_type)
    if not dynamic and not x.dynamic:
        v = ctx.scratch_sized(base, sizes, dynamic=False, dtype=dtype)
        v.alias_of = x
        return v
    return ctx.call("view_copy.out", {"self": x, "size": [ctx.size_value(s) for s in shape]},
                    [ctx.scratch_sized(base, sizes, dynamic=True, dtype=dtype)])


def reshape_into(ctx, src, out, shape) -> None:
    """``out`` (a new tensor of ``shape``) holds ``src``'s elements: it is a view of ``src`` when
    both are static, else ``view_copy.out`` writes it."""
    if not out.dynamic and not src.dynamic:
        out.alias_of = src
        return
    ctx.call("view_copy.out", {"self": src, "size": [ctx.size_value(s) for s in shape]}, [out])


def expanded(ctx, x, shape, base: str):
    """``x`` broadcast to ``shape`` (``expand_copy.out``, its sizes' run-time values)."""
    sizes, dynamic = ctx.dims(shape, base)
    return ctx.call("expand_copy.out", {"self": x, "size": [ctx.size_value(s) for s in shape]},
                    [ctx.scratch_sized(base, sizes, dynamic=dynamic or x.dynamic, dtype=schema_dtype(x.scalar_type))])
