"""The matrix-product rewrites on real transformers (``converters/tflite/passes/transposes_into_adj_y.py`` and, for the scale, ``fold_affine.py``): an
attention's ``kᵀ`` read through BATCH_MATMUL's ``adj_y`` instead of a TRANSPOSE, and the
√scale MUL of q and k folded into their FULLY_CONNECTED weights.

HF BERT (transformers, a small random-init config) is exported by torch at test time with a
dynamic batch, converted where ``import torch`` fails, and run in LiteRT with XNNPACK (one
delegate partition) and with the builtin kernels, against torch eager at the example batch and
after ``resize_tensor_input`` to others. The structure is read from the interpreter's own
operator list and the constant tensors it holds."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import tflite_zoo
from torchfree import convert_torch_free

transformers = pytest.importorskip("transformers")

BATCH = torch.export.Dim("batch", min=1, max=8)
SEQ = 12


class _LastHidden(torch.nn.Module):
    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, ids):
        return self.model(input_ids=ids).last_hidden_state


def _bert() -> torch.nn.Module:
    torch.manual_seed(0)
    cfg = transformers.BertConfig(vocab_size=64, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                  intermediate_size=64, max_position_embeddings=32)
    m = transformers.BertModel(cfg).eval()
    with torch.no_grad():  # non-trivial LayerNorm affine and biases (random init leaves them 1 and 0)
        for name, p in m.named_parameters():
            if name.endswith(("bias", "LayerNorm.weight")):
                p.add_(torch.randn_like(p) * 0.1)
    return _LastHidden(m).eval()


def _ids(batch: int) -> torch.Tensor:
    return torch.randint(1, 64, (batch, SEQ), generator=torch.Generator().manual_seed(batch))


@pytest.fixture(scope="module")
def bert(tmp_path_factory):
    module = _bert()
    ep = torch.export.export(module, (_ids(2),), dynamic_shapes=({0: BATCH},))
    path = str(tmp_path_factory.mktemp("bert") / "bert.pt2")
    torch.export.save(ep, path)
    return module, convert_torch_free("to_tflite", path)


def _graph(data: bytes):
    """(operators, producer of each tensor, constant of each tensor index) of the file."""
    it = tflite_zoo.interpreter(data, xnnpack=False)
    it.allocate_tensors()
    ops = it._get_ops_details()
    producer = {o: op for op in ops for o in op["outputs"]}
    consts = {}
    for t in it.get_tensor_details():
        try:
            consts[t["index"]] = it.get_tensor(t["index"])
        except ValueError:
            pass
    return ops, producer, consts


def _swaps_last_two(perm: np.ndarray) -> bool:
    r = perm.size
    return r >= 2 and list(perm) == list(range(r - 2)) + [r - 1, r - 2]


def test_no_transpose_of_k_feeds_batch_matmul(bert):
    ops, producer, consts = _graph(bert[1])
    matmuls = [op for op in ops if op["op_name"] == "BATCH_MATMUL"]
    assert len(matmuls) == 4  # 2 layers x (q·kᵀ, attention·v)
    for mm in matmuls:
        src = producer.get(mm["inputs"][1])
        if src is not None and src["op_name"] == "TRANSPOSE":
            assert not _swaps_last_two(consts[src["inputs"][1]]), f"op {mm['index']} reads kᵀ through a TRANSPOSE"


def test_scale_folded_into_fully_connected(bert):
    ops, producer, consts = _graph(bert[1])

    def fully_connected(t):
        op = producer.get(t)
        if op is not None and op["op_name"] == "RESHAPE":
            op = producer.get(op["inputs"][0])
        return op is not None and op["op_name"] == "FULLY_CONNECTED"

    scaled = [op["index"] for op in ops if op["op_name"] == "MUL"
              and any(fully_connected(a) and consts.get(b) is not None and consts[b].size == 1
                      for a, b in (op["inputs"], op["inputs"][::-1]))]
    assert scaled == []
    assert sum(op["op_name"] == "FULLY_CONNECTED" for op in ops) == 12  # 2 layers x 6: every linear layer


@pytest.mark.parametrize("xnnpack", [True, False], ids=["xnnpack", "builtin"])
def test_bert_matches_eager_after_resizes(bert, xnnpack):
    module, data = bert
    it = tflite_zoo.interpreter(data, xnnpack=xnnpack)
    for b in (2, 1, 3):
        ids = _ids(b)
        with torch.no_grad():
            want = module(ids).numpy()
        (got,) = tflite_zoo.run(it, [ids.numpy()])
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=2e-5, err_msg=f"batch {b}")
        parts = [o["op_name"] for o in it._get_ops_details()].count("DELEGATE")
        assert parts == (1 if xnnpack else 0), f"batch {b}: {parts} XNNPACK partitions"
