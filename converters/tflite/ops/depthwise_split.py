"""A large depthwise kernel as a sum of small ones, the tap counts XNNPACK runs fast.

XNNPACK runs a depthwise convolution of up to 25 taps in one pass; more taps go through its
multipass kernels, which in LiteRT's build (ai-edge-litert 2.3.0, x86-64 AVX2) are 10-25x
slower per tap: over 64x64x32 at 1 thread a 7x7 depthwise takes 6.5 ms there, a 5x5 0.39 ms,
and ONNX Runtime the 7x7 0.6 ms (``benchmarks/bench_depthwise.py``, 2026-11-26). ConvNeXt, ConvNeXtV2, MixNet and
RepLKNet-style blocks are built on such kernels.

A stride-1, undilated depthwise kernel of odd size kh x kw with TFLite's SAME padding is split
into row sets symmetric about the centre row c, each its own DEPTHWISE_CONV_2D with SAME
padding, whose outputs are added:

- the centre band, rows c-m .. c+m, as large as 25 taps allow ((2m+1)·kw <= 25);
- each remaining pair of rows {c-e, c+e} as a 2-row kernel with dilation 2e: SAME pads its
  effective height 2e+1 by e on each side, so its taps read rows i-e and i+e of the input at
  output row i, as the full kernel's rows c-e and c+e do.

Each output is then the same products summed in another order: equal up to float32 rounding.
Where kw is the larger side the columns are split the same way. The bias goes to the first
part and the fused activation to the last ADD. A 7x7 kernel becomes 21 + 14 + 14 taps.
"""

from __future__ import annotations

import numpy as np

FAST_TAPS = 25  # XNNPACK's largest single-pass depthwise kernel (its "25p" microkernels)


def row_sets(kh: int, kw: int) -> list[tuple[list[int], int]] | None:
    """The kernel rows of each part and its dilation: [(rows, dilation), ...], or None where the
    kernel is fast already, or where its rows cannot be split into fast parts."""
    if kh * kw <= FAST_TAPS or kh % 2 == 0 or kw % 2 == 0 or 2 * kw > FAST_TAPS:
        return None
    c = kh // 2
    m = (FAST_TAPS // kw - 1) // 2  # the band's half-height: (2m+1)·kw <= 25
    parts = [(list(range(c - m, c + m + 1)), 1)]
    parts += [([c - e, c + e], 2 * e) for e in range(m + 1, c + 1)]
    return parts


def plan(kh: int, kw: int) -> tuple[str, list[tuple[list[int], int]]] | None:
    """("rows" or "cols", the parts along that axis) with the fewer parts; None to keep the
    kernel whole."""
    by_rows, by_cols = row_sets(kh, kw), row_sets(kw, kh)
    if by_rows is None and by_cols is None:
        return None
    if by_cols is None or (by_rows is not None and len(by_rows) <= len(by_cols)):
        return "rows", by_rows
    return "cols", by_cols


def part_filter(filt: np.ndarray, axis: str, index: list[int]) -> np.ndarray:
    """The part's filter from the whole [1, kh, kw, C·mult] one."""
    return np.ascontiguousarray(filt[:, index, :, :] if axis == "rows" else filt[:, :, index, :])
