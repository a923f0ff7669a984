"""NaN and infinity through the TFLite target: single-op float ONNX models fed NaN, ±inf, ±0,
subnormals and values near float32's limits, converted with ``to_tflite`` and run in LiteRT (in
a child process, XNNPACK on and off), compared with ONNX Runtime: NaN where it has NaN, the same
infinities, and finite values within float32's tolerance.

Where LiteRT's kernels give another answer, docs/tflite.md ("NaN and infinity") says so and
``DIFFERS`` names the case: the test fails when a documented difference goes away, or a new one
appears, so the page stays true.
"""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto as TP
from onnx import helper

from litert_child import run_in_child
from pt2x.converters import to_tflite
from pt2x.converters.errors import UnsupportedOpsError

_F32 = np.finfo(np.float32)
# one row of every special value, a second row of ordinary ones (pools and reductions see both)
SPECIAL = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, 0.5, -2.5, 88.0, -88.0, 100.0, -104.0,
                    1e30, -1e30, _F32.max, -_F32.max, 1e-40, -1e-40, 3.0], np.float32)
ORDINARY = np.linspace(-3.0, 3.0, SPECIAL.size, dtype=np.float32)
X = np.stack([SPECIAL, ORDINARY])  # [2, 20]
Y = np.stack([np.roll(SPECIAL, 7), np.roll(SPECIAL, 3)])  # every pairing of specials, NaN on both sides
# pools: the specials without ±1e30 and ±max, whose sums cancel in an order-dependent way
X4 = np.where(np.isfinite(X) & (np.abs(X) >= 1e30), np.sign(X) * 1e3, X).astype(np.float32).reshape(1, 2, 4, 5)

_UNARY = ["Relu", "Sigmoid", "Tanh", "Exp", "Log", "Sqrt", "Abs", "Neg", "Floor", "Ceil", "Round", "Sign", "Sin",
          "Cos", "HardSwish", "Reciprocal", "Erf", "Softplus", "Atan", "Elu", "IsNaN", "Identity"]
_BINARY = ["Add", "Sub", "Mul", "Div", "Pow", "Max", "Min", "Sum", "Equal", "Less", "Greater", "LessOrEqual",
           "GreaterOrEqual"]
CASES = (
    [(op, {}, ["x"]) for op in _UNARY]
    + [(op, {}, ["x", "y"]) for op in _BINARY]
    + [
        ("PRelu", {}, ["x", ("c", np.float32(0.25))]),
        ("LeakyRelu", {"alpha": 0.1}, ["x"]), ("HardSigmoid", {}, ["x"]), ("HardSigmoid", {"alpha": 1 / 6}, ["x"]),
        ("Gelu", {}, ["x"]), ("Gelu", {"approximate": "tanh"}, ["x"]),
        ("Clip", {}, ["x", ("c", np.float32(-1.5)), ("c", np.float32(2.0))]),
        ("Clip", {}, ["x", ("c", np.float32(0.0)), ("c", np.float32(6.0))]),
        ("Clip", {}, ["x", ("c", np.float32(0.0))]),
        ("IsInf", {}, ["x"]), ("IsInf", {"detect_negative": 0}, ["x"]), ("IsInf", {"detect_positive": 0}, ["x"]),
        ("IsInf", {"detect_negative": 0, "detect_positive": 0}, ["x"]),
        ("Where", {}, [("b", X > 0), "x", "y"]),
        ("Cast", {"to": TP.FLOAT16}, ["x"]), ("Cast", {"to": TP.DOUBLE}, ["x"]),
        ("Softmax", {"axis": -1}, ["x"]), ("LogSoftmax", {"axis": -1}, ["x"]),
        ("ReduceMax", {"keepdims": 0}, ["x", ("i64", [1])]), ("ReduceMin", {"keepdims": 0}, ["x", ("i64", [1])]),
        ("ReduceSum", {"keepdims": 0}, ["x", ("i64", [1])]), ("ReduceMean", {"keepdims": 0}, ["x", ("i64", [1])]),
        ("ReduceLogSumExp", {"keepdims": 0}, ["x", ("i64", [1])]),
        ("ArgMax", {"axis": 1}, ["x"]), ("ArgMin", {"axis": 1}, ["x"]),
        ("TopK", {"axis": -1}, ["x", ("i64", [5])]),
        ("MaxPool", {"kernel_shape": [2, 2]}, ["x4"]), ("AveragePool", {"kernel_shape": [2, 2]}, ["x4"]),
        ("GlobalMaxPool", {}, ["x4"]), ("GlobalAveragePool", {}, ["x4"]),
    ]
)

# case label -> what LiteRT 2.3.0 does differently (docs/tflite.md, "NaN and infinity");
# "builtin": LiteRT's own kernels (no delegate), "XNNPACK": its default delegate
_SATURATES = "builtin: a result of ±inf becomes ±3.4e38 (float32's max: the kernel's activation clamp)"
DIFFERS = {
    "Add(x, y)": _SATURATES, "Sub(x, y)": _SATURATES, "Mul(x, y)": _SATURATES, "Div(x, y)": _SATURATES,
    "Sum(x, y)": _SATURATES, "Reciprocal(x)": _SATURATES, "Softplus(x)": _SATURATES,
    "Max(x, y)": "NaN loses to the other operand (ONNX Runtime: NaN)",
    "Min(x, y)": "NaN loses to the other operand (ONNX Runtime: NaN)",
    "Clip(x, -1.5, 2.0)": "builtin: NaN becomes the lower bound (MAXIMUM/MINIMUM drop NaN)",
    "HardSigmoid(x)": "builtin: NaN becomes 0 (MAXIMUM/MINIMUM drop NaN)",
    "Clip(x, 0.0)": "+inf stays +inf as in torch.clamp; ONNX Runtime gives float32's max (the ONNX default bound)",
    "Exp(x)": "XNNPACK: exp(NaN) is 0",
    "Log(x)": "XNNPACK: NaN and +inf give 88.4-88.8, subnormals -inf, x near float32's max 88.38",
    "Sqrt(x)": "XNNPACK: wrong for x >= 2^126 (8.5e37); a subnormal is 0 (its sign kept)",
    "Floor(x)": "XNNPACK: a subnormal is ±0 (floor(-1e-45) = -0, not -1)",
    "Ceil(x)": "XNNPACK: a subnormal is ±0 (ceil(1e-45) = 0, not 1)",
    "Sin(x)": "XNNPACK: relative error above 1e-5 for |x| > 1.4e6, NaN for |x| > 8e17",
    "Cos(x)": "XNNPACK: relative error above 1e-5 for |x| > 4e6, NaN for |x| > 8e17",
    "ReduceMax(x, [1]){'keepdims': 0}": "NaN is skipped (ONNX Runtime: NaN)",
    "ReduceMin(x, [1]){'keepdims': 0}": "NaN is skipped (ONNX Runtime: NaN)",
    "ReduceLogSumExp(x, [1]){'keepdims': 0}": "XNNPACK: NaN is skipped (exp(NaN) is 0)",
    "ArgMax(x){'axis': 1}": "NaN is skipped (ONNX Runtime: the NaN's index)",
    "ArgMin(x){'axis': 1}": "NaN is skipped (ONNX Runtime: the NaN's index)",
    "TopK(x, [5]){'axis': -1}": "NaN is skipped (ONNX Runtime: NaN ranks first)",
    "MaxPool(x4){'kernel_shape': [2, 2]}": "builtin: +inf becomes 3.4e38; XNNPACK: a window holding NaN gives -inf",
    "AveragePool(x4){'kernel_shape': [2, 2]}": "builtin: ±inf becomes ±3.4e38; XNNPACK: a window holding NaN gives -inf",
}


def _cpu_flags() -> set[str]:
    try:
        with open("/proc/cpuinfo") as f:
            return {w for line in f if line.startswith("flags") for w in line.split(":", 1)[1].split()}
    except OSError:
        return set()


# differences of one CPU's XNNPACK kernels: documented where they happen, never required elsewhere
DIFFERS_BY_CPU = {
    "Sigmoid(x)": ("avx512f", "XNNPACK on CPUs with AVX-512: ±inf gives NaN (the builtin kernel: 1 and 0)"),
}
DIFFERS.update({k: why for k, (flag, why) in DIFFERS_BY_CPU.items() if flag in _cpu_flags()})


def _label(op: str, attrs: dict, operands) -> str:
    args = ", ".join(o if isinstance(o, str) else "cond" if o[0] == "b" else str(np.asarray(o[1]).tolist())
                     for o in operands)
    return f"{op}({args}){attrs if attrs else ''}"


def _case(op, attrs, operands):
    inputs, feeds, inits, names = [], [], [], []
    for k, spec in enumerate(operands):
        name = f"in{k}"
        names.append(name)
        if isinstance(spec, str):
            arr = {"x": X, "y": Y, "x4": X4}[spec]
            inputs.append(helper.make_tensor_value_info(name, TP.FLOAT, list(arr.shape)))
            feeds.append(arr)
        elif spec[0] == "b":
            inputs.append(helper.make_tensor_value_info(name, TP.BOOL, list(spec[1].shape)))
            feeds.append(spec[1])
        else:
            value = np.asarray(spec[1], np.int64 if spec[0] == "i64" else np.float32)
            inits.append(onnx.numpy_helper.from_array(value, name))
    n_out = 2 if op == "TopK" else 1
    node = helper.make_node(op, names, [f"out{k}" for k in range(n_out)], **attrs)
    outs = [helper.make_tensor_value_info(o, TP.UNDEFINED, None) for o in node.output]
    m = helper.make_model(helper.make_graph([node], op, inputs, outs, inits),
                          opset_imports=[helper.make_opsetid("", 20 if op == "Gelu" else 18)], ir_version=10)
    return onnx.shape_inference.infer_shapes(m, strict_mode=True), feeds


def _verdict(want, got) -> str:
    if isinstance(got, str):
        return got
    for k, (w, g) in enumerate(zip(want, got)):
        w = np.asarray(w)
        if g.shape != w.shape:
            return f"output {k}: shape {g.shape} != {w.shape}"
        if w.dtype.kind != "f":
            bad = g != w
        else:
            w32, g32 = w.astype(np.float32), g.astype(np.float32)
            nan_w, nan_g = np.isnan(w32), np.isnan(g32)
            with np.errstate(invalid="ignore", over="ignore"):
                close = np.isclose(g32, w32, rtol=2e-5, atol=1e-6) | (nan_w & nan_g)
            bad = ~close
        if bad.any():
            at = np.flatnonzero(bad)[:4]
            return f"output {k}: at {at.tolist()} LiteRT gives {g.ravel()[at].tolist()}, ONNX Runtime {w.ravel()[at].tolist()}"
    return "match"


def _outcomes() -> dict[str, str]:
    outcomes, converted = {}, []
    for op, attrs, operands in CASES:
        label = _label(op, attrs, operands)
        m, feeds = _case(op, attrs, operands)
        sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
        want = sess.run(None, {inp.name: f for inp, f in zip(sess.get_inputs(), feeds)})
        try:
            data = to_tflite(m)
        except UnsupportedOpsError as e:
            outcomes[label] = f"refused: {str(e).splitlines()[-1].strip()}"
            continue
        converted.append((label, data, feeds, want))
    runs = [(data, feeds) for _, data, feeds, _ in converted]
    with np.errstate(invalid="ignore"):
        plain, xnnpack = run_in_child(runs), run_in_child(runs, xnnpack=True)
    for (label, _, _, want), g, gx in zip(converted, plain, xnnpack):
        v, vx = _verdict(want, g), _verdict(want, gx)
        outcomes[label] = v if v == vx else f"builtin: {v}; XNNPACK: {vx}"
    return outcomes


@pytest.fixture(scope="module")
def outcomes():
    return _outcomes()


def test_nan_and_inf_as_onnx_runtime_or_documented(outcomes):
    differ = {k: v for k, v in outcomes.items() if v != "match" and not v.startswith("refused")}
    undocumented = {k: v for k, v in differ.items() if k not in DIFFERS}
    assert not undocumented, "\n".join(f"{k}: {v}" for k, v in sorted(undocumented.items()))
    gone = set(DIFFERS) - set(differ)
    assert not gone, f"documented differences that no longer happen (update docs/tflite.md): {sorted(gone)}"


def test_no_case_is_refused(outcomes):
    refused = {k: v for k, v in outcomes.items() if v.startswith("refused")}
    assert not refused, refused


def test_float_mod_with_fmod_0_is_refused_as_onnx_runtime_does():
    m, _ = _case("Mod", {"fmod": 0}, ["x", "y"])
    with pytest.raises(ort.capi.onnxruntime_pybind11_state.Fail):  # ONNX Runtime: invalid for floats
        ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"in0": X, "in1": Y})
    with pytest.raises(UnsupportedOpsError, match="fmod must be 1 for floating-point types"):
        to_tflite(m)


def test_softplus_keeps_its_relative_precision_far_below_zero():
    """softplus(x) ~ exp(x) for x << 0: LOG(1 + u) lost 1 + u's rounding there (0.3% at x = -10 in
    Mish, which ONNX's own test data holds), and XNNPACK's LOG near 1 half the result at -15."""
    xs = np.linspace(-20, 20, 4001, dtype=np.float32)
    g = helper.make_graph([helper.make_node("Softplus", ["x"], ["y"])], "softplus",
                          [helper.make_tensor_value_info("x", TP.FLOAT, [xs.size])],
                          [helper.make_tensor_value_info("y", TP.FLOAT, [xs.size])])
    data = to_tflite(helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)], ir_version=10))
    want = np.logaddexp(0, xs.astype(np.float64))
    for got in run_in_child([(data, [xs])]) + run_in_child([(data, [xs])], xnnpack=True):
        assert not isinstance(got, str), got
        np.testing.assert_allclose(got[0], want, rtol=2e-6)
