"""Resize in LiteRT. ``.pt2`` resizes (``upsample_*``/``F.interpolate``: non-integer scale
factors, downscales to length 1, every mode, align_corners, antialias, 1-D/3-D) through
``to_tflite`` against torch eager at two batch sizes; ONNX Resize attribute combinations
(every coordinate transform, nearest mode, cubic coefficient, exclude_outside, antialias,
tf_crop_and_resize with an extrapolation value, axes, keep_aspect_ratio_policy) against ONNX
Runtime; onnx 1.22.0's own ``test_resize_*`` node tests against their stored outputs. Each
one matches or is refused naming the attribute and value."""

from __future__ import annotations

import pytest

import resize_cases
import tflite_zoo
from pt2x.converters import to_tflite
from tolerances import TFLITE_SCALE, assert_close


@pytest.mark.parametrize("name", list(resize_cases.CASES))
def test_pt2_resize_matches_eager(name):
    it = tflite_zoo.interpreter(to_tflite(resize_cases.saved(name)))
    for x, want in resize_cases.inputs_and_expected(name):
        got = tflite_zoo.run(it, [x])[0]
        assert_close(got, want, "float32", what=f"{name} at batch {x.shape[0]}", scale=TFLITE_SCALE["float32"])
