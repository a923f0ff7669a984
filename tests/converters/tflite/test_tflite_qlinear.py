"""ONNX's integer operators (QLinearConv, QLinearMatMul, ConvInteger, MatMulInteger) through the
TFLite path (``converters/tflite/onnx_in/qlinear_rewrite.py``: their exact float32 computation).

- ONNX Runtime's own QOperator models: a small CNN built with ``onnx.helper`` (two convolutions,
  a depthwise one, a flatten, a MatMul; dynamic batch), quantized by
  ``onnxruntime.quantization.quantize_static`` with ``QuantFormat.QOperator`` (QLinearConv with
  per-channel int8 weights, or uint8 ones with a zero point per channel, QLinearMatMul; uint8 or
  int8 activations), calibrated on seeded data, converted where ``import torch`` fails, run in
  LiteRT with XNNPACK and without, at two batch sizes: bit-exact to onnx's reference evaluator,
  and within one output step of ONNX Runtime where its kernels do not saturate.
- ``quantize_dynamic``'s ConvInteger/MatMulInteger form of the same CNN, against the reference.
- Refusals name the node: integer sums that may pass 2^24 (float32 would no longer be exact),
  per-row input zero points, float16 scales given at run time.
"""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper
from tflite_zoo import interpreter, run
from torchfree import convert_torch_free

from pt2x.converters import to_tflite
from pt2x.converters.errors import UnsupportedOpsError

pytest.importorskip("ai_edge_litert", reason="LiteRT runs the converted files")

BATCHES = (2, 1)


def _float_cnn(path: str) -> None:
    rng = np.random.default_rng(0)
    w1 = rng.standard_normal((8, 3, 3, 3)).astype(np.float32) * 0.3
    w2 = rng.standard_normal((8, 8, 3, 3)).astype(np.float32) * 0.2
    dw = rng.standard_normal((8, 1, 3, 3)).astype(np.float32) * 0.5
    fc = rng.standard_normal((8 * 4 * 4, 10)).astype(np.float32) * 0.1
    inits = [numpy_helper.from_array(a, n) for a, n in ((w1, "w1"), (rng.standard_normal(8).astype(np.float32), "b1"),
                                                         (w2, "w2"), (dw, "dw"), (fc, "fc"),
                                                         (np.asarray([-1, 128], np.int64), "flat"))]
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c1"], ["r1"]),
             helper.make_node("Conv", ["r1", "w2"], ["c2"], pads=[1, 1, 1, 1], strides=[2, 2]),
             helper.make_node("Relu", ["c2"], ["r2"]),
             helper.make_node("Conv", ["r2", "dw"], ["d"], pads=[1, 1, 1, 1], group=8),  # depthwise
             helper.make_node("Reshape", ["d", "flat"], ["f"]),
             helper.make_node("MatMul", ["f", "fc"], ["y"])]
    g = helper.make_graph(nodes, "cnn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 8, 8])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 10])], inits)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)]), path)


def _qoperator(src: str, dst: str, activations, weights) -> onnx.ModelProto:
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.batches = [np.random.default_rng(i).standard_normal((4, 3, 8, 8)).astype(np.float32)
                            for i in range(4)]

        def get_next(self):
            return {"x": self.batches.pop()} if self.batches else None

    quantize_static(src, dst, Reader(), quant_format=QuantFormat.QOperator, per_channel=True,
                    activation_type=activations, weight_type=weights,
                    op_types_to_quantize=["Conv", "MatMul"])
    return onnx.load(dst)


def _output_step(m: onnx.ModelProto) -> float:
    inits = {t.name: numpy_helper.to_array(t) for t in m.graph.initializer}
    node = next(n for n in m.graph.node if n.output[0] == m.graph.output[0].name)
    assert node.op_type == "DequantizeLinear"
    return float(inits[node.input[1]])


@pytest.mark.parametrize("activations, weights", [("QUInt8", "QInt8"), ("QInt8", "QInt8"), ("QUInt8", "QUInt8")])
def test_qoperator_cnn_matches_the_reference(tmp_path, activations, weights):
    """uint8 weights are asymmetric: a zero point per output channel."""
    from onnx.reference import ReferenceEvaluator
    from onnxruntime.quantization import QuantType

    _float_cnn(str(tmp_path / "f.onnx"))
    m = _qoperator(str(tmp_path / "f.onnx"), str(tmp_path / "q.onnx"), getattr(QuantType, activations),
                   getattr(QuantType, weights))
    ops = [n.op_type for n in m.graph.node]
    assert ops.count("QLinearConv") == 3 and ops.count("QLinearMatMul") == 1, ops
    data = convert_torch_free("to_tflite", str(tmp_path / "q.onnx"))
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    reference = ReferenceEvaluator(m)
    step = _output_step(m)
    for batch in BATCHES:
        x = np.random.default_rng(10 + batch).standard_normal((batch, 3, 8, 8)).astype(np.float32)
        want = reference.run(None, {"x": x})[0]
        for xnnpack in (True, False):
            (got,) = run(interpreter(data, xnnpack=xnnpack), [x])
            assert got.shape == want.shape
            assert np.abs(got - want).max() / step == 0.0, (batch, xnnpack)  # bit-exact to onnx's reference
        if activations == "QInt8" and weights == "QInt8":
            # ONNX Runtime's u8s8 QLinearConv saturates its 16-bit pair sums on CPUs without VNNI (9 steps
            # off the reference measured with uint8 activations); with int8 ones it agrees within a step
            assert np.abs(sess.run(None, {"x": x})[0] - got).max() / step <= 1.0 + 1e-3


def test_dynamic_quantization_matches_the_reference(tmp_path):
    """``quantize_dynamic``: DynamicQuantizeLinear -> ConvInteger / MatMulInteger -> Cast -> Mul by the scales."""
    from onnx.reference import ReferenceEvaluator
    from onnxruntime.quantization import QuantType, quantize_dynamic

    _float_cnn(str(tmp_path / "f.onnx"))
    quantize_dynamic(str(tmp_path / "f.onnx"), str(tmp_path / "d.onnx"), weight_type=QuantType.QUInt8,
                     op_types_to_quantize=["Conv", "MatMul"])
    m = onnx.load(str(tmp_path / "d.onnx"))
    ops = [n.op_type for n in m.graph.node]
    assert ops.count("ConvInteger") == 3 and ops.count("MatMulInteger") == 1, ops
    data = to_tflite(m)
    reference = ReferenceEvaluator(m)
    for batch in BATCHES:
        x = np.random.default_rng(20 + batch).standard_normal((batch, 3, 8, 8)).astype(np.float32)
        want = reference.run(None, {"x": x})[0]
        for xnnpack in (True, False):
            (got,) = run(interpreter(data, xnnpack=xnnpack), [x])
            # the integer sums are exact; the float32 scale products after them round alike
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6 * np.abs(want).max())


def _qlinear_matmul(a_zp_shape=(), k: int = 4, scale_type=TensorProto.FLOAT, b_const=True, bz_type=np.int8,
                    **attrs) -> onnx.ModelProto:
    rng = np.random.default_rng(1)
    np_scale = helper.tensor_dtype_to_np_dtype(scale_type)
    b = rng.integers(-128, 128, (k, 3)).astype(np.int8)
    inits = [numpy_helper.from_array(np.asarray(0.05, np_scale), "as"),
             numpy_helper.from_array(np.full(a_zp_shape, 3, np.uint8), "az"),
             numpy_helper.from_array(np.asarray(0.02, np_scale), "bs"),
             numpy_helper.from_array(np.asarray(0, bz_type), "bz"),
             numpy_helper.from_array(np.asarray(0.1, np_scale), "ys"),
             numpy_helper.from_array(np.asarray(128, np.uint8), "yz")]
    inputs = [helper.make_tensor_value_info("a", TensorProto.UINT8, [2, k])]
    if b_const:
        inits.append(numpy_helper.from_array(b, "b"))
    else:
        inputs.append(helper.make_tensor_value_info("b", TensorProto.INT8, [k, 3]))
    if scale_type != TensorProto.FLOAT:
        inits = [t for t in inits if t.name != "ys"]
        inputs.append(helper.make_tensor_value_info("ys", scale_type, []))
    node = helper.make_node("QLinearMatMul", ["a", "as", "az", "b", "bs", "bz", "ys", "yz"], ["y"], name="qmm", **attrs)
    g = helper.make_graph([node], "g", inputs, [helper.make_tensor_value_info("y", TensorProto.UINT8, [2, 3])], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)])


@pytest.mark.parametrize("scale_type", [TensorProto.FLOAT, TensorProto.FLOAT16, TensorProto.BFLOAT16])
def test_qlinear_matmul_matches_the_reference_exactly(scale_type):
    """float16/bfloat16 scales: y_scale a run-time input; the multiplier keeps that type's rounding."""
    from onnx.reference import ReferenceEvaluator

    m = _qlinear_matmul(k=64, scale_type=scale_type)
    a = np.random.default_rng(2).integers(0, 256, (2, 64)).astype(np.uint8)
    feeds = {"a": a}
    if scale_type != TensorProto.FLOAT:
        ys = np.asarray(0.5, helper.tensor_dtype_to_np_dtype(scale_type))
        feeds["ys"] = ys
    want = ReferenceEvaluator(m).run(None, feeds)[0]
    if scale_type != TensorProto.FLOAT:  # a float32 multiplier would give another output here
        b = next(numpy_helper.to_array(t) for t in m.graph.initializer if t.name == "b").astype(np.int32)
        acc = np.matmul(a.astype(np.int32) - 3, b).astype(np.float32)
        sa, sb = (np.float32(np.asarray(v, ys.dtype)) for v in (0.05, 0.02))
        m32 = sa * sb / np.float32(ys)
        assert not np.array_equal(np.clip(np.rint(acc * m32 + 128), 0, 255), want)
    data = to_tflite(m)
    for xnnpack in (True, False):
        (got,) = run(interpreter(data, xnnpack=xnnpack), list(feeds.values()))
        assert got.dtype == np.uint8 and np.array_equal(got, want), (xnnpack, got, want)


@pytest.mark.parametrize("case, reason", [
    (dict(a_zp_shape=(2,)), "a_zero_point of shape [2]"),  # per-row zero point
    (dict(transA=1), "attribute 'transA'"),  # not in the schema: refused, never ignored
    (dict(bz_type=np.float32), "b zero point of ONNX type FLOAT"),  # against the schema's type constraint
])
def test_refusals_name_the_node(case, reason):
    with pytest.raises(UnsupportedOpsError) as e:
        to_tflite(_qlinear_matmul(**case))
    assert "QLinearMatMul" in str(e.value) and "qmm" in str(e.value) and reason in str(e.value)


def test_constant_weights_bound_the_sums_by_their_values():
    """k=300 with constant weights of small magnitude converts: the bound is from their values."""
    m = _qlinear_matmul(k=300)
    b = next(t for t in m.graph.initializer if t.name == "b")
    b.CopyFrom(numpy_helper.from_array(np.ones((300, 3), np.int8), "b"))
    from onnx.reference import ReferenceEvaluator

    a = np.random.default_rng(3).integers(0, 256, (2, 300)).astype(np.uint8)
    want = ReferenceEvaluator(m).run(None, {"a": a})[0]
    (got,) = run(interpreter(to_tflite(m)), [a])
    assert np.array_equal(got, want)


def test_every_schema_attribute_is_read_or_refused():
    """QLinearConv/ConvInteger hand each of their attributes to the Conv node (whose table reads or
    refuses each value); the MatMul forms have none. A schema that grows one fails here."""
    from pt2x.converters.tflite.onnx_in import qlinear_rewrite

    conv = set(qlinear_rewrite._CONV_ATTRS)
    for op, want in (("QLinearConv", conv), ("ConvInteger", conv), ("QLinearMatMul", set()), ("MatMulInteger", set())):
        assert set(onnx.defs.get_schema(op).attributes) == want, op


def _conv_model(op: str, c: int, kernel: int, w_const: bool, bias: bool = False) -> tuple[onnx.ModelProto, dict]:
    rng = np.random.default_rng(4)
    w = rng.integers(-128, 128, (2, c, kernel, kernel)).astype(np.int8)
    x = rng.integers(0, 256, (1, c, kernel + 2, kernel + 2)).astype(np.uint8)
    inits, inputs, feeds = [], [helper.make_tensor_value_info("x", TensorProto.UINT8, list(x.shape))], {"x": x}
    if w_const:
        inits.append(numpy_helper.from_array(w, "w"))
    else:
        inputs.append(helper.make_tensor_value_info("w", TensorProto.INT8, list(w.shape)))
        feeds["w"] = w
    if op == "ConvInteger":
        inits.append(numpy_helper.from_array(np.asarray(7, np.uint8), "xz"))
        node = helper.make_node(op, ["x", "w", "xz"], ["y"], name="conv", pads=[1, 1, 1, 1])
        out = TensorProto.INT32
    else:
        inits += [numpy_helper.from_array(np.asarray(v, t), n) for v, t, n in (
            (0.02, np.float32, "xs"), (7, np.uint8, "xz"), ([0.01, 0.03], np.float32, "ws"), ([0, 0], np.int8, "wz"),
            (6.0, np.float32, "ys"), (100, np.uint8, "yz"), ([123457, -98765], np.int32, "B"))]
        node = helper.make_node(op, ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz"] + (["B"] if bias else []), ["y"],
                                name="conv", pads=[1, 1, 1, 1])
        out = TensorProto.UINT8
    g = helper.make_graph([node], "g", inputs, [helper.make_tensor_value_info("y", out, None)], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)]), feeds


@pytest.mark.parametrize("op, bias", [("ConvInteger", False), ("QLinearConv", True)])
def test_sums_past_2_24_split_over_input_channels(op, bias):
    """300 input channels of random int8 3x3 weights: Σ|x - zp||w| reaches ~4.4e7, so the channels are
    cut into runs each exact in float32, added in int32 (the bias too): equal to the reference."""
    from onnx.reference import ReferenceEvaluator

    m, feeds = _conv_model(op, 300, 3, w_const=True, bias=bias)
    want = ReferenceEvaluator(m).run(None, feeds)[0]
    data = to_tflite(m)
    for xnnpack in (True, False):
        (got,) = run(interpreter(data, xnnpack=xnnpack), list(feeds.values()))
        assert got.dtype == want.dtype and np.array_equal(got, want), xnnpack
    if op == "QLinearConv":
        assert len(np.unique(want)) > 20  # not saturated: the requantized values differ


def test_matmul_sums_past_2_24_are_exact():
    """MatMulInteger with K = 600 run-time operands near their extremes: sums past 2^24 with odd
    values (one float32 sum would round them), exact through int32 runs."""
    from onnx.reference import ReferenceEvaluator

    rng = np.random.default_rng(5)
    a = rng.integers(200, 256, (2, 600)).astype(np.uint8)
    b = np.where(rng.random((600, 3)) < 0.97, 127, rng.integers(-128, 128, (600, 3))).astype(np.int8)
    node = helper.make_node("MatMulInteger", ["a", "b"], ["y"], name="mm")
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info("a", TensorProto.UINT8, [2, 600]),
                                        helper.make_tensor_value_info("b", TensorProto.INT8, [600, 3])],
                          [helper.make_tensor_value_info("y", TensorProto.INT32, [2, 3])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)])
    want = ReferenceEvaluator(m).run(None, {"a": a, "b": b})[0]
    assert np.abs(want).max() > 1 << 24 and (want % 2).any()
    data = to_tflite(m)
    for xnnpack in (True, False):
        (got,) = run(interpreter(data, xnnpack=xnnpack), [a, b])
        assert np.array_equal(got, want), xnnpack


def test_one_channel_past_2_24_is_refused():
    """A 17x17 kernel of run-time weights: one channel's 289 products can reach 2^24."""
    m, _ = _conv_model("ConvInteger", 1, 17, w_const=False)
    with pytest.raises(UnsupportedOpsError) as e:
        to_tflite(m)
    assert "ConvInteger" in str(e.value) and "conv" in str(e.value) and "one input channel" in str(e.value)
