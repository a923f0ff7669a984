"""Programs the zoo lacks, shared by the saving and loading suites of the torch bridge.

auto_functionalized, wrap_with_set_grad_enabled, preserve_module_call_signature, effect
tokens, sym floats, derived dims, dtype/device/layout/memory-format arguments, complex
scalars, opaque and torchbind custom objects. ``program(kind, name, decomposed)`` gives a zoo
or extra program with its input sets.
"""

from __future__ import annotations

import functools
import os

import pytest
import torch
from torch.export import Dim

import zoo

@torch.library.custom_op("pt2x_export_test::inplace_scale", mutates_args=("x",))
def inplace_scale(x: torch.Tensor, s: float) -> None:
    x.mul_(s)


@inplace_scale.register_fake
def _(x, s):
    return None


@torch.library.custom_op("pt2x_export_test::record", mutates_args=())
def record(x: torch.Tensor) -> None:
    pass


@record.register_fake
def _(x):
    return None


def _register_effects():
    from torch._higher_order_ops.effects import _EffectType, _register_effectful_op

    _register_effectful_op(torch.ops.pt2x_export_test.record.default, _EffectType.ORDERED)


_register_effects()


class AutoFunc(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("state", torch.ones(3))

    def forward(self, x):
        torch.ops.pt2x_export_test.inplace_scale(self.state, 2.0)
        return x + self.state


class GradMode(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x):
        with torch.no_grad():
            y = self.lin(x)
        return y * 2


class Sub(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x):
        return self.lin(x)


class Preserve(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.sub = Sub()

    def forward(self, x):
        return self.sub(x).relu()


class TorchObjArgs(torch.nn.Module):
    def forward(self, x):
        a = torch.zeros(2, 3, dtype=torch.float64, device="cpu", layout=torch.strided)
        b = x.contiguous(memory_format=torch.channels_last)
        c = torch.empty_like(x, memory_format=torch.preserve_format).fill_(1.0)
        parts = torch.split(x, 1, dim=1)
        return a.sum() + b.sum() + c.sum() + parts[0].sum() + parts[-1].mean(), x[:, None, torch.tensor([0, 1])]


class SymFloatOps(torch.nn.Module):
    def forward(self, x):
        n = x.shape[0]
        return x * (n / 2), torch.full((2,), n * 0.5), x.new_zeros(n // 2 + 1)


class DerivedDims(torch.nn.Module):
    def forward(self, x, y):
        return x[:, : y.shape[1]] + y, torch.cat([x, x], 0)


class ComplexScalar(torch.nn.Module):
    def forward(self, x):
        return torch.view_as_real(torch.view_as_complex(x) * (1 + 2j))


class Effects(torch.nn.Module):
    def forward(self, x):
        torch.ops.pt2x_export_test.record(x)
        y = x * 2
        torch.ops.pt2x_export_test.record(y)
        return y + 1


from torch._library.opaque_object import register_opaque_type  # noqa: E402
from torch._opaque_base import OpaqueBase  # noqa: E402


class Scale(OpaqueBase):
    """An opaque (plain-pickle) custom object: a CUSTOM_OBJ input, stored as opaque_obj_<i>."""

    def __init__(self, k):
        self.k = k


register_opaque_type(Scale, typ="reference")


@torch.library.custom_op("pt2x_export_test::apply_scale", mutates_args=())
def apply_scale(x: torch.Tensor, s: Scale) -> torch.Tensor:
    return x * s.k


@apply_scale.register_fake
def _(x, s):
    return torch.empty_like(x)


class OpaqueObj(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.s = Scale(3.0)

    def forward(self, x):
        return torch.ops.pt2x_export_test.apply_scale(x, self.s) + 1


@functools.cache
def _torchbind_loaded() -> bool:
    """torch's torchbind test classes (libtorchbind_test.so ships in the wheel), with fakes."""
    lib = os.path.join(os.path.dirname(torch.__file__), "lib", "libtorchbind_test.so")
    if not os.path.exists(lib):
        return False
    from torch.testing._internal import torchbind_impls

    torch.ops.load_library(lib)
    torchbind_impls.register_fake_operators()
    torchbind_impls.register_fake_classes()
    return True


class TorchBind(torch.nn.Module):
    """A ScriptObject attribute: CUSTOM_OBJ input, custom op + call_torchbind, custom_obj_0."""

    def __init__(self):
        super().__init__()
        self.attr = torch.classes._TorchScriptTesting._Foo(10, 20)

    def forward(self, x):
        return x + torch.ops._TorchScriptTesting.takes_foo(self.attr, x) + self.attr.add_tensor(x)


def _torchbind_module():
    if not _torchbind_loaded():
        pytest.skip("libtorchbind_test.so not in this torch build")
    return TorchBind()


def _extra_cases():
    dx = Dim("dx", min=2, max=32)
    b = Dim("b", max=16)
    return {
        # name: (module, args, export options, second args)
        "auto_functionalized": (AutoFunc, (torch.randn(3),), {}, None),
        "grad_mode": (GradMode, (torch.randn(2, 4),), {}, None),
        "preserve_signature": (Preserve, (torch.randn(2, 4),), {"preserve_module_call_signature": ("sub",)}, None),
        "torch_object_args": (TorchObjArgs, (torch.randn(1, 3, 4, 4),), {}, None),
        "sym_float": (SymFloatOps, (torch.randn(6, 3),), {"dynamic_shapes": ({0: Dim("n", min=2, max=64)},)},
                      (torch.randn(9, 3),)),
        "derived_dims": (DerivedDims, (torch.randn(4, 8), torch.randn(4, 4)),
                         {"dynamic_shapes": ({0: b, 1: 2 * dx}, {0: b, 1: dx})},
                         (torch.randn(5, 6), torch.randn(5, 3))),
        "complex_scalar": (ComplexScalar, (torch.randn(3, 2),), {}, None),
        "tokens": (Effects, (torch.randn(3),), {}, None),
        "opaque_custom_obj": (OpaqueObj, (torch.randn(3),), {}, None),
        "torchbind": (_torchbind_module, (torch.randn(2, 3),), {"strict": False}, None),
    }


EXTRA = _extra_cases()


@functools.cache
def extra_exported(name: str, decomposed: bool):
    if decomposed:
        return extra_exported(name, False).run_decompositions()
    make, args, opts, _ = EXTRA[name]
    torch.manual_seed(0)
    return torch.export.export(make().eval(), args, **opts)


def program(kind: str, name: str, decomposed: bool):
    if kind == "zoo":
        case = zoo.all_cases()[name]
        ep = zoo.exported(name, decomposed)
        inputs = [(case.args(), case.kwargs())]
        if case.second_args is not None:
            inputs.append((case.second_args(), (case.second_kwargs or case.kwargs)()))
        return ep, inputs
    ep = extra_exported(name, decomposed)
    _, args, _, second = EXTRA[name]
    return ep, [(args, {})] + ([(second, {})] if second is not None else [])
