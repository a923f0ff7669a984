"""The ATen front end on two patterns users hit: an output a lowering does not produce, and
``x[:, -1]`` along a dynamic dim.

* A multi-output operator whose lowering leaves an output out (``max_pool2d``'s indices,
  eval-mode batch norm's saved mean) is converted while nothing reads that output; once a node or the
  graph's outputs read it, the one unsupported-operator report names the operator and the
  output, for ONNX and TFLite alike (not "value 'getitem_1' used before it is defined").
* ``x[:, -1]`` (``aten.select.int`` with a negative index on a symbolic dim, the "last token"
  of a sequence) converts to ONNX and to TFLite, and both runtimes match torch eager at two
  sequence lengths.

Programs are exported by torch here; ONNX Runtime and LiteRT run the converted models.
"""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
F = torch.nn.functional

import onnx_zoo  # noqa: E402
import tflite_zoo  # noqa: E402
from tolerances import TFLITE_SCALE, assert_close  # noqa: E402

from pt2x.converters import to_onnx, to_tflite  # noqa: E402
from pt2x.converters.errors import UnsupportedOpsError  # noqa: E402

_SEQ = torch.export.Dim("seq", min=2, max=64)


def _saved(tmp_path, module: torch.nn.Module, args: tuple, dynamic_shapes=None) -> str:
    path = str(tmp_path / f"{type(module).__name__}.pt2")
    torch.export.save(torch.export.export(module.eval(), args, dynamic_shapes=dynamic_shapes), path)
    return path


# ------------------------------------------------------------------ outputs not produced


_TABLE = torch.randn(10, 3)  # (max-pool indices, the example here before, are converted now)


class BagSizeOut(torch.nn.Module):
    def forward(self, i, o):
        return torch.ops.aten._embedding_bag.default(_TABLE, i, o)[2]


class BagSizeRead(torch.nn.Module):
    def forward(self, i, o):
        out, _, bag_size, _ = torch.ops.aten._embedding_bag.default(_TABLE, i, o)
        return out + bag_size.float().unsqueeze(1)


class BatchNormSavedMean(torch.nn.Module):
    def forward(self, x):
        c = torch.ones(3)
        y, mean, _ = torch.ops.aten._native_batch_norm_legit_no_training.default(x, c, c * 0, c * 0, c, 0.1, 1e-5)
        return y, mean


class PoolValuesOnly(torch.nn.Module):
    def forward(self, x):
        y, _ = F.max_pool2d(x, 2, return_indices=True)
        return y * 2


_BAGS = (torch.tensor([1, 2, 4, 5, 4, 3]), torch.tensor([0, 3]))


@pytest.mark.parametrize("module, args, op, value, reader", [
    (BagSizeOut(), _BAGS, "aten._embedding_bag.default", "getitem_2", "the graph's outputs"),
    (BagSizeRead(), _BAGS, "aten._embedding_bag.default", "getitem_2", "node '"),
    (BatchNormSavedMean(), (torch.randn(2, 3, 4),), "aten._native_batch_norm_legit_no_training.default", "getitem_1",
     "the graph's outputs"),
], ids=["bag-size-as-output", "bag-size-read-by-a-node", "batch-norm-saved-mean"])
@pytest.mark.parametrize("convert", [to_onnx, to_tflite], ids=["onnx", "tflite"])
def test_an_output_the_lowering_leaves_out_is_reported_on_its_operator(tmp_path, module, args, op, value, reader,
                                                                       convert):
    path = _saved(tmp_path, module, args)
    with pytest.raises(UnsupportedOpsError) as e:
        convert(path)
    assert [p.target for p in e.value.ops] == [op], str(e.value)
    [reason] = e.value.ops[0].reasons
    assert f"({value!r}) is not converted by the onnx lowering, and is read by {reader}" in reason, reason
    assert "used before it is defined" not in str(e.value)


def test_an_output_nothing_reads_may_stay_unproduced(tmp_path):
    x = torch.randn(2, 3, 8, 8)
    module = PoolValuesOnly()
    path = _saved(tmp_path, module, (x,))
    [got] = onnx_zoo.run(onnx_zoo.ort_session(to_onnx(path).SerializeToString()), [x])
    assert_close(got, module(x).numpy(), torch.float32, what="ONNX Runtime")
    [got] = tflite_zoo.run(tflite_zoo.interpreter(to_tflite(path)), [x.numpy()])
    assert_close(got, module(x).numpy(), torch.float32, what="LiteRT", scale=TFLITE_SCALE["float32"])


# ------------------------------------------------------------------ the last token


class LastToken(torch.nn.Module):
    """A projection then the last (and second-to-last) position of a dynamic sequence."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.proj = torch.nn.Linear(8, 6)

    def forward(self, x):
        h = self.proj(x)
        return h[:, -1] * 2, h[:, -2]


class LastColumn(torch.nn.Module):
    """``x[:, :, -1]``: a negative select on a dynamic inner dim of a 4-d tensor."""

    def forward(self, x):
        return x[:, :, -1] + 1


@pytest.mark.parametrize("module, shape, dynamic, sizes", [
    (LastToken(), (2, 5, 8), {"x": {1: _SEQ}}, (5, 11)),
    (LastColumn(), (2, 3, 4, 5), {"x": {2: _SEQ}}, (4, 9)),
], ids=["last-token", "last-column"])
def test_select_from_the_end_of_a_dynamic_dim(tmp_path, module, shape, dynamic, sizes):
    path = _saved(tmp_path, module, (torch.randn(*shape),), dynamic)
    session = onnx_zoo.ort_session(to_onnx(path).SerializeToString())
    interpreter = tflite_zoo.interpreter(to_tflite(path))
    axis = next(iter(dynamic["x"]))
    torch.manual_seed(1)
    for size in sizes:
        x = torch.randn(*shape[:axis], size, *shape[axis + 1:]) * 3 + 1
        want = module(x)
        want = [w.detach().numpy() for w in (want if isinstance(want, tuple) else (want,))]
        for runtime, got, scale in (("ONNX Runtime", onnx_zoo.run(session, [x]), 1.0),
                                    ("LiteRT", tflite_zoo.run(interpreter, [x.numpy()]), TFLITE_SCALE["float32"])):
            assert len(got) == len(want), runtime
            for i, (g, w) in enumerate(zip(got, want)):
                assert_close(g, w, torch.float32, what=f"{runtime}, size {size}, output {i}", scale=scale)


def test_the_selected_position_moves_with_the_size(tmp_path):
    """Not the same position at every size: LiteRT's answer at size 11 is position 10, not 4."""
    module = LastColumn()
    path = _saved(tmp_path, module, (torch.randn(1, 1, 5, 2),), {"x": {2: _SEQ}})
    x = torch.arange(22, dtype=torch.float32).reshape(1, 1, 11, 2)
    [got] = tflite_zoo.run(tflite_zoo.interpreter(to_tflite(path)), [x.numpy()])
    np.testing.assert_array_equal(got, np.array([[[21.0, 22.0]]], np.float32))


def test_gather_mixing_negative_and_positive_constant_indices_on_a_dynamic_dim(tmp_path):
    """An ONNX file's Gather with indices [-1, 0, -2] along a dynamic dim: only the negative
    ones move with the size (LiteRT vs numpy at two sizes)."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    idx = numpy_helper.from_array(np.array([-1, 0, -2], np.int64), "idx")
    graph = helper.make_graph([helper.make_node("Gather", ["x", "idx"], ["y"], axis=1)], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, "s", 3])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3, 3])], [idx])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    path = str(tmp_path / "gather.onnx")
    onnx.save(model, path)
    interpreter = tflite_zoo.interpreter(to_tflite(path))
    rng = np.random.default_rng(0)
    for size in (4, 7):
        x = rng.standard_normal((2, size, 3)).astype(np.float32)
        [got] = tflite_zoo.run(interpreter, [x])
        np.testing.assert_array_equal(got, x[:, [size - 1, 0, size - 2]])
