"""PT2E quantization: ``quantized_decomposed`` quantize/dequantize as QuantizeLinear/DequantizeLinear.

torch's kernels (``torch/ao/quantization/fx/_decomposed.py``) and what ONNX does with them:

* dequantize: ``(float32(q) - zp) * scale`` in float32 (a per-channel ``zero_points`` tensor is
  int64, the difference exact; float32 ``scales``). DequantizeLinear computes the same, so it is
  exact. ``quant_min``/``quant_max`` are metadata there (unused by torch), checked only against
  the dtype's range as torch does.
* quantize: ``clamp(round_half_even(x * float32(1.0 / scale)) + zp, quant_min, quant_max)``.
  QuantizeLinear divides: ``saturate(round_half_even(x / scale) + zp)``. ``x * (1/s)`` and
  ``x / s`` round differently for some ``x``; where ``x / s`` lies within a float32 rounding of a
  ``.5`` tie the two pick neighbouring integers: **one quantization step, at ties only** (the
  tolerance the tests state). Kept anyway: a QDQ model is what ONNX Runtime and TensorRT fuse into
  integer kernels, which then differ from torch by their own requantization (again at most one step
  per quantize). A quantize of a *constant* (``quantize_per_channel`` of a weight, when
  ``convert_pt2e(fold_quantize=False)``) is folded here with torch's own formula (float32 input,
  the scales' dtype for ``1/scale``), so weights are exact.
* ``quant_min``/``quant_max`` narrower than the dtype (int8 weights at -127..127, reduce_range's
  0..127): QuantizeLinear saturates to the dtype's range, so a ``Clip`` to [quant_min, quant_max]
  follows it; clamping twice equals torch's one clamp, so it is exact.

int8 and uint8 only (QuantizeLinear-13's types; int16/uint16 need opset 21 and torch's PT2E flow
does not write them here); zero points are stored in the quantized dtype and refused when they do
not fit it (torch computes with the int64 value; ONNX cannot). Per-channel needs opset 13.

Dynamic quantization: ``choose_qparams.tensor`` / ``choose_qparams_symmetric.tensor`` are torch's
``determine_qparams`` written out in ONNX float32 ops (exact: see ``choose_qparams``; not ONNX's
DynamicQuantizeLinear, which is uint8 only and has no ``eps``); the quantize reading their zero
point takes it at run time, the only run-time zero point accepted (its clamp keeps it in range).

Refused by name: other zero points or ``.tensor2`` bounds computed at run time, scales of another
dtype than float32 on per-channel ops, ``out_dtype`` other than float32, and torchao's block-wise
``quantize_affine``/``dequantize_affine``/``choose_qparams_affine`` (torchao's PT2E
``convert_pt2e`` writes ``quantized_decomposed`` ops).
"""

from __future__ import annotations

import numpy as np

from ..aten.args import bind, decode
from ..aten.dtypes import ST, to_numpy
from ..aten.registry import lowering
from ..errors import Unsupported

QDQ_TYPES = {ST.BYTE: (0, 255), ST.CHAR: (-128, 127)}
"""Quantized dtypes QuantizeLinear/DequantizeLinear-13 hold, with their ranges."""
MIN_PER_AXIS_OPSET = 13


# ------------------------------------------------------------------ arguments


def _qdtype(dtype) -> ST:
    st = ST(dtype)
    if st not in QDQ_TYPES:
        raise Unsupported(f"quantized dtype {st.name}: QuantizeLinear/DequantizeLinear here hold uint8 or int8")
    return st


def _bounds(ctx, a, st: ST) -> tuple[int, int]:
    """quant_min/quant_max (literals, or constant tensors for ``.tensor2``), within ``st``'s range."""
    lo, hi = (_const_int(ctx, a.quant_min, "quant_min"), _const_int(ctx, a.quant_max, "quant_max"))
    tmin, tmax = QDQ_TYPES[st]
    if not tmin <= lo <= hi <= tmax:
        raise Unsupported(f"quant_min={lo}, quant_max={hi} outside {st.name}'s range [{tmin}, {tmax}] or empty")
    return lo, hi


def _const_int(ctx, ref, what: str) -> int:
    if isinstance(ref, (bool, float)):
        raise Unsupported(f"{what} {ref!r} is not an integer")
    if isinstance(ref, int):
        return ref
    v = ctx.value_of(ref)
    if v is None or v.size != 1 or v.dtype.kind not in "iu":
        raise Unsupported(f"{what} computed at run time or not one integer")
    return int(v.reshape(()))


def _zero_points(ctx, ref, st: ST, per_axis: bool) -> str | None:
    """The zero point(s) as a constant of the quantized dtype; None when absent."""
    if ref is None:
        return None
    v = np.asarray(ref) if isinstance(ref, int) else ctx.value_of(ref)
    if v is None:
        return _chosen_zero_point(ctx, ref, st, per_axis)
    if v.dtype.kind not in "iu":
        raise Unsupported(f"zero point of dtype {v.dtype}, not an integer")
    tmin, tmax = QDQ_TYPES[st]
    if v.size and (v.min() < tmin or v.max() > tmax):
        raise Unsupported(f"zero point outside {st.name}'s range [{tmin}, {tmax}] "
                          f"({int(v.min())}..{int(v.max())}): ONNX stores it in the quantized dtype")
    if not per_axis and v.size != 1:
        raise Unsupported(f"per-tensor zero point with {v.size} elements")
    arr = v.astype(to_numpy(st))
    return ctx.const(arr.reshape(-1) if per_axis else arr.reshape(()), st)


def _chosen_zero_point(ctx, ref, st: ST, per_axis: bool) -> str:
    """A run-time zero point is taken only from ``choose_qparams`` whose clamp keeps it inside
    ``st``'s range, so the Cast from int64 is exact."""
    producer = ctx.view.producer.get(getattr(ref, "name", None))
    target = str(getattr(producer, "target", ""))
    if per_axis or not target.endswith(CHOOSE_QPARAMS):
        raise Unsupported("zero point computed at run time (its range cannot be checked against "
                          f"{st.name}; a Cast would wrap)")
    # the producer's own lowering has checked its arguments against its schema
    given = {na.name: decode(na.arg) for na in producer.inputs}
    lo, hi = given.get("quant_min"), given.get("quant_max")
    tmin, tmax = QDQ_TYPES[st]
    if not (isinstance(lo, int) and isinstance(hi, int) and tmin <= lo <= hi <= tmax):
        raise Unsupported(f"zero point from {producer.name} clamped to [{lo}, {hi}], outside {st.name}'s range")
    return ctx.cast(ctx.op("Reshape", ctx.t(ref), ctx.const(np.zeros(0, np.int64), ST.LONG)), ST.LONG, st)


def _scale(ctx, ref, per_axis: bool) -> str:
    """The scale(s) as float32: a literal, or a tensor (cast from float64 for ``.tensor``, as
    torch's ``scale.item()`` multiplies in float32)."""
    if isinstance(ref, (int, float)):
        return ctx.const(np.float32(ref), ST.FLOAT)
    st = ctx.dtype(ref)
    v = ctx.value_of(ref)
    if v is not None and (st == ST.FLOAT or not per_axis):  # a constant: an initializer ORT sees as one
        if not per_axis and v.size != 1:
            raise Unsupported(f"per-tensor scale with {v.size} elements")
        return ctx.const(v.astype(np.float32).reshape(-1 if per_axis else ()), ST.FLOAT)
    if per_axis and st != ST.FLOAT:
        raise Unsupported(f"per-channel scales of dtype {st.name} (torch computes in it; ONNX in float32)")
    if st not in (ST.FLOAT, ST.DOUBLE):
        raise Unsupported(f"scale of dtype {st.name}")
    if not per_axis and ctx.info(ref).rank > 0:
        return ctx.op("Reshape", ctx.t(ref, ST.FLOAT), ctx.const(np.zeros(0, np.int64), ST.LONG))
    return ctx.t(ref, ST.FLOAT)


def _axis(ctx, a, ref) -> int:
    if ctx.opset < MIN_PER_AXIS_OPSET:
        raise Unsupported(f"per-channel QuantizeLinear/DequantizeLinear need opset {MIN_PER_AXIS_OPSET} "
                          f"(asked for {ctx.opset})")
    rank = ctx.rank(ref)
    if not -rank <= a.axis < rank:
        raise Unsupported(f"axis {a.axis} of a rank-{rank} tensor")
    return a.axis % rank


def _float_input(ctx, ref) -> str:
    st = ctx.dtype(ref)
    if st not in (ST.FLOAT, ST.HALF, ST.BFLOAT16):
        raise Unsupported(f"quantize of a {st.name} tensor (torch takes float32, float16, bfloat16)")
    return ctx.t(ref, ST.FLOAT)


def _out_dtype(a) -> None:
    out = a.get("out_dtype")
    if out is not None and ST(out) != ST.FLOAT:
        raise Unsupported(f"dequantize with out_dtype={ST(out).name} (float32 only)")


def _clip(ctx, q: str, st: ST, lo: int, hi: int) -> str:
    """QuantizeLinear saturates to ``st``'s range; torch clamps to [lo, hi]."""
    if (lo, hi) == QDQ_TYPES[st]:
        return q
    np_t = to_numpy(st)
    return ctx.op("Clip", q, ctx.const(np_t.type(lo), st), ctx.const(np_t.type(hi), st))


# ------------------------------------------------------------------ lowerings


def _quantize(ctx, a, scale_ref, zp_ref, per_axis: bool):
    st = _qdtype(a.dtype)
    lo, hi = _bounds(ctx, a, st)
    axis = _axis(ctx, a, a.input) if per_axis else None
    folded = _fold_constant_quantize(ctx, a.input, scale_ref, zp_ref, axis, lo, hi, st)
    if folded is not None:
        return folded
    q = ctx.op("QuantizeLinear", _float_input(ctx, a.input), _scale(ctx, scale_ref, per_axis),
               _zero_points(ctx, zp_ref, st, per_axis), axis=axis)
    return _clip(ctx, q, st, lo, hi)


def _fold_constant_quantize(ctx, x_ref, scale_ref, zp_ref, axis, lo, hi, st: ST) -> str | None:
    """torch's quantize of a constant, computed here as torch does (exact int8 weights)."""
    x = ctx.foldable(x_ref)
    scale = np.asarray(scale_ref) if isinstance(scale_ref, (int, float)) else ctx.value_of(scale_ref)
    zp = np.asarray(zp_ref) if isinstance(zp_ref, int) else ctx.value_of(zp_ref)
    if x is None or scale is None or zp is None or x.dtype != np.float32:
        return None
    if axis is None:  # python float scale: float32(1.0 / scale) multiplies the float32 input
        inv = np.float32(1.0 / float(np.asarray(scale, np.float64).reshape(())))
        zp_b = np.asarray(zp).reshape(())
    else:  # tensor scales: 1.0 / scales and the product in the scales' dtype (promotion)
        shape = [1] * x.ndim
        shape[axis] = -1
        inv = (1.0 / scale).astype(scale.dtype).reshape(shape)
        zp_b = zp.reshape(shape)
    scaled = np.round(x * inv)  # np.round: half to even, as torch.round
    q = np.clip(scaled + zp_b.astype(scaled.dtype), lo, hi)
    return ctx.const_array(q.astype(to_numpy(st)), name="quantized")


def _dequantize(ctx, a, scale_ref, zp_ref, per_axis: bool):
    st = _qdtype(a.dtype)
    if ctx.dtype(a.input) != st:
        raise Unsupported(f"dequantize of a {ctx.dtype(a.input).name} tensor declared {st.name} "
                          "(torch asserts they are equal)")
    _bounds(ctx, a, st)
    _out_dtype(a)
    axis = _axis(ctx, a, a.input) if per_axis else None
    return ctx.op("DequantizeLinear", ctx.t(a.input), _scale(ctx, scale_ref, per_axis),
                  _zero_points(ctx, zp_ref, st, per_axis), axis=axis)


@lowering("onnx", "quantized_decomposed.quantize_per_tensor.default",
          "quantized_decomposed.quantize_per_tensor.tensor", "quantized_decomposed.quantize_per_tensor.tensor2")
def quantize_per_tensor(ctx, node):
    a = bind(node, "input", "scale", "zero_point", "quant_min", "quant_max", "dtype")
    return _quantize(ctx, a, a.scale, a.zero_point, per_axis=False)


@lowering("onnx", "quantized_decomposed.dequantize_per_tensor.default",
          "quantized_decomposed.dequantize_per_tensor.tensor", "quantized_decomposed.dequantize_per_tensor.tensor2")
def dequantize_per_tensor(ctx, node):
    a = bind(node, "input", "scale", "zero_point", "quant_min", "quant_max", "dtype", "out_dtype")
    return _dequantize(ctx, a, a.scale, a.zero_point, per_axis=False)


@lowering("onnx", "quantized_decomposed.quantize_per_channel.default")
def quantize_per_channel(ctx, node):
    a = bind(node, "input", "scales", "zero_points", "axis", "quant_min", "quant_max", "dtype")
    return _quantize(ctx, a, a.scales, a.zero_points, per_axis=True)


@lowering("onnx", "quantized_decomposed.dequantize_per_channel.default")
def dequantize_per_channel(ctx, node):
    a = bind(node, "input", "scales", "zero_points", "axis", "quant_min", "quant_max", "dtype", "out_dtype")
    return _dequantize(ctx, a, a.scales, a.zero_points, per_axis=True)


CHOOSE_QPARAMS = ("quantized_decomposed.choose_qparams.tensor",
                  "quantized_decomposed.choose_qparams_symmetric.tensor")


@lowering("onnx", *CHOOSE_QPARAMS)
def choose_qparams(ctx, node):
    """torch's ``determine_qparams`` over the whole input, in float32 as torch computes it:
    min_neg = min(min x, 0), max_pos = max(max x, 0); affine: scale = max((max_pos - min_neg) /
    (qmax - qmin), eps), zero point clamp(qmin - round(min_neg / scale), qmin, qmax) (|min_neg /
    scale| <= qmax - qmin, so float32 holds it exactly); symmetric: scale = max(max(-min_neg,
    max_pos) / ((qmax - qmin) / 2), eps), zero point 128 for uint8, else 0. Returns float64 [1]
    and int64 [1] as torch does. A NaN or infinite input gives no defined zero point in torch."""
    a = bind(node, "input", "quant_min", "quant_max", "eps", "dtype")
    st = _qdtype(a.dtype)
    lo, hi = _bounds(ctx, a, st)
    if not lo <= 0 <= hi:
        raise Unsupported(f"quant_min={lo}, quant_max={hi} do not include 0 (torch's validate_qmin_qmax)")
    if ctx.dtype(a.input) != ST.FLOAT:
        raise Unsupported(f"choose_qparams of a {ctx.dtype(a.input).name} tensor (float32 only)")
    x = ctx.t(a.input)
    f32 = lambda v: ctx.const(np.float32(v), ST.FLOAT)  # noqa: E731
    min_neg = ctx.op("Min", ctx.op("ReduceMin", x, keepdims=0), f32(0))
    max_pos = ctx.op("Max", ctx.op("ReduceMax", x, keepdims=0), f32(0))
    if str(node.target).endswith("choose_qparams_symmetric.tensor"):
        scale = ctx.op("Div", ctx.op("Max", ctx.op("Neg", min_neg), max_pos), f32((hi - lo) / 2))
        scale = ctx.op("Max", scale, f32(a.eps))
        zp = ctx.const(np.array([128 if st == ST.BYTE else 0], np.int64), ST.LONG)
    else:
        scale = ctx.op("Max", ctx.op("Div", ctx.op("Sub", max_pos, min_neg), f32(hi - lo)), f32(a.eps))
        shift = ctx.op("Sub", f32(lo), ctx.op("Round", ctx.op("Div", min_neg, scale)))
        zp = ctx.op("Reshape", ctx.cast(ctx.op("Clip", shift, f32(lo), f32(hi)), ST.FLOAT, ST.LONG), ctx.ints([1]))
    return [ctx.op("Reshape", ctx.cast(scale, ST.FLOAT, ST.DOUBLE), ctx.ints([1])), zp]


# Read and checked against their schemas, then refused by name (see the module docstring).
REFUSED = {
    "torchao.quantize_affine.default": "torchao's block-wise affine quantization is not lowered",
    "torchao.dequantize_affine.default": "torchao's block-wise affine dequantization is not lowered",
    "torchao.choose_qparams_affine.default": "torchao's block-wise qparams are not lowered",
}
"""Targets read and validated, then refused with the reason given."""


def _refusal(reason: str):
    def refuse(ctx, node):
        raise Unsupported(reason)

    return refuse


for _target, _reason in REFUSED.items():
    lowering("onnx", _target)(_refusal(_reason))
