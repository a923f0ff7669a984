"""ONNX Runtime (CPU) vs torch eager for every exportable zoo program and the ONNX zoo,
as exported and after ``run_decompositions()``, on the example inputs and on a second
input set with other dynamic sizes. Programs pt2x cannot convert are listed with the
reason and must fail with the one-report ``UnsupportedOpsError`` naming the operator."""

from __future__ import annotations

import importlib.util

import onnx
import pytest

import onnx_zoo
import zoo
from pt2x.converters.errors import UnsupportedOpsError

# name -> (operator the report must name, why it cannot be converted)
EXPECTED_UNSUPPORTED = {
    "custom_op": ("pt2x_test.scaled_add.default", "a custom operator with no registered lowering "
                  "(test_onnx_report registers one and converts it)"),
    "exportdb_tensor_setattr": ("aten.randn.default", "random numbers: ONNX RandomNormal cannot reproduce "
                                "torch's generator, so parity is impossible"),
}
# (name, decomposed) -> why the case is not run
SKIPS = {
    ("exportdb_tensor_setattr", True): "run_decompositions() leaves nothing random to refuse; covered as exported",
}
# Deep models accumulate float32 reassociation error (fused attention, LayerNormalization).
SCALE = {name: 10.0 for name in ("transformer_encoder", "transformer_decoder", "hf_bert", "hf_gpt2", "hf_llama",
                                  "hf_vit", "hf_t5_encoder", "lstm", "gru", "mha_padding", "sdpa_masks_gqa")}

_HAS_TRANSFORMERS = importlib.util.find_spec("transformers") is not None


def _names():
    return list(zoo.exportable_names()) + [c.name for c in onnx_zoo.ONNX_CASES]


def _params():
    out = []
    for name in _names():
        for dec in (False, True):
            marks = []
            if "hf" in onnx_zoo.case(name).tags and not _HAS_TRANSFORMERS:
                marks.append(pytest.mark.skip(reason="transformers is not installed"))
            out.append(pytest.param(name, dec, id=f"{name}{'-decomposed' if dec else ''}", marks=marks))
    return out


def _program(name, decomposed):
    try:
        return onnx_zoo.exported(name, decomposed)
    except Exception as e:  # torch's own decomposition fails (e.g. a view over strided SymInts)
        if decomposed:
            pytest.skip(f"torch's run_decompositions() fails on this program: {type(e).__name__}: {str(e)[:120]}")
        raise


@pytest.mark.parametrize("name,decomposed", _params())
def test_onnx_parity(name, decomposed):
    if (name, decomposed) in SKIPS:
        pytest.skip(SKIPS[(name, decomposed)])
    _program(name, decomposed)
    if name in EXPECTED_UNSUPPORTED:
        target, _why = EXPECTED_UNSUPPORTED[name]
        with pytest.raises(UnsupportedOpsError) as err:
            onnx_zoo.converted(name, decomposed)
        assert target in str(err.value)
        assert any(p.target == target for p in err.value.ops)
        return
    model = onnx.load_from_string(onnx_zoo.converted(name, decomposed))
    assert model.ir_version <= 10
    onnx.checker.check_model(model, full_check=True)
    onnx_zoo.check_parity(name, decomposed, scale=SCALE.get(name, 1.0))
