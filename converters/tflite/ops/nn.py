"""Convolutions: ONNX is channels-first, TFLite's kernels are NHWC.

Each mapper moves its input to NHWC with a TRANSPOSE, runs the NHWC builtin and moves the
result back; ``passes/optimize_layout.py`` then cancels the transposes between neighbouring NHWC ops, so
they remain only at the edges of NHWC regions. Weights are re-laid out once, here. 1-D
convolutions run as 2-D ones over a height of 1. ONNX's pads (explicit, or what ``auto_pad``
stands for on static sizes, ``window.py``) become a PAD of zeros before a VALID op, exact for
any size; ``SAME_UPPER`` over a size known only at run time is TFLite's SAME padding. Pools
are in ``ops/pool.py``.
"""

from __future__ import annotations

import numpy as np

from ...errors import Unsupported
from ..core.emit import Emitter, attrs, to_compute_array
from ..core.mappers import maps
from ..core.model import TensorType as T
from ..core.window import Axis, auto_pad, tflite_same_padding, window_axes
from . import depthwise_split
from .shape import _slice1d, shape_tensor

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
        if sum(d < 0 for d in s) <= 1 and em.dtype_of(x) == T.FLOAT32:  # a constant RESHAPE, which XNNPACK takes
            em.op("RESHAPE", [x, em.const(np.array([s[0], s[1], 1, s[2]], np.int32))], [y])
        else:
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
    out = em.shape(em.node.output[0])
    if out is not None and len(out) == 3 and sum(d < 0 for d in out) <= 1 and em.dtype_of(y) == T.FLOAT32:
        em.op("RESHAPE", [y, em.const(np.array(out, np.int32))], [em.out()])
        return
    em.op("SQUEEZE", [y], [em.out()], ("SqueezeOptions", {"squeeze_dims": [2]}))


def _conv_axes(em: Emitter, node, a: dict, kernel: list[int]) -> tuple[list[Axis], int]:
    """The spatial axes (ONNX order) and TFLite padding of a Conv: explicit pads and VALID, or
    TFLite's SAME for ``SAME_UPPER`` over a size known only at run time."""
    sizes = list(em.shape(node.input[0])[2:])
    if any(d < 0 for d in sizes) and auto_pad(a) == "SAME_UPPER":
        flat = window_axes({k: v for k, v in a.items() if k != "auto_pad"}, sizes, kernel, "Conv")
        return [Axis(ax.size, ax.kernel, ax.stride, ax.dilation, 0, 0) for ax in flat], _SAME
    return window_axes(a, sizes, kernel, "Conv"), _VALID


def _pad_axes(em: Emitter, x: int, axes: list[Axis]) -> int:
    """x (channels-last) padded with zeros by the axes' begin/end pads."""
    if not any(ax.begin or ax.end for ax in axes):
        return x
    spec = em.const(np.array([[0, 0]] + [[ax.begin, ax.end] for ax in axes] + [[0, 0]], np.int32))
    y = em.tmp(em.dtype_of(x), None, "pad")
    em.op("PAD", [x, spec], [y])
    return y


@maps("Conv")
def conv(em: Emitter, node) -> None:
    a = attrs(node)
    w = em.const_value(node.input[1])
    w_shape = list(w.shape) if w is not None else em.shape(node.input[1])
    if w_shape is None or any(d < 0 for d in w_shape):
        raise Unsupported("Conv with weights of a shape known only at run time")
    rank = em.rank(node.input[0])
    if rank not in (3, 4, 5):
        raise Unsupported(f"{rank - 2}-D Conv (TFLite has 1-D, 2-D and 3-D convolutions)")
    axes, padding = _conv_axes(em, node, a, w_shape[2:])
    if rank == 5:
        if w is None:
            raise Unsupported("3-D Conv with weights computed at run time")
        _conv3d(em, node, a, w, axes, padding)
        return
    if rank == 3:
        axes = [Axis(1, 1, 1, 1, 0, 0)] + axes
    elif w is not None and padding == _VALID:
        axes, w = _live_taps(axes, w)
    x, rank = _to_4d(em, node.input[0])
    group = int(a.get("group", 1))
    if padding == _VALID and tflite_same_padding(axes):
        padding = _SAME
    else:
        x = _pad_axes(em, x, axes)
    m, cg = w_shape[0], w_shape[1]
    c = cg * group
    # CONV_2D's kernel reads a bias whenever the op lists three inputs: zeros when ONNX has none
    bias = em.t(node.input[2]) if len(node.input) > 2 and node.input[2] else em.const(np.zeros(m, np.float32))
    y = em.tmp(T.FLOAT32, None, "conv")
    geometry = {"padding": padding, "stride_h": axes[0].stride, "stride_w": axes[1].stride,
                "dilation_h_factor": axes[0].dilation, "dilation_w_factor": axes[1].dilation,
                "fused_activation_function": 0}
    if group > 1 and group == c and m % c == 0:
        _depthwise(em, node, w, [x, bias], y, {**geometry, "depth_multiplier": m // c})
    else:
        filt = _filter(em, node, w, [0, 2, 3, 1])  # OHWI (I = C/group)
        em.op("CONV_2D", [x, filt, bias], [y], ("Conv2DOptions", geometry))
    _from_4d(em, y, rank)


def _depthwise(em: Emitter, node, w: np.ndarray | None, x_bias: list[int], y: int, options: dict) -> None:
    """DEPTHWISE_CONV_2D, or a sum of smaller ones where XNNPACK runs the kernel slowly
    (``depthwise_split.py``): a constant float kernel of over 25 taps, stride 1, SAME."""
    x, bias = x_bias
    split = None
    if w is not None and options["padding"] == _SAME and options["stride_h"] == options["stride_w"] == 1 \
            and options["dilation_h_factor"] == options["dilation_w_factor"] == 1:
        split = depthwise_split.plan(int(w.shape[2]) if w.ndim == 4 else 1, int(w.shape[-1]))
    if split is None:
        filt = _filter(em, node, w, [1, 2, 3, 0])  # [1, kh, kw, C*mult]
        em.op("DEPTHWISE_CONV_2D", [x, filt, bias], [y], ("DepthwiseConv2DOptions", options))
        return
    whole = to_compute_array(w, "the weight")
    whole = (whole[:, :, None, :] if whole.ndim == 3 else whole).transpose([1, 2, 3, 0])  # [1, kh, kw, C*mult]
    axis, parts = split
    zeros = em.const(np.zeros(whole.shape[-1], np.float32))
    acc = None
    for k, (index, dilation) in enumerate(parts):
        part = em.tmp(T.FLOAT32, None, "dw_part")
        dil = {"dilation_h_factor": dilation} if axis == "rows" else {"dilation_w_factor": dilation}
        em.op("DEPTHWISE_CONV_2D", [x, em.const(depthwise_split.part_filter(whole, axis, index)),
                                    bias if k == 0 else zeros],
              [part], ("DepthwiseConv2DOptions", {**options, **dil}))
        if acc is not None:
            total = y if k == len(parts) - 1 else em.tmp(T.FLOAT32, None, "dw_sum")
            em.op("ADD", [acc, part], [total])
            part = total
        acc = part


def _live_taps(axes: list[Axis], w: np.ndarray) -> tuple[list[Axis], np.ndarray]:
    """A 2-D conv's kernel less the taps that read only padding zeros at every output position
    (a dilated conv over a small map: DeepLab's rate-12/24/36 atrous convs over a 4x4 map read
    only their centre tap): the kept taps' span, with the pads shifted by the dropped ones, gives
    the same sums without them (each dropped product is 0 * w, 0 for a finite weight), and the
    PAD before the conv no longer writes a map mostly of zeros. Per axis, where the shifted
    pads stay >= 0; static sizes and finite weights only."""
    if not np.all(np.isfinite(w)):
        return axes, w
    kept, spans = [], []
    for ax in axes:
        span = _live_span(ax)
        if span is None:
            kept.append(ax)
            spans.append(slice(None))
            continue
        t0, t1 = span
        k = t1 - t0 + 1
        begin = ax.begin - t0 * ax.dilation
        out = (ax.size + ax.begin + ax.end - (ax.kernel - 1) * ax.dilation - 1) // ax.stride + 1
        end = (out - 1) * ax.stride + (k - 1) * ax.dilation + 1 - ax.size - begin
        kept.append(Axis(ax.size, k, ax.stride, ax.dilation if k > 1 else 1, begin, end))
        spans.append(slice(t0, t1 + 1))
    return kept, np.ascontiguousarray(w[:, :, spans[0], spans[1]])


def _live_span(ax: Axis) -> tuple[int, int] | None:
    """(first, last) tap reading the input at some output position, when that drops a tap and
    the pads stay >= 0; None to keep the axis as it is."""
    if ax.size < 0 or ax.kernel == 1:
        return None
    out = (ax.size + ax.begin + ax.end - (ax.kernel - 1) * ax.dilation - 1) // ax.stride + 1
    live = []
    for t in range(ax.kernel):
        lo = ax.begin - t * ax.dilation  # output i reads input i * stride - lo ... in [0, size)
        i = max(0, -(-lo // ax.stride))
        if i < out and i * ax.stride < lo + ax.size:
            live.append(t)
    if not live or (live[0] == 0 and live[-1] == ax.kernel - 1):
        return None
    t0, t1 = live[0], live[-1]
    begin = ax.begin - t0 * ax.dilation
    end = (out - 1) * ax.stride + (t1 - t0) * ax.dilation + 1 - ax.size - begin
    return (t0, t1) if begin >= 0 and end >= 0 else None


def _filter(em: Emitter, node, w: np.ndarray | None, perm: list[int]) -> int:
    """The 2-D weight [M, C/g, kh, kw] (1-D ones get kh = 1) laid out by ``perm``: once, at
    conversion, for a constant; by EXPAND_DIMS and TRANSPOSE for one computed at run time."""
    if w is not None:
        w = to_compute_array(w, "the weight")
        w = w[:, :, None, :] if w.ndim == 3 else w
        return em.const(np.ascontiguousarray(w.transpose(perm)))
    wt = em.t(node.input[1])
    shape = em.shape(node.input[1])
    if len(shape) == 3:
        shape = shape[:2] + [1] + shape[2:]
        w4 = em.tmp(em.dtype_of(wt), shape, "w4")
        em.op("EXPAND_DIMS", [wt, em.const(np.array(2, np.int32))], [w4])
        wt = w4
    return transpose(em, wt, perm, "filter")


def _conv3d(em: Emitter, node, a: dict, w: np.ndarray, axes: list[Axis], padding: int) -> None:
    """CONV_3D (no groups: a grouped one runs per group between a SPLIT and a CONCATENATION)."""
    group = int(a.get("group", 1))
    x = _pad_axes(em, transpose(em, em.t(node.input[0]), TO_NHWC[5], "ndhwc"), axes)
    w = to_compute_array(w, "the weight")
    parts = [x]
    if group > 1:
        parts = [em.tmp(T.FLOAT32, None, "group") for _ in range(group)]
        em.op("SPLIT", [em.const(np.array(4, np.int32)), x], parts, ("SplitOptions", {"num_splits": group}))
    m = w.shape[0] // group
    ys = []
    for g, part in enumerate(parts):
        filt = em.const(np.ascontiguousarray(w[g * m:(g + 1) * m].transpose(2, 3, 4, 1, 0)))  # DHWIO
        y = em.tmp(T.FLOAT32, None, "conv3d")
        em.op("CONV_3D", [part, filt], [y], ("Conv3DOptions", {
            "padding": padding, "stride_d": axes[0].stride, "stride_h": axes[1].stride, "stride_w": axes[2].stride,
            "dilation_d_factor": axes[0].dilation, "dilation_h_factor": axes[1].dilation,
            "dilation_w_factor": axes[2].dilation, "fused_activation_function": 0}))
        ys.append(y)
    y = ys[0]
    if group > 1:
        y = em.tmp(T.FLOAT32, None, "conv3d")
        em.op("CONCATENATION", ys, [y], ("ConcatenationOptions", {"axis": 4}))
    if len(node.input) > 2 and node.input[2]:
        y = em.binary("ADD", y, em.t(node.input[2]))
    em.op("TRANSPOSE", [y, em.const(np.asarray(TO_NCHW[5], np.int32))], [em.out()])




@maps("ConvTranspose")
def conv_transpose(em: Emitter, node) -> None:
    """TRANSPOSE_CONV with VALID padding gives the full ``(in-1)*s + (k-1)*d + 1`` output (a
    dilated kernel is the kernel with zeros between its taps); ONNX's begin pads crop its start,
    its end pads less ``output_padding`` crop its end (STRIDED_SLICE), or pad it with zeros
    where ``output_padding`` passes them, before the bias. Groups run one TRANSPOSE_CONV each."""
    a = attrs(node)
    rank = em.rank(node.input[0])
    if rank not in (3, 4):
        raise Unsupported(f"{rank - 2}-D ConvTranspose (TFLite's TRANSPOSE_CONV is 2-D)")
    w = em.const_value(node.input[1])
    group = int(a.get("group", 1))
    if w is None:
        w = _run_time_weight(em, node, a, group)
    else:
        w = _dilated(to_compute_array(w, "the weight"), a)
    begin, end = _transpose_crops(em, node, a, list(w.shape[2:]))
    strides = [int(v) for v in a.get("strides", [1] * (rank - 2))]
    if rank == 3:
        w = w[:, :, None, :] if isinstance(w, np.ndarray) else w.unit_height()
        strides, begin, end = [1] + strides, [0] + begin, [0] + end
    x, rank = _to_4d(em, node.input[0])
    per = w.shape[0] // group
    ys = [_transpose_conv(em, part, w if group == 1 else w[g * per:(g + 1) * per], strides)
          for g, part in enumerate(_channel_groups(em, x, group))]
    y = ys[0]
    if group > 1:
        y = em.tmp(T.FLOAT32, None, "tconv")
        em.op("CONCATENATION", ys, [y], ("ConcatenationOptions", {"axis": 3}))
    y = _crop_or_extend(em, y, begin, end)
    if len(node.input) > 2 and node.input[2]:
        y = em.binary("ADD", y, em.t(node.input[2]))
    _from_4d(em, y, rank)


def _dilated(w: np.ndarray, a: dict) -> np.ndarray:
    """The kernel with ``d - 1`` zeros between taps along each spatial axis."""
    dil = [int(v) for v in a.get("dilations", [1] * (w.ndim - 2))]
    if all(d == 1 for d in dil):
        return w
    out = np.zeros(w.shape[:2] + tuple((k - 1) * d + 1 for k, d in zip(w.shape[2:], dil)), w.dtype)
    out[(slice(None), slice(None)) + tuple(slice(None, None, d) for d in dil)] = w
    return out


def _transpose_crops(em: Emitter, node, a: dict, kernel) -> tuple[list[int], list[int]]:
    """Per spatial axis, what to cut from the full output's start and end (a negative end: zeros
    to add). ``output_shape`` and ``auto_pad`` SAME_* set the pads from a total (ONNX's spec:
    SAME_UPPER puts the odd one at the end); the total for SAME is ``k + output_padding - s``,
    the same for every input size."""
    n = len(kernel)
    strides = [int(v) for v in a.get("strides", [1] * n)]
    opad = [int(v) for v in a.get("output_padding", [0] * n)]
    mode = auto_pad(a)
    if "output_shape" in a or mode.startswith("SAME"):
        if "output_shape" in a:
            sizes = list(em.shape(node.input[0])[2:])
            if any(d < 0 for d in sizes):
                raise Unsupported("ConvTranspose with output_shape over a spatial dim known only at run time")
            want = [int(v) for v in a["output_shape"]][-n:]
            totals = [(i - 1) * s + k + o - t for i, s, k, o, t in zip(sizes, strides, kernel, opad, want)]
        else:
            totals = [k + o - s for s, k, o in zip(strides, kernel, opad)]
        upper = mode == "SAME_UPPER"
        begin = [t // 2 if upper else t - t // 2 for t in totals]  # floor, as onnx's reference (negative: extend)
        if any(b < 0 for b in begin):
            raise Unsupported("ConvTranspose whose output_shape extends its output at the start")
        pads = begin + [t - b for t, b in zip(totals, begin)]
    else:
        pads = [int(v) for v in a.get("pads", [0] * 2 * n)] if mode == "NOTSET" else [0] * 2 * n
    return pads[:n], [pads[n + i] - opad[i] for i in range(n)]


def _channel_groups(em: Emitter, x: int, group: int) -> list[int]:
    if group == 1:
        return [x]
    parts = [em.tmp(T.FLOAT32, None, "group") for _ in range(group)]
    em.op("SPLIT", [em.const(np.array(3, np.int32)), x], parts, ("SplitOptions", {"num_splits": group}))
    return parts


class _RunTimeWeight:
    """A ConvTranspose weight computed at run time: its static shape and tensor (no groups, no
    dilation: those would slice or spread it at conversion)."""

    def __init__(self, em: Emitter, name: str, shape: list[int]):
        self.em, self.name, self.shape = em, name, tuple(shape)

    def unit_height(self) -> "_RunTimeWeight":
        """The 1-D weight [C, M, k] seen as [C, M, 1, k] (EXPAND_DIMS in ``filter``)."""
        return _RunTimeWeight(self.em, self.name, list(self.shape[:2]) + [1] + list(self.shape[2:]))

    def filter(self, em: Emitter) -> int:
        wt = em.t(self.name)
        if len(em.shape(self.name)) == 3:
            w4 = em.tmp(em.dtype_of(wt), list(self.shape), "w4")
            em.op("EXPAND_DIMS", [wt, em.const(np.array(2, np.int32))], [w4])
            wt = w4
        return transpose(em, wt, [1, 2, 3, 0], "filter")


def _run_time_weight(em: Emitter, node, a: dict, group: int) -> _RunTimeWeight:
    shape = em.shape(node.input[1])
    if shape is None or any(d < 0 for d in shape):
        raise Unsupported("ConvTranspose with weights of a shape known only at run time")
    if group != 1 or any(int(d) != 1 for d in a.get("dilations", [1])):
        raise Unsupported("grouped or dilated ConvTranspose with weights computed at run time")
    return _RunTimeWeight(em, node.input[1], shape)


def _transpose_conv(em: Emitter, x: int, w, strides: list[int]) -> int:
    """The full VALID TRANSPOSE_CONV of NHWC ``x`` by ONNX weight ``w`` [C, M, kh, kw]; its
    output shape is computed at run time from x's."""
    m, kh, kw = w.shape[1], w.shape[2], w.shape[3]
    if isinstance(w, _RunTimeWeight):
        filt = w.filter(em)
    else:
        filt = em.const(np.ascontiguousarray(w.transpose(1, 2, 3, 0)))  # [M, kh, kw, C]
    dims = shape_tensor(em, x)  # NHWC
    hw = _slice1d(em, dims, 1, 3)
    full = em.binary("ADD", em.binary("MUL", em.binary("SUB", hw, em.const(np.array(1, np.int32))),
                                      em.const(np.asarray(strides, np.int32))),
                     em.const(np.array([kh, kw], np.int32)))
    out_shape = em.tmp(T.INT32, [4], "out_shape")
    em.op("CONCATENATION", [_slice1d(em, dims, 0, 1), full, em.const(np.array([m], np.int32))], [out_shape],
          ("ConcatenationOptions", {"axis": 0}))
    y = em.tmp(T.FLOAT32, None, "tconv")
    em.op("TRANSPOSE_CONV", [out_shape, filt, x, -1], [y], ("TransposeConvOptions", {
        "padding": _VALID, "stride_h": strides[0], "stride_w": strides[1], "fused_activation_function": 0}))
    return y


def _crop_or_extend(em: Emitter, y: int, begin: list[int], end: list[int]) -> int:
    """NHWC ``y`` less ``begin`` at the start and ``end`` at the end of H and W (zeros added
    where ``end`` is negative)."""
    if any(e < 0 for e in end):
        spec = em.const(np.array([[0, 0]] + [[0, max(-e, 0)] for e in end] + [[0, 0]], np.int32))
        p = em.tmp(T.FLOAT32, None, "extend")
        em.op("PAD", [y, spec], [p])
        y, end = p, [max(e, 0) for e in end]
    if not any(begin) and not any(end):
        return y
    eb, er = end
    end_mask = 1 | 8 | (2 if not eb else 0) | (4 if not er else 0)
    c = em.tmp(T.FLOAT32, None, "crop")
    em.op("STRIDED_SLICE", [y, em.const(np.array([0, begin[0], begin[1], 0], np.int32)),
                            em.const(np.array([0, -eb, -er, 0], np.int32)), em.const(np.ones(4, np.int32))],
          [c], ("StridedSliceOptions", {"begin_mask": 1 | 8, "end_mask": end_mask}))
    return c
