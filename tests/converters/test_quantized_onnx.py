"""PT2E-quantized programs to ONNX QDQ, torch-free, against torch eager of the quantized module.

Programs come from ``pt2e`` (torchao's prepare_pt2e/convert_pt2e, two quantizers), exported with a
dynamic batch and saved with ``torch.export.save``; ``to_onnx`` runs where ``import torch`` fails
(``torchfree.convert_torch_free``). Parity is stated in quantization steps of the output (the scale
of the program's last activation quantize): ONNX Runtime with its graph optimizations off or basic
(QuantizeLinear/DequantizeLinear run as written) must be within ``STEPS`` (one step: torch
quantizes ``x * (1/scale)``, QuantizeLinear ``x / scale``; they can pick neighbouring integers
at ties); measured 0 on every program here.

Not asserted: ONNX Runtime's full optimizations (QDQ fused into QGemm/MatMulIntegerToFloat/
QLinearConv). On this AVX2 CPU without VNNI the MLP and transformer block were 12-26 steps off,
and torch.onnx's own QDQ export of the same programs was off by the same amounts: ONNX Runtime's
kernels, not the file (docs/quantization.md).

resnet18 and mobilenet_v2 took 75-185 s each to quantize and export on the shared 2-core machine, so they
run only with ``PT2X_QUANT_ZOO=1``.
"""

from __future__ import annotations

import os

import numpy as np
import onnx
import onnxruntime as ort
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("torchao", reason="the PT2E flow needs torchao (the test extra)")

import pt2e  # noqa: E402
from torchfree import convert_torch_free  # noqa: E402

import pt2x.serde  # noqa: E402
from pt2x.converters.errors import UnsupportedOpsError  # noqa: E402

STEPS = 1.0  # tolerance, in quantization steps of the output
LEVELS = ("ORT_DISABLE_ALL", "ORT_ENABLE_BASIC")  # QDQ executed as written (no integer kernels)
SMALL = [(n, q) for n in ("cnn", "mlp", "transformer") for q in pt2e.QUANTIZERS]
# XNNPACK's symmetric config on X86's annotator: with the XNNPACK-style annotator every layer is
# int8 and mobilenet_v2 drifts 1.000002 steps from eager, resnet18 4 (a one-step rounding
# difference carried through the int8 layers after it)
ZOO = [("resnet18", "x86"), ("mobilenet_v2", "xnnpack_on_x86")]
RUN_ZOO = os.environ.get("PT2X_QUANT_ZOO") == "1"


def _saved(tmp_path_factory, name: str, quantizer: str):
    p = pt2e.program(name, quantizer)
    path = tmp_path_factory.mktemp("pt2e") / f"{name}_{quantizer}.pt2"
    return p, pt2e.save(p.exported, path)


def _output_step(ep) -> float:
    """The scale of the graph's last activation quantize (the output's quantization step)."""
    scales = [float(n.args[1]) for n in ep.graph.nodes
              if n.op == "call_function" and str(n.target).startswith("quantized_decomposed.quantize_per_tensor")]
    return scales[-1]


def _run(model: bytes, level: str, x: np.ndarray) -> np.ndarray:
    so = ort.SessionOptions()
    so.graph_optimization_level = getattr(ort.GraphOptimizationLevel, level)
    sess = ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])
    return sess.run(None, {sess.get_inputs()[0].name: x})[0]


def _check_parity(tmp_path_factory, name, quantizer):
    p, path = _saved(tmp_path_factory, name, quantizer)
    model = convert_torch_free("to_onnx", path)
    step = _output_step(p.exported)
    dims = onnx.load_from_string(model).graph.input[0].type.tensor_type.shape.dim
    assert dims[0].dim_param, "the batch stays dynamic"
    for level in LEVELS:
        for b in pt2e.BATCHES:
            expected = p.expected[b].numpy()
            assert float(expected.std()) > 1e-2, "a degenerate reference matches anything"
            got = _run(model, level, p.inputs[b][0].numpy())
            assert got.shape == expected.shape
            steps = float(np.abs(got - expected).max()) / step
            assert steps <= STEPS, f"{name}/{quantizer} {level} batch {b}: {steps:.3f} steps off"


@pytest.mark.parametrize("name,quantizer", SMALL)
def test_matches_torch_eager(tmp_path_factory, name, quantizer):
    _check_parity(tmp_path_factory, name, quantizer)


@pytest.mark.skipif(not RUN_ZOO, reason="75-185 s each to quantize and export on 2 cores: set PT2X_QUANT_ZOO=1")
@pytest.mark.parametrize("name,quantizer", ZOO)
def test_zoo_matches_torch_eager(tmp_path_factory, name, quantizer):
    _check_parity(tmp_path_factory, name, quantizer)


@pytest.mark.parametrize("quantizer,act_type", [("x86", onnx.TensorProto.UINT8), ("xnnpack", onnx.TensorProto.INT8)])
def test_qdq_graph(tmp_path_factory, quantizer, act_type):
    """Conv weights: int8 initializers dequantized per output channel; activations keep their
    quantizer's dtype and zero points."""
    p, path = _saved(tmp_path_factory, "cnn", quantizer)
    g = onnx.load_from_string(convert_torch_free("to_onnx", path)).graph
    inits = {t.name: onnx.numpy_helper.to_array(t) for t in g.initializer}
    produced_by = {o: n for n in g.node for o in n.output}
    convs = [n for n in g.node if n.op_type == "Conv"]
    assert len(convs) == 3
    for conv in convs:
        dq = produced_by[conv.input[1]]
        assert dq.op_type == "DequantizeLinear"
        assert {a.name: a.i for a in dq.attribute}.get("axis") == 0
        w, scale = inits[dq.input[0]], inits[dq.input[1]]
        assert w.dtype == np.int8 and scale.shape == (w.shape[0],) and scale.dtype == np.float32
        x_dq = produced_by[conv.input[0]]
        assert x_dq.op_type == "DequantizeLinear" and produced_by[x_dq.input[0]].op_type == "QuantizeLinear"
    quantizes = [n for n in g.node if n.op_type == "QuantizeLinear"]
    assert quantizes and all(inits[n.input[2]].dtype == onnx.helper.tensor_dtype_to_np_dtype(act_type)
                             for n in quantizes)


def test_bridge_round_trip(tmp_path_factory):
    """load_exported_program gives a program torch runs, equal to the quantized module."""
    for quantizer in pt2e.QUANTIZERS:
        p, path = _saved(tmp_path_factory, "cnn", quantizer)
        loaded = pt2x.serde.load_exported_program(path)
        assert pt2e.target_names(loaded) == pt2e.target_names(p.exported)
        with torch.no_grad():
            for b in pt2e.BATCHES:
                torch.testing.assert_close(loaded.module()(*p.inputs[b]), p.expected[b], rtol=0, atol=0)


# ---------------------------------------------------------------- hand-written Q/DQ calls


class _QuantOps(torch.nn.Module):
    """Each form convert_pt2e does not write by default: a narrow range (Clip), uint8 reduce_range,
    ``.tensor`` scale/zero point, a per-channel quantize of a constant (folded) and of an input
    (QuantizeLinear with an axis)."""

    def __init__(self):
        super().__init__()
        gen = torch.Generator().manual_seed(0)
        self.register_buffer("w", torch.randn(4, 3, generator=gen))
        self.register_buffer("w_scales", torch.rand(4, generator=gen) * 0.02 + 0.01)
        self.register_buffer("w_zps", torch.tensor([0, 1, -2, 3]))
        self.register_buffer("x_scales", torch.tensor([0.05, 0.1, 0.02]))
        self.register_buffer("x_zps", torch.tensor([0, -5, 7]))
        self.register_buffer("t_scale", torch.tensor(0.04))
        self.register_buffer("t_zp", torch.tensor(-3))

    def forward(self, x):
        qd = torch.ops.quantized_decomposed
        narrow = qd.dequantize_per_tensor(qd.quantize_per_tensor(x, 0.05, 3, -127, 127, torch.int8),
                                          0.05, 3, -127, 127, torch.int8)
        reduced = qd.dequantize_per_tensor(qd.quantize_per_tensor(x, 0.1, 64, 0, 127, torch.uint8),
                                           0.1, 64, 0, 127, torch.uint8)
        as_tensors = qd.dequantize_per_tensor.tensor(
            qd.quantize_per_tensor.tensor(x, self.t_scale, self.t_zp, -128, 127, torch.int8),
            self.t_scale, self.t_zp, -128, 127, torch.int8)
        qw = qd.quantize_per_channel(self.w, self.w_scales, self.w_zps, 0, -127, 127, torch.int8)
        w = qd.dequantize_per_channel(qw, self.w_scales, self.w_zps, 0, -127, 127, torch.int8)
        per_axis = qd.dequantize_per_channel(
            qd.quantize_per_channel(x, self.x_scales, self.x_zps, 1, -128, 127, torch.int8),
            self.x_scales, self.x_zps, 1, -128, 127, torch.int8)
        return narrow @ w.T, reduced, as_tensors, per_axis


def _export(module, x, tmp_path, name):
    ep = torch.export.export(module, (x,), dynamic_shapes=({0: torch.export.Dim("batch", min=1, max=64)},))
    return ep, pt2e.save(ep, tmp_path / f"{name}.pt2")


def test_quantize_forms(tmp_path):
    """Saturation, narrow ranges and ties (x on every k + 1/2 step) against torch eager: the
    dequantized values within one step, exact elsewhere than at ties."""
    import torch.ao.quantization.fx._decomposed  # noqa: F401  (registers quantized_decomposed)

    module = _QuantOps().eval()
    ties = (torch.arange(-200, 200, dtype=torch.float32) + 0.5) * 0.05
    x = torch.cat([ties, torch.linspace(-30, 30, 201), torch.tensor([1e9, -1e9, 0.0])])
    x = x[: x.numel() // 3 * 3].reshape(-1, 3)
    ep, path = _export(module, x[:2], tmp_path, "forms")
    model = convert_torch_free("to_onnx", path)
    g = onnx.load_from_string(model).graph
    assert [n.op_type for n in g.node].count("Clip") == 2, "narrow int8 and reduce_range uint8"
    assert sum(n.op_type == "QuantizeLinear" for n in g.node) == 4, "the constant weight's quantize is folded"
    with torch.no_grad():
        expected = [t.numpy() for t in module(x)]
    steps = (None, 0.1, 0.04, np.array([0.05, 0.1, 0.02], np.float32))
    for level in LEVELS:
        so = ort.SessionOptions()
        so.graph_optimization_level = getattr(ort.GraphOptimizationLevel, level)
        sess = ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])
        got = sess.run(None, {sess.get_inputs()[0].name: x.numpy()})
        np.testing.assert_allclose(got[0], expected[0], rtol=1e-5, atol=0.06)  # a step of 0.05 in the matmul
        for out, exp, step in zip(got[1:], expected[1:], steps[1:]):
            off = np.abs(out - exp) / step
            assert off.max() <= STEPS + 1e-6, f"{level}: {off.max()} steps"


def test_dynamic_quantization_mlp(tmp_path_factory):
    """X86InductorQuantizer's dynamic config: choose_qparams per run, then quantize/dequantize
    .tensor before each linear. The output is float (no output quantize): float32 rounding."""
    p, path = _saved(tmp_path_factory, "mlp", "x86_dynamic")
    assert "quantized_decomposed.choose_qparams.tensor" in pt2e.target_names(p.exported)
    model = convert_torch_free("to_onnx", path)
    for level in LEVELS:
        for b in pt2e.BATCHES:
            got = _run(model, level, p.inputs[b][0].numpy())
            np.testing.assert_allclose(got, p.expected[b].numpy(), rtol=1e-5, atol=1e-6)  # measured 3e-8


class _ChooseQparams(torch.nn.Module):
    def forward(self, x):
        qd = torch.ops.quantized_decomposed
        outs = []
        for choose, lo, hi, dtype in ((qd.choose_qparams.tensor, -128, 127, torch.int8),
                                      (qd.choose_qparams.tensor, 0, 255, torch.uint8),
                                      (qd.choose_qparams_symmetric.tensor, -128, 127, torch.int8),
                                      (qd.choose_qparams_symmetric.tensor, 0, 255, torch.uint8)):
            scale, zp = choose(x, lo, hi, 2**-12, dtype)
            q = qd.quantize_per_tensor.tensor(x, scale, zp, lo, hi, dtype)
            outs += [scale, zp, qd.dequantize_per_tensor.tensor(q, scale, zp, lo, hi, dtype)]
        return tuple(outs)


@pytest.mark.parametrize("shift", [0.0, 3.0, -3.0, 1e-5])
def test_choose_qparams(tmp_path, shift):
    """torch's determine_qparams exactly (scale float64 [1], zero point int64 [1]), inputs all
    positive, all negative, mixed and tiny (the eps floor); the dequantized values within a step."""
    import torch.ao.quantization.fx._decomposed  # noqa: F401

    gen = torch.Generator().manual_seed(3)
    x = torch.randn(4, 7, generator=gen) * (1e-6 if shift == 1e-5 else 1.0) + shift
    _, path = _export(_ChooseQparams(), x[:2], tmp_path, "choose")
    model = convert_torch_free("to_onnx", path)
    with torch.no_grad():
        expected = [t.numpy() for t in _ChooseQparams()(x)]
    for level in LEVELS:
        so = ort.SessionOptions()
        so.graph_optimization_level = getattr(ort.GraphOptimizationLevel, level)
        sess = ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])
        got = sess.run(None, {sess.get_inputs()[0].name: x.numpy()})
        for i in range(0, len(expected), 3):
            (scale, zp, dq), (e_scale, e_zp, e_dq) = got[i:i + 3], expected[i:i + 3]
            assert scale.dtype == np.float64 and zp.dtype == np.int64 and scale.shape == zp.shape == (1,)
            np.testing.assert_array_equal(scale, e_scale)
            np.testing.assert_array_equal(zp, e_zp)
            assert np.abs(dq - e_dq).max() <= STEPS * e_scale[0] * (1 + 1e-6)


def test_refusals_name_the_node(tmp_path):
    """A zero point computed at run time (not by choose_qparams), one outside int8: refused by name."""
    import torch.ao.quantization.fx._decomposed  # noqa: F401

    class RunTimeZeroPoint(torch.nn.Module):
        def forward(self, x):
            qd = torch.ops.quantized_decomposed
            zp = (x.sum() > 0).long()
            q = qd.quantize_per_tensor.tensor(x, torch.tensor(0.1), zp, -128, 127, torch.int8)
            return qd.dequantize_per_tensor(q, 0.1, 0, -128, 127, torch.int8)

    class WideZeroPoint(torch.nn.Module):
        def forward(self, x):
            qd = torch.ops.quantized_decomposed
            q = qd.quantize_per_tensor(x, 0.1, 0, -128, 127, torch.int8)
            return qd.dequantize_per_tensor(q, 0.1, 200, -128, 127, torch.int8)

    x = torch.randn(2, 5)
    _, path = _export(RunTimeZeroPoint(), x, tmp_path, "runtime")
    with pytest.raises(UnsupportedOpsError) as err:
        convert_torch_free("to_onnx", path)
    msg = str(err.value)
    assert "quantized_decomposed.quantize_per_tensor.tensor" in msg and "zero point computed at run time" in msg
    assert "Custom operators" not in msg, "torch's own quantization ops are not a custom library"
    _, path = _export(WideZeroPoint(), x, tmp_path, "wide")
    with pytest.raises(UnsupportedOpsError) as err:
        convert_torch_free("to_onnx", path)
    assert "dequantize_per_tensor" in str(err.value) and "zero point outside CHAR's range" in str(err.value)
