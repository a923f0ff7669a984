"""The PTE parity harness: small programs torch exports and saves at test time ->
``pt2x.converters.to_pte`` (in a process where ``import torch`` fails) -> ExecuTorch's runtime
(``executorch.runtime``), compared with torch eager under ``tolerances.py``."""

from __future__ import annotations

import functools
import os
import tempfile

import torch

from tolerances import assert_close
from torchfree import convert_torch_free

_TMP = tempfile.mkdtemp(prefix="pt2x_pte_zoo_")
PORTABLE = {"delegate": "none"}  # to_pte's portable kernels only (the default delegates to XNNPACK)


class MLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2 = torch.nn.Linear(8, 16), torch.nn.Linear(16, 4)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))


class MLPReshape(MLP):
    def forward(self, x):
        return super().forward(x).reshape(x.shape[0], 2, 2)


class CNN(torch.nn.Module):
    """conv -> batch norm (eval) -> relu -> max pool -> conv (no bias, groups) -> avg pool ->
    adaptive avg pool -> flatten -> linear."""

    def __init__(self):
        super().__init__()
        self.c1 = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.bn = torch.nn.BatchNorm2d(8)
        self.c2 = torch.nn.Conv2d(8, 8, 3, stride=2, padding=1, groups=2, bias=False)
        self.fc = torch.nn.Linear(8 * 2 * 2, 5)

    def forward(self, x):
        y = torch.nn.functional.max_pool2d(torch.relu(self.bn(self.c1(x))), 2)
        y = torch.nn.functional.avg_pool2d(self.c2(y), 2, stride=1)
        y = torch.nn.functional.adaptive_avg_pool2d(y, (2, 2))
        return self.fc(y.flatten(1))


class Block(torch.nn.Module):
    """layer norm -> linear on a 3-D input -> gelu, a transpose/softmax/permute/reshape, cat,
    scalar and tensor arithmetic, mean, sigmoid, tanh."""

    def __init__(self):
        super().__init__()
        self.ln = torch.nn.LayerNorm(8)
        self.fc = torch.nn.Linear(8, 8)

    def forward(self, x):
        y = torch.nn.functional.gelu(self.fc(self.ln(x)))
        y = y + torch.nn.functional.gelu(x, approximate="tanh")
        z = torch.softmax(y.transpose(1, 2), dim=-1).permute(0, 2, 1).reshape(2, -1)
        w = torch.cat([z, z * 2.0 - 1.0], dim=1) / 3
        return w.mean(dim=1, keepdim=True) + torch.sigmoid(w) * torch.tanh(w) - w / (w.abs() + 1)


class Residual(torch.nn.Module):
    """A resnet basic block twice (in-place relu, a residual add whose input lives across the
    block), then a reshape read by two consumers and an output that is a view."""

    def __init__(self):
        super().__init__()
        self.blocks = torch.nn.ModuleList()
        for _ in range(2):
            self.blocks.append(torch.nn.ModuleDict({
                "c1": torch.nn.Conv2d(4, 4, 3, padding=1, bias=False), "b1": torch.nn.BatchNorm2d(4),
                "c2": torch.nn.Conv2d(4, 4, 3, padding=1, bias=False), "b2": torch.nn.BatchNorm2d(4)}))
        self.act = torch.nn.ReLU(inplace=True)

    def forward(self, x):
        for b in self.blocks:
            y = self.act(b["b1"](b["c1"](x)))
            x = self.act(b["b2"](b["c2"](y)) + x)
        flat = x.reshape(x.shape[0], -1)
        return flat * flat.mean(dim=1, keepdim=True), flat.reshape(x.shape[0], 4, -1)


class Activations(torch.nn.Module):
    """relu6 (hardtanh), clamp, leaky_relu, silu, hardswish, hardsigmoid, dropout (eval), clone,
    slice, select, matmul (2-D and batched 3-D), bmm, log_softmax, sum, in-place dropout,
    unflatten, expand, contiguous, chunk, split."""

    def __init__(self):
        super().__init__()
        self.drop = torch.nn.Dropout(0.5)
        self.drop_ = torch.nn.Dropout(0.5, inplace=True)

    def forward(self, x, y):
        f = torch.nn.functional
        a = f.relu6(x * 4) + x.clamp(-0.5, 0.25) + f.leaky_relu(x, 0.2) + f.silu(x)
        a = self.drop(a + f.hardswish(x * 3) + f.hardsigmoid(x * 3)).clone()
        b = torch.matmul(a, y) + torch.bmm(a, y)
        c = torch.matmul(b[:, 1:3, :].select(0, 1), y[0])
        d = self.drop_(torch.relu(a)).unflatten(2, (5, 1)).expand(-1, -1, -1, 3).contiguous()
        p, q = a.chunk(2, dim=1)
        r, t = torch.split(b, [1, 3], dim=1)
        return f.log_softmax(b, dim=-1), c.sum(dim=[0], keepdim=True), d, p * q + r - t[:, :1]


class SeqLinear(torch.nn.Module):
    """layer norm and linear on a [batch, 3, 8] input: with a dynamic batch, the linear's rows
    are counted at run time (sym_size times 3)."""

    def __init__(self):
        super().__init__()
        self.ln, self.fc, self.fc2 = torch.nn.LayerNorm(8), torch.nn.Linear(8, 4), torch.nn.Linear(4, 4, bias=False)

    def forward(self, x):
        return self.fc2(torch.nn.functional.gelu(self.fc(self.ln(x))))


class Attention(torch.nn.Module):
    """Multi-head self-attention through scaled_dot_product_attention (and one with a scale)."""

    def __init__(self):
        super().__init__()
        self.qkv, self.proj = torch.nn.Linear(16, 48), torch.nn.Linear(16, 16)

    def forward(self, x):
        b, s, _ = x.shape
        q, k, v = self.qkv(x).reshape(b, s, 3, 4, 4).permute(2, 0, 3, 1, 4)
        y = torch.nn.functional.scaled_dot_product_attention(q, k, v)
        z = torch.nn.functional.scaled_dot_product_attention(q, k, v, scale=0.3)
        return self.proj((y + z).transpose(1, 2).reshape(b, s, 16))


class TwoOutputs(torch.nn.Module):
    """No weights, two inputs, two outputs."""

    def forward(self, x, y):
        return (x * 2.0 + y).relu(), torch.cat([x, y], 0).mean(dim=0)


class KVDecoderLayer(torch.nn.Module):
    """A decoder layer with a static KV cache: pre-norm attention (no mask) over two cache buffers
    written at the input position ``pos`` (``index_copy_`` or ``k[:, :, pos] = v``), then an MLP."""

    def __init__(self, write, batch=2, d=32, heads=4, max_len=8):
        super().__init__()
        self.write, self.h, self.hd = write, heads, d // heads
        self.ln = torch.nn.LayerNorm(d)
        self.qkv, self.o = torch.nn.Linear(d, 3 * d), torch.nn.Linear(d, d)
        self.mlp = torch.nn.Sequential(torch.nn.Linear(d, 2 * d), torch.nn.GELU(), torch.nn.Linear(2 * d, d))
        self.register_buffer("k_cache", torch.zeros(batch, heads, max_len, d // heads))
        self.register_buffer("v_cache", torch.zeros(batch, heads, max_len, d // heads))

    def forward(self, x, pos):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln(x)).view(b, t, 3, self.h, self.hd).permute(2, 0, 3, 1, 4)
        if self.write == "index_copy_":
            self.k_cache.index_copy_(2, pos, k)
            self.v_cache.index_copy_(2, pos, v)
        else:
            self.k_cache[:, :, pos] = k
            self.v_cache[:, :, pos] = v
        y = torch.nn.functional.scaled_dot_product_attention(q, self.k_cache, self.v_cache)
        x = x + self.o(y.transpose(1, 2).reshape(b, t, d))
        return x + self.mlp(x)


PROGRAMS = {
    # name -> (module, example inputs, dynamic_shapes or None, extra input sets to run)
    "mlp": (MLP, lambda: (torch.randn(2, 8),), None, []),
    "mlp_dynamic": (MLP, lambda: (torch.randn(2, 8),), {"x": {0: torch.export.Dim("batch", max=64)}},
                    [lambda: (torch.randn(1, 8),), lambda: (torch.randn(64, 8),), lambda: (torch.randn(17, 8),)]),
    "mlp_dynamic_reshape": (MLPReshape, lambda: (torch.randn(3, 8),), {"x": {0: torch.export.Dim("batch", max=32)}},
                            [lambda: (torch.randn(1, 8),), lambda: (torch.randn(32, 8),)]),
    "cnn": (CNN, lambda: (torch.randn(2, 3, 16, 16),), None, []),
    "cnn_dynamic": (CNN, lambda: (torch.randn(2, 3, 16, 16),), {"x": {0: torch.export.Dim("batch", max=8)}},
                    [lambda: (torch.randn(1, 3, 16, 16),), lambda: (torch.randn(8, 3, 16, 16),),
                     lambda: (torch.randn(5, 3, 16, 16),)]),
    "block": (Block, lambda: (torch.randn(2, 3, 8),), None, []),
    "residual": (Residual, lambda: (torch.randn(2, 4, 8, 8),), None, []),
    "activations": (Activations, lambda: (torch.randn(2, 4, 5), torch.randn(2, 5, 5)), None, []),
    "seq_dynamic": (SeqLinear, lambda: (torch.randn(2, 3, 8),), {"x": {0: torch.export.Dim("batch", max=16)}},
                    [lambda: (torch.randn(1, 3, 8),), lambda: (torch.randn(16, 3, 8),), lambda: (torch.randn(7, 3, 8),)]),
    "attention": (Attention, lambda: (torch.randn(2, 5, 16),), None, []),
    "two_outputs": (TwoOutputs, lambda: (torch.randn(3, 4), torch.randn(3, 4)), None, []),
}


@functools.cache
def module(name: str) -> torch.nn.Module:
    torch.manual_seed(0)
    m = PROGRAMS[name][0]().eval()
    with torch.no_grad():  # batch norm statistics that are not the identity
        for mod in m.modules():
            if isinstance(mod, torch.nn.BatchNorm2d):
                mod.running_mean.uniform_(-0.5, 0.5)
                mod.running_var.uniform_(0.5, 2.0)
                mod.weight.uniform_(0.5, 1.5)
                mod.bias.uniform_(-0.5, 0.5)
    return m


@functools.cache
def saved(name: str) -> str:
    _, make_inputs, dynamic, _ = PROGRAMS[name]
    torch.manual_seed(1)
    ep = torch.export.export(module(name), make_inputs(), dynamic_shapes=dynamic)
    path = os.path.join(_TMP, f"{name}.pt2")
    torch.export.save(ep, path)
    return path


@functools.cache
def converted(name: str, **kwargs) -> bytes:
    """The .pte of the saved program, converted where ``import torch`` fails."""
    return convert_torch_free("to_pte", saved(name), **kwargs)


def input_sets(name: str) -> list[tuple]:
    _, make_inputs, _, extra = PROGRAMS[name]
    torch.manual_seed(2)
    return [make_inputs()] + [f() for f in extra]


def run(data: bytes, inputs, data_path: str | None = None) -> list[torch.Tensor]:
    """ExecuTorch's run of the .pte ``data`` (``data_path``: the .ptd its external weights are in)."""
    from executorch.runtime import Runtime

    program = Runtime.get().load_program(data, data_path=data_path)  # reads ``data`` in place: both stay referenced
    method = program.load_method("forward")
    out = list(method.execute(list(inputs)))
    del method, program
    return out


def check(name: str, **kwargs) -> None:
    """Every input set of ``name``: ExecuTorch on pt2x's .pte (``to_pte(**kwargs)``) equals torch eager."""
    data = converted(name, **kwargs)
    m = module(name)
    for inputs in input_sets(name):
        got = run(data, inputs)
        with torch.no_grad():
            want = m(*inputs)
        want = list(want) if isinstance(want, (tuple, list)) else [want]
        assert len(got) == len(want), f"{name}: {len(got)} outputs, want {len(want)}"
        for i, (g, w) in enumerate(zip(got, want)):
            assert_close(g.numpy(), w.numpy(), "float32", what=f"{name} output {i} {tuple(inputs[0].shape)}")
