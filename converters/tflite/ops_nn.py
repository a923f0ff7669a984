"""Convolutions and pools: ONNX is channels-first, TFLite's kernels are NHWC.

Each mapper moves its input to NHWC with a TRANSPOSE, runs the NHWC builtin and moves the
result back; ``layout.py`` then cancels the transposes between neighbouring NHWC ops, so
they remain only at the edges of NHWC regions. Weights are re-laid out once, here. 1-D
convolutions and pools run as 2-D ones over a height of 1. ONNX's explicit pads become a
PAD (zeros; -inf for max pools) before a VALID op, exact for any size; average pools that
exclude pads from the count need the pads to be TFLite's SAME ones.
"""

from __future__ import annotations

import numpy as np

from ..errors import Unsupported
from .emit import Emitter, attrs, to_compute_array
from .mappers import maps
from .model import TensorType as T
from .ops_shape import _slice1d, shape_tensor

TO_NHWC = {3: [0, 2, 1], 4: [0, 2, 3, 1], 5: [0, 2, 3, 4, 1]}
TO_NCHW = {3: [0, 2, 1], 4: [0, 3, 1, 2], 5: [0, 4, 1, 2, 3]}
_VALID, _SAME = 1, 0


def transpose(em: Emitter, x: int, perm: list[int], hint: str) -> int:
    s = em.shape_of(x)
    y = em.tmp(em.dtype_of(x), None if s is None else [s[p] for p in perm], hint)
    em.op("TRANSPOSE", [x, em.const(np.asarray(perm, np.int32))], [y])
    return y


def _to_4d(em: Emitter, x_name: str) -> tuple[int, int]:
    """(NHWC tensor, original rank): 1-D spatial data gets a height of 1 first."""
    rank = em.rank(x_name)
    x = em.t(x_name)
    if rank == 3:
        s = em.shape(x_name)
        y = em.tmp(em.dtype_of(x), [s[0], s[1], 1, s[2]], "h1")
        em.op("EXPAND_DIMS", [x, em.const(np.array(2, np.int32))], [y])
        x = y
    elif rank != 4:
        raise Unsupported(f"{rank - 2}-D {em.node.op_type} (TFLite has 2-D kernels for it)")
    return transpose(em, x, TO_NHWC[4], "nhwc"), rank


def _from_4d(em: Emitter, y_nhwc: int, rank: int) -> None:
    """Back to the ONNX layout, into the node's output."""
    if rank == 4:
        em.op("TRANSPOSE", [y_nhwc, em.const(np.asarray(TO_NCHW[4], np.int32))], [em.out()])
        return
    y = transpose(em, y_nhwc, TO_NCHW[4], "nchw")
    em.op("SQUEEZE", [y], [em.out()], ("SqueezeOptions", {"squeeze_dims": [2]}))


def _spatial(a: dict, key: str, n: int, default: int, rank: int) -> list[int]:
    v = list(a.get(key, [default] * n))
    return [default] * (2 - n) + v if rank == 3 else v


def _pads(a: dict, rank: int, what: str) -> list[int]:
    """ONNX pads as [top, left, bottom, right] (2-D view)."""
    auto = a.get("auto_pad", b"NOTSET")
    auto = auto.decode() if isinstance(auto, bytes) else auto
    if auto not in ("NOTSET", "VALID"):
        raise Unsupported(f"{what} with auto_pad={auto}")
    n = rank - 2
    p = list(a.get("pads", [0] * (2 * n)))
    if rank == 3:
        return [0, p[0], 0, p[1]]
    return p


def _pad(em: Emitter, x: int, pads: list[int], value: float | None = None) -> int:
    t, l, b, r = pads
    if not any(pads):
        return x
    spec = em.const(np.array([[0, 0], [t, b], [l, r], [0, 0]], np.int32))
    y = em.tmp(em.dtype_of(x), None, "pad")
    if value is None:
        em.op("PAD", [x, spec], [y])
    else:
        em.op("PADV2", [x, spec, em.const(np.float32(value))], [y])
    return y


@maps("Conv")
def conv(em: Emitter, node) -> None:
    a = attrs(node)
    w = em.const_value(node.input[1])
    if w is None:
        raise Unsupported("Conv with weights computed at run time")
    rank = em.rank(node.input[0])
    if rank == 5:
        _conv3d(em, node, a, w)
        return
    if rank == 3:
        w = w[:, :, None, :]
    x, rank = _to_4d(em, node.input[0])
    group = int(a.get("group", 1))
    strides, dil = _spatial(a, "strides", rank - 2, 1, rank), _spatial(a, "dilations", rank - 2, 1, rank)
    x = _pad(em, x, _pads(a, rank, "Conv"))
    w = to_compute_array(w, "the weight")
    m, cg = w.shape[0], w.shape[1]
    c = cg * group
    # CONV_2D's kernel reads a bias whenever the op lists three inputs: zeros when ONNX has none
    bias = em.t(node.input[2]) if len(node.input) > 2 and node.input[2] else em.const(np.zeros(m, np.float32))
    y = em.tmp(T.FLOAT32, None, "conv")
    geometry = {"padding": _VALID, "stride_h": strides[0], "stride_w": strides[1],
                "dilation_h_factor": dil[0], "dilation_w_factor": dil[1], "fused_activation_function": 0}
    if group > 1 and group == c and m % c == 0:
        filt = em.const(np.ascontiguousarray(w.transpose(1, 2, 3, 0)))  # [1, kh, kw, C*mult]
        em.op("DEPTHWISE_CONV_2D", [x, filt, bias], [y],
              ("DepthwiseConv2DOptions", {**geometry, "depth_multiplier": m // c}))
    else:
        filt = em.const(np.ascontiguousarray(w.transpose(0, 2, 3, 1)))  # OHWI (I = C/group)
        em.op("CONV_2D", [x, filt, bias], [y], ("Conv2DOptions", geometry))
    _from_4d(em, y, rank)


def _conv3d(em: Emitter, node, a: dict, w: np.ndarray) -> None:
    if int(a.get("group", 1)) != 1:
        raise Unsupported("grouped 3-D Conv (TFLite's CONV_3D has no groups)")
    p = list(a.get("pads", [0] * 6))
    x = transpose(em, em.t(node.input[0]), TO_NHWC[5], "ndhwc")
    if any(p):
        spec = em.const(np.array([[0, 0], [p[0], p[3]], [p[1], p[4]], [p[2], p[5]], [0, 0]], np.int32))
        xp = em.tmp(T.FLOAT32, None, "pad")
        em.op("PAD", [x, spec], [xp])
        x = xp
    s, d = list(a.get("strides", [1, 1, 1])), list(a.get("dilations", [1, 1, 1]))
    filt = em.const(np.ascontiguousarray(to_compute_array(w, "the weight").transpose(2, 3, 4, 1, 0)))  # DHWIO
    y = em.tmp(T.FLOAT32, None, "conv3d")
    em.op("CONV_3D", [x, filt], [y], ("Conv3DOptions", {
        "padding": _VALID, "stride_d": s[0], "stride_h": s[1], "stride_w": s[2], "dilation_d_factor": d[0],
        "dilation_h_factor": d[1], "dilation_w_factor": d[2], "fused_activation_function": 0}))
    if len(node.input) > 2 and node.input[2]:
        y = em.binary("ADD", y, em.t(node.input[2]), options=("AddOptions", {"fused_activation_function": 0}))
    em.op("TRANSPOSE", [y, em.const(np.asarray(TO_NCHW[5], np.int32))], [em.out()])


@maps("ConvTranspose")
def conv_transpose(em: Emitter, node) -> None:
    """TRANSPOSE_CONV with VALID padding gives the full (in-1)*s + k output; ONNX's pads and
    output_padding then crop it (STRIDED_SLICE), for any input size."""
    a = attrs(node)
    w = em.const_value(node.input[1])
    if w is None:
        raise Unsupported("ConvTranspose with weights computed at run time")
    rank = em.rank(node.input[0])
    if int(a.get("group", 1)) != 1:
        raise Unsupported("grouped ConvTranspose (TFLite's TRANSPOSE_CONV has no groups)")
    if any(v != 1 for v in a.get("dilations", [1])):
        raise Unsupported("dilated ConvTranspose")
    if "output_shape" in a:
        raise Unsupported("ConvTranspose with output_shape")
    if rank == 3:
        w = w[:, :, None, :]
    x, rank = _to_4d(em, node.input[0])
    strides = _spatial(a, "strides", rank - 2, 1, rank)
    t, l, b, r = _pads(a, rank, "ConvTranspose")
    op = _spatial(a, "output_padding", rank - 2, 0, rank)
    if op[0] > b or op[1] > r:
        raise Unsupported("ConvTranspose whose output_padding passes its end pads")
    w = to_compute_array(w, "the weight")
    m, kh, kw = w.shape[1], w.shape[2], w.shape[3]
    filt = em.const(np.ascontiguousarray(w.transpose(1, 2, 3, 0)))  # [M, kh, kw, C]
    dims = shape_tensor(em, x)  # NHWC
    hw = _slice1d(em, dims, 1, 3)
    full = em.binary("ADD", em.binary("MUL", em.binary("SUB", hw, em.const(np.array(1, np.int32)),
                                                       options=("SubOptions", {"fused_activation_function": 0})),
                                      em.const(np.asarray(strides, np.int32)),
                                      options=("MulOptions", {"fused_activation_function": 0})),
                     em.const(np.array([kh, kw], np.int32)), options=("AddOptions", {"fused_activation_function": 0}))
    out_shape = em.tmp(T.INT32, [4], "out_shape")
    em.op("CONCATENATION", [_slice1d(em, dims, 0, 1), full, em.const(np.array([m], np.int32))], [out_shape],
          ("ConcatenationOptions", {"axis": 0}))
    y = em.tmp(T.FLOAT32, None, "tconv")
    bias = em.t(node.input[2]) if len(node.input) > 2 and node.input[2] else -1
    em.op("TRANSPOSE_CONV", [out_shape, filt, x, bias], [y], ("TransposeConvOptions", {
        "padding": _VALID, "stride_h": strides[0], "stride_w": strides[1], "fused_activation_function": 0}))
    eb, er = b - op[0], r - op[1]
    if t or l or eb or er:
        end_mask = 1 | 8 | (2 if not eb else 0) | (4 if not er else 0)
        c = em.tmp(T.FLOAT32, None, "crop")
        em.op("STRIDED_SLICE", [y, em.const(np.array([0, t, l, 0], np.int32)),
                                em.const(np.array([0, -eb, -er, 0], np.int32)), em.const(np.ones(4, np.int32))],
              [c], ("StridedSliceOptions", {"begin_mask": 1 | 8, "end_mask": end_mask}))
        y = c
    _from_4d(em, y, rank)


def _pool_geometry(em: Emitter, node, a: dict, rank: int):
    if int(a.get("ceil_mode", 0)):
        raise Unsupported("pooling with ceil_mode=1")
    if any(v != 1 for v in a.get("dilations", [1])):
        raise Unsupported("dilated pooling")
    k = _spatial(a, "kernel_shape", rank - 2, 1, rank)
    s = _spatial(a, "strides", rank - 2, 1, rank)
    return k, s


@maps("MaxPool")
def max_pool(em: Emitter, node) -> None:
    a = attrs(node)
    if len(node.output) > 1 and node.output[1]:
        raise Unsupported("MaxPool's indices output")
    if em.rank(node.input[0]) == 5:
        _pool_by_blocks(em, node, a, "REDUCE_MAX")
        return
    if em.rank(node.input[0]) not in (3, 4):
        raise Unsupported(f"{em.rank(node.input[0]) - 2}-D MaxPool")
    x, rank = _to_4d(em, node.input[0])
    k, s = _pool_geometry(em, node, a, rank)
    x = _pad(em, x, _pads(a, rank, "MaxPool"), float(np.finfo(np.float32).min))
    y = em.tmp(T.FLOAT32, None, "pool")
    em.op("MAX_POOL_2D", [x], [y], ("Pool2DOptions", {"padding": _VALID, "stride_h": s[0], "stride_w": s[1],
                                                      "filter_height": k[0], "filter_width": k[1],
                                                      "fused_activation_function": 0}))
    _from_4d(em, y, rank)


@maps("AveragePool")
def average_pool(em: Emitter, node) -> None:
    a = attrs(node)
    if em.rank(node.input[0]) == 5:
        _pool_by_blocks(em, node, a, "MEAN")
        return
    if em.rank(node.input[0]) not in (3, 4):
        raise Unsupported(f"{em.rank(node.input[0]) - 2}-D AveragePool")
    x, rank = _to_4d(em, node.input[0])
    k, s = _pool_geometry(em, node, a, rank)
    pads = _pads(a, rank, "AveragePool")
    padding = _VALID
    if any(pads):
        if int(a.get("count_include_pad", 0)):
            x = _pad(em, x, pads)
        else:
            padding = _same_or_refuse(em, node, k, s, pads)
    y = em.tmp(T.FLOAT32, None, "pool")
    em.op("AVERAGE_POOL_2D", [x], [y], ("Pool2DOptions", {"padding": padding, "stride_h": s[0], "stride_w": s[1],
                                                          "filter_height": k[0], "filter_width": k[1],
                                                          "fused_activation_function": 0}))
    _from_4d(em, y, rank)


def _pool_by_blocks(em: Emitter, node, a: dict, code: str) -> None:
    """A 3-D pool whose windows tile the input exactly (kernel == stride, no pads, static
    channels and spatial dims divisible by the kernel, as adaptive pools give): RESHAPE into
    blocks, then MEAN/REDUCE_MAX over the block axes. Other 3-D pools have no builtin."""
    k = list(a.get("kernel_shape", []))
    s = list(a.get("strides", [1] * len(k)))
    shape = em.shape(node.input[0])
    if (k != s or any(a.get("pads", [0])) or int(a.get("ceil_mode", 0)) or any(d < 0 for d in shape[1:])
            or any(n % kk for n, kk in zip(shape[2:], k))):
        raise Unsupported("3-D pooling other than non-overlapping windows that tile static dims (TFLite pools are 2-D)")
    (d, h, w), (kd, kh, kw) = shape[2:], k
    # 6-D blocks [N*C*D', kd, H', kh, W', kw] (XNNPACK takes at most 6 dims), reduced, then 5-D again
    blocks = [-1, kd, h // kh, kh, w // kw, kw]
    x = em.tmp(em.dtype_of(em.t(node.input[0])), blocks, "blocks")
    em.op("RESHAPE", [em.t(node.input[0]), em.const(np.asarray(blocks, np.int32))], [x])
    r = em.tmp(em.dtype_of(x), [-1, h // kh, w // kw], "pooled")
    em.op(code, [x, em.const(np.array([1, 3, 5], np.int32))], [r], ("ReducerOptions", {"keep_dims": False}))
    em.op("RESHAPE", [r, em.const(np.array([-1, shape[1], d // kd, h // kh, w // kw], np.int32))], [em.out()])


def _same_or_refuse(em: Emitter, node, k, s, pads) -> int:
    shape = em.shape(node.input[0])
    hw = shape[2:] if len(shape) == 4 else [1, shape[2]]
    for i, n in enumerate(hw):
        if n < 0:
            raise Unsupported("AveragePool excluding pads on a dynamic spatial dim")
        total = max((-(-n // s[i]) - 1) * s[i] + k[i] - n, 0)
        if [total // 2, total - total // 2] != [pads[i], pads[i + 2]]:
            raise Unsupported("AveragePool excluding pads that are not TFLite's SAME padding")
    return _SAME


@maps("GlobalAveragePool", "GlobalMaxPool")
def global_pool(em: Emitter, node) -> None:
    rank = em.rank(node.input[0])
    code = "MEAN" if node.op_type == "GlobalAveragePool" else "REDUCE_MAX"
    em.op(code, [em.t(node.input[0]), em.const(np.arange(2, rank, dtype=np.int32))], [em.out()],
          ("ReducerOptions", {"keep_dims": True}))
