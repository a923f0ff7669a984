"""PT2E-quantized programs built at test time with torchao (0.18.0, the test extra).

The flow users run: ``torch.export.export(model).module()`` -> ``prepare_pt2e`` with a quantizer
-> calibration on seeded random data -> ``convert_pt2e`` (weights folded to int8 constants) ->
``torch.export.export`` again with a dynamic batch (``Dim("batch", min=1, max=MAX_BATCH)``).

Two quantizers, both kinds must convert:
- ``x86``: torchao's ``X86InductorQuantizer`` default config: uint8 activations (0..255,
  per-tensor affine, HistogramObserver), int8 weights per output channel, symmetric (-128..127),
  float bias.
- ``xnnpack``: ``pt2e_xnnpack.XnnpackStyleQuantizer``, annotating as executorch's
  ``XNNPACKQuantizer`` with ``get_symmetric_quantization_config(is_per_channel=True)`` (torchao
  0.18 no longer ships it): int8 activations -128..127 per-tensor affine, int8 weights -127..127
  per-channel symmetric along axis 0, float bias; conv/linear outputs quantized whatever reads
  them, residual adds, muls, cats and pools quantized, moves sharing their input's quantization.
- ``xnnpack_on_x86``: X86's annotator given that symmetric config (which ops get annotated is
  X86's choice: a conv/linear whose result feeds an unquantized op keeps a float output).

What the saved graph holds (torch 2.13.0, torchao 0.18.0, both quantizers, all five programs):
only ``quantized_decomposed`` ops, no ``torchao.*`` affine ops --
``quantized_decomposed.quantize_per_tensor.default`` / ``dequantize_per_tensor.default``
(activations: scale and zero point as float/int literals, quant_min/quant_max/dtype literals) and
``quantized_decomposed.dequantize_per_channel.default`` (weights: an int8 constant, scales a
float64 constant, zero points an int64 constant, axis 0). The folded weight is a constant of
dtype int8; no ``quantize_per_channel`` or ``.tensor`` overload appears (those come from
other flows: ``fold_quantize=False``, dynamic quantization's ``choose_qparams``).

``program(name, quantizer)`` returns a ``QuantizedProgram``: the exported program, example
inputs at two batch sizes, and the quantized module's eager outputs on them.
``save(ep, path)`` writes the ``.pt2`` with ``torch.export.save``.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import types

import torch
from torch import nn
from torch.export import Dim

MAX_BATCH = 8
BATCHES = (1, 3)  # the two batch sizes every test runs
CALIBRATION_BATCHES = 4
QUANTIZERS = ("x86", "xnnpack")  # static; make_quantizer also knows "xnnpack_on_x86", "x86_dynamic"
PROGRAMS = ("cnn", "mlp", "transformer", "resnet18", "mobilenet_v2")


class SmallCNN(nn.Module):
    """conv-bn-relu, depthwise conv, a residual add, average pool, linear."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 16, 3, padding=1)
        self.bn = nn.BatchNorm2d(16)
        self.dw = nn.Conv2d(16, 16, 3, padding=1, groups=16)
        self.pw = nn.Conv2d(16, 16, 1)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(16, 10)

    def forward(self, x):
        y = torch.relu(self.bn(self.conv(x)))
        z = torch.relu(self.pw(self.dw(y)))
        return self.fc(torch.flatten(self.pool(y + z), 1))


class MobileCNN(nn.Module):
    """What XNNPACK's int8 kernels must take in one partition: a strided conv-bn-ReLU6, a padded
    max pool, an inverted residual (1x1 ReLU6, depthwise 3x3 ReLU6, 1x1, residual add), average
    pool, linear. ReLU6 exports as hardtanh, which the XNNPACK-style annotation quantizes apart
    from the conv, sharing its quantization."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 16, 3, stride=2, padding=1), nn.BatchNorm2d(16), nn.ReLU6())
        self.pool = nn.MaxPool2d(3, stride=2, padding=1)
        self.expand = nn.Sequential(nn.Conv2d(16, 32, 1), nn.ReLU6())
        self.dw = nn.Sequential(nn.Conv2d(32, 32, 3, padding=1, groups=32), nn.ReLU6())
        self.project = nn.Conv2d(32, 16, 1)
        self.head = nn.Linear(16, 10)

    def forward(self, x):
        y = self.pool(self.stem(x))
        y = y + self.project(self.dw(self.expand(y)))
        return self.head(torch.flatten(nn.functional.adaptive_avg_pool2d(y, 1), 1))


class BoundaryCNN(nn.Module):
    """Float ops between int8 ones: a sigmoid (XNNPACK's float node: the delegate converts its
    int8 input and its output) and a log_softmax (no XNNPACK node: the partitions stop at it)."""

    def __init__(self):
        super().__init__()
        self.c1, self.c2, self.c3 = nn.Conv2d(3, 8, 3, padding=1), nn.Conv2d(8, 8, 1), nn.Conv2d(8, 8, 1)

    def forward(self, x):
        y = self.c2(torch.sigmoid(torch.relu(self.c1(x))))
        return self.c3(torch.log_softmax(y, dim=1))


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2, self.fc3 = nn.Linear(32, 64), nn.Linear(64, 64), nn.Linear(64, 8)

    def forward(self, x):
        return self.fc3(torch.relu(self.fc2(torch.relu(self.fc1(x)))))


class TransformerBlock(nn.Module):
    """Pre-norm attention (linear q/k/v, matmul, softmax, matmul, linear) and an MLP."""

    def __init__(self, dim: int = 32, heads: int = 4):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.q, self.k, self.v, self.o = (nn.Linear(dim, dim) for _ in range(4))
        self.up, self.down = nn.Linear(dim, 2 * dim), nn.Linear(2 * dim, dim)

    def _split(self, t):
        b, s, d = t.shape
        return t.reshape(b, s, self.heads, d // self.heads).transpose(1, 2)

    def forward(self, x):
        h = self.ln1(x)
        q, k, v = self._split(self.q(h)), self._split(self.k(h)), self._split(self.v(h))
        att = torch.softmax(torch.matmul(q, k.transpose(-1, -2)) * (q.shape[-1] ** -0.5), dim=-1)
        a = torch.matmul(att, v).transpose(1, 2).reshape(x.shape)
        x = x + self.o(a)
        return x + self.down(torch.relu(self.up(self.ln2(x))))


def _basic_block_forward(self, x):
    """torchvision's BasicBlock.forward with its second ReLU a module of its own: the block calls
    one ``self.relu`` twice, and X86InductorQuantizer's conv-add-relu matcher raises "Input
    partition has more than one output node" on a module called twice (torchao 0.18.0)."""
    identity = x if self.downsample is None else self.downsample(x)
    out = self.bn2(self.conv2(self.relu(self.bn1(self.conv1(x)))))
    return self.relu_out(out + identity)


def _torchvision(name: str) -> nn.Module:
    from torchvision_ops import register_torchvision_ops

    register_torchvision_ops()
    import torchvision

    model = getattr(torchvision.models, name)(weights=None, num_classes=10)
    for block in model.modules():
        if isinstance(block, torchvision.models.resnet.BasicBlock):
            block.relu_out = nn.ReLU()
            block.forward = types.MethodType(_basic_block_forward, block)
    return model


# name -> (module factory, one example's shape without the batch)
MODELS = {
    "cnn": (SmallCNN, (3, 16, 16)),
    "mobile_cnn": (MobileCNN, (3, 32, 32)),
    "boundary_cnn": (BoundaryCNN, (3, 8, 8)),
    "mlp": (MLP, (32,)),
    "transformer": (TransformerBlock, (6, 32)),
    "resnet18": (lambda: _torchvision("resnet18"), (3, 64, 64)),
    "mobilenet_v2": (lambda: _torchvision("mobilenet_v2"), (3, 64, 64)),
}


def _xnnpack_symmetric_config():
    """For X86's annotator: executorch's ``get_symmetric_quantization_config(is_per_channel=True)``,
    static, not QAT (the specs ``pt2e_xnnpack`` annotates with)."""
    from pt2e_xnnpack import ACTIVATION, WEIGHT
    from torchao.quantization.pt2e.quantizer.utils import QuantizationConfig

    return QuantizationConfig(ACTIVATION, ACTIVATION, WEIGHT, None, False)


def make_quantizer(kind: str):
    """A fresh quantizer of ``kind`` (see QUANTIZERS)."""
    from torchao.quantization.pt2e.quantizer import x86_inductor_quantizer as x86

    quantizer = x86.X86InductorQuantizer()
    if kind == "x86":
        return quantizer.set_global(x86.get_default_x86_inductor_quantization_config())
    if kind == "xnnpack":
        from pt2e_xnnpack import XnnpackStyleQuantizer

        return XnnpackStyleQuantizer()
    if kind == "xnnpack_on_x86":
        return quantizer.set_global(_xnnpack_symmetric_config())
    if kind == "x86_dynamic":  # activations quantized with qparams chosen per run (choose_qparams)
        return quantizer.set_global(x86.get_default_x86_inductor_quantization_config(is_dynamic=True))
    raise ValueError(f"unknown quantizer {kind!r}; one of {QUANTIZERS}")


def _inputs(shape: tuple[int, ...], batch: int, seed: int) -> tuple[torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    return (torch.randn((batch, *shape), generator=gen),)


def _redraw_batchnorm(module: nn.Module, seed: int) -> None:
    """Non-trivial BatchNorm statistics (fresh ones are mean 0, var 1: the fold is an identity)."""
    gen = torch.Generator().manual_seed(seed)
    for m in module.modules():
        if isinstance(m, nn.BatchNorm2d):
            m.running_mean.copy_(torch.randn(m.num_features, generator=gen) * 0.1)
            m.running_var.copy_(torch.rand(m.num_features, generator=gen) + 0.5)
            m.weight.data.copy_(torch.rand(m.num_features, generator=gen) + 0.5)
            m.bias.data.copy_(torch.randn(m.num_features, generator=gen) * 0.1)


@dataclasses.dataclass
class QuantizedProgram:
    name: str
    quantizer: str
    exported: torch.export.ExportedProgram
    inputs: dict[int, tuple[torch.Tensor, ...]]  # batch size -> example inputs
    expected: dict[int, torch.Tensor]  # batch size -> the quantized module's eager output


@functools.lru_cache(maxsize=None)
def program(name: str, quantizer: str = "xnnpack") -> QuantizedProgram:
    """``name`` (see PROGRAMS) quantized by ``quantizer``, exported with a dynamic batch."""
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    factory, shape = MODELS[name]
    torch.manual_seed(0)
    model = factory().eval()
    with torch.no_grad():
        _redraw_batchnorm(model, seed=1)
        example = _inputs(shape, 2, seed=2)
        dynamic = ({0: Dim("batch", min=1, max=MAX_BATCH)},)
        captured = torch.export.export(model, example, dynamic_shapes=dynamic).module()
        prepared = prepare_pt2e(captured, make_quantizer(quantizer))
        for i in range(CALIBRATION_BATCHES):
            prepared(*_inputs(shape, 4, seed=100 + i))
        quantized = convert_pt2e(prepared)
        exported = torch.export.export(quantized, example, dynamic_shapes=dynamic)
        inputs = {b: _inputs(shape, b, seed=10 + b) for b in BATCHES}
        expected = {b: quantized(*inputs[b]).detach() for b in BATCHES}
    return QuantizedProgram(name, quantizer, exported, inputs, expected)


def save(exported: torch.export.ExportedProgram, path: str | os.PathLike) -> str:
    """``torch.export.save`` to ``path``; returns the path as a string."""
    torch.export.save(exported, str(path))
    return str(path)


def target_names(exported: torch.export.ExportedProgram) -> set[str]:
    """The call_function targets of the graph, as ``str(target)``."""
    return {str(n.target) for n in exported.graph.nodes if n.op == "call_function"}
