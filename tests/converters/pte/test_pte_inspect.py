"""``pt2x inspect``/``validate`` of .pte files (converters/pte/reader.py, releases.py): files pt2x
and exir write, ``--json`` keys, a kernel the release lacks named, torch-free runs, and hostile
files (truncated, wrong identifier, out-of-range index, random byte flips) as Pt2Errors naming
the field."""

from __future__ import annotations

import json
import random
import struct

import pytest

import pte_zoo
from pt2x.converters.pte.flatbuffer_checks import Checked
from pt2x.converters.pte.reader import read_pte, _PLAN_SLOT
from pt2x.converters.pte import schema_generated as fb
from pt2x.serde.errors import Pt2Error, Pt2FormatError
from pt2x.tools.cli import main
from torchfree import run_cli_torch_free


@pytest.fixture(scope="module")
def mlp(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("pte") / "mlp.pte"
    path.write_bytes(pte_zoo.converted("mlp", **pte_zoo.PORTABLE))
    return str(path)


def _cli(capsys, *argv) -> tuple[int, str, str]:
    rc = main(list(argv))
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_inspect_text_and_json(mlp, capsys):
    rc, out, _ = _cli(capsys, "inspect", mlp)
    assert rc == 0 and "schema version 0" in out and "aten::addmm.out" in out and "FLOAT[2, 8] STATIC" in out
    rc, out, _ = _cli(capsys, "inspect", mlp, "--json")
    s = json.loads(out)
    assert rc == 0 and s["kind"] == "executorch-program" and s["schema_version"] == 0
    assert set(s) >= {"file", "file_identifier", "extended_header", "execution_plans", "segments",
                      "constant_buffers", "constant_bytes"}
    plan = s["execution_plans"][0]
    assert plan["name"] == "forward" and plan["operators"] == {"aten::permute_copy.out": 2, "aten::addmm.out": 2,
                                                               "aten::relu.out": 1}
    assert plan["inputs"][0]["dtype"] == "FLOAT" and plan["inputs"][0]["sizes"] == [2, 8]
    assert plan["inputs"][0]["dynamic"] is False and plan["delegates"] == []
    assert plan["non_const_buffer_sizes"][0] == 0 and len(s["constant_buffers"]) == 4
    assert s["constant_bytes"] == s["segments"][0]["size"]


def test_dynamic_bound_inputs():
    s = read_pte(pte_zoo.converted("mlp_dynamic", **pte_zoo.PORTABLE))
    x = s["execution_plans"][0]["inputs"][0]
    assert x["dynamic"] and x["shape_dynamism"] == "DYNAMIC_BOUND" and x["sizes"] == [64, 8]


def test_validate_target(mlp, capsys):
    assert _cli(capsys, "validate", mlp)[0] == 0
    rc, out, _ = _cli(capsys, "validate", mlp, "--target", "executorch==1.5")
    assert rc == 0 and "valid for executorch==1.5" in out
    rc, out, _ = _cli(capsys, "validate", mlp, "--target", "executorch==1.5", "--json")
    r = json.loads(out)
    assert rc == 0 and r["valid"] and r["readable"] and r["kind"] == "executorch-program" and r["findings"] == []


def test_unknown_target_lists_the_known(mlp, capsys):
    rc, _, err = _cli(capsys, "validate", mlp, "--target", "executorch==0.9")
    assert rc == 2 and "executorch==1.5" in err and "Traceback" not in err


def test_missing_kernel_named(mlp, tmp_path, capsys):
    data = open(mlp, "rb").read()
    assert data.count(b"aten::relu") == 1
    bad = tmp_path / "bad.pte"
    bad.write_bytes(data.replace(b"aten::relu", b"aten::relX"))
    assert _cli(capsys, "validate", str(bad))[0] == 0  # structurally fine
    rc, out, _ = _cli(capsys, "validate", str(bad), "--target", "executorch==1.5")
    assert rc == 1 and "aten::relX.out" in out and "[missing-kernel]" in out and "INVALID" in out


def test_torch_free(mlp):
    r = run_cli_torch_free("inspect", mlp, "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["execution_plans"][0]["name"] == "forward"
    r = run_cli_torch_free("validate", mlp, "--target", "executorch==1.5")
    assert r.returncode == 0 and "valid" in r.stdout, r.stderr


def _refused(data: bytes, path_part: str) -> Pt2FormatError:
    with pytest.raises(Pt2FormatError) as e:
        read_pte(data)
    assert path_part in (e.value.path or ""), str(e.value)
    return e.value


def test_hostile_files(mlp, tmp_path, capsys):
    data = open(mlp, "rb").read()
    _refused(data[:6], "file")
    _refused(data[:4] + b"XX12" + data[8:], "file_identifier")
    _refused(data[:1000], "extended_header.program_size")  # the header says the flatbuffer is longer
    # an input index past the values: the inputs vector's first entry rewritten
    prog = fb.Program.GetRootAs(data, 0)
    plan = prog.ExecutionPlan(0)
    c = Checked(data, len(data))
    at = c.target(plan._tab, _PLAN_SLOT["inputs"], "inputs") + 4
    bad = bytearray(data)
    struct.pack_into("<i", bad, at, 9999)
    e = _refused(bytes(bad), "execution_plan[0].inputs[0]")
    assert "9999" in str(e)
    # the CLI: one line, exit 2, no traceback
    f = tmp_path / "bad.pte"
    f.write_bytes(bytes(bad))
    for cmd in ("inspect", "validate"):
        rc, out, err = _cli(capsys, cmd, str(f))
        assert rc == 2 and "execution_plan[0].inputs[0]" in err and "Traceback" not in err


def test_random_byte_flips_are_pt2_errors():
    data = pte_zoo.converted("cnn", **pte_zoo.PORTABLE)
    rng = random.Random(0)
    end = struct.unpack_from("<Q", data, 16)[0]  # the flatbuffer; the weights are not interpreted
    for _ in range(300):
        bad = bytearray(data)
        for _ in range(rng.randint(1, 4)):
            bad[rng.randrange(end)] = rng.randrange(256)
        try:
            read_pte(bytes(bad))
        except Pt2Error:
            pass


def test_exir_written_file(tmp_path, capsys):
    pytest.importorskip("executorch.exir", reason="executorch is not installed: no exir-written file to read")
    import torch
    from executorch.exir import to_edge

    ep = torch.export.export(pte_zoo.module("cnn"), (torch.randn(2, 3, 16, 16),))
    path = tmp_path / "exir.pte"
    path.write_bytes(to_edge(ep).to_executorch().buffer)
    rc, out, _ = _cli(capsys, "inspect", str(path), "--json")
    s = json.loads(out)
    assert rc == 0 and "aten::convolution.out" in s["execution_plans"][0]["operators"]
    rc, out, _ = _cli(capsys, "validate", str(path), "--target", "executorch==1.5")
    assert rc == 0, out


def _cond_at_the_end():
    """A cond that ends the program: exir's last jump goes to the chain's end (its length)."""
    import torch

    class CondAtTheEnd(torch.nn.Module):
        def forward(self, x):
            return torch.cond(x.shape[0] > 4, lambda x: x.sin(), lambda x: x.cos(), (x,))

    return CondAtTheEnd()


def _jumps(data: bytes) -> tuple[list, int]:
    """Each JumpFalseCall table of the first chain, and the chain's length."""
    chain = fb.Program.GetRootAs(data, 0).ExecutionPlan(0).Chains(0)
    out = []
    for i in range(chain.InstructionsLength()):
        ins = chain.Instructions(i)
        if ins.InstrArgsType() == fb.InstructionArguments.JumpFalseCall:
            call = fb.JumpFalseCall()
            call.Init(ins.InstrArgs().Bytes, ins.InstrArgs().Pos)
            out.append(call)
    return out, chain.InstructionsLength()


def test_exir_written_cond(tmp_path, capsys):
    """Jumps and moves counted; a jump to the chain's end is valid (exir writes one), past it is not."""
    pytest.importorskip("executorch.exir", reason="executorch is not installed: no exir-written file to read")
    import torch
    from executorch.exir import to_edge

    ep = torch.export.export(_cond_at_the_end(), (torch.randn(3, 4),),
                             dynamic_shapes={"x": {0: torch.export.Dim("b", max=16)}})
    data = to_edge(ep).to_executorch().buffer
    path = tmp_path / "cond.pte"
    path.write_bytes(data)
    rc, out, _ = _cli(capsys, "inspect", str(path))
    assert rc == 0 and "8 instructions (4 kernel calls, 2 moves, 2 jumps)" in out, out
    plan = read_pte(data)["execution_plans"][0]
    assert plan["instructions"] == {"KernelCall": 4, "DelegateCall": 0, "MoveCall": 2, "JumpFalseCall": 2,
                                    "FreeCall": 0}
    assert _cli(capsys, "validate", str(path), "--target", "executorch==1.5")[0] == 0
    jumps, n = _jumps(data)
    assert jumps[-1].DestinationInstruction() == n  # past the false branch: the end
    bad = bytearray(data)
    struct.pack_into("<i", bad, jumps[-1]._tab.Pos + jumps[-1]._tab.Offset(6), n + 1)
    e = _refused(bytes(bad), "instructions[5].instr_args.destination_instruction")
    assert f"index {n + 1} is out of range" in str(e)


def test_exir_delegated_file(tmp_path, capsys):
    pytest.importorskip("executorch.exir", reason="executorch is not installed: no exir-written file to read")
    xnn = pytest.importorskip("executorch.backends.xnnpack.partition.xnnpack_partitioner",
                              reason="executorch's XNNPACK partitioner is not installed")
    import torch
    from executorch.exir import to_edge_transform_and_lower

    ep = torch.export.export(pte_zoo.module("mlp"), (torch.randn(2, 8),))
    path = tmp_path / "xnn.pte"
    path.write_bytes(to_edge_transform_and_lower(ep, partitioner=[xnn.XnnpackPartitioner()]).to_executorch().buffer)
    rc, out, _ = _cli(capsys, "inspect", str(path), "--json")
    plan = json.loads(out)["execution_plans"][0]
    assert rc == 0 and plan["delegates"][0]["id"] == "XnnpackBackend" and plan["delegate_calls"] >= 1
    rc, out, _ = _cli(capsys, "validate", str(path), "--target", "executorch==1.5")
    assert rc == 0 and "[delegate]" in out


def test_schema_version_past_the_release(mlp, capsys, monkeypatch):
    """A release that reads an older schema than the file's (pt2x and exir write 0, which 1.5 reads:
    the release's ceiling is lowered here to see the finding)."""
    import dataclasses

    from pt2x.converters.pte import releases

    monkeypatch.setitem(releases.RELEASES, "1.5", dataclasses.replace(releases.RELEASES["1.5"], max_schema_version=-1))
    rc, out, _ = _cli(capsys, "validate", mlp, "--target", "executorch==1.5", "--json")
    r = json.loads(out)
    assert rc == 1 and [f["code"] for f in r["findings"]] == ["schema-version"]


def test_targets_of_the_other_format(mlp, capsys):
    rc, _, err = _cli(capsys, "validate", mlp, "--target", "torch==2.10")
    assert rc == 2 and "executorch==X.Y" in err
    rc, _, err = _cli(capsys, "validate", pte_zoo.saved("mlp"), "--target", "executorch==1.5")
    assert rc == 2 and "validates .pte files" in err
