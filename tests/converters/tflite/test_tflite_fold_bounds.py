"""Folding and external data of an ONNX model cost what its sizes say, never what a tiny file
asks for: a node whose evaluation would be too much work stays a run-time op (estimated before
it runs, ``converters/tflite/onnx_in/fold_cost.py``), the bytes folded stay within the shared constant
budget (``converters/limits.py``), and external weights are checked (file, offset, length, dims)
before exactly their bytes are read (``converters/tflite/onnx_in/external_data.py``).

Each hostile model is a few hundred bytes built here; before these bounds, the MaxPool case ran
for hours, the GridSample case over 100 s, the ConstantOfShape flood peaked at 7-14 GB and the
sparse external file at 7 GB."""

from __future__ import annotations

import os
import time

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper, shape_inference

from pt2x.converters import limits, to_tflite
from pt2x.converters.errors import ConversionError
from pt2x.converters.tflite.onnx_in.fold_cost import fold_work
from pt2x.converters.tflite.onnx_in.constant_folding import fold


def _model(nodes, outputs, inits, opset=18, inputs=()):
    g = helper.make_graph(nodes, "g", list(inputs), outputs, inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


def _fill(name, shape_name, value=1.0, elem=TensorProto.FLOAT):
    return helper.make_node("ConstantOfShape", [shape_name], [name], value=helper.make_tensor("v", elem, [1], [value]))


def _shape(name, dims):
    return numpy_helper.from_array(np.array(dims, np.int64), name)


def _folded(m):
    """The model after shape inference and folding, and the seconds folding took."""
    m = shape_inference.infer_shapes(m, data_prop=True)
    t = time.perf_counter()
    m = fold(m)
    return m, time.perf_counter() - t


def _run_litert(data: bytes) -> list[np.ndarray]:
    from ai_edge_litert.interpreter import Interpreter

    it = Interpreter(model_content=data)
    it.allocate_tensors()
    it.invoke()
    return [it.get_tensor(o["index"]) for o in it.get_output_details()]


def test_a_pool_with_a_huge_window_over_a_folded_constant_stays_a_run_time_op():
    """MaxPool 1000x1000 over a folded 2000x2000 constant: 10**12 compares in the evaluator's loops."""
    m = _model([_fill("c", "s"), helper.make_node("MaxPool", ["c"], ["y"], kernel_shape=[1000, 1000])],
               [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [_shape("s", [1, 1, 2000, 2000])])
    assert len(m.SerializeToString()) < 300
    m, seconds = _folded(m)
    assert [n.op_type for n in m.graph.node] == ["MaxPool"]  # the fill folded, the pool did not
    assert seconds < 15


def test_a_grid_sample_over_folded_constants_stays_a_run_time_op():
    m = _model([_fill("x", "s"), _fill("grid", "sg", 0.5), helper.make_node("GridSample", ["x", "grid"], ["y"])],
               [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
               [_shape("s", [1, 1, 1000, 1000]), _shape("sg", [1, 1000, 1000, 2])], opset=20)
    m, seconds = _folded(m)
    assert [n.op_type for n in m.graph.node] == ["GridSample"]
    assert seconds < 15


def test_many_pools_each_within_the_node_bound_stop_at_the_total_bound():
    """300 small pools over one folded constant, each affordable alone: past
    ``MAX_FOLD_TOTAL_WORK`` the rest stay run-time ops (a thousand such pools: 14 s of folding
    with only a per-node bound)."""
    n = 300
    nodes = [_fill("c", "s")]
    for i in range(n):
        nodes.append(helper.make_node("MaxPool", ["c"], [f"p{i}"], kernel_shape=[2, 2]))
    m = _model(nodes, [helper.make_tensor_value_info(f"p{i}", TensorProto.FLOAT, None) for i in range(n)],
               [_shape("s", [1, 1, 40, 40])])
    one = fold_work(nodes[1], [(1, 1, 40, 40)], [(1, 1, 39, 39)])
    assert one <= limits.MAX_FOLD_WORK and n * one > limits.MAX_FOLD_TOTAL_WORK
    folded, seconds = _folded(m)
    kept = sum(node.op_type == "MaxPool" for node in folded.graph.node)
    assert n - limits.MAX_FOLD_TOTAL_WORK // one - 1 <= kept < n
    assert seconds < 15


def test_a_flood_of_constant_fills_folds_within_the_byte_budget_and_the_rest_runs():
    """20 fills of 16 MB: past ``MAX_FOLDED_BYTES`` the fills stay FILL ops, and LiteRT's sums are right."""
    n = 20
    nodes, outs = [], []
    for i in range(n):
        nodes += [_fill(f"c{i}", "s"), helper.make_node("ReduceSum", [f"c{i}"], [f"r{i}"], keepdims=0)]
        outs.append(helper.make_tensor_value_info(f"r{i}", TensorProto.FLOAT, None))
    m = _model(nodes, outs, [_shape("s", [4, 1024, 1024])])
    folded, _ = _folded(m)
    made = sum(numpy_helper.to_array(t).nbytes for t in folded.graph.initializer if t.name != "s")
    assert 0 < made <= limits.constant_budget(4 * 8, limits.MAX_FOLDED_BYTES)  # "s": 4 int64
    assert sum(node.op_type == "ConstantOfShape" for node in folded.graph.node) >= n - 4
    t = time.perf_counter()
    data = to_tflite(m)
    assert time.perf_counter() - t < 15 and len(data) < limits.MAX_FOLDED_BYTES + (1 << 20)
    assert [float(v) for v in _run_litert(data)] == [4.0 * 1024 * 1024] * n


def test_the_work_estimate_bounds_hostile_nodes_and_passes_real_folds():
    def node(op, **kw):
        return helper.make_node(op, ["a", "b"][:kw.pop("inputs", 1)], ["y"], **kw)

    over = limits.MAX_FOLD_WORK
    assert fold_work(node("MaxPool", kernel_shape=[1000, 1000]), [(1, 1, 2000, 2000)], [(1, 1, 1001, 1001)]) > over
    assert fold_work(node("Conv", inputs=2), [(1, 64, 512, 512), (64, 64, 7, 7)], [(1, 64, 506, 506)]) > over
    assert fold_work(node("MatMul", inputs=2), [(4000, 4000), (4000, 4000)], [(4000, 4000)]) > over
    assert fold_work(node("Einsum", inputs=2, equation="ij,jk->ik"), [(4000, 4000), (4000, 4000)], [None]) > over
    assert fold_work(node("Resize"), [(1, 3, 512, 512)], [None]) > over  # Python loops: the default class
    # what real models fold: weight transposes, casts, dequantisation, shape arithmetic
    assert fold_work(node("Transpose"), [(4096, 4096)], [(4096, 4096)]) < over
    assert fold_work(node("DequantizeLinear", inputs=2), [(4096, 4096), ()], [(4096, 4096)]) < over
    assert fold_work(node("Gather", inputs=2), [(4,), ()], [()]) < over
    assert fold_work(node("MatMul", inputs=2), [(64, 64), (64, 64)], [(64, 64)]) < over


def _external(tmp_path, dims, location="w.bin", offset=None, length=None, size=None, data=None):
    t = onnx.TensorProto(name="w", data_type=TensorProto.FLOAT, dims=dims)
    t.data_location = TensorProto.EXTERNAL
    t.external_data.add(key="location", value=location)
    for k, v in (("offset", offset), ("length", length)):
        if v is not None:
            t.external_data.add(key=k, value=str(v))
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, dims)
    m = _model([helper.make_node("Add", ["x", "w"], ["y"])], [helper.make_tensor_value_info("y", TensorProto.FLOAT, dims)],
               [t], inputs=[x])
    path = tmp_path / "m.onnx"
    onnx.save(m, path)
    if size is not None:
        with open(tmp_path / location, "wb") as f:
            f.truncate(size)  # sparse: costs no disk
            if data is not None:
                f.seek(offset or 0)
                f.write(data)
    return str(path)


_GIB3 = 3 << 30


def test_a_sparse_3_gib_external_file_is_refused_before_it_is_read(tmp_path):
    """No length: the rest of the file must be the weight's 16 bytes; nothing is read."""
    import resource

    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with pytest.raises(ConversionError, match=r"initializer 'w': its external file holds 3221225472 bytes .* need 16"):
        to_tflite(_external(tmp_path, [4], size=_GIB3))
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 200_000  # KiB: far from 3 GiB


def test_exactly_length_bytes_are_read_at_offset_in_a_sparse_3_gib_file(tmp_path):
    import resource

    w = np.array([1, 2, 3, 4], np.float32)
    path = _external(tmp_path, [4], offset=_GIB3 - 4096, length=16, size=_GIB3, data=w.tobytes())
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    data = to_tflite(path)
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 200_000
    from ai_edge_litert.interpreter import Interpreter

    it = Interpreter(model_content=data)
    it.allocate_tensors()
    it.set_tensor(it.get_input_details()[0]["index"], np.ones(4, np.float32))
    it.invoke()
    np.testing.assert_array_equal(it.get_tensor(it.get_output_details()[0]["index"]), w + 1)


@pytest.mark.parametrize("kw, message", [
    (dict(length=_GIB3, size=_GIB3), r"external data length is 3221225472 bytes, its dims \[4\] .* need 16"),
    (dict(offset=_GIB3 - 8, length=16, size=_GIB3), r"passes the end of its file"),
    (dict(offset="-1", length=16, size=64), r"external data offset '-1' is not a non-negative integer"),
    (dict(length="16 ", size=64), r"external data length '16 ' is not a non-negative integer"),
])
def test_external_fields_that_disagree_with_the_file_or_the_dims_are_refused(tmp_path, kw, message):
    with pytest.raises(ConversionError, match=message):
        to_tflite(_external(tmp_path, [4], **kw))


def test_external_dims_past_the_bound_are_refused_before_the_file_is_opened(tmp_path):
    with pytest.raises(ConversionError, match=r"initializer 'w' dims: dim 0 is 4294967296"):
        to_tflite(_external(tmp_path, [1 << 32], location="nothing.bin"))


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this platform")
def test_an_external_location_naming_a_fifo_is_refused_without_blocking(tmp_path):
    os.mkfifo(tmp_path / "w.bin")
    with pytest.raises(ConversionError, match=r"initializer 'w': its external data location 'w.bin' is not a regular file"):
        to_tflite(_external(tmp_path, [4], length=16))
