"""``to_pte(..., external_weights=True)`` / ``pt2x convert --to pte --external-weights``: the weights
in a ``.ptd`` (FlatTensor) beside the ``.pte``, converted where ``import torch`` fails, run in
ExecuTorch's runtime with the data file at two batch sizes and compared with torch eager; the
files' layout (FT01, the FH01 header, 128-aligned segments, each weight once under its fully
qualified name, equal weights sharing a segment, lifted constants left in the .pte); exir's own
.ptd read and loaded beside pt2x's .pte; hostile .ptd files as pt2x's errors naming the field;
``validate --data``; and the peak memory of a 64 MB conversion (no weight held twice)."""

from __future__ import annotations

import json
import random
import struct
import sys

import pytest
import torch

import pte_zoo
from pt2x.converters.pte import flat_tensor_generated as ft
from pt2x.converters.pte.ptd_reader import read_ptd
from pt2x.converters.pte.reader import read_pte
from pt2x.serde.errors import Pt2Error, Pt2FormatError
from pt2x.tools.cli import main
from tolerances import assert_close
from torchfree import convert_torch_free, run_cli_torch_free
from workshop import load_script

PORTABLE = pte_zoo.PORTABLE  # the portable path's .ptd: every weight as it is, under its name

needs_runtime = pytest.mark.skipif(
    not __import__("importlib").util.find_spec("executorch"),
    reason="executorch is not installed (pip install executorch==1.5.1): the files are checked by running them")


class Twins(torch.nn.Module):
    """Two byte-identical parameters (one segment, two keys), a constant made in forward (a lifted
    tensor constant, which stays in the .pte as exir leaves it) and a parameter read through a
    static view (which stays in the .pte: the view cannot name its key, of other sizes)."""

    def __init__(self):
        super().__init__()
        self.a = torch.nn.Parameter(torch.full((4,), 0.5))
        self.b = torch.nn.Parameter(torch.full((4,), 0.5))
        self.w = torch.nn.Parameter(torch.randn(24))
        self.fc = torch.nn.Linear(6, 3)

    def forward(self, x):
        y = x * self.a + x * self.b + torch.tensor([1.0, -2.0, 3.0, -4.0])
        return self.fc(y @ self.w.reshape(4, 6))


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """pt2x's .pte and .ptd of the CNN (dynamic batch), the dynamic-batch MLP and Twins, converted torch-free."""
    d = tmp_path_factory.mktemp("ptd")
    out = {"dir": d}
    for name in ("cnn_dynamic", "mlp_dynamic"):
        dst = str(d / f"{name}.pte")
        assert convert_torch_free("to_pte", pte_zoo.saved(name), dst, external_weights=True, **PORTABLE) is None
        out[name] = dst
    torch.manual_seed(0)
    twins = Twins().eval()
    src = str(d / "twins.pt2")
    # decomposed: the lifted constant's lift_fresh_copy becomes a clone (which the pte target lowers)
    torch.export.save(torch.export.export(twins, (torch.randn(2, 4),)).run_decompositions(), src)
    out["twins"], out["twins_module"], out["twins_pt2"] = str(d / "twins.pte"), twins, src
    assert convert_torch_free("to_pte", src, out["twins"], external_weights=True, **PORTABLE) is None
    # delegated (the default): the XNNPACK payloads' constants go to the .ptd too
    out["delegated"] = str(d / "delegated.pte")
    assert convert_torch_free("to_pte", pte_zoo.saved("cnn_dynamic"), out["delegated"], external_weights=True) is None
    return out


def _ptd(pte: str) -> str:
    return pte[:-4] + ".ptd"


# ------------------------------------------------------------------------------ parity

@needs_runtime
@pytest.mark.parametrize("name,batches", [("cnn_dynamic", (1, 8)), ("mlp_dynamic", (3, 64))])
def test_runs_with_its_data_file(files, name, batches):
    data = open(files[name], "rb").read()
    m = pte_zoo.module(name)
    torch.manual_seed(3)
    shape = pte_zoo.input_sets(name)[0][0].shape
    for b in batches:
        x = torch.randn(b, *shape[1:])
        (got,) = pte_zoo.run(data, [x], data_path=_ptd(files[name]))
        with torch.no_grad():
            want = m(x)
        assert_close(got.numpy(), want.numpy(), "float32", what=f"{name} batch {b}")


@needs_runtime
def test_shared_segment_and_lifted_constant(files):
    x = torch.randn(2, 4)
    (got,) = pte_zoo.run(open(files["twins"], "rb").read(), [x], data_path=_ptd(files["twins"]))
    with torch.no_grad():
        assert_close(got.numpy(), files["twins_module"](x).numpy(), "float32", what="twins")


@needs_runtime
def test_delegated_constants_in_the_data_file(files, tmp_path, capsys):
    """Delegated, the XNNPACK payloads' constants (the folded filters) are named entries of the
    .ptd, not of the .pte: it runs with the .ptd at two batch sizes, holds no weight bytes, and
    without its .ptd validate names the file it lacks (the runtime would end the process)."""
    pte = files["delegated"]
    m = pte_zoo.module("cnn_dynamic")
    shape = pte_zoo.input_sets("cnn_dynamic")[0][0].shape
    torch.manual_seed(4)
    for b in (1, 8):
        x = torch.randn(b, *shape[1:])
        (got,) = pte_zoo.run(open(pte, "rb").read(), [x], data_path=_ptd(pte))
        with torch.no_grad():
            assert_close(got.numpy(), m(x).numpy(), "float32", what=f"delegated batch {b}")
    s = read_pte(pte)
    blobs = {e["key"] for e in s["execution_plans"][0]["external_blobs"]}
    assert s["execution_plans"][0]["delegates"] and s["named_data"] == [] and s["constant_bytes"] == 0
    assert blobs and blobs <= {e["key"] for e in read_ptd(_ptd(pte))["named_data"]}
    lone = tmp_path / "lone.pte"
    lone.write_bytes(open(pte, "rb").read())
    rc, r = _validate(capsys, str(lone))
    assert rc == 1 and [f["code"] for f in r["findings"]] == ["missing-data"] and "lone.ptd" in r["findings"][0]["message"]


# ------------------------------------------------------------------------------ the files

def test_layout_keys_and_each_weight_once(files):
    pte, ptd = files["cnn_dynamic"], _ptd(files["cnn_dynamic"])
    raw = open(ptd, "rb").read()
    assert raw[4:8] == b"FT01" and raw[8:12] == b"FH01"
    length, fb_offset, fb_size, base, data_size = struct.unpack_from("<IQQQQ", raw, 12)
    assert (length, fb_offset) == (40, 48) and base % 128 == 0 and base >= fb_offset + fb_size
    assert len(raw) == base + data_size
    flat = ft.FlatTensor.GetRootAs(raw, 0)
    state = {k: v.detach().numpy() for k, v in pte_zoo.module("cnn_dynamic").state_dict().items()
             if v.dtype == torch.float32}
    keys = [flat.NamedData(i).Key().decode() for i in range(flat.NamedDataLength())]
    assert sorted(keys) == sorted(state)  # every float weight the program reads, by its state_dict name
    for i in range(flat.NamedDataLength()):
        entry = flat.NamedData(i)
        seg = flat.Segments(entry.SegmentIndex())
        assert seg.Offset() % 128 == 0
        w = state[entry.Key().decode()]
        assert raw[base + seg.Offset(): base + seg.Offset() + seg.Size()] == w.tobytes()
        assert list(entry.TensorLayout().SizesAsNumpy()) == list(w.shape) and entry.TensorLayout().ScalarType() == 6
    assert flat.SegmentsLength() == len(state)  # once each
    s = read_pte(pte)
    assert s["constant_bytes"] == 0 and s["segments"] == [{"offset": 0, "size": 0}]  # no weight left in the .pte
    assert {e["key"] for e in s["execution_plans"][0]["external_tensors"]} == set(state)


def test_equal_weights_share_a_segment_and_lifted_constants_stay(files):
    s = read_ptd(_ptd(files["twins"]))
    by_key = {e["key"]: e for e in s["named_data"]}
    assert set(by_key) == {"a", "b", "fc.weight", "fc.bias"}
    assert by_key["a"]["segment_index"] == by_key["b"]["segment_index"] and len(s["segments"]) == 3
    p = read_pte(files["twins"])
    assert len(p["constant_buffers"]) == 2  # torch.tensor([...]) made in forward; w, read through a view
    assert p["constant_bytes"] >= 16 + 96 and {e["key"] for e in p["execution_plans"][0]["external_tensors"]} == set(by_key)


def test_bytes_without_dst_and_no_data_file_without_weights(tmp_path):
    pte, ptd = convert_torch_free("to_pte", pte_zoo.saved("mlp"), external_weights=True, **PORTABLE)
    assert read_ptd(ptd)["named_data"][0]["key"] == "fc1.weight" and read_pte(pte)["constant_bytes"] == 0
    assert convert_torch_free("to_pte", pte_zoo.saved("two_outputs"), external_weights=True, **PORTABLE)[1] is None


def test_cli_torch_free(tmp_path):
    dst = str(tmp_path / "m.pte")
    r = run_cli_torch_free("convert", pte_zoo.saved("mlp"), "--to", "pte", "--external-weights", "--delegate", "none",
                           "-o", dst)
    assert r.returncode == 0, r.stderr
    assert f"wrote {dst[:-4]}.ptd (4 entries, " in r.stdout
    r = run_cli_torch_free("inspect", dst[:-4] + ".ptd", "--json")
    assert r.returncode == 0 and [e["key"] for e in json.loads(r.stdout)["named_data"]][:2] == ["fc1.weight", "fc1.bias"]
    r = run_cli_torch_free("validate", dst, "--target", "executorch==1.5")
    assert r.returncode == 0 and "valid for executorch==1.5 with" in r.stdout, r.stdout + r.stderr
    r = run_cli_torch_free("convert", pte_zoo.saved("mlp"), "--to", "onnx", "--external-weights", "-o", str(tmp_path / "m.onnx"))
    assert r.returncode == 2 and "--external-weights applies only to --to pte" in r.stderr


def test_both_files_or_neither(tmp_path):
    """The .pte and the .ptd are renamed into place together: a failed write leaves both old files."""
    from pt2x.converters import to_pte
    from pt2x.serde import atomic_write

    dst, ptd = tmp_path / "m.pte", tmp_path / "m.ptd"
    dst.write_bytes(b"old program")
    ptd.write_bytes(b"old data")
    synced = []

    def fail_second(fd):
        synced.append(fd)
        if len(synced) == 2:
            raise OSError(28, "No space left on device")
        real(fd)

    real = atomic_write.os.fsync
    atomic_write.os.fsync = fail_second
    try:
        with pytest.raises(OSError):
            to_pte(pte_zoo.saved("mlp"), str(dst), external_weights=True)
    finally:
        atomic_write.os.fsync = real
    assert len(synced) == 2 and dst.read_bytes() == b"old program" and ptd.read_bytes() == b"old data"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.ptd", "m.pte"]  # no temporary file left


# ------------------------------------------------------------------------------ validate --data

def _validate(capsys, *argv) -> tuple[int, dict]:
    rc = main(["validate", *argv, "--json"])
    return rc, json.loads(capsys.readouterr().out)


def test_validate_names_what_the_program_lacks(files, tmp_path, capsys):
    pte = files["mlp_dynamic"]
    rc, r = _validate(capsys, pte)
    assert rc == 0 and r["valid"] and r["data"] == _ptd(pte)
    lone = tmp_path / "lone.pte"
    lone.write_bytes(open(pte, "rb").read())
    rc, r = _validate(capsys, str(lone))
    assert rc == 1 and [f["code"] for f in r["findings"]] == ["missing-data"] and "lone.ptd" in r["findings"][0]["message"]
    rc, r = _validate(capsys, str(lone), "--data", _ptd(files["cnn_dynamic"]))  # another program's weights
    assert rc == 1 and {f["code"] for f in r["findings"]} == {"missing-key"}
    assert any("'fc1.weight'" in f["message"] for f in r["findings"])
    rc, r = _validate(capsys, files["twins"], "--data", _ptd(pte))  # mlp's fc1/fc2: no 'a', 'b', 'fc.*'
    assert rc == 1 and len(r["findings"]) == 4
    # a key of another shape: fc2.bias [4] in the file, written [3]
    raw = bytearray(open(_ptd(pte), "rb").read())
    flat = ft.FlatTensor.GetRootAs(bytes(raw), 0)
    entry = next(flat.NamedData(i) for i in range(flat.NamedDataLength()) if flat.NamedData(i).Key() == b"fc2.bias")
    layout = entry.TensorLayout()
    struct.pack_into("<i", raw, layout._tab.Vector(layout._tab.Offset(6)), 3)
    bad = tmp_path / "shape.ptd"
    bad.write_bytes(bytes(raw))
    rc, r = _validate(capsys, pte, "--data", str(bad))
    assert rc == 1 and [f["code"] for f in r["findings"]] == ["data-layout"] and "FLOAT[3]" in r["findings"][0]["message"]


# ------------------------------------------------------------------------------ exir's .ptd

def test_exir_written_data_file(files, tmp_path, capsys):
    pytest.importorskip("executorch.exir", reason="executorch is not installed: no exir-written .ptd to read")
    from executorch.exir import ExecutorchBackendConfig, to_edge

    ep = torch.export.export(pte_zoo.module("mlp"), (torch.randn(2, 8),))
    et = to_edge(ep).to_executorch(ExecutorchBackendConfig(external_constants=True))
    (tmp_path / "exir.pte").write_bytes(et.buffer)
    et.write_tensor_data_to_file(str(tmp_path))
    exir_ptd = tmp_path / "_default_external_constant.ptd"  # exir names the file after its tag
    s = read_ptd(str(exir_ptd))
    assert s["schema_version"] == 0 and [e["key"] for e in s["named_data"]] == ["fc1.weight", "fc1.bias", "fc2.weight",
                                                                              "fc2.bias"]
    assert s["named_data"][0]["sizes"] == [16, 8] and s["named_data"][0]["dtype"] == "FLOAT"
    rc, out = main(["inspect", str(exir_ptd)]), capsys.readouterr().out
    assert rc == 0 and "fc2.weight  FLOAT[4, 16]  segment 2, 256 bytes" in out
    # exir's .pte names the same keys as pt2x's; pt2x's .pte of the same program runs on exir's .ptd
    rc, r = _validate(capsys, str(tmp_path / "exir.pte"), "--data", str(exir_ptd))
    assert rc == 0, r
    pte, _ = convert_torch_free("to_pte", pte_zoo.saved("mlp"), external_weights=True, **PORTABLE)
    rc, r = _validate(capsys, files["mlp_dynamic"], "--data", str(exir_ptd))
    assert rc == 0, r
    if __import__("importlib").util.find_spec("executorch.runtime"):
        x = torch.randn(2, 8)
        (got,) = pte_zoo.run(pte, [x], data_path=str(exir_ptd))
        with torch.no_grad():
            assert_close(got.numpy(), pte_zoo.module("mlp")(x).numpy(), "float32", what="pt2x .pte on exir's .ptd")


# ------------------------------------------------------------------------------ hostile files

def _refused(data: bytes, path_part: str) -> Pt2FormatError:
    with pytest.raises(Pt2FormatError) as e:
        read_ptd(data)
    assert path_part in (e.value.path or ""), (path_part, e.value.path, str(e.value))
    return e.value


def test_hostile_data_files(files, tmp_path, capsys):
    data = open(_ptd(files["cnn_dynamic"]), "rb").read()
    flat = ft.FlatTensor.GetRootAs(data, 0)

    def edited(at: int, fmt: str, value) -> bytes:
        bad = bytearray(data)
        struct.pack_into(fmt, bad, at, value)
        return bytes(bad)

    _refused(data[:6], "file")
    _refused(data[:4] + b"XX01" + data[8:], "file_identifier")
    _refused(data[:8] + b"XH01" + data[12:], "header")
    _refused(data[:-100], "header.segment_data_size")  # truncated weights
    _refused(data[:500], "header.flatbuffer_size")  # truncated flatbuffer
    _refused(edited(12, "<I", 12), "header.length")
    _refused(edited(16, "<Q", 40), "header.flatbuffer_offset")  # misaligned: the flatbuffer's alignment breaks
    _refused(edited(32, "<Q", 8), "header.segment_base_offset")  # inside the flatbuffer
    seg = flat.Segments(1)
    e = _refused(edited(seg._tab.Pos + seg._tab.Offset(4), "<Q", seg.Offset() + 4), "segments[1].offset")
    assert "misaligned" in str(e)
    last = flat.Segments(flat.SegmentsLength() - 1)
    _refused(edited(last._tab.Pos + last._tab.Offset(6), "<Q", 1 << 40), f"segments[{flat.SegmentsLength() - 1}]")
    entry = flat.NamedData(1)
    e = _refused(edited(entry._tab.Pos + entry._tab.Offset(6), "<I", 99), "named_data[1].segment_index")
    assert "99" in str(e)
    vec = flat._tab.Vector(flat._tab.Offset(8))  # named_data: the first entry's offset pointed past the end
    _refused(edited(vec, "<I", 1 << 30), "named_data[0]")
    # the CLI: one line, exit 2, no traceback
    f = tmp_path / "bad.ptd"
    f.write_bytes(edited(entry._tab.Pos + entry._tab.Offset(6), "<I", 99))
    for cmd in ("inspect", "validate"):
        rc = main([cmd, str(f)])
        err = capsys.readouterr().err
        assert rc == 2 and "named_data[1].segment_index" in err and "Traceback" not in err
    # a bad .ptd beside a .pte is a finding of the .pte's validation
    rc, r = _validate(capsys, files["cnn_dynamic"], "--data", str(f))
    assert rc == 1 and [x["code"] for x in r["findings"]] == ["bad-data"]


def test_random_byte_flips_are_pt2_errors(files):
    data = open(_ptd(files["cnn_dynamic"]), "rb").read()
    end = struct.unpack_from("<Q", data, 24)[0] + 48  # the flatbuffer; the weights are not interpreted
    rng = random.Random(0)
    for _ in range(300):
        bad = bytearray(data)
        for _ in range(rng.randint(1, 4)):
            bad[rng.randrange(end)] = rng.randrange(256)
        try:
            read_ptd(bytes(bad))
        except Pt2Error:
            pass


# ------------------------------------------------------------------------------ memory

class Wide(torch.nn.Module):
    """4 x Linear(2048, 2048): 64 MB of float32 weights (benchmarks/bench_pte.py's mlp_wide)."""

    def __init__(self):
        super().__init__()
        self.layers = torch.nn.Sequential(*[torch.nn.Sequential(torch.nn.Linear(2048, 2048), torch.nn.ReLU())
                                            for _ in range(4)])

    def forward(self, x):
        return self.layers(x)


_TORCH_FREE_CLI = "import sys\nsys.modules['torch'] = None\nfrom pt2x.tools.cli import main\nsys.exit(main(sys.argv[1:]))\n"


def test_wide_model_streams_each_weight_once(tmp_path):
    """The torch-free CLI converting 64 MB of weights to a .pte and a .ptd, watched as the LLM
    benchmark watches a conversion: the memory the process makes (RssAnon) stays below half the
    weights' size, so no weight is ever held whole in it (the archive's pages it reads are
    RssFile), and the two files hold the weights once."""
    torch.manual_seed(0)
    src = str(tmp_path / "wide.pt2")
    torch.export.save(torch.export.export(Wide().eval(), (torch.randn(4, 2048),)), src)
    weights = 4 * (2048 * 2048 + 2048) * 4
    bench = load_script("bench_llm")
    dst = str(tmp_path / "wide.pte")
    r = bench.measure([sys.executable, "-c", _TORCH_FREE_CLI, "convert", src, "--to", "pte", "--external-weights",
                       "-o", dst], timeout=300)
    assert r["exit"] == 0, r["error"]
    anon = r["peak_anon_mb"] * bench.MB
    assert anon < 0.5 * weights, (anon, weights)
    ptd = read_ptd(dst[:-4] + ".ptd")
    assert ptd["data_bytes"] == weights and read_pte(dst)["constant_bytes"] == 0
    assert ptd["size"] <= weights + 8 * 128 + 4096
