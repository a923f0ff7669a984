"""Growing lowerings: constant/reflection/replication/circular pads, tile and repeat."""

from __future__ import annotations

from ..aten.args import bind
from ..aten.registry import lowering
from ..errors import Unsupported
from .shapes import INT64_MAX


@lowering("onnx", "aten.constant_pad_nd.default", "aten.pad.default")
def constant_pad_nd(ctx, node):
    a = bind(node, "self", "pad", mode="constant")  # constant_pad_nd has no mode
    if a.mode != "constant":
        mode = {"reflect": "reflect", "replicate": "edge", "circular": "wrap"}.get(a.mode)
        if mode is None:
            raise Unsupported(f"pad mode {a.mode} at opset {ctx.opset}")
    else:
        mode = "constant"
    if mode == "wrap":
        return _circular(ctx, a.self, list(a.pad))
    if mode != "constant":
        _check_static_pads(a.pad, a.mode)
        return _pad_then_crop(ctx, a.self, a.pad, mode)
    out = ctx.out_info().dtype
    value = None if mode != "constant" else ctx.const(a.value or 0, out)
    return ctx.op("Pad", ctx.t(a.self), ctx.ints(_onnx_pads(ctx.rank(a.self), a.pad)), value, mode=mode)


def _onnx_pads(rank: int, pads) -> list:
    """torch's pads (last dim first, a (before, after) pair per dim) as ONNX's: every dim's
    begin, then every dim's end, in dim order."""
    begins, ends = [0] * rank, [0] * rank
    for i in range(len(pads) // 2):
        begins[rank - 1 - i], ends[rank - 1 - i] = pads[2 * i], pads[2 * i + 1]
    return begins + ends


def _check_static_pads(pads, mode: str) -> None:
    """Refuse pads known only at run time (they are split by sign)."""
    if not all(isinstance(p, int) for p in pads):
        raise Unsupported(f"{mode} padding by pads known only at run time")


def _pad_then_crop(ctx, x, pads, mode):
    """torch's reflect/replicate/circular pad with negative pads: the positive pads first, then the
    negative ones crop (ONNX Runtime's Pad refuses a negative pad that leaves a padded dim empty)."""
    rank = ctx.rank(x)
    onnx_pads = _onnx_pads(rank, list(pads))
    grow = [max(p, 0) for p in onnx_pads]
    y = ctx.op("Pad", ctx.t(x), ctx.ints(grow), mode=mode) if any(grow) else ctx.op("Identity", ctx.t(x))
    crop = [max(-p, 0) for p in onnx_pads]
    axes = [i for i in range(rank) if crop[i] or crop[rank + i]]
    if not axes:
        return y
    starts = [crop[i] for i in axes]
    ends = [-crop[rank + i] if crop[rank + i] else INT64_MAX for i in axes]
    return ctx.op("Slice", y, ctx.ints(starts), ctx.ints(ends), ctx.ints(axes))


def _circular(ctx, x, pads):
    """torch's circular pad: the negative pads crop first, then each padded dim wraps what is left
    (its last ``before`` elements ahead, its first ``after`` behind): Slices and a Concat per dim,
    which ONNX Runtime runs on tensors with no elements too (its wrap Pad does not) and TFLite maps."""
    _check_static_pads(pads, "circular")
    rank = ctx.rank(x)
    onnx_pads = _onnx_pads(rank, pads)
    y = _pad_then_crop(ctx, x, [min(p, 0) for p in pads], "constant")
    shape = ctx.info(x).shape
    for axis in range(rank):
        before, after = max(onnx_pads[axis], 0), max(onnx_pads[rank + axis], 0)
        if not before and not after:
            continue
        size = shape[axis]
        if isinstance(size, int):
            kept = size + min(onnx_pads[axis], 0) + min(onnx_pads[rank + axis], 0)
            if max(before, after) > kept:
                raise Unsupported(f"circular padding of {max(before, after)} around {kept} elements (torch "
                                  "refuses wrapping more than once)")
        ax = ctx.ints([axis])
        parts = [y]
        if before:
            parts.insert(0, ctx.op("Slice", y, ctx.ints([-before]), ctx.ints([INT64_MAX]), ax))
        if after:
            parts.append(ctx.op("Slice", y, ctx.ints([0]), ctx.ints([after]), ax))
        y = ctx.op("Concat", *parts, axis=axis)
    return y


def _pad_mode(mode):
    def lower(ctx, node):
        a = bind(node, "self", "padding")
        if mode == "wrap":
            return _circular(ctx, a.self, list(a.padding))
        _check_static_pads(list(a.padding), {"edge": "replicate"}.get(mode, mode))
        return _pad_then_crop(ctx, a.self, list(a.padding), mode)

    return lower


for _d in ("1d", "2d", "3d"):
    lowering("onnx", f"aten.reflection_pad{_d}.default")(_pad_mode("reflect"))
    lowering("onnx", f"aten.replication_pad{_d}.default")(_pad_mode("edge"))
    lowering("onnx", f"aten.circular_pad{_d}.default")(_pad_mode("wrap"))


@lowering("onnx", "aten.tile.default")
def tile(ctx, node):
    a = bind(node, "self", "dims")
    reps = [1] * (ctx.rank(a.self) - len(a.dims)) + list(a.dims)
    x = ctx.t(a.self)
    extra = len(reps) - ctx.rank(a.self)
    if extra:
        x = ctx.op("Reshape", x, ctx.op("Concat", ctx.ints([1] * extra), ctx.shape_of(a.self), axis=0))
    return ctx.op("Tile", x, ctx.ints(reps))


@lowering("onnx", "aten.repeat.default")
def repeat(ctx, node):
    a = bind(node, "self", "repeats")
    x = ctx.t(a.self)
    extra = len(a.repeats) - ctx.rank(a.self)
    if extra:
        x = ctx.op("Reshape", x, ctx.op("Concat", ctx.ints([1] * extra), ctx.shape_of(a.self), axis=0))
    return ctx.op("Tile", x, ctx.ints(a.repeats))
