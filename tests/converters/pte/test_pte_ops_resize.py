"""Resizes on the pte target (``ops_resize.py``): bilinear (align_corners either way) and nearest,
by output size and by scale factor (integer and not), with a dynamic batch; each exported at test
time, converted where ``import torch`` fails and run in ExecuTorch's runtime against eager."""

from __future__ import annotations

import pytest

pytest.importorskip("executorch", reason="executorch is not installed (pip install executorch==1.5.1): "
                                         "the .pte files are checked by running them in its runtime")

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from pte_parity import check, check_refused  # noqa: E402


def _x(b=2, h=5, w=7):
    return torch.randn(b, 3, h, w, generator=torch.Generator().manual_seed(b))


@pytest.mark.parametrize("align_corners", [False, True])
def test_bilinear_to_a_size_with_a_dynamic_batch(tmp_path, align_corners):
    check(lambda x: F.interpolate(x, size=(9, 4), mode="bilinear", align_corners=align_corners), _x(),
          tmp_path=tmp_path, dynamic=True, runs=[(_x(1),), (_x(3),)])


@pytest.mark.parametrize("scale", [2.0, 1.7])
def test_bilinear_and_nearest_by_a_scale_factor(tmp_path, scale):
    check(lambda x: (F.interpolate(x, scale_factor=scale, mode="bilinear"),
                     F.interpolate(x, scale_factor=scale, mode="nearest")), _x(), tmp_path=tmp_path)


def test_nearest_to_a_size(tmp_path):
    check(lambda x: F.interpolate(x, size=(3, 11), mode="nearest"), _x(), tmp_path=tmp_path)


def test_default_overload_by_size_and_with_scales(tmp_path):
    """``upsample_bilinear2d.default``: an output size alone converts; with scales (ATen then maps
    indices by them, not by the sizes) it is refused, naming them."""
    x = _x()
    check(lambda x: torch.ops.aten.upsample_bilinear2d.default(x, [10, 3], False), x, tmp_path=tmp_path)
    check_refused(lambda x: torch.ops.aten.upsample_bilinear2d.default(x, [10, 14], False, 1.5, 1.5), x,
                  tmp_path=tmp_path, match="scales_h/scales_w")
