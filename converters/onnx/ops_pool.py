"""Pools, adaptive pools, resizing (``upsample_*``/``interpolate``), pixel shuffle, grid sample."""

from __future__ import annotations

import numpy as np

from ..aten import dtypes

from ..aten.args import bind
from ..aten.dtypes import ST
from ..aten.registry import lowering
from ..errors import Unsupported
from .ops_nn import _ct
from .ops_unpool import adaptive_max, integer_pool, output_read, plane_indices
from .shapes import axes_const, per_axis


@lowering("onnx", "aten.grid_sampler_2d.default", "aten.grid_sampler.default")
def grid_sampler(ctx, node):
    a = bind(node, "input", "grid", "interpolation_mode", "padding_mode", "align_corners")
    out = ctx.out_info().dtype
    cst = ctx.compute_type(out)
    mode = {0: "linear", 1: "nearest", 2: "cubic"}[a.interpolation_mode]
    if ctx.opset < 20:  # GridSample-16 spells the modes bilinear/bicubic
        mode = {"linear": "bilinear", "cubic": "bicubic"}.get(mode, mode)
    pad = {0: "zeros", 1: "border", 2: "reflection"}[a.padding_mode]
    r = ctx.op("GridSample", ctx.t(a.input, cst), ctx.t(a.grid, cst), mode=mode, padding_mode=pad,
               align_corners=int(bool(a.align_corners)))
    return ctx.cast(r, cst, out)


def _pool_attrs(kernel, stride, padding, n, ceil_mode, dilation=None):
    k = per_axis(kernel, n)
    s = per_axis(stride, n) if stride not in (None, [], ()) else k
    p = per_axis(padding, n)
    attrs = dict(kernel_shape=k, strides=s, pads=p + p, ceil_mode=int(bool(ceil_mode)))
    if dilation is not None and any(d != 1 for d in per_axis(dilation, n)):
        attrs["dilations"] = per_axis(dilation, n)
    return attrs


def _pool(ctx, node, op, n, with_indices=False):
    # each argument only one of avg_pool and max_pool has: torch's default for the other's lowering
    a = bind(node, "self", "kernel_size", dilation=1, count_include_pad=True, divisor_override=None)
    out, cst = _ct(ctx)
    if not dtypes.is_floating(cst):  # ONNX's pools take floats: the windows gathered
        a.declare("ceil_mode", "count_include_pad")  # the output's size says ceil_mode; read where it counts
        y, i = integer_pool(ctx, a, n, op, with_indices and output_read(ctx, 1))
        return [y, i] if with_indices else y
    if with_indices and output_read(ctx, 1) and _static_spatial(ctx, a.self, n):
        # the indices read: the windows gathered (TFLite has no MaxPool indices; NaN picked as torch)
        a.declare("ceil_mode")  # the output's size says it
        return list(integer_pool(ctx, a, n, op, True))
    if a.divisor_override is not None:
        a.declare("count_include_pad", "ceil_mode")  # the divisor is given; the output's size says ceil_mode
        return _window_sums(ctx, a, n, cst, out, float(a.divisor_override))
    attrs = _pool_attrs(a.kernel_size, a.stride, a.padding, n, a.ceil_mode,
                        a.dilation if op == "MaxPool" else None)
    if op == "AveragePool":
        attrs["count_include_pad"] = int(bool(a.count_include_pad))
    x = ctx.t(a.self, cst)
    unbatched = ctx.rank(a.self) == n + 1
    if unbatched:
        x = ctx.op("Unsqueeze", x, axes_const(ctx, [0]))
    if with_indices and output_read(ctx, 1):  # torch's indices: flat within each (n, c) plane
        r, i = ctx.op(op, x, outputs=2, **attrs)
        i = plane_indices(ctx, i, a.self, n)
    else:
        r, i = ctx.op(op, x, **attrs), None
    if unbatched:
        r, i = (None if v is None else ctx.op("Squeeze", v, axes_const(ctx, [0])) for v in (r, i))
    r = ctx.cast(r, cst, out)
    return [r, i] if with_indices else r


def _static_spatial(ctx, x, n) -> bool:
    shape, oshape = list(ctx.info(x).shape[-n:]), list(ctx.out_info().shape[-n:])
    return all(isinstance(v, int) for v in shape + oshape) and 0 not in shape


def _window_sums(ctx, a, n, cst, out, divisor: float):
    """avg_pool with ``divisor_override``: each window's sum over ``divisor``. The input padded with
    zeros explicitly (ceil mode's last windows too), so every window lies inside it and an
    AveragePool without pads divides by the whole window: times area / divisor. Static sizes only."""
    k = per_axis(a.kernel_size, n)
    s = per_axis(a.stride, n) if a.stride not in (None, [], ()) else k
    p = per_axis(a.padding, n)
    shape, oshape = ctx.info(a.self).shape[-n:], ctx.out_info().shape[-n:]
    if not all(isinstance(d, int) for d in list(shape) + list(oshape)) or divisor == 0:
        raise Unsupported("avg_pool divisor_override with spatial sizes known only at run time, or 0")
    tail = [max(pi, (o - 1) * si + ki - L - pi) for L, o, ki, si, pi in zip(shape, oshape, k, s, p)]
    x = ctx.t(a.self, cst)
    r = ctx.rank(a.self)
    if any(p) or any(tail):
        x = ctx.op("Pad", x, ctx.ints([0] * (r - n) + p + [0] * (r - n) + tail))
    unbatched = r == n + 1
    if unbatched:
        x = ctx.op("Unsqueeze", x, axes_const(ctx, [0]))
    y = ctx.op("AveragePool", x, kernel_shape=k, strides=s, pads=[0] * (2 * n), ceil_mode=0)
    if unbatched:
        y = ctx.op("Squeeze", y, axes_const(ctx, [0]))
    y = ctx.op("Mul", y, ctx.const(float(np.prod(k)) / divisor, cst))
    return ctx.cast(y, cst, out)


for _n in (1, 2, 3):
    lowering("onnx", f"aten.max_pool{_n}d.default")(lambda ctx, node, _n=_n: _pool(ctx, node, "MaxPool", _n))
    lowering("onnx", f"aten.max_pool{_n}d_with_indices.default")(
        lambda ctx, node, _n=_n: _pool(ctx, node, "MaxPool", _n, True))
    lowering("onnx", f"aten.avg_pool{_n}d.default")(lambda ctx, node, _n=_n: _pool(ctx, node, "AveragePool", _n))


def _adaptive(ctx, node, op, n, with_indices=False):
    a = bind(node, "self", "output_size")
    out, cst = _ct(ctx)
    info = ctx.info(a.self)
    sizes = per_axis(a.output_size, n)
    x = ctx.t(a.self, cst)
    # an unbatched input (C, *spatial): ONNX's pools take (N, C, *spatial), so a batch axis of 1 around them
    unbatched = info.rank == n + 1
    spatial = info.shape[-n:]
    static = all(isinstance(s, int) for s in spatial)
    idx = None  # the indices where they are converted (not a global pool of run-time sizes)
    want = with_indices and output_read(ctx, 1)
    if op == "MaxPool" and static and 0 not in spatial and (want or any(i % o for i, o in zip(spatial, sizes))):
        # the windows gathered: indices TFLite can compute, windows that overlap or differ in size
        y, idx = adaptive_max(ctx, a.self, n, want)
        return [y, idx] if with_indices else y
    if all(s == 1 for s in sizes) and not (want and static):
        r = ctx.op("GlobalAveragePool" if op == "AveragePool" else "GlobalMaxPool", _batched(ctx, x, unbatched))
        r = _unbatched(ctx, r, unbatched)
    elif static and op == "AveragePool" and any(i % o for i, o in zip(spatial, sizes)):
        r = _adaptive_average(ctx, x, info.rank, list(spatial), sizes, cst)
    elif not static or any(i % o for i, o in zip(spatial, sizes)):
        raise Unsupported("adaptive pool with an output size that does not divide the (static) input")
    else:
        k = [i // o for i, o in zip(spatial, sizes)]
        if want:  # torch's indices: flat within each (n, c) plane
            r, idx = ctx.op(op, _batched(ctx, x, unbatched), kernel_shape=k, strides=k, outputs=2)
            idx = _unbatched(ctx, plane_indices(ctx, idx, a.self, n), unbatched)
        else:
            r = ctx.op(op, _batched(ctx, x, unbatched), kernel_shape=k, strides=k)
        r = _unbatched(ctx, r, unbatched)
    r = ctx.cast(r, cst, out)
    return [r, idx] if with_indices else r


def _batched(ctx, x, unbatched):
    return ctx.op("Unsqueeze", x, axes_const(ctx, [0])) if unbatched else x


def _unbatched(ctx, r, unbatched):
    return ctx.op("Squeeze", r, axes_const(ctx, [0])) if unbatched else r


def _adaptive_average(ctx, x, rank, lengths, sizes, cst):
    """Adaptive average pooling where the windows overlap or differ in size (``F.interpolate``'s
    area mode, 63 -> 22): torch's window i along an axis is [floor(i*L/O), ceil((i+1)*L/O)), the
    mean over a box of such windows is separable, so each pooled axis is a MatMul with the
    [O, L] matrix of 1/window-length entries."""
    ctx.reserve_array([sum(o * L for o, L in zip(sizes, lengths))], dtypes.to_numpy(cst).itemsize,
                      "adaptive pool weights")
    for k, (length, size) in enumerate(zip(lengths, sizes)):
        if length == size:
            continue
        w = np.zeros((size, length))
        for i in range(size):
            lo, hi = (i * length) // size, -(-(i + 1) * length // size)
            w[i, lo:hi] = 1.0 / (hi - lo)
        x = _along_axis(ctx, x, rank - len(lengths) + k, rank, w.astype(dtypes.to_numpy(cst)))
    return x


def _along_axis(ctx, x, axis, rank, w):
    """``w @ x`` over ``axis`` (w: [out, in]): a MatMul, the axis moved last and back."""
    perm = list(range(rank))
    perm[axis], perm[-1] = perm[-1], perm[axis]
    if axis != rank - 1:
        x = ctx.op("Transpose", x, perm=perm)
    y = ctx.op("MatMul", x, ctx.const_array(np.ascontiguousarray(w.T), "pool_weights"))
    return y if axis == rank - 1 else ctx.op("Transpose", y, perm=perm)


for _n in (1, 2, 3):
    lowering("onnx", f"aten.adaptive_avg_pool{_n}d.default", f"aten._adaptive_avg_pool{_n}d.default")(
        lambda ctx, node, _n=_n: _adaptive(ctx, node, "AveragePool", _n))
    lowering("onnx", f"aten.adaptive_max_pool{_n}d.default")(
        lambda ctx, node, _n=_n: _adaptive(ctx, node, "MaxPool", _n, True))


# --------------------------------------------------------------------- resizing
#
# torch's upsample kernels: the source coordinate of output index i along an axis of input
# length L and output length O uses c = 1/scale where a scale is given (``scale_factors`` of
# ``.vec``, ``scales_*`` of ``.default``), else L/O; align_corners uses (L-1)/(O-1) and ignores
# the scale. Linear and cubic: x = c*(i+0.5) - 0.5, ONNX's half_pixel with that scale (linear
# clamps x at 0, which the edge taps equal; pytorch_half_pixel would make an output of length 1
# read pixel 0, torch reads the middle). Nearest: min(floor(i*c), L-1) (O == L and O == 2L are
# special cases), nearest-exact: min(floor((i+0.5)*c), L-1), computed in float32: at static
# sizes the picked indices are computed here and the Resize is a Gather unless the factor is an
# integer upscale (exact in any float arithmetic). Antialias: a triangle (bilinear) or a=-0.5
# cubic (bicubic) filter widened by c, taps outside the input dropped and the rest
# renormalised: Resize-18's antialias=1 with exclude_outside=1.

_RESIZE_MODES = {  # torch mode -> ONNX Resize attributes (the coordinate mode added per call)
    "nearest": dict(mode="nearest", coordinate_transformation_mode="asymmetric", nearest_mode="floor"),
    "nearest-exact": dict(mode="nearest", coordinate_transformation_mode="half_pixel",
                          nearest_mode="round_prefer_ceil"),
    "linear": dict(mode="linear"),
    "cubic": dict(mode="cubic", cubic_coeff_a=-0.75),
    "linear-aa": dict(mode="linear", antialias=1, exclude_outside=1),
    "cubic-aa": dict(mode="cubic", cubic_coeff_a=-0.5, antialias=1, exclude_outside=1),
}


def _resize(ctx, node, mode, n):
    # the arguments some of the overloads lack (.vec: scales_*, .default: scale_factors, nearest: align_corners)
    a = bind(node, "input", align_corners=None, scale_factors=None, scales_h=None, scales_w=None,
             scales_d=None, scales=None)
    src = a[0]  # ``input`` in the .vec overloads, ``self`` in .default
    a.declare("output_size")  # the output's shape (read again where that is dynamic)
    out, cst = _ct(ctx)
    x = ctx.t(src, cst)
    lengths = list(ctx.info(src).shape[-n:])
    outs = list(ctx.out_info().shape[-n:])
    scales = _torch_scales(a, n)
    static = all(isinstance(v, int) for v in lengths + outs)
    if mode.endswith("-aa") and a.align_corners:
        raise Unsupported(f"{node.target} with align_corners=True (ONNX's antialias filter is centred by the scale)")
    if mode.startswith("nearest") and static:
        r = _nearest_static(ctx, x, mode, lengths, outs, scales)
    elif mode.startswith("nearest") and any(s is not None and s != int(s) for s in scales):
        raise Unsupported(f"{node.target} with scale {scales} at a size known only at run time: torch's float32 "
                          "index arithmetic (i * (1/scale)) and ONNX Resize's (i / scale) can pick different pixels")
    elif a.align_corners or (not static and None in scales):
        r = _resize_to_sizes(ctx, x, a, n, outs, dict(_RESIZE_MODES[mode], **_align(mode, a.align_corners)))
    else:
        if not static:
            _refuse_inexact_run_time_scales(node, lengths, scales)
        onnx_scales = [_onnx_scale(node, L, o, s) for L, o, s in zip(lengths, outs, scales)] if static else scales
        attrs = dict(_RESIZE_MODES[mode], **_align(mode, False))
        sc = ctx.const(np.asarray([1.0, 1.0] + [float(s) for s in onnx_scales], np.float32), ST.FLOAT)
        r = ctx.op("Resize", x, None, sc, **attrs)
    return ctx.cast(r, cst, out)


def _torch_scales(a, n) -> list:
    """The scale torch's kernel uses per axis (None: the size ratio)."""
    if a.scale_factors is not None:
        return [float(s) if s and s > 0 else None for s in per_axis(a.scale_factors, n)]
    per = [a.scales_d, a.scales_h, a.scales_w][-n:] if n > 1 else [a.scales]
    return [float(s) if s is not None and s > 0 else None for s in per]


def _align(mode, align_corners) -> dict:
    if mode.startswith("nearest"):
        return {}
    return dict(coordinate_transformation_mode="align_corners" if align_corners else "half_pixel")


def _resize_to_sizes(ctx, x, a, n, outs, attrs):
    """Resize the last ``n`` axes (Resize-18's ``axes``) to the output's sizes."""
    if all(isinstance(s, int) for s in outs):
        sizes = ctx.ints(outs)
    elif a.output_size is not None:
        sizes = ctx.ints(list(a.output_size))
    else:
        raise Unsupported("resize to a dynamic size without output_size")
    return ctx.op("Resize", x, None, None, sizes, axes=list(range(2, 2 + n)), **attrs)


def _refuse_inexact_run_time_scales(node, lengths, scales) -> None:
    """torch sizes a length known only at run time as floor(length x scale) in float64, ONNX
    Runtime in float32: equal where the product is exact in float32, as for a scale of at most 8
    significant bits (0.5, 1.5, 2.75) and a length under 2**16; not otherwise (20 x 0.35 is 7 in
    float64 and 6.9999999 in float32)."""
    for length, s in zip(lengths, scales):
        if not isinstance(length, int) and s is not None and not (np.frexp(s)[0] * 256).is_integer():
            raise Unsupported(f"{node.target} with scale {s} on a length known only at run time: its output length "
                              "floor(length x scale) is computed in float64 by torch and float32 by ONNX Runtime, "
                              "which differ for some lengths")


def _onnx_scale(node, length: int, out: int, scale: float | None) -> float:
    """A float32 scale for ONNX whose floor(length x scale) is torch's output length in float32
    and float64 arithmetic: the given scale (or out/length), raised by a few ulps where rounding
    put the product under ``out`` (0.7 x 10 is 6.9999999 in float32). The coordinate transform
    moves by as many ulps."""
    s = np.float32(scale if scale is not None else out / length)
    for _ in range(8):
        f32, f64 = int(np.floor(np.float32(length) * s)), int(np.floor(length * float(s)))
        lo, hi = min(f32, f64), max(f32, f64)
        if lo == hi == out:
            return float(s)
        if lo > out:
            break
        s = np.nextafter(s, np.float32(np.inf))
    raise Unsupported(f"{node.target}: no float32 scale near {scale} gives ONNX's output length {out} for {length}")


def _nearest_static(ctx, x, mode, lengths, outs, scales):
    """torch's nearest indices at static sizes: a Resize where the factor is an integer upscale,
    else a Gather of the indices per axis."""
    ctx.reserve_array([sum(outs)], 8, "resize indices")
    picks = [_torch_nearest(mode, L, o, s) for L, o, s in zip(lengths, outs, scales)]
    exact = "floor" if mode == "nearest" else "half"
    if all(o % L == 0 and np.array_equal(p, _integer_upscale(exact, L, o)) for L, o, p in zip(lengths, outs, picks)):
        return ctx.op("Resize", x, None, None, ctx.ints(outs), axes=list(range(2, 2 + len(outs))),
                      **_RESIZE_MODES[mode])
    n = len(lengths)
    for i, (L, p) in enumerate(zip(lengths, picks)):
        if len(p) == L and np.array_equal(p, np.arange(L)):
            continue
        x = ctx.op("Gather", x, ctx.const(p.astype(np.int64), ST.LONG), axis=i - n)
    return x


def _integer_upscale(kind: str, length: int, out: int) -> np.ndarray:
    i = np.arange(out)
    return (i * length) // out if kind == "floor" else ((2 * i + 1) * length) // (2 * out)


def _torch_nearest(mode: str, length: int, out: int, scale: float | None) -> np.ndarray:
    """The input index torch's nearest / nearest-exact kernel reads for each output index."""
    i = np.arange(out)
    if mode == "nearest" and out == length:
        return i
    if mode == "nearest" and out == 2 * length:
        return i >> 1
    c = np.float32(1.0 / scale) if scale is not None else np.float32(length) / np.float32(out)
    if mode == "nearest":
        src = np.floor(i.astype(np.float32) * c)  # float32 product
    else:
        src = np.floor(((i + 0.5) * np.float64(c)).astype(np.float32))  # double product, floorf
    return np.minimum(src.astype(np.int64), length - 1)


for _n, _d in ((1, "1d"), (2, "2d"), (3, "3d")):
    for _ov in ("vec", "default"):
        lowering("onnx", f"aten.upsample_nearest{_d}.{_ov}")(lambda ctx, node, _n=_n: _resize(ctx, node, "nearest", _n))
        lowering("onnx", f"aten._upsample_nearest_exact{_d}.{_ov}")(
            lambda ctx, node, _n=_n: _resize(ctx, node, "nearest-exact", _n))


lowering("onnx", "aten.upsample_linear1d.vec", "aten.upsample_linear1d.default")(
    lambda ctx, node: _resize(ctx, node, "linear", 1))


lowering("onnx", "aten.upsample_bilinear2d.vec", "aten.upsample_bilinear2d.default")(
    lambda ctx, node: _resize(ctx, node, "linear", 2))


lowering("onnx", "aten.upsample_trilinear3d.vec", "aten.upsample_trilinear3d.default")(
    lambda ctx, node: _resize(ctx, node, "linear", 3))


lowering("onnx", "aten.upsample_bicubic2d.vec", "aten.upsample_bicubic2d.default")(
    lambda ctx, node: _resize(ctx, node, "cubic", 2))


lowering("onnx", "aten._upsample_bilinear2d_aa.vec", "aten._upsample_bilinear2d_aa.default")(
    lambda ctx, node: _resize(ctx, node, "linear-aa", 2))


lowering("onnx", "aten._upsample_bicubic2d_aa.vec", "aten._upsample_bicubic2d_aa.default")(
    lambda ctx, node: _resize(ctx, node, "cubic-aa", 2))


@lowering("onnx", "aten.pixel_shuffle.default")
def pixel_shuffle(ctx, node):
    a = bind(node, "self", "upscale_factor")
    r = int(a.upscale_factor)
    if dtypes.is_floating(ctx.dtype(a.self)):
        return ctx.op("DepthToSpace", ctx.t(a.self), blocksize=r, mode="CRD")
    # ONNX Runtime's DepthToSpace takes floats only: integers and booleans moved by Reshape/Transpose
    shape = ctx.info(a.self).shape
    if ctx.rank(a.self) != 4 or not all(isinstance(d, int) for d in shape[1:]):
        raise Unsupported("pixel_shuffle of integers with a rank other than 4 or run-time C/H/W")
    c, h, w = shape[1] // (r * r), shape[2], shape[3]
    x = ctx.op("Reshape", ctx.t(a.self), ctx.ints([0, c, r, r, h, w]))
    x = ctx.op("Transpose", x, perm=[0, 1, 4, 2, 5, 3])
    return ctx.op("Reshape", x, ctx.ints([0, c, h * r, w * r]))


@lowering("onnx", "aten.col2im.default")
def col2im(ctx, node):
    """``F.fold`` with static channels, blocks and sizes (the batch may be dynamic): each column
    element's target position in the padded output is computed at conversion time;
    ScatterElements(add) sums the overlaps."""
    a = bind(node, "self", "output_size", "kernel_size", "dilation", "padding", "stride")
    out, cst = _ct(ctx)
    info = ctx.info(a.self)
    if ctx.rank(a.self) != 3 or not all(isinstance(s, int) for s in info.shape[1:]):
        raise Unsupported("col2im with dynamic channels/blocks or unbatched input")
    _, ckk, blocks = info.shape
    (oh, ow), (kh, kw) = per_axis(a.output_size, 2), per_axis(a.kernel_size, 2)
    (dh, dw), (ph, pw), (sh, sw) = per_axis(a.dilation, 2), per_axis(a.padding, 2), per_axis(a.stride, 2)
    c = ckk // (kh * kw)
    hp, wp = oh + 2 * ph, ow + 2 * pw
    n = ctx.dim(a.self, 0)
    ctx.reserve_array([c * hp * wp], dtypes.to_numpy(cst).itemsize, "col2im zeros")
    idx = _patch_index(ctx, c, hp, wp, kh, kw, dh, dw, sh, sw).reshape(1, -1)
    idx = ctx.op("Expand", ctx.const_array(idx, "col2im_index"), ctx.op("Concat", n, ctx.ints([ckk * blocks]), axis=0))
    src = ctx.op("Reshape", ctx.t(a.self, cst), ctx.ints([0, ckk * blocks]))
    zeros = ctx.const_array(np.zeros((1, c * hp * wp), dtypes.to_numpy(cst)), "col2im_zeros")
    zeros = ctx.op("Expand", zeros, ctx.op("Concat", n, ctx.ints([c * hp * wp]), axis=0))
    r = ctx.op("ScatterElements", zeros, idx, src, axis=1, reduction="add")
    r = ctx.op("Reshape", r, ctx.ints([0, c, hp, wp]))
    if ph or pw:
        r = ctx.op("Slice", r, ctx.ints([ph, pw]), ctx.ints([ph + oh, pw + ow]), ctx.ints([2, 3]))
    return ctx.cast(r, cst, out)


def _patch_index(ctx, c, hp, wp, kh, kw, dh, dw, sh, sw):
    """(C*kh*kw, L) offsets of every patch element in a flattened (C, hp, wp) image."""
    bh = (hp - dh * (kh - 1) - 1) // sh + 1
    bw = (wp - dw * (kw - 1) - 1) // sw + 1
    ctx.reserve_array([3, c * kh * kw, max(bh, 0) * max(bw, 0)], 8, "patch index")  # the index and two temporaries
    ci, ki, kj = np.meshgrid(np.arange(c), np.arange(kh), np.arange(kw), indexing="ij")
    bi, bj = np.meshgrid(np.arange(bh), np.arange(bw), indexing="ij")
    rows = ki.reshape(-1, 1) * dh + bi.reshape(1, -1) * sh
    cols = kj.reshape(-1, 1) * dw + bj.reshape(1, -1) * sw
    return (ci.reshape(-1, 1) * hp * wp + rows * wp + cols).astype(np.int64)


@lowering("onnx", "aten.im2col.default")
def im2col(ctx, node):
    """``F.unfold`` with static channels and spatial size: pad, flatten, gather patches."""
    a = bind(node, "self", "kernel_size", "dilation", "padding", "stride")
    out, cst = _ct(ctx)
    shape = ctx.info(a.self).shape
    if ctx.rank(a.self) != 4 or not all(isinstance(s, int) for s in shape[1:]):
        raise Unsupported("im2col with dynamic channels/spatial dims or unbatched input")
    c, h, w = shape[1:]
    (kh, kw), (dh, dw) = per_axis(a.kernel_size, 2), per_axis(a.dilation, 2)
    (ph, pw), (sh, sw) = per_axis(a.padding, 2), per_axis(a.stride, 2)
    x = ctx.t(a.self, cst)
    if ph or pw:
        x = ctx.op("Pad", x, ctx.ints([0, 0, ph, pw, 0, 0, ph, pw]))
    idx = _patch_index(ctx, c, h + 2 * ph, w + 2 * pw, kh, kw, dh, dw, sh, sw)
    # the row length spelled out: Reshape's -1 is undefined for an empty batch
    flat = ctx.op("Reshape", x, ctx.ints([0, c * (h + 2 * ph) * (w + 2 * pw)]))
    return ctx.cast(ctx.op("Gather", flat, ctx.const_array(idx, "im2col_index"), axis=1), cst, out)
