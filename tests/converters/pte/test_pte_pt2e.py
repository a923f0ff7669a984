"""PT2E int8 programs (torchao's flow, ``tests/support/pt2e.py``: X86 and XNNPACK-style
quantizers, a dynamic batch) converted to .pte where ``import torch`` fails, run in ExecuTorch's
runtime on the portable kernels at two batch sizes and compared with the quantized module's eager
output, in quantization steps of the output (the ONNX tests' rule: one step, for a float rounding
difference that moves a value across a tie)."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("executorch", reason="executorch is not installed (pip install executorch==1.5.1): "
                                         "the .pte files are checked by running them in its runtime")
pytest.importorskip("torchao", reason="the PT2E flow needs torchao (the test extra)")

import pt2e  # noqa: E402
import pte_zoo  # noqa: E402

from pt2x.converters.errors import UnsupportedOpsError  # noqa: E402

STEPS = 1.0
SMALL = [(n, q) for n in ("cnn", "mlp", "transformer") for q in pt2e.QUANTIZERS]


def _output_step(ep) -> float:
    scales = [float(n.args[1]) for n in ep.graph.nodes
              if n.op == "call_function" and str(n.target).startswith("quantized_decomposed.quantize_per_tensor")]
    return scales[-1]


@pytest.mark.parametrize("name,quantizer", SMALL)
def test_matches_torch_eager(tmp_path, name, quantizer):
    p = pt2e.program(name, quantizer)
    data = pte_zoo.convert_torch_free("to_pte", pt2e.save(p.exported, tmp_path / f"{name}.pt2"))
    step = _output_step(p.exported)
    for b in pt2e.BATCHES:
        expected = p.expected[b].numpy()
        assert float(expected.std()) > 1e-2, "a degenerate reference matches anything"
        (got,) = pte_zoo.run(data, p.inputs[b])
        assert got.shape == expected.shape
        steps = float(np.abs(got.numpy() - expected).max()) / step
        assert steps <= STEPS, f"{name}/{quantizer} batch {b}: {steps:.3f} steps off"


def test_run_time_quantization_parameters_are_refused(tmp_path):
    p = pt2e.program("mlp", "x86_dynamic")
    with pytest.raises(UnsupportedOpsError, match="choose_qparams"):
        pte_zoo.convert_torch_free("to_pte", pt2e.save(p.exported, tmp_path / "dyn.pt2"))
