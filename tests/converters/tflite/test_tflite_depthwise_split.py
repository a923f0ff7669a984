"""Depthwise kernels of over 25 taps as sums of small ones (``depthwise_split.py``): the parts
cover every tap once, the files run in LiteRT (XNNPACK on and off) against torch eager after a
resize of the dynamic batch, and the kernels that must stay whole (strided, unpadded, dilated,
small) do.
"""

from __future__ import annotations

import collections

import pytest
import torch

from litert_child import assert_each_matches
from tflite_zoo import converted_with_batches, op_names
from pt2x.converters.tflite.ops import depthwise_split


def _ops(data: bytes) -> collections.Counter:
    return collections.Counter(op_names(data))


@pytest.mark.parametrize("kh,kw", [(7, 7), (9, 9), (3, 11), (11, 3), (1, 31), (5, 7), (7, 9)])
def test_parts_cover_every_tap_once_with_at_most_25_each(kh, kw):
    axis, parts = depthwise_split.plan(kh, kw)
    n, other = (kh, kw) if axis == "rows" else (kw, kh)
    centre = n // 2
    seen = []
    for rows, dilation in parts:
        assert len(rows) * other <= depthwise_split.FAST_TAPS
        # evenly spaced by the dilation and symmetric about the centre row: SAME aligns them
        assert all(b - a == dilation for a, b in zip(rows, rows[1:]))
        assert rows[0] + rows[-1] == 2 * centre
        seen += rows
    assert sorted(seen) == list(range(n))


@pytest.mark.parametrize("kh,kw", [(5, 5), (3, 3), (6, 6), (1, 25), (13, 13)])
def test_kernels_kept_whole(kh, kw):
    """25 taps or fewer run fast already; even sizes have no centre; a 13-wide one has no part
    of 2 rows within 25 taps either way."""
    assert depthwise_split.plan(kh, kw) is None


class Depthwise(torch.nn.Module):
    def __init__(self, c, k, mult=1, dim=2, **kw):
        super().__init__()
        conv = torch.nn.Conv2d if dim == 2 else torch.nn.Conv1d
        self.conv = conv(c, c * mult, k, groups=c, **kw)

    def forward(self, x):
        return torch.relu(self.conv(x))


# (module, input shape, depthwise ops in the file)
CASES = {
    "7x7 same (ConvNeXt)": (lambda: Depthwise(8, 7, padding=3), (8, 12, 12), 3),
    "9x9 same, 2 per channel": (lambda: Depthwise(4, 9, mult=2, padding=4), (4, 11, 10), 5),
    "3x11 same": (lambda: Depthwise(4, (3, 11), padding=(1, 5)), (4, 9, 16), 2),
    "1-D, 31 taps": (lambda: Depthwise(4, 31, dim=1, padding=15), (4, 40), 4),
    "7x7 stride 2 (whole)": (lambda: Depthwise(4, 7, stride=2, padding=3), (4, 12, 12), 1),
    "7x7 unpadded (whole)": (lambda: Depthwise(4, 7), (4, 12, 12), 1),
    "7x7 dilated (whole)": (lambda: Depthwise(4, 7, dilation=2, padding=6), (4, 16, 16), 1),
}


@pytest.fixture(scope="module", params=list(CASES))
def converted(request, tmp_path_factory):
    make, shape, n_dw = CASES[request.param]
    torch.manual_seed(0)
    model = make().eval()
    x2, x3 = torch.randn(2, *shape), torch.randn(3, *shape)
    data, xs, want = converted_with_batches(model, x2, x3, tmp_path_factory.mktemp("dw"))
    return data, xs, want, n_dw


def test_depthwise_parts_in_the_file(converted):
    data, _, _, n_dw = converted
    ops = _ops(data)
    assert ops["DEPTHWISE_CONV_2D"] == n_dw, ops
    assert ops["ADD"] == n_dw - 1, ops
    # the ReLU fused into the last ADD or the conv; the 1-D conv's comes after the RESHAPE to 3-D
    assert ops["RELU"] == (1 if ops["RESHAPE"] else 0), ops


@pytest.mark.parametrize("xnnpack", [True, False], ids=["xnnpack", "builtin"])
def test_depthwise_parts_match_eager(converted, xnnpack):
    data, xs, want, _ = converted
    assert_each_matches(data, xs, want, xnnpack=xnnpack, tol=1e-5)
