"""Tolerances per dtype (ONE table) and the comparison of one converted array with its reference.

A float element passes when ``|got - want| <= atol * max(1, max|want|) + rtol * |want|``: the
absolute part grows with the output's own magnitude (a logit of 300 is not held to 1e-4 in
absolute terms). LiteRT (XNNPACK's fused kernels, float64 and low-precision floats computed in
float32) gets ``RUNTIME_SCALE`` times the float tolerances. Integers and booleans must be equal.
int8 and uint8 outputs are quantized values: they may differ by one quantization step (a rounding
tie resolved the other way), never more. NaN equals NaN at the same place; an infinity must match.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["TOLERANCES", "QUANTIZED_STEPS", "RUNTIME_SCALE", "Tolerance", "Difference", "tolerance", "compare"]

TOLERANCES: dict[str, tuple[float, float]] = {
    # dtype name -> (rtol, atol)
    "float64": (1e-6, 1e-7),
    "float32": (1e-3, 1e-4),
    "float16": (1e-2, 1e-2),
    "bfloat16": (2e-2, 2e-2),
}
"""Float tolerances. Any other dtype (integers, bool) is compared exactly, except those of
``QUANTIZED_STEPS``."""

QUANTIZED_STEPS: dict[str, int] = {"int8": 1, "uint8": 1}
"""Quantized dtypes -> how many quantization steps an element may be off."""

RUNTIME_SCALE: dict[str, float] = {"onnxruntime": 1.0, "litert": 10.0}
"""The float tolerances are multiplied by the runtime's factor."""


@dataclass(frozen=True)
class Tolerance:
    rtol: float
    atol: float  # in quantization steps for a quantized dtype
    rule: str  # "float" | "exact" | "steps"

    def text(self) -> str:
        if self.rule == "exact":
            return "exact"
        if self.rule == "steps":
            return f"{self.atol:g} step" if self.atol == 1 else f"1 step ({self.atol:.3g})"
        return f"rtol {self.rtol:g}, atol {self.atol:g}"


@dataclass(frozen=True)
class Difference:
    """How far one converted array is from its reference."""

    ok: bool
    max_abs: float
    max_rel: float
    mismatched: int  # elements beyond the tolerance (all of them for a shape mismatch)
    total: int
    note: str = ""  # a shape or dtype problem, in words


def tolerance(dtype_name: str, runtime: str = "onnxruntime") -> Tolerance:
    if dtype_name in TOLERANCES:
        rtol, atol = TOLERANCES[dtype_name]
        scale = RUNTIME_SCALE.get(runtime, 1.0)
        return Tolerance(rtol * scale, atol * scale, "float")
    if dtype_name in QUANTIZED_STEPS:
        return Tolerance(0.0, float(QUANTIZED_STEPS[dtype_name]), "steps")
    return Tolerance(0.0, 0.0, "exact")


def _as_float64(a: np.ndarray) -> np.ndarray:
    if a.dtype == np.bool_:
        return a.astype(np.float64)
    if a.dtype.kind == "c":
        return a.astype(np.complex128)
    return a.astype(np.float64)


def compare(got, want, tol: Tolerance) -> Difference:
    """``got`` (the converted file's) against ``want`` (the reference's)."""
    got, want = np.asarray(got), np.asarray(want)
    if got.shape != want.shape:
        if got.size == want.size == 1:  # a 0-d value a runtime returns as [1] (or back)
            got = got.reshape(want.shape)
        else:
            return Difference(False, float("inf"), float("inf"), want.size, want.size,
                              f"shape {list(got.shape)}, reference {list(want.shape)}")
    if want.size == 0:
        return Difference(True, 0.0, 0.0, 0, 0)
    g, w = _as_float64(got), _as_float64(want)
    nan_same = np.isnan(g) & np.isnan(w) if g.dtype.kind in "fc" else np.zeros(g.shape, bool)
    with np.errstate(invalid="ignore", over="ignore"):
        diff = np.where(nan_same | (g == w), 0.0, np.abs(g - w))
        diff = np.where(np.isnan(diff), np.inf, diff)
        scale = np.abs(w)
        rel = np.where(diff == 0, 0.0, diff / np.where(scale == 0, 1.0, scale))
        if tol.rule == "float":
            finite = np.abs(w[np.isfinite(w)]) if w.dtype.kind == "f" else np.abs(w)
            magnitude = max(1.0, float(finite.max())) if finite.size else 1.0
            bad = diff > tol.atol * magnitude + tol.rtol * scale
        else:
            bad = diff > tol.atol
    mismatched = int(np.count_nonzero(bad))
    return Difference(mismatched == 0, float(diff.max()), float(rel.max()), mismatched, int(want.size))
