"""MaxPool and AveragePool (1-D and 2-D as TFLite's 2-D NHWC pools, 3-D by separable passes),
LpPool (1-D, 2-D), GlobalAveragePool and GlobalMaxPool.

Every pad becomes an explicit PAD before a VALID pool, so any ``auto_pad``, ``pads`` and
``ceil_mode`` is exact (``window.py`` has the geometry): a ceil-mode output reads an extra pad
at the end. MaxPool pads with -inf, which never wins a window (with 0 after a Relu). AveragePool pads with zeros and
divides the windows' sums by how many cells each one counts (``count_include_pad``: the
explicit pads are counted, ceil mode's extension never is), a constant per output position;
where every window counts the same the plain TFLite pool already averages right. Dilated pools
(static sizes) take one strided slice per kernel tap, combined by MAXIMUM or summed. On spatial
sizes known only at run time the pads must not depend on them: explicit pads (MaxPool, and
AveragePool with ``count_include_pad``), or ``SAME_UPPER``, which is TFLite's SAME padding.
"""

from __future__ import annotations

import numpy as np

from ...errors import Unsupported
from ..core.emit import Emitter, attrs
from ..core.mappers import maps
from ..core.model import TensorType as T
from ..core.window import Axis, auto_pad, window_axes
from .nn import TO_NCHW, TO_NHWC, _from_4d, _to_4d, transpose

_VALID, _SAME = 1, 0
# 8/16-bit integers pool in float32 (exact: every value is a float32), as LiteRT's integer pools
# are its quantized kernels
_VIA_FLOAT = (T.INT8, T.UINT8, T.INT16)


def _pool_axes(em: Emitter, node, a: dict) -> list[Axis] | None:
    """The two axes of the 2-D (NHWC) view of a 1-D/2-D pool; None for SAME_UPPER over a
    dynamic size (TFLite's SAME padding)."""
    shape = em.shape(node.input[0])
    sizes = list(shape[2:])
    kernel = list(a.get("kernel_shape", []))
    if len(kernel) != len(sizes):
        raise Unsupported(f"{node.op_type} whose kernel_shape does not have one entry per spatial dim")
    if any(d < 0 for d in sizes) and auto_pad(a) == "SAME_UPPER":
        return None
    axes = window_axes(a, sizes, kernel, node.op_type)
    if any(ax.dilation != 1 for ax in axes) and any(ax.size < 0 for ax in axes):
        raise Unsupported(f"dilated {node.op_type} over a spatial dim known only at run time (TFLite's pools "
                          "have no dilation; its taps are sliced at static sizes)")
    if int(a.get("ceil_mode", 0)) and any(ax.size < 0 for ax in axes):
        raise Unsupported(f"{node.op_type} with ceil_mode=1 over a spatial dim known only at run time "
                          "(its extra pad depends on the size)")
    return [Axis(1, 1, 1, 1, 0, 0)] * (2 - len(axes)) + axes


def _end_pads(a: dict, axes: list[Axis]) -> list[int]:
    ceil = int(a.get("ceil_mode", 0))
    return [ax.end + (ax.ceil_extra() if ceil else 0) for ax in axes]


def _pad(em: Emitter, x: int, axes: list[Axis], ends: list[int], value) -> int:
    """x (NHWC) padded by the axes' begin pads and ``ends``."""
    if not any(ax.begin for ax in axes) and not any(ends):
        return x
    spec = em.const(np.array([[0, 0]] + [[ax.begin, e] for ax, e in zip(axes, ends)] + [[0, 0]], np.int32))
    s = em.shape_of(x)
    shape = None if s is None else [s[0]] + [d + ax.begin + e if d >= 0 else -1
                                             for d, ax, e in zip(s[1:3], axes, ends)] + [s[3]]
    y = em.tmp(em.dtype_of(x), shape, "pad")
    if value == 0:  # PAD's zeros: XNNPACK takes PAD, not PADV2
        em.op("PAD", [x, spec], [y])
    else:
        em.op("PADV2", [x, spec, em.const(np.asarray(value, np.float32))], [y])
    return y


def _max_pad_value(em: Emitter, node, axes: list[Axis], ends: list[int]) -> float:
    """What MaxPool pads with: -inf, which never wins a window; or 0, which XNNPACK's PAD takes,
    where that gives the same maxima: the input is a Relu's (every value >= 0) and no window
    lies wholly in the pads (undilated, pads at each end shorter than the kernel)."""
    if any(ax.dilation != 1 or ax.begin >= ax.kernel or e >= ax.kernel for ax, e in zip(axes, ends)):
        return -np.inf
    producer = next((n for n in em.graph.node if node.input[0] in n.output), None)
    return 0.0 if producer is not None and producer.op_type == "Relu" else -np.inf


def _pool2d(em: Emitter, code: str, x: int, axes: list[Axis], padding: int) -> int:
    if any(ax.dilation != 1 for ax in axes):
        return _dilated(em, code, x, axes)
    y = em.tmp(T.FLOAT32, None, "pool")
    em.op(code, [x], [y], ("Pool2DOptions", {
        "padding": padding, "stride_h": axes[0].stride, "stride_w": axes[1].stride,
        "filter_height": axes[0].kernel, "filter_width": axes[1].kernel, "fused_activation_function": 0}))
    return y


def _dilated(em: Emitter, code: str, x: int, axes: list[Axis]) -> int:
    """A VALID dilated pool of the padded NHWC ``x`` (static sizes): one strided slice per
    kernel tap, combined by MAXIMUM, or summed and divided by the kernel size (the average
    pool's full-window divisor, which the caller rescales as for any pool)."""
    h, w = _padded_sizes(em, x)
    oh, ow = ((n - ax.extent) // ax.stride + 1 for n, ax in zip((h, w), axes))
    acc = None
    for i in range(axes[0].kernel):
        for j in range(axes[1].kernel):
            top, left = i * axes[0].dilation, j * axes[1].dilation
            tap = em.tmp(T.FLOAT32, None, "tap")
            em.op("STRIDED_SLICE", [x, em.const(np.array([0, top, left, 0], np.int32)),
                                    em.const(np.array([0, top + (oh - 1) * axes[0].stride + 1,
                                                       left + (ow - 1) * axes[1].stride + 1, 0], np.int32)),
                                    em.const(np.array([1, axes[0].stride, axes[1].stride, 1], np.int32))], [tap],
                  ("StridedSliceOptions", {"begin_mask": 9, "end_mask": 9}))
            acc = tap if acc is None else em.binary("MAXIMUM" if code == "MAX_POOL_2D" else "ADD", acc, tap)
    if code == "MAX_POOL_2D":
        return acc
    return em.binary("MUL", acc, em.const(np.float32(1.0 / (axes[0].kernel * axes[1].kernel))))


def _padded_sizes(em: Emitter, x: int) -> tuple[int, int]:
    shape = em.shape_of(x)
    if shape is None or any(d < 0 for d in shape[1:3]):
        raise Unsupported("dilated pooling over a size known only at run time")
    return shape[1], shape[2]


def _same_axes(em: Emitter, node, a: dict) -> list[Axis]:
    """Kernel and strides only (the pads are TFLite's SAME)."""
    n = em.rank(node.input[0]) - 2
    k, s = list(a["kernel_shape"]), list(a.get("strides", [1] * n))
    if any(v != 1 for v in a.get("dilations", [1])):
        raise Unsupported(f"dilated {node.op_type} (TFLite's pools have no dilation)")
    return [Axis(-1, 1, 1, 1, 0, 0)] * (2 - n) + [Axis(-1, int(kk), int(ss), 1, 0, 0) for kk, ss in zip(k, s)]


def _in_float(em: Emitter, x: int, node) -> int:
    if em.dtype_of(x) in _VIA_FLOAT:
        return em.cast(x, T.FLOAT32)
    if em.dtype_of(x) != T.FLOAT32:
        raise Unsupported(f"{node.op_type} of int32/int64 (TFLite's pools are float32, or quantized integers)")
    return x


def _finish(em: Emitter, y: int, rank: int) -> None:
    """The pooled NHWC float tensor back to the output's layout and type."""
    want = em.dtype_of(em.out())
    _from_4d(em, em.cast(y, want), rank)


def _pool_input(em: Emitter, node, a: dict, code: str, op: str) -> tuple[int, int, list[Axis] | None] | None:
    """A 3-D pool emitted whole (``_pool3d``: None); else the input as an NHWC float tensor, its
    own rank and the pooled axes (None for auto_pad SAME), a pool of another rank refused."""
    rank = em.rank(node.input[0])
    if rank == 5:
        _pool3d(em, node, a, code)
        return None
    if 0 in list(em.shape(node.input[0]) or ()):  # XNNPACK's delegate fails to prepare it (ai-edge-litert 2.3.0)
        raise Unsupported(f"{op} of a tensor with no elements")
    if rank not in (3, 4):
        raise Unsupported(f"{rank - 2}-D {op}")
    axes = _pool_axes(em, node, a)
    x, rank = _to_4d(em, node.input[0])
    return _in_float(em, x, node), rank, axes


@maps("MaxPool")
def max_pool(em: Emitter, node) -> None:
    a = attrs(node)
    if len(node.output) > 1 and node.output[1]:
        raise Unsupported("MaxPool's indices output")
    pool_input = _pool_input(em, node, a, "MAX_POOL_2D", "MaxPool")
    if pool_input is None:
        return
    x, rank, axes = pool_input
    if axes is None:
        _finish(em, _pool2d(em, "MAX_POOL_2D", x, _same_axes(em, node, a), _SAME), rank)
        return
    ends = _end_pads(a, axes)
    x = _pad(em, x, axes, ends, _max_pad_value(em, node, axes, ends))
    _finish(em, _pool2d(em, "MAX_POOL_2D", x, axes, _VALID), rank)


@maps("AveragePool")
def average_pool(em: Emitter, node) -> None:
    a = attrs(node)
    pool_input = _pool_input(em, node, a, "AVERAGE_POOL_2D", "AveragePool")
    if pool_input is None:
        return
    x, rank, axes = pool_input
    include = bool(int(a.get("count_include_pad", 0)))
    if axes is None:
        if include:
            raise Unsupported("AveragePool with auto_pad=SAME_UPPER and count_include_pad=1 over a spatial dim "
                              "known only at run time")
        _finish(em, _pool2d(em, "AVERAGE_POOL_2D", x, _same_axes(em, node, a), _SAME), rank)
        return
    _finish(em, _average(em, a, x, axes, include), rank)


def _average(em: Emitter, a: dict, x: int, axes: list[Axis], include: bool) -> int:
    ends = _end_pads(a, axes)
    padded = any(ax.begin for ax in axes) or any(ends)
    if not padded or (include and ends == [ax.end for ax in axes]):
        return _pool2d(em, "AVERAGE_POOL_2D", _pad(em, x, axes, ends, 0.0), axes, _VALID)
    if any(ax.size < 0 for ax in axes):
        raise Unsupported("AveragePool excluding pads from the count over a spatial dim known only at run time")
    if not include and ends == [ax.end for ax in axes] and all(_is_same(ax) for ax in axes):
        return _pool2d(em, "AVERAGE_POOL_2D", x, axes, _SAME)
    y = _pool2d(em, "AVERAGE_POOL_2D", _pad(em, x, axes, ends, 0.0), axes, _VALID)
    return em.binary("MUL", y, em.const(_rescale(a, axes, include)[None, :, :, None]))


def _is_same(ax: Axis) -> bool:
    """Whether the axis' pads are TFLite's SAME ones (the odd pad at the end), undilated."""
    if ax.dilation != 1:
        return False
    out = -(-ax.size // ax.stride)
    total = max((out - 1) * ax.stride + ax.kernel - ax.size, 0)
    return (ax.begin, ax.end) == (total // 2, total - total // 2)


def _rescale(a: dict, axes: list[Axis], include: bool) -> np.ndarray:
    """kernel cells / counted cells per output position: TFLite's VALID average of the padded
    input divides every window by its full size."""
    ceil = bool(int(a.get("ceil_mode", 0)))
    counts = [np.asarray(ax.counted(ax.out_size(ceil), include), np.float64) for ax in axes]
    full = float(axes[0].kernel * axes[1].kernel)
    with np.errstate(divide="ignore"):
        return (full / np.outer(counts[0], counts[1])).astype(np.float32)


def _pool3d(em: Emitter, node, a: dict, code: str) -> None:
    """A 3-D pool as two 2-D ones (a box window's max, and its cell count, factor over axes):
    over (H, W) with depth folded into the batch, then over D with (H, W) folded into width.
    Both passes run on static sizes with every pad explicit."""
    shape = em.shape(node.input[0])
    if any(d < 0 for d in shape[1:]):
        raise Unsupported(f"3-D {node.op_type} over dims known only at run time")
    axes = window_axes(a, shape[2:], list(a.get("kernel_shape", [])), node.op_type)
    ceil = bool(int(a.get("ceil_mode", 0)))
    include = bool(int(a.get("count_include_pad", 0)))
    value = -np.inf if code == "MAX_POOL_2D" else 0.0
    c, (d, h, w) = shape[1], shape[2:]
    od, oh, ow = (ax.out_size(ceil) for ax in axes)
    ends = _end_pads(a, axes)
    x = _in_float(em, transpose(em, em.t(node.input[0]), TO_NHWC[5], "ndhwc"), node)  # [N, D, H, W, C]
    hw = em.tmp(T.FLOAT32, [-1, h, w, c], "hw")
    em.op("RESHAPE", [x, em.const(np.array([-1, h, w, c], np.int32))], [hw])
    y = _pool2d(em, code, _pad(em, hw, axes[1:], ends[1:], value), axes[1:], _VALID)  # [N*D, oh, ow, C]
    dz = em.tmp(T.FLOAT32, [-1, d, oh * ow, c], "d")
    em.op("RESHAPE", [y, em.const(np.array([-1, d, oh * ow, c], np.int32))], [dz])
    one = Axis(oh * ow, 1, 1, 1, 0, 0)
    y = _pool2d(em, code, _pad(em, dz, [axes[0], one], [ends[0], 0], value), [axes[0], one], _VALID)
    if code == "AVERAGE_POOL_2D" and (any(ax.begin for ax in axes) or any(ends)):
        counts = [np.asarray(ax.counted(ax.out_size(ceil), include), np.float64) for ax in axes]
        cells = np.einsum("i,j,k->ijk", *counts).reshape(od, oh * ow, 1)
        full = float(np.prod([ax.kernel for ax in axes]))
        with np.errstate(divide="ignore"):
            y = em.binary("MUL", y, em.const((full / cells).astype(np.float32)[None]))
    out = em.tmp(T.FLOAT32, [-1, od, oh, ow, c], "ndhwc")
    em.op("RESHAPE", [y, em.const(np.array([-1, od, oh, ow, c], np.int32))], [out])
    em.op("TRANSPOSE", [em.cast(out, em.dtype_of(em.out())), em.const(np.asarray(TO_NCHW[5], np.int32))],
          [em.out()])


@maps("LpPool")
def lp_pool(em: Emitter, node) -> None:
    """(sum over the window of |x|^p)^(1/p): the window sums are the average pool of |x|^p
    over zero pads times the kernel size (pads add nothing to a sum); p = 1 and 2 take ABS
    and MUL, others POW."""
    a = attrs(node)
    p = int(a.get("p", 2))
    if p < 1:
        raise Unsupported(f"LpPool with p={p}")
    rank = em.rank(node.input[0])
    if rank not in (3, 4):
        raise Unsupported(f"{rank - 2}-D LpPool")
    axes = _pool_axes(em, node, a)
    if axes is None:
        raise Unsupported("LpPool with auto_pad=SAME_UPPER over a spatial dim known only at run time")
    x, rank = _to_4d(em, node.input[0])
    x = em.unary("ABS", _in_float(em, x, node))
    if p == 2:
        x = em.binary("MUL", x, x)
    elif p > 2:
        x = em.binary("POW", x, em.const(np.float32(p)))
    y = _pool2d(em, "AVERAGE_POOL_2D", _pad(em, x, axes, _end_pads(a, axes), 0.0), axes, _VALID)
    y = em.binary("MUL", y, em.const(np.float32(axes[0].kernel * axes[1].kernel)))
    if p == 2:
        y = em.unary("SQRT", y)
    elif p > 2:
        y = em.binary("POW", y, em.const(np.float32(1.0 / p)))
    _finish(em, y, rank)


@maps("GlobalAveragePool", "GlobalMaxPool")
def global_pool(em: Emitter, node) -> None:
    rank = em.rank(node.input[0])
    if rank < 3:  # ONNX's global pools take (N, C, *spatial): there are no spatial axes to reduce
        raise Unsupported(f"{node.op_type} of a rank-{rank} input (ONNX requires N, C and spatial axes)")
    code = "MEAN" if node.op_type == "GlobalAveragePool" else "REDUCE_MAX"
    em.op(code, [em.t(node.input[0]), em.const(np.arange(2, rank, dtype=np.int32))], [em.out()],
          ("ReducerOptions", {"keep_dims": True}))
