"""What pt2x's .tflite gives XNNPACK: whole graphs (one delegate partition, also after
``resize_tensor_input`` to another batch), and attention masks as one additive bias whose
fully masked rows still give torch's 0.

Programs are exported by torch at test time with a dynamic batch, converted where ``import
torch`` fails, run in LiteRT (XNNPACK as shipped) and compared with torch eager. The partition
count is the number of DELEGATE nodes in LiteRT's execution plan (the interpreter's
``_get_ops_details``, as ``benchmarks/bench_tflite_workers.py`` counts them)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from onnx import TensorProto, helper

import tflite_zoo
from pt2x.converters import to_tflite
from torchfree import convert_torch_free

BATCH = torch.export.Dim("batch", min=1, max=8)


def _tflite(module: torch.nn.Module, args: tuple, tmp_path) -> bytes:
    module.eval()
    ep = torch.export.export(module, args, dynamic_shapes=tuple({0: BATCH} for _ in args))
    path = str(tmp_path / "m.pt2")
    torch.export.save(ep, path)
    return convert_torch_free("to_tflite", path)


def _ops(data: bytes) -> list[str]:
    return tflite_zoo.op_names(data)


def _partitions(it) -> int:
    return [o["op_name"] for o in it._get_ops_details()].count("DELEGATE")


def _check_batches(module, make, data: bytes, batches=(2, 1, 3), atol=2e-5) -> list[int]:
    """Run one interpreter through each batch in turn (a resize each time), against torch eager;
    the partition count after each run."""
    it = tflite_zoo.interpreter(data)
    parts = []
    for b in batches:
        args = make(b)
        with torch.no_grad():
            want = module(*args)
        (got,) = tflite_zoo.run(it, [a.numpy() for a in args])
        np.testing.assert_allclose(got, want.numpy(), rtol=1e-4, atol=atol, err_msg=f"batch {b}")
        parts.append(_partitions(it))
    return parts


class _Encoder(torch.nn.Module):
    """Two pre-LN encoder layers of SDPA with a boolean key-padding mask built from the token
    ids (as BERT's is), GELU MLP, shared by both layers."""

    def __init__(self, vocab=50, d=32, heads=4):
        super().__init__()
        self.emb = torch.nn.Embedding(vocab, d)
        self.heads = heads
        self.layers = torch.nn.ModuleList(
            torch.nn.ModuleDict({"qkv": torch.nn.Linear(d, 3 * d), "out": torch.nn.Linear(d, d),
                                 "ln1": torch.nn.LayerNorm(d), "ln2": torch.nn.LayerNorm(d),
                                 "fc1": torch.nn.Linear(d, 2 * d), "fc2": torch.nn.Linear(2 * d, d)})
            for _ in range(2))

    def forward(self, ids):
        b, s = ids.shape
        x = self.emb(ids)
        keep = (ids != 0)[:, None, None, :]  # padding id 0 masked out
        for p in self.layers:
            q, k, v = p["qkv"](p["ln1"](x)).split(x.shape[-1], dim=-1)
            q, k, v = (t.view(b, s, self.heads, -1).transpose(1, 2) for t in (q, k, v))
            a = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=keep)
            x = x + p["out"](a.transpose(1, 2).reshape(b, s, -1))
            x = x + p["fc2"](torch.nn.functional.gelu(p["fc1"](p["ln2"](x))))
        return x


def _ids(b: int) -> tuple:
    g = torch.Generator().manual_seed(b)
    ids = torch.randint(1, 50, (b, 12), generator=g)
    ids[:, -3:] = 0  # padding at the end of every sequence
    return (ids,)


def test_transformer_runs_in_one_partition_after_resize(tmp_path):
    torch.manual_seed(0)
    m = _Encoder()
    data = _tflite(m, _ids(2), tmp_path)
    assert _check_batches(m, _ids, data) == [1, 1, 1]
    ops = _ops(data)
    # the mask's bias and row factor are computed once for both layers
    assert ops.count("SELECT_V2") <= 2 and ops.count("REDUCE_MAX") == 1, ops
    assert ops.count("SOFTMAX") == 2 and "SPLIT_V" not in ops and "POW" not in ops, ops


class _Cnn(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, 2, 1), torch.nn.BatchNorm2d(8), torch.nn.ReLU(),
                                        torch.nn.MaxPool2d(3, 2, 1))
        self.block = torch.nn.Sequential(torch.nn.Conv2d(8, 8, 3, 1, 1, groups=8), torch.nn.ReLU(),
                                         torch.nn.Conv2d(8, 16, 1), torch.nn.ReLU6())
        self.head = torch.nn.Linear(16, 5)

    def forward(self, x):
        y = self.block(self.stem(x))
        return self.head(y.mean((2, 3)))


def _images(b: int) -> tuple:
    return (torch.randn(b, 3, 32, 32, generator=torch.Generator().manual_seed(b)),)


def test_cnn_runs_in_one_partition_after_resize(tmp_path):
    torch.manual_seed(0)
    m = _Cnn()
    with torch.no_grad():  # BatchNorm statistics that are not the identity
        m.stem[1].running_mean.uniform_(-0.5, 0.5)
        m.stem[1].running_var.uniform_(0.5, 2.0)
    data = _tflite(m, _images(2), tmp_path)
    assert _check_batches(m, _images, data) == [1, 1, 1]
    ops = _ops(data)
    assert "PADV2" not in ops and "MAX_POOL_2D" in ops, ops  # the pool after ReLU pads by PAD


def test_max_pool_pads_with_minus_infinity_where_the_input_can_be_negative(tmp_path):
    """No Relu before the pool: the -inf pad stays (a 0 pad would win over negative windows)."""
    m = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 1), torch.nn.MaxPool2d(3, 2, 1))
    data = _tflite(m, _images(2), tmp_path)
    assert "PADV2" in _ops(data)
    with torch.no_grad():
        m[0].bias.fill_(-5.0)  # every value negative: a zero pad would show
    data = _tflite(m, _images(2), tmp_path)
    _check_batches(m, _images, data, batches=(2, 3))


class _Sdpa(torch.nn.Module):
    def forward(self, q, k, v, mask):
        return torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask)


def _attention_inputs(b: int, kind: str) -> tuple:
    g = torch.Generator().manual_seed(b)
    q, k, v = (torch.randn(b, 2, 5, 8, generator=g) for _ in range(3))
    keep = torch.rand(b, 1, 5, 7, generator=g) > 0.4
    keep[:, :, 0] = True
    keep[:, :, 1] = False  # query row 1: every key masked
    keep[0, :, 3] = False  # and row 3 of the first batch
    k, v = (torch.randn(b, 2, 7, 8, generator=g) for _ in range(2))
    mask = keep if kind == "bool" else torch.zeros(keep.shape).masked_fill(~keep, -float("inf"))
    return q, k, v, mask


@pytest.mark.parametrize("kind", ["bool", "float"])
def test_fully_masked_rows_give_torch_zeros(kind, tmp_path):
    """torch 2.13 eager gives exactly 0 for a query row whose every key is masked (bool mask,
    or an additive mask of -inf); the .tflite gives exactly 0 there too, and eager's values
    elsewhere, before and after a resize."""
    m = _Sdpa()
    make = lambda b: _attention_inputs(b, kind)  # noqa: E731
    data = _tflite(m, make(2), tmp_path)
    it = tflite_zoo.interpreter(data)
    for b in (2, 3):
        args = make(b)
        with torch.no_grad():
            want = m(*args).numpy()
        (got,) = tflite_zoo.run(it, [a.numpy() for a in args])
        dead = ~args[3].bool().numpy().any(-1) if kind == "bool" else np.isinf(args[3].numpy()).all(-1)
        dead = np.broadcast_to(dead[..., None], want.shape)
        assert dead.any() and (want[dead] == 0).all()
        assert (got[dead] == 0).all() and not np.isnan(got).any()
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
        assert _partitions(it) == 1


def _onnx_attention(mask_type: int):
    f = TensorProto.FLOAT
    inputs = [helper.make_tensor_value_info("q", f, [2, 2, 5, 8]), helper.make_tensor_value_info("k", f, [2, 2, 7, 8]),
              helper.make_tensor_value_info("v", f, [2, 2, 7, 8]),
              helper.make_tensor_value_info("m", mask_type, [2, 1, 5, 7])]
    node = helper.make_node("Attention", ["q", "k", "v", "m"], ["y"])
    g = helper.make_graph([node], "attention", inputs, [helper.make_tensor_value_info("y", f, [2, 2, 5, 8])])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 23)])


@pytest.mark.parametrize("kind", ["bool", "float"])
def test_onnx_attention_mask_bias_matches_torch(kind):
    """ONNX Attention (opset 23) from outside pt2x: the same bias and row factor; torch eager's
    SDPA on the same arrays is the reference (fully masked rows exactly 0)."""
    q, k, v, mask = _attention_inputs(2, kind)
    model = _onnx_attention(TensorProto.BOOL if kind == "bool" else TensorProto.FLOAT)
    it = tflite_zoo.interpreter(to_tflite(model))
    (got,) = tflite_zoo.run(it, [t.numpy() for t in (q, k, v, mask)])
    with torch.no_grad():
        want = _Sdpa()(q, k, v, mask).numpy()
    assert (want[:, :, 1] == 0).all() and (got[:, :, 1] == 0).all() and (got[0, :, 3] == 0).all()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    ops = _ops(to_tflite(model))
    assert ops.count("SOFTMAX") == 1 and ops.count("ADD") == 1 and ops.count("MUL") >= 1, ops


class _Gpt2Mlp(torch.nn.Module):
    """gpt2's qkv split into even parts and its tanh GELU with pow(x, 3)."""

    def forward(self, x):
        a, b, c = x.split(4, dim=-1)
        return a * torch.tanh(b + 0.044715 * torch.pow(c, 3.0)) + c.pow(2)


def test_even_split_and_cube_are_xnnpack_ops_and_exact(tmp_path):
    m = _Gpt2Mlp()
    make = lambda b: (torch.randn(b, 6, 12, generator=torch.Generator().manual_seed(b)),)  # noqa: E731
    data = _tflite(m, make(2), tmp_path)
    ops = _ops(data)
    assert "SPLIT" in ops and "SPLIT_V" not in ops and "POW" not in ops, ops
    assert _check_batches(m, make, data, batches=(2, 3), atol=1e-6) == [1, 1]
    # torch computes pow(x, 3) as (x * x) * x, and so does the .tflite: bit for bit
    data = _tflite(_Cube(), make(2), tmp_path)
    (x,) = make(3)
    (got,) = tflite_zoo.run(tflite_zoo.interpreter(data), [x.numpy()])
    assert np.array_equal(got, torch.pow(x, 3.0).numpy())


class _Cube(torch.nn.Module):
    def forward(self, x):
        return torch.pow(x, 3.0)


class _Moves(torch.nn.Module):
    """Data movement XNNPACK takes once written as unit-stride slices and constant reshapes."""

    def forward(self, x):  # [B, 6, 8, 4]
        a, b = x.split([2, 4], dim=1)  # uneven parts
        parts = [a, b, x[:, 0], x[:, -1], x[:, 1::2, ::2], x[:, :, 1::3],  # 8 is no multiple of 3
                 x.unsqueeze(1).squeeze(1) * 2, x[:, ::2].unsqueeze(2)]
        return torch.cat([p.flatten(1) for p in parts], 1)


def test_slices_splits_and_squeezes_move_the_same_values(tmp_path):
    m = _Moves()
    make = lambda b: (torch.randn(b, 6, 8, 4, generator=torch.Generator().manual_seed(b)),)  # noqa: E731
    data = _tflite(m, make(2), tmp_path)
    ops = _ops(data)
    assert not {"SPLIT_V", "GATHER", "SQUEEZE", "EXPAND_DIMS"} & set(ops), ops
    assert ops.count("STRIDED_SLICE") >= 6, ops  # one strided one kept: x[:, :, 1::3]
    it = tflite_zoo.interpreter(data)
    for b in (2, 1, 3):
        (x,) = make(b)
        (got,) = tflite_zoo.run(it, [x.numpy()])
        assert np.array_equal(got, m(x).numpy()), f"batch {b}"


class _RepeatHeads(torch.nn.Module):
    """Grouped-query attention's key/value heads repeated (transformers' repeat_kv), and a class
    token broadcast to the run-time batch (which stays BROADCAST_TO: the batch is not the
    token's own dim)."""

    def __init__(self):
        super().__init__()
        self.cls = torch.nn.Parameter(torch.randn(1, 1, 8))

    def forward(self, k):  # [B, 2, 5, 8]
        b = k.shape[0]
        rep = k[:, :, None].expand(b, 2, 3, 5, 8).reshape(b, 6, 5, 8)
        return torch.cat([rep.flatten(1), self.cls.expand(b, -1, -1).flatten(1)], 1)


def test_expand_of_static_dims_is_a_mul_by_ones(tmp_path):
    m = _RepeatHeads()
    make = lambda b: (torch.randn(b, 2, 5, 8, generator=torch.Generator().manual_seed(b)),)  # noqa: E731
    data = _tflite(m, make(2), tmp_path)
    ops = _ops(data)
    assert ops.count("BROADCAST_TO") == 1, ops  # the class token's only
    it = tflite_zoo.interpreter(data)
    for b in (2, 1, 3):
        (x,) = make(b)
        (got,) = tflite_zoo.run(it, [x.numpy()])
        with torch.no_grad():
            assert np.array_equal(got, m(x).numpy()), f"batch {b}"
