"""Resize in LiteRT. ``.pt2`` resizes (``upsample_*``/``F.interpolate``: non-integer scale
factors, downscales to length 1, every mode, align_corners, antialias, 1-D/3-D) through
``to_tflite`` against torch eager at two batch sizes; ONNX Resize attribute combinations
(every coordinate transform, nearest mode, cubic coefficient, exclude_outside, antialias,
tf_crop_and_resize with an extrapolation value, axes, keep_aspect_ratio_policy) against ONNX
Runtime at two batch sizes; onnx 1.22.0's own ``test_resize_*`` node tests against their
stored outputs. Each one matches or is refused naming the attribute and value."""

from __future__ import annotations

import functools
import glob
import itertools
import os
import re
import zipfile

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import resize_cases
import tflite_zoo
from pt2x.converters import to_tflite
from pt2x.converters.errors import UnsupportedOpsError
from tolerances import TFLITE_SCALE, assert_close

CASES = list(resize_cases.CASES)
F = TensorProto.FLOAT
SCALE = TFLITE_SCALE["float32"]


# ---------------------------------------------------------------- .pt2 programs vs torch eager


@functools.cache
def _pt2_outputs(xnnpack: bool) -> list[list]:
    it = tflite_zoo.interpreter(_pt2_model(), xnnpack=xnnpack)
    return [tflite_zoo.run(it, xs) for xs, _ in resize_cases.runs()]


@functools.cache
def _pt2_model() -> bytes:
    return to_tflite(resize_cases.saved())


@pytest.mark.parametrize("name", CASES)
def test_pt2_resize_matches_eager(name):
    i = CASES.index(name)
    for xnnpack in (True, False):
        for got, (xs, want) in zip(_pt2_outputs(xnnpack), resize_cases.runs()):
            assert_close(got[i], want[i], "float32", what=f"{name} at batch {xs[0].shape[0]}, XNNPACK {xnnpack}",
                         scale=SCALE)


# ---------------------------------------------------------------- ONNX Resize vs ONNX Runtime


def _resize_model(shape, attrs, *, scales=None, sizes=None, roi=None, opset=19):
    inits, ins = [], ["x", "", "", ""]
    for i, (name, v, dt) in enumerate((("roi", roi, np.float32), ("scales", scales, np.float32),
                                       ("sizes", sizes, np.int64)), start=1):
        if v is not None:
            inits.append(numpy_helper.from_array(np.asarray(v, dt), name))
            ins[i] = name
    while not ins[-1]:
        ins.pop()
    node = helper.make_node("Resize", ins, ["y"], **attrs)
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", F, ["n", *shape[1:]])],
                          [helper.make_tensor_value_info("y", F, None)], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], ir_version=10)


_MODES = [("nearest", nm) for nm in ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil")] + [
    ("linear", None), ("cubic", None)]
_TRANSFORMS = ["half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners", "asymmetric",
               "tf_crop_and_resize"]
_SIZES = {"scales_0.5": dict(scales=[1, 1, 0.5, 0.5]), "scales_0.35_2.7": dict(scales=[1, 1, 0.35, 2.7]),
          "scales_2": dict(scales=[1, 1, 2.0, 2.0]), "sizes_4x1": dict(sizes=[4, 1]),
          "sizes_18x14": dict(sizes=[18, 14])}
_ONNX_CASES = {}
for (_mode, _nm), _ctm, _size, _aa in itertools.product(_MODES, _TRANSFORMS, _SIZES, (0, 1)):
    if _aa and _mode == "nearest":
        continue
    _attrs = dict(mode=_mode, coordinate_transformation_mode=_ctm, antialias=_aa)
    if _nm:
        _attrs["nearest_mode"] = _nm
    if _mode == "cubic":
        _attrs.update(cubic_coeff_a=-0.5, exclude_outside=_aa)  # with and without exclude_outside
    if _ctm == "tf_crop_and_resize":
        _attrs["extrapolation_value"] = 3.0
    _ONNX_CASES["-".join(str(v) for v in (_mode, _nm or "", _ctm, _size, f"aa{_aa}"))] = (_attrs, _size)


def _onnx_case(name):
    attrs, size = _ONNX_CASES[name]
    kw = dict(_SIZES[size])
    tf_crop = attrs["coordinate_transformation_mode"] == "tf_crop_and_resize"
    if "sizes" in kw:
        attrs = dict(attrs, axes=[2, 3])
        if tf_crop:
            kw["roi"] = [0.1, 0.2, 0.8, 0.95]
    elif tf_crop:
        kw["roi"] = [0, 0, 0.1, 0.2, 1, 1, 0.8, 0.95]
    return _resize_model((1, 2, 9, 7), attrs, **kw)


def _compare_with_ort(m, shape=(1, 2, 9, 7)):
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    it = tflite_zoo.interpreter(to_tflite(m))
    rng = np.random.default_rng(0)
    for b in (1, 3):
        x = (rng.standard_normal((b, *shape[1:])) * 3 + 1).astype(np.float32)
        want = sess.run(None, {"x": x})[0]
        assert_close(tflite_zoo.run(it, [x])[0], want, "float32", what=f"batch {b}", scale=SCALE)


@pytest.mark.parametrize("name", list(_ONNX_CASES))
def test_onnx_resize_matches_onnx_runtime(name):
    m = _onnx_case(name)
    attrs, size = _ONNX_CASES[name]
    if attrs["coordinate_transformation_mode"] in ("align_corners", "tf_crop_and_resize") and size in (
            "scales_0.5", "scales_0.35_2.7"):
        # 9 x 0.5 and 7 x 0.35 are not integers: ONNX Runtime divides by the integer length, onnx's
        # reference (which wrote the node tests) by scale x length
        with pytest.raises(UnsupportedOpsError, match="coordinate_transformation_mode=.*not an integer length"):
            to_tflite(m)
        return
    if (attrs["coordinate_transformation_mode"] == "pytorch_half_pixel" and size == "sizes_4x1"
            and (attrs["mode"] == "cubic" or attrs["antialias"])):
        with pytest.raises(UnsupportedOpsError, match="pytorch_half_pixel to length 1"):
            to_tflite(m)
        return
    _compare_with_ort(m)


@pytest.mark.parametrize("policy,sizes", [("not_larger", [5, 20]), ("not_smaller", [5, 20]), ("not_larger", [20, 5])])
@pytest.mark.parametrize("mode", ["nearest", "linear"])
def test_keep_aspect_ratio_policy(policy, sizes, mode):
    _compare_with_ort(_resize_model((1, 2, 9, 7), dict(mode=mode, keep_aspect_ratio_policy=policy, axes=[2, 3]),
                                    sizes=sizes))


@pytest.mark.parametrize("axes,scales", [([1], [2.5]), ([2, 3], [0.35, 1.5]), ([-1], [1.7])])
def test_axes_over_any_dim(axes, scales):
    _compare_with_ort(_resize_model((1, 4, 9, 7), dict(mode="linear", axes=axes), scales=scales), (1, 4, 9, 7))


def test_nearest_of_integers_is_a_gather():
    g = helper.make_graph([helper.make_node("Resize", ["x", "", "s"], ["y"], mode="nearest")], "g",
                          [helper.make_tensor_value_info("x", TensorProto.INT32, ["n", 2, 9, 7])],
                          [helper.make_tensor_value_info("y", TensorProto.INT32, None)],
                          [numpy_helper.from_array(np.array([1, 1, 0.35, 2.7], np.float32), "s")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 19)], ir_version=10)
    x = np.arange(2 * 2 * 9 * 7, dtype=np.int32).reshape(2, 2, 9, 7)
    want = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    np.testing.assert_array_equal(tflite_zoo.run(tflite_zoo.interpreter(to_tflite(m)), [x])[0], want)


def _run_time_model(attrs, operand):
    """A Resize whose scales or sizes (``operand``) is a graph input: known only at run time."""
    ins = ["x", "", "s"] if operand == "scales" else ["x", "", "", "sizes"]
    operand_vi = (helper.make_tensor_value_info("s", F, [4]) if operand == "scales"
                  else helper.make_tensor_value_info("sizes", TensorProto.INT64, [4]))
    g = helper.make_graph([helper.make_node("Resize", ins, ["y"], **attrs)], "g",
                          [helper.make_tensor_value_info("x", F, ["n", 2, 9, 7]), operand_vi],
                          [helper.make_tensor_value_info("y", F, None)])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 19)], ir_version=10)


@pytest.mark.parametrize("attrs,operand,match", [
    (dict(mode="nearest"), "scales", "scales computed at run time"),
    (dict(mode="cubic"), "sizes", "mode=cubic at a size known only at run time"),
    (dict(mode="linear", coordinate_transformation_mode="tf_crop_and_resize"), "sizes", "tf_crop_and_resize"),
    (dict(mode="nearest", nearest_mode="round_prefer_floor"), "sizes",
     "nearest_mode=round_prefer_floor at a size known only at run time"),
    (dict(mode="linear", antialias=1), "sizes", "antialias=1 at a size known only at run time"),
])
def test_run_time_sizes_refused_naming_the_attribute(attrs, operand, match):
    with pytest.raises(UnsupportedOpsError, match=match):
        to_tflite(_run_time_model(attrs, operand))


@pytest.mark.parametrize("attrs", [dict(mode="linear"), dict(mode="nearest", nearest_mode="round_prefer_ceil",
                                                              coordinate_transformation_mode="half_pixel")])
def test_run_time_sizes_where_the_builtin_is_exact(attrs):
    m = _run_time_model(attrs, "sizes")
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    it = tflite_zoo.interpreter(to_tflite(m))
    rng = np.random.default_rng(0)
    for b, sizes in ((1, [1, 2, 4, 13]), (3, [3, 2, 18, 5])):
        x = rng.standard_normal((b, 2, 9, 7)).astype(np.float32)
        feeds = [x, np.array(sizes, np.int64)]
        want = sess.run(None, {"x": x, "sizes": feeds[1]})[0]
        assert_close(tflite_zoo.run(it, feeds)[0], want, "float32", what=f"sizes {sizes}", scale=SCALE)


def test_unknown_attribute_value_refused():
    m = _resize_model((1, 2, 9, 7), dict(mode="linear"), scales=[1, 1, 2, 2])
    m.graph.node[0].attribute.append(helper.make_attribute("coordinate_transformation_mode", "bogus"))
    with pytest.raises(UnsupportedOpsError, match="bogus"):
        to_tflite(m)


# ---------------------------------------------------------------- onnx 1.22.0's node tests


_FIXTURES = os.path.join(os.path.dirname(__file__), "..", "..", "fixtures", "onnx_node")


def _node_test_files() -> dict:
    """name -> {path inside the case: bytes} for every test_resize_* case: all of them from the
    onnx 1.22.0 wheel (the last that ships ONNX's backend node tests) where it is cached, else
    the subset committed under tests/fixtures/onnx_node."""
    found = sorted(glob.glob("/work/cache/onnx-1.22.0-*.whl"))
    cases: dict = {}
    if found:
        z = zipfile.ZipFile(found[0])
        for n in z.namelist():
            m = re.search(r"node/(test_resize[^/]*)/(model\.onnx|test_data_set_0/[^/]+\.pb)$", n)
            if m:
                cases.setdefault(m.group(1), {})[m.group(2)] = z.read(n)
        return cases
    for folder in sorted(glob.glob(os.path.join(_FIXTURES, "test_resize*"))):
        for path in glob.glob(os.path.join(folder, "**", "*"), recursive=True):
            rel = os.path.relpath(path, folder).replace(os.sep, "/")
            if rel == "model.onnx" or re.fullmatch(r"test_data_set_0/[^/]+\.pb", rel):
                with open(path, "rb") as f:
                    cases.setdefault(os.path.basename(folder), {})[rel] = f.read()
    return cases


@functools.cache
def _node_tests() -> dict:
    """name -> (model with every input but X as an initializer, X, stored output)."""
    out = {}
    for name, files in _node_test_files().items():
        m = onnx.load_from_string(files["model.onnx"])
        arrays = {k.rsplit("/", 1)[1]: numpy_helper.to_array(onnx.TensorProto.FromString(v))
                  for k, v in files.items() if k.endswith(".pb")}
        ins = [arrays[k] for k in sorted(k for k in arrays if k.startswith("input_"))]
        g = m.graph
        for vi, arr in list(zip(g.input, ins))[1:]:
            g.initializer.append(numpy_helper.from_array(arr, vi.name))
        first = onnx.ValueInfoProto()
        first.CopyFrom(g.input[0])
        del g.input[:]
        g.input.append(first)
        out[name] = (m, ins[0], arrays["output_0.pb"])
    return out


_NODE_REFUSED = {  # align_corners with scale x length not an integer: the specification and the reference differ
    "test_resize_downsample_scales_cubic_align_corners", "test_resize_downsample_scales_linear_align_corners"}


def test_onnx_node_tests():
    cases = _node_tests()
    matched = []
    for name, (m, x, want) in cases.items():
        if name in _NODE_REFUSED:
            with pytest.raises(UnsupportedOpsError, match="align_corners"):
                to_tflite(m)
            continue
        got = tflite_zoo.run(tflite_zoo.interpreter(to_tflite(m)), [x])[0]
        assert_close(got, want, "float32", what=name, scale=SCALE)
        matched.append(name)
    assert len(matched) == len(cases) - len(_NODE_REFUSED & set(cases)) >= 12


@pytest.mark.parametrize("length,sizes", [(4, [100_000, 4]), (5000, [4999, 4])])
def test_huge_interpolation_matrix_refused(length, sizes):
    """A few bytes of Resize may not make the converter build a 2**31 x 2**31 matrix."""
    m = _resize_model((1, 1, length, 4), dict(mode="linear", axes=[2, 3]), sizes=sizes)
    with pytest.raises(UnsupportedOpsError, match="MAX_RESIZE_MATRIX"):
        to_tflite(m)


@pytest.mark.parametrize("attrs", [dict(mode="cubic"), dict(mode="linear", antialias=1),
                                   dict(mode="nearest", coordinate_transformation_mode="half_pixel")])
def test_sizes_from_shape_of_a_dynamic_batch(attrs):
    """sizes = Concat(Shape(x)[:2], [h, w]) as exporters write it with a dynamic batch: a run-time
    tensor whose H and W ONNX's shape inference knows, so the exact matrices apply."""
    nodes = [helper.make_node("Shape", ["x"], ["s"], end=2),
             helper.make_node("Concat", ["s", "hw"], ["sizes"], axis=0),
             helper.make_node("Resize", ["x", "", "", "sizes"], ["y"], **attrs)]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", F, ["n", 2, 9, 7])],
                          [helper.make_tensor_value_info("y", F, None)],
                          [numpy_helper.from_array(np.array([4, 13], np.int64), "hw")])
    _compare_with_ort(helper.make_model(g, opset_imports=[helper.make_opsetid("", 19)], ir_version=10))


@pytest.mark.parametrize("scales,sizes,roi,match", [
    ([1, 1, np.inf, 2], None, None, "Resize scales"),
    ([1, 1, -2, 2], None, None, "Resize scales"),
    (None, [1, 2, -3, 4], None, "Resize sizes"),
    ([1, 1, 2, 2], None, [0, 0, np.nan, 0, 1, 1, 1, 1], "Resize roi"),
])
def test_malformed_operands_refused(scales, sizes, roi, match):
    attrs = dict(mode="linear", coordinate_transformation_mode="tf_crop_and_resize" if roi else "half_pixel")
    m = _resize_model((1, 2, 9, 7), attrs, scales=scales, sizes=sizes, roi=roi)
    with pytest.raises(UnsupportedOpsError, match=match):
        to_tflite(m)


@pytest.mark.parametrize("in_len,scale", [(7, 0.75), (9, 0.5), (13, 0.75), (5, 0.6)])
def test_nearest_ties_match_the_builtins_rounding(in_len, scale):
    # RESIZE_NEAREST_NEIGHBOR(align_corners) rounds y * (in - 1) / (out - 1) half away from zero
    # (row 3 of 7 -> 5 is 4.5 -> 5); its emulation rounded half to even and chose the builtin for
    # an asymmetric ceil Resize by 0.75 that wants row 4 (differential fuzz case 1:606)
    scales = np.array([1, 1, scale, 0.75], np.float32)
    for ctm, nearest in (("asymmetric", "ceil"), ("align_corners", "round_prefer_ceil"), ("half_pixel", "floor")):
        node = helper.make_node("Resize", ["x", "", "scales"], ["y"], mode="nearest",
                                coordinate_transformation_mode=ctm, nearest_mode=nearest)
        g = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", F, [1, 2, in_len, 4])],
                              [helper.make_tensor_value_info("y", F, None)], [numpy_helper.from_array(scales, "scales")])
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 19)])
        x = np.arange(2 * in_len * 4, dtype=np.float32).reshape(1, 2, in_len, 4)
        want = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
        try:
            tflite = to_tflite(m)
        except UnsupportedOpsError:
            continue  # a refusal is right too (align_corners with a non-integer length)
        got = tflite_zoo.run(tflite_zoo.interpreter(tflite), [x])[0]
        np.testing.assert_array_equal(got, want, err_msg=f"{ctm}, {nearest}")
