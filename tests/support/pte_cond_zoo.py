"""Programs with ``torch.cond`` for the .pte target: each with input sets that take each branch
(the first one exports), shared by tests/converters/pte/test_pte_control_flow.py and
benchmarks/bench_pte_cond.py."""

from __future__ import annotations

import torch


class WeightsInBranches(torch.nn.Module):
    """A linear in one branch, a parameter in the other: weights are operands of the cond."""

    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4, 4)
        self.scale = torch.nn.Parameter(torch.randn(4))

    def forward(self, x):
        return torch.cond(x.sum() > 0, lambda x: self.fc(x).relu(), lambda x: x * self.scale, (x,))


class TwoOutputs(torch.nn.Module):
    def forward(self, x):
        return torch.cond(x.sum() > 0, lambda x: (x.sin(), x + 1), lambda x: (x.cos(), x - 1), (x,))


class Nested(torch.nn.Module):
    """A cond inside the true branch of another; the result read after both."""

    def forward(self, x):
        def inner(x):
            return torch.cond(x.sum() > 2, lambda x: x * 3, lambda x: x.sin(), (x,))

        return torch.cond(x.sum() > 0, inner, lambda x: x.cos(), (x,)) + 1


class ViewOfTheOutput(torch.nn.Module):
    """Static views of a cond's output (no instruction: they keep the output's planned address)."""

    def forward(self, x):
        y = torch.cond(x.sum() > 0, lambda x: x.sin().reshape(-1), lambda x: (x.cos() + 1).reshape(-1), (x,))
        return y.reshape(2, 4) * 2


class DynamicBatch(torch.nn.Module):
    """A SymBool predicate (``x.shape[0] > 4``), a dynamic reshape in each branch."""

    def forward(self, x):
        return torch.cond(x.shape[0] > 4, lambda x: x.reshape(x.shape[0], 2, 2).sin(),
                          lambda x: x.cos().reshape(x.shape[0], 2, 2), (x,))


class BoolInput(torch.nn.Module):
    """The predicate is an input: a 0-d bool tensor."""

    def forward(self, p, x):
        return torch.cond(p, lambda x: x.sin(), lambda x: x.cos(), (x,))


_BATCH = torch.export.Dim("batch", max=16)
PROGRAMS = {
    # name -> (module class, input sets (the first one exports), dynamic_shapes)
    "weights": (WeightsInBranches, lambda: [(torch.rand(2, 4),), (-torch.rand(2, 4),)], None),
    "two_outputs": (TwoOutputs, lambda: [(torch.rand(4),), (-torch.rand(4),)], None),
    "nested": (Nested, lambda: [(torch.rand(4) + 1,), (torch.rand(4) * 0.1,), (-torch.rand(4),)], None),
    "view_of_output": (ViewOfTheOutput, lambda: [(torch.rand(2, 4),), (-torch.rand(2, 4),)], None),
    "dynamic_batch": (DynamicBatch, lambda: [(torch.randn(3, 4),), (torch.randn(7, 4),)], {"x": {0: _BATCH}}),
    "bool_input": (BoolInput, lambda: [(torch.tensor(True), torch.randn(4)), (torch.tensor(False), torch.randn(4))],
                   None),
}


def export(name: str, path: str):
    """(module, its input sets) of program ``name``, exported and saved to ``path`` (seeded)."""
    cls, make_inputs, dynamic = PROGRAMS[name]
    torch.manual_seed(0)
    m = cls().eval()
    inputs = make_inputs()
    torch.export.save(torch.export.export(m, inputs[0], dynamic_shapes=dynamic), path)
    return m, inputs


def eager(m, inputs) -> tuple:
    with torch.no_grad():
        out = m(*inputs)
    return tuple(out) if isinstance(out, (tuple, list)) else (out,)


def run_each_twice(data: bytes, cases: list[tuple[tuple, tuple]]):
    """Each (inputs, expected outputs), in turn and then again, on one loaded method: yields
    (inputs, expected, got). A ``MoveCall`` of one run must not leak into the next."""
    from executorch.runtime import Runtime

    program = Runtime.get().load_program(data)  # the runtime reads ``data`` in place: both stay referenced
    method = program.load_method("forward")
    for inputs, want in cases + cases:
        yield inputs, want, list(method.execute(list(inputs)))
