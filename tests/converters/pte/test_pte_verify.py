"""``pt2x verify M.pt2 M.pte [--data M.ptd] [--locate]`` and ``pt2x convert --to pte --verify``: pt2x's
.pte (converted torch-free) run in ExecuTorch's runtime against torch eager, equal on the
archive's sample inputs and on drawn inputs of two batch sizes; planted faults (a weight scaled
in the .pte or in its .ptd, an operator renamed to another kernel) give exit 1, and ``--locate``
names the ATen node, its module path and the instruction; a file that is not pt2x's conversion
of the program is run but not located (a note says why); a missing .ptd, a corrupt .pte, or no
executorch end in one line (exit 2)."""

from __future__ import annotations

import json

import pytest
import torch

pytest.importorskip("executorch.runtime", reason="executorch is not installed (pip install executorch==1.5.1): "
                                                 "pt2x verify runs a .pte in its runtime")

import planted_faults as pf  # noqa: E402
from pt2x.tools.cli import main  # noqa: E402
from torchfree import convert_torch_free, run_torch_free  # noqa: E402
from verify_block import Block  # noqa: E402


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """The Block program (dynamic batch up to 6; with and without sample inputs) and pt2x's .pte of
    it, weights inside and in a .ptd, converted torch-free."""
    d = tmp_path_factory.mktemp("verify_pte")
    torch.manual_seed(0)
    module = Block().eval()
    ep = torch.export.export(module, (torch.randn(2, 3, 8, 8),),
                             dynamic_shapes=({0: torch.export.Dim("batch", min=1, max=6)},))
    out = {"dir": d, "pt2": str(d / "block.pt2"), "bare": str(d / "bare.pt2"), "pte": str(d / "block.pte"),
           "ext": str(d / "ext.pte"), "module": module}
    torch.export.save(ep, out["pt2"])
    ep._example_inputs = None
    torch.export.save(ep, out["bare"])
    # portable (the faults below are planted at a weight's own bytes, which the delegate folds)
    assert convert_torch_free("to_pte", out["pt2"], out["pte"], delegate="none") is None
    assert convert_torch_free("to_pte", out["pt2"], out["ext"], external_weights=True, delegate="none") is None
    out["delegated"] = str(d / "delegated.pte")
    assert convert_torch_free("to_pte", out["pt2"], out["delegated"]) is None
    return out


def _json(capsys) -> dict:
    return json.loads(capsys.readouterr().out)


def _one_error_line(capsys) -> str:
    err = capsys.readouterr().err
    assert "Traceback" not in err, err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    return lines[0]


# ------------------------------------------------------------------------------- good files

def test_drawn_inputs_at_two_batch_sizes(files, capsys):
    """Each run of verify on a .pte starts ExecuTorch's runtime in a child (importing torch and
    exir: seconds), so the tests share runs: this one checks the report, equality at two drawn
    batch sizes, and --locate comparing every program value."""
    assert main(["verify", files["bare"], files["pte"], "--json", "--locate"]) == 0
    r = _json(capsys)
    assert r["ok"] and r["target"] == "pte" and r["runtime"] == "ExecuTorch (executorch.runtime)"
    assert r["reference"] == "torch eager" and r["matched_by"] == "order"
    batches = [s["shapes"][0][0] for s in r["inputs"]["sets"]]
    assert len(batches) == 2 and batches[0] != batches[1] and all(1 <= b <= 6 for b in batches)
    assert [o["ok"] for o in r["outputs"]] == [True, True] and max(o["max_abs"] for o in r["outputs"]) < 1e-5
    assert r["divergence"] is None and r["compared_values"] >= 2 * 7  # every program value, both sets


def test_convert_verify(files, tmp_path, capsys):
    """The written .pte and its .ptd (the one beside it) against the program's sample inputs."""
    out = str(tmp_path / "m.pte")
    assert main(["convert", files["pt2"], "--to", "pte", "--external-weights", "-o", out, "--verify"]) == 0
    text = capsys.readouterr().out
    assert f"wrote {out[:-4]}.ptd" in text and "ExecuTorch (executorch.runtime)" in text
    assert "result: equal within tolerance" in text


def test_delegated_file_compared_at_its_partitions(files, capsys):
    """An XNNPACK-delegated .pte: --locate plans and delegates the program again as to_pte did, and
    compares the values the runtime returns (the partitions' outputs); a filter scaled inside the
    delegate's constants is found and located at the partition."""
    assert main(["verify", files["bare"], files["delegated"], "--json", "--locate"]) == 0
    r = _json(capsys)
    assert r["ok"] and r["divergence"] is None and r["compared_values"] >= 2 and not r["notes"]
    w = files["module"].conv1.weight.detach().numpy()
    faulty = files["dir"] / "delegated_fault.pte"
    faulty.write_bytes(pf.scale_pte_weight(open(files["delegated"], "rb").read(), w.transpose(0, 2, 3, 1), 1.5))  # OHWI
    dv = _located(capsys, [files["pt2"], str(faulty)])
    assert dv["converted_op"] == "XnnpackBackend delegate" and dv["converted_node"].startswith("#")


# ------------------------------------------------------------------------------ planted faults

def _located(capsys, argv) -> dict:
    assert main(["verify", *argv, "--locate", "--json"]) == 1
    r = _json(capsys)
    assert not r["ok"] and not r["outputs"][0]["ok"]
    return r["divergence"]


def test_weight_fault_located(files, capsys):
    faulty = files["dir"] / "conv_fault.pte"
    faulty.write_bytes(pf.scale_pte_weight(open(files["pte"], "rb").read(),
                                           files["module"].conv2.weight.detach().numpy(), 1.5))
    dv = _located(capsys, [files["pt2"], str(faulty)])
    assert (dv["aten_node"], dv["aten_target"], dv["module_path"]) == ("conv2d_1", "torch.ops.aten.conv2d.default", "conv2")
    assert (dv["converted_op"], dv["tensor"]) == ("aten::convolution.out", "conv2d_1")
    assert dv["converted_node"].startswith("#")


def test_operator_fault_located(files, capsys):
    faulty = files["dir"] / "op_fault.pte"
    faulty.write_bytes(pf.rename_pte_operator(open(files["pte"], "rb").read(), "aten::relu", "aten::tanh"))
    assert main(["verify", files["pt2"], str(faulty), "--locate"]) == 1  # the text report
    text = capsys.readouterr().out
    assert "ATen node:      relu = torch.ops.aten.relu.default" in text and "(aten::tanh.out), tensor relu" in text
    assert "result: DIFFERENT" in text


def test_fault_in_the_data_file_located(files, capsys):
    """The weight scaled in the .ptd, given with --data (the .pte beside it unchanged)."""
    ptd = open(files["ext"][:-4] + ".ptd", "rb").read()
    faulty = files["dir"] / "faulty.ptd"
    faulty.write_bytes(pf.scale_pte_weight(ptd, files["module"].conv1.weight.detach().numpy(), 0.5))
    dv = _located(capsys, [files["pt2"], files["ext"], "--data", str(faulty)])
    assert (dv["aten_node"], dv["module_path"], dv["converted_op"]) == ("conv2d", "conv1", "aten::convolution.out")


def test_file_of_another_tool_is_run_not_located(files, tmp_path, capsys):
    pytest.importorskip("executorch.exir", reason="executorch's exir is not installed: no file of another tool")
    from executorch.exir import to_edge

    ep = torch.export.load(files["pt2"])
    path = tmp_path / "exir.pte"
    path.write_bytes(to_edge(ep).to_executorch().buffer)
    assert main(["verify", files["pt2"], str(path), "--locate", "--json"]) == 0
    r = _json(capsys)
    assert r["ok"] and r["compared_values"] == 0
    assert any("--locate compared no intermediate value: the file is not pt2x's conversion" in n for n in r["notes"])


# ------------------------------------------------------------------------------ refusals

def test_missing_data_file_is_one_line(files, tmp_path, capsys):
    lone = tmp_path / "lone.pte"
    lone.write_bytes(open(files["ext"], "rb").read())
    assert main(["verify", files["pt2"], str(lone)]) == 2
    line = _one_error_line(capsys)
    assert "lone.pte" in line and "lone.ptd" in line and "conv1.weight" in line


def test_corrupt_pte_is_one_line(files, tmp_path, capsys):
    bad = tmp_path / "bad.pte"
    bad.write_bytes(open(files["pte"], "rb").read()[:300])
    assert main(["verify", files["pt2"], str(bad)]) == 2
    assert str(bad) in _one_error_line(capsys)


def test_without_executorch_the_extra_is_named(files):
    r = run_torch_free("""
        import sys
        sys.modules['executorch'] = None  # as if it were not installed
        from pt2x.tools.cli import main
        sys.exit(main(sys.argv[1:]))
    """, "verify", files["pt2"], files["pte"], "--reference", "onnx")
    assert r.returncode == 2 and "pip install 'pt2x[verify-pte]'" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr
