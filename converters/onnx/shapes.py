"""Shape helpers shared by the shape/nn lowerings: target shapes as ONNX tensors with as
little runtime shape arithmetic as possible."""

from __future__ import annotations

import numpy as np

from ..aten import dtypes
from ..aten.dtypes import ST

INT64_MAX = 2**63 - 1


def reshape_target(ctx, x, sizes, out_shape) -> str:
    """The ``shape`` input of ``Reshape(x, ...)``: dims equal to the input's dim at the same
    position become 0 (copy), one remaining unknown becomes -1, the rest are computed."""
    in_shape = ctx.info(x).shape
    vals = []
    for i, s in enumerate(sizes):
        if isinstance(s, int):
            vals.append(s)
        elif i < len(out_shape) and isinstance(out_shape[i], int):
            vals.append(out_shape[i])
        elif i < len(in_shape) and i < len(out_shape) and in_shape[i] == out_shape[i]:
            vals.append(0)
        else:
            vals.append(s)
    dyn = [i for i, v in enumerate(vals) if not isinstance(v, int)]
    if len(dyn) == 1 and -1 not in vals:
        vals[dyn[0]] = -1
    return ctx.ints(vals)


def axes_const(ctx, axes) -> str:
    return ctx.const(np.asarray(list(axes), np.int64).reshape(-1), ST.LONG)


def one_d(ctx, name: str, ref) -> str:
    """``name`` (the value of ``ref``) as shape [1] when ``ref`` is 0-d: torch reads a 0-d tensor as
    one element along dim 0 (or -1), ONNX's ops with an axis (Softmax, TopK, ArgMax, CumSum, ...)
    need rank >= 1. ``zero_d`` takes a result back to 0-d."""
    return ctx.op("Reshape", name, ctx.ints([1])) if ctx.rank(ref) == 0 else name


def zero_d(ctx, name: str, ref) -> str:
    """``name`` as a 0-d value when ``ref`` (the op's input) is 0-d (see ``one_d``)."""
    return ctx.op("Reshape", name, ctx.ints([])) if ctx.rank(ref) == 0 else name


def scalar_attr(v, st):
    """A one-element tensor attribute (``ConstantOfShape``'s ``value``)."""
    from onnx import helper

    from .context import onnx_type

    arr = np.asarray([v]).astype(dtypes.to_numpy(st))
    return helper.make_tensor("value", onnx_type(st), [1], arr.tobytes(), raw=True)


def per_axis(v, n: int) -> list:
    """A window argument (kernel, stride, padding, dilation) as one value per axis of ``n``: an int
    or a one-element list repeated, a longer list as it is."""
    if isinstance(v, int):
        return [v] * n
    v = list(v)
    return v * n if len(v) == 1 else v
