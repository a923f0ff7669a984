"""Float fusions (``fuse_activations.py``) and the layout pass through reductions and
concatenations (``passes/optimize_layout.py``): the files run in LiteRT (XNNPACK on and off) against torch eager,
the operator lists say what was fused or moved, and on NaN, ±inf and float32's limits each fused
file gives what the same file without the fusions gives.
"""

from __future__ import annotations

import collections
import io
import math

import numpy as np
import onnx
import pytest
import torch
from onnx import TensorProto as TP
from onnx import helper

from litert_child import run_in_child
from tflite_zoo import op_names
from pt2x.converters import to_tflite
from pt2x.converters.tflite import pipeline
from pt2x.converters.tflite.passes import fuse_activations
from pt2x.converters.tflite import schema_generated as fb
from pt2x.serde import load

_F32 = np.finfo(np.float32)


def _ops(data: bytes) -> list[str]:
    return op_names(data)


def _fused_activations(data: bytes) -> collections.Counter:
    """(builtin, fused_activation_function) of every op that has one set."""
    m = fb.Model.GetRootAs(data, 0)
    g = m.Subgraphs(0)
    names = {v: k for k, v in vars(fb.BuiltinOperator).items() if not k.startswith("_")}
    tables = {"CONV_2D": fb.Conv2DOptions, "DEPTHWISE_CONV_2D": fb.DepthwiseConv2DOptions,
              "FULLY_CONNECTED": fb.FullyConnectedOptions, "ADD": fb.AddOptions, "SUB": fb.SubOptions,
              "MUL": fb.MulOptions}
    out = collections.Counter()
    for i in range(g.OperatorsLength()):
        op = g.Operators(i)
        code = names[m.OperatorCodes(op.OpcodeIndex()).BuiltinCode()]
        if code in tables and op.BuiltinOptions() is not None:
            opts = tables[code]()
            opts.Init(op.BuiltinOptions().Bytes, op.BuiltinOptions().Pos)
            if opts.FusedActivationFunction():
                out[(code, opts.FusedActivationFunction())] += 1
    return out


# --- a small CNN exported by torch: every fusion and layout move of the passes, against eager ---

class SmallCnn(torch.nn.Module):
    """conv+bn+relu, a bias-less conv with a per-channel shift added, a depthwise conv with
    ReLU6, a squeeze-excite block (mean over H, W; a hardsigmoid gate; a multiply), a channel
    concatenation, a residual add + relu, global pooling and linear + relu; every pad is
    TFLite's SAME."""

    def __init__(self):
        super().__init__()
        self.stem = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.BatchNorm2d(8), torch.nn.ReLU())
        self.plain = torch.nn.Conv2d(8, 8, 1, bias=False)
        self.shift = torch.nn.Parameter(torch.randn(1, 8, 1, 1))
        self.dw = torch.nn.Conv2d(8, 8, 3, padding=1, groups=8)
        self.se1 = torch.nn.Conv2d(8, 4, 1)
        self.se2 = torch.nn.Conv2d(4, 8, 1)
        self.mix = torch.nn.Conv2d(16, 8, 1)
        self.fc = torch.nn.Linear(8, 6)

    def forward(self, x):
        x = self.stem(x)
        y = torch.relu(self.plain(x) + self.shift)
        y = torch.nn.functional.relu6(self.dw(y))
        gate = torch.nn.functional.hardsigmoid(self.se2(torch.relu(self.se1(y.mean((2, 3), keepdim=True)))))
        y = y * gate
        y = torch.relu(self.mix(torch.cat([x, y], 1)) + x)
        return torch.relu(self.fc(y.mean((2, 3))))


@pytest.fixture(scope="module")
def small_cnn(tmp_path_factory):
    torch.manual_seed(0)
    model = SmallCnn().eval()
    with torch.no_grad():  # BatchNorm statistics away from the identity
        model.stem[1].running_mean.uniform_(-0.5, 0.5)
        model.stem[1].running_var.uniform_(0.5, 2.0)
    x = torch.randn(2, 3, 12, 12)
    ep = torch.export.export(model, (x,), dynamic_shapes=({0: torch.export.Dim("batch", min=1, max=8)},))
    path = tmp_path_factory.mktemp("cnn") / "cnn.pt2"
    torch.export.save(ep, str(path))
    x3 = torch.randn(3, 3, 12, 12)
    with torch.no_grad():
        want = [model(x).numpy(), model(x3).numpy()]
    return to_tflite(str(path)), [x.numpy(), x3.numpy()], want


@pytest.mark.parametrize("xnnpack", [True, False], ids=["xnnpack", "builtin"])
def test_small_cnn_matches_eager(small_cnn, xnnpack):
    data, xs, want = small_cnn
    got = run_in_child([(data, [x]) for x in xs], xnnpack=xnnpack)
    for g, w in zip(got, want):
        assert not isinstance(g, str), g
        np.testing.assert_allclose(g[0], w, rtol=1e-5, atol=1e-5)


def test_small_cnn_operators(small_cnn):
    """No standalone RELU/RELU6 after a conv, linear or add; the bias-less conv's shift and the
    hardsigmoid's + 3 are their convs' biases (the hardsigmoid is conv+RELU6, MUL); the mean,
    the gate's multiply and the concatenation run in NHWC: the only TRANSPOSE is the input's;
    the pads are SAME (no PAD)."""
    ops = collections.Counter(_ops(small_cnn[0]))
    assert ops["RELU"] == 0 and ops["RELU6"] == 0 and ops["MAXIMUM"] == 0 and ops["MINIMUM"] == 0, ops
    assert ops["TRANSPOSE"] == 1 and ops["PAD"] == 0, ops
    assert ops["ADD"] == 1, ops  # the residual add
    fused = _fused_activations(small_cnn[0])
    relu, relu6 = fuse_activations.ACTIVATION_CODE["RELU"], fuse_activations.ACTIVATION_CODE["RELU6"]
    assert fused == {("CONV_2D", relu): 3, ("CONV_2D", relu6): 1, ("DEPTHWISE_CONV_2D", relu6): 1,
                     ("ADD", relu): 1, ("FULLY_CONNECTED", relu): 1}, fused


# --- NaN, ±inf and float32's limits: fused files give what the unfused ones give ---

SPECIAL = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, 0.5, -2.5, 1e30, -1e30, _F32.max, -_F32.max,
                    1e-40, -1e-40, 3.0, 7.0, -7.0, 5.9, 6.1], np.float32)
X4 = SPECIAL.reshape(1, 1, 4, 5)
X2 = np.stack([SPECIAL, np.roll(SPECIAL, 7)]).reshape(2, 20)


def _model(nodes, inputs, inits) -> onnx.ModelProto:
    out = helper.make_tensor_value_info("y", TP.FLOAT, None)
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(n, TP.FLOAT, list(a.shape)) for n, a in inputs],
                          [out], [onnx.numpy_helper.from_array(np.asarray(v, np.float32), k) for k, v in inits.items()])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)], ir_version=10)


def _conv_case(act: list, bias: bool, group: int = 1, shift: bool = False):
    rng = np.random.default_rng(0)
    c_in, c_out = (2, 2) if group == 2 else (1, 3)
    x = np.concatenate([X4] * c_in, 1)
    inits = {"w": rng.normal(size=(c_out, c_in // group, 2, 2))}
    ins = ["x", "w"] + (["b"] if bias else [])
    if bias:
        inits["b"] = rng.normal(size=c_out)
    nodes = [helper.make_node("Conv", ins, ["c"], group=group)]
    last = "c"
    if shift:
        inits["s"] = rng.normal(size=(1, c_out, 1, 1))
        nodes.append(helper.make_node("Add", ["c", "s"], ["cs"]))
        last = "cs"
    nodes += _activation(act, last, inits)
    return _model(nodes, [("x", x)], inits), [x]


def _activation(act: list, src: str, inits: dict):
    if act == ["Relu"]:
        return [helper.make_node("Relu", [src], ["y"])]
    if act == ["Relu6"]:
        inits.update(lo=np.float32(0), hi=np.float32(6))
        return [helper.make_node("Clip", [src, "lo", "hi"], ["y"])]
    return [helper.make_node("Identity", [src], ["y"])]


def _binary_case(op: str, act: list):
    inits: dict = {}
    nodes = [helper.make_node(op, ["a", "b"], ["c"])] + _activation(act, "c", inits)
    return _model(nodes, [("a", X2), ("b", X2[::-1].copy())], inits), [X2, X2[::-1].copy()]


def _gemm_case(act: list, shift: bool):
    rng = np.random.default_rng(1)
    inits = {"w": rng.normal(size=(20, 4))}
    nodes = [helper.make_node("MatMul", ["x", "w"], ["c"])]
    last = "c"
    if shift:
        inits["s"] = rng.normal(size=4)
        nodes.append(helper.make_node("Add", ["c", "s"], ["cs"]))
        last = "cs"
    return _model(nodes + _activation(act, last, inits), [("x", X2)], inits), [X2]


CASES = {
    "conv+relu": lambda: _conv_case(["Relu"], True),
    "conv+relu6": lambda: _conv_case(["Relu6"], True),
    "conv(no bias)+shift+relu": lambda: _conv_case(["Relu"], False, shift=True),
    "conv(no bias)+shift": lambda: _conv_case([], False, shift=True),
    "depthwise+relu6": lambda: _conv_case(["Relu6"], True, group=2),
    "add+relu": lambda: _binary_case("Add", ["Relu"]),
    "sub+relu6": lambda: _binary_case("Sub", ["Relu6"]),
    "mul+relu": lambda: _binary_case("Mul", ["Relu"]),
    "matmul+shift+relu": lambda: _gemm_case(["Relu"], True),
    "matmul+relu6": lambda: _gemm_case(["Relu6"], False),
}


def _same(fused, plain, exact: bool) -> None:
    assert not isinstance(fused, str) and not isinstance(plain, str), (fused, plain)
    f, p = fused[0], plain[0]
    np.testing.assert_array_equal(np.isnan(f), np.isnan(p))
    np.testing.assert_array_equal(np.isinf(f) * np.sign(f), np.isinf(p) * np.sign(p))
    ok = ~np.isnan(p)
    if exact:
        np.testing.assert_array_equal(f[ok], p[ok])
    else:  # a folded bias is summed first by the kernels: float32 rounding of the sum's order
        np.testing.assert_allclose(f[ok], p[ok], rtol=1e-6, atol=0)


@pytest.mark.parametrize("xnnpack", [True, False], ids=["xnnpack", "builtin"])
def test_fused_files_give_the_unfused_values_on_specials(xnnpack, monkeypatch):
    models = {k: make() for k, make in CASES.items()}
    fused = {k: to_tflite(m) for k, (m, _) in models.items()}
    unfused = tuple(p for p in pipeline.SUBGRAPH_PASSES if p.name not in ("fold biases", "fold affine", "fuse activations"))
    assert len(unfused) == len(pipeline.SUBGRAPH_PASSES) - 3
    monkeypatch.setattr(pipeline, "SUBGRAPH_PASSES", unfused)
    plain = {k: to_tflite(m) for k, (m, _) in models.items()}
    for k in CASES:
        assert len(_ops(fused[k])) < len(_ops(plain[k])), (k, _ops(fused[k]), _ops(plain[k]))
    names = list(CASES)
    got_f = run_in_child([(fused[k], models[k][1]) for k in names], xnnpack=xnnpack)
    got_p = run_in_child([(plain[k], models[k][1]) for k in names], xnnpack=xnnpack)
    for k, f, p in zip(names, got_f, got_p):
        try:
            _same(f, p, exact="shift" not in k)
        except AssertionError as e:
            raise AssertionError(f"{k}: {e}") from None


# --- dilated convolutions over small maps: taps reading only padding are dropped ---

GEOMETRIES = [(4, 12, 12, 1), (4, 36, 36, 1), (4, 6, 6, 1), (3, 5, 4, 2), (5, 2, 2, 1), (6, 3, 3, 2), (3, 1, 1, 1)]


def _exported(model: torch.nn.Module, x: torch.Tensor, dynamic: bool = False) -> bytes:
    shapes = ({0: torch.export.Dim("batch", min=1, max=8)},) if dynamic else None
    buf = io.BytesIO()
    torch.export.save(torch.export.export(model, (x,), dynamic_shapes=shapes), buf)
    return to_tflite(load(buf.getvalue()))


def _check_all(cases: list, want: list) -> None:
    """Every (file, inputs) case against its eager outputs, XNNPACK on and off (one child each)."""
    for xnnpack in (True, False):
        for k, (g, w) in enumerate(zip(run_in_child(cases, xnnpack=xnnpack), want)):
            assert not isinstance(g, str), (k, g)
            np.testing.assert_allclose(g[0], w, rtol=1e-5, atol=1e-5, err_msg=f"case {k}, xnnpack={xnnpack}")


@pytest.mark.parametrize("groups", [1, 4], ids=["conv", "depthwise"])
def test_dilated_convs_over_small_maps_match_eager(groups):
    """(size, pad, dilation, stride): where every tap but the centre reads only padding the conv
    is 1x1 with no PAD; the others keep their taps; all match eager."""
    cases, want = [], []
    for size, pad, dil, stride in GEOMETRIES:
        torch.manual_seed(size * 100 + pad)
        conv = torch.nn.Conv2d(4, 4, 3, padding=pad, dilation=dil, stride=stride, groups=groups).eval()
        x = torch.randn(2, 4, size, size)
        data = _exported(conv, x)
        if stride == 1 and pad == dil >= size:
            assert "PAD" not in _ops(data), (size, pad, dil, _ops(data))
        cases.append((data, [x.numpy()]))
        with torch.no_grad():
            want.append(conv(x).numpy())
    _check_all(cases, want)


# --- the exact GELU written with Erf: one GELU ---

def _erf_gelu(form: str) -> onnx.ModelProto:
    """0.5 * x * (1 + erf(x / sqrt 2)) as pt2x's ONNX writes it below opset 20 ("mul") and as
    torch.onnx's TorchScript exporter does ("div"); "other" scales by 0.7 (not a GELU)."""
    inits = {"half": np.float32(0.5), "one": np.float32(1.0), "s": np.float32(1 / np.sqrt(2)),
             "r2": np.float32(np.sqrt(2)), "c": np.float32(0.7)}
    if form == "div":
        nodes = [helper.make_node("Div", ["x", "r2"], ["a"]), helper.make_node("Erf", ["a"], ["e"]),
                 helper.make_node("Add", ["e", "one"], ["p"]), helper.make_node("Mul", ["x", "p"], ["m"]),
                 helper.make_node("Mul", ["m", "half"], ["y"])]
    else:
        nodes = [helper.make_node("Mul", ["half", "x"], ["h"]),
                 helper.make_node("Mul", ["x", "s" if form == "mul" else "c"], ["a"]),
                 helper.make_node("Erf", ["a"], ["e"]), helper.make_node("Add", ["one", "e"], ["p"]),
                 helper.make_node("Mul", ["h", "p"], ["y"])]
    return _model(nodes, [("x", X2)], inits)


def _matches_ort(m: onnx.ModelProto, specials: bool) -> None:
    """``m`` (one input x) again over -6..6, and X2's NaN, ±inf and float32 limits when
    ``specials``: LiteRT (XNNPACK on and off) gives ONNX Runtime's values, NaN where it has NaN."""
    import onnxruntime as ort

    x = np.linspace(-6, 6, 40, dtype=np.float32).reshape(2, 20)
    if specials:
        x = np.concatenate([X2, x])
    m2 = _model(list(m.graph.node), [("x", x)], {t.name: onnx.numpy_helper.to_array(t) for t in m.graph.initializer})
    data = to_tflite(m2)
    (want,) = ort.InferenceSession(m2.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})
    for xnnpack in (True, False):
        (got,) = run_in_child([(data, [x])], xnnpack=xnnpack)
        assert not isinstance(got, str), got
        np.testing.assert_array_equal(np.isnan(got[0]), np.isnan(want))
        ok = np.isfinite(want)
        np.testing.assert_allclose(got[0][ok], want[ok], rtol=1e-5, atol=1e-6)


def _pt2_gelus_match_eager(model: torch.nn.Module, unfused: str) -> None:
    """``model`` exported and saved by torch: its two GELUs are two GELU operators (no
    ``unfused`` operator of the written-out form is left), matching eager with XNNPACK on and off."""
    x = torch.randn(3, 8) * 3
    buf = io.BytesIO()
    torch.export.save(torch.export.export(model, (x,)), buf)
    data = to_tflite(load(buf.getvalue()))
    ops = collections.Counter(_ops(data))
    assert ops["GELU"] == 2 and ops[unfused] == 0, ops
    with torch.no_grad():
        want = model(x).numpy()
    for xnnpack in (True, False):
        (got,) = run_in_child([(data, [x.numpy()])], xnnpack=xnnpack)
        np.testing.assert_allclose(got[0], want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("form", ["mul", "div", "other"])
def test_erf_gelu_is_one_gelu(form):
    m = _erf_gelu(form)
    data = to_tflite(m)
    ops = _ops(data)
    if form == "other":
        assert "GELU" not in ops and "EXP" in ops, ops
    else:
        assert ops == ["GELU"], ops
    # the specials only for a GELU (the Erf polynomial's tail is not exact at ±inf)
    _matches_ort(m, specials=form != "other")


def test_gelu_from_a_pt2_is_one_gelu(tmp_path):
    """torch's exact GELU in a .pt2 (pt2x's ONNX at the TFLite target's opset 18 writes it with
    Erf) is one GELU per use, matching eager."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Linear(16, 4), torch.nn.GELU())
    _pt2_gelus_match_eager(model, unfused="EXP")


# --- the tanh-approximate GELU written out: one GELU(approximate) ---

def _tanh_gelu(form: str) -> onnx.ModelProto:
    """0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3))) with x^3 as Pow ("pow", GPT-2's
    NewGELUActivation) or as x * (x * x) ("mul", pt2x's ONNX of torch's gelu(approximate="tanh")
    below opset 20); "other" has 0.05 for 0.044715 (not a GELU)."""
    inits = {"half": np.float32(0.5), "one": np.float32(1.0), "three": np.float32(3.0),
             "k": np.float32(0.05 if form == "other" else 0.044715), "s": np.float32(np.sqrt(2 / np.pi))}
    if form == "pow":
        cube = [helper.make_node("Pow", ["x", "three"], ["x3"])]
    else:
        cube = [helper.make_node("Mul", ["x", "x"], ["x2"]), helper.make_node("Mul", ["x", "x2"], ["x3"])]
    nodes = cube + [helper.make_node("Mul", ["k", "x3"], ["kx3"]), helper.make_node("Add", ["x", "kx3"], ["in"]),
                    helper.make_node("Mul", ["in", "s"], ["si"]), helper.make_node("Tanh", ["si"], ["t"]),
                    helper.make_node("Add", ["t", "one"], ["p"]), helper.make_node("Mul", ["half", "x"], ["h"]),
                    helper.make_node("Mul", ["h", "p"], ["y"])]
    return _model(nodes, [("x", X2)], inits)


@pytest.mark.parametrize("form", ["pow", "mul", "other"])
def test_tanh_gelu_is_one_gelu(form):
    m = _tanh_gelu(form)
    ops = _ops(to_tflite(m))
    if form == "other":
        assert "GELU" not in ops and "TANH" in ops, ops
    else:
        assert ops == ["GELU"], ops
    # the specials only for a GELU (LiteRT's separate kernels saturate ±inf: "NaN and infinity")
    _matches_ort(m, specials=form != "other")


class NewGelu(torch.nn.Module):
    """GPT-2's activation as transformers writes it (``NewGELUActivation``)."""

    def forward(self, x):
        return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))


def test_tanh_gelu_from_a_pt2_is_one_gelu(tmp_path):
    """torch's gelu(approximate="tanh") and GPT-2's written-out form in a .pt2: one GELU each."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(approximate="tanh"), torch.nn.Linear(16, 4),
                                NewGelu())
    _pt2_gelus_match_eager(model, unfused="TANH")


# --- reductions and concatenations of NHWC values: every axis, kept or dropped ---

class ReduceAfterConv(torch.nn.Module):
    def __init__(self, how: str):
        super().__init__()
        self.how = how
        self.a = torch.nn.Conv2d(3, 4, 3, padding=1)
        self.b = torch.nn.Conv2d(3, 4, 1)

    def forward(self, x):
        y = self.a(x)
        return {
            "mean_h": lambda: y.mean(2),
            "sum_w_keep": lambda: y.sum(3, keepdim=True),
            "amax_cw": lambda: y.amax((1, 3)),
            "amin_c_keep": lambda: y.amin(1, keepdim=True),
            "mean_all": lambda: y.mean((1, 2, 3)),
            "cat_c": lambda: torch.relu(torch.cat([y, self.b(x)], 1)),
            "cat_h": lambda: torch.cat([y, self.b(x)], 2),
            "cat_w_const": lambda: torch.cat([y, torch.ones(1, 4, 6, 2).expand(y.shape[0], 4, 6, 2)], 3),
        }[self.how]()


HOWS = ["mean_h", "sum_w_keep", "amax_cw", "amin_c_keep", "mean_all", "cat_c", "cat_h", "cat_w_const"]


def test_reductions_and_concatenations_in_nhwc_match_eager():
    """Each after a conv, with a dynamic batch (batches 2 and 3); the kept-dims and channel
    cases keep at most the two edge transposes."""
    cases, want = [], []
    for how in HOWS:
        torch.manual_seed(1)
        model = ReduceAfterConv(how).eval()
        x, x3 = torch.randn(2, 3, 6, 5), torch.randn(3, 3, 6, 5)
        data = _exported(model, x, dynamic=True)
        if how.startswith("cat_c") or how in ("sum_w_keep", "amin_c_keep"):
            assert _ops(data).count("TRANSPOSE") <= 2, (how, _ops(data))
        for xi in (x, x3):
            cases.append((data, [xi.numpy()]))
            with torch.no_grad():
                want.append(model(xi).numpy())
    _check_all(cases, want)
