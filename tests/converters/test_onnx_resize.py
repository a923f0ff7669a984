"""``.pt2`` -> ONNX resizes (``upsample_*``/``F.interpolate``) in ONNX Runtime against torch
eager: non-integer scale factors, downscales to length 1, every mode, align_corners both
ways, antialias, the ``.vec`` and ``.default`` overloads, 1-D/3-D; a dynamic batch run at two
sizes. A program ONNX cannot express exactly is refused, naming why."""

from __future__ import annotations

import functools

import onnx
import pytest

import onnx_zoo
import resize_cases
from pt2x.converters import to_onnx
from pt2x.converters.errors import UnsupportedOpsError
from tolerances import MODEL_SCALE, assert_close

CASES = list(resize_cases.CASES)


@functools.cache
def _model() -> onnx.ModelProto:
    return to_onnx(resize_cases.saved())


@functools.cache
def _outputs() -> list[list]:
    sess = onnx_zoo.ort_session(_model().SerializeToString())
    return [onnx_zoo.run(sess, xs) for xs, _ in resize_cases.runs()]


def test_model_is_valid_onnx():
    onnx.checker.check_model(_model(), full_check=True)


@pytest.mark.parametrize("name", CASES)
def test_resize_matches_eager(name):
    i = CASES.index(name)
    for got, (xs, want) in zip(_outputs(), resize_cases.runs()):
        assert_close(got[i], want[i], "float32", what=f"{name} at batch {xs[0].shape[0]}", scale=MODEL_SCALE["float32"])


def test_scale_factor_is_a_resize_scale_not_a_size_ratio():
    """0.35 of 63 is 22 pixels: the coordinate uses 1/0.35 (torch's formula), not 63/22; and
    half_pixel, whose output of length 1 reads the middle as torch does."""
    m = _model()
    producers = {o: n for n in m.graph.node for o in n.output}
    node = producers[m.graph.output[CASES.index("bilinear_0.35")].name]
    while node.op_type != "Resize":  # back through an Identity naming the output
        node = producers[node.input[0]]
    scales = onnx.numpy_helper.to_array(next(t for t in m.graph.initializer if t.name == node.input[2]))
    assert scales.tolist()[2:] == pytest.approx([0.35, 0.35])
    attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
    assert attrs["coordinate_transformation_mode"] == b"half_pixel"


@pytest.mark.parametrize("name", list(resize_cases.REFUSED))
def test_refused_by_name(name):
    with pytest.raises(UnsupportedOpsError, match="align_corners=True"):
        to_onnx(resize_cases.saved_refused(name))


def _dynamic_hw(mode, scale, min_hw=4):
    """A resize exported with H and W known only at run time."""
    import os
    import tempfile

    import torch
    import torch.nn.functional as F

    class M(torch.nn.Module):
        def forward(self, x):
            return F.interpolate(x, scale_factor=scale, mode=mode)

    dim = torch.export.Dim("hw", min=min_hw, max=64)  # W = 2H - 6
    h = max(8, min_hw)
    ep = torch.export.export(M(), (torch.randn(1, 2, h, 2 * h - 6),), dynamic_shapes=({2: dim, 3: dim * 2 - 6},))
    path = os.path.join(tempfile.mkdtemp(prefix="pt2x-resize-dyn-"), f"{mode}.pt2")
    torch.export.save(ep, path)
    return M(), path


def test_dynamic_sizes_bilinear_scale_matches_eager():
    import torch

    m, path = _dynamic_hw("bilinear", 1.5)
    sess = onnx_zoo.ort_session(to_onnx(path).SerializeToString())
    for h in (8, 13):
        x = torch.randn(1, 2, h, 2 * h - 6) * 3 + 1
        with torch.no_grad():
            want = m(x).numpy()
        assert_close(onnx_zoo.run(sess, [x.numpy()])[0], want, "float32", what=f"H={h}", scale=MODEL_SCALE["float32"])


def test_dynamic_sizes_nearest_non_integer_scale_refused():
    _, path = _dynamic_hw("nearest", 1.5)
    with pytest.raises(UnsupportedOpsError, match="at a size known only at run time"):
        to_onnx(path)


def test_dynamic_sizes_scale_not_a_float32_refused():
    """0.35 is no float32: at a run-time length torch's float64 floor(20 x 0.35) = 7 and ONNX
    Runtime's float32 one = 6."""
    _, path = _dynamic_hw("bilinear", 0.35, min_hw=12)
    with pytest.raises(UnsupportedOpsError, match="float64 by torch and float32 by ONNX Runtime"):
        to_onnx(path)
