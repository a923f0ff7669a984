"""Single ONNX ops built with onnx's helper, converted and run in LiteRT against ONNX Runtime on
the same model: the mappers whose semantics are easy to get subtly wrong (run-time sizes,
negative indices, copies of dims, per-axis resize modes, the Erf polynomial, bf16 rounding)."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

import aten_op_cases
import tflite_zoo
from pt2x.converters import to_tflite
from pt2x.converters.errors import UnsupportedOpsError

F, I64 = TensorProto.FLOAT, TensorProto.INT64


def _model(nodes, inputs, outputs, inits=()):
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(n, t, s) for n, t, s in inputs],
                          [helper.make_tensor_value_info(n, t, None) for n, t in outputs], list(inits))
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)], ir_version=10)


def _compare(m, feeds_list, atol=1e-5):
    it = tflite_zoo.interpreter(to_tflite(m))
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    names = [i.name for i in sess.get_inputs()]
    for feeds in feeds_list:
        want = sess.run(None, dict(zip(names, feeds)))
        got = tflite_zoo.run(it, feeds)
        for w, g in zip(want, got):
            assert g.shape == w.shape
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=atol)


def test_resize_pytorch_half_pixel_to_run_time_sizes_including_one():
    m = _model([helper.make_node("Resize", ["x", "", "", "sizes"], ["y"], mode="linear",
                                 coordinate_transformation_mode="pytorch_half_pixel")],
               [("x", F, ["n", "c", "h", "w"]), ("sizes", I64, [4])], [("y", F)])
    x = np.random.default_rng(0).standard_normal((1, 2, 4, 6)).astype(np.float32)
    _compare(m, [[x, np.array(s, np.int64)] for s in ([1, 2, 1, 5], [1, 2, 3, 1], [1, 2, 7, 9], [1, 2, 1, 1])])


def test_gather_elements_negative_indices():
    m = _model([helper.make_node("GatherElements", ["x", "i"], ["y"], axis=1)],
               [("x", F, ["n", 5]), ("i", I64, ["n", 3])], [("y", F)])
    rng = np.random.default_rng(0)
    _compare(m, [[rng.standard_normal((b, 5)).astype(np.float32), rng.integers(-5, 5, (b, 3))] for b in (2, 4)])


def test_reshape_zero_copies_a_run_time_dim():
    shape = helper.make_tensor("s", I64, [3], [0, -1, 2])
    m = _model([helper.make_node("Reshape", ["x", "s"], ["y"])], [("x", F, ["n", 6])], [("y", F)], [shape])
    rng = np.random.default_rng(0)
    _compare(m, [[rng.standard_normal((b, 6)).astype(np.float32)] for b in (1, 5)])


def test_erf_polynomial():
    m = _model([helper.make_node("Erf", ["x"], ["y"])], [("x", F, ["n"])], [("y", F)])
    _compare(m, [[np.linspace(-6, 6, 1001, dtype=np.float32)]], atol=2e-7)


def test_bfloat16_rounding_ties_to_even():
    """Cast to bf16 and back: the bits ML frameworks round to (ties to even), checked against ml_dtypes."""
    import ml_dtypes

    m = _model([helper.make_node("Cast", ["x"], ["b"], to=TensorProto.BFLOAT16),
                helper.make_node("Cast", ["b"], ["y"], to=F)], [("x", F, ["n"])], [("y", F)])
    rng = np.random.default_rng(0)
    x = np.concatenate([rng.standard_normal(1000).astype(np.float32) * 100,
                        np.array([1 + 2**-8, 1 + 3 * 2**-8, -(1 + 2**-8), 0.0, -0.0], np.float32)])
    (got,) = tflite_zoo.run(tflite_zoo.interpreter(to_tflite(m)), [x])
    np.testing.assert_array_equal(got, x.astype(ml_dtypes.bfloat16).astype(np.float32))


@pytest.mark.parametrize("op,attrs", [("Softplus", {}), ("Atan", {}), ("HardSigmoid", {"alpha": 0.3}),
                                      ("LeakyRelu", {"alpha": 0.2}), ("Gelu", {"approximate": "tanh"})])
def test_unary_decompositions(op, attrs):
    m = _model([helper.make_node(op, ["x"], ["y"], **attrs)], [("x", F, ["n"])], [("y", F)])
    m.opset_import[0].version = 20 if op == "Gelu" else 18
    _compare(m, [[np.linspace(-30, 30, 601, dtype=np.float32)]])


def test_integer_div_truncates_and_mod_floors():
    m = _model([helper.make_node("Div", ["a", "b"], ["q"]), helper.make_node("Mod", ["a", "b"], ["r"])],
               [("a", I64, ["n"]), ("b", I64, ["n"])], [("q", I64), ("r", I64)])
    a = np.array([-7, 7, -7, 7, 0, -1], np.int64)
    b = np.array([2, 2, -2, -2, 3, 5], np.int64)
    _compare(m, [[a, b]])


@pytest.mark.parametrize("starts,ends,axes,steps", [
    ([1], [2**62], [1], [1]), ([-1], [-2**62], [1], [-1]), ([0, 1], [-1, 5], [0, 1], [2, 2]),
    ([3], [0], [-1], [-2]), ([-100], [100], [0], [1])])
def test_slice_clamps_like_onnx(starts, ends, axes, steps):
    inits = [helper.make_tensor(n, I64, [len(v)], v) for n, v in
             (("st", starts), ("en", ends), ("ax", axes), ("sp", steps))]
    m = _model([helper.make_node("Slice", ["x", "st", "en", "ax", "sp"], ["y"])], [("x", F, ["n", 6])], [("y", F)], inits)
    rng = np.random.default_rng(0)
    _compare(m, [[rng.standard_normal((b, 6)).astype(np.float32)] for b in (4, 7)])


def test_conv_transpose_pads_and_output_padding():
    rng = np.random.default_rng(0)
    w = helper.make_tensor("w", F, [3, 2, 3, 3], rng.standard_normal(54).astype(np.float32))
    m = _model([helper.make_node("ConvTranspose", ["x", "w"], ["y"], strides=[2, 2], pads=[1, 0, 2, 1],
                                 output_padding=[1, 1])], [("x", F, ["n", 3, "h", "w"])], [("y", F)], [w])
    _compare(m, [[rng.standard_normal(s).astype(np.float32)] for s in ((1, 3, 4, 5), (2, 3, 6, 3))], atol=1e-4)


def test_gather_negative_run_time_index_fails_loudly():
    """TFLite's GATHER does not wrap negative indices (pt2x normalises constant ones): a run-time
    -1 makes invoke() fail ("gather index out of bounds"), never read a wrong element."""
    m = _model([helper.make_node("Gather", ["x", "i"], ["y"], axis=0)], [("x", F, [4]), ("i", I64, [2])], [("y", F)])
    it = tflite_zoo.interpreter(to_tflite(m))
    with pytest.raises(RuntimeError, match="out of bounds"):
        tflite_zoo.run(it, [np.arange(4, dtype=np.float32), np.array([-1, 0], np.int64)])


def test_scatter_add_with_duplicate_indices():
    """reduction="add" (torch scatter_add / index_put accumulate): duplicates sum, as ONNX says."""
    m = _model([helper.make_node("ScatterElements", ["x", "i", "u"], ["y"], axis=1, reduction="add"),
                helper.make_node("ScatterND", ["x", "j", "v"], ["z"], reduction="add")],
               [("x", F, ["n", 5]), ("i", I64, ["n", 3]), ("u", F, ["n", 3]), ("j", I64, [4, 1]), ("v", F, [4, 5])],
               [("y", F), ("z", F)])
    rng = np.random.default_rng(0)
    feeds = [rng.standard_normal((3, 5)).astype(np.float32), np.array([[0, 0, 4], [1, 1, 1], [-1, 2, 2]]),
             rng.standard_normal((3, 3)).astype(np.float32), np.array([[0], [2], [0], [1]]),
             rng.standard_normal((4, 5)).astype(np.float32)]
    _compare(m, [feeds])


def test_scatter_without_reduction_is_refused():
    from pt2x.converters.errors import UnsupportedOpsError

    m = _model([helper.make_node("ScatterND", ["x", "j", "v"], ["z"])],
               [("x", F, [3, 5]), ("j", I64, [2, 1]), ("v", F, [2, 5])], [("z", F)])
    with pytest.raises(UnsupportedOpsError, match="reduction='none'"):
        to_tflite(m)


@pytest.mark.parametrize("group,xnnpack", [(1, True), (1, False), (2, False), (4, False)])
def test_conv_without_bias(group, xnnpack):
    """Conv with no bias input (wav2vec2's feature extractor, LRASPP's head): LiteRT's CONV_2D
    kernel reads input 2 whenever it is listed, so pt2x gives zeros."""
    rng = np.random.default_rng(0)
    w = helper.make_tensor("w", F, [4, 4 // group, 3, 3], rng.standard_normal(4 * (4 // group) * 9).astype(np.float32))
    m = _model([helper.make_node("Conv", ["x", "w"], ["y"], group=group, pads=[1, 1, 1, 1])],
               [("x", F, ["n", 4, 5, 5])], [("y", F)], [w])
    it = tflite_zoo.interpreter(to_tflite(m), xnnpack=xnnpack)
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    x = rng.standard_normal((2, 4, 5, 5)).astype(np.float32)
    np.testing.assert_allclose(tflite_zoo.run(it, [x])[0], sess.run(None, {"x": x})[0], rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("xnnpack", [True, False], ids=["xnnpack", "builtin"])
@pytest.mark.parametrize("starts,ends,axes", [([0], [0], [1]), ([0, 2], [2, 0], [0, 1]), ([1, 0], [0, 0], [0, 1])])
def test_empty_slices_stay_empty(starts, ends, axes, xnnpack):
    """XNNPACK reads a STRIDED_SLICE end of 0 as "to the end" (x[:, 0:0] came back whole):
    pt2x empties such axes with a GATHER of no indices. Checked through a Concat, which an
    empty slice must leave unchanged, and directly."""
    inits = [helper.make_tensor(n, I64, [len(v)], v) for n, v in (("st", starts), ("en", ends), ("ax", axes))]
    nodes = [helper.make_node("Slice", ["x", "st", "en", "ax"], ["s"])]
    outs = [("s", F)]
    if axes == [1]:
        nodes.append(helper.make_node("Concat", ["s", "x"], ["y"], axis=1))
        outs.append(("y", F))
    m = _model(nodes, [("x", F, ["n", 6])], outs, inits)
    it = tflite_zoo.interpreter(to_tflite(m), xnnpack=xnnpack)
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    x = np.random.default_rng(0).standard_normal((3, 6)).astype(np.float32)
    for w, g in zip(sess.run(None, {"x": x}), tflite_zoo.run(it, [x])):
        assert g.shape == w.shape and np.array_equal(g, w)


@pytest.mark.parametrize("causal,mask", [(1, None), (0, "bool"), (1, "float")])
def test_attention_opset_23(causal, mask):
    """ONNX Attention (opset 23) with L != S, grouped heads (4 query / 2 key-value), causal
    (upper-left aligned) and masks, against ONNX Runtime."""
    ins = [("q", F, ["b", 4, 3, 8]), ("k", F, ["b", 2, 5, 8]), ("v", F, ["b", 2, 5, 8])]
    names = ["q", "k", "v"]
    if mask:
        ins.append(("m", TensorProto.BOOL if mask == "bool" else F, [3, 5]))
        names.append("m")
    m = _model([helper.make_node("Attention", names, ["y"], is_causal=causal)], ins, [("y", F)])
    m.opset_import[0].version = 23
    rng = np.random.default_rng(0)
    feeds = [rng.standard_normal((2, h, s, 8)).astype(np.float32) for h, s in ((4, 3), (2, 5), (2, 5))]
    if mask == "bool":
        feeds.append(np.array([[1, 1, 0, 1, 0], [0, 1, 1, 1, 1], [1, 0, 0, 0, 1]], bool))
    elif mask == "float":
        feeds.append(rng.standard_normal((3, 5)).astype(np.float32))
    _compare(m, [feeds])


def test_rms_normalization_opset_23():
    rng = np.random.default_rng(0)
    scale = helper.make_tensor("s", F, [8], rng.standard_normal(8).astype(np.float32))
    m = _model([helper.make_node("RMSNormalization", ["x", "s"], ["y"], epsilon=1e-6)],
               [("x", F, ["b", "t", 8])], [("y", F)], [scale])
    m.opset_import[0].version = 23
    _compare(m, [[rng.standard_normal((2, 3, 8)).astype(np.float32)], [rng.standard_normal((1, 5, 8)).astype(np.float32)]])


def test_instance_and_layer_normalization():
    """Both normalise over their axes with one shared decomposition: each against ONNX Runtime,
    dynamic batch and sizes, inputs far from zero mean and unit variance."""
    rng = np.random.default_rng(0)
    scale = helper.make_tensor("s", F, [3], rng.standard_normal(3).astype(np.float32))
    bias = helper.make_tensor("b", F, [3], rng.standard_normal(3).astype(np.float32))
    m = _model([helper.make_node("InstanceNormalization", ["x", "s", "b"], ["y"], epsilon=1e-5)],
               [("x", F, ["n", 3, "h", "w"])], [("y", F)], [scale, bias])
    _compare(m, [[rng.standard_normal((2, 3, 5, 4)).astype(np.float32) * 3 + 1],
                 [rng.standard_normal((1, 3, 7, 6)).astype(np.float32) * 3 + 1]])
    m = _model([helper.make_node("LayerNormalization", ["x", "s", "b"], ["y"], axis=-1, epsilon=1e-5)],
               [("x", F, ["n", "t", 3])], [("y", F)], [scale, bias])
    _compare(m, [[rng.standard_normal((2, 4, 3)).astype(np.float32) * 3 + 1],
                 [rng.standard_normal((1, 6, 3)).astype(np.float32) * 3 + 1]])


@pytest.mark.parametrize("op,mode,c", [("DepthToSpace", "DCR", 8), ("DepthToSpace", "CRD", 8), ("SpaceToDepth", None, 2)])
def test_depth_space_blocks(op, mode, c):
    """pixel_shuffle / pixel_unshuffle: both ONNX modes, run-time N, H, W."""
    kw = {"blocksize": 2} | ({"mode": mode} if mode else {})
    m = _model([helper.make_node(op, ["x"], ["y"], **kw)], [("x", F, ["n", c, "h", "w"])], [("y", F)])
    rng = np.random.default_rng(0)
    _compare(m, [[rng.standard_normal((n, c, h, w)).astype(np.float32)] for n, h, w in ((1, 2, 4), (2, 6, 8))])


def test_one_hot_and_non_zero():
    depth = helper.make_tensor("d", I64, [1], [5])
    values = helper.make_tensor("v", F, [2], [-1.0, 3.0])
    m = _model([helper.make_node("OneHot", ["i", "d", "v"], ["y"], axis=1), helper.make_node("NonZero", ["x"], ["z"])],
               [("i", I64, ["n", 2]), ("x", F, ["n", 3])], [("y", F), ("z", I64)], [depth, values])
    x = np.array([[0, 1.5, 0], [2, 0, -1]], np.float32)
    _compare(m, [[np.array([[0, 4], [-1, 2]], np.int64), x], [np.array([[3, -5], [1, 1], [0, 0]], np.int64), x[:1]]])


@pytest.mark.parametrize("elem,dtype", [(TensorProto.INT32, np.int32), (I64, np.int64), (TensorProto.INT16, np.int16),
                                        (TensorProto.INT8, np.int8), (TensorProto.UINT8, np.uint8)],
                         ids=["int32", "int64", "int16", "int8", "uint8"])
def test_bitwise_not_and_xor(elem, dtype):
    """BitwiseNot as BITWISE_XOR with all ones, BitwiseXor as BITWISE_XOR (it was NOT_EQUAL: a bool)."""
    m = _model([helper.make_node("BitwiseNot", ["x"], ["n"]), helper.make_node("BitwiseXor", ["x", "y"], ["z"])],
               [("x", elem, ["b", 4]), ("y", elem, [1, 4])], [("n", elem), ("z", elem)])
    info = np.iinfo(dtype)
    lo, hi = max(info.min, -(2**31)), min(info.max, 2**31 - 1)
    rng = np.random.default_rng(0)
    feeds = [[rng.integers(lo, hi, (b, 4), endpoint=True).astype(dtype),
              rng.integers(lo, hi, (1, 4), endpoint=True).astype(dtype)] for b in (2, 5)]
    feeds[0][0][0] = [lo, hi, 0, -1 if lo < 0 else 1]
    _compare(m, feeds)


def test_torch_bitwise_not_pt2_matches_eager(tmp_path):
    import torch

    class Bits(torch.nn.Module):
        def forward(self, a, b, m):
            return ~a, ~b, ~m, a ^ a.flip(-1)

    args = (torch.tensor([[0, 1, -1, 2**40]]), torch.tensor([[3, -7, 0, 127]], dtype=torch.int32),
            torch.tensor([[True, False, True, True]]))
    path = str(tmp_path / "bits.pt2")
    torch.export.save(torch.export.export(Bits(), args), path)
    args = (torch.tensor([[0, 1, -1, 2**20]]),) + args[1:]  # int64 values within int32 (docs/tflite.md)
    got = tflite_zoo.run(tflite_zoo.interpreter(to_tflite(path)), [a.numpy() for a in args])
    for g, w in zip(got, Bits()(*args)):
        assert g.dtype == w.numpy().dtype and np.array_equal(g, w.numpy()), (g, w)


@pytest.mark.parametrize("dims,target,chain", [
    (["b", 4, 6], [0, 4, -1, 2], False),  # one run-time dim copied: a constant [-1, 4, 3, 2]
    (["b", 4, 6], [0, 24], False),
    (["b", "s", 6], [0, 0, 3, 2], True),  # two run-time dims: their sizes come from SHAPE
    (["b", 4, 6], [0, 5, -1], True),  # 24 is not a multiple of 5: left to run time (as ONNX)
], ids=["copy-and-infer", "copy-and-merge", "two-run-time-dims", "not-divisible"])
def test_reshape_copying_one_run_time_dim_is_a_constant_reshape(dims, target, chain):
    """A Reshape whose 0 copies the input's only run-time dim becomes a constant RESHAPE with -1
    there (no SHAPE/STRIDED_SLICE/CONCATENATION chain, which XNNPACK does not take); same values."""
    from ai_edge_litert.interpreter import Interpreter, OpResolverType

    shape = helper.make_tensor("s", I64, [len(target)], target)
    m = _model([helper.make_node("Reshape", ["x", "s"], ["y"])], [("x", F, dims)], [("y", F)], [shape])
    if target == [0, 5, -1]:  # ONNX Runtime refuses these sizes, and so does onnx's strict shape inference
        with pytest.raises(UnsupportedOpsError, match=r"ONNX Reshape(.|\n)*incompatible shapes"):
            to_tflite(m)
        return
    it = Interpreter(model_content=to_tflite(m), experimental_op_resolver_type=OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)
    assert ("SHAPE" in [o["op_name"] for o in it._get_ops_details()]) == chain
    rng = np.random.default_rng(0)
    _compare(m, [[rng.standard_normal([b if d in ("b", "s") else d for d in dims]).astype(np.float32)] for b in (1, 3)])


def test_erf_special_values_without_sign():
    """Erf's sign comes from clip(x * 2^100, -1, 1) (XNNPACK has no SIGN): zeros, subnormals,
    huge values, infinities keep the 1.5e-7 bound, NaN stays NaN, XNNPACK on and off."""
    import math

    m = _model([helper.make_node("Erf", ["x"], ["y"])], [("x", F, ["n"])], [("y", F)])
    x = np.array([0, 1e-45, -1e-45, 1e-31, -1e-30, 1e-8, -3, 4e9, -np.inf, np.inf, np.nan], np.float32)
    want = np.array([math.erf(v) for v in x.astype(np.float64)])
    for xnnpack in (True, False):
        (y,) = tflite_zoo.run(tflite_zoo.interpreter(to_tflite(m), xnnpack=xnnpack), [x])
        np.testing.assert_allclose(y[:-1], want[:-1], rtol=0, atol=1.5e-7)
        assert np.isnan(y[-1])


@pytest.mark.parametrize("name", list(aten_op_cases.CASES))
def test_aten_op_families_match_eager(name, tmp_path):
    """The operators lowered once for every target (tests/support/aten_op_cases.py, also run on
    ONNX Runtime by test_onnx_ops.py) in LiteRT against torch eager; the families TFLite cannot
    express are refused with the one report naming the reason."""
    import torch

    import onnx_zoo
    from tolerances import TFLITE_SCALE, assert_close

    fn, factories = aten_op_cases.CASES[name]
    torch.manual_seed(0)
    args = tuple(f() for f in factories)

    class Fn(torch.nn.Module):
        def forward(self, *xs):
            return fn(*xs)

    path = str(tmp_path / f"{name}.pt2")
    torch.export.save(torch.export.export(Fn(), args), path)
    if name in aten_op_cases.TFLITE_REFUSED:
        with pytest.raises(UnsupportedOpsError, match=aten_op_cases.TFLITE_REFUSED[name]):
            to_tflite(path)
        return
    with torch.no_grad():
        expected = onnx_zoo._leaves(fn(*args))
    got = tflite_zoo.run(tflite_zoo.interpreter(to_tflite(path)), [a.numpy() for a in args])
    assert len(got) == len(expected)
    for i, (e, g) in enumerate(zip(expected, got)):
        e = e if isinstance(e, torch.Tensor) else torch.tensor(e)
        assert_close(g, onnx_zoo.to_numpy(e), e.dtype, what=f"{name} output {i}",
                     scale=10 * TFLITE_SCALE.get(str(e.dtype).removeprefix("torch."), 1.0))
