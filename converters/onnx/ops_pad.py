"""Growing lowerings: constant/reflection/replication/circular pads, tile and repeat."""

from __future__ import annotations

from ..aten.args import bind
from ..aten.registry import lowering
from ..errors import Unsupported


@lowering("onnx", "aten.constant_pad_nd.default", "aten.pad.default")
def constant_pad_nd(ctx, node):
    a = bind(node, "self", "pad", mode="constant")  # constant_pad_nd has no mode
    if a.mode != "constant":
        mode = {"reflect": "reflect", "replicate": "edge", "circular": "wrap"}.get(a.mode)
        if mode is None or (mode == "wrap" and ctx.opset < 19):
            raise Unsupported(f"pad mode {a.mode} at opset {ctx.opset}")
    else:
        mode = "constant"
    if mode != "constant":
        _check_extents(ctx, a.self, a.pad, a.mode)
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


def _check_extents(ctx, x, pads, mode: str) -> None:
    """Refuse a reflect/edge/wrap pad of a tensor with no elements, or one whose negative pads leave
    a padded dim nothing to read: ONNX Runtime fails at run there, LiteRT's MIRROR_PAD at allocate."""
    shape = ctx.info(x).shape
    if any(d == 0 for d in shape):
        raise Unsupported(f"{mode} padding of a tensor with no elements")
    for i in range(len(pads) // 2):
        lo, hi, size = pads[2 * i], pads[2 * i + 1], shape[len(shape) - 1 - i]
        if isinstance(size, int) and isinstance(lo, int) and isinstance(hi, int) \
                and size + min(lo, 0) + min(hi, 0) <= 0 and max(lo, hi) > 0:
            raise Unsupported(f"{mode} padding by ({lo}, {hi}) of a dim of {size}: negative pads leave nothing to "
                              f"repeat")


def _pad_mode(mode):
    def lower(ctx, node):
        a = bind(node, "self", "padding")
        if mode == "wrap" and ctx.opset < 19:
            raise Unsupported("circular padding needs opset >= 19")
        _check_extents(ctx, a.self, list(a.padding), {"edge": "replicate", "wrap": "circular"}.get(mode, mode))
        return ctx.op("Pad", ctx.t(a.self), ctx.ints(_onnx_pads(ctx.rank(a.self), list(a.padding))), mode=mode)

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
