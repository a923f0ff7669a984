"""Tolerances per dtype (ONE table) and the comparison of one converted array with its reference.

A float element passes when ``|got - want| <= atol * max(1, max|want|) + rtol * |want|``: the
absolute part grows with the output's own magnitude (a logit of 300 is not held to 1e-4 in
absolute terms). Mask fills (reference values at or beyond ``sentinel_floor``: ``-1e9``,
``torch.finfo(float32).min``) are set apart: they do not count in ``max|want|`` (one fill would
make the absolute part ~1e34 and pass anything) and are compared by the relative part alone; the
tolerance text of each comparison (``Difference.tolerance``) says the magnitude used and how many
fills were set apart. LiteRT (XNNPACK's fused kernels, float64 and low-precision floats computed in
float32) gets ``RUNTIME_SCALE`` times the float tolerances. Integers and booleans must be equal.
int8 and uint8 outputs are quantized values: they may differ by one quantization step (a rounding
tie resolved the other way), never more. NaN equals NaN at the same place; an infinity must match.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["TOLERANCES", "QUANTIZED_STEPS", "RUNTIME_SCALE", "PARITY_TEST_SCALE", "SENTINEL_FLOOR", "Tolerance", "Difference", "tolerance",
           "compare", "sentinel_floor"]

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

RUNTIME_SCALE: dict[str, float] = {"onnxruntime": 1.0, "litert": 10.0, "executorch": 1.0}
"""The float tolerances are multiplied by the runtime's factor (ExecuTorch's portable kernels compute
float32 as float32, one kernel per ATen operator: no fusion to allow for)."""

PARITY_TEST_SCALE: dict[str, float] = {"float64": 0.1, "float32": 0.1}
"""pt2x's own parity tests (its conversions of known programs, tests/support/tolerances.py) hold
these dtypes to the tolerances above times this factor: 10x tighter than ``pt2x verify`` holds
any file a user brings."""

SENTINEL_FLOOR = 1e8
"""A reference value this large (in magnitude) is a fill, not a result: a mask's -1e9 or
``finfo.min``; for a dtype whose largest value is below twice this, half its largest value."""


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
        return f"rtol {self.rtol:g}, atol {self.atol:g} x max(1, max|ref|)"


@dataclass(frozen=True)
class Difference:
    """How far one converted array is from its reference."""

    ok: bool
    max_abs: float
    max_rel: float
    mismatched: int  # elements beyond the tolerance (all of them for a shape mismatch)
    total: int
    note: str = ""  # a shape or dtype problem, in words
    tolerance: str = ""  # the tolerance as applied (float: the magnitude used, the fills set apart)
    ratio: float = 0.0  # the worst element's difference over what its tolerance allows: past it above 1


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
                              f"shape {list(got.shape)}, reference {list(want.shape)}", ratio=float("inf"))
    if want.size == 0:
        return Difference(True, 0.0, 0.0, 0, 0)
    g, w = _as_float64(got), _as_float64(want)
    nan_same = np.isnan(g) & np.isnan(w) if g.dtype.kind in "fc" else np.zeros(g.shape, bool)
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        diff = np.where(nan_same | (g == w), 0.0, np.abs(g - w))
        diff = np.where(np.isnan(diff), np.inf, diff)
        scale = np.abs(w)
        rel = np.where(diff == 0, 0.0, diff / np.where(scale == 0, 1.0, scale))
        if tol.rule == "float":
            allowed, text = _float_allowed(w, scale, tol, sentinel_floor(want.dtype))
        else:
            allowed, text = np.full(diff.shape, tol.atol), tol.text()
        bad = diff > allowed
        ratio = float(np.max(np.where(diff == 0, 0.0, diff / np.where(allowed == 0, 0.0, allowed))))
    mismatched = int(np.count_nonzero(bad))
    return Difference(mismatched == 0, float(diff.max()), float(rel.max()), mismatched, int(want.size), "", text,
                      ratio)


def sentinel_floor(dtype) -> float:
    """The magnitude from which a reference value of ``dtype`` is a fill (``SENTINEL_FLOOR``)."""
    try:
        top = float(np.finfo(dtype).max)
    except (TypeError, ValueError):
        return SENTINEL_FLOOR
    return min(SENTINEL_FLOOR, top / 2)


def _float_allowed(w: np.ndarray, scale: np.ndarray, tol: Tolerance, floor: float):
    """What each element may differ by under the float tolerance, and the tolerance in words: the
    absolute part scaled by the largest finite reference value that is no fill; fills by the
    relative part."""
    finite = np.isfinite(w)
    fills = finite & (scale >= floor)
    kept = scale[finite & ~fills]
    magnitude = float(kept.max()) if kept.size else 0.0
    atol = tol.atol * max(1.0, magnitude)
    allowed = np.where(fills, 0.0, atol) + tol.rtol * scale
    text = f"rtol {tol.rtol:g}, atol {tol.atol:g} x max(1, max|ref| {magnitude:.3g}) = {atol:.3g}"
    n = int(np.count_nonzero(fills))
    if n:
        text += f"; {n} mask fills (|ref| >= {floor:.3g}) set apart, by rtol only"
    return allowed, text
