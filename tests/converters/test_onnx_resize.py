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
    out = m.graph.output[CASES.index("bilinear_0.35")].name
    (node,) = [n for n in m.graph.node if out in n.output or any(o == out for o in n.output)] or [None]
    producers = {o: n for n in m.graph.node for o in n.output}
    while node is not None and node.op_type != "Resize":
        node = producers.get(node.input[0])
    assert node is not None and node.op_type == "Resize"
    scales = onnx.numpy_helper.to_array(next(t for t in m.graph.initializer if t.name == node.input[2]))
    assert scales.tolist()[2:] == pytest.approx([0.35, 0.35])
    attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
    assert attrs["coordinate_transformation_mode"] == b"half_pixel"


@pytest.mark.parametrize("name", list(resize_cases.REFUSED))
def test_refused_by_name(name):
    with pytest.raises(UnsupportedOpsError, match="align_corners=True"):
        to_onnx(resize_cases.saved_refused(name))
