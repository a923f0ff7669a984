"""State in the .pte target (converters/pte/state.py): buffers a program writes are planned tensors
that carry their value from one ``execute()`` of a loaded method to the next, start from the
buffer's saved value (the mutable data segment), and are written back by ``copy_`` as exir does;
written inputs come back as the first outputs; KV caches written at an input position through
``index_copy_``, ``index_put_`` (``k[:, :, pos] = v``) and ``index_add_`` match eager over
several decode steps. Every program is converted where ``import torch`` fails and run in
ExecuTorch's runtime against the eager module called as many times."""

from __future__ import annotations

import glob
import os

import numpy as np
import pytest
import torch

import pte_zoo
from paths import PT2_FIXTURES
from pt2x.converters.errors import ConversionError, UnsupportedOpsError
from pt2x.converters.pte import schema_generated as fb
from tolerances import assert_close
from torchfree import convert_torch_free

STEPS = 4
FIXTURES = sorted(glob.glob(os.path.join(PT2_FIXTURES, "torch-*", "buffer_mutation.pt2")))


def _method(data: bytes):
    """A loaded ``forward`` of a new program (and the program: the runtime reads ``data`` in place)."""
    pytest.importorskip("executorch", reason="executorch is not installed (pip install executorch==1.5.1): "
                                             "the .pte files are checked by running them in its runtime")
    from executorch.runtime import Runtime

    program = Runtime.get().load_program(data)
    return program, program.load_method("forward")


def _save(tmp_path, module, args, name, decompose=False, dynamic_shapes=None) -> str:
    ep = torch.export.export(module, args, dynamic_shapes=dynamic_shapes)
    if decompose:
        ep = ep.run_decompositions()
    path = str(tmp_path / f"{name}.pt2")
    torch.export.save(ep, path)
    return path


def _check_steps(data: bytes, eager: torch.nn.Module, inputs: list[tuple], what: str) -> None:
    """One loaded method run on each input set in turn equals ``eager`` called on them in turn
    (every output, inputs the eager call writes compared after it)."""
    _program, method = _method(data)
    for step, args in enumerate(inputs):
        got = method.execute([a.clone() for a in args])
        with torch.no_grad():
            want = eager(*args)
        want = list(want) if isinstance(want, (tuple, list)) else [want]
        assert len(got) == len(want), f"{what}: {len(got)} outputs, want {len(want)}"
        for i, (g, w) in enumerate(zip(got, want)):
            assert_close(g.numpy(), w.numpy(), "float32", what=f"{what} step {step} output {i}")


def _tensors(data: bytes) -> list:
    plan = fb.Program.GetRootAs(data, 0).ExecutionPlan(0)
    out = []
    for i in range(plan.ValuesLength()):
        ev = plan.Values(i)
        if ev.ValType() == fb.KernelTypes.Tensor:
            t = fb.Tensor()
            t.Init(ev.Val().Bytes, ev.Val().Pos)
            out.append(t)
    return out


def _operators(data: bytes) -> list[tuple[str, list[int]]]:
    plan = fb.Program.GetRootAs(data, 0).ExecutionPlan(0)
    chain = plan.Chains(0)
    out = []
    for i in range(chain.InstructionsLength()):
        call = fb.KernelCall()
        tab = chain.Instructions(i).InstrArgs()
        call.Init(tab.Bytes, tab.Pos)
        op = plan.Operators(call.OpIndex())
        out.append((f"{op.Name().decode()}.{op.Overload().decode()}".rstrip("."), list(call.ArgsAsNumpy())))
    return out


# ------------------------------------------------------------- the fixture, from 7 torch releases


class Mutation(torch.nn.Module):
    """tests/fixtures/pt2/make_fixtures.py's ``Mutation``."""

    def __init__(self):
        super().__init__()
        self.register_buffer("steps", torch.zeros(1))
        self.register_buffer("scratch", torch.ones(3), persistent=False)

    def forward(self, x):
        self.steps.add_(1)
        return x * self.steps + self.scratch


@pytest.mark.parametrize("path", FIXTURES, ids=[os.path.basename(os.path.dirname(p)) for p in FIXTURES])
def test_buffer_mutation_fixture_carries_its_state(path):
    """In place (training IR, torch >= 2.6) or as a buffer mutation of the signature (2.5.1)."""
    assert len(FIXTURES) == 7
    data = convert_torch_free("to_pte", path)
    saved = np.load(path[:-len(".pt2")] + ".npz")
    x = torch.from_numpy(saved["in_0"])
    _check_steps(data, Mutation(), [(x,)] * STEPS, os.path.basename(os.path.dirname(path)))
    _program, method = _method(data)  # a new program starts from the saved buffer again
    assert_close(method.execute([x])[0].numpy(), saved["out_0"], "float32", what="first call")


class Counters(torch.nn.Module):
    """Three buffers written in place, two of them with the same saved value, one read before
    it is written; a non-persistent buffer read only."""

    def __init__(self):
        super().__init__()
        self.register_buffer("steps", torch.full((2,), 5.0))
        self.register_buffer("decay", torch.full((2,), 5.0))
        self.register_buffer("acc", torch.tensor([1.0, -2.0]))
        self.register_buffer("bias", torch.tensor([0.5, 0.25]), persistent=False)

    def forward(self, x):
        before = self.acc * 1.0
        self.steps.add_(1)
        self.acc.mul_(x)
        self.decay.sub_(1)
        return x * self.steps + self.acc * self.decay + before + self.bias


@pytest.fixture(scope="module")
def counters(tmp_path_factory) -> bytes:
    return convert_torch_free("to_pte", _save(tmp_path_factory.mktemp("counters"), Counters(),
                                              (torch.randn(2),), "counters"))


def test_buffers_start_from_their_saved_values_at_each_load(counters):
    g = torch.Generator().manual_seed(0)
    inputs = [(torch.randn(2, generator=g),) for _ in range(STEPS)]
    _check_steps(counters, Counters(), inputs, "counters")
    _check_steps(counters, Counters(), inputs, "counters loaded again")


def test_file_layout_of_mutable_buffers(counters):
    """Each written buffer: a planned tensor (allocation_info) whose data_buffer_idx names its
    initial value in segment 1 (mutable_data_segments[0]); equal initial values share one; the
    write-back is exir's copy_ (self, src, non_blocking, self) after the graph."""
    p = fb.Program.GetRootAs(counters, 0)
    assert p.MutableDataSegmentsLength() == 1 and p.SegmentsLength() == 2
    mutable = p.MutableDataSegments(0)
    assert mutable.SegmentIndex() == 1
    offsets = list(mutable.OffsetsAsNumpy())
    assert offsets[0] == 0 and len(offsets) == 3  # reserved, 5.0s (steps and decay), acc
    base = int.from_bytes(counters[24:32], "little")
    segment = counters[base + p.Segments(1).Offset():][:p.Segments(1).Size()]
    state = [t for t in _tensors(counters) if t.AllocationInfo() is not None and t.DataBufferIdx()]
    assert sorted(t.DataBufferIdx() for t in state) == [1, 1, 2]
    initial = {bytes(segment[offsets[t.DataBufferIdx()]:][:8]) for t in state}
    assert initial == {np.full(2, 5.0, np.float32).tobytes(), np.array([1.0, -2.0], np.float32).tobytes()}
    constants = [t for t in _tensors(counters) if t.AllocationInfo() is None and t.DataBufferIdx()]
    assert len(constants) == 1  # the bias, read only: a constant
    ops = _operators(counters)
    assert [name for name, _ in ops[-3:]] == ["aten::copy_"] * 3
    assert all(args[0] == args[3] and len(args) == 4 for _, args in ops[-3:])


def test_mutable_buffers_are_never_shared_in_the_arena(tmp_path, counters):
    from pt2x.converters.aten.graph import open_program
    from pt2x.converters.pte import memory_plan
    from pt2x.converters.pte.converter import plan_program

    path = _save(tmp_path, Counters(), (torch.randn(2),), "counters")
    view, keep = open_program(path)
    plan = plan_program(view, {})
    memory = memory_plan.plan_memory(plan)
    span = memory_plan.lifetimes(plan)
    assert len(plan.state) == 3
    for s in plan.state:
        assert span[s] == (-1, len(plan.calls))
        o = memory.offsets[s]
        others = [t for t in span if t is not s and memory.offsets[t] < o + s.nbytes and o < memory.offsets[t] + t.nbytes]
        assert others == []
    del keep


def test_validate_reads_initial_values(counters, tmp_path, capsys):
    from pt2x.tools.cli import main

    path = tmp_path / "counters.pte"
    path.write_bytes(counters)
    assert main(["validate", str(path), "--target", "executorch==1.5"]) == 0
    assert "valid for executorch==1.5" in capsys.readouterr().out


class Lifted(torch.nn.Module):
    """A plain tensor attribute written in place: torch.export lifts it as a constant (as it lifts
    transformers' StaticCache), and it is state all the same."""

    def __init__(self):
        super().__init__()
        self.counter = torch.zeros(3)

    def forward(self, x):
        self.counter.add_(x)
        return x * 2 + self.counter


def test_a_lifted_tensor_constant_written_in_place_is_state(tmp_path):
    path = _save(tmp_path, Lifted(), (torch.ones(3),), "lifted")
    g = torch.Generator().manual_seed(0)
    _check_steps(convert_torch_free("to_pte", path), Lifted(), [(torch.randn(3, generator=g),) for _ in range(STEPS)],
                 "lifted")


class RunningSum(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4, 4)
        self.register_buffer("total", torch.zeros(1, 4))

    def forward(self, x):
        y = self.fc(x)
        self.total.add_(y.sum(dim=0, keepdim=True))
        return y + self.total


def test_state_across_dynamic_batches(tmp_path):
    torch.manual_seed(0)
    m = RunningSum().eval()
    path = _save(tmp_path, m, (torch.randn(3, 4),), "running",
                 dynamic_shapes={"x": {0: torch.export.Dim("batch", max=8)}})
    eager = RunningSum().eval()
    eager.load_state_dict(m.state_dict())
    g = torch.Generator().manual_seed(1)
    inputs = [(torch.randn(b, 4, generator=g),) for b in (3, 5, 1, 8)]
    _check_steps(convert_torch_free("to_pte", path), eager, inputs, "running sum")


class Ring(torch.nn.Module):
    """A buffer written through views of it (slice assignment): found while lowering."""

    def __init__(self):
        super().__init__()
        self.register_buffer("hist", torch.arange(6.0).reshape(1, 6))

    def forward(self, x):
        old = self.hist * 1.0
        self.hist[:, :-1] = self.hist[:, 1:].clone()
        self.hist[:, -1:] = x
        return old + self.hist.sum(dim=1, keepdim=True)


@pytest.mark.parametrize("decompose", [False, True], ids=["in_place", "signature"])
def test_a_buffer_written_through_views(tmp_path, decompose):
    path = _save(tmp_path, Ring(), (torch.randn(1, 1),), "ring", decompose)
    g = torch.Generator().manual_seed(0)
    _check_steps(convert_torch_free("to_pte", path), Ring(), [(torch.randn(1, 1, generator=g),) for _ in range(STEPS)],
                 "ring")


# ------------------------------------------------------------------ inputs and parameters


class WritesInputs(torch.nn.Module):
    def forward(self, x, y):
        y.mul_(2)
        x.add_(1)
        return x * y


@pytest.mark.parametrize("decompose", [False, True], ids=["in_place", "signature"])
def test_written_inputs_come_back_first(tmp_path, decompose):
    """As exir emits a user input mutation: copy_ into the input, the input returned before the
    user outputs (in input order); eager's written x and y are compared with them."""
    path = _save(tmp_path, WritesInputs(), (torch.randn(3), torch.randn(3)), "inputs", decompose)
    data = convert_torch_free("to_pte", path)
    _program, method = _method(data)
    g = torch.Generator().manual_seed(0)
    for step in range(3):
        x, y = torch.randn(3, generator=g), torch.randn(3, generator=g)
        got = method.execute([x.clone(), y.clone()])
        out = WritesInputs()(x, y)  # writes x and y
        assert len(got) == 3
        for i, (g_, w) in enumerate(zip(got, [x, y, out])):
            assert_close(g_.numpy(), w.numpy(), "float32", what=f"step {step} output {i}")


class WritesParameter(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.zeros(3), requires_grad=False)

    def forward(self, x):
        self.w.add_(x)
        return x * self.w


@pytest.mark.parametrize("decompose", [False, True], ids=["in_place", "signature"])
def test_a_written_parameter_is_refused(tmp_path, decompose):
    path = _save(tmp_path, WritesParameter(), (torch.randn(3),), "param", decompose)
    with pytest.raises(ConversionError, match="writes parameter 'w'.*ExecuTorch keeps parameters constant"):
        convert_torch_free("to_pte", path)


class PositionMath(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("k", torch.zeros(4, 2))

    def forward(self, v, pos):
        self.k.index_copy_(0, pos, v)
        return self.k + pos[:, None]


def test_an_index_input_also_read_as_a_number(tmp_path):
    """The int64 position indexes the write and is added to the float result (int64 + float32)."""
    path = _save(tmp_path, PositionMath(), (torch.randn(1, 2), torch.tensor([1])), "posmath")
    torch.manual_seed(0)
    steps = [(torch.randn(1, 2), torch.tensor([p])) for p in (0, 3, 1)]
    _check_steps(convert_torch_free("to_pte", path), PositionMath(), steps, "posmath")


# ------------------------------------------------------------------------------ KV caches


class CacheWrite(torch.nn.Module):
    """tests/converters/test_cache_writes.py's single writes into a [1, 2, 6, 4] cache."""

    def __init__(self, mode):
        super().__init__()
        self.mode = mode
        self.register_buffer("k", torch.zeros(1, 2, 6, 4))

    def forward(self, v, pos):
        if self.mode == "index_copy_":
            self.k.index_copy_(2, pos, v)
        elif self.mode == "setitem":
            self.k[:, :, pos] = v
        else:
            self.k.index_add_(2, pos, v, alpha=0.5)
        return self.k * 2.0


@pytest.mark.parametrize("decompose", [False, True], ids=["exported", "decomposed"])
@pytest.mark.parametrize("mode", ["index_copy_", "setitem", "index_add_"])
def test_cache_write_over_decode_steps(tmp_path, mode, decompose):
    path = _save(tmp_path, CacheWrite(mode), (torch.randn(1, 2, 1, 4), torch.tensor([3])), mode, decompose)
    g = torch.Generator().manual_seed(0)
    positions = [0, 1, 2, 1, 5] if mode == "index_add_" else [0, 1, 2, 3, 5]  # index_add_ adds twice at 1
    inputs = [(torch.randn(1, 2, 1, 4, generator=g), torch.tensor([p])) for p in positions]
    _check_steps(convert_torch_free("to_pte", path), CacheWrite(mode), inputs, mode)


@pytest.mark.parametrize("write", ["index_copy_", "setitem"])
def test_decoder_layer_with_a_kv_cache_matches_eager_step_by_step(tmp_path, write):
    torch.manual_seed(0)
    m = pte_zoo.KVDecoderLayer(write).eval()
    path = _save(tmp_path, m, (torch.randn(2, 1, 32), torch.tensor([0])), f"decoder_{write}")
    data = convert_torch_free("to_pte", path)
    eager = pte_zoo.KVDecoderLayer(write).eval()
    eager.load_state_dict(m.state_dict())
    g = torch.Generator().manual_seed(1)
    steps = [(torch.randn(2, 1, 32, generator=g), torch.tensor([s])) for s in range(6)]
    _check_steps(data, eager, steps, f"decoder {write}")
    assert ("aten::index_put.out" in {name for name, _ in _operators(data)})


class LinearWithCounter(torch.nn.Module):
    """A weight that goes to the .ptd and a buffer written each call (its initial value in the .pte)."""

    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4, 4)
        self.register_buffer("acc", torch.ones(4))

    def forward(self, x):
        self.acc.add_(x.sum(0))
        return self.fc(x) * self.acc


def test_state_beside_external_weights(tmp_path):
    from executorch.runtime import Runtime

    torch.manual_seed(0)
    m = LinearWithCounter().eval()
    path = _save(tmp_path, LinearWithCounter().eval().requires_grad_(False), (torch.randn(2, 4),), "counter_ext")
    m.load_state_dict(torch.export.load(path).state_dict)
    dst = str(tmp_path / "counter_ext.pte")
    assert convert_torch_free("to_pte", path, dst, external_weights=True) is None
    program = Runtime.get().load_program(dst, data_path=dst[:-4] + ".ptd")
    method = program.load_method("forward")
    for step in range(3):
        x = torch.randn(2, 4)
        (got,) = method.execute([x])
        with torch.no_grad():
            assert_close(got.numpy(), m(x).numpy(), "float32", what=f"step {step}")
