"""ONNX input at any opset: brought to the mappers' opset by onnx's version converter and checked
by onnx (``converters/tflite/onnx_in/normalise.py``), so old-opset semantics are onnx's adapters', never
guessed. Each converted model runs in LiteRT against ONNX Runtime on the original file; what onnx
cannot convert or check is refused naming the operator."""

from __future__ import annotations

import io
import warnings

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from pt2x.converters import to_tflite
from pt2x.converters.errors import ConversionError, UnsupportedOpsError


def _vi(name, shape, elem=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, elem, shape)


def _model(nodes, opset, inputs=(("x", [2, 3, 4]),), outputs=("y",), imports=()):
    g = helper.make_graph(nodes, "g", [_vi(n, s) for n, s in inputs],
                          [o if isinstance(o, onnx.ValueInfoProto) else _vi(o, None) for o in outputs])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset), *imports])


def _litert(data: bytes, feeds: dict) -> list[np.ndarray]:
    from ai_edge_litert.interpreter import Interpreter

    it = Interpreter(model_content=data)
    for d in it.get_input_details():
        it.resize_tensor_input(d["index"], list(feeds[d["name"]].shape))
    it.allocate_tensors()
    for d in it.get_input_details():
        it.set_tensor(d["index"], feeds[d["name"]])
    it.invoke()
    return [it.get_tensor(d["index"]) for d in it.get_output_details()]


def _ort(m: onnx.ModelProto, feeds: dict) -> list[np.ndarray]:
    import onnxruntime as ort

    return ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)


def _matches_ort(m: onnx.ModelProto, feeds: dict, atol=1e-5) -> None:
    got, want = _litert(to_tflite(m), feeds), _ort(m, feeds)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=atol)


_X = {"x": (np.random.default_rng(0).standard_normal((2, 3, 4)) * 4).astype(np.float32)}

_OLD = {  # old-opset operators whose semantics changed later (pt2x got each wrong or crashed once)
    "clip6_attributes": ([helper.make_node("Clip", ["x"], ["y"], min=-1.0, max=2.5)], 6),
    "softmax11_flattens_from_axis": ([helper.make_node("Softmax", ["x"], ["y"], axis=1)], 11),
    "logsoftmax11_flattens_from_axis": ([helper.make_node("LogSoftmax", ["x"], ["y"], axis=1)], 11),
    "pad2_pads_attribute": ([helper.make_node("Pad", ["x"], ["y"], pads=[0, 1, 0, 0, 2, 1], value=1.5)], 2),
    "reshape1_shape_attribute": ([helper.make_node("Reshape", ["x"], ["y"], shape=[4, 6])], 1),
    "topk1_k_attribute": ([helper.make_node("TopK", ["x"], ["y", "i"], k=2)], 1),
}


@pytest.mark.parametrize("case", sorted(_OLD))
def test_an_old_opset_operator_matches_onnx_runtime(case):
    nodes, opset = _OLD[case]
    outputs = ("y", _vi("i", None, TensorProto.INT64)) if case.startswith("topk") else ("y",)
    _matches_ort(_model(nodes, opset, outputs=outputs), _X)


def test_a_relu6_network_exported_by_torch_at_opset_10_matches_onnx_runtime():
    """torch writes ReLU6 as Clip-6 with min/max attributes at opset 10 (it was an identity once)."""
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.ReLU6(), torch.nn.Flatten(),
                              torch.nn.Linear(4 * 6 * 6, 5), torch.nn.Softmax(dim=1)).eval()
    with torch.no_grad():
        net[0].weight.mul_(8)  # activations well past 6, so the clip matters
    buf = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(net, (torch.randn(1, 3, 8, 8),), buf, opset_version=10, dynamo=False,
                          input_names=["x"], output_names=["y"])
    m = onnx.load_from_string(buf.getvalue())
    assert m.opset_import[0].version == 10 and "Clip" in [n.op_type for n in m.graph.node]
    x = {"x": np.random.default_rng(1).standard_normal((1, 3, 8, 8)).astype(np.float32)}
    _matches_ort(m, x)
    with torch.no_grad():
        np.testing.assert_allclose(_litert(to_tflite(m), x)[0], net(torch.from_numpy(x["x"])).numpy(), atol=1e-5)


def test_an_operator_the_version_converter_has_no_adapter_for_is_refused_naming_it():
    m = _model([helper.make_node("Split", ["x"], ["y", "z"], axis=1, split=[1, 2])], 1, outputs=("y", "z"))
    with pytest.raises(UnsupportedOpsError, match=r"ONNX Split(.|\n)*version converter cannot bring it from opset 1"):
        to_tflite(m)


def test_a_deprecated_operator_is_refused_naming_it():
    """Upsample at opset 18 (deprecated since 10)."""
    scales = helper.make_tensor("s", TensorProto.FLOAT, [4], [1, 1, 2, 2])
    m = _model([helper.make_node("Upsample", ["x", "s"], ["y"], mode="nearest")], 18, inputs=(("x", [1, 1, 2, 2]),))
    m.graph.initializer.append(scales)
    with pytest.raises(UnsupportedOpsError, match=r"ONNX Upsample(.|\n)*deprecated at opset 18"):
        to_tflite(m)


@pytest.mark.parametrize("op, opset", [("Resize", 10), ("Upsample", 9)])
def test_an_adapter_that_changes_semantics_is_refused(op, opset):
    """onnx's adapter makes Resize-10/Upsample-9 a Resize-11+ at its default half_pixel transform,
    not their asymmetric one: converted, linear 2x differs from ONNX Runtime by 0.62."""
    scales = helper.make_tensor("s", TensorProto.FLOAT, [4], [1, 1, 2, 2])
    m = _model([helper.make_node(op, ["x", "s"], ["y"], mode="linear")], opset, inputs=(("x", [1, 1, 4, 4]),))
    m.graph.initializer.append(scales)
    with pytest.raises(UnsupportedOpsError, match=rf"ONNX {op}(.|\n)*asymmetric coordinate transform"):
        to_tflite(m)


def test_hardmax_below_13_is_refused_where_the_adapter_keeps_it_unchanged():
    """Hardmax-11 axis=2 of a 4-D input is one-hot over dims 2 and 3 flattened; the adapter keeps
    the node as is, which at 13 is one-hot over dim 2 alone (1.0 off ONNX Runtime)."""
    m = _model([helper.make_node("Hardmax", ["x"], ["y"], axis=1)], 11)
    with pytest.raises(UnsupportedOpsError, match=r"ONNX Hardmax(.|\n)*no longer flattens"):
        to_tflite(m)


def test_scan_below_9_is_refused_where_the_adapter_drops_the_batch_axis():
    """Scan-8 carries a batch axis; the adapter's Scan-9 model declares the inputs without it."""
    body = helper.make_graph([helper.make_node("Add", ["s", "x_t"], ["s2"])], "body",
                             [_vi("s", [2]), _vi("x_t", [2])], [_vi("s2", [2])])
    m = _model([helper.make_node("Scan", ["", "s0", "x"], ["y"], body=body, num_scan_inputs=1)], 8,
               inputs=(("s0", [1, 2]), ("x", [1, 3, 2])))
    with pytest.raises(UnsupportedOpsError, match=r"ONNX Scan(.|\n)*batch axis"):
        to_tflite(m)


@pytest.mark.parametrize("nodes, outputs, message", [
    ([helper.make_node("Transpose", ["x"], ["y"], perm=[0, 0, 1])], ("y",), r"ONNX Transpose(.|\n)*repeated value"),
    ([helper.make_node("Relu", ["x"], ["y"])], (_vi("y", [2, 3, 4], TensorProto.INT64),), r"ONNX Relu(.|\n)*elem type"),
    ([helper.make_node("Relu", ["x"], ["y"])], (_vi("y", [5, 3, 4]),), r"ONNX Relu(.|\n)*differ in dimension 0"),
])
def test_what_onnx_shape_inference_refuses_is_refused_naming_the_operator(nodes, outputs, message):
    with pytest.raises(UnsupportedOpsError, match=message):
        to_tflite(_model(nodes, 18, outputs=outputs))


def test_an_unknown_operator_is_refused_naming_it_at_old_and_current_opsets():
    for opset in (11, 18):
        with pytest.raises(UnsupportedOpsError, match=r"ONNX NotAnOp"):
            to_tflite(_model([helper.make_node("NotAnOp", ["x"], ["y"])], opset))


def test_other_domains_imported_beside_the_default_one():
    """An unused ai.onnx.ml import converts; a vendor op is refused by name, at an old opset too."""
    ml = [helper.make_opsetid("ai.onnx.ml", 3)]
    _matches_ort(_model([helper.make_node("Relu", ["x"], ["y"])], 11, imports=ml), _X)
    vendor = [helper.make_opsetid("com.example", 1)]
    for opset in (11, 18):
        m = _model([helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Foo", ["r"], ["y"], domain="com.example")],
                   opset, imports=vendor)
        with pytest.raises(UnsupportedOpsError, match=r"Foo"):
            to_tflite(m)


def test_current_opsets_and_outputs_without_shapes_still_convert():
    """Gelu (opset 20) is not brought down; an output without a shape (exporters write them)."""
    _matches_ort(_model([helper.make_node("Gelu", ["x"], ["y"])], 20), _X)
    _matches_ort(_model([helper.make_node("Tanh", ["x"], ["y"])], 18, outputs=(_vi("y", None),)), _X)


def test_a_model_older_than_the_version_converter_reaches_is_refused_not_crashed():
    m = _model([helper.make_node("Relu", ["x"], ["y"])], 18)
    m.opset_import[0].version = 0
    with pytest.raises(ConversionError):
        to_tflite(m)


def test_an_old_opset_model_converts_torch_free(tmp_path):
    """The version converter, strict inference and checker are onnx's: no torch on the way."""
    from torchfree import run_torch_free

    path = tmp_path / "clip6.onnx"
    onnx.save(_model(*_OLD["clip6_attributes"]), path)
    code = """
        import sys
        from pt2x.converters import to_tflite
        print("bytes:", len(to_tflite(sys.argv[1])))
    """
    out = run_torch_free(code, str(path))
    assert out.returncode == 0, out.stderr
    assert "bytes:" in out.stdout
