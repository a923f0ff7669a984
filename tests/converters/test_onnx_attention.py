"""Attention in ONNX Runtime CPU against torch eager for every mask kind torch's SDPA accepts.

ONNX Runtime's CPU ``Attention`` kernel is stricter than the ONNX spec: the mask must be rank 2-4
with its last two dims exactly ``[L, S]``. torch broadcasts masks over batch, heads, the query
and the key dimension (``nn.MultiheadAttention``'s key padding gives ``[B, 1, 1, S]``), so pt2x
expands them. Each case is exported at test time (dynamic batch/sequence where marked), saved,
converted from the file, run as exported and after ``run_decompositions()``, on two input sets
(other batch and sequence sizes where dynamic), at opset 23 (fused ``Attention``) and 21
(MatMul/Softmax decomposition)."""

from __future__ import annotations

import dataclasses
from typing import Callable

import numpy as np
import onnx
import pytest
import torch
import torch.nn.functional as F
from torch.export import Dim

from onnx_zoo import ort_session, run, to_numpy
from tolerances import assert_close

E = 8  # head size
HEADS = 4
KV_HEADS = 2


class Sdpa(torch.nn.Module):
    def __init__(self, causal=False, scale=None, gqa=False):
        super().__init__()
        self.causal, self.scale, self.gqa = causal, scale, gqa

    def forward(self, q, k, v, mask=None):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=self.causal, scale=self.scale,
                                              enable_gqa=self.gqa)


class Mha(torch.nn.Module):
    def __init__(self, need_weights, batch_first=True):
        super().__init__()
        self.need_weights = need_weights
        self.mha = torch.nn.MultiheadAttention(16, HEADS, batch_first=batch_first)

    def forward(self, x, pad, mask=None):
        out, w = self.mha(x, x, x, key_padding_mask=pad, attn_mask=mask, need_weights=self.need_weights)
        return (out, w) if self.need_weights else out


def _bool_mask(shape):
    m = torch.rand(shape) > 0.4
    m[..., 0] = True  # no fully masked rows here; test_fully_masked_rows covers those
    return m


def _float_mask(shape):
    m = torch.randn(shape)
    return m.masked_fill(torch.rand(shape) > 0.7, -float("inf")).index_fill(-1, torch.tensor([0]), 0.5)


@dataclasses.dataclass
class AttnCase:
    name: str
    make: Callable[[], torch.nn.Module]
    args: Callable[[int, int, int], tuple]  # (batch, query len, key len) -> inputs
    dynamic: Callable[[], object] | None = None  # dynamic_shapes for torch.export


def _qkv(b, l, s, kv_heads=HEADS):
    return torch.randn(b, HEADS, l, E), torch.randn(b, kv_heads, s, E), torch.randn(b, kv_heads, s, E)


def _sdpa_mask(shape_fn, kind):
    make = _bool_mask if kind == "bool" else _float_mask
    return lambda b, l, s: (*_qkv(b, l, s), make(shape_fn(b, l, s)))


# mask shape (batch, query len, key len) -> shape, and which of its dims are batch/query/key
MASK_SHAPES = {
    "BHLS": (lambda b, l, s: (b, HEADS, l, s), {0: "b", 2: "l", 3: "s"}),
    "11LS": (lambda b, l, s: (1, 1, l, s), {2: "l", 3: "s"}),
    "B11S": (lambda b, l, s: (b, 1, 1, s), {0: "b", 3: "s"}),
    "BH1S": (lambda b, l, s: (b, HEADS, 1, s), {0: "b", 3: "s"}),
    "B1LS": (lambda b, l, s: (b, 1, l, s), {0: "b", 2: "l", 3: "s"}),
    "111S": (lambda b, l, s: (1, 1, 1, s), {3: "s"}),
    "B111": (lambda b, l, s: (b, 1, 1, 1), {0: "b"}),
    "HLS": (lambda b, l, s: (HEADS, l, s), {1: "l", 2: "s"}),
    "LS": (lambda b, l, s: (l, s), {0: "l", 1: "s"}),
    "1S": (lambda b, l, s: (1, s), {1: "s"}),
    "L1": (lambda b, l, s: (l, 1), {0: "l"}),
}


def _dims():
    return {"b": Dim("batch", min=1, max=16), "l": Dim("qlen", min=2, max=32), "s": Dim("klen", min=2, max=32)}


def _sdpa_dynamic(mask_dims):
    def make():
        d = _dims()
        qkv = [{0: d["b"], 2: d["l"]}, {0: d["b"], 2: d["s"]}, {0: d["b"], 2: d["s"]}]
        return (*qkv, {i: d[k] for i, k in mask_dims.items()})
    return make


def _mha_args(with_mask):
    def args(b, l, s):
        pad = torch.zeros(b, l, dtype=torch.bool)
        pad[-1, l - 2:] = True  # the last sequence is padded
        return (torch.randn(b, l, 16), pad) + ((_float_mask((l, l)),) if with_mask else ())
    return args


def _mha_dynamic(with_mask):
    def make():
        b, s = Dim("batch", min=1, max=16), Dim("seq", min=3, max=32)
        return ({0: b, 1: s}, {0: b, 1: s}) + (({0: s, 1: s},) if with_mask else ())
    return make


def _cases():
    out = []
    for tag, (shape_fn, dims) in MASK_SHAPES.items():
        for kind in ("bool", "float"):
            out.append(AttnCase(f"sdpa_{kind}_{tag}", Sdpa, _sdpa_mask(shape_fn, kind)))
        out.append(AttnCase(f"sdpa_bool_{tag}_dynamic", Sdpa, _sdpa_mask(shape_fn, "bool"), _sdpa_dynamic(dims)))
    out += [
        AttnCase("sdpa_no_mask", Sdpa, _qkv),
        AttnCase("sdpa_no_mask_dynamic", Sdpa, _qkv, lambda: _sdpa_dynamic({})()[:3]),
        AttnCase("sdpa_causal", lambda: Sdpa(causal=True), _qkv),
        AttnCase("sdpa_causal_dynamic", lambda: Sdpa(causal=True), _qkv, lambda: _sdpa_dynamic({})()[:3]),
        AttnCase("sdpa_scale", lambda: Sdpa(scale=0.3), _sdpa_mask(MASK_SHAPES["B11S"][0], "float")),
        AttnCase("sdpa_gqa_B11S", lambda: Sdpa(gqa=True, scale=0.5),
                 lambda b, l, s: (*_qkv(b, l, s, KV_HEADS), _bool_mask((b, 1, 1, s)))),
        AttnCase("sdpa_gqa_causal", lambda: Sdpa(gqa=True, causal=True), lambda b, l, s: _qkv(b, l, s, KV_HEADS)),
    ]
    for nw in (False, True):
        w = "weights" if nw else "noweights"
        out.append(AttnCase(f"mha_pad_{w}", lambda nw=nw: Mha(nw), _mha_args(False)))
        out.append(AttnCase(f"mha_pad_{w}_dynamic", lambda nw=nw: Mha(nw), _mha_args(False), _mha_dynamic(False)))
        out.append(AttnCase(f"mha_pad_mask_{w}_dynamic", lambda nw=nw: Mha(nw), _mha_args(True), _mha_dynamic(True)))
    out.append(AttnCase("mha_pad_seq_first", lambda: Mha(False, batch_first=False),
                        lambda b, l, s: (torch.randn(l, b, 16), _mha_args(False)(b, l, s)[1])))
    return out


CASES = {c.name: c for c in _cases()}
# (batch, query len, key len): the export example, then other sizes where dynamic
SIZES = [(2, 5, 7), (3, 6, 9)]


def _sizes(case):
    if case.name.startswith("mha"):  # self-attention: one sequence length
        return [(b, l, l) for b, l, _ in SIZES]
    return SIZES


def _convert(case, decomposed, opset, tmp_path):
    from pt2x.converters import to_onnx

    torch.manual_seed(0)
    module = case.make().eval()
    b, l, s = _sizes(case)[0]
    args = case.args(b, l, s)
    ep = torch.export.export(module, args, dynamic_shapes=case.dynamic() if case.dynamic else None)
    if decomposed:
        ep = ep.run_decompositions()
    path = str(tmp_path / f"{case.name}.pt2")
    torch.export.save(ep, path)
    return module, to_onnx(path, opset=opset)


def _check(case, module, model, sizes):
    sess = ort_session(model.SerializeToString())
    for i, (b, l, s) in enumerate(sizes):
        torch.manual_seed(10 + i)
        args = case.args(b, l, s)
        with torch.no_grad():
            expected = module(*args)
        expected = expected if isinstance(expected, tuple) else (expected,)
        got = run(sess, list(args))
        for j, e in enumerate(expected):
            assert_close(got[j], to_numpy(e), e.dtype, what=f"{case.name} {(b, l, s)} output {j}")


# run_decompositions() leaves no SDPA behind, so its programs are checked at one opset only
VARIANTS = [pytest.param(23, False, id="23-exported"), pytest.param(21, False, id="21-exported"),
            pytest.param(23, True, id="decomposed")]


@pytest.mark.parametrize("opset,decomposed", VARIANTS)
@pytest.mark.parametrize("name", list(CASES))
def test_attention_parity(name, opset, decomposed, tmp_path):
    case = CASES[name]
    module, model = _convert(case, decomposed, opset, tmp_path)
    ops = {n.op_type for n in model.graph.node}
    if opset < 23:
        assert "Attention" not in ops
    sizes = _sizes(case) if case.dynamic else _sizes(case)[:1]
    _check(case, module, model, sizes)


@pytest.mark.parametrize("name", ["sdpa_bool_B11S", "sdpa_float_LS", "sdpa_bool_B11S_dynamic", "mha_pad_noweights_dynamic"])
def test_fused_attention_kept(name, tmp_path):
    """The mask is expanded for the kernel; the fused op stays."""
    _module, model = _convert(CASES[name], False, 23, tmp_path)
    assert "Attention" in {n.op_type for n in model.graph.node}


def test_full_mask_needs_no_expand(tmp_path):
    _module, model = _convert(CASES["sdpa_bool_BHLS_dynamic"], False, 23, tmp_path)
    assert "Expand" not in {n.op_type for n in model.graph.node}


@pytest.mark.parametrize("opset", [23, 21])
@pytest.mark.parametrize("kind", ["bool", "float"])
def test_fully_masked_rows(kind, opset, tmp_path):
    """A query row with every key masked: torch's safe softmax gives zeros, not NaN."""
    def args(b, l, s):
        m = _bool_mask((b, 1, l, s)) if kind == "bool" else _float_mask((b, 1, l, s))
        m[0, 0, 1] = False if kind == "bool" else -float("inf")
        return (*_qkv(b, l, s), m)

    case = AttnCase(f"sdpa_{kind}_masked_row", Sdpa, args)
    module, model = _convert(case, False, opset, tmp_path)
    _check(case, module, model, SIZES[:1])
    assert np.isfinite(run(ort_session(model.SerializeToString()), list(args(*SIZES[0])))[0]).all()


def test_model_is_valid(tmp_path):
    _module, model = _convert(CASES["mha_pad_mask_noweights_dynamic"], False, 23, tmp_path)
    onnx.checker.check_model(model, full_check=True)
