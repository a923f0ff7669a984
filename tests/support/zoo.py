"""The test zoo: programs exported by torch at test time, shared by every test suite.

Each ``Case`` builds an ``nn.Module`` and example inputs; ``second_inputs`` (where the
program has dynamic dims) gives another set with other sizes inside the ranges.
``exported(name, decomposed=False)`` caches the ``ExportedProgram`` per session, since
exporting dominates test time.
"""

from __future__ import annotations

import functools
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable

import torch
from torch.export import Dim

warnings.filterwarnings("ignore")


@dataclass
class Case:
    name: str
    make: Callable[[], torch.nn.Module]
    args: Callable[[], tuple]
    kwargs: Callable[[], dict] = dict
    dynamic_shapes: Any = None
    second_args: Callable[[], tuple] | None = None  # other dynamic sizes
    second_kwargs: Callable[[], dict] | None = None
    tags: set = field(default_factory=set)
    strict: bool = False


# ----------------------------------------------------------------------- modules


class Mlp(torch.nn.Module):
    def __init__(self, d_in=8, d_hidden=16, d_out=4):
        super().__init__()
        self.fc1, self.fc2 = torch.nn.Linear(d_in, d_hidden), torch.nn.Linear(d_hidden, d_out)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))


class DynamicReshape(torch.nn.Module):
    """Symbolic arithmetic: reshape to (b*s,), cat, slice by a computed size."""

    def forward(self, x, y):
        b, s = x.shape
        flat = x.reshape(b * s)
        z = torch.cat([x, y], dim=1)
        return flat.sum() + z[:, :2].mean(), z.reshape(b * (s + 4)), x[:, ::2] * 2


class Cond(torch.nn.Module):
    def forward(self, x):
        return torch.cond(x.sum() > 0, lambda x: x.sin(), lambda x: x.cos() + 1, (x,))


class WhileLoop(torch.nn.Module):
    def forward(self, x):
        def cond_fn(i, acc):
            return i < 3

        def body_fn(i, acc):
            return i + 1, acc * 2 + 1

        _, out = torch._higher_order_ops.while_loop(cond_fn, body_fn, (torch.tensor(0), x))
        return out


class MapOp(torch.nn.Module):
    def forward(self, xs, y):
        from torch._higher_order_ops.map import map as hop_map

        return hop_map(lambda x, y: x * y + 1, xs, y)


@torch.library.custom_op("pt2x_test::scaled_add", mutates_args=())
def scaled_add(x: torch.Tensor, y: torch.Tensor, alpha: float) -> torch.Tensor:
    return x + alpha * y


@scaled_add.register_fake
def _(x, y, alpha):
    return torch.empty_like(x)


class CustomOp(torch.nn.Module):
    def forward(self, x, y):
        return torch.ops.pt2x_test.scaled_add(x, y, 0.5).relu()


class BufferMutation(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("steps", torch.zeros(1))
        self.register_buffer("scratch", torch.ones(3), persistent=False)

    def forward(self, x):
        self.steps.add_(1)
        return x * self.steps + self.scratch


class InputMutation(torch.nn.Module):
    def forward(self, x, y):
        x.add_(y)
        return x * 2


class LiftedConstant(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.table = torch.arange(6.0).reshape(2, 3)

    def forward(self, x):
        return x @ self.table.T


class Tied(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(20, 8)
        self.head = torch.nn.Linear(8, 20, bias=False)
        self.head.weight = self.emb.weight

    def forward(self, ids):
        return self.head(self.emb(ids))


class NonContiguous(torch.nn.Module):
    """A transposed parameter and a strided slice buffer sharing storage with another."""

    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(4, 6).t())  # shape (6, 4), strides (1, 6)
        base = torch.arange(24.0).reshape(4, 6)
        self.register_buffer("base", base)
        self.register_buffer("every_other", base[:, ::2])  # view of base, strides (6, 2)

    def forward(self, x):
        return x @ self.w + self.every_other.sum() + self.base.mean()


class MultiDtype(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fp16 = torch.nn.Linear(4, 4).to(torch.float16)
        self.bf = torch.nn.Linear(4, 4).to(torch.bfloat16)
        self.register_buffer("q", torch.randint(-128, 127, (4,), dtype=torch.int8))
        self.register_buffer("mask", torch.tensor([True, False, True, True]))
        self.register_buffer("idx", torch.arange(4, dtype=torch.int64))
        self.register_buffer("d", torch.randn(4, dtype=torch.float64))

    def forward(self, x):
        h = self.fp16(x.half()).float() + self.bf(x.bfloat16()).float()
        return torch.where(self.mask, h + self.q.float(), h[..., self.idx]) * self.d.float()


class Bf16Linear(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4).to(torch.bfloat16)

    def forward(self, x):
        return self.lin(x).float()


class DictIn(torch.nn.Module):
    def forward(self, inputs, *, scale=2.0):
        return {"sum": inputs["a"] + inputs["b"], "scaled": inputs["a"] * scale}


class ConvBnPool(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.bn = torch.nn.BatchNorm2d(8)
        self.pool = torch.nn.MaxPool2d(2)

    def forward(self, x):
        return self.pool(torch.relu(self.bn(self.conv(x))))


def transformer_encoder(d_model=32, nhead=4, layers=2, ff=64):
    layer = torch.nn.TransformerEncoderLayer(d_model, nhead, ff, dropout=0.0, batch_first=True)
    return torch.nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)


def _seeded(fn):
    @functools.wraps(fn)
    def wrapper():
        torch.manual_seed(0)
        m = fn()
        return m.eval() if isinstance(m, torch.nn.Module) else m

    return wrapper


def _r(*shape, dtype=torch.float32):
    return lambda: (torch.randn(*shape, dtype=dtype),)


_B = Dim("batch", min=1, max=64)

CUSTOM_CASES: list[Case] = [
    Case("mlp_dynamic", _seeded(Mlp), _r(3, 8), dynamic_shapes=({0: _B},), second_args=_r(7, 8), tags={"dynamic"}),
    Case(
        "dynamic_reshape",
        _seeded(DynamicReshape),
        lambda: (torch.randn(3, 6), torch.randn(3, 4)),
        dynamic_shapes=({0: Dim("b", max=32), 1: Dim("s", min=3, max=64)}, {0: Dim("b", max=32)}),
        second_args=lambda: (torch.randn(5, 10), torch.randn(5, 4)),
        tags={"dynamic"},
    ),
    Case("cond", _seeded(Cond), _r(4, 3), tags={"control_flow"}),
    Case("while_loop", _seeded(WhileLoop), _r(2, 3), tags={"control_flow"}),
    Case("map", _seeded(MapOp), lambda: (torch.randn(3, 4), torch.randn(4)), tags={"control_flow"}),
    Case("custom_op", _seeded(CustomOp), lambda: (torch.randn(2, 3), torch.randn(2, 3)), tags={"custom_op"}),
    Case("buffer_mutation", _seeded(BufferMutation), _r(3), tags={"mutation"}),
    Case("input_mutation", _seeded(InputMutation), lambda: (torch.randn(3), torch.randn(3)), tags={"mutation"}),
    Case("lifted_constant", _seeded(LiftedConstant), _r(2, 3)),
    Case("tied_weights", _seeded(Tied), lambda: (torch.randint(0, 20, (2, 5)),)),
    Case("non_contiguous", _seeded(NonContiguous), _r(3, 6)),
    Case("multi_dtype", _seeded(MultiDtype), _r(2, 4), tags={"dtypes"}),
    Case("bf16_linear", _seeded(Bf16Linear), _r(2, 4, dtype=torch.bfloat16), tags={"dtypes"}),
    Case(
        "dict_inputs",
        _seeded(DictIn),
        lambda: ({"a": torch.randn(2, 3), "b": torch.randn(2, 3)},),
        kwargs=lambda: {"scale": 3.0},
    ),
    Case("conv_bn_pool", _seeded(ConvBnPool), _r(2, 3, 8, 8)),
    Case(
        "transformer_encoder",
        _seeded(transformer_encoder),
        _r(2, 5, 32),
        dynamic_shapes=({0: Dim("batch", max=16)},),
        second_args=_r(3, 5, 32),
        tags={"dynamic"},
    ),
]


def exportdb_cases() -> list[Case]:
    """Every ExportDB example (torch._export.db), as its own Case."""
    from torch._export.db.examples import all_examples

    cases = []
    for name, ex in sorted(all_examples().items()):
        cases.append(
            Case(
                f"exportdb_{name}",
                (lambda ex=ex: ex.model),
                (lambda ex=ex: ex.example_args),
                kwargs=(lambda ex=ex: dict(ex.example_kwargs or {})),
                dynamic_shapes=ex.dynamic_shapes,
                tags={"exportdb"},
            )
        )
    return cases


@functools.cache
def all_cases() -> dict[str, Case]:
    return {c.name: c for c in [*CUSTOM_CASES, *exportdb_cases()]}


class NotExportable(Exception):
    pass


def exported(name: str, decomposed: bool = False) -> torch.export.ExportedProgram:
    """The case's ExportedProgram; ``decomposed`` runs ``run_decompositions()``.

    Cached, except for programs that mutate their buffers: running one (``.module()``)
    advances its state, so every caller gets its own.
    """
    if "mutation" in all_cases()[name].tags:
        return _export(name, decomposed)
    return _cached_export(name, decomposed)


@functools.cache
def _cached_export(name: str, decomposed: bool) -> torch.export.ExportedProgram:
    return _export(name, decomposed)


def _export(name: str, decomposed: bool) -> torch.export.ExportedProgram:
    if decomposed:
        return exported(name).run_decompositions()
    case = all_cases()[name]
    try:
        return torch.export.export(
            case.make(), case.args(), case.kwargs(), dynamic_shapes=case.dynamic_shapes, strict=case.strict
        )
    except Exception as e:  # e.g. ExportDB's deliberately unsupported examples
        raise NotExportable(f"{name}: {type(e).__name__}: {str(e)[:200]}") from e


@functools.cache
def exportable_names() -> tuple[str, ...]:
    out = []
    for name in all_cases():
        try:
            exported(name)
            out.append(name)
        except NotExportable:
            pass
    return tuple(out)
