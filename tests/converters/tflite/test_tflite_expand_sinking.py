"""Batch-broadcast constants folded for LiteRT: ``Expand`` of a constant sunk past the ops that
treat every broadcast copy alike (``onnx_in/sink_expands.py``), torch's shapes filling the dims ONNX
shape inference leaves unknown (``constant_folding.apply_torch_shapes``), advanced indexing by a full
``arange`` over the first axis as one Gather (``ops.index``), and GatherElements folded in numpy.

transformers' GPT-2 and BERT rebuild their attention mask and positions at run time from
``arange(seq).expand(batch, -1)``; with the batch dynamic, that was some 60 builtin operators
before XNNPACK's partition. Each rule is checked where it applies and where it must not (a
broadcast that the other operand does not already have), against ONNX Runtime on the same
graph or torch eager, at two batch sizes.
"""

from __future__ import annotations

import collections

import numpy as np
import pytest
import torch
from onnx import TensorProto, helper, numpy_helper

import onnx_zoo
from litert_child import assert_each_matches
from tflite_zoo import converted_with_batches, interpreter, op_names, run
from pt2x.converters import to_onnx, to_tflite
from pt2x.converters.tflite.onnx_in.constant_folding import evaluate as _eval

_MASK_AND_SHAPE_OPS = {"SHAPE", "BROADCAST_TO", "BROADCAST_ARGS", "GATHER_ND", "SELECT_V2", "CUMSUM", "RANGE",
                       "EQUAL", "LESS", "LESS_EQUAL", "LOGICAL_AND", "LOGICAL_NOT", "REDUCE_MAX", "STRIDED_SLICE",
                       "CONCATENATION", "EXPAND_DIMS", "PACK"}


class FirstOutput(torch.nn.Module):
    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, ids):
        return self.model(ids)[0]


@pytest.fixture(scope="module", params=["hf_gpt2", "hf_bert"])
def hf_converted(request, tmp_path_factory):
    pytest.importorskip("transformers")
    torch.manual_seed(0)
    model = FirstOutput(getattr(onnx_zoo, request.param)()).eval()
    g = torch.Generator().manual_seed(1)
    x2, x3 = torch.randint(0, 100, (2, 8), generator=g), torch.randint(0, 100, (3, 8), generator=g)
    return converted_with_batches(model, x2, x3, tmp_path_factory.mktemp("sink"))


def test_hf_mask_and_positions_are_constants(hf_converted):
    """Only the token lookup (CAST of the ids, GATHER) runs outside the float layers."""
    ops = collections.Counter(op_names(hf_converted[0]))
    assert not _MASK_AND_SHAPE_OPS & set(ops), ops
    assert ops["CAST"] == 1 and ops["GATHER"] == 1, ops


@pytest.mark.parametrize("xnnpack", [True, False], ids=["xnnpack", "builtin"])
def test_hf_match_eager_after_a_resize(hf_converted, xnnpack):
    data, xs, want = hf_converted
    assert_each_matches(data, xs, want, xnnpack=xnnpack, tol=2e-5)


# ------------------------------------------------------------------ hand-made ONNX graphs


def _i64(name, values):
    return numpy_helper.from_array(np.asarray(values, np.int64), name)


def _batch_shape(src: str, rest: list[int], out: str) -> list:
    """``out = [src.shape[0], *rest]`` as nodes (the form pt2x writes for ``expand(batch, ...)``)."""
    return [helper.make_node("Shape", [src], [out + "_b"], start=0, end=1),
            helper.make_node("Concat", [out + "_b", out + "_rest"], [out], axis=0)], [_i64(out + "_rest", rest)]


def _model(nodes, inits, inputs, outputs):
    g = helper.make_graph(nodes, "g", inputs, outputs, initializer=inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])


def _x(name, dims, elem=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, elem, dims)


def _check(m, feeds_by_batch, *, absent=(), present=()):
    ops = set(op_names(to_tflite(m)))
    assert not set(absent) & ops, ops
    assert set(present) <= ops, ops
    for feeds in feeds_by_batch:
        from tflite_zoo import match_onnx_runtime

        match_onnx_runtime(m, feeds)


def _rows(shape, seed):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def test_cumsum_of_broadcast_positions_folds_into_the_add():
    """y = x + float(cumsum(expand(arange(4), [B, 1]), axis=1)): one ADD of a constant."""
    shape_nodes, shape_inits = _batch_shape("x", [1], "s")
    nodes = shape_nodes + [
        helper.make_node("Expand", ["pos", "s"], ["p"]),
        helper.make_node("CumSum", ["p", "one"], ["c"]),
        helper.make_node("Cast", ["c"], ["cf"], to=TensorProto.FLOAT),
        helper.make_node("Add", ["x", "cf"], ["y"])]
    inits = shape_inits + [_i64("pos", [[0, 1, 2, 3]]), _i64("one", 1)]
    m = _model(nodes, inits, [_x("x", ["batch", 4])], [_x("y", ["batch", 4])])
    _check(m, [[_rows((1, 4), 0)], [_rows((3, 4), 1)]], absent={"CUMSUM", "BROADCAST_TO", "SHAPE"})


def test_a_broadcast_the_other_operand_lacks_stays():
    """x is [1, 4]; the constant is broadcast to z's batch: the output is [n, 4], so the Expand
    must stay (the other operand does not already have that size)."""
    shape_nodes, shape_inits = _batch_shape("z", [1], "s")
    nodes = shape_nodes + [helper.make_node("Expand", ["k", "s"], ["e"]),
                           helper.make_node("Neg", ["e"], ["ne"]),
                           helper.make_node("Add", ["x", "ne"], ["y"])]
    inits = shape_inits + [numpy_helper.from_array(np.arange(4, dtype=np.float32).reshape(1, 4), "k")]
    m = _model(nodes, inits, [_x("x", [1, 4]), _x("z", ["n", 2])], [_x("y", ["n", 4])])
    for n in (1, 3):
        feeds = [_rows((1, 4), n), _rows((n, 2), 10 + n)]
        out = run(interpreter(to_tflite(m)), feeds)[0]
        assert out.shape == (n, 4)
        np.testing.assert_array_equal(out, np.broadcast_to(feeds[0] - np.arange(4, dtype=np.float32), (n, 4)))
    assert "BROADCAST_TO" in op_names(to_tflite(m))


def test_slice_gather_concat_reduce_where_chain():
    """Every axis rule in one chain over expand(arange(6), [B, 1]), then added to x [B, 7]."""
    shape_nodes, shape_inits = _batch_shape("x", [1], "s")
    nodes = shape_nodes + [
        helper.make_node("Expand", ["pos", "s"], ["p"]),
        helper.make_node("Slice", ["p", "st", "en", "ax"], ["sl"]),  # [B, 4]
        helper.make_node("Gather", ["p", "idx"], ["g"], axis=1),  # [B, 3]
        helper.make_node("Concat", ["sl", "g"], ["c"], axis=1),  # [B, 7]
        helper.make_node("Cast", ["c"], ["cf"], to=TensorProto.FLOAT),
        helper.make_node("ReduceMax", ["cf", "ax"], ["r"], keepdims=1),  # [B, 1]
        helper.make_node("Greater", ["c", "two"], ["big"]),
        helper.make_node("Where", ["big", "cf", "r"], ["w"]),
        helper.make_node("Add", ["x", "w"], ["y"])]
    inits = shape_inits + [_i64("pos", [[5, 3, 0, 4, 1, 2]]), _i64("st", [1]), _i64("en", [5]), _i64("ax", [1]),
                           _i64("idx", [0, -1, 2]), _i64("two", 2)]
    m = _model(nodes, inits, [_x("x", ["batch", 7])], [_x("y", ["batch", 7])])
    _check(m, [[_rows((1, 7), 2)], [_rows((3, 7), 3)]], absent=_MASK_AND_SHAPE_OPS)


def test_lookup_in_a_constant_table_by_broadcast_indices():
    """x [B, 4, 3] + table[expand(ids, [B, 1])]: the rows are looked up once."""
    shape_nodes, shape_inits = _batch_shape("x", [1], "s")
    nodes = shape_nodes + [helper.make_node("Expand", ["ids", "s"], ["e"]),
                           helper.make_node("Gather", ["table", "e"], ["rows"], axis=0),
                           helper.make_node("Add", ["x", "rows"], ["y"])]
    inits = shape_inits + [_i64("ids", [[4, 0, -2, 1]]), numpy_helper.from_array(_rows((5, 3), 4), "table")]
    m = _model(nodes, inits, [_x("x", ["batch", 4, 3])], [_x("y", ["batch", 4, 3])])
    _check(m, [[_rows((1, 4, 3), 5)], [_rows((3, 4, 3), 6)]], absent={"GATHER", "BROADCAST_TO"})


def test_constant_sizes_of_the_shape_move_into_the_constant():
    """expand(c [1, 1, 4, 1], [B, 1, 1, 5]) reduced over its last (broadcast, constant) axis."""
    shape_nodes, shape_inits = _batch_shape("x", [1, 1, 5], "s")
    nodes = shape_nodes + [helper.make_node("Expand", ["k", "s"], ["e"]),
                           helper.make_node("ReduceMax", ["e", "last"], ["r"], keepdims=1),
                           helper.make_node("Mul", ["x", "r"], ["y"])]
    inits = shape_inits + [numpy_helper.from_array(_rows((1, 1, 4, 1), 7), "k"), _i64("last", [-1])]
    m = _model(nodes, inits, [_x("x", ["batch", 2, 4, 5])], [_x("y", ["batch", 2, 4, 5])])
    _check(m, [[_rows((1, 2, 4, 5), 8)], [_rows((3, 2, 4, 5), 9)]], absent={"REDUCE_MAX", "BROADCAST_TO"})


def test_times_broadcast_ones_is_dropped():
    shape_nodes, shape_inits = _batch_shape("x", [1, 1], "s")
    nodes = shape_nodes + [helper.make_node("Expand", ["ones", "s"], ["e"]),
                           helper.make_node("Mul", ["x", "e"], ["y0"]),
                           helper.make_node("Relu", ["y0"], ["y"])]
    inits = shape_inits + [numpy_helper.from_array(np.ones((1, 3, 1), np.float32), "ones")]
    m = _model(nodes, inits, [_x("x", ["batch", 3, 4])], [_x("y", ["batch", 3, 4])])
    _check(m, [[_rows((1, 3, 4), 10)], [_rows((3, 3, 4), 11)]], absent={"MUL", "BROADCAST_TO"})


# ------------------------------------------------------------------ x[arange(n)[:, None], idx]


class RowPick(torch.nn.Module):
    """transformers' mask builder: x[arange(B)[:, None, None, None], kv[None, None, None, :]]."""

    def __init__(self, how: str):
        super().__init__()
        self.how = how

    def forward(self, x):
        b = x.shape[0]
        if self.how == "full arange":
            rows = torch.arange(b)[:, None, None, None]
            cols = torch.tensor([5, 0, -1, 2])[None, None, None, :]
        elif self.how == "lower-rank second index":
            rows = torch.arange(b)[:, None]
            cols = torch.tensor([3, -2, 0])
        elif self.how == "flipped rows (general path)":
            rows = torch.arange(b).flip(0)[:, None]
            cols = torch.tensor([1, 4])
        else:  # "rows modulo 2 (general path)": not an arange
            rows = (torch.arange(b) % 2)[:, None]
            cols = torch.tensor([1, 4])
        return x[rows, cols] * 2.0


@pytest.mark.parametrize("how", ["full arange", "lower-rank second index", "flipped rows (general path)",
                                 "rows modulo 2 (general path)"])
def test_index_by_full_arange_is_a_gather(how, tmp_path):
    import onnxruntime as ort

    model = RowPick(how)
    x4, x3 = _rows((4, 6), 12), _rows((3, 6), 13)
    ep = torch.export.export(model, (torch.from_numpy(x4),),
                             dynamic_shapes=({0: torch.export.Dim("batch", min=2, max=16)},))
    path = str(tmp_path / "pick.pt2")
    torch.export.save(ep, path)
    m = to_onnx(path)
    kinds = {n.op_type for n in m.graph.node}
    shortcut = how in ("full arange", "lower-rank second index")
    assert ("GatherND" not in kinds) == shortcut, kinds
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    for x in (x4, x3):
        want = model(torch.from_numpy(x)).numpy()
        got = sess.run(None, {sess.get_inputs()[0].name: x})[0]
        np.testing.assert_array_equal(got, want)
        tfl = run(interpreter(to_tflite(path)), [x])[0]
        np.testing.assert_array_equal(tfl, want)


@pytest.mark.parametrize("shape,index_shape,axis", [((3, 5), (2, 4), 1), ((3, 5), (3, 5), 0), ((1, 128), (1, 32), 1),
                                                    ((4, 3, 2), (2, 3, 1), -3)])
def test_gather_elements_folds_as_torch_gathers(shape, index_shape, axis):
    rng = np.random.default_rng(0)
    data = rng.standard_normal(shape).astype(np.float32)
    n = shape[axis]
    index = rng.integers(-n, n, index_shape)
    node = helper.make_node("GatherElements", ["a", "b"], ["c"], axis=axis)
    got = _eval(node, [data, index], [helper.make_opsetid("", 18)])[0]
    want = torch.gather(torch.from_numpy(data), axis, torch.from_numpy(np.where(index < 0, index + n, index))).numpy()
    np.testing.assert_array_equal(got, want)
    assert _eval(node, [data, np.full(index_shape, n)], [helper.make_opsetid("", 18)]) is None  # out of range


# ------------------------------------------------------------------ review findings (issue 33)


def _match_in_child(m, feeds_by_batch, *, xnnpack=False):
    """``to_tflite(m)`` run in a LiteRT child (an abort fails the case) gives ONNX Runtime's
    outputs, shapes included, for each feed list."""
    import onnxruntime as ort
    from litert_child import run_in_child

    data = to_tflite(m)
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    names = [i.name for i in sess.get_inputs()]
    got = run_in_child([(data, feeds) for feeds in feeds_by_batch], xnnpack=xnnpack)
    for feeds, g in zip(feeds_by_batch, got):
        assert not isinstance(g, str), (feeds[0].shape, g)
        for w, o in zip(sess.run(None, dict(zip(names, feeds))), g):
            assert o.shape == w.shape, (feeds[0].shape, o.shape, w.shape)
            np.testing.assert_allclose(o, w, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("op", ["ReduceSum", "ReduceProd", "ReduceMax"])
@pytest.mark.parametrize("axes", ["empty", "omitted"])
def test_reduce_all_of_a_broadcast_counts_the_batch(op, axes):
    """``Reduce(expand(k, [B, 4]))`` with no axes reduces every copy: the sum scales with B,
    the product is raised to the power B (keepdims: the output is [1, 1])."""
    shape_nodes, shape_inits = _batch_shape("x", [4], "s")
    reduce_inputs = ["e", "none"] if axes == "empty" else ["e"]
    nodes = shape_nodes + [helper.make_node("Expand", ["k", "s"], ["e"]),
                           helper.make_node(op, reduce_inputs, ["r"], keepdims=1),
                           helper.make_node("Mul", ["x", "r"], ["y"])]
    k = numpy_helper.from_array(np.array([[1.5, 0.5, 2.0, 1.25]], np.float32), "k")
    inits = shape_inits + [k, _i64("none", np.zeros(0, np.int64))]
    m = _model(nodes, inits, [_x("x", ["batch", 4])], [_x("y", ["batch", 4])])
    _match_in_child(m, [[_rows((b, 4), 20 + b)] for b in (1, 2, 3)])


def test_reduce_noop_with_empty_axes_is_the_broadcast():
    shape_nodes, shape_inits = _batch_shape("x", [4], "s")
    nodes = shape_nodes + [helper.make_node("Expand", ["k", "s"], ["e"]),
                           helper.make_node("ReduceSum", ["e", "none"], ["r"], keepdims=1, noop_with_empty_axes=1),
                           helper.make_node("Mul", ["x", "r"], ["y"])]
    inits = shape_inits + [numpy_helper.from_array(_rows((1, 4), 24), "k"), _i64("none", np.zeros(0, np.int64))]
    m = _model(nodes, inits, [_x("x", ["batch", 4])], [_x("y", ["batch", 4])])
    _match_in_child(m, [[_rows((b, 4), 25 + b)] for b in (1, 2, 3)])


class TableColumns(torch.nn.Module):
    """``table[:, pos.expand(B, n)]``: a Gather along axis 1 by batch-broadcast indices whose
    constant (``pos``) has a lower rank than the broadcast."""

    def __init__(self, index_rank: int):
        super().__init__()
        self.register_buffer("table", torch.arange(60, dtype=torch.float32).reshape(3, 10, 2))
        self.index_rank = index_rank

    def forward(self, x):
        pos = torch.tensor([1, -4]) if self.index_rank == 1 else torch.tensor([[1, -4]])
        return self.table[:, pos.expand(x.shape[0], 2)] + x.sum()


@pytest.mark.parametrize("index_rank", [1, 2])
def test_gather_along_a_later_axis_by_broadcast_indices(index_rank, tmp_path):
    from litert_child import run_in_child

    model = TableColumns(index_rank)
    ep = torch.export.export(model, (torch.ones(2, 5),),
                             dynamic_shapes=({0: torch.export.Dim("batch", min=1, max=16)},))
    path = str(tmp_path / "columns.pt2")
    torch.export.save(ep, path)
    xs = [_rows((b, 5), 30 + b) for b in (1, 2, 3)]
    got = run_in_child([(to_tflite(path), [x]) for x in xs])
    for x, g in zip(xs, got):
        want = model(torch.from_numpy(x)).numpy()
        assert not isinstance(g, str), (x.shape, g)
        assert g[0].shape == want.shape
        np.testing.assert_allclose(g[0], want, rtol=1e-6)
