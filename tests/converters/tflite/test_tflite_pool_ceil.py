"""Pools and convolutions with ceil_mode, auto_pad and pads in every combination, converted to
TFLite and run in LiteRT against ONNX Runtime on the same ONNX model; and the three real
networks that pool with ceil_mode=1 (torchvision GoogLeNet and SqueezeNet, timm's ResNet-D,
whose avg_down shortcut is a ceil-mode AvgPool), exported from torch, converted from the .pt2
where ``import torch`` fails and compared with torch eager on two batch sizes."""

from __future__ import annotations

import itertools
import os

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

import tflite_zoo
from pt2x.converters import to_tflite
from pt2x.converters.errors import UnsupportedOpsError

F = TensorProto.FLOAT


def _model(node, in_shape):
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", F, in_shape)],
                          [helper.make_tensor_value_info("y", F, None)])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 19)], ir_version=9)


def _compare(m, xs):
    it = tflite_zoo.interpreter(to_tflite(m))
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    for x in xs:
        (want,) = sess.run(None, {"x": x})
        (got,) = tflite_zoo.run(it, [x])
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def _x(shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


# (kernel, strides, pads) per 2-D case: last windows that fit, that hang over, that would start
# in the padding (dropped), asymmetric pads
_GEOMETRY = [((3, 3), (2, 2), (0, 0, 0, 0)), ((3, 3), (2, 2), (1, 1, 1, 1)), ((2, 3), (2, 3), (0, 1, 1, 0)),
             ((3, 2), (3, 2), (1, 0, 0, 1)), ((2, 2), (2, 2), (1, 1, 1, 1))]


@pytest.mark.parametrize("op,include", [("MaxPool", 0), ("AveragePool", 0), ("AveragePool", 1)])
def test_ceil_mode_2d_against_onnxruntime(op, include):
    for (k, s, p), ceil in itertools.product(_GEOMETRY, (0, 1)):
        extra = {"count_include_pad": include} if op == "AveragePool" else {}
        node = helper.make_node(op, ["x"], ["y"], kernel_shape=k, strides=s, pads=p, ceil_mode=ceil, **extra)
        _compare(_model(node, ["n", 2, 9, 10]), [_x((1, 2, 9, 10)), _x((2, 2, 9, 10), 1)])


@pytest.mark.parametrize("op", ["MaxPool", "AveragePool"])
@pytest.mark.parametrize("auto_pad", ["SAME_UPPER", "SAME_LOWER", "VALID"])
def test_auto_pad_1d_2d_3d(op, auto_pad):
    for shape, k, s in (([1, 3, 11], [3], [2]), ([1, 3, 7, 8], [3, 2], [2, 3]),
                        ([1, 2, 5, 6, 7], [2, 3, 2], [2, 2, 3])):
        node = helper.make_node(op, ["x"], ["y"], kernel_shape=k, strides=s, auto_pad=auto_pad)
        _compare(_model(node, shape), [_x(shape)])


@pytest.mark.parametrize("ceil,include", [(0, 0), (1, 0), (1, 1)])
def test_3d_pools_with_pads(ceil, include):
    """3-D pools run as two separable 2-D passes; the count of an average is per axis."""
    shape = [1, 2, 7, 6, 9]
    for op in ("MaxPool", "AveragePool"):
        extra = {"count_include_pad": include} if op == "AveragePool" else {}
        node = helper.make_node(op, ["x"], ["y"], kernel_shape=[3, 2, 3], strides=[2, 2, 2], pads=[1, 0, 1, 0, 1, 1],
                                ceil_mode=ceil, **extra)
        _compare(_model(node, shape), [_x(shape)])


@pytest.mark.parametrize("ceil,include", [(0, 0), (1, 1)])
def test_dilated_pools_1d_2d_3d(ceil, include):
    """Dilated windows (one strided slice per tap), with pads and ceil_mode."""
    for shape, k, s, d, p in (([1, 2, 13], [3], [2], [2], [1, 1]),
                              ([1, 2, 9, 10], [2, 3], [1, 2], [2, 2], [1, 0, 1, 2]),
                              ([1, 2, 6, 7, 8], [2, 2, 3], [1, 2, 2], [2, 1, 2], [0, 1, 1, 1, 0, 0])):
        for op in ("MaxPool", "AveragePool"):
            extra = {"count_include_pad": include} if op == "AveragePool" else {}
            node = helper.make_node(op, ["x"], ["y"], kernel_shape=k, strides=s, dilations=d, pads=p, ceil_mode=ceil,
                                    **extra)
            _compare(_model(node, shape), [_x(shape)])


def test_max_pool_pads_with_minus_inf():
    """A window of -inf values and padding is -inf, as in torch and onnx's reference (ONNX
    Runtime starts its windows at float32's lowest, so it answers -3.4e38 where a window
    holds padding: a difference documented in docs/tflite.md)."""
    node = helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[2, 2], strides=[2, 2], pads=[1, 1, 1, 1])
    x = np.full((1, 1, 4, 4), -np.inf, np.float32)
    (got,) = tflite_zoo.run(tflite_zoo.interpreter(to_tflite(_model(node, [1, 1, 4, 4]))), [x])
    np.testing.assert_array_equal(got, np.full((1, 1, 3, 3), -np.inf, np.float32))


@pytest.mark.parametrize("auto_pad", ["SAME_UPPER", "SAME_LOWER", "VALID"])
def test_conv_auto_pad_1d_2d_3d_dilated(auto_pad):
    rng = np.random.default_rng(0)
    for shape, k, s, d in (([1, 2, 13], [3], [2], [2]), ([1, 2, 9, 8], [3, 2], [2, 1], [1, 2]),
                           ([1, 2, 6, 7, 5], [3, 2, 2], [2, 1, 2], [1, 2, 1])):
        w = helper.make_tensor("w", F, [4, 2] + k, rng.standard_normal(8 * int(np.prod(k))).astype(np.float32))
        if auto_pad != "VALID":  # ONNX Runtime refuses dilations with SAME_*
            d = [1] * len(k)
        node = helper.make_node("Conv", ["x", "w"], ["y"], strides=s, dilations=d, auto_pad=auto_pad)
        m = _model(node, shape)
        m.graph.initializer.append(w)
        _compare(m, [_x(shape)])


def test_dynamic_sizes_same_upper_or_refused():
    """SAME_UPPER over run-time sizes is TFLite's SAME padding (exact for every size); a
    ceil-mode pool over them is refused, naming the attribute."""
    node = helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[3, 3], strides=[2, 2], auto_pad="SAME_UPPER")
    _compare(_model(node, [1, 2, "h", "w"]), [_x((1, 2, 7, 9)), _x((1, 2, 10, 4))])
    node = helper.make_node("AveragePool", ["x"], ["y"], kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1)
    with pytest.raises(UnsupportedOpsError, match="ceil_mode=1 over a spatial dim known only at run time"):
        to_tflite(_model(node, [1, 2, "h", "w"]))


# ----------------------------------------------------------------------- real networks


def _squeezenet_features():
    import model_zoo

    return model_zoo._tv("squeezenet1_0")().features


def _networks():
    import model_zoo

    return [model_zoo.ZooModel("tv_googlenet", "torchvision googlenet", model_zoo._tv("googlenet", aux_logits=False,
                                                                                        init_weights=False),
                               model_zoo._image(64)),
            model_zoo.ZooModel("tv_squeezenet1_0", "torchvision squeezenet1_0 .features", _squeezenet_features,
                               model_zoo._image(64)),
            model_zoo.ZooModel("timm_resnet18d", "timm resnet18d", model_zoo._timm("resnet18d"), model_zoo._image(64))]


@pytest.mark.parametrize("index", [0, 1, 2], ids=["googlenet", "squeezenet1_0", "resnet18d"])
def test_ceil_mode_networks_match_eager(index, tmp_path):
    import model_zoo
    import torch

    from tolerances import assert_close
    from torchfree import convert_torch_free

    missing = model_zoo.missing_libraries()
    if missing:
        pytest.skip(f"model-zoo libraries not importable: {', '.join(missing)}")
    zm = _networks()[index]
    torch.manual_seed(0)
    model = model_zoo.redraw(zm.build(), seed=0, calibrate=zm.make_input(8))
    if zm.name == "tv_squeezenet1_0":  # ReLU without BatchNorm: He gain, or the signal fades layer by layer
        with torch.no_grad():
            for p in model.parameters():
                if p.dim() == 4:
                    p.mul_(2 ** 0.5)
    path = os.path.join(tmp_path, f"{zm.name}.pt2")
    torch.export.save(model_zoo.export(zm, model, "exported"), path)
    it = tflite_zoo.interpreter(convert_torch_free("to_tflite", path))
    for b, (x, ref) in model_zoo.references(zm, model).items():
        (got, *_) = tflite_zoo.run(it, [x.numpy()])
        assert_close(got, ref.numpy(), ref.dtype, what=f"{zm.name} batch {b}", scale=zm.scale)
