"""Signal ops following onnx's reference. HannWindow, HammingWindow and BlackmanWindow over a
size known at run time: n = RANGE(0, size) in float32 and the cosine sums of each window (SIN
squared for Hann, as the reference). DFT at static shapes: one FULLY_CONNECTED whose constant
weight holds the cos/sin of 2 pi j k / n (computed in float64, stored as float32), over the
signal moved to the last axis as [real | imaginary]; forward, inverse (scaled by 1/n), onesided
(the first n // 2 + 1 bins) and the inverse of a onesided spectrum (numpy's irfft: the
Hermitian bins counted twice), the inverse's 1/n a DIV after the sums, with ``dft_length`` padding or truncating. A run-time axis or
dft_length is refused; so is the default axis of a rank other than 3 (1 before opset 20, -2
from it: the node does not say which)."""

from __future__ import annotations

import numpy as np

from ...errors import Unsupported
from ..core.emit import Emitter, attrs, compute_type
from ..core.mappers import maps
from ..core.model import TensorType as T

MAX_DFT_WEIGHT = 1 << 24
"""Elements of DFT's constant cos/sin matrix (64 MB of float32): a file of a few bytes could
claim a length of 10**6 and make the converter build 10**12."""

# window -> [(coefficient, harmonic)]: w(n) = sum c * cos(h * 2 pi n / N)  (Hann is SIN squared)
_COSINE_SUMS = {"HammingWindow": [(25.0 / 46.0, 0), (-(1 - 25.0 / 46.0), 1)],
                "BlackmanWindow": [(0.42, 0), (-0.5, 1), (0.08, 2)]}


def _scalar(em: Emitter, name: str) -> int:
    """The size as a 0-d int32: LiteRT's RANGE wants 0-d operands, and without this RESHAPE the size
    reached it 1-D in onnx 1.22's test_hannwindow (cause not found: the graph input is declared 0-d)."""
    x = em.cast(em.t(name), T.INT32)
    if em.shape(name) not in ([], [1]):
        raise Unsupported(f"window size {name!r} that is not a scalar")
    y = em.tmp(T.INT32, [], "size")
    em.op("RESHAPE", [x, em.const(np.zeros(0, np.int32))], [y])
    return y


def _phase(em: Emitter, node, scale: float) -> int:
    """scale * pi * n / N as float32, n = 0..size-1, N = size (periodic) or size - 1."""
    size = _scalar(em, node.input[0])
    n = em.tmp(T.INT32, [-1], "n")
    em.op("RANGE", [em.const(np.array(0, np.int32)), size, em.const(np.array(1, np.int32))], [n])
    periodic = int(attrs(node).get("periodic", 1))
    big_n = size if periodic else em.binary("SUB", size, em.const(np.array(1, np.int32)))
    steps = em.binary("MUL", em.cast(n, T.FLOAT32), em.const(np.float32(scale * np.pi)))
    return em.binary("DIV", steps, em.cast(big_n, T.FLOAT32))


def _window_out(em: Emitter, node, y: int) -> None:
    dtype = compute_type(int(attrs(node).get("output_datatype", 1)), f"{node.op_type}'s output_datatype")
    em.bind(node.output[0], em.cast(y, dtype))


@maps("HannWindow")
def hann_window(em: Emitter, node) -> None:
    s = em.unary("SIN", _phase(em, node, 1.0))
    _window_out(em, node, em.binary("MUL", s, s))


@maps("HammingWindow", "BlackmanWindow")
def cosine_sum_window(em: Emitter, node) -> None:
    y = None
    for c, h in _COSINE_SUMS[node.op_type]:
        term = em.const(np.float32(c)) if h == 0 else \
            em.binary("MUL", em.unary("COS", _phase(em, node, 2.0 * h)), em.const(np.float32(c)))
        y = term if y is None else em.binary("ADD", y, term)
    _window_out(em, node, y)


def _const_input(em: Emitter, node, i: int, what: str) -> int | None:
    if len(node.input) <= i or not node.input[i]:
        return None
    v = em.const_value(node.input[i])
    if v is None:
        raise Unsupported(f"DFT with {what} computed at run time")
    return int(np.asarray(v).reshape(-1)[0])


def _dft_axis(em: Emitter, node, rank: int) -> int:
    a = attrs(node)
    axis = _const_input(em, node, 2, "the axis")
    if axis is None:
        axis = a.get("axis")
    if axis is None:
        if rank != 3:
            raise Unsupported("DFT with the default axis over a rank other than 3 (1 before opset 20, -2 from it)")
        axis = 1
    axis = int(axis) % rank
    if axis == rank - 1:
        raise Unsupported("DFT along the last (real/imaginary) axis")
    return axis


def _dft_weight(length: int, n: int, inverse: bool, onesided: bool, complex_in: bool) -> np.ndarray:
    """[in, out] for FULLY_CONNECTED: in = [real (length) | imaginary (length)], out =
    [real (m) | imaginary (m)], or n real samples for the inverse of a onesided spectrum."""
    j = np.arange(length)
    if inverse and onesided:  # time t from bins k < n // 2 + 1, the others Hermitian
        k = j[j < n // 2 + 1]
        t = np.arange(n)
        theta = 2 * np.pi * ((np.outer(k, t) % n) / n)
        w = np.where((k == 0) | (2 * k == n), 1.0, 2.0)[:, None]
        re = np.zeros((length, n))
        im = np.zeros((length, n))
        re[: len(k)] = w * np.cos(theta)
        im[: len(k)] = -w * np.sin(theta)
        return np.concatenate([re, im] if complex_in else [re], 0)
    m = n // 2 + 1 if onesided else n
    theta = 2 * np.pi * ((np.outer(j, np.arange(m)) % n) / n)
    theta[j >= n] = 0
    keep = (j < n)[:, None].astype(np.float64)
    cos, sin = np.cos(theta) * keep, np.sin(theta) * keep
    sign = 1.0 if inverse else -1.0
    # (xr + i xi)(cos + i sign sin) = xr cos - sign xi sin + i (sign xr sin + xi cos)
    from_re = np.concatenate([cos, sign * sin], 1)
    from_im = np.concatenate([-sign * sin, cos], 1)
    return np.concatenate([from_re, from_im] if complex_in else [from_re], 0)


@maps("DFT")
def dft(em: Emitter, node) -> None:
    a = attrs(node)
    shape = em.shape(node.input[0])
    if shape is None or any(d < 0 for d in shape) or shape[-1] not in (1, 2):
        raise Unsupported("DFT of a shape that is not static with a last dim of 1 or 2")
    rank, inverse, onesided = len(shape), bool(int(a.get("inverse", 0))), bool(int(a.get("onesided", 0)))
    axis = _dft_axis(em, node, rank)
    length = shape[axis]
    n = _const_input(em, node, 1, "dft_length") or (2 * (length - 1) if inverse and onesided else length)
    if n <= 0:
        raise Unsupported(f"DFT of length {n}")
    if shape[-1] * length * 2 * max(n, length) > MAX_DFT_WEIGHT:
        raise Unsupported(f"DFT of length {n} over {length} samples: its cos/sin matrix is over MAX_DFT_WEIGHT "
                          f"({MAX_DFT_WEIGHT} elements)")
    others = [i for i in range(rank - 1) if i != axis]
    lead = [shape[i] for i in others]
    z = _transposed(em, em.t(node.input[0]), others + [rank - 1, axis])  # [others.., c, length]
    z = _reshaped(em, z, [int(np.prod(lead, dtype=np.int64))] + [shape[-1] * length])
    w = _dft_weight(length, n, inverse, onesided, shape[-1] == 2)
    y = em.tmp(T.FLOAT32, [int(np.prod(lead, dtype=np.int64)), w.shape[1]], "spectrum")
    em.op("FULLY_CONNECTED", [z, em.const(np.ascontiguousarray(w.T.astype(np.float32))), -1], [y],
          ("FullyConnectedOptions", {"fused_activation_function": 0, "keep_num_dims": False}))
    if inverse:  # 1/n after the sums (a DIV rounds once; weights cos/n rounded each term)
        y = em.binary("DIV", y, em.const(np.float32(n)))
    parts = 1 if inverse and onesided else 2
    y = _reshaped(em, y, lead + [parts, w.shape[1] // parts])
    back = [0] * rank  # [others.., parts, m] -> the input's order with m at axis, parts last
    for pos, i in enumerate(others):
        back[i] = pos
    back[axis], back[rank - 1] = len(others) + 1, len(others)
    em.bind(node.output[0], _transposed(em, y, back))


def _transposed(em: Emitter, x: int, perm: list[int]) -> int:
    if perm == sorted(perm):
        return x
    y = em.tmp(em.dtype_of(x), None, "transposed")
    em.op("TRANSPOSE", [x, em.const(np.asarray(perm, np.int32))], [y])
    return y


def _reshaped(em: Emitter, x: int, shape: list[int]) -> int:
    y = em.tmp(em.dtype_of(x), list(shape), "reshaped")
    em.op("RESHAPE", [x, em.const(np.asarray(shape, np.int32))], [y])
    return y
