"""GridSample (torch's grid_sample) as GATHER_ND (ops/gridsample.py): every mapped mode in one
.pt2 with a dynamic batch, input height/width and output size, vs torch eager, grid values reaching outside
[-1, 1]; the refused modes name themselves."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch.export import Dim

import tflite_zoo
from pt2x.converters import to_tflite
from pt2x.converters.errors import UnsupportedOpsError
from tolerances import assert_close

MODES = [(m, p, a) for m in ("bilinear", "nearest") for p in ("zeros", "border") for a in (False, True)]


class _Sample(torch.nn.Module):
    def __init__(self, modes):
        super().__init__()
        self.modes = modes

    def forward(self, x, grid):
        F = torch.nn.functional
        return tuple(F.grid_sample(x, grid, mode=m, padding_mode=p, align_corners=a) for m, p, a in self.modes)


def _export(modes, tmp_path):
    batch = Dim("batch", min=1, max=8)
    args = (torch.randn(2, 3, 5, 7), torch.rand(2, 4, 6, 2) * 2.6 - 1.3)
    x_dims = {0: batch, 2: Dim("h", min=2, max=32), 3: Dim("w", min=2, max=32)}
    ep = torch.export.export(_Sample(modes), args, dynamic_shapes=(x_dims, {0: batch, 1: Dim("ho", max=32)}))
    path = str(tmp_path / "gs.pt2")
    torch.export.save(ep, path)
    return path


def test_grid_sample_modes_match_eager(tmp_path):
    data = to_tflite(_export(MODES, tmp_path))
    m = _Sample(MODES)
    torch.manual_seed(0)
    ties = torch.tensor([-1.0, -0.5, 0.0, 0.5, 1.0, 1.25])  # exact corners and half-pixel positions
    grid2 = torch.stack(torch.meshgrid(ties, ties, indexing="xy"), -1).expand(3, 6, 6, 2).contiguous()
    for xnnpack in (True, False):
        it = tflite_zoo.interpreter(data, xnnpack=xnnpack)
        for x, grid in ((torch.randn(2, 3, 5, 7), torch.rand(2, 4, 6, 2) * 2.6 - 1.3), (torch.randn(3, 3, 5, 7), grid2),
                        (torch.randn(1, 3, 9, 4), torch.rand(1, 5, 6, 2) * 2.6 - 1.3)):
            got = tflite_zoo.run(it, [x.numpy(), grid.numpy()])
            for (mode, pad, align), g, w in zip(MODES, got, m(x, grid)):
                assert_close(g, w.numpy(), torch.float32, what=f"grid_sample {mode} {pad} align_corners={align}")


@pytest.mark.parametrize("mode,pad", [("bicubic", "zeros"), ("bilinear", "reflection")])
def test_grid_sample_refusals(mode, pad, tmp_path):
    with pytest.raises(UnsupportedOpsError, match=f"GridSample (mode|padding_mode) '({mode}|cubic|{pad})'"):
        to_tflite(_export([(mode, pad, False)], tmp_path))
