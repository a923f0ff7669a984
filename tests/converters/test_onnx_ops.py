"""Operator-level parity: one tiny program per family of lowerings, as exported and after
``run_decompositions()`` (which is where the core ATen spellings appear)."""

from __future__ import annotations

import functools
import os
import tempfile

import onnx
import pytest
import torch
import torch.nn.functional as F

import aten_op_cases
import onnx_zoo
from pt2x.converters import to_onnx

r = torch.randn


def _x(*shape):
    return lambda: r(*shape)


OPS = {
    "unary_math": (lambda x: (x.abs(), x.exp(), torch.log1p(x.abs()), torch.expm1(x), torch.log2(x.abs() + 1),
                              torch.log10(x.abs() + 1), x.sin(), x.cos(), x.tan(), x.sinh(), x.cosh(), x.asin().nan_to_num(),
                              torch.atan(x), torch.erf(x), torch.rsqrt(x.abs() + 1), x.reciprocal(), x.sign(), x.floor(),
                              x.ceil(), x.round(), x.trunc(), x.neg(), torch.frac(x)), (_x(3, 4),)),
    "activations": (lambda x: (F.elu(x), F.softplus(x), F.softplus(3 * x, beta=2, threshold=5),
                               F.softplus(4 * x, beta=0.5, threshold=1), F.mish(x), F.hardsigmoid(x), F.hardswish(x), F.relu6(x),
                               F.hardtanh(x, -0.5, 0.5), F.leaky_relu(x, 0.2), F.gelu(x), F.silu(x), F.glu(x, -1),
                               F.logsigmoid(x), torch.sigmoid(x), F.softsign(x)), (_x(3, 4),)),
    "binary": (lambda x, y: (x + 2 * y, x - y, torch.rsub(x, 1.5), x * y, x / (y.abs() + 1), x // 0.7, x % 0.7,
                             torch.fmod(x, 0.7), x ** 2, torch.pow(2.0, x), torch.atan2(x, y), torch.maximum(x, y),
                             torch.minimum(x, y), torch.lerp(x, y, 0.3), torch.addcmul(x, x, y, value=0.5),
                             torch.clamp(x, min=y), x.clamp_min(0.1), x.hypot(y)), (_x(3, 4), _x(3, 4))),
    "int_arith": (lambda a, b: (a + b, a * b, a // (b.abs() + 1), a % (b.abs() + 1), torch.div(a, 3, rounding_mode="trunc"),
                                torch.div(a, 3, rounding_mode="floor"), a / 2, a.bitwise_and(b), a | b, a ^ b, ~a, a.abs(),
                                a.sum(), a.max(), a.cumsum(0), torch.where(a > b, a, b)),
                  (lambda: torch.randint(-9, 9, (3, 4)), lambda: torch.randint(-9, 9, (3, 4)))),
    "compare_logic": (lambda x, y: (x == y, x != 0.5, x < y, x <= 0, x > y, x >= 0.1, (x > 0) & (y > 0),
                                    (x > 0) | (y > 0), (x > 0) ^ (y > 0), ~(x > 0), torch.isnan(x.log()),
                                    torch.isinf(x / 0), torch.where(x > 0, x, 0.0), x.masked_fill(y > 0, -1.0),
                                    torch.logical_not(x > 0), (x > 0).any(), (x > 0).all(1)), (_x(3, 4), _x(3, 4))),
    "reductions": (lambda x: (x.sum(1), x.mean((0, 2), keepdim=True), x.amax(-1), x.amin(0), *x.max(1), *x.min(-1),
                              x.argmax(), x.argmin(1, keepdim=True), x.prod(1), x.var(1), x.std(0, correction=0),
                              torch.logsumexp(x, 2), x.norm(dim=-1), torch.linalg.vector_norm(x, 1, dim=1),
                              x.softmax(1), x.log_softmax(-1), torch.var_mean(x, 2)), (_x(2, 3, 4),)),
    "shapes": (lambda x: (x.reshape(4, -1), x.flatten(1), x.unflatten(2, (2, 2)), x.permute(2, 0, 1), x.transpose(0, 1),
                          x[:, None].expand(2, 3, 3, 4), x.squeeze(), x.unsqueeze(-1), torch.cat([x, x], 1),
                          torch.stack([x, x], 0), x.chunk(2, 2), x.split([1, 2], 1), x.unbind(1), x.narrow(2, 1, 2),
                          x[:, 1], x[..., ::2], x[:, 1:-1], x.flip(0, 2), x.roll(1, 2), x.repeat(1, 2, 1),
                          x.tile(2), torch.tril(x), torch.triu(x, 1), x.diagonal(0, 1, 2), x.t() if x.dim() == 2 else x.mT),
               (_x(2, 3, 4),)),
    "indexing": (lambda x, i: (x[i], x[:, i[0]], x.index_select(1, i[:2].flatten()), torch.gather(x, 1, i),
                               x.scatter(1, i, 1.0), x.scatter_add(1, i, x), x.scatter_reduce(1, i, x, "amax"),
                               torch.index_put(x, (i[0],), torch.tensor(5.0)), x.index_fill(1, i[0, :1], 0.0),
                               torch.slice_scatter(x, x[:, :2] * 0, 1, 0, 2), torch.select_scatter(x, x[:, 0] * 0, 1, 2),
                               *x.topk(2), *x.sort(1), x.argsort(0, descending=True), F.one_hot(i, 4), x.cumsum(1)),
                 (_x(3, 4), lambda: torch.randint(0, 3, (3, 4)))),
    "creation": (lambda x: (torch.zeros_like(x), torch.ones(2, 3), torch.full((2,), 7), torch.arange(5),
                            torch.arange(1, 4, 0.5), x.new_zeros(3), x.new_ones(2, 2), torch.full_like(x, 2.5),
                            torch.empty(2, 3).fill_(1.0), x.new_full((2,), 3.0), torch.eye(3),
                            torch.linspace(0, 1, 5), torch.scalar_tensor(2.0) + x.sum()), (_x(3, 4),)),
    "casts": (lambda x: (x.int(), x.long() + 1, x.half(), x.bfloat16().float(), x.double() * 2, (x > 0).float(),
                         x.to(torch.int8), x.type_as(torch.zeros(1, dtype=torch.float64))), (_x(3, 4),)),
    "pads_resize": (lambda x, grid: (F.pad(x, (1, 2)), F.pad(x, (1, 1, 2, 0), value=0.5), F.pad(x, (2, 1, 1, 1), mode="reflect"),
                               F.pad(x, (1, 1, 1, 1), mode="replicate"), F.interpolate(x, size=(5, 7), mode="nearest"),
                               F.interpolate(x, scale_factor=2, mode="bilinear", align_corners=True),
                               F.interpolate(x, scale_factor=2, mode="nearest-exact"),
                               F.interpolate(x, scale_factor=2, mode="bicubic"), F.pixel_shuffle(torch.cat([x] * 2, 1), 2),
                               F.adaptive_avg_pool2d(x, (2, 3)), F.adaptive_max_pool2d(x, 2), F.avg_pool2d(x, 3, 1, 1, count_include_pad=False),
                               F.max_pool2d(x, 3, 2, 1, ceil_mode=True),
                               F.grid_sample(x, grid, align_corners=False),
                               F.grid_sample(x, grid, mode="nearest", padding_mode="border", align_corners=True),
                               F.fold(F.unfold(x, 2, padding=1, stride=1), (4, 6), 2, padding=1, stride=1)),
                    (_x(2, 2, 4, 6), lambda: torch.rand(2, 3, 3, 2) * 2.2 - 1.1)),
    "norms_mm": (lambda x, w: (F.instance_norm(x), F.group_norm(x, 2), F.layer_norm(x, (6,)), F.rms_norm(x, (6,)),
                               F.batch_norm(x, torch.zeros(4), torch.ones(4)), x @ w, torch.baddbmm(x, x, x.mT @ x, beta=0.5),
                               torch.bmm(x, x.mT), torch.einsum("bcn,bdn->bcd", x, x), F.normalize(x, dim=-1),
                               F.cosine_similarity(x, x.flip(0), dim=-1), F.prelu(x, torch.full((4,), 0.2))),
                 (_x(2, 4, 6), _x(6, 5))),
    "distances_bags": (lambda x, w, i, o: (torch.cdist(x, x.flip(0)), torch.cdist(x, x, p=1.0), F.pdist(x),
                                           torch.as_strided(w, (3, 4), (2, 3), 1), x.masked_scatter(x > 0, w),
                                           F.embedding_bag(i, w, o, mode="sum"), F.embedding_bag(i, w, o, mode="mean"),
                                           F.embedding_bag(i, w, o, mode="max")),
                       (_x(4, 3), _x(10, 3), lambda: torch.tensor([1, 2, 4, 5, 4, 3, 2, 9]),
                        lambda: torch.tensor([0, 2, 3, 6]))),
}

OPS.update(aten_op_cases.CASES)  # the operators lowered once for every target (issue 33), shared with LiteRT's test


class Fn(torch.nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, *args):
        return self.fn(*args)


_TMP = tempfile.mkdtemp(prefix="pt2x-onnx-ops-")


@functools.cache
def _inputs(name):
    torch.manual_seed(0)
    return tuple(f() for f in OPS[name][1])


@functools.cache
def _saved(name, decomposed):
    ep = torch.export.export(Fn(OPS[name][0]), _inputs(name))
    if decomposed:
        ep = ep.run_decompositions()
    path = os.path.join(_TMP, f"{name}_{int(decomposed)}.pt2")
    torch.export.save(ep, path)
    return path


def _converted(name, decomposed, opset=None):
    return to_onnx(_saved(name, decomposed), **({} if opset is None else {"opset": opset})).SerializeToString()


@pytest.mark.parametrize("decomposed,opset", [(False, None), (True, None), (False, 18)],
                         ids=["exported", "decomposed", "exported-opset18"])
@pytest.mark.parametrize("name", list(OPS))
def test_op_family(name, decomposed, opset):
    from tolerances import assert_close

    m = onnx.load_from_string(_converted(name, decomposed, opset))
    onnx.checker.check_model(m, full_check=True)
    args = _inputs(name)
    with torch.no_grad():
        expected = onnx_zoo._leaves(OPS[name][0](*args))
    got = onnx_zoo.run(onnx_zoo.ort_session(m.SerializeToString()), list(args))
    assert len(got) == len(expected)
    for i, (e, g) in enumerate(zip(expected, got)):
        e = e if isinstance(e, torch.Tensor) else torch.tensor(e)
        want = onnx_zoo.to_numpy(e.float() if e.dtype == torch.bfloat16 else e)
        assert_close(g, want, e.dtype, what=f"{name} output {i}", scale=10)
