"""``.pt2`` -> ONNX resizes (``upsample_*``/``F.interpolate``) in ONNX Runtime against torch
eager: non-integer scale factors, downscales to length 1, every mode, align_corners both
ways, antialias, the ``.vec`` and ``.default`` overloads, 1-D/3-D; a dynamic batch run at two
sizes. A program ONNX cannot express exactly is refused, naming why."""

from __future__ import annotations

import onnx
import pytest

import onnx_zoo
import resize_cases
from pt2x.converters import to_onnx
from pt2x.converters.errors import UnsupportedOpsError
from tolerances import assert_close


@pytest.mark.parametrize("name", list(resize_cases.CASES))
def test_resize_matches_eager(name):
    m = to_onnx(resize_cases.saved(name))
    onnx.checker.check_model(m, full_check=True)
    sess = onnx_zoo.ort_session(m.SerializeToString())
    for x, want in resize_cases.inputs_and_expected(name):
        got = onnx_zoo.run(sess, [x])[0]
        assert_close(got, want, "float32", what=f"{name} at batch {x.shape[0]}", scale=10)


def test_scale_factor_is_a_resize_scale_not_a_size_ratio():
    """0.35 of 63 is 22 pixels: the coordinate uses 1/0.35, not 63/22 (torch's formula)."""
    m = to_onnx(resize_cases.saved("bilinear_0.35"))
    (node,) = [n for n in m.graph.node if n.op_type == "Resize"]
    assert node.input[2] and not node.input[3:] or not node.input[3]
    attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
    assert attrs["coordinate_transformation_mode"] == b"half_pixel"


@pytest.mark.parametrize("name", list(resize_cases.REFUSED))
def test_refused_by_name(name):
    with pytest.raises(UnsupportedOpsError, match="align_corners=True"):
        to_onnx(resize_cases.saved(name))
