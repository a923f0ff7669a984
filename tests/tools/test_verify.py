"""``pt2x verify``, ``pt2x convert --verify`` and ``pt2x.verify``: converted files run in their
real runtimes (ONNX Runtime, LiteRT with XNNPACK) against torch eager or, where ``import torch``
fails, pt2x's own ONNX; planted faults (one Conv weight scaled, one Add reading its first operand
twice) give exit 1 and ``--locate`` names the ATen node, its module path and the converted node;
a file ``torch.onnx.export`` wrote is matched by names; bad inputs and corrupt files end in one
line (exit 2), never a traceback."""

from __future__ import annotations

import json

import numpy as np
import onnx
import pytest
import torch

import planted_faults as pf
import zoo
from pt2x.tools.cli import main
from torchfree import run_torch_free
from verify_block import Block


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """The Block program (with and without sample inputs), pt2x's .onnx and .tflite of it, and
    the .onnx torch.onnx.export(dynamo=True) writes."""
    from pt2x.converters import to_onnx, to_tflite

    d = tmp_path_factory.mktemp("verify")
    torch.manual_seed(0)
    ep = torch.export.export(Block().eval(), (torch.randn(2, 3, 8, 8),),
                             dynamic_shapes=({0: torch.export.Dim("batch", min=1, max=6)},))
    out = {"pt2": str(d / "block.pt2"), "bare": str(d / "bare.pt2"), "onnx": str(d / "block.onnx"),
           "tflite": str(d / "block.tflite"), "torch_onnx": str(d / "torch.onnx"), "dir": d}
    torch.export.save(ep, out["pt2"])
    ep._example_inputs = None
    torch.export.save(ep, out["bare"])
    to_onnx(out["pt2"], out["onnx"])
    to_tflite(out["pt2"], out["tflite"])
    torch.onnx.export(ep, dynamo=True, verbose=False).save(out["torch_onnx"])
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

@pytest.mark.parametrize("target", ["onnx", "tflite"])
def test_convert_verify_with_torch(files, tmp_path, capsys, target):
    out = str(tmp_path / f"m.{target}")
    assert main(["convert", files["pt2"], "--to", target, "-o", out, "--verify"]) == 0
    text = capsys.readouterr().out
    assert "against torch eager" in text and "result: equal within tolerance" in text
    assert ("LiteRT (XNNPACK)" if target == "tflite" else "ONNX Runtime") in text


def test_convert_verify_torch_free(tmp_path):
    """Both targets where ``import torch`` fails (one process): pt2x's ONNX is the reference."""
    runs = []
    for name, target in (("mlp_dynamic", "onnx"), ("dynamic_reshape", "tflite")):
        path = str(tmp_path / f"{name}.pt2")
        torch.export.save(zoo.exported(name), path)
        runs.append(["convert", path, "--to", target, "-o", str(tmp_path / f"{name}.{target}"), "--verify"])
    r = run_torch_free("""
        import sys, json
        from pt2x.tools.cli import main
        for argv in json.loads(sys.argv[1]):
            print("exit", main(argv), "----", flush=True)
    """, json.dumps(runs))
    assert r.returncode == 0, r.stderr
    onnx_out, tflite_out = r.stdout.split("----")[:2]
    for out, reference in ((onnx_out, "onnx ReferenceEvaluator on pt2x's ONNX"),
                           (tflite_out, "ONNX Runtime on pt2x's ONNX")):
        assert "exit 0" in out and f"against {reference}" in out, r.stdout + r.stderr
        assert "result: equal within tolerance" in out and "inputs: the archive's sample inputs" in out


@pytest.mark.parametrize("name", ["dict_inputs", "buffer_mutation", "multi_dtype", "tied_weights"])
def test_zoo_files_verify(tmp_path, name):
    """Files pt2x writes for the parity suites' programs verify equal (integer inputs drawn in
    range: tied_weights' token ids index its embedding)."""
    from pt2x import verify
    from pt2x.converters import to_onnx, to_tflite

    path = str(tmp_path / f"{name}.pt2")
    ep = zoo._export(name, False)  # a fresh program, not the session's cached one, which stays as it is
    ep._example_inputs = None  # the inputs are drawn from the signature
    torch.export.save(ep, path)
    for target, convert in (("onnx", to_onnx), ("tflite", to_tflite)):
        out = str(tmp_path / f"m.{target}")
        convert(path, out)
        r = verify(path, out)
        assert r.ok, r.table()
        assert r.inputs["source"] == "drawn from the signature" and r.inputs["seed"] == 0


def test_nhwc_io_file(tmp_path, capsys):
    """A .tflite written with --nhwc-io (4-D input and output channels-last) is fed and compared
    in its own layout."""
    path = str(tmp_path / "conv_bn_pool.pt2")
    torch.export.save(zoo.exported("conv_bn_pool"), path)
    out = str(tmp_path / "m.tflite")
    assert main(["convert", path, "--to", "tflite", "--nhwc-io", "-o", out, "--verify"]) == 0
    text = capsys.readouterr().out
    assert "result: equal within tolerance" in text and "channels-last in the file" in text


def test_drawn_inputs_two_sizes_inside_the_range(files, capsys):
    assert main(["verify", files["bare"], files["onnx"], "--json", "--seed", "7"]) == 0
    report = _json(capsys)
    assert report["inputs"]["source"] == "drawn from the signature" and report["inputs"]["seed"] == 7
    batches = [s["shapes"][0][0] for s in report["inputs"]["sets"]]
    assert len(batches) == 2 and batches[0] == 2 and batches[1] != 2 and all(1 <= b <= 6 for b in batches)
    assert len(report["outputs"]) == 2 and all(o["ok"] for o in report["outputs"])


def test_json_schema(files, capsys):
    assert main(["verify", files["pt2"], files["tflite"], "--json", "--locate"]) == 0
    report = _json(capsys)
    assert set(report) == {"ok", "model", "converted", "target", "runtime", "reference", "inputs", "matched_by",
                           "tolerances", "outputs", "divergence", "compared_values", "values", "notes"}
    assert report["target"] == "tflite" and report["matched_by"] == "name" and report["divergence"] is None
    assert report["compared_values"] >= 3
    assert len(report["values"]) == report["compared_values"]  # one input set: each value once
    value = report["values"][0]
    assert set(value) == {"tensor", "aten_node", "converted_node", "converted_op", "computed_by", "ok", "max_abs",
                          "max_rel", "ratio", "tolerance", "note"}
    assert all(v["ok"] and 0 <= v["ratio"] <= 1 for v in report["values"])
    assert report["tolerances"]["float32"] == "rtol 0.01, atol 0.001 x max(1, max|ref|)"  # LiteRT: 10x the float tolerances
    out = report["outputs"][0]
    assert set(out) == {"set", "index", "name", "dtype", "shape", "max_abs", "max_rel", "tolerance", "mismatched",
                        "total", "ok", "note"}
    assert out["name"] == "linear" and out["shape"] == [2, 5] and out["max_abs"] < 1e-4


def test_user_inputs_npz(files, tmp_path, capsys):
    npz = str(tmp_path / "in.npz")
    x = np.random.default_rng(0).standard_normal((4, 3, 8, 8)).astype(np.float32)
    np.savez(npz, x=x)
    assert main(["verify", files["pt2"], files["onnx"], "--inputs", npz, "--json"]) == 0
    report = _json(capsys)
    assert report["inputs"]["sets"] == [{"label": "file", "shapes": [[4, 3, 8, 8]]}]


def test_file_from_torch_onnx_matched_by_names(files, capsys):
    assert main(["verify", files["pt2"], files["torch_onnx"], "--json", "--locate"]) == 0
    report = _json(capsys)
    assert report["ok"] and report["matched_by"] == "name" and report["compared_values"] >= 3


# ----------------------------------------------------------------------------- planted faults

def _located(capsys, argv) -> dict:
    assert main(["verify", *argv, "--locate", "--json"]) == 1
    report = _json(capsys)
    assert not report["ok"] and not report["outputs"][0]["ok"]
    return report["divergence"]


@pytest.mark.parametrize("reference", ["auto", "onnx"])
def test_onnx_planted_faults_located(files, capsys, reference):
    m = onnx.load(files["onnx"])
    conv = str(files["dir"] / "conv_fault.onnx")
    onnx.save(pf.scale_onnx_weight(m, "conv2.weight", 1.5), conv)
    dv = _located(capsys, [files["pt2"], conv, "--reference", reference])
    assert (dv["aten_node"], dv["aten_target"], dv["module_path"]) == ("conv2d_1", "torch.ops.aten.conv2d.default", "conv2")
    assert (dv["converted_op"], dv["tensor"]) == ("Conv", "conv2d_1")
    add = str(files["dir"] / "add_fault.onnx")
    onnx.save(pf.alias_onnx_operand(m, "add"), add)
    dv = _located(capsys, [files["pt2"], add, "--reference", reference])
    assert (dv["aten_node"], dv["aten_target"], dv["module_path"]) == ("add", "torch.ops.aten.add.Tensor", "")
    assert (dv["converted_op"], dv["tensor"]) == ("Add", "add")


def test_tflite_planted_faults_located(files, capsys):
    data = open(files["tflite"], "rb").read()
    faulty, conv_out = pf.scale_tflite_weight(data, "CONV_2D", 1, 1.5)
    path = files["dir"] / "conv_fault.tflite"
    path.write_bytes(faulty)
    dv = _located(capsys, [files["pt2"], str(path)])
    assert (dv["aten_node"], dv["module_path"], dv["tensor"]) == ("conv2d_1", "conv2", "conv2d_1")
    assert any("(CONV_2D)" in n and conv_out in n for n in dv["converted_nodes"]), dv["converted_nodes"]
    path = files["dir"] / "add_fault.tflite"
    path.write_bytes(pf.alias_tflite_operand(data, "add"))
    dv = _located(capsys, [files["pt2"], str(path), "--reference", "onnx"])
    assert (dv["aten_node"], dv["aten_target"], dv["converted_op"], dv["tensor"]) == (
        "add", "torch.ops.aten.add.Tensor", "ADD", "add")


def test_torch_onnx_planted_faults_located(files, capsys):
    m = onnx.load(files["torch_onnx"])
    conv = str(files["dir"] / "torch_conv_fault.onnx")
    onnx.save(pf.scale_onnx_weight(m, "conv2.weight", 1.5), conv)
    dv = _located(capsys, [files["pt2"], conv])
    assert (dv["aten_node"], dv["module_path"], dv["converted_op"]) == ("conv2d_1", "conv2", "Conv")
    # torch.onnx names the Add's value after its own decomposition (not the program's 'add'): the
    # first value matched by name that differs is downstream, and the Add is among the nodes listed
    add_node = next(n for n in m.graph.node if n.op_type == "Add")
    add = str(files["dir"] / "torch_add_fault.onnx")
    onnx.save(pf.alias_onnx_operand(m, add_node.output[0]), add)
    dv = _located(capsys, [files["pt2"], add])
    assert any(n.startswith(f"{add_node.name} (Add)") for n in dv["converted_nodes"]), dv


def test_text_report_names_the_node(files, capsys):
    conv = str(files["dir"] / "conv_fault_text.onnx")
    onnx.save(pf.scale_onnx_weight(onnx.load(files["onnx"]), "conv2.weight", 1.5), conv)
    assert main(["verify", files["pt2"], conv, "--locate"]) == 1
    text = capsys.readouterr().out
    assert "ATen node:      conv2d_1 = torch.ops.aten.conv2d.default" in text
    assert "module path:    conv2" in text and "result: DIFFERENT" in text


# ------------------------------------------------------------------------------ hostile input

@pytest.mark.parametrize("case,fragment", [
    ("shape", "at dim 1"),
    ("dtype", "dtype float64"),
    ("names", "the program's tensor inputs are ['x']"),
    ("range", "outside the range"),
    ("not_npz", "not a readable .npz"),
    ("pickle", "not a readable .npz"),
])
def test_bad_inputs_file_is_one_line(files, tmp_path, capsys, case, fragment):
    npz = str(tmp_path / "in.npz")
    good = np.zeros((2, 3, 8, 8), np.float32)
    if case == "shape":
        np.savez(npz, x=np.zeros((2, 4, 8, 8), np.float32))
    elif case == "dtype":
        np.savez(npz, x=good.astype(np.float64))
    elif case == "names":
        np.savez(npz, y=good)
    elif case == "range":
        np.savez(npz, x=np.zeros((9, 3, 8, 8), np.float32))
    elif case == "not_npz":
        open(npz, "wb").write(b"PK\x03\x04 not really a zip")
    else:
        np.savez(npz, x=np.array([object()], dtype=object))
    assert main(["verify", files["pt2"], files["onnx"], "--inputs", npz]) == 2
    assert fragment in _one_error_line(capsys)


@pytest.mark.parametrize("suffix,content", [
    (".onnx", b"\x08\x07\x12\x00garbage"),
    (".onnx", None),  # truncated
    (".tflite", b"\x1c\x00\x00\x00TFL3" + b"\xff" * 64),
    (".tflite", b""),
])
def test_corrupt_converted_file_is_one_line(files, tmp_path, capsys, suffix, content):
    path = tmp_path / f"bad{suffix}"
    path.write_bytes(content if content is not None else open(files["onnx"], "rb").read()[:200])
    assert main(["verify", files["pt2"], str(path)]) == 2
    line = _one_error_line(capsys)
    assert str(path) in line


def test_unsafe_sample_inputs_are_not_run(files, tmp_path, capsys):
    """Sample inputs whose pickle names a global outside the data-only allow-list are not used
    (and never run): inputs are drawn instead, and the report says why."""
    import io
    import zipfile

    marker = tmp_path / "ran"
    evil = tmp_path / "evil.pt2"
    with zipfile.ZipFile(files["pt2"]) as zin, zipfile.ZipFile(evil, "w") as zout:
        for info in zin.infolist():
            data = zin.read(info)
            if "/data/sample_inputs/" in info.filename:
                buf = io.BytesIO()
                with zipfile.ZipFile(buf, "w") as inner:
                    inner.writestr("archive/data.pkl", f"cos\nsystem\n(S'touch {marker}'\ntR.".encode())
                data = buf.getvalue()
            zout.writestr(info, data)
    assert main(["verify", str(evil), files["onnx"], "--json"]) == 0
    report = _json(capsys)
    assert report["inputs"]["source"].startswith("drawn from the signature (the archive's sample inputs were not used")
    assert "os.system" in report["inputs"]["source"] and not marker.exists()


def test_mismatched_io_is_one_line(files, tmp_path, capsys):
    """A converted file of another program: its inputs fit neither by name nor by order."""
    from pt2x.converters import to_onnx

    other = str(tmp_path / "other.pt2")
    torch.export.save(zoo.exported("dynamic_reshape"), other)
    out = str(tmp_path / "other.onnx")
    to_onnx(other, out)
    assert main(["verify", files["pt2"], out]) == 2
    assert "neither by name nor by order" in _one_error_line(capsys)


def test_verify_options_need_verify(files, tmp_path, capsys):
    assert main(["convert", files["pt2"], "--to", "onnx", "-o", str(tmp_path / "m.onnx"), "--seed", "3"]) == 2
    assert "only with --verify" in _one_error_line(capsys)


# ------------------------------------------------------------------------------ the tolerance table

def test_tolerances_per_dtype():
    from pt2x.verification.compare import compare, tolerance

    f32 = tolerance("float32")
    assert f32.text() == "rtol 0.001, atol 0.0001 x max(1, max|ref|)"
    assert tolerance("float32", "litert").text() == "rtol 0.01, atol 0.001 x max(1, max|ref|)"
    want = np.array([300.0, -2.0, 0.0, np.nan], np.float32)
    # the absolute part grows with the output's magnitude: 300 * 1e-4 = 0.03
    assert compare(want + np.array([0.02, 0, 0, 0], np.float32), want, f32).ok
    bad = compare(want + np.array([0, 0, 0.05, 0], np.float32), want, f32)
    assert not bad.ok and bad.mismatched == 1 and abs(bad.max_abs - 0.05) < 1e-6
    assert not compare(np.array([1.0, 2.0, np.nan], np.float32), np.array([1.0, 2.0, 3.0], np.float32), f32).ok
    # quantized values: one step, never two; other integers exactly
    q = np.array([10, -128, 127], np.int8)
    assert compare(q + np.array([1, 0, 0], np.int8), q, tolerance("int8")).ok
    assert not compare(q + np.array([2, 0, 0], np.int8), q, tolerance("int8")).ok
    assert not compare(np.array([1, 2], np.int64), np.array([1, 3], np.int64), tolerance("int64")).ok
    shape = compare(np.zeros((2, 3)), np.zeros((3, 2)), f32)
    assert not shape.ok and "shape [2, 3], reference [3, 2]" in shape.note


# ------------------------------------------------------------------------------ review findings (issue 33)

class MaskedScores(torch.nn.Module):
    """Attention-like scores with a causal mask filled with ``fill`` (torch.finfo(float32).min,
    -1e9): the output holds the fill beside values of magnitude ~1."""

    def __init__(self, fill: float):
        super().__init__()
        self.proj = torch.nn.Linear(6, 6)
        self.register_buffer("mask", torch.triu(torch.ones(6, 6, dtype=torch.bool), 1))
        self.fill = fill

    def forward(self, x):
        return self.proj(x).masked_fill(self.mask, self.fill)


@pytest.mark.parametrize("fill", [torch.finfo(torch.float32).min, -1e9], ids=["finfo_min", "minus_1e9"])
def test_mask_fill_values_do_not_widen_the_tolerance(tmp_path, capsys, fill):
    """A weight scaled by 1.5 in the converted file is found although the output also holds the
    mask fill (the fills are compared apart, relatively); the report says how the tolerance
    was computed and how many fill values were set apart."""
    from pt2x.converters import to_onnx

    torch.manual_seed(0)
    ep = torch.export.export(MaskedScores(fill).eval(), (torch.randn(2, 6, 6),))
    pt2, good, bad = str(tmp_path / "m.pt2"), str(tmp_path / "m.onnx"), str(tmp_path / "bad.onnx")
    torch.export.save(ep, pt2)
    m = to_onnx(pt2, good)
    weight = next(i.name for i in m.graph.initializer if "proj" in i.name and len(i.dims) == 2)
    onnx.save(pf.scale_onnx_weight(m, weight, 1.5), bad)
    assert main(["verify", pt2, good, "--json"]) == 0
    out = _json(capsys)["outputs"][0]
    assert "30 mask fills" in out["tolerance"] and "max|ref|" in out["tolerance"], out
    assert main(["verify", pt2, bad, "--json"]) == 1
    out = _json(capsys)["outputs"][0]
    assert not out["ok"] and out["mismatched"] > 0, out
    assert main(["verify", pt2, bad]) == 1
    text = capsys.readouterr().out
    assert "mask fills" in text and "DIFFERENT" in text


def test_the_magnitude_leaves_sentinels_out():
    from pt2x.verification.compare import compare, tolerance

    f32 = tolerance("float32")
    fill = np.finfo(np.float32).min
    want = np.array([fill, -1e9, 0.5, -2.0], np.float32)
    assert compare(want, want, f32).ok
    off = compare(want + np.array([0, 0, 0.5, 0], np.float32), want, f32)
    assert not off.ok and off.mismatched == 1 and "2 mask fills" in off.tolerance
    assert not compare(np.array([0.0, -1e9, 0.5, -2.0], np.float32), want, f32).ok  # a fill lost
    assert not compare(np.array([fill, fill, 0.5, -2.0], np.float32), want, f32).ok  # a fill changed
    f16 = tolerance("float16")
    h = np.array([np.finfo(np.float16).min, 0.25], np.float16)
    assert not compare(h + np.array([0, 0.1], np.float16), h, f16).ok


def _npy_header(shape, descr="<f4") -> bytes:
    text = f"{{'descr': '{descr}', 'fortran_order': False, 'shape': {tuple(shape)!r}, }}"
    text += " " * (63 - (10 + len(text)) % 64) + "\n"
    return b"\x93NUMPY\x01\x00" + len(text).to_bytes(2, "little") + text.encode()


def _bomb(path, member: str, header: bytes, zeros: int) -> None:
    """An .npz whose ``member`` is ``header`` then ``zeros`` zero bytes, deflated (1000x)."""
    import zipfile

    chunk = bytes(1 << 20)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z, z.open(member, "w", force_zip64=True) as f:
        f.write(header)
        for _ in range(zeros >> 20):
            f.write(chunk)


def _peak_bytes(argv) -> tuple[int, int]:
    import tracemalloc

    tracemalloc.start()
    try:
        code = main(argv)
        return code, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_an_npz_declaring_a_huge_array_is_refused_before_allocating(files, tmp_path, capsys):
    import zipfile

    npz = tmp_path / "huge.npz"
    with zipfile.ZipFile(npz, "w") as z:
        z.writestr("x.npy", _npy_header((2, 3, 100000, 100000)))
    assert npz.stat().st_size < 300
    assert main(["verify", files["bare"], files["onnx"], "--inputs", str(npz)]) == 2
    line = _one_error_line(capsys)
    assert "member 'x.npy'" in line and "'shape'" in line, line
    with zipfile.ZipFile(npz, "w") as z:  # a shape the program takes, its data missing
        z.writestr("x.npy", _npy_header((2, 3, 8, 8)))
    assert main(["verify", files["bare"], files["onnx"], "--inputs", str(npz)]) == 2
    line = _one_error_line(capsys)
    assert "member 'x.npy'" in line and "declares 1536 bytes of data; the member holds 0" in line, line


@pytest.mark.parametrize("member", ["y.npy", "x.npy"])
def test_a_deflate_bomb_is_not_inflated(files, tmp_path, capsys, member):
    """200 MB of zeros deflated to ~200 KB: a wrong name (its header declaring all of it) is
    refused on the names, the right name (a header of the program's shape, the zeros trailing)
    on the bytes its header declares; neither is inflated (peak traced memory stays small)."""
    npz = tmp_path / "bomb.npz"
    shape = (2, 3, 8, 8) if member == "x.npy" else ((200 << 20) // 4,)
    _bomb(npz, member, _npy_header(shape), 200 << 20)
    assert npz.stat().st_size < 1 << 20
    code, peak = _peak_bytes(["verify", files["bare"], files["onnx"], "--inputs", str(npz)])
    assert code == 2
    line = _one_error_line(capsys)
    assert ("arrays ['y']" in line) if member == "y.npy" else ("member 'x.npy'" in line and "'shape'" in line), line
    assert peak < 32 << 20, peak


def test_a_huge_static_input_is_refused_before_drawing(files, tmp_path, capsys):
    from archive_edits import patched

    def edit(doc):
        sizes = doc["graph_module"]["graph"]["tensor_values"]["x"]["sizes"]
        sizes[2] = sizes[3] = {"as_int": 100000}

    pt2 = patched(tmp_path, files["bare"], edit)
    assert main(["verify", pt2, files["onnx"], "--reference", "onnx"]) == 2
    line = _one_error_line(capsys)
    assert "input 'x' shape [2, 3, 100000, 100000]" in line and "bytes" in line, line


def test_locate_allows_float32_rounding_in_step_counting():
    """A dequantized activation one step off, both sides float32 ((q - zp) * scale rounded):
    125 and 126 steps of 0.0123457 differ by 1.0000074 steps; that is one step, two are not."""
    from pt2x.verification.locate import first_divergence

    s = np.float32(0.0123457)
    order = [("dq", "DEQUANTIZE", ["q"], ["v"])]

    def located(q_got: int, q_want: int):
        got = np.array([np.float32(q_got) * s, 0], np.float32)
        want = np.array([np.float32(q_want) * s, 0], np.float32)
        assert (float(got[0]) - float(want[0])) / float(s) != abs(q_got - q_want)  # rounding shows
        return first_divergence(order, [{"v": got}], [{"v": want}], "litert", {}, {}, {"v": float(s)})

    for q in (117, 121, 125, -126):
        dv, compared = located(q + 1, q)
        assert dv is None and compared == 1, dv
    dv, _ = located(127, 125)
    assert dv is not None and dv.tensor == "v" and "step" in dv.tolerance
