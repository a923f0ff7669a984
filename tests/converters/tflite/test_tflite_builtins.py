"""converters/tflite/core/builtins.py: the one table of TFLite builtins the layout and shape passes
read, the one broadcast, the mapper registry refusing a second mapper, and the layout pass on
its producers/readers index (a real conv net through LiteRT against ONNX Runtime)."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from ai_edge_litert.interpreter import Interpreter
from onnx import TensorProto, helper, numpy_helper

from pt2x.converters.tflite.core import int_compute, shapes

from pt2x.converters.tflite import to_tflite
from pt2x.converters.tflite.core.builtins import BUILTINS, broadcast, integer_types
from pt2x.converters.tflite.converter import load_mappers
from pt2x.converters.tflite.core.mappers import MAPPERS, maps
from pt2x.converters.tflite.core.model import Op, Program, Subgraph, Tensor
from pt2x.converters.tflite.core.model import TensorType as T
from pt2x.converters.tflite.writer import write


def test_every_own_shape_rule_is_registered_and_only_those():
    own = {c for c, b in BUILTINS.items() if b.shape == "own"}
    assert own == set(shapes._RULES)
    assert {b.shape for b in BUILTINS.values()} <= {"same", "broadcast", "reduce", "own", None}
    for c, b in BUILTINS.items():
        if b.layout_agnostic:  # moved through by the layout pass: elementwise, same shape or broadcast
            assert b.arity in (1, 2) and b.shape in ("same", "broadcast"), c


def test_integer_column_reads_int_compute():
    assert integer_types("RELU") == "clamp"
    assert integer_types("CONV_2D") == "float only"
    assert integer_types("TRANSPOSE") == "exact narrow"
    assert integer_types("ADD") == "int32"
    assert integer_types("LOGICAL_AND") == "int32/int64 only"
    assert set(int_compute.INT32_KERNEL) - set(int_compute.EXACT_NARROW) - set(int_compute.NO_INT32_KERNEL) == {
        c for c in int_compute.INT32_KERNEL if integer_types(c) == "int32"}


@pytest.mark.parametrize("shapes_in, want", [
    (([2, 1, 4], [3, 1]), [2, 3, 4]),
    (([-1, 4], [3, 1]), [3, 4]),  # a run-time dim against a known one > 1 is that one
    (([-1, 4], [1, 4]), [-1, 4]),
    (([-1, 1], [-1, 5]), [-1, 5]),
    (([], [2, 3]), [2, 3]),
    (([2, 3], None), None),
    (([1, 3], [2, 1], [4, 1, 1]), [4, 2, 3]),  # SELECT_V2's three operands
])
def test_broadcast(shapes_in, want):
    assert broadcast(*shapes_in) == want
    if want is not None and -1 not in sum(map(list, shapes_in), []):
        assert want == list(np.broadcast_shapes(*shapes_in))


_BOOL_OUT = {"EQUAL", "NOT_EQUAL", "LESS", "LESS_EQUAL", "GREATER", "GREATER_EQUAL"}
_BOOL_IN = {"LOGICAL_AND", "LOGICAL_OR", "LOGICAL_NOT"}
_OPTIONS = {"LEAKY_RELU": ("LeakyReluOptions", {"alpha": 0.1}),
            "CAST": ("CastOptions", {"in_data_type": T.FLOAT32, "out_data_type": T.INT32})}


def _alone(code: str, arity: int) -> bytes:
    """A model of one ``code`` op on [1, 4, 4, 8] operands (float32 but where it takes bools)."""
    s = Subgraph("main")
    kind = T.BOOL if code in _BOOL_IN else T.FLOAT32
    ins = [s.add(Tensor(f"x{i}", T.BOOL if code == "SELECT_V2" and i == 0 else kind, [1, 4, 4, 8]))
           for i in range(arity)]
    out = T.BOOL if code in _BOOL_OUT | _BOOL_IN else T.INT32 if code == "CAST" else T.FLOAT32
    y = s.add(Tensor("y", out, [1, 4, 4, 8]))
    s.append_op(Op(code, ins, [y], _OPTIONS.get(code)))
    s.inputs, s.outputs = ins, [y]
    return write(Program([s], signature_inputs=[f"x{i}" for i in range(arity)], signature_outputs=["y"]))


@pytest.mark.parametrize("code", sorted(c for c, b in BUILTINS.items() if b.xnnpack is not None))
def test_xnnpack_column_is_what_litert_delegates(code):
    it = Interpreter(model_content=_alone(code, BUILTINS[code].arity))
    it.allocate_tensors()
    assert ("DELEGATE" in [o["op_name"] for o in it._get_ops_details()]) is BUILTINS[code].xnnpack


def test_a_second_mapper_for_an_op_is_refused():
    load_mappers()
    before = MAPPERS["Add"]
    with pytest.raises(ValueError, match=r"ONNX Add already has a TFLite mapper \(.*ops\.elementwise"):
        maps("Add")(lambda em, node: None)
    assert MAPPERS["Add"] is before


def _conv_net() -> tuple[onnx.ModelProto, np.ndarray]:
    """NCHW conv -> x * sigmoid(x) (a transpose read twice: split, then sunk) -> conv + bias
    constant -> relu, max of two branches: the layout pass leaves transposes at the edges only."""
    rng = np.random.default_rng(0)
    w1 = numpy_helper.from_array(rng.standard_normal((4, 3, 3, 3)).astype(np.float32), "w1")
    w2 = numpy_helper.from_array(rng.standard_normal((4, 4, 1, 1)).astype(np.float32), "w2")
    bias = numpy_helper.from_array(rng.standard_normal((1, 4, 1, 1)).astype(np.float32), "bias")
    nodes = [
        helper.make_node("Conv", ["x", "w1"], ["c1"], pads=[1, 1, 1, 1]),
        helper.make_node("Sigmoid", ["c1"], ["s"]),
        helper.make_node("Mul", ["c1", "s"], ["silu"]),
        helper.make_node("Conv", ["silu", "w2"], ["c2"]),
        helper.make_node("Add", ["c2", "bias"], ["c2b"]),
        helper.make_node("Relu", ["c2b"], ["r"]),
        helper.make_node("Max", ["r", "silu"], ["y"]),
    ]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 8, 8])],
                          initializer=[w1, w2, bias])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)], ir_version=9)
    return m, rng.standard_normal((1, 3, 8, 8)).astype(np.float32)


def test_layout_pass_on_its_index_matches_onnx_runtime():
    m, x = _conv_net()
    want = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    it = Interpreter(model_content=to_tflite(m))
    ops = [o["op_name"] for o in it._get_ops_details()]
    assert ops.count("TRANSPOSE") == 2, ops  # NCHW -> NHWC at the input, back at the output
    it.allocate_tensors()
    it.set_tensor(it.get_input_details()[0]["index"], x)
    it.invoke()
    np.testing.assert_allclose(it.get_tensor(it.get_output_details()[0]["index"]), want, rtol=1e-5, atol=1e-5)
