"""ONNX models from outside pt2x that break what the TFLite target would otherwise trust: each
ends in a ``ConversionError`` (a ``Pt2Error``) naming the graph, node, initializer or value and
the field, before anything is allocated from a stated size (``converters/tflite/onnx_in/onnx_check.py``,
``converters/limits.py``). The models are built with ``onnx.helper`` the way exporters write
them, then broken one way each; the good ones run in LiteRT. The fuzzer's ``--onnx`` mode
(``fuzz/fuzz.py``) covers the combinations; these pin one case per check."""

from __future__ import annotations

import os

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from pt2x.converters import to_tflite
from pt2x.converters.errors import ConversionError
from pt2x.converters.limits import MAX_ONNX_NODES, MAX_ONNX_SUBGRAPH_DEPTH
from pt2x.serde.errors import Pt2Error
from torchfree import run_torch_free


def _vi(name, shape, elem=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, elem, shape)


def _matmul_tanh(w: TensorProto | None = None, nodes=None, opset: int = 18) -> onnx.ModelProto:
    """y = tanh(x @ w), x [B, 4], w [4, 3]."""
    w = w if w is not None else numpy_helper.from_array(np.arange(12, dtype=np.float32).reshape(4, 3) / 10, "w")
    nodes = nodes if nodes is not None else [helper.make_node("MatMul", ["x", "w"], ["m"], name="matmul"),
                                             helper.make_node("Tanh", ["m"], ["y"], name="tanh")]
    g = helper.make_graph(nodes, "g", [_vi("x", ["B", 4])], [_vi("y", ["B", 3])], [w])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


def _run_litert(data: bytes, x: np.ndarray) -> np.ndarray:
    from ai_edge_litert.interpreter import Interpreter

    it = Interpreter(model_content=data)
    inp = it.get_input_details()[0]
    it.resize_tensor_input(inp["index"], list(x.shape))
    it.allocate_tensors()
    it.set_tensor(inp["index"], x)
    it.invoke()
    return it.get_tensor(it.get_output_details()[0]["index"])


def _refused(m, *fragments: str) -> str:
    with pytest.raises(ConversionError) as e:
        to_tflite(m)
    text = str(e.value)
    for f in fragments:
        assert f in text, text
    return text


def test_the_unbroken_model_converts_and_runs():
    x = np.random.default_rng(0).standard_normal((2, 4)).astype(np.float32)
    w = np.arange(12, dtype=np.float32).reshape(4, 3) / 10
    np.testing.assert_allclose(_run_litert(to_tflite(_matmul_tanh()), x), np.tanh(x @ w), rtol=1e-5, atol=1e-6)


def test_raw_data_shorter_than_dims_is_refused_naming_the_initializer():
    w = numpy_helper.from_array(np.ones((4, 3), np.float32), "w")
    w.raw_data = w.raw_data[:-5]
    _refused(_matmul_tanh(w), "initializer 'w'", "raw_data holds 43 bytes", "need 48")


def test_typed_values_not_matching_dims_are_refused():
    w = TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[4, 3], float_data=[1.0] * 11)
    _refused(_matmul_tanh(w), "initializer 'w'", "holds 11 values", "need 12")


@pytest.mark.parametrize("dim", [-1, 2**40])
def test_a_dim_out_of_range_is_refused_naming_the_value(dim):
    m = _matmul_tanh()
    m.graph.input[0].type.tensor_type.shape.dim[0].dim_value = dim
    _refused(m, "graph.input 'x'", f"dim 0 is {dim}")


def test_an_initializer_dim_out_of_range_is_refused_before_any_allocation():
    w = TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[2**40, 2**40])
    _refused(_matmul_tanh(w), "initializer 'w'", "dim 0 is 1099511627776")


def test_a_cycle_is_refused_naming_the_node():
    nodes = [helper.make_node("MatMul", ["x", "y"], ["m"], name="matmul"),
             helper.make_node("Tanh", ["m"], ["y"], name="tanh")]
    _refused(_matmul_tanh(nodes=nodes), "node[0] 'matmul' (MatMul)", "input 1 'y' is not defined before the node")


def test_a_value_assigned_twice_is_refused():
    nodes = [helper.make_node("MatMul", ["x", "w"], ["m"], name="matmul"),
             helper.make_node("Tanh", ["m"], ["m"], name="tanh")]
    _refused(_matmul_tanh(nodes=nodes), "'tanh' (Tanh)", "'m' is already defined")


def test_an_attribute_of_the_wrong_type_is_refused_naming_node_and_attribute():
    nodes = [helper.make_node("MatMul", ["x", "w"], ["m"], name="matmul"),
             helper.make_node("Softmax", ["m"], ["y"], name="softmax", axis="last")]
    _refused(_matmul_tanh(nodes=nodes), "'softmax' (Softmax) attribute 'axis'", "STRING", "says INT")


def test_a_missing_required_attribute_is_refused():
    nodes = [helper.make_node("MatMul", ["x", "w"], ["m"], name="matmul"),
             helper.make_node("Cast", ["m"], ["y"], name="cast")]
    _refused(_matmul_tanh(nodes=nodes), "'cast' (Cast)", "required attribute 'to'")


@pytest.mark.parametrize("opsets", [[], [("", 18), ("", 17)], [("", 0)], [("", 10**6)]])
def test_odd_opset_imports_are_refused(opsets):
    m = _matmul_tanh()
    del m.opset_import[:]
    for domain, version in opsets:
        m.opset_import.add(domain=domain, version=version)
    _refused(m, "opset_import")


def test_subgraphs_nested_past_the_limit_are_refused():
    leaf = helper.make_graph([helper.make_node("Identity", ["x"], ["o0"], name="leaf")], "leaf", [], [_vi("o0", None)])
    body = leaf
    for i in range(1, MAX_ONNX_SUBGRAPH_DEPTH + 3):
        node = helper.make_node("If", ["c"], [f"o{i}"], name=f"if{i}", then_branch=body, else_branch=leaf)
        body = helper.make_graph([node], f"g{i}", [], [_vi(f"o{i}", None)])
    g = helper.make_graph(list(body.node), "g", [_vi("x", [2])], [_vi(body.output[0].name, None)],
                          [numpy_helper.from_array(np.array(True), "c")])
    _refused(helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)]), "nest more than")


def test_a_graph_past_the_node_limit_is_refused_at_once():
    nodes = [helper.make_node("MatMul", ["x", "w"], ["t0"], name="matmul")]
    nodes += [helper.make_node("Relu", [f"t{i}"], [f"t{i + 1}"], name=f"r{i}") for i in range(MAX_ONNX_NODES)]
    nodes.append(helper.make_node("Tanh", [f"t{MAX_ONNX_NODES}"], ["y"], name="tanh"))
    _refused(_matmul_tanh(nodes=nodes), f"more than {MAX_ONNX_NODES} nodes")


def test_a_constant_shape_asking_for_terabytes_is_not_folded():
    """ConstantOfShape of a [2**20, 2**20] constant would be 4 TiB if evaluated while folding:
    it stays a run-time op (or is refused naming it), and nothing is allocated."""
    shape = numpy_helper.from_array(np.array([2**20, 2**20], np.int64), "shape")
    nodes = [helper.make_node("ConstantOfShape", ["shape"], ["k"], name="cos",
                              value=numpy_helper.from_array(np.array([1.0], np.float32))),
             helper.make_node("ReduceSum", ["k"], ["s"], name="sum", keepdims=0),
             helper.make_node("Add", ["x", "s"], ["y"], name="add")]
    g = helper.make_graph(nodes, "g", [_vi("x", [2])], [_vi("y", [2])], [shape])
    try:
        data = to_tflite(helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)]))
    except Pt2Error as e:
        assert "MemoryError" not in str(e) and "cos" in str(e), e
    else:
        assert data[4:8] == b"TFL3" and len(data) < 1 << 20


def _external_model(tmp_path, location: str) -> str:
    w = TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[4, 3], data_location=TensorProto.EXTERNAL)
    w.external_data.add(key="location", value=location)
    folder = tmp_path / "model"
    folder.mkdir(exist_ok=True)
    (folder / "w.bin").write_bytes((np.arange(12, dtype=np.float32) / 10).tobytes())
    (tmp_path / "outside.bin").write_bytes(np.full(12, 7.0, np.float32).tobytes())
    path = folder / "m.onnx"
    onnx.save(_matmul_tanh(w), path)
    return str(path)


def test_external_weights_inside_the_folder_are_read(tmp_path):
    x = np.ones((1, 4), np.float32)
    out = _run_litert(to_tflite(_external_model(tmp_path, "w.bin")), x)
    np.testing.assert_allclose(out, np.tanh(x @ (np.arange(12, dtype=np.float32).reshape(4, 3) / 10)), rtol=1e-5)


@pytest.mark.parametrize("location", ["../outside.bin", "sub/../../outside.bin", "ABSOLUTE", "link.bin"])
def test_external_weights_outside_the_folder_are_refused(tmp_path, location):
    if location == "ABSOLUTE":
        location = str(tmp_path / "outside.bin")
    path = _external_model(tmp_path, location)
    if location == "link.bin":
        os.symlink(tmp_path / "outside.bin", tmp_path / "model" / "link.bin")
    with pytest.raises(ConversionError, match="initializer 'w' keeps its data at .* outside the model's folder"):
        to_tflite(path)


def test_a_missing_external_file_is_refused_naming_the_cause(tmp_path):
    with pytest.raises(ConversionError, match="initializer 'w': cannot read its external weights"):
        to_tflite(_external_model(tmp_path, "nothing.bin"))


@pytest.mark.parametrize("data", [b"", b"\x00" * 16, b"\x0a\xff\xff\xff\xff\x0f", b"garbage that is not protobuf"])
def test_bytes_that_are_not_a_model_are_refused(tmp_path, data):
    path = tmp_path / "m.onnx"
    path.write_bytes(data)
    with pytest.raises(Pt2Error):
        to_tflite(str(path))


def test_hostile_onnx_is_refused_where_torch_cannot_be_imported(tmp_path):
    m = _matmul_tanh()
    m.graph.initializer[0].raw_data = b"\x00" * 3
    path = tmp_path / "m.onnx"
    onnx.save(m, path)
    code = """
    import sys
    from pt2x.converters import to_tflite
    from pt2x.converters.errors import ConversionError
    try:
        to_tflite(sys.argv[1])
    except ConversionError as e:
        print("refused:", e)
    """
    out = run_torch_free(code, str(path))
    assert out.returncode == 0, out.stderr
    assert "refused:" in out.stdout and "initializer 'w'" in out.stdout, out.stdout


@pytest.mark.parametrize("work", [None, 200])
def test_the_layout_pass_stopped_by_its_work_bound_leaves_an_exact_model(monkeypatch, work):
    """A convolution (NHWC in TFLite, so wrapped in transposes) then 40 elementwise ops: the
    pass sinks the transpose down the chain; with the bound at 200 op visits it stops part
    way, and the model still equals ONNX Runtime's output (only transposes are left)."""
    import onnxruntime as ort

    from pt2x.converters.tflite.passes import optimize_layout as layout

    if work is not None:
        monkeypatch.setattr(layout, "MAX_LAYOUT_WORK", work)
    rng = np.random.default_rng(1)
    w = numpy_helper.from_array(rng.standard_normal((4, 3, 3, 3)).astype(np.float32), "w")
    nodes = [helper.make_node("Conv", ["x", "w"], ["t0"], name="conv", pads=[1, 1, 1, 1])]
    nodes += [helper.make_node("Neg" if i % 2 else "Relu", [f"t{i}"], [f"t{i + 1}"], name=f"e{i}") for i in range(40)]
    g = helper.make_graph(nodes, "g", [_vi("x", [1, 3, 6, 6])], [_vi("t40", [1, 4, 6, 6])], [w])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])
    x = rng.standard_normal((1, 3, 6, 6)).astype(np.float32)
    want = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    data = to_tflite(m)
    np.testing.assert_allclose(_run_litert(data, x), want, rtol=1e-5, atol=1e-5)
    from pt2x.converters.tflite import schema_generated as fb

    sub = fb.Model.GetRootAs(data, 0).Subgraphs(0)
    codes = fb.Model.GetRootAs(data, 0)
    ops = [codes.OperatorCodes(sub.Operators(i).OpcodeIndex()).BuiltinCode() for i in range(sub.OperatorsLength())]
    last = max(i for i, c in enumerate(ops) if c == fb.BuiltinOperator.TRANSPOSE)
    if work is None:  # sunk to the end of the chain
        assert last == len(ops) - 1, ops
    else:  # stopped part way: elementwise ops after it still run in NCHW
        assert last < len(ops) - 1, ops
