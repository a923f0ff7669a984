"""The pte target's dtypes: every parity program of ``pte_zoo`` in float16, bfloat16 and float64
(module and inputs cast), and programs of integer and bool tensors, exported by torch, converted
where ``import torch`` fails, run in ExecuTorch's runtime and compared with torch eager in the same
dtype. These runs are the evidence behind ``converters/pte/dtypes.py``'s ``KERNEL_DTYPES``."""

from __future__ import annotations

import copy
import os

import pytest

pytest.importorskip("executorch", reason="executorch is not installed (pip install executorch==1.5.1): "
                                         "the .pte files are checked by running them in its runtime")

import torch  # noqa: E402

import pte_zoo  # noqa: E402
from tolerances import assert_close  # noqa: E402

from pt2x.converters.errors import UnsupportedOpsError  # noqa: E402

# low-precision kernels round each op's result (and portable matmuls accumulate in the tensor's
# dtype): a program of several ops is held to a few times the per-op tolerance
_SCALE = {torch.float16: 4.0, torch.bfloat16: 4.0, torch.float64: 1.0}


def _check(tmp_path, name: str, m: torch.nn.Module, input_sets: list[tuple], dynamic=None, scale: float = 1.0):
    path = os.path.join(tmp_path, f"{name}.pt2")
    torch.export.save(torch.export.export(m, input_sets[0], dynamic_shapes=dynamic), path)
    data = pte_zoo.convert_torch_free("to_pte", path)
    for inputs in input_sets:
        got = pte_zoo.run(data, inputs)
        with torch.no_grad():
            want = m(*inputs)
        want = list(want) if isinstance(want, (tuple, list)) else [want]
        assert len(got) == len(want)
        for i, (g, w) in enumerate(zip(got, want)):
            assert g.dtype == w.dtype, f"{name} output {i}: {g.dtype}, eager {w.dtype}"
            dt = str(w.dtype).replace("torch.", "")
            assert_close(_np(g), _np(w), dt, what=f"{name} output {i} {tuple(inputs[0].shape)}", scale=scale)


def _np(t: torch.Tensor):
    return (t.float() if t.dtype == torch.bfloat16 else t).numpy()


# executorch 1.5.1's layer norm, adaptive average pool and log-softmax compute float64 in float32:
# programs with one are refused in float64, naming the kernel
_NO_FLOAT64 = {"activations": "_log_softmax.out", "block": "native_layer_norm.out", "cnn": "_adaptive_avg_pool2d.out",
               "cnn_dynamic": "_adaptive_avg_pool2d.out", "seq_dynamic": "native_layer_norm.out"}


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float64], ids=str)
@pytest.mark.parametrize("name", sorted(pte_zoo.PROGRAMS))
def test_float_programs_in_other_precisions(tmp_path, name, dtype):
    m = copy.deepcopy(pte_zoo.module(name)).to(dtype)
    _, _, dynamic, _ = pte_zoo.PROGRAMS[name]
    sets = [tuple(x.to(dtype) for x in inputs) for inputs in pte_zoo.input_sets(name)]
    if dtype == torch.float64 and name in _NO_FLOAT64:
        with pytest.raises(UnsupportedOpsError, match=rf"portable {_NO_FLOAT64[name]} is not known to take float64"):
            _check(tmp_path, name, m, sets, dynamic)
        return
    _check(tmp_path, name, m, sets, dynamic, _SCALE[dtype])


class Embed(torch.nn.Module):
    """int64 token ids -> embedding -> a float head; int32 ids too."""

    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(10, 6)
        self.head = torch.nn.Linear(6, 3)

    def forward(self, ids):
        return self.head(self.emb(ids))


class IntArith(torch.nn.Module):
    """integer arithmetic and data movement: add/sub/mul (tensor and scalar), neg, abs, clamp,
    sum, permute, cat, slice, select, expand, view."""

    def forward(self, a, b):
        x = (a + b * 3 - 2).neg().abs().clamp(0, 50)
        y = torch.cat([x, b], 1).permute(1, 0)[1:5].reshape(2, -1)
        return y.sum(dim=1), x[:, 1].unsqueeze(1).expand(-1, 4) * a


class Compare(torch.nn.Module):
    """comparisons to bool outputs, of floats and of integers."""

    def forward(self, x, y, n):
        return x > 0.5, n <= 2, x < y, n == n.clone()


def test_embedding_of_int64_and_int32_ids(tmp_path):
    torch.manual_seed(0)
    m = Embed().eval()
    ids = torch.tensor([[1, 4, 9], [0, 0, 7]])
    _check(tmp_path, "embed64", m, [(ids,)])
    _check(tmp_path, "embed32", m, [(ids.to(torch.int32),)])


def test_integer_arithmetic_and_data_movement(tmp_path):
    torch.manual_seed(0)
    a = torch.randint(-5, 5, (3, 4))
    b = torch.randint(-5, 5, (3, 4))
    _check(tmp_path, "int_arith", IntArith(), [(a, b)])


def test_comparisons_give_bool_tensors(tmp_path):
    torch.manual_seed(0)
    _check(tmp_path, "compare", Compare(), [(torch.rand(4, 3), torch.rand(4, 3), torch.randint(0, 4, (4, 3)))])


class MasksAndPositions(torch.nn.Module):
    """int64 and bool through the kernels of new tensors, selections and logic (the rows
    KERNEL_DTYPES gives them): full/scalar_tensor/arange of int64 and bool, where and masked_fill
    of int64 and bool tensors by a bool condition, logical ops of float32, int64 and bool to bool,
    any of each, bitwise ops of int64 and bool."""

    def forward(self, x, n):
        b = n > 0
        pos = torch.arange(n.shape[-1]) + torch.full((1,), 2, dtype=torch.int64)
        flags = torch.ones(n.shape[-1], dtype=torch.bool) & torch.ops.aten.scalar_tensor.default(True, dtype=torch.bool)
        return (torch.where(b, n, pos), torch.where(b, b, flags), n.masked_fill(b, -1), b.masked_fill(x > 0, True),
                torch.logical_not(n), torch.logical_and(x, b), torch.logical_or(n, b), torch.logical_xor(x, n),
                x.any(-1), n.any(0), b.any(), ~n, n & pos, b | flags, n ^ 3, b ^ True)


def test_masks_and_positions_of_int64_and_bool(tmp_path):
    g = torch.Generator().manual_seed(0)
    x, n = torch.randn(3, 4, generator=g), torch.randint(-2, 3, (3, 4), generator=g)
    x[0] = 0.0  # any over a row of zeros
    _check(tmp_path, "masks", MasksAndPositions(), [(x, n)])


class TablesOfPositions(torch.nn.Module):
    """int64 and bool through indexing and data movement (their KERNEL_DTYPES rows): index with
    int64 and int32 positions, index_select, gather, flip, roll, tril and constant pads of int64 and bool
    tensors, fmod and cumsum of int64, argmax to int64."""

    def forward(self, n, i):
        b = n > 0
        return (n[i], b[:, i.int()], torch.index_select(b, 1, i), torch.gather(n, 1, i.expand(3, -1)),
                n.flip(0), b.roll(1, 1), n.tril(1), b.tril(), torch.constant_pad_nd(n, [1, 0], 7),
                torch.constant_pad_nd(b, [0, 1]), torch.fmod(n, 3), n.cumsum(1), b.cumsum(0), n.float().argmax(1))


def test_tables_of_positions_of_int64_and_bool(tmp_path):
    g = torch.Generator().manual_seed(0)
    _check(tmp_path, "positions", TablesOfPositions(), [(torch.randint(-5, 6, (3, 4), generator=g),
                                                          torch.tensor([2, 0, 2]))])
