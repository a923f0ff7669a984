"""In-place overloads in the training IR and the ``*_as`` / ``_weight_norm`` composites.

* In-place lowerings are derived by the registry from the out-of-place ones
  (``registry.get``; ``_signature_table.INPLACE_OF``, checked against torch's schemas when the
  table is generated): programs using them on fresh tensors convert with parity, in the
  input's dtype (``eq_``/``logical_and_`` on floats write 0/1 in self's dtype).
* An in-place write through a view (``m[:, 0:2].fill_(1)``, swin's attention mask) reaches its
  base (the view-mutation pass; ``test_view_mutation.py`` covers each view kind, buffers,
  inputs and the refusals); a write whose base nothing reads afterwards needs no write-back.
"""

from __future__ import annotations

import os
import tempfile

import onnx
import pytest

torch = pytest.importorskip("torch")

import onnx_zoo  # noqa: E402
from tolerances import assert_close  # noqa: E402

from pt2x.converters import to_onnx  # noqa: E402
from pt2x.converters.aten import registry  # noqa: E402
from pt2x.converters.onnx.converter import _load_lowerings  # noqa: E402

_TMP = tempfile.mkdtemp(prefix="pt2x-onnx-inplace-")


class Fn(torch.nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, *args):
        return self.fn(*args)


def _saved(module, args, name, decomposed=False):
    ep = torch.export.export(module, args)
    if decomposed:
        ep = ep.run_decompositions()
    path = os.path.join(_TMP, f"{name}_{int(decomposed)}.pt2")
    torch.export.save(ep, path)
    return path, ep


def _check_parity(module, args, name, decomposed=False):
    path, _ = _saved(module, args, name, decomposed)
    m = to_onnx(path)
    onnx.checker.check_model(m, full_check=True)
    with torch.no_grad():
        expected = onnx_zoo._leaves(module(*[a.clone() for a in args]))
    got = onnx_zoo.run(onnx_zoo.ort_session(m.SerializeToString()), [a.clone() for a in args])
    assert len(got) == len(expected)
    for i, (e, g) in enumerate(zip(expected, got)):
        assert g.dtype == onnx_zoo.to_numpy(e).dtype, f"{name} output {i}: dtype {g.dtype} != {e.dtype}"
        assert_close(g, onnx_zoo.to_numpy(e), e.dtype, what=f"{name} output {i}", scale=10)


# ---------------------------------------------------------------- derived lowerings


def test_inplace_variants_real_models_use_are_derived():
    _load_lowerings()
    derived = registry.derived_targets("onnx")
    for t in ("aten.hardswish_.default", "aten.hardsigmoid_.default", "aten.sigmoid_.default",
              "aten.tanh_.default", "aten.clamp_min_.default", "aten.eq_.Scalar", "aten.scatter_.src"):
        assert t in derived, t
    for t in ("aten.hardswish_.default", "aten.silu_.default", "aten.clamp_.default", "aten.mul_.Tensor",
              "aten.div_.Tensor", "aten.masked_fill_.Scalar", "aten.relu_.default", "aten.copy_.default"):
        assert registry.get("onnx", t) is not None, t
    # written once: the out-of-place lowering, re-targeted
    base = registry.get("onnx", "aten.hardswish.default")
    assert registry.get("onnx", "aten.hardswish_.default").derived_from == ("aten.hardswish.default", base)
    # view ops' in-place forms change metadata, not data: not derived from the view op
    for t in ("aten.unsqueeze_.default", "aten.transpose_.default", "aten.t_.default", "aten.squeeze_.dim"):
        assert registry.get("onnx", t) is None, t


def test_derived_inplace_targets_match_torch_schemas():
    """Each derived in-place overload exists in torch with its base's arguments."""
    _load_lowerings()
    for inplace, base in registry.derived_targets("onnx").items():
        i = registry.parse_target(inplace)
        b = registry.parse_target(base)
        si = getattr(getattr(torch.ops.aten, i.op), i.overload)._schema
        sb = getattr(getattr(torch.ops.aten, b.op), b.overload)._schema
        assert [(a.name, str(a.type)) for a in si.arguments] == [(a.name, str(a.type)) for a in sb.arguments], inplace
        assert si.arguments[0].alias_info.is_write, inplace


def _activations_inplace(x):
    y = x.relu()
    torch.nn.functional.hardswish(y, inplace=True)
    z = x.clone()
    torch.nn.functional.hardsigmoid(z, inplace=True)
    w = x.clone()
    torch.nn.functional.silu(w, inplace=True).mul_(2.0)
    v = x.clone()
    v.clamp_(-0.5, 0.5).div_(x.abs() + 1)
    u = x.clone()
    u.masked_fill_(x > 0.3, -1.0)
    t = x.clone()
    t.sigmoid_()
    t.tanh_()
    return y, z, w, v, u, t, y * 2


def _dtypes_inplace(x, i):
    e = x.clone()
    e.eq_(x.round())  # float 0/1, not bool
    g = x.clone()
    g.gt_(0.0)
    la = x.clone()
    la.logical_and_(x > 0)
    ln = x.clone()
    ln.logical_not_()
    h = x.half()
    h.add_(x)  # float32 other, float16 self: the result stays float16
    b = i.clone()
    b.bitwise_and_(6)
    c = i.clone()
    c.clamp_min_(0)
    return e, g, la, ln, h, b, c


INPLACE = {
    "activations": (_activations_inplace, lambda: (torch.randn(3, 8),)),
    "dtypes": (_dtypes_inplace, lambda: (torch.randn(3, 8) * 2, torch.randint(-9, 9, (3, 8)))),
}


@pytest.mark.parametrize("decomposed", [False, True], ids=["exported", "decomposed"])
@pytest.mark.parametrize("name", list(INPLACE))
def test_inplace_on_fresh_tensors_has_parity(name, decomposed):
    torch.manual_seed(0)
    fn, make = INPLACE[name]
    _check_parity(Fn(fn), make(), f"inplace_{name}", decomposed)


class HardswishBlock(torch.nn.Module):
    """mobilenet_v3's activation: ``nn.Hardswish(inplace=True)`` after a conv."""

    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.act = torch.nn.Hardswish(inplace=True)
        self.gate = torch.nn.Hardsigmoid(inplace=True)

    def forward(self, x):
        y = self.act(self.conv(x))
        return y * self.gate(y.mean((2, 3), keepdim=True))


def test_hardswish_inplace_module():
    torch.manual_seed(0)
    m = HardswishBlock().eval()
    _, ep = _saved(m, (torch.randn(2, 3, 8, 8),), "hs_probe")
    assert "aten.hardswish_.default" in str(ep.graph)
    _check_parity(m, (torch.randn(2, 3, 8, 8),), "hardswish_block")


# ---------------------------------------------------------------- *_as and _weight_norm


def _as_ops(x, y):
    return (x.reshape_as(y), x.view_as(y), x[:1].expand_as(x), x.type_as(y.long()), x.flatten().reshape_as(x))


@pytest.mark.parametrize("decomposed", [False, True], ids=["exported", "decomposed"])
def test_as_ops_have_parity(decomposed):
    torch.manual_seed(0)
    args = (torch.randn(4, 6), torch.randn(3, 8))
    path, ep = _saved(Fn(_as_ops), args, "as_probe")
    if not decomposed:
        assert "aten.reshape_as.default" in str(ep.graph)
    _check_parity(Fn(_as_ops), args, "as_ops", decomposed)


def _weight_norms(v, g0, g1, gall):
    return torch._weight_norm(v, g0, 0), torch._weight_norm(v, g1, 1), torch._weight_norm(v, gall, -1)


@pytest.mark.parametrize("decomposed", [False, True], ids=["exported", "decomposed"])
def test_weight_norm_has_parity(decomposed):
    torch.manual_seed(0)
    v = torch.randn(4, 3, 5)
    args = (v, torch.rand(4, 1, 1) + 0.5, torch.rand(1, 3, 1) + 0.5, torch.rand(()) + 0.5)
    _, ep = _saved(Fn(_weight_norms), args, "wn_probe")
    assert "aten._weight_norm.default" in str(ep.graph)
    _check_parity(Fn(_weight_norms), args, "weight_norm", decomposed)


def test_weight_norm_conv_module():
    """wav2vec2's positional conv: ``weight_norm(Conv1d, dim=2)``."""
    torch.manual_seed(0)
    conv = torch.nn.utils.parametrizations.weight_norm(torch.nn.Conv1d(4, 4, 3, padding=1), name="weight", dim=2)
    with torch.no_grad():
        conv.parametrizations.weight.original0.mul_(torch.rand_like(conv.parametrizations.weight.original0) + 0.5)
    _check_parity(conv.eval(), (torch.randn(2, 4, 10),), "weight_norm_conv")


# ---------------------------------------------------------------- writes through views


class SwinMask(torch.nn.Module):
    """torchvision swin's shifted-window mask: writes into slices of a ``new_zeros`` tensor."""

    def forward(self, x):
        m = x.new_zeros((x.shape[0], 4, 4))
        cnt = 0
        for h in (slice(0, 2), slice(2, 4)):
            for w in (slice(0, 1), slice(1, 4)):
                m[:, h, w] = cnt
                cnt += 1
        m[:, 0:2].fill_(1.0)
        return m + x


class SiblingViewRead(torch.nn.Module):
    def forward(self, x):
        y = x.relu()
        a, b = y[0], y[1]
        a.mul_(3.0)
        return b + 1, y.sum()


@pytest.mark.parametrize("decomposed", [False, True], ids=["exported", "decomposed"])
@pytest.mark.parametrize("module", [SwinMask(), SiblingViewRead()], ids=["swin_mask", "base_read_after"])
def test_write_through_view_reaches_the_base(module, decomposed):
    """The view-mutation pass (every view kind, buffers and inputs: test_view_mutation.py)."""
    torch.manual_seed(0)
    _check_parity(module, (torch.randn(2, 4, 4),), f"view_{type(module).__name__}", decomposed)


class DeadViewWrite(torch.nn.Module):
    """The base is not read after the write: only the written view is, which sees it."""

    def forward(self, x):
        y = x.relu()
        z = y[0]
        z.add_(1.0)
        return z * 2


def test_dead_write_through_view_converts():
    torch.manual_seed(0)
    _check_parity(DeadViewWrite(), (torch.randn(2, 4, 4),), "dead_view_write")
