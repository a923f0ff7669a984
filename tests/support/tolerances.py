"""Comparison tolerances per dtype for the parity tests (ONNX and TFLite), read from the one
table: ``pt2x.verification.compare.TOLERANCES`` (what ``pt2x verify`` holds a converted model
to), tightened by its ``PARITY_TEST_SCALE`` (these tests know their programs: 10x tighter for
float32/float64 than verify), with its LiteRT factor (``RUNTIME_SCALE["litert"]``). Integers and
bools compare exactly.

float32 allows for reassociation (fused attention/layer norm, Gemm blocking); bf16/fp16
for per-op rounding differences (pt2x computes low-precision ops in float32 and rounds
each result back, as torch CPU mostly does)."""

from __future__ import annotations

import numpy as np

from pt2x.verification.compare import PARITY_TEST_SCALE, RUNTIME_SCALE, TOLERANCES

EXACT = (0.0, 0.0)  # integers and bools


def tolerance(dtype) -> tuple[float, float]:
    name = str(dtype).replace("torch.", "")
    rtol, atol = TOLERANCES.get(name, EXACT)
    k = PARITY_TEST_SCALE.get(name, 1.0)
    return rtol * k, atol * k


# A deep or wide model accumulates more reassociation error: scale float tolerances.
MODEL_SCALE = {"float32": 10.0}


def assert_close(actual: np.ndarray, expected: np.ndarray, dtype, *, what: str = "", scale: float = 1.0) -> None:
    rtol, atol = tolerance(dtype)
    rtol, atol = rtol * scale, atol * scale
    actual, expected = np.asarray(actual), np.asarray(expected)
    assert actual.shape == expected.shape, f"{what}: shape {actual.shape} != {expected.shape}"
    if rtol == atol == 0.0:
        assert np.array_equal(actual, expected), f"{what}: values differ ({np.sum(actual != expected)} elements)"
        return
    a64, e64 = actual.astype(np.float64), expected.astype(np.float64)
    ok = np.isclose(a64, e64, rtol=rtol, atol=atol, equal_nan=True)
    if not ok.all():
        diff = np.abs(a64 - e64)[~ok]
        raise AssertionError(f"{what}: {int((~ok).sum())}/{ok.size} elements differ beyond rtol={rtol} atol={atol} "
                             f"(max abs diff {diff.max():.3g}, dtype {dtype})")


# TFLite (LiteRT): float32 kernels (XNNPACK's fused GEMMs, SOFTMAX's exp, the Erf polynomial)
# reassociate more than ONNX Runtime's: scale the float32 tolerances (the table's LiteRT factor).
TFLITE_SCALE = {"float32": RUNTIME_SCALE["litert"]}
