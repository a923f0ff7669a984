"""ONNX Resize -> TFLite, exact for every attribute of Resize-10 to -19, or refused naming it.

LiteRT's RESIZE_BILINEAR and RESIZE_NEAREST_NEIGHBOR (4-D NHWC, H and W) compute the source
coordinate from the size ratio, with align_corners or half-pixel centres. Where the sizes are
known at conversion time, the mapper computes ONNX's own per-axis interpolation matrices
(``resize_weights``) and emulates what the builtin would compute: the builtin is used where
the two agree (XNNPACK delegates it); otherwise each resized axis is a separable map of its
own: a GATHER of precomputed indices for nearest, a FULLY_CONNECTED with the precomputed
weight matrix (and the extrapolation value as its bias) for linear and cubic. That covers a
given non-integer scale, cubic, antialias, ``exclude_outside``, ``tf_crop_and_resize``,
``half_pixel_symmetric``, ``keep_aspect_ratio_policy`` and ``axes`` over any dims.

At sizes known only at run time the builtins are used where their transform is ONNX's for any
size; anything else is refused naming the attribute and value.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ...errors import Unsupported
from ...limits import MAX_ONNX_DIM, MAX_RESIZE_LENGTH, MAX_RESIZE_MATRIX
from ..core.emit import Emitter, attrs
from ..core.mappers import maps
from ..core.model import TensorType as T
from .nn import TO_NCHW, TO_NHWC, transpose
from .resize_weights import MODES, NEAREST_MODES, TRANSFORMS, AxisMap, AxisResize, axis_map
from .shape import _slice1d, shape_tensor

# attribute -> the values implemented (None: any value of its type), and its default
_IMPLEMENTED = {
    "mode": (MODES, "nearest"),
    "coordinate_transformation_mode": (TRANSFORMS, "half_pixel"),
    "nearest_mode": (NEAREST_MODES, "round_prefer_floor"),
    "keep_aspect_ratio_policy": (("stretch", "not_larger", "not_smaller"), "stretch"),
    "antialias": ((0, 1), 0),
    "exclude_outside": ((0, 1), 0),
    "cubic_coeff_a": (None, -0.75),
    "extrapolation_value": (None, 0.0),
    "axes": (None, None),
}
_BUILTIN_OPTIONS = ((False, False), (True, False), (False, True))  # (align_corners, half_pixel_centers)
_WEIGHT_TOL = 1e-5  # a builtin's float32 weights against ONNX's
_MAX_SCALE = 2.0 ** 20  # a larger scale makes an output over any length limit (and overflows floats)


@dataclass
class _Spec:
    a: dict  # attributes, defaults filled in
    rank: int
    shape: list[int]  # input dims, -1 where dynamic
    axes: list[int]
    scales: dict | None  # axis -> the given scale
    sizes: dict | None  # axis -> the given size (None: computed at run time)
    roi: dict  # axis -> (start, end)


@maps("Resize")
def resize(em: Emitter, node) -> None:
    spec = _read(em, node)
    axes = _static_axes(spec, em.shape(node.output[0]))
    if axes is None:
        _dynamic(em, node, spec)
        return
    _refuse_where_runtimes_differ(spec, axes)
    maps_ = {ax: _axis_map(spec, ax, r) for ax, r in axes.items()}
    maps_ = {ax: m for ax, m in maps_.items() if not m.is_identity}
    options = _builtin_options(em, node, spec, axes, maps_)
    if options is not None:
        size = em.const(np.asarray([axes[2].out if 2 in axes else spec.shape[2],
                                    axes[3].out if 3 in axes else spec.shape[3]], np.int32))
        _builtin(em, node, spec.a["mode"], options, size)
    else:
        _separable(em, node, spec, maps_)


def _num(v: float) -> str:
    """A float32 value as its shortest decimal (a scale of 0.35 reads 0.35)."""
    return np.format_float_positional(np.float32(v), trim="-")


# ------------------------------------------------------------------ reading the node


def _read(em: Emitter, node) -> _Spec:
    a = _attributes(node)
    ins = list(node.input) + [""] * (4 - len(node.input))
    x = node.input[0]
    shape = em.shape(x)
    if shape is None:
        raise Unsupported("Resize of a value of unknown rank")
    rank = len(shape)
    if len([i for i in node.input if i]) == 2 and len(node.input) == 2:  # Resize-10: (X, scales)
        if a["mode"] != "linear":
            raise Unsupported("Resize-10 (inputs X, scales) with mode=nearest: its rounding is not specified "
                              "(runtimes differ); use opset 11 or later")
        a["coordinate_transformation_mode"] = "asymmetric"
        ins = [x, "", ins[1], ""]
    axes = _axes(a, rank)
    scales = sizes = None
    if ins[3]:
        v = em.const_value(ins[3])
        sizes = dict(zip(axes, (int(s) for s in np.asarray(v).reshape(-1)))) if v is not None else None
        if v is not None and (np.asarray(v).size != len(axes)
                              or not all(0 < n <= MAX_ONNX_DIM for n in sizes.values())):
            raise Unsupported(f"Resize sizes {np.asarray(v).reshape(-1).tolist()[:8]} (one positive length per axis "
                              "expected)")
        if sizes is None:
            sizes = {}
    elif ins[2]:
        v = em.const_value(ins[2])
        if v is None:
            raise Unsupported("Resize with scales computed at run time")
        v = np.asarray(v, np.float32).reshape(-1)
        if v.size != len(axes) or not np.all((v > 0) & (v <= _MAX_SCALE)):
            raise Unsupported(f"Resize scales {v.tolist()[:8]} (one value in (0, {_MAX_SCALE}] per axis expected)")
        scales = {ax: float(s) for ax, s in zip(axes, v)}
    else:
        raise Unsupported("Resize with neither scales nor sizes")
    if a["keep_aspect_ratio_policy"] != "stretch" and sizes is None:
        a["keep_aspect_ratio_policy"] = "stretch"  # ONNX: the policy applies to sizes only
    return _Spec(a, rank, list(shape), axes, scales, sizes, _roi(em, ins[1], a, axes))


def _attributes(node) -> dict:
    got = attrs(node)
    out = {}
    for name, value in got.items():
        if name not in _IMPLEMENTED:
            raise Unsupported(f"Resize attribute {name}={value!r} is not implemented")
        if isinstance(value, bytes):
            value = value.decode(errors="replace")
        allowed = _IMPLEMENTED[name][0]
        if allowed is not None and value not in allowed:
            raise Unsupported(f"Resize {name}={value!r} is not one of {list(allowed)}")
        out[name] = value
    for name, (_, default) in _IMPLEMENTED.items():
        out.setdefault(name, default)
    if out["antialias"] and out["mode"] == "nearest":
        raise Unsupported("Resize antialias=1 with mode=nearest (ONNX defines antialias for linear and cubic)")
    return out


def _axes(a: dict, rank: int) -> list[int]:
    if a["axes"] is None:
        return list(range(rank))
    axes = [int(v) + rank if int(v) < 0 else int(v) for v in a["axes"]]
    if len(set(axes)) != len(axes) or not all(0 <= v < rank for v in axes):
        raise Unsupported(f"Resize axes={list(a['axes'])} for a rank-{rank} value")
    return axes


def _roi(em: Emitter, name: str, a: dict, axes: list[int]) -> dict:
    """axis -> (start, end); ONNX reads roi only for tf_crop_and_resize."""
    if a["coordinate_transformation_mode"] != "tf_crop_and_resize":
        return {ax: (0.0, 1.0) for ax in axes}
    v = em.const_value(name) if name else None
    if v is None:
        raise Unsupported("Resize tf_crop_and_resize with a roi that is not a constant")
    v = np.asarray(v, np.float64).reshape(-1)
    if v.size != 2 * len(axes) or not np.all(np.isfinite(v)):
        raise Unsupported(f"Resize roi {v.tolist()[:8]} (2 finite values per axis expected)")
    return {ax: (float(v[i]), float(v[i + len(axes)])) for i, ax in enumerate(axes)}


# ------------------------------------------------------------------ static sizes: ONNX's matrices


def _static_axes(spec: _Spec, out_shape) -> dict | None:
    """axis -> AxisResize for every resized axis, or None when a length is known only at run time."""
    if spec.sizes is not None:
        sizes = spec.sizes or _inferred_sizes(spec, out_shape)
        if sizes is None:
            return None
        if spec.a["keep_aspect_ratio_policy"] == "stretch":  # an axis kept at its length is the identity
            sizes = {ax: n for ax, n in sizes.items() if n != spec.shape[ax] or spec.roi[ax] != (0.0, 1.0)}
        if any(spec.shape[ax] < 0 or n < 0 for ax, n in sizes.items()):
            return None
        return _from_sizes(spec, sizes)
    kept = [ax for ax in spec.axes if spec.scales[ax] == 1 and spec.roi[ax] == (0.0, 1.0)]  # any length
    if any(spec.shape[ax] < 0 for ax in spec.axes if ax not in kept):
        return None
    out = {}
    for ax in spec.axes:
        if ax in kept:
            continue
        length, s = spec.shape[ax], spec.scales[ax]
        n32 = math.floor(np.float32(length) * np.float32(s))
        n64 = math.floor(length * s)
        if n32 != n64:
            raise Unsupported(f"Resize scale {_num(s)} of length {length}: floor(length x scale) is {n64} in "
                              f"float64 and {n32} in float32 (runtimes differ)")
        out[ax] = AxisResize(length, n64, s, spec.roi[ax])
    return out


def _inferred_sizes(spec: _Spec, out_shape) -> dict | None:
    """Sizes computed at run time, read from the output shape ONNX's shape inference found (it
    propagates ``Concat(Shape(x)[:2], [h, w])``, how exporters write a resize with a dynamic
    batch). An N or C dim known only at run time keeps the input's, as the builtins do."""
    if spec.a["keep_aspect_ratio_policy"] != "stretch" or out_shape is None or len(out_shape) != spec.rank:
        return None
    sizes = {}
    for ax in spec.axes:
        if out_shape[ax] >= 0:
            sizes[ax] = out_shape[ax]
        elif spec.shape[ax] < 0 and ax < 2 and spec.axes == list(range(spec.rank)):
            sizes[ax] = spec.shape[ax]
        else:
            return None
    return sizes


def _from_sizes(spec: _Spec, sizes: dict) -> dict:
    policy = spec.a["keep_aspect_ratio_policy"]
    ratios = {ax: sizes[ax] / spec.shape[ax] for ax in sizes}
    if policy == "stretch":
        return {ax: AxisResize(spec.shape[ax], sizes[ax], ratios[ax], spec.roi[ax]) for ax in sizes}
    s = (min if policy == "not_larger" else max)(ratios.values())
    return {ax: AxisResize(spec.shape[ax], int(s * spec.shape[ax] + 0.5), s, spec.roi[ax]) for ax in sizes}


def _refuse_where_runtimes_differ(spec: _Spec, axes: dict) -> None:
    """Where the specification (and ONNX Runtime) and onnx's reference (which wrote the node
    tests' outputs) compute different coordinates: align_corners and tf_crop_and_resize divide
    by the integer output length less 1 in the first and by scale x length less 1 in the
    second; pytorch_half_pixel to length 1 is 0 in the first and -0.5 in the second."""
    ctm, a = spec.a["coordinate_transformation_mode"], spec.a
    for ax, r in axes.items():
        if ctm in ("align_corners", "tf_crop_and_resize") and spec.scales is not None and r.out != r.length * r.scale:
            raise Unsupported(f"Resize coordinate_transformation_mode={ctm} with scale {_num(r.scale)} of length "
                              f"{r.length} (not an integer length: the specification and onnx's reference differ)")
        if ctm == "pytorch_half_pixel" and r.out == 1 and (a["mode"] == "cubic" or a["antialias"]):
            raise Unsupported(f"Resize coordinate_transformation_mode=pytorch_half_pixel to length 1 with "
                              f"mode={a['mode']}, antialias={a['antialias']} (the specification and onnx's reference "
                              "differ)")


def _axis_map(spec: _Spec, ax: int, r: AxisResize) -> AxisMap:
    a = spec.a
    if r.out == 0:
        raise Unsupported(f"Resize to an empty axis {ax}")
    if r.out * r.length > MAX_RESIZE_MATRIX or r.out > MAX_RESIZE_LENGTH:
        raise Unsupported(f"Resize of axis {ax} from {r.length} to {r.out}: its interpolation matrix is over "
                          f"converters/limits.py MAX_RESIZE_MATRIX/MAX_RESIZE_LENGTH ({MAX_RESIZE_MATRIX} elements, "
                          f"{MAX_RESIZE_LENGTH} rows)")
    return axis_map(r, mode=a["mode"], ctm=a["coordinate_transformation_mode"], nearest_mode=a["nearest_mode"],
                    cubic_coeff_a=float(a["cubic_coeff_a"]), exclude_outside=bool(a["exclude_outside"]),
                    antialias=bool(a["antialias"]), extrapolation_value=float(a["extrapolation_value"]))


def _builtin_options(em: Emitter, node, spec: _Spec, axes: dict, maps_: dict) -> tuple[bool, bool] | None:
    """The builtin's (align_corners, half_pixel_centers) whose result is ONNX's on every resized
    axis, or None. The builtins take a 4-D float value and resize H and W (dims 2, 3 here)."""
    if (spec.rank != 4 or not maps_ or set(maps_) - {2, 3} or spec.a["mode"] == "cubic" or min(spec.shape[2:]) < 0
            or em.dtype_of(em.t(node.input[0])) != T.FLOAT32):
        return None
    for options in _BUILTIN_OPTIONS:
        if all(_builtin_matches(spec.a["mode"], options, spec.shape[ax],
                                axes[ax].out if ax in axes else spec.shape[ax], maps_.get(ax))
               for ax in (2, 3)):
            return options
    return None


def _builtin_matches(mode: str, options: tuple[bool, bool], length: int, out: int, m: AxisMap | None) -> bool:
    want = np.eye(length) if m is None else m.weights
    if m is not None and m.bias.any():
        return False
    got = _builtin_weights(mode, options, length, out)
    if mode == "nearest":
        return np.array_equal(got, want)
    return np.allclose(got, want, rtol=0, atol=_WEIGHT_TOL)


def _builtin_weights(mode: str, options: tuple[bool, bool], length: int, out: int) -> np.ndarray:
    """What RESIZE_BILINEAR / RESIZE_NEAREST_NEIGHBOR compute along one axis (float32 arithmetic)."""
    align, half = options
    f = np.float32
    scale = f(length - 1) / f(out - 1) if align and out > 1 else f(length) / f(out)
    y = np.arange(out, dtype=np.float32)
    w = np.zeros((out, length))
    rows = np.arange(out)
    if mode == "nearest":
        src = (y + f(0.5 if half else 0.0)) * scale
        # TfLiteRound rounds half away from zero (np.round is half to even: 4.5 -> 4, LiteRT's 5)
        idx = np.floor(src + f(0.5)) if align else np.floor(src)
        idx = np.clip(idx.astype(np.int64), 0, length - 1)
        w[rows, idx] = 1.0
        return w
    src = (y + f(0.5)) * scale - f(0.5) if half else y * scale
    lo = np.floor(src)
    frac = (src - lo).astype(np.float64)
    lo_i = np.maximum(lo.astype(np.int64), 0)
    hi_i = np.minimum(np.ceil(src).astype(np.int64), length - 1)
    np.add.at(w, (rows, lo_i), 1 - frac)
    np.add.at(w, (rows, hi_i), frac)
    return w


def _builtin(em: Emitter, node, mode: str, options: tuple[bool, bool], size: int) -> None:
    align, half = options
    if mode == "nearest":
        code, opts = "RESIZE_NEAREST_NEIGHBOR", "ResizeNearestNeighborOptions"
    else:
        code, opts = "RESIZE_BILINEAR", "ResizeBilinearOptions"
    x = transpose(em, em.t(node.input[0]), TO_NHWC[4], "nhwc")
    y = em.tmp(em.dtype_of(x), None, "resize")
    em.op(code, [x, size], [y], (opts, {"align_corners": align, "half_pixel_centers": half}))
    em.op("TRANSPOSE", [y, em.const(np.asarray(TO_NCHW[4], np.int32))], [em.out()])


def _separable(em: Emitter, node, spec: _Spec, maps_: dict) -> None:
    """One GATHER (nearest) or FULLY_CONNECTED (weights, extrapolation bias) per resized axis."""
    x = em.t(node.input[0])
    if not maps_:
        em.bind(node.output[0], x)
        return
    gather = all(m.gather is not None for m in maps_.values())
    if not gather and em.dtype_of(x) != T.FLOAT32:
        raise Unsupported(f"Resize mode={spec.a['mode']} of an integer tensor (ONNX rounds the interpolated values)")
    last = spec.rank - 1
    order = sorted(maps_, key=lambda ax: ax != last)  # the last axis first: it needs no transposes
    for i, ax in enumerate(order):
        out = em.out() if i == len(order) - 1 else None
        x = _gather_axis(em, x, ax, maps_[ax], out) if gather else _matmul_axis(em, x, ax, last, maps_[ax], out)


def _gather_axis(em: Emitter, x: int, ax: int, m: AxisMap, out: int | None) -> int:
    shape = em.shape_of(x)
    y = out if out is not None else em.tmp(em.dtype_of(x), None if shape is None else
                                          [*shape[:ax], len(m.gather), *shape[ax + 1:]], "resize")
    em.op("GATHER", [x, em.const(m.gather.astype(np.int32))], [y], ("GatherOptions", {"axis": ax}))
    return y


def _matmul_axis(em: Emitter, x: int, ax: int, last: int, m: AxisMap, out: int | None) -> int:
    perm = list(range(last + 1))
    perm[ax], perm[last] = perm[last], perm[ax]
    if ax != last:
        x = transpose(em, x, perm, "axis_last")
    shape = em.shape_of(x)
    n = m.weights.shape[0]
    y = out if out is not None and ax == last else em.tmp(T.FLOAT32, None if shape is None else [*shape[:-1], n],
                                                           "resize")
    bias = em.const(m.bias.astype(np.float32)) if m.bias.any() else -1
    em.op("FULLY_CONNECTED", [x, em.const(np.ascontiguousarray(m.weights, np.float32)), bias], [y],
          ("FullyConnectedOptions", {"fused_activation_function": 0, "keep_num_dims": True}))
    if ax == last:
        return y
    if out is not None:
        em.op("TRANSPOSE", [y, em.const(np.asarray(perm, np.int32))], [out])
        return out
    return transpose(em, y, perm, "axis_back")


# ------------------------------------------------------------------ sizes known at run time


def _dynamic(em: Emitter, node, spec: _Spec) -> None:
    """The builtins, where their transform equals ONNX's for every size."""
    a = spec.a
    mode, ctm, nearest = a["mode"], a["coordinate_transformation_mode"], a["nearest_mode"]
    why = _dynamic_refusal(spec)
    if why:
        raise Unsupported(f"Resize {why} at a size known only at run time (TFLite's resize builtins compute "
                          "the source coordinate from the size ratio)")
    if mode == "nearest":
        options = {("asymmetric", "floor"): (False, False), ("half_pixel", "round_prefer_ceil"): (False, True),
                   ("align_corners", "round_prefer_ceil"): (True, False)}.get((ctm, nearest))
        if options is None:
            raise Unsupported(f"Resize mode=nearest with coordinate_transformation_mode={ctm}, nearest_mode={nearest} "
                              "at a size known only at run time (TFLite has asymmetric/floor, half_pixel/"
                              "round_prefer_ceil and align_corners/round_prefer_ceil)")
    elif ctm == "pytorch_half_pixel":
        _torch_bilinear_dynamic(em, node, spec)
        return
    else:
        options = {"half_pixel": (False, True), "half_pixel_symmetric": (False, True), "asymmetric": (False, False),
                   "align_corners": (True, False)}[ctm]
    _builtin(em, node, mode, options, _run_time_size(em, node, spec))


def _dynamic_refusal(spec: _Spec) -> str | None:
    a = spec.a
    if spec.rank != 4 or set(_resized(spec)) - {2, 3}:
        return "of other dims than H, W of a 4-D value"
    if a["mode"] == "cubic":
        return "mode=cubic"
    if a["coordinate_transformation_mode"] == "tf_crop_and_resize":
        return "coordinate_transformation_mode=tf_crop_and_resize"
    if a["keep_aspect_ratio_policy"] != "stretch":
        return f"keep_aspect_ratio_policy={a['keep_aspect_ratio_policy']}"
    if spec.scales is not None:
        odd = [s for s in spec.scales.values() if s != int(s)]
        if odd:
            return f"with the non-integer scale {_num(odd[0])}"
        if a["coordinate_transformation_mode"] == "half_pixel_symmetric" or a["antialias"]:
            return None  # an integer upscale: the ratio is the scale, and antialias only filters downscales
    elif a["antialias"]:
        return "antialias=1"
    return None


def _resized(spec: _Spec) -> list[int]:
    """The axes a run-time Resize changes. Sizes computed at run time over all four dims are read
    for H and W only (N and C keep the input's, as the builtins do)."""
    if spec.scales is not None:
        return [ax for ax, s in spec.scales.items() if s != 1]
    if not spec.sizes:
        return [2, 3] if spec.axes in ([0, 1, 2, 3], [2, 3]) else spec.axes
    return [ax for ax in spec.axes if spec.sizes[ax] != spec.shape[ax]]


def _torch_bilinear_dynamic(em: Emitter, node, spec: _Spec) -> None:
    """pytorch_half_pixel to a size known at run time: it is TFLite's half-pixel bilinear for
    an output side above 1, and (source coordinate 0) its align-corners bilinear for a side of
    1. Bilinear is separable: resize H, then W, each pass picking its mode by its own size."""
    size = _run_time_size(em, node, spec)
    x = transpose(em, em.t(node.input[0]), TO_NHWC[4], "nhwc")
    dims = shape_tensor(em, x)
    one = em.const(np.array(1, np.int32))
    for axis in (0, 1):
        keep = _slice1d(em, dims, 2, 3) if axis == 0 else _slice1d(em, size, 0, 1)
        side = _slice1d(em, size, axis, axis + 1)
        target = em.tmp(T.INT32, [2], "size")
        em.op("CONCATENATION", [side, keep] if axis == 0 else [keep, side], [target], ("ConcatenationOptions", {"axis": 0}))
        results = []
        for align in (False, True):
            r = em.tmp(T.FLOAT32, None, "resize")
            em.op("RESIZE_BILINEAR", [x, target], [r], ("ResizeBilinearOptions", {"align_corners": align,
                                                                                  "half_pixel_centers": not align}))
            results.append(r)
        is_one = em.tmp(T.BOOL, [1], "side_is_1")
        em.op("EQUAL", [side, one], [is_one])
        picked = em.tmp(T.FLOAT32, None, "resize")
        em.op("SELECT_V2", [is_one, results[1], results[0]], [picked])
        x = picked
    em.op("TRANSPOSE", [x, em.const(np.asarray(TO_NCHW[4], np.int32))], [em.out()])


def _run_time_size(em: Emitter, node, spec: _Spec) -> int:
    """The output [H, W] (int32): from sizes, or floor(in * scale) at run time."""
    ins = list(node.input) + [""] * (4 - len(node.input))
    if spec.sizes is not None:
        sizes = em.cast(em.t(ins[3]), T.INT32)
        return sizes if spec.axes == [2, 3] else _slice1d(em, sizes, 2, 4)
    scales = np.asarray([spec.scales.get(ax, 1.0) for ax in range(4)], np.float32)
    hw = em.cast(_slice1d(em, shape_tensor(em, em.t(node.input[0])), 2, 4), T.FLOAT32)
    scaled = em.unary("FLOOR", em.binary("MUL", hw, em.const(scales[2:])))
    return em.cast(scaled, T.INT32)
