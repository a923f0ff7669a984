"""LiteRT (ai-edge-litert's Interpreter) vs torch eager on programs torch exports and saves at
test time, as exported and decomposed, on the example inputs and, after
``resize_tensor_input``, on a second input set with other dynamic sizes; XNNPACK on and off.
A small CI subset: the whole zoo's outcome is in docs/tflite.md. Families TFLite cannot take
(in this version) must be refused with the one report naming the ONNX op and the ATen node."""

from __future__ import annotations

import pytest

import tflite_zoo
from pt2x.converters.errors import UnsupportedOpsError

# (name, decomposed) pairs: dynamic MLP, dynamic reshape/slicing, dtypes, CNN (conv, BN folded,
# pools, resize, transposed conv), attention with a padding mask, type promotion, a transformer
CASES = ["mlp_dynamic", "dynamic_reshape", "multi_dtype", "fp16_mlp", "bf16_mlp", "conv_bn_pool", "cnn_upsample",
         "mha_padding", "mixed_promotion", "exportdb_dictionary", "transformer_encoder"]
# deep models: float32 reassociation (XNNPACK's GEMMs, fused softmax) accumulates
SCALE = {"transformer_encoder": 10.0, "mha_padding": 10.0, "cnn_upsample": 10.0}

# name -> (ONNX op the report must name, the ATen op it came from, why)
EXPECTED_REFUSALS = {
    "cond": ("ONNX If", "higher_order.cond", "IF subgraphs are not mapped yet"),
    "while_loop": ("ONNX Loop", "higher_order.while_loop", "WHILE subgraphs are not mapped yet"),
    "lstm": ("ONNX LSTM", None, "the LSTM sequence op is not decomposed yet"),
}


@pytest.mark.parametrize("decomposed", [False, True], ids=["exported", "decomposed"])
@pytest.mark.parametrize("name", CASES)
def test_parity(name, decomposed):
    tflite_zoo.check_parity(name, decomposed, scale=SCALE.get(name, 1.0))


@pytest.mark.parametrize("name", ["mlp_dynamic", "conv_bn_pool", "mha_padding"])
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
