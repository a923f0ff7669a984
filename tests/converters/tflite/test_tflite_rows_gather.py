"""GatherElements whose index is one constant broadcast over the leading dims (DeBERTa's
relative-position gathers, ``torch.gather(c2p, -1, pos.expand(b * h, q, k))``): one GATHER of
constant positions with ``batch_dims=1`` between two TRANSPOSEs instead of GATHER_ND over
coordinates built at run time (``ops.index._rows_gather``).

Programs are exported by torch at test time with a dynamic batch, converted where ``import
torch`` fails and run in LiteRT with XNNPACK and with the builtin kernels against torch eager,
at the example batch and after ``resize_tensor_input`` to others."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import tflite_zoo
from torchfree import convert_torch_free

BATCH = torch.export.Dim("batch", min=1, max=8)
BATCH3 = torch.export.Dim("batch", min=3, max=8)  # _RelGather with drop=1 (an example of 2 specialises)


def _convert(module: torch.nn.Module, args: tuple, tmp_path, batch=BATCH) -> bytes:
    ep = torch.export.export(module.eval(), args, dynamic_shapes=tuple({0: batch} for _ in args))
    path = str(tmp_path / "m.pt2")
    torch.export.save(ep, path)
    return convert_torch_free("to_tflite", path)


def _ops(data: bytes) -> list[str]:
    it = tflite_zoo.interpreter(data, xnnpack=False)
    return [o["op_name"] for o in it._get_ops_details()]


def _check(module, make, data: bytes, batches=(4, 6, 3)) -> None:
    for xnnpack in (True, False):
        it = tflite_zoo.interpreter(data, xnnpack=xnnpack)
        for b in batches:
            args = make(b)
            with torch.no_grad():
                want = module(*args).numpy()
            (got,) = tflite_zoo.run(it, [a.numpy() for a in args])
            assert got.shape == want.shape, f"batch {b}, xnnpack={xnnpack}"
            np.testing.assert_array_equal(got, want, err_msg=f"batch {b}, xnnpack={xnnpack}")


class _RelGather(torch.nn.Module):
    """x [b, I, K] gathered along K by one constant P [I, J], expanded to ``b - drop`` rows
    (drop > 0: an index with fewer leading rows than the data reads only its part)."""

    def __init__(self, p: torch.Tensor, drop: int = 0):
        super().__init__()
        self.register_buffer("p", p)
        self.drop = drop

    def forward(self, x):
        idx = self.p[None].expand(x.shape[0] - self.drop, -1, -1)
        return torch.gather(x * 2.0, -1, idx) + 1.0


def _pos(i: int, j: int, k: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(0)
    return torch.randint(0, k, (i, j), generator=g)


def _x(k: int):
    return lambda b: (torch.randn(b, 6, k, generator=torch.Generator().manual_seed(b)),)


@pytest.mark.parametrize("drop", [0, 1], ids=["same-rows", "fewer-rows"])
def test_constant_rows_gather_is_one_gather(drop, tmp_path):
    module = _RelGather(_pos(6, 5, 9), drop)
    data = _convert(module, _x(9)(4), tmp_path, BATCH3)
    ops = _ops(data)
    assert "GATHER_ND" not in ops and ops.count("GATHER") == 1, ops
    _check(module, _x(9), data)


def test_deberta_v2_matches_eager_without_gather_nd(tmp_path):
    transformers = pytest.importorskip("transformers")
    import model_zoo  # noqa: F401  (torchvision::nms before transformers imports torchvision)

    torch.manual_seed(0)
    cfg = transformers.DebertaV2Config(vocab_size=64, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                       intermediate_size=64, max_position_embeddings=32, relative_attention=True,
                                       position_buckets=8, pos_att_type=["p2c", "c2p"])
    inner = transformers.DebertaV2Model(cfg).eval()

    class LastHidden(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.m = inner

        def forward(self, ids):
            return self.m(input_ids=ids).last_hidden_state

    module = LastHidden().eval()

    def make(b):
        return (torch.randint(1, 64, (b, 12), generator=torch.Generator().manual_seed(b)),)

    data = _convert(module, make(2), tmp_path)
    ops = _ops(data)
    assert "GATHER_ND" not in ops and ops.count("GATHER") == 5, ops  # the word embedding + 2 per layer
    for xnnpack in (True, False):
        it = tflite_zoo.interpreter(data, xnnpack=xnnpack)
        for b in (2, 1, 3):
            (ids,) = make(b)
            with torch.no_grad():
                want = module(ids).numpy()
            (got,) = tflite_zoo.run(it, [ids.numpy()])
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=2e-5, err_msg=f"batch {b}, xnnpack={xnnpack}")


def test_index_past_the_axis_fails_at_run_time():
    """An ONNX GatherElements whose expanded constant index holds 5 along an axis of 3: LiteRT's
    GATHER refuses it when invoked (as ONNX Runtime does), rather than reading another row."""
    from onnx import TensorProto, helper, numpy_helper

    from pt2x.converters import to_tflite

    consts = {"P": np.array([[[0, 5], [1, 2]]], np.int64), "tail": np.array([2, 2], np.int64),
              "z": np.array([0], np.int64), "o": np.array([1], np.int64)}
    g = helper.make_graph(
        [helper.make_node("Shape", ["x"], ["s"]), helper.make_node("Slice", ["s", "z", "o"], ["n"]),
         helper.make_node("Concat", ["n", "tail"], ["s2"], axis=0), helper.make_node("Expand", ["P", "s2"], ["idx"]),
         helper.make_node("GatherElements", ["x", "idx"], ["y"], axis=2)], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 2, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(v, k) for k, v in consts.items()])
    data = to_tflite(helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)]))
    assert "GATHER_ND" not in _ops(data)
    for xnnpack in (True, False):
        with pytest.raises(RuntimeError, match="gather index out of bounds"):
            tflite_zoo.run(tflite_zoo.interpreter(data, xnnpack=xnnpack), [np.zeros((2, 2, 3), np.float32)])


class _ColumnBroadcast(torch.nn.Module):
    """One position per row [I, 1] expanded along J too: the index's last dim is the Expand's
    (4), not P's (1)."""

    def __init__(self):
        super().__init__()
        self.register_buffer("p", torch.tensor([[4], [0], [8], [8], [2], [1]]))

    def forward(self, x):
        return torch.gather(x, -1, self.p[None].expand(x.shape[0], -1, 4))


def test_positions_broadcast_along_j_match_eager(tmp_path):
    module = _ColumnBroadcast()
    data = _convert(module, _x(9)(2), tmp_path)
    _check(module, _x(9), data, batches=(2, 1, 3))
