"""BatchNorm folded into the Conv / ConvTranspose / Gemm that feeds it (``converters/onnx/fold.py``).

Each program is exported at test time (as exported and decomposed, static and dynamic
batch), converted, run in ONNX Runtime and compared with torch eager; BatchNorm statistics
and affine parameters are re-drawn so that folding changes the numbers. The node counts
show the BN gone where it folds, and kept where the conv's output has another reader."""

from __future__ import annotations

import os
import tempfile

import onnx
import pytest

torch = pytest.importorskip("torch")

import onnx_zoo  # noqa: E402
from tolerances import assert_close  # noqa: E402

from pt2x.converters import to_onnx  # noqa: E402

_TMP = tempfile.mkdtemp(prefix="pt2x-onnx-fold-")
nn = torch.nn


def _redraw(m):
    torch.manual_seed(1)
    for mod in m.modules():
        if isinstance(mod, nn.modules.batchnorm._BatchNorm):
            c = mod.num_features
            with torch.no_grad():
                mod.running_mean.copy_(torch.randn(c))
                mod.running_var.copy_(torch.rand(c) * 2 + 0.1)
                if mod.affine:
                    mod.weight.copy_(torch.randn(c))
                    mod.bias.copy_(torch.randn(c))
    return m.eval()


class ConvBn(nn.Module):
    def __init__(self, cin=4, cout=8, groups=1, bias=True, dims=2):
        super().__init__()
        conv = {1: nn.Conv1d, 2: nn.Conv2d, 3: nn.Conv3d}[dims]
        bn = {1: nn.BatchNorm1d, 2: nn.BatchNorm2d, 3: nn.BatchNorm3d}[dims]
        self.conv = conv(cin, cout, 3, padding=1, groups=groups, bias=bias)
        self.bn = bn(cout)

    def forward(self, x):
        return torch.relu(self.bn(self.conv(x)))


class ConvBnShared(ConvBn):
    def forward(self, x):
        y = self.conv(x)
        return self.bn(y) + y  # the conv's output has another reader: no fold


class DeconvBn(nn.Module):
    def __init__(self, groups):
        super().__init__()
        self.conv = nn.ConvTranspose2d(4, 6, 3, stride=2, padding=1, output_padding=1, groups=groups)
        self.bn = nn.BatchNorm2d(6)

    def forward(self, x):
        return self.bn(self.conv(x))


class LinearBn(nn.Module):
    def __init__(self, bias=True):
        super().__init__()
        self.fc = nn.Linear(12, 16, bias=bias)
        self.bn = nn.BatchNorm1d(16)

    def forward(self, x):
        return self.bn(self.fc(x))


class BatchedLinearBn(nn.Module):
    """A linear layer over the last axis of [N, C, L], then a BN over C, where C equals the
    linear layer's output size: a batched MatMul, whose channels are not the BN's."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(12, 6, bias=False)
        self.bn = nn.BatchNorm1d(6)

    def forward(self, x):
        return self.bn(self.fc(x))


class Stack(nn.Module):
    """conv-bn-relu x3 with a residual, as in a resnet block."""

    def __init__(self):
        super().__init__()
        self.a = ConvBn(4, 8)
        self.b = ConvBn(8, 8, groups=8)
        self.c = nn.Conv2d(8, 8, 1, bias=False)
        self.bn = nn.BatchNorm2d(8)

    def forward(self, x):
        y = self.a(x)
        return torch.relu(self.bn(self.c(self.b(y))) + y)


CASES = {
    # name: (module factory, input shape, BatchNormalization nodes left)
    "conv_bn": (lambda: ConvBn(), (2, 4, 9, 9), 0),
    "conv_nobias_bn": (lambda: ConvBn(bias=False), (2, 4, 9, 9), 0),
    "conv_bn_shared": (lambda: ConvBnShared(), (2, 4, 9, 9), 1),
    "grouped_conv_bn": (lambda: ConvBn(4, 8, groups=2), (2, 4, 9, 9), 0),
    "depthwise_conv_bn": (lambda: ConvBn(8, 8, groups=8), (2, 8, 9, 9), 0),
    "conv1d_bn": (lambda: ConvBn(dims=1), (2, 4, 11), 0),
    "conv3d_bn": (lambda: ConvBn(dims=3), (2, 4, 5, 5, 5), 0),
    "deconv_bn": (lambda: DeconvBn(1), (2, 4, 5, 5), 0),
    "grouped_deconv_bn": (lambda: DeconvBn(2), (2, 4, 5, 5), 0),
    "linear_bn": (lambda: LinearBn(), (3, 12), 0),
    "linear_nobias_bn": (lambda: LinearBn(bias=False), (3, 12), 0),
    "batched_linear_bn": (lambda: BatchedLinearBn(), (2, 6, 12), 1),
    "stack": (lambda: Stack(), (2, 4, 9, 9), 0),
}


def _convert(module, x, name, decomposed, dynamic):
    dyn = ({0: torch.export.Dim("batch", min=1, max=64)},) if dynamic else None
    ep = torch.export.export(module, (x,), dynamic_shapes=dyn)
    if decomposed:
        ep = ep.run_decompositions()
    path = os.path.join(_TMP, f"{name}_{int(decomposed)}_{int(dynamic)}.pt2")
    torch.export.save(ep, path)
    m = to_onnx(path)
    onnx.checker.check_model(m, full_check=True)
    return m


@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
@pytest.mark.parametrize("decomposed", [False, True], ids=["exported", "decomposed"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_bn_fold_parity(name, decomposed, dynamic):
    factory, shape, bn_left = CASES[name]
    torch.manual_seed(0)
    module = _redraw(factory())
    x = torch.randn(*shape)
    m = _convert(module, x, name, decomposed, dynamic)
    ops = [n.op_type for n in m.graph.node]
    assert ops.count("BatchNormalization") == bn_left, ops
    sess = onnx_zoo.ort_session(m.SerializeToString())
    for batch in ([shape[0], 5] if dynamic else [shape[0]]):
        xb = torch.randn(batch, *shape[1:])
        with torch.no_grad():
            expected = module(xb)
        assert expected.std() > 0.1  # a degenerate reference matches anything
        (got,) = onnx_zoo.run(sess, [xb])
        assert_close(got, expected.numpy(), expected.dtype, what=f"{name} batch {batch}", scale=10)


def test_folded_weights_are_new_initializers_and_originals_pruned():
    torch.manual_seed(0)
    module = _redraw(ConvBn())
    m = _convert(module, torch.randn(2, 4, 9, 9), "inits", False, False)
    names = [t.name for t in m.graph.initializer]
    assert [n.op_type for n in m.graph.node] == ["Conv", "Relu"]
    assert not any("running" in n for n in names), names
    assert len(names) == 2, names


def test_tied_conv_weight_folds_each_use_separately():
    class Tied(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(4, 4, 3, padding=1)
            self.bn1, self.bn2 = nn.BatchNorm2d(4), nn.BatchNorm2d(4)

        def forward(self, x):
            return self.bn2(self.conv(self.bn1(self.conv(x))))

    torch.manual_seed(0)
    module = _redraw(Tied())
    x = torch.randn(2, 4, 7, 7)
    m = _convert(module, x, "tied", False, False)
    assert [n.op_type for n in m.graph.node] == ["Conv", "Conv"]
    with torch.no_grad():
        expected = module(x)
    (got,) = onnx_zoo.run(onnx_zoo.ort_session(m.SerializeToString()), [x])
    assert_close(got, expected.numpy(), expected.dtype, what="tied", scale=10)


def test_conv_output_read_in_a_subgraph_is_not_folded():
    class Branchy(ConvBn):
        def forward(self, x):
            y = self.conv(x)
            z = self.bn(y)
            w = torch.cond(x.sum() > 0, lambda t: t * 2, lambda t: t * 3, (y,))
            return z + w

    torch.manual_seed(0)
    module = _redraw(Branchy())
    x = torch.randn(2, 4, 9, 9)
    m = _convert(module, x, "branchy", False, False)
    ops = [n.op_type for n in m.graph.node]
    assert "If" in ops and ops.count("BatchNormalization") == 1, ops
    sess = onnx_zoo.ort_session(m.SerializeToString())
    for xb in (x, -x.abs() - 1):
        with torch.no_grad():
            expected = module(xb)
        (got,) = onnx_zoo.run(sess, [xb])
        assert_close(got, expected.numpy(), expected.dtype, what="branchy", scale=10)


def test_bn_kept_when_the_folded_weights_would_pass_the_constant_budget(monkeypatch):
    from pt2x.converters import limits

    torch.manual_seed(0)
    module = _redraw(nn.Sequential(nn.Conv2d(64, 64, 3, padding=1), nn.BatchNorm2d(64)))
    x = torch.randn(2, 64, 5, 5)
    # the budget covers the weights as stored (factor 1) and nothing more
    monkeypatch.setattr(limits, "MAX_CONSTANT_BYTES", 64 * 8)
    monkeypatch.setattr(limits, "WEIGHT_BYTES_FACTOR", 1)
    m = _convert(module, x, "budget", False, False)
    assert [n.op_type for n in m.graph.node] == ["Conv", "BatchNormalization"]
    with torch.no_grad():
        expected = module(x)
    (got,) = onnx_zoo.run(onnx_zoo.ort_session(m.SerializeToString()), [x])
    assert_close(got, expected.numpy(), expected.dtype, what="budget", scale=10)
