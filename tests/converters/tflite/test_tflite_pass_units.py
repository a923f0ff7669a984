"""The TFLite target's passes, each on a small hand-built graph (no export): the subgraph passes on
``Subgraph``/``Op``/``Tensor`` objects, two ONNX passes on ``onnx.helper`` graphs; what each changes, what
it must leave alone, and (subgraph passes) that ``Subgraph.uses`` matches a fresh ``Uses`` after it."""

from __future__ import annotations

import math

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

from pt2x.converters.tflite.core.model import NUMPY_OF, Op, Subgraph, Tensor, TensorType, Uses
from pt2x.converters.tflite.onnx_in.fuse_gelu import fuse_gelu
from pt2x.converters.tflite.onnx_in.transpose_into_weights import transpose_into_weights
from pt2x.converters.tflite.passes.drop_squeezing_reshapes import drop_squeezing_reshapes
from pt2x.converters.tflite.passes.fold_biases import fold_biases
from pt2x.converters.tflite.passes.fuse_activations import fuse_activations
from pt2x.converters.tflite.passes.hoist_input_only import hoist_input_only
from pt2x.converters.tflite.passes.merge_and_prune import merge_and_prune
from pt2x.converters.tflite.passes.optimize_layout import optimize_layout

F32, I32, BOOL = TensorType.FLOAT32, TensorType.INT32, TensorType.BOOL


# ---------------------------------------------------------------- building and checking subgraphs

class G:
    """A hand-built subgraph: ``inp``/``const``/``val`` add tensors, ``op`` appends an operator."""

    def __init__(self):
        self.sub = Subgraph("main")

    def inp(self, name, shape=(2,), dtype=F32):
        self.sub.inputs.append(i := self.val(name, shape, dtype))
        return i

    def const(self, name, data, dtype=F32):
        data = np.ascontiguousarray(data, NUMPY_OF[dtype])
        return self.sub.add(Tensor(name, dtype, list(data.shape), data))

    def val(self, name, shape=(2,), dtype=F32):
        return self.sub.add(Tensor(name, dtype, list(shape)))

    def op(self, code, ins, outs, options=None):
        return self.sub.append_op(Op(code, list(ins), list(outs), options))

    def run(self, pass_fn, *outputs, **kw):
        """Mark ``outputs``, build the index (so the pass must keep it current), run the pass."""
        self.sub.outputs.extend(outputs)
        assert self.sub.uses is not None
        pass_fn(self.sub, **kw)
        _consistent(self.sub)
        return self.sub


def act(kind, code=0, **kw):
    return kind, {"fused_activation_function": code, **kw}


def _index(u: Uses):
    return ({t: id(op) for t, op in u.producer.items()},
            {t: sorted(map(id, rs)) for t, rs in u.readers.items() if rs})


def _consistent(sub: Subgraph) -> None:
    """The kept index equals a fresh one, and every operand is ready before the op reading it."""
    assert _index(sub.uses) == _index(Uses(sub.ops))
    ready = set(sub.inputs) | {i for i, t in enumerate(sub.tensors) if t.data is not None}
    for op in sub.ops:
        assert all(i < 0 or i in ready for i in op.inputs), f"{op.code} reads a value not computed yet"
        ready.update(op.outputs)
    assert set(sub.outputs) <= ready


def _snap(sub: Subgraph) -> list:
    return [(op, list(op.inputs), list(op.outputs), op.options) for op in sub.ops]


# ---------------------------------------------------------------- merge_and_prune

def test_merge_merges_identical_pure_ops_and_follows_the_chain():
    g = G()
    a, b = g.inp("a"), g.inp("b")
    s1, s2, t1, t2, y = (g.val(n) for n in ("s1", "s2", "t1", "t2", "y"))
    first = g.op("ADD", [a, b], [s1], act("AddOptions"))
    g.op("ADD", [a, b], [s2], act("AddOptions"))
    neg = g.op("NEG", [s1], [t1])
    g.op("NEG", [s2], [t2])  # the same once its input is merged
    mul = g.op("MUL", [t1, t2], [y], act("MulOptions"))
    sub = g.run(merge_and_prune, y)
    assert sub.ops == [first, neg, mul]
    assert mul.inputs == [t1, t1] and sub.outputs == [y]


def test_merge_leaves_different_options_types_stateful_ops_and_outputs():
    g = G()
    a, b = g.inp("a"), g.inp("b")
    s1, s2, r1, r2, o1, o2, y = (g.val(n) for n in ("s1", "s2", "r1", "r2", "o1", "o2", "y"))
    c1, c2, sub = g.val("c1", dtype=I32), g.val("c2", dtype=TensorType.INT64), g.sub
    shape = g.const("shape", [2], I32)
    g.op("ADD", [a, b], [s1], act("AddOptions"))
    g.op("ADD", [a, b], [s2], act("AddOptions", 1))  # a fused RELU: another function
    g.op("RANDOM_UNIFORM", [shape], [r1], ("RandomOptions", {"seed": 0, "seed2": 0}))
    g.op("RANDOM_UNIFORM", [shape], [r2], ("RandomOptions", {"seed": 0, "seed2": 0}))
    g.op("CAST", [a], [c1])  # int32 ...
    g.op("CAST", [a], [c2])  # ... and int64: the same code, inputs and options
    g.op("NEG", [a], [o1])
    g.op("NEG", [a], [o2])  # a duplicate, but a subgraph output: it stays (keeps its name)
    g.op("ADD_N", [s1, s2, r1, r2], [y])
    before = list(sub.ops)
    g.run(merge_and_prune, y, c1, c2, o1, o2)
    assert sub.ops == before and sub.outputs == [y, c1, c2, o1, o2]


def test_prune_drops_dead_chains_but_keeps_stateful_ops():
    g = G()
    a = g.inp("a")
    d1, d2, r, y = g.val("d1"), g.val("d2"), g.val("r"), g.val("y")
    g.op("EXP", [a], [d1])
    g.op("LOG", [d1], [d2])  # d1 -> d2 read by nobody: the chain goes
    rnd = g.op("RANDOM_UNIFORM", [g.const("shape", [2], I32)], [r], ("RandomOptions", {"seed": 1, "seed2": 0}))
    relu = g.op("RELU", [a], [y])
    sub = g.run(merge_and_prune, y)
    assert sub.ops == [rnd, relu]


# ---------------------------------------------------------------- hoist_input_only

def test_hoist_moves_non_float_input_only_ops_first_in_order():
    g = G()
    x, m = g.inp("x", (1, 4)), g.inp("mask", (1, 4), I32)
    h, mb, bias, y, shp, n = (g.val("h", (1, 4)), g.val("mb", (1, 4), BOOL), g.val("bias", (1, 4)),
                              g.val("y", (1, 4)), g.val("shp", (2,), I32), g.val("n", (1,), I32))
    relu = g.op("RELU", [x], [h])  # float work on an input: stays where it is
    eq = g.op("EQUAL", [m, g.const("zero", 0, I32)], [mb])  # int -> bool on an input: hoisted
    sel = g.op("SELECT_V2", [mb, g.const("ninf", -1e9), g.const("z", 0.0)], [bias])  # reads a hoisted value
    add = g.op("ADD", [h, bias], [y], act("AddOptions"))
    shape = g.op("SHAPE", [h], [shp])  # int, but reads a float op's output: not input-only
    gather = g.op("GATHER", [shp, g.const("i", [0], I32)], [n], ("GatherOptions", {"axis": 0}))
    sub = g.run(hoist_input_only, y, n)
    assert sub.ops == [eq, sel, relu, add, shape, gather]


def test_hoist_leaves_control_flow_and_float_only_graphs():
    g = G()
    x, i = g.inp("x"), g.inp("i", (), I32)
    h, j, y = g.val("h"), g.val("j", (), I32), g.val("y")
    relu = g.op("RELU", [x], [h])
    loop = g.op("WHILE", [i], [j], ("WhileOptions", {"cond_subgraph_index": 1, "body_subgraph_index": 2}))
    neg = g.op("NEG", [x], [y])
    sub = g.run(hoist_input_only, y, j, h)
    assert sub.ops == [relu, loop, neg]


# ---------------------------------------------------------------- fold_biases

def _fc_add(c, *, bias=(1.0, 2.0, 3.0, 4.0), swap=False, add_options=None):
    """x [1, 3] -> FULLY_CONNECTED(W [4, 3], bias) -> y [1, 4] -> ADD(y, c) -> out."""
    g = G()
    x, w = g.inp("x", (1, 3)), g.const("w", np.arange(12).reshape(4, 3))
    b, y, out = g.const("b", bias), g.val("y", (1, 4)), g.val("out", (1, 4))
    fc = g.op("FULLY_CONNECTED", [x, w, b], [y], act("FullyConnectedOptions"))
    ins = [g.const("c", c), y]
    add = g.op("ADD", ins if swap else ins[::-1], [out], add_options or act("AddOptions"))
    return g, fc, add, out


@pytest.mark.parametrize("c, swap", [([10.0, 20.0, 30.0, 40.0], False), ([[10.0, 20.0, 30.0, 40.0]], True),
                                     (5.0, False)])
def test_fold_biases_takes_a_per_channel_or_scalar_add(c, swap):
    g, fc, add, out = _fc_add(c, swap=swap)
    sub = g.run(fold_biases, out)
    bias = sub.tensors[fc.inputs[2]]
    assert sub.ops == [fc] and fc.outputs == [out] and bias.dtype == F32 and bias.shape == [4]
    np.testing.assert_array_equal(bias.data, np.array([1, 2, 3, 4], np.float32) + np.broadcast_to(c, (1, 4))[0])
    np.testing.assert_array_equal(sub.tensors[2].data, [1, 2, 3, 4])  # the old bias constant is untouched


def test_fold_biases_gives_a_conv_without_bias_the_constant():
    g = G()
    x = g.inp("x", (1, 5, 5, 3))
    y, out = g.val("y", (1, 5, 5, 2)), g.val("out", (1, 5, 5, 2))
    conv = g.op("CONV_2D", [x, g.const("w", np.ones((2, 3, 3, 3))), -1], [y],
                act("Conv2DOptions", padding=0, stride_w=1, stride_h=1))
    g.op("ADD", [y, g.const("c", [[[[0.5, -0.5]]]])], [out], act("AddOptions"))
    sub = g.run(fold_biases, out)
    assert sub.ops == [conv] and conv.outputs == [out]
    np.testing.assert_array_equal(sub.tensors[conv.inputs[2]].data, [0.5, -0.5])


@pytest.mark.parametrize("case", ["second reader", "graph output", "not per channel", "run-time operand",
                                  "fused add", "not finite"])
def test_fold_biases_must_not_fire(case):
    c = {"not per channel": np.ones((2, 4)), "not finite": [3e38] * 4}.get(case, [1.0, 1.0, 1.0, 1.0])
    g, fc, add, out = _fc_add(c, bias=[3e38] * 4 if case == "not finite" else (1.0, 2.0, 3.0, 4.0),
                              add_options=act("AddOptions", 1) if case == "fused add" else None)
    y, outs = fc.outputs[0], [out]
    if case == "second reader":
        outs.append(g.op("RELU", [y], [g.val("z", (1, 4))]).outputs[0])
    elif case == "graph output":
        outs.append(y)
    elif case == "run-time operand":
        g.sub.rewire(add, inputs=[y, g.inp("c_in", (4,))])
    before = _snap(g.sub)
    assert _snap(g.run(fold_biases, *outs)) == before


# ---------------------------------------------------------------- fuse_activations

@pytest.mark.parametrize("activation, code", [("RELU", 1), ("RELU_N1_TO_1", 2), ("RELU6", 3)])
def test_fuse_activations_moves_the_clamp_into_its_producer(activation, code):
    g = G()
    a, b = g.inp("a"), g.inp("b")
    t, y = g.val("t"), g.val("y")
    add = g.op("ADD", [a, b], [t], act("AddOptions", pot_scale_int16=True))
    g.op(activation, [t], [y])
    sub = g.run(fuse_activations, y)
    assert sub.ops == [add] and add.outputs == [y]
    assert add.options == ("AddOptions", {"fused_activation_function": code, "pot_scale_int16": True})


@pytest.mark.parametrize("case", ["second reader", "tanh", "already fused", "int32"])
def test_fuse_activations_must_not_fire(case):
    g = G()
    dtype = I32 if case == "int32" else F32
    a, b = g.inp("a", dtype=dtype), g.inp("b", dtype=dtype)
    t, y, z = g.val("t", dtype=dtype), g.val("y", dtype=dtype), g.val("z", dtype=dtype)
    g.op("ADD", [a, b], [t], act("AddOptions", 3 if case == "already fused" else 0))
    g.op("TANH" if case == "tanh" else "RELU", [t], [y])
    if case == "second reader":
        g.op("NEG", [t], [z])
    outs = [y, z] if case == "second reader" else [y]
    before = _snap(g.sub)
    assert _snap(g.run(fuse_activations, *outs)) == before


# ---------------------------------------------------------------- drop_squeezing_reshapes

def _mean_reshape(target, *, keep_dims=True, out_shape=None):
    """x [1, 7, 7, 8] -> MEAN over (1, 2) -> m -> RESHAPE(target) -> y."""
    g = G()
    x = g.inp("x", (1, 7, 7, 8))
    m = g.val("m", (1, 1, 1, 8) if keep_dims else (1, 8))
    y = g.val("y", out_shape or [abs(v) for v in target])
    mean = g.op("MEAN", [x, g.const("axes", [1, 2], I32)], [m], ("ReducerOptions", {"keep_dims": keep_dims}))
    g.op("RESHAPE", [m, g.const("shape", target, I32)], [y])
    return g, mean, y


@pytest.mark.parametrize("target", [[1, 8], [-1, 8]])
def test_drop_squeezing_reshape_makes_one_reduction(target):
    g, mean, y = _mean_reshape(target, out_shape=[1, 8])
    sub = g.run(drop_squeezing_reshapes, y)
    assert sub.ops == [mean] and mean.outputs == [y] and mean.options == ("ReducerOptions", {"keep_dims": False})


@pytest.mark.parametrize("case", [[8, 1], [2, 4], [1, 1, 8], "no keep_dims", "second reader"])
def test_drop_squeezing_reshape_must_not_fire(case):
    g, mean, y = _mean_reshape(case if isinstance(case, list) else [1, 8], keep_dims=case != "no keep_dims")
    outs = [y] + ([g.val("z", (1, 1, 1, 8))] if case == "second reader" else [])
    if case == "second reader":
        g.op("RELU", [mean.outputs[0]], outs[1:])
    before = _snap(g.sub)
    assert _snap(g.run(drop_squeezing_reshapes, *outs)) == before


# ---------------------------------------------------------------- optimize_layout

def _transpose_pair(q):
    """x -> NEG -> a -> TRANSPOSE([0, 2, 3, 1]) -> t -> TRANSPOSE(q) -> u -> RELU -> y."""
    g = G()
    x = g.inp("x", (1, 3, 4, 5))
    u_shape = [(1, 4, 5, 3)[i] for i in q]
    a, t, u, y = g.val("a", (1, 3, 4, 5)), g.val("t", (1, 4, 5, 3)), g.val("u", u_shape), g.val("y", u_shape)
    neg = g.op("NEG", [x], [a])
    g.op("TRANSPOSE", [a, g.const("p", [0, 2, 3, 1], I32)], [t])
    g.op("TRANSPOSE", [t, g.const("q", q, I32)], [u])
    relu = g.op("RELU", [u], [y])
    g.sub.outputs.append(y)
    return g, neg, relu, a, y


_NP = {"NEG": np.negative, "RELU": lambda v: np.maximum(v, 0)}
_X = np.random.default_rng(0).standard_normal((1, 3, 4, 5)).astype(np.float32)


def _evaluate(sub: Subgraph, x: np.ndarray) -> np.ndarray:
    """The subgraph's one output for input ``x`` (NEG, RELU and TRANSPOSE only)."""
    vals = {sub.inputs[0]: x}
    val = lambda i: sub.tensors[i].data if sub.tensors[i].data is not None else vals[i]  # noqa: E731
    for op in sub.ops:
        ins = [val(i) for i in op.inputs]
        vals[op.outputs[0]] = ins[0].transpose(ins[1]) if op.code == "TRANSPOSE" else _NP[op.code](ins[0])
    return val(sub.outputs[0])


def test_layout_cancels_a_transpose_pair():
    g, neg, relu, a, y = _transpose_pair([0, 3, 1, 2])
    want = _evaluate(g.sub, _X)
    sub = g.run(optimize_layout)
    assert sub.ops == [neg, relu] and relu.inputs == [a] and sub.outputs == [y]
    np.testing.assert_array_equal(_evaluate(sub, _X), want)


def test_layout_keeps_a_pair_that_does_not_cancel():
    g, neg, relu, a, y = _transpose_pair([0, 2, 3, 1])  # p twice: not the identity
    want = _evaluate(g.sub, _X)
    sub = g.run(optimize_layout)  # the RELU may sink through them; both stay
    perms = [sub.tensors[op.inputs[1]].data.tolist() for op in sub.ops if op.code == "TRANSPOSE"]
    assert perms == [[0, 2, 3, 1], [0, 2, 3, 1]] and sub.outputs == [y]
    np.testing.assert_array_equal(_evaluate(sub, _X), want)


def test_layout_keeps_a_pair_between_an_input_and_an_output():
    g = G()
    x = g.inp("x", (1, 3, 4, 5))
    t, y = g.val("t", (1, 4, 5, 3)), g.val("y", (1, 3, 4, 5))
    g.op("TRANSPOSE", [x, g.const("p", [0, 2, 3, 1], I32)], [t])
    g.op("TRANSPOSE", [t, g.const("q", [0, 3, 1, 2], I32)], [y])
    before, sub = _snap(g.sub), g.sub
    g.run(optimize_layout, y)  # y would become x itself, an input: left alone
    assert _snap(sub) == before and sub.inputs == [x] and sub.outputs == [y]


# ---------------------------------------------------------------- ONNX: fuse_gelu

def _gelu_graph(half=0.5, also_output=None, scale_by_mul=False, tail_half=False):
    """0.5 * x * (1 + erf(x / sqrt(2))): Erf(Div(x, sqrt2)) or Erf(Mul(x, 1/sqrt2)), then
    Mul(Mul(x, 0.5), a) or (``tail_half``) Mul(Mul(x, a), 0.5)."""
    scale = ("Mul", 1 / math.sqrt(2)) if scale_by_mul else ("Div", math.sqrt(2))
    consts = [numpy_helper.from_array(np.array(v, np.float32), n) for n, v in (("k", scale[1]), ("one", 1.0),
                                                                            ("half", half))]
    nodes = [helper.make_node(scale[0], ["x", "k"], ["d"]), helper.make_node("Erf", ["d"], ["e"], name="erf"),
             helper.make_node("Add", ["one", "e"], ["a"])]
    nodes += ([helper.make_node("Mul", ["a", "x"], ["h"]), helper.make_node("Mul", ["half", "h"], ["y"])] if tail_half
              else [helper.make_node("Mul", ["x", "half"], ["h"]), helper.make_node("Mul", ["h", "a"], ["y"])])
    vi = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [2, 3]) for n in ("x", "y", also_output) if n]
    return helper.make_graph(nodes, "g", vi[:1], vi[1:], consts)


@pytest.mark.parametrize("scale_by_mul, tail_half", [(False, False), (True, True)])
def test_fuse_gelu_rewrites_the_erf_chain_as_one_gelu(scale_by_mul, tail_half):
    g = _gelu_graph(scale_by_mul=scale_by_mul, tail_half=tail_half)
    assert fuse_gelu(g) == 1
    (node,) = g.node
    assert (node.op_type, list(node.input), list(node.output), list(node.attribute)) == ("Gelu", ["x"], ["y"], [])


@pytest.mark.parametrize("kw", [{"half": 0.6}, {"half": 0.6, "tail_half": True}, {"also_output": "a"},
                                {"also_output": "e"}, {"also_output": "h", "tail_half": True}])
def test_fuse_gelu_leaves_near_misses(kw):
    g = _gelu_graph(**kw)
    before = g.SerializeToString()
    assert fuse_gelu(g) == 0
    assert g.SerializeToString() == before


# ---------------------------------------------------------------- ONNX: transpose_into_weights

def _dq_model(w_dtype=np.int8, weight_is_input=False):
    """MatMul(x, Transpose(DequantizeLinear(W [4, 3], per-row scale, axis=0)))."""
    w = (np.arange(12).reshape(4, 3) - 6).astype(w_dtype)
    inits = [numpy_helper.from_array(np.array([0.5, 0.25, 2.0, 1.0], np.float32), "s"),
             numpy_helper.from_array(np.array([1, 0, -1, 2], w_dtype), "zp")]
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])]
    if weight_is_input:
        inputs.append(helper.make_tensor_value_info("W", helper.np_dtype_to_tensor_dtype(w.dtype), [4, 3]))
    else:
        inits.append(numpy_helper.from_array(w, "W"))
    nodes = [helper.make_node("DequantizeLinear", ["W", "s", "zp"], ["wf"], axis=0, name="dq"),
             helper.make_node("Transpose", ["wf"], ["wt"], perm=[1, 0], name="t"),
             helper.make_node("MatMul", ["x", "wt"], ["y"], name="mm")]
    g = helper.make_graph(nodes, "g", inputs, [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 19)]), w


def test_transpose_into_weights_moves_the_transpose_into_the_int8_weight():
    m, w = _dq_model()
    x = np.random.default_rng(0).standard_normal((2, 3)).astype(np.float32)
    want = ReferenceEvaluator(m).run(None, {"x": x})[0]
    transpose_into_weights(m)
    onnx.checker.check_model(m)
    assert [n.op_type for n in m.graph.node] == ["DequantizeLinear", "DequantizeLinear", "MatMul"]
    new = m.graph.node[1]
    assert list(new.output) == ["wt"] and list(new.input[1:]) == ["s", "zp"]
    assert [(a.name, a.i) for a in new.attribute] == [("axis", 1)]  # the per-row axis, moved with the perm
    moved = numpy_helper.to_array(next(t for t in m.graph.initializer if t.name == new.input[0]))
    assert moved.dtype == np.int8 and np.array_equal(moved, w.T)
    np.testing.assert_array_equal(ReferenceEvaluator(m).run(None, {"x": x})[0], want)


@pytest.mark.parametrize("case", ["run-time weight", "int32 weight"])
def test_transpose_into_weights_must_not_fire(case):
    m, _ = _dq_model(np.int32 if case == "int32 weight" else np.int8, weight_is_input=case == "run-time weight")
    before = m.SerializeToString()
    transpose_into_weights(m)
    assert m.SerializeToString() == before
