"""The numbers of the weight-only options both targets offer (``to_onnx(weights=)``,
``to_tflite(weights=)``): which options exist, which constants they touch, and how a float32
weight becomes float16 or symmetric per-channel int8. Each target's own pass
(``onnx/weight_only.py``, ``tflite/weight_storage.py``) decides where the stored weight is read.

* float16: a value is stored as ``float16(w)``; a finite weight beyond float16's range (65504)
  cannot be (``NotStorable``). Inf and NaN are kept as they are.
* int8: per channel ``c`` along the weight's output-channel axis, ``s_c = max|w_c| / 127`` (as
  float32) and ``q = clip(rint(w / s_c), -127, 127)`` with zero point 0, so ``|w - s_c q| <= s_c / 2``.
  An all-zero channel gets ``s_c = 1`` (its weights are 0 exactly). A non-finite weight, or a
  channel whose ``s_c`` would be below float32's smallest normal, cannot be (``NotStorable``).
"""

from __future__ import annotations

import numpy as np

from ..serde.errors import Pt2UsageError

__all__ = ["WEIGHT_OPTIONS", "MIN_ELEMENTS", "INT8_MAX", "NotStorable", "check_weight_option", "to_float16",
           "quantize_symmetric", "describe"]

WEIGHT_OPTIONS = ("fp16", "int8")
MIN_ELEMENTS = 1024  # smaller constants (biases, norms, scalars) stay float32, as TFLite's converter leaves them
INT8_MAX = 127  # symmetric int8: [-127, 127], zero point 0 (LiteRT's hybrid kernels require it)
_FP16_MAX = float(np.finfo(np.float16).max)


class NotStorable(Exception):
    """A weight the option cannot store faithfully (the reason is the message); it stays float32."""


def check_weight_option(weights) -> None:
    """``Pt2UsageError`` (a ``ValueError``) for anything but ``None`` or one of ``WEIGHT_OPTIONS``."""
    if weights is not None and (not isinstance(weights, str) or weights not in WEIGHT_OPTIONS):
        raise Pt2UsageError(f"weights={weights!r}: expected one of {', '.join(WEIGHT_OPTIONS)} (or None: float32)")


def to_float16(w: np.ndarray) -> np.ndarray:
    finite = w[np.isfinite(w)]
    if finite.size and float(np.abs(finite).max()) > _FP16_MAX:
        raise NotStorable("a finite value beyond float16's range (65504)")
    return np.ascontiguousarray(w.astype(np.float16))


def quantize_symmetric(w: np.ndarray, axis: int) -> tuple[np.ndarray, np.ndarray]:
    """(int8 values shaped as ``w``, float32 scale per channel along ``axis``)."""
    if not np.isfinite(w).all():
        raise NotStorable("holds a non-finite value, which int8 cannot")
    moved = np.moveaxis(w.astype(np.float64), axis, 0).reshape(w.shape[axis], -1)
    peak = np.abs(moved).max(axis=1) if moved.size else np.zeros(w.shape[axis])
    scale = (peak / INT8_MAX).astype(np.float32)
    tiny = (peak > 0) & (scale < np.finfo(np.float32).tiny)
    if tiny.any():
        c = int(np.argmax(tiny))
        raise NotStorable(f"channel {c} peaks at {float(peak[c]):.3g}, below what a float32 scale resolves")
    scale[peak == 0] = 1.0
    q = np.clip(np.rint(moved / scale[:, None].astype(np.float64)), -INT8_MAX, INT8_MAX).astype(np.int8)
    shape = (w.shape[axis],) + tuple(d for k, d in enumerate(w.shape) if k != axis)
    return np.ascontiguousarray(np.moveaxis(q.reshape(shape), 0, axis)), scale


def describe(report: dict | None) -> list[str]:
    """Lines saying what a weight-only option stored and what it kept float32 (a target's report,
    as its file's metadata records it); [] for none."""
    if not report:
        return []
    stored = ", ".join(f"{k} {v}" for k, v in sorted(report["stored"].items())) or "nothing"
    lines = [f"weights {report['option']}: {stored}; kept float32: {len(report['kept_float'])}"]
    return lines + [f"  {k}" for k in report["kept_float"]]
