"""LiteRT (ai-edge-litert's Interpreter) vs torch eager on programs torch exports and saves at
test time, as exported and decomposed, on the example inputs and, after
``resize_tensor_input``, on a second input set with other dynamic sizes; XNNPACK on and off.
A small CI subset: the whole zoo's outcome is in docs/tflite.md. Families TFLite cannot take
(in this version) must be refused with the one report naming the ONNX op and the ATen node."""

from __future__ import annotations

import pytest

import tflite_zoo
from pt2x.converters.errors import UnsupportedOpsError

# dynamic MLP, dynamic reshape/slicing, dtypes, CNN (conv, BN folded, with a padding mask, type promotion, a transformer
# pad, resize, transposed conv), attention with a padding mask, type promotion, a transformer,
# torch.gather, control flow (IF for cond, WHILE for while_loop and map's scan)
CASES = ["mlp_dynamic", "dynamic_reshape", "multi_dtype", "fp16_mlp", "bf16_mlp", "conv_bn_pool", "cnn_upsample",
         "mha_padding", "mixed_promotion", "exportdb_dictionary", "transformer_encoder", "int_ops", "cond",
         "while_loop", "map"]
# deep models: float32 reassociation (XNNPACK's GEMMs, fused softmax) accumulates
SCALE = {"transformer_encoder": 10.0, "mha_padding": 10.0, "cnn_upsample": 10.0}

# name -> (ONNX op the report must name, the ATen op it came from, why)
EXPECTED_REFUSALS = {
    "lstm": ("ONNX LSTM", None, "the LSTM sequence op is not decomposed yet"),
}


@pytest.mark.parametrize("decomposed", [False, True], ids=["exported", "decomposed"])
@pytest.mark.parametrize("name", CASES)
def test_parity(name, decomposed):
    tflite_zoo.check_parity(name, decomposed, scale=SCALE.get(name, 1.0))


@pytest.mark.parametrize("name", ["mlp_dynamic", "conv_bn_pool", "mha_padding", "while_loop"])
def test_parity_without_xnnpack(name):
    """The builtin kernels alone (OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)."""
    tflite_zoo.check_parity(name, xnnpack=False, scale=SCALE.get(name, 1.0))


@pytest.mark.parametrize("name", sorted(EXPECTED_REFUSALS))
def test_expected_refusals(name):
    op, aten, _why = EXPECTED_REFUSALS[name]
    with pytest.raises(UnsupportedOpsError) as e:
        tflite_zoo.converted(name)
    assert e.value.ops and e.value.ops[0].target == op, str(e.value)
    assert "cannot convert to tflite" in str(e.value)
    if aten:
        assert f"from ATen node" in str(e.value) and aten in str(e.value), str(e.value)


@pytest.mark.parametrize("sign", [1.0, -1.0], ids=["then", "else"])
def test_cond_takes_both_branches(sign):
    """The IF subgraphs: an input whose sum is positive runs the then-branch, else the other."""
    import numpy as np
    import torch

    import onnx_zoo
    from tolerances import assert_close

    x = torch.rand(4, 3) * sign
    (want,) = onnx_zoo.eager_outputs("cond", (x,), {})
    (got,) = tflite_zoo.run(tflite_zoo.interpreter(tflite_zoo.converted("cond")), [x.numpy()])
    assert_close(got, want.numpy(), want.dtype, what=f"cond {sign:+}")
    branch = np.sin(x.numpy()) if sign > 0 else np.cos(x.numpy()) + 1  # zoo.Cond's two branches
    np.testing.assert_allclose(got, branch, rtol=1e-5, atol=1e-5)
