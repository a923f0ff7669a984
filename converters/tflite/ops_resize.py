"""ONNX Resize -> TFLite: RESIZE_BILINEAR / RESIZE_NEAREST_NEIGHBOR over NHWC, 4-D values.

The builtins compute the source coordinate from the size ratio with align_corners or
half-pixel centres; the mapper uses them only where that is ONNX's transform.
"""

from __future__ import annotations

import numpy as np

from ..errors import Unsupported
from .emit import Emitter, attrs
from .mappers import maps
from .model import TensorType as T
from .ops_nn import TO_NCHW, TO_NHWC, transpose
from .ops_shape import _slice1d, shape_tensor


@maps("Resize")
def resize(em: Emitter, node) -> None:
    a = attrs(node)
    text = {k: (v.decode() if isinstance(v, bytes) else v) for k, v in a.items()}
    mode = text.get("mode", "nearest")
    ctm = text.get("coordinate_transformation_mode", "half_pixel")
    if em.rank(node.input[0]) != 4:
        raise Unsupported("Resize of a value that is not 4-D")
    if mode == "nearest":
        if ctm != "asymmetric" or text.get("nearest_mode", "round_prefer_floor") != "floor":
            raise Unsupported(f"nearest Resize with {ctm}/{text.get('nearest_mode')} (TFLite has asymmetric/floor)")
        code, opts = "RESIZE_NEAREST_NEIGHBOR", ("ResizeNearestNeighborOptions", {"align_corners": False,
                                                                                   "half_pixel_centers": False})
    elif mode == "linear" and ctm == "pytorch_half_pixel" and not _static_above_one(em.shape(node.output[0])):
        _torch_bilinear_dynamic(em, node)
        return
    elif mode == "linear" and ctm in ("half_pixel", "align_corners", "pytorch_half_pixel"):
        code, opts = "RESIZE_BILINEAR", ("ResizeBilinearOptions", {"align_corners": ctm == "align_corners",
                                                                    "half_pixel_centers": ctm != "align_corners"})
    else:
        raise Unsupported(f"Resize mode {mode} with {ctm}")
    size = _resize_size(em, node)
    x = transpose(em, em.t(node.input[0]), TO_NHWC[4], "nhwc")
    y = em.tmp(T.FLOAT32, None, "resize")
    em.op(code, [x, size], [y], opts)
    em.op("TRANSPOSE", [y, em.const(np.asarray(TO_NCHW[4], np.int32))], [em.out()])


def _torch_bilinear_dynamic(em: Emitter, node) -> None:
    """pytorch_half_pixel to a size known at run time: it is TFLite's half-pixel bilinear for
    an output side above 1, and (source coordinate 0) its align-corners bilinear for a side of
    1. Bilinear is separable: resize H, then W, each pass picking its mode by its own size."""
    size = _resize_size(em, node)
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


def _static_above_one(shape) -> bool:
    return shape is not None and all(d > 1 for d in shape[2:])


def _resize_size(em: Emitter, node) -> int:
    """The output [H, W] (int32): from sizes, or floor(in * scale) (at run time when dynamic)."""
    ins = list(node.input) + [""] * (4 - len(node.input))
    shape = em.shape(node.input[0])
    if ins[3]:
        sizes = em.const_value(ins[3])
        if sizes is not None:
            return em.const(np.asarray(sizes, np.int32).reshape(-1)[2:])
        return _slice1d(em, em.t(ins[3]), 2, 4)
    scales = em.const_value(ins[2])
    if scales is None:
        raise Unsupported("Resize with scales computed at run time")
    scales = np.asarray(scales, np.float32).reshape(-1)
    if scales[0] != 1 or scales[1] != 1:
        raise Unsupported("Resize over the batch or channel dims")
    if all(d >= 0 for d in shape[2:]):
        return em.const(np.floor(np.asarray(shape[2:], np.float64) * scales[2:]).astype(np.int32))
    hw = em.cast(_slice1d(em, shape_tensor(em, em.t(node.input[0])), 2, 4), T.FLOAT32)
    scaled = em.unary("FLOOR", em.binary("MUL", hw, em.const(scales[2:]), options=("MulOptions",
                                                                                    {"fused_activation_function": 0})))
    return em.cast(scaled, T.INT32)
