"""A reduction keeping its axes, then a RESHAPE that only drops them, written as the reduction
without keep_dims (``passes/drop_squeezing_reshapes.py``): torch programs with a dynamic batch, operator counts
saying where the RESHAPE went and where it had to stay, LiteRT (XNNPACK on and off) against
torch eager after a resize of the batch."""

from __future__ import annotations

import collections

import pytest
import torch

from litert_child import assert_each_matches
from tflite_zoo import converted_with_batches, op_names


class PoolHead(torch.nn.Module):
    """Conv, global average pool (mean over H, W keeping them), flatten, Linear: the classifier
    head of most CNNs."""

    def __init__(self, how: str = "flatten"):
        super().__init__()
        self.conv, self.fc, self.how = torch.nn.Conv2d(3, 8, 3), torch.nn.Linear(8, 4), how

    def forward(self, x):
        y = self.conv(x).mean((2, 3), keepdim=True)
        if self.how == "flatten":
            return self.fc(y.flatten(1))
        if self.how == "max":
            return self.fc(self.conv(x).amax((2, 3), keepdim=True).view(x.shape[0], 8))
        if self.how == "all into one row":  # the RESHAPE merges the batch too: it stays
            return y.reshape(-1)
        return self.fc(y.flatten(1)) + y.sum()  # "read twice": the keep_dims output has 2 readers


# RESHAPEs left. "max": amax propagates NaN as torch (a SELECT_V2 of NaN where the window holds one,
# after the REDUCE_MAX), so the RESHAPE reads the select, not the reduction, and stays.
CASES = {"flatten": 0, "max": 1, "all into one row": 1, "read twice": 1}


@pytest.fixture(scope="module", params=list(CASES))
def converted(request, tmp_path_factory):
    torch.manual_seed(0)
    model = PoolHead(request.param).eval()
    x2, x3 = torch.randn(2, 3, 9, 9), torch.randn(3, 3, 9, 9)
    return (*converted_with_batches(model, x2, x3, tmp_path_factory.mktemp("squeeze")), CASES[request.param])


def test_reshape_dropped_only_where_it_only_drops_the_reduced_axes(converted):
    data, _, _, reshapes = converted
    assert collections.Counter(op_names(data))["RESHAPE"] == reshapes, op_names(data)


@pytest.mark.parametrize("xnnpack", [True, False], ids=["xnnpack", "builtin"])
def test_squeezed_reductions_match_eager(converted, xnnpack):
    data, xs, want, _ = converted
    assert_each_matches(data, xs, want, xnnpack=xnnpack, tol=2e-5)
