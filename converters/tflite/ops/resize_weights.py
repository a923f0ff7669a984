"""ONNX Resize along one axis as a matrix: ``y = W @ x + b`` over that axis.

At static sizes every Resize (any mode, coordinate transform, rounding, cubic coefficient,
``exclude_outside``, antialias, ``tf_crop_and_resize`` with its extrapolation value) is
separable: one such affine map per resized axis, applied in turn. The formulas are the ONNX
specification's (as onnx's reference implementation reads them), computed in float64:

* the source coordinate ``x`` of output index ``y`` per ``coordinate_transformation_mode``,
  with the *given* scale where scales are given (not the size ratio);
* the taps around ``x``: 2 for nearest and linear, 4 for cubic, a window widened by 1/scale
  for an antialiased downscale; ``ratio = x - floor(x)`` in (0, 1] (an integer ``x`` counts
  as ratio 1 from the pixel to its left);
* taps outside the input read the edge pixel, or with ``exclude_outside`` get weight 0 and the
  rest are renormalised;
* ``tf_crop_and_resize``: an output whose source lies outside the input is the extrapolation
  value (a zero row of ``W`` and that value in ``b``).

Nearest is a matrix of one-hot rows, also given as the picked indices (``gather``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

__all__ = ["AxisResize", "AxisMap", "axis_map", "source_coords", "TRANSFORMS", "NEAREST_MODES", "MODES"]

MODES = ("nearest", "linear", "cubic")
TRANSFORMS = ("half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners", "asymmetric",
              "tf_crop_and_resize")
NEAREST_MODES = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil")


@dataclass(frozen=True)
class AxisResize:
    """One resized axis: input length, output length, the scale of the transform (the given one,
    else output / input length) and the roi pair."""

    length: int
    out: int
    scale: float
    roi: tuple[float, float] = (0.0, 1.0)


@dataclass(frozen=True)
class AxisMap:
    weights: np.ndarray  # [out, length] float64
    bias: np.ndarray  # [out] float64 (the extrapolation value where extrapolated, else 0)
    gather: np.ndarray | None  # [out] source indices when every row is one-hot and b is 0

    @property
    def is_identity(self) -> bool:
        n = self.weights.shape[0]
        return (n == self.weights.shape[1] and not self.bias.any()
                and np.array_equal(self.weights, np.eye(n)))


def source_coords(ax: AxisResize, ctm: str, dtype=np.float64) -> tuple[np.ndarray, np.ndarray | None]:
    """The source coordinate of every output index, and which ones are extrapolated. The
    specification's formulas with ``length_resized`` the integer output length (as ONNX Runtime
    computes them; onnx's reference uses ``scale * length`` in align_corners and
    tf_crop_and_resize, and -0.5 for pytorch_half_pixel at length 1)."""
    f = dtype
    y = np.arange(ax.out, dtype=f)
    length, s, n = f(ax.length), f(ax.scale), ax.out
    half = f(0.5)
    if ctm == "align_corners":
        return (np.zeros(n, f) if n == 1 else y * (length - 1) / f(n - 1)), None
    if ctm == "asymmetric":
        return y / s, None
    if ctm == "pytorch_half_pixel":
        return (np.zeros(n, f) if n == 1 else (y + half) / s - half), None
    if ctm == "half_pixel":
        return (y + half) / s - half, None
    if ctm == "half_pixel_symmetric":
        offset = length / 2 * (1 - f(n) / (s * length))
        return offset + (y + half) / s - half, None
    if ctm == "tf_crop_and_resize":
        lo, hi = f(ax.roi[0]), f(ax.roi[1])
        if n == 1:
            x = np.full(n, half * (lo + hi) * (length - 1), f)
        else:
            x = lo * (length - 1) + y * (hi - lo) * (length - 1) / f(n - 1)
        return x, (x < 0) | (x > length - 1)
    raise ValueError(ctm)


def _nearest(ratio: float, mode: str) -> np.ndarray:
    if ratio == 1:
        return np.array([0.0, 1.0])
    pick_right = {"round_prefer_floor": ratio > 0.5, "round_prefer_ceil": ratio >= 0.5, "floor": False,
                  "ceil": True}[mode]
    return np.array([0.0, 1.0]) if pick_right else np.array([1.0, 0.0])


def _antialias(ratio: float, scale: float, mode: str, a: float) -> tuple[int, np.ndarray]:
    """(first tap offset, weights) of the antialiasing filter: support widened by 1/scale."""
    s = min(scale, 1.0)
    half = 1 if mode == "linear" else 2
    start = int(math.floor(-half / s) + 1)
    offsets = np.arange(start, 2 - start) - ratio
    if mode == "linear":
        c = np.clip(1 - np.abs(offsets * s), 0, 1)
    else:
        c = np.array([_cubic_kernel(t * s, a) for t in offsets])
    return start, c / c.sum()


def _cubic_kernel(t: float, a: float) -> float:
    t = abs(t)
    if t <= 1:
        return (a + 2) * t ** 3 - (a + 3) * t ** 2 + 1
    return a * t ** 3 - 5 * a * t ** 2 + 8 * a * t - 4 * a if t < 2 else 0.0


def _taps(ratio: float, mode: str, nearest_mode: str, scale: float, antialias: bool,
          a: float) -> tuple[int, np.ndarray]:
    """(offset of the first tap from the pixel left of x, tap weights)."""
    if mode == "nearest":
        return 0, _nearest(ratio, nearest_mode)
    if antialias:
        return _antialias(ratio, scale, mode, a)
    if mode == "linear":
        return 0, np.array([1 - ratio, ratio])
    return -1, np.array([_cubic_kernel(t, a) for t in (ratio + 1, ratio, 1 - ratio, 2 - ratio)])


def axis_map(ax: AxisResize, *, mode: str, ctm: str, nearest_mode: str = "round_prefer_floor",
             cubic_coeff_a: float = -0.75, exclude_outside: bool = False, antialias: bool = False,
             extrapolation_value: float = 0.0) -> AxisMap:
    if ax.out == ax.length and math.isclose(ax.scale, 1.0) and ax.roi == (0.0, 1.0):
        return AxisMap(np.eye(ax.out), np.zeros(ax.out), np.arange(ax.out))  # as onnx: an identity axis is skipped
    # nearest picks by rounding: computed in float32 as ONNX Runtime does, so that a coordinate
    # on a rounding boundary falls where the runtime puts it
    x, extrapolated = source_coords(ax, ctm, np.float32 if mode == "nearest" else np.float64)
    x = x.astype(np.float64)
    w = np.zeros((ax.out, ax.length))
    bias = np.zeros(ax.out)
    for i, xi in enumerate(x):
        if extrapolated is not None and extrapolated[i]:
            bias[i] = extrapolation_value
            continue
        left = math.floor(xi)
        ratio = xi - left
        if ratio == 0:  # an integer source coordinate: ratio 1 from the pixel on its left
            left, ratio = left - 1, 1.0
        first, c = _taps(ratio, mode, nearest_mode, ax.scale, antialias, cubic_coeff_a)
        idx = left + first + np.arange(len(c))
        if exclude_outside:
            c = np.where((idx < 0) | (idx >= ax.length), 0.0, c)
            total = c.sum()
            c = c / total if total else c
        np.add.at(w[i], np.clip(idx, 0, ax.length - 1), c)
    gather = None
    if not bias.any() and np.all((w == 0) | (w == 1)) and np.all(w.sum(axis=1) == 1):
        gather = w.argmax(axis=1)
    return AxisMap(w, bias, gather)
