"""LiteRT (ai-edge-litert's Interpreter) vs torch eager on programs torch exports and saves at
test time, as exported and decomposed, on the example inputs and, after
``resize_tensor_input``, on a second input set with other dynamic sizes; XNNPACK on and off.
A CI subset: the whole zoo's outcome is in docs/tflite.md. An op TFLite cannot take must be
refused with the one report naming the ONNX op and the ATen node."""

from __future__ import annotations

import importlib.util

import pytest
import torch

import onnx_zoo
import tflite_zoo
from pt2x.converters import to_tflite
from pt2x.converters.errors import UnsupportedOpsError

# dynamic MLP, dynamic reshape/slicing, dtypes, CNN (conv, BN folded, with a padding mask, type promotion, a transformer
# pad, resize, transposed conv), attention with a padding mask, type promotion, a transformer,
# torch.gather, control flow (IF for cond, WHILE for while_loop and map's scan), LSTM/GRU
# (unrolled), dynamic H/W with a resize to the input's size, 1-D/3-D convs, a BERT
CASES = ["mlp_dynamic", "dynamic_reshape", "multi_dtype", "fp16_mlp", "bf16_mlp", "conv_bn_pool", "cnn_upsample",
         "mha_padding", "mixed_promotion", "exportdb_dictionary", "transformer_encoder", "int_ops", "cond",
         "while_loop", "map", "lstm", "gru", "cnn_dynamic_hw", "convs_1d_3d", "hf_bert"]
# deep models: float32 reassociation (XNNPACK's GEMMs, fused softmax) accumulates
SCALE = {"transformer_encoder": 10.0, "mha_padding": 10.0, "cnn_upsample": 10.0, "lstm": 10.0, "gru": 10.0,
         "hf_bert": 10.0, "cnn_dynamic_hw": 10.0}
# (name, decomposed) -> why it is not run
SKIPS = {("hf_bert", True): "covered as exported; the decomposed BERT adds ~10 s of export to CI"}



@pytest.mark.parametrize("decomposed", [False, True], ids=["exported", "decomposed"])
@pytest.mark.parametrize("name", CASES)
def test_parity(name, decomposed):
    if "hf" in onnx_zoo.case(name).tags and importlib.util.find_spec("transformers") is None:
        pytest.skip("transformers is not installed")
    if (name, decomposed) in SKIPS:
        pytest.skip(SKIPS[name, decomposed])
    tflite_zoo.check_parity(name, decomposed, scale=SCALE.get(name, 1.0))


@pytest.mark.parametrize("name", ["mlp_dynamic", "conv_bn_pool", "mha_padding", "while_loop"])
def test_parity_without_xnnpack(name):
    """The builtin kernels alone (OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)."""
    tflite_zoo.check_parity(name, xnnpack=False, scale=SCALE.get(name, 1.0))


class _Scatter(torch.nn.Module):
    def forward(self, x, i):
        return x.scatter(1, i, torch.ones_like(x))


@pytest.fixture(scope="module")
def scatter_pt2(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("scatter") / "scatter.pt2")
    torch.export.save(torch.export.export(_Scatter(), (torch.randn(2, 4), torch.tensor([[0, 1, 2, 3]] * 2))), path)
    return path


def test_expected_refusal_names_onnx_and_aten_nodes(scatter_pt2):
    """ScatterElements (torch.scatter) has no exact builtin (TFLite's SCATTER_ND adds duplicates):
    the one report names the ONNX op, the node and the ATen node it came from."""
    with pytest.raises(UnsupportedOpsError) as e:
        to_tflite(scatter_pt2)
    assert [p.target for p in e.value.ops] == ["ONNX ScatterElements"], str(e.value)
    assert "from ATen node scatter = torch.ops.aten.scatter.src" in str(e.value), str(e.value)
    assert str(e.value).startswith("scatter/models/model.json: cannot convert to tflite"), str(e.value)


def test_cli_refusal_is_one_report_without_traceback(scatter_pt2, tmp_path):
    from torchfree import run_cli_torch_free

    out = tmp_path / "s.tflite"
    r = run_cli_torch_free("convert", scatter_pt2, "--to", "tflite", "-o", str(out))
    assert r.returncode == 2, (r.returncode, r.stderr)  # a Pt2Error: what the user can act on
    assert "Traceback" not in r.stderr and "ONNX ScatterElements" in r.stderr, r.stderr
    assert not out.exists()


@pytest.mark.parametrize("sign", [1.0, -1.0], ids=["then", "else"])
def test_cond_takes_both_branches(sign):
    """The IF subgraphs: an input whose sum is positive runs the then-branch, else the other."""
    import numpy as np

    from tolerances import assert_close

    x = torch.rand(4, 3) * sign
    (want,) = onnx_zoo.eager_outputs("cond", (x,), {})
    (got,) = tflite_zoo.run(tflite_zoo.interpreter(tflite_zoo.converted("cond")), [x.numpy()])
    assert_close(got, want.numpy(), want.dtype, what=f"cond {sign:+}")
    branch = np.sin(x.numpy()) if sign > 0 else np.cos(x.numpy()) + 1  # zoo.Cond's two branches
    np.testing.assert_allclose(got, branch, rtol=1e-5, atol=1e-5)
