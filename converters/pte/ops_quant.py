"""PT2E quantization (``quantized_decomposed``) on the portable kernels: torch's own formulas,
op for op, in kernels the runtime has.

executorch 1.5.1's Python runtime registers no quantized kernels (its operator list holds
``aten::``, ``executorch_prim::`` and ``dim_order_ops::`` only), so a quantize or dequantize is
written as the arithmetic torch's reference kernels do (``torch/ao/quantization/fx/_decomposed.py``):

* ``quantize_per_tensor``: ``clamp(round(x * (1.0 / scale)) + zero_point, quant_min, quant_max)``
  cast to the quantized dtype: ``mul.Scalar_out`` (the inverse scale computed in double, as
  torch's Python does, and applied to the float32 tensor in float32), ``round.out`` (half to
  even, as ``torch.round``), ``add.Scalar_out``, ``clamp.out``, ``_to_dim_order_copy.out``;
* ``dequantize_per_tensor``: ``(float32(q) - zero_point) * scale``: ``_to_dim_order_copy.out``,
  ``sub.Scalar_out``, ``mul.Scalar_out``;
* ``dequantize_per_channel`` (PT2E's folded weights: int8 constant, float32 or float64 scales,
  int64 zero points along ``axis``): ``float32((q - zero_points) * scales)``, the zero points and
  scales viewed to broadcast along ``axis``: ``sub.out`` (int64), ``mul.out`` (in the scales'
  dtype, as torch promotes), ``_to_dim_order_copy.out`` from float64: the rounding torch does.

The program runs the same float ops between them as torch's quantized module does (the
simulation PT2E's reference is), not integer kernels: those come with the XNNPACK delegate.
Each lowering also records a ``program.QuantOp`` in the plan (``Plan.quant_ops``): what it was
and which calls it wrote, for the XNNPACK delegate's int8 folding. Refused by name: a scale or zero point computed at run time (``.tensor``/``.tensor2``, dynamic
quantization), a per-channel quantize of a run-time tensor, an ``out_dtype`` other than float32,
a quantized dtype other than int8/uint8 or bounds outside it.
"""

from __future__ import annotations

from ...schema import definitions as d
from ..aten.args import TensorRef, bind
from ..aten.registry import lowering
from ..errors import Unsupported
from .program import QuantOp, TensorValue

_RANGES = {d.ScalarType.CHAR: (-128, 127), d.ScalarType.BYTE: (0, 255)}


def _qdtype(a) -> d.ScalarType:
    st = a.dtype
    if st not in _RANGES:
        raise Unsupported(f"quantized dtype {getattr(st, 'name', st)}: int8 and uint8 are converted")
    lo, hi = _RANGES[st]
    if not (isinstance(a.quant_min, int) and isinstance(a.quant_max, int) and lo <= a.quant_min <= a.quant_max <= hi):
        raise Unsupported(f"quant_min={a.quant_min!r}, quant_max={a.quant_max!r} outside {st.name}'s range [{lo}, {hi}]")
    return st


def _literal(x, what: str, kind):
    if isinstance(x, TensorRef) or not isinstance(x, kind) or isinstance(x, bool):
        raise Unsupported(f"{what} computed at run time or not a {kind.__name__}: not converted")
    return x


def _float_out(a) -> None:
    out_dtype = a.get("out_dtype")
    if out_dtype not in (None, d.ScalarType.FLOAT):
        raise Unsupported(f"dequantize to {out_dtype.name}: float32 is converted")


@lowering("pte", "quantized_decomposed.quantize_per_tensor.default")
def quantize_per_tensor(ctx, node):
    a = bind(node)
    st = _qdtype(a)
    scale = float(_literal(a.scale, "scale", (int, float)))
    zero_point = _literal(a.zero_point, "zero_point", int)
    shape = ctx.view.tensor(a.input.name).shape
    f32 = d.ScalarType.FLOAT
    first = len(ctx.plan.calls)
    scaled = ctx.call("mul.Scalar_out", {"self": a.input, "other": 1.0 / scale}, [ctx.scratch("scaled", shape, f32)])
    rounded = ctx.call("round.out", {"self": scaled}, [ctx.scratch("rounded", shape, f32)])
    shifted = ctx.call("add.Scalar_out", {"self": rounded, "other": zero_point}, [ctx.scratch("shifted", shape, f32)])
    clamped = ctx.call("clamp.out", {"self": shifted, "min": a.quant_min, "max": a.quant_max},
                       [ctx.scratch("clamped", shape, f32)])
    out = ctx.output(node)
    if ctx.view.tensor(node.outputs[0].value.name).dtype != st:
        raise Unsupported("quantize whose output dtype is not its dtype argument")
    ctx.call("dim_order_ops::_to_dim_order_copy.out", {"self": clamped, "dim_order": _order(shape)}, [out])
    _record(ctx, "quantize_per_tensor", a.input, out, scale, zero_point, a, first)
    return out.name


@lowering("pte", "quantized_decomposed.dequantize_per_tensor.default")
def dequantize_per_tensor(ctx, node):
    a = bind(node)
    _qdtype(a)
    _float_out(a)
    scale = float(_literal(a.scale, "scale", (int, float)))
    zero_point = _literal(a.zero_point, "zero_point", int)
    shape = ctx.view.tensor(a.input.name).shape
    f32 = d.ScalarType.FLOAT
    first = len(ctx.plan.calls)
    as_float = ctx.call("dim_order_ops::_to_dim_order_copy.out", {"self": a.input, "dim_order": _order(shape)},
                        [ctx.scratch("as_float", shape, f32)])
    centred = ctx.call("sub.Scalar_out", {"self": as_float, "other": zero_point}, [ctx.scratch("centred", shape, f32)])
    out = ctx.call("mul.Scalar_out", {"self": centred, "other": scale}, [ctx.output(node)])
    _record(ctx, "dequantize_per_tensor", a.input, out, scale, zero_point, a, first)
    return out.name


@lowering("pte", "quantized_decomposed.dequantize_per_channel.default")
def dequantize_per_channel(ctx, node):
    a = bind(node)
    _qdtype(a)
    _float_out(a)
    info = ctx.view.tensor(a.input.name)
    rank = info.rank
    axis = a.axis % rank if rank else 0
    shape = info.shape
    along = [1] * rank
    along[axis] = shape[axis]
    first = len(ctx.plan.calls)
    scales = _constant_along(ctx, a.scales, along, "scales", (d.ScalarType.FLOAT, d.ScalarType.DOUBLE))
    q = ctx.tensor(a.input)
    if a.zero_points is not None:
        zps = _constant_along(ctx, a.zero_points, along, "zero_points", (d.ScalarType.LONG,))
        q = ctx.call("sub.out", {"self": q, "other": zps}, [ctx.scratch("centred", shape, d.ScalarType.LONG)])
    if ctx.view.tensor(a.scales.name).dtype == d.ScalarType.FLOAT:
        out = ctx.call("mul.out", {"self": q, "other": scales}, [ctx.output(node)])
    else:
        wide = ctx.call("mul.out", {"self": q, "other": scales},
                        [ctx.scratch("dequantized", shape, d.ScalarType.DOUBLE)])
        out = ctx.call("dim_order_ops::_to_dim_order_copy.out", {"self": wide, "dim_order": _order(shape)},
                       [ctx.output(node)])
    zero_points = a.zero_points.name if a.zero_points is not None else None
    _record(ctx, "dequantize_per_channel", a.input, out, a.scales.name, zero_points, a, first, axis=axis)
    return out.name


def _record(ctx, kind: str, source, result: TensorValue, scale, zero_point, a, first: int, axis=None) -> None:
    """What the calls from ``first`` on were, for a later stage (``program.QuantOp``)."""
    ctx.plan.quant_ops.append(QuantOp(kind, ctx.tensor(source), result, scale, zero_point, a.quant_min, a.quant_max,
                                      ctx.plan.calls[first:], axis))


def _constant_along(ctx, ref, sizes: list, what: str, dtypes: tuple) -> TensorValue:
    """A 1-D constant of per-channel parameters viewed as ``sizes`` (its length along the axis)."""
    if not isinstance(ref, TensorRef) or ref.name not in ctx.view.weights:
        raise Unsupported(f"per-channel {what} computed at run time: not converted")
    info = ctx.view.tensor(ref.name)
    if info.dtype not in dtypes or info.rank != 1:
        raise Unsupported(f"per-channel {what} of dtype {info.dtype.name} and rank {info.rank} "
                          f"(PT2E writes {' or '.join(t.name for t in dtypes)}, 1-D)")
    return ctx.constant_view(ref.name, tuple(sizes))


def _order(shape) -> list[int]:
    return list(range(len(shape)))
