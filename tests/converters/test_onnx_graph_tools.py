"""converters/onnx/graph_tools.py: the subgraph walk, the def-use index, pruning and the origin
stamps, on real ONNX models (checked by onnx's checker, run in ONNX Runtime)."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

from pt2x.converters.onnx.graph_tools import (DefUse, copy_stamp, free_vars, live_nodes, origin_of, prune_unused,
                                              stamp, subgraph_reads, subgraphs, walk_nodes)

F = TensorProto.FLOAT


def _branch(name: str, op: str, captured: str) -> onnx.GraphProto:
    """A branch body reading ``captured`` from the enclosing graph, with a nested If inside."""
    inner_then = helper.make_graph([helper.make_node("Neg", [captured], [f"{name}_in_t"], name=f"{name}_neg")],
                                   f"{name}_inner_then", [], [helper.make_tensor_value_info(f"{name}_in_t", F, [2])])
    inner_else = helper.make_graph([helper.make_node("Abs", ["deep"], [f"{name}_in_e"], name=f"{name}_abs")],
                                   f"{name}_inner_else", [], [helper.make_tensor_value_info(f"{name}_in_e", F, [2])])
    nodes = [
        helper.make_node("If", ["c"], [f"{name}_inner"], name=f"{name}_if", then_branch=inner_then,
                         else_branch=inner_else),
        helper.make_node(op, [f"{name}_inner", "w"], [f"{name}_out"], name=f"{name}_op"),
    ]
    return helper.make_graph(nodes, name, [], [helper.make_tensor_value_info(f"{name}_out", F, [2])])


def _model() -> onnx.ModelProto:
    """x -> (a = x + w) -> If(c) { then: a-ish, else: ... } -> y, plus dead nodes and a dead weight.
    ``deep`` is read only by the innermost else-branch; ``dead1``/``dead2`` by nothing."""
    nodes = [
        helper.make_node("Add", ["x", "w"], ["a"], name="add"),
        helper.make_node("Relu", ["x"], ["deep"], name="relu_only_inner"),
        helper.make_node("Sigmoid", ["x"], ["dead1"], name="dead_sigmoid"),
        helper.make_node("Neg", ["dead1"], ["dead2"], name="dead_neg"),
        helper.make_node("If", ["c"], ["y"], name="if", then_branch=_branch("then", "Add", "a"),
                         else_branch=_branch("else", "Mul", "a")),
    ]
    inits = [numpy_helper.from_array(np.array([1.0, 2.0], np.float32), "w"),
             numpy_helper.from_array(np.array([9.0], np.float32), "unused_w")]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", F, [2]),
                                       helper.make_tensor_value_info("c", TensorProto.BOOL, [])],
                          [helper.make_tensor_value_info("y", F, [2])], initializer=inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)], ir_version=9)
    onnx.checker.check_model(m, full_check=True)
    return m


def _run(m: onnx.ModelProto, x, c) -> np.ndarray:
    s = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    return s.run(None, {"x": x, "c": np.array(c)})[0]


def test_walk_visits_every_body_depth_first():
    names = [n.name for n in walk_nodes(_model().graph)]
    # helper.make_node sorts attributes by name: else_branch comes before then_branch
    assert names == ["add", "relu_only_inner", "dead_sigmoid", "dead_neg", "if",
                     "else_if", "else_abs", "else_neg", "else_op", "then_if", "then_abs", "then_neg", "then_op"]
    assert [g.name for g in subgraphs(_model().graph.node[4])] == ["else", "then"]


def test_subgraph_reads_and_free_vars_see_nested_captures():
    m = _model()
    node_if = m.graph.node[4]
    assert {"a", "deep", "w", "c"} <= subgraph_reads(node_if)
    then = next(g for g in subgraphs(node_if) if g.name == "then")
    assert free_vars(then) == ["c", "deep", "a", "w"]  # in reading order (else_branch, then then_branch)
    assert subgraph_reads(m.graph.node[0]) == set()


def test_def_use_index_across_subgraphs():
    m = _model()
    du = DefUse.of_graph(m.graph)
    assert du.producers["a"].name == "add"
    assert du.producers["then_in_t"].name == "then_neg"  # a value made inside a body
    readers_of_a = [n.name for n in du.readers["a"]]
    assert "then_neg" in readers_of_a and "else_neg" in readers_of_a and "if" in readers_of_a
    assert du.sole_reader("dead1").name == "dead_neg"
    assert du.sole_reader("y") is None  # a graph output
    assert du.sole_reader("a") is None  # read by several nodes


def test_live_nodes_keeps_what_only_a_body_reads():
    m = _model()
    keep, used = live_nodes(list(m.graph.node), ["y"])
    assert [n.name for n in keep] == ["add", "relu_only_inner", "if"]
    assert "deep" in used and "dead1" not in used


def test_prune_pass_keeps_results():
    m = _model()
    x = np.array([1.5, -2.0], np.float32)
    want = [_run(m, x, c) for c in (True, False)]
    prune_unused(m)
    assert [n.name for n in m.graph.node] == ["add", "relu_only_inner", "if"]
    assert [t.name for t in m.graph.initializer] == ["w"]
    onnx.checker.check_model(m, full_check=True)
    for c, w in zip((True, False), want):
        np.testing.assert_array_equal(_run(m, x, c), w)
    before = m.SerializeToString()
    prune_unused(m)
    assert m.SerializeToString() == before  # nothing left to prune


def test_stamps_survive_copy_and_are_not_overwritten():
    src = helper.make_node("Relu", ["x"], ["y"])
    stamp(src, "relu_1", "aten.relu.default", "L__self__.block")
    stamp(src, "other", "aten.other", None)  # a node keeps its first origin
    assert origin_of(src) == {"pt2x.aten_node": "relu_1", "pt2x.aten_target": "aten.relu.default",
                              "pt2x.module_path": "L__self__.block"}
    dst = helper.make_node("Relu", ["x"], ["y2"])
    copy_stamp(src, dst)
    assert origin_of(dst) == origin_of(src)
    assert origin_of(helper.make_node("Relu", ["x"], ["z"])) == {}
