"""ONNX ops the TFLite target maps by composition, second set: Attention's 3-D inputs, KV cache,
softcap, padded keys and qk_matmul_output modes, each a single-op model built with onnx's helper,
converted and run in LiteRT against ONNX Runtime on the same model (and, where ONNX Runtime
cannot run a case, against onnx's reference implementation)."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import tflite_zoo
from pt2x.converters import to_tflite
from pt2x.converters.errors import UnsupportedOpsError

F, I64, B = TensorProto.FLOAT, TensorProto.INT64, TensorProto.BOOL


def _model(nodes, inputs, outputs, inits=(), opset=23, ir=10):
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(n, t, s) for n, t, s in inputs],
                          [helper.make_tensor_value_info(o, t, None) for o, t in outputs],
                          [numpy_helper.from_array(np.asarray(v), k) for k, v in inits])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], ir_version=ir)


_compare = tflite_zoo.match_onnx_runtime  # LiteRT vs ONNX Runtime on the same model


def _rand(*shape, seed=0):
    return np.random.default_rng(seed + len(shape) * 7 + sum(shape)).standard_normal(shape).astype(np.float32)


# (q heads, kv heads, head size, value head size) x attributes
@pytest.mark.parametrize("hq,hkv,e,ev", [(3, 3, 8, 8), (6, 2, 4, 5)])
@pytest.mark.parametrize("attrs", [{}, {"is_causal": 1}, {"softcap": 2.0, "scale": 0.3}])
def test_attention_3d_with_kv_cache(hq, hkv, e, ev, attrs):
    """3-D [B, L, H*E] inputs split into heads and merged back; past key/value concatenated
    (the present outputs); causal aligned after the past; grouped heads; a 2-D additive mask."""
    bsz, l, s, past = 2, 3, 4, 5
    names = ["q", "k", "v", "mask", "pk", "pv"]
    ins = [("q", F, [bsz, l, hq * e]), ("k", F, [bsz, s, hkv * e]), ("v", F, [bsz, s, hkv * ev]),
           ("mask", F, [l, past + s]), ("pk", F, [bsz, hkv, past, e]), ("pv", F, [bsz, hkv, past, ev])]
    node = helper.make_node("Attention", names, ["y", "present_k", "present_v"], q_num_heads=hq, kv_num_heads=hkv,
                            **attrs)
    m = _model([node], ins, [("y", F), ("present_k", F), ("present_v", F)])
    feeds = [_rand(*shape, seed=i) for i, (_, _, shape) in enumerate(ins)]
    _compare(m, feeds, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("mode", [0, 1, 2, 3])
def test_attention_qk_matmul_output_modes(mode):
    """The qk_matmul_output of each mode: Q K^T scaled, after softcap, after the masks, the softmax."""
    attrs = {"qk_matmul_output_mode": mode, "is_causal": 1}
    if mode:
        attrs["softcap"] = 1.5
    ins = [("q", F, [1, 4, 3, 8]), ("k", F, [1, 2, 5, 8]), ("v", F, [1, 2, 5, 8]), ("mask", B, [3, 5])]
    node = helper.make_node("Attention", ["q", "k", "v", "mask"], ["y", "", "", "qk"], **attrs)
    m = _model([node], ins, [("y", F), ("qk", F)])
    mask = np.array([[1, 1, 0, 1, 1], [1, 0, 1, 1, 1], [0, 1, 1, 1, 1]], np.bool_)
    feeds = [_rand(1, 4, 3, 8), _rand(1, 2, 5, 8, seed=1), _rand(1, 2, 5, 8, seed=2), mask]
    if mode != 2:
        _compare(m, feeds, rtol=1e-4, atol=1e-5)
        return
    # mode 2's masked scores: -inf in onnx's reference (and the backend node tests' stored outputs),
    # float32's lowest in ONNX Runtime; pt2x follows the reference
    got = tflite_zoo.run(tflite_zoo.interpreter(to_tflite(m)), feeds)
    want = _reference(m, feeds)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)
    assert np.isneginf(got[1]).sum() == 4 * (15 - 4)  # per head, causal and mask leave 4 of the 3 x 5 scores


def _reference(m, feeds):
    from onnx.reference import ReferenceEvaluator

    return ReferenceEvaluator(m).run(None, dict(zip([i.name for i in m.graph.input], feeds)))


def test_attention_short_mask_and_nonpad_kv_seqlen():
    """A mask shorter than the keys is padded as masked out; keys at or past nonpad_kv_seqlen[b]
    are masked per batch (opset 24; against onnx's reference)."""
    ins = [("q", F, [2, 2, 3, 4]), ("k", F, [2, 2, 6, 4]), ("v", F, [2, 2, 6, 5]), ("mask", F, [2, 2, 3, 4]),
           ("n", I64, [2])]
    node = helper.make_node("Attention", ["q", "k", "v", "mask", "", "", "n"], ["y"])
    m = _model([node], ins, [("y", F)], opset=24)
    feeds = [_rand(2, 2, 3, 4), _rand(2, 2, 6, 4, seed=1), _rand(2, 2, 6, 5, seed=2), _rand(2, 2, 3, 4, seed=3),
             np.array([3, 6], np.int64)]
    want = _reference(m, feeds)[0]
    got = tflite_zoo.run(tflite_zoo.interpreter(to_tflite(m)), feeds)[0]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_attention_refusals_name_the_attribute():
    ins = [("q", F, [1, 2, 3, 4]), ("k", F, [1, 2, 3, 4]), ("v", F, [1, 2, 3, 4])]
    node = helper.make_node("Attention", ["q", "k", "v"], ["y", "", "", "qk"], softcap=2.0)
    with pytest.raises(UnsupportedOpsError, match="qk_matmul_output_mode=0 with softcap"):
        to_tflite(_model([node], ins, [("y", F), ("qk", F)]))
    node = helper.make_node("Attention", ["q", "k", "v"], ["y"], softmax_precision=TensorProto.DOUBLE)
    with pytest.raises(UnsupportedOpsError, match="softmax_precision=11"):
        to_tflite(_model([node], ins, [("y", F)]))
    node = helper.make_node("Attention", ["q", "k", "v"], ["y"])
    with pytest.raises(UnsupportedOpsError, match="q_num_heads"):
        to_tflite(_model([node], [("q", F, [1, 3, 8]), ("k", F, [1, 3, 8]), ("v", F, [1, 3, 8])], [("y", F)]))


@pytest.mark.parametrize("three_d", [False, True])
@pytest.mark.parametrize("interleaved", [0, 1])
@pytest.mark.parametrize("rotary_dim", [0, 4])
@pytest.mark.parametrize("positions", [True, False])
def test_rotary_embedding(three_d, interleaved, rotary_dim, positions):
    """RotaryEmbedding over dynamic batch/sequence, full or partial rotation, halves or interleaved
    pairs, caches gathered by position ids or given per token."""
    heads, d, half = 3, 8, (rotary_dim or 8) // 2
    x_in = ("x", F, ["b", "s", heads * d]) if three_d else ("x", F, ["b", heads, "s", d])
    cache = [50, half] if positions else ["b", "s", half]
    ins = [x_in, ("cos", F, cache), ("sin", F, cache)] + ([("pos", I64, ["b", "s"])] if positions else [])
    attrs = {"interleaved": interleaved, "rotary_embedding_dim": rotary_dim, **({"num_heads": heads} if three_d else {})}
    node = helper.make_node("RotaryEmbedding", [n for n, _, _ in ins], ["y"], **attrs)
    m = _model([node], ins, [("y", F)])
    bsz, s = 2, 5
    x = _rand(bsz, s, heads * d) if three_d else _rand(bsz, heads, s, d)
    angles = np.random.default_rng(4).uniform(0, 6.3, [50, half] if positions else [bsz, s, half]).astype(np.float32)
    feeds = [x, np.cos(angles), np.sin(angles)]
    if positions:
        feeds.append(np.array([[0, 3, 7, 49, 2], [5, 5, 1, 0, 30]], np.int64))
    _compare(m, feeds, rtol=1e-5, atol=1e-6)


_INT_EDGES = {np.int32: [-2**31, -2**31 + 1, -65537, -65536, -65535, -2, -1, 0, 1, 65535, 65536, 2**31 - 1],
              np.int16: [-32768, -32767, -256, -1, 0, 1, 255, 32767], np.int8: [-128, -127, -1, 0, 1, 127],
              np.uint8: [0, 1, 127, 128, 254, 255]}


@pytest.mark.parametrize("op,fn", [("BitwiseAnd", np.bitwise_and), ("BitwiseOr", np.bitwise_or)])
@pytest.mark.parametrize("dtype", [np.int32, np.int16, np.int8, np.uint8])
def test_bitwise_and_or_over_the_type(op, fn, dtype):
    """Every pair of a type's edge values (and random ones), broadcast [n, 1] against [n]: the
    widened or half-split sum formula is exact, vs numpy and ONNX Runtime."""
    rng = np.random.default_rng(1)
    info = np.iinfo(dtype)
    x = np.concatenate([np.array(_INT_EDGES[dtype], dtype),
                        rng.integers(info.min, info.max, 20, dtype=np.int64, endpoint=True).astype(dtype)])
    elem = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    m = _model([helper.make_node(op, ["a", "b"], ["y"])], [("a", elem, ["n", 1]), ("b", elem, ["n"])], [("y", elem)],
               opset=18)
    got = tflite_zoo.run(tflite_zoo.interpreter(to_tflite(m)), [x[:, None], x])[0]
    np.testing.assert_array_equal(got, fn(x[:, None], x))
    _compare(m, [x[:, None], x], rtol=0, atol=0)


@pytest.mark.parametrize("op", ["HannWindow", "HammingWindow", "BlackmanWindow"])
@pytest.mark.parametrize("periodic", [0, 1])
def test_windows_of_a_run_time_size(op, periodic):
    """One model, sizes 1..64 fed at run time, vs ONNX Runtime (size 1 symmetric is 0/0 in both)."""
    m = _model([helper.make_node(op, ["size"], ["y"], periodic=periodic)], [("size", I64, [])], [("y", F)], opset=17)
    it = tflite_zoo.interpreter(to_tflite(m))
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    for size in [2, 3, 10, 64] + ([1] if periodic else []):
        feed = np.array(size, np.int64)
        want = sess.run(None, {"size": feed})[0]
        got = tflite_zoo.run(it, [feed])[0]
        assert got.shape == (size,)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=2e-7)


def _numpy_dft(x, axis, n, inverse, onesided):
    c = x[..., 0] + (1j * x[..., 1] if x.shape[-1] == 2 else 0)
    c = c.astype(np.complex128)
    if inverse and onesided:
        return np.fft.irfft(c, n=n, axis=axis)[..., None]
    y = np.fft.ifft(c, n=n, axis=axis) if inverse else np.fft.fft(c, n=n, axis=axis)
    if onesided:
        y = np.take(y, np.arange(n // 2 + 1), axis=axis)
    return np.stack([y.real, y.imag], -1)


@pytest.mark.parametrize("shape,axis,n", [((2, 10, 3, 1), 1, None), ((2, 10, 3, 2), 1, None), ((2, 3, 9, 2), 2, None),
                                          ((2, 8, 2), 1, 12), ((2, 8, 2), 1, 5), ((7, 2), 0, None)])
@pytest.mark.parametrize("inverse,onesided", [(0, 0), (0, 1), (1, 0), (1, 1)])
def test_dft_against_float64(shape, axis, n, inverse, onesided):
    """DFT-20 with a constant axis (and dft_length padding or truncating) vs numpy's float64 FFT:
    within float32 rounding of the sums, scaled by the input's size."""
    if onesided and bool(inverse) != (shape[-1] == 2):
        pytest.skip("onesided: the forward transform of real input, the inverse of complex input (onnx's checker)")
    inits = [("axis", np.array(axis, np.int64))] + ([("n", np.array(n, np.int64))] if n else [])
    node = helper.make_node("DFT", ["x", "n" if n else "", "axis"], ["y"], inverse=inverse, onesided=onesided)
    m = _model([node], [("x", F, list(shape))], [("y", F)], inits=inits, opset=20)
    x = np.random.default_rng(3).uniform(-10, 10, shape).astype(np.float32)
    length = n or (2 * (shape[axis] - 1) if inverse and onesided else shape[axis])
    want = _numpy_dft(x.astype(np.float64), axis, length, inverse, onesided)
    got = tflite_zoo.run(tflite_zoo.interpreter(to_tflite(m)), [x])[0]
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-6 * np.abs(x).sum() / (length if inverse else 1))


def test_dft_refusals():
    x = ("x", F, [1, 8, 8, 1])
    node = helper.make_node("DFT", ["x", "", "axis"], ["y"])
    with pytest.raises(UnsupportedOpsError, match="DFT with the axis computed at run time"):
        to_tflite(_model([node], [x, ("axis", I64, [])], [("y", F)], opset=20))
    node = helper.make_node("DFT", ["x"], ["y"])
    with pytest.raises(UnsupportedOpsError, match="default axis over a rank other than 3"):
        to_tflite(_model([node], [x], [("y", F)], opset=20))


@pytest.mark.parametrize("rule", ["linear", "gated", "delta", "gated_delta"])
@pytest.mark.parametrize("hq,hkv,per_head", [(4, 4, False), (6, 2, True)])
@pytest.mark.parametrize("past", [False, True])
def test_linear_attention_unrolled(rule, hq, hkv, per_head, past):
    """LinearAttention (opset 27) over 5 steps and a dynamic batch: each update rule, grouped
    heads, decay per head or per key dim, beta per head, with or without a past state, vs ONNX Runtime."""
    dk, dv, steps = 4, 3, 5
    ins = [("q", F, ["b", steps, hq * dk]), ("k", F, ["b", steps, hkv * dk]), ("v", F, ["b", steps, hkv * dv])]
    names = ["q", "k", "v", "past" if past else "", "", ""]
    if past:
        ins.append(("past", F, ["b", hkv, dk, dv]))
    if rule in ("gated", "gated_delta"):
        ins.append(("decay", F, ["b", steps, hkv if per_head else hkv * dk]))
        names[4] = "decay"
    if rule in ("delta", "gated_delta"):
        ins.append(("beta", F, ["b", steps, hkv]))
        names[5] = "beta"
    node = helper.make_node("LinearAttention", names, ["y", "state"], q_num_heads=hq, kv_num_heads=hkv,
                            update_rule=rule)
    m = _model([node], ins, [("y", F), ("state", F)], opset=27)
    rng = np.random.default_rng(5)
    feeds = []
    for name, _, shape in ins:
        shape = [2 if s == "b" else s for s in shape]
        x = rng.standard_normal(shape).astype(np.float32) * 0.5
        feeds.append(-np.abs(x) if name == "decay" else (1 / (1 + np.exp(-x)) if name == "beta" else x))
    _compare(m, feeds, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("k", [2, 4])
@pytest.mark.parametrize("activation", ["none", "silu"])
@pytest.mark.parametrize("bias,past", [(False, False), (True, True)])
def test_causal_conv_with_state(k, activation, bias, past):
    """CausalConvWithState (opset 27) over dynamic batch and length, weights at run time: the
    tap sum, bias, SiLU and the present state vs ONNX Runtime."""
    c = 3
    ins = [("x", F, ["b", c, "l"]), ("w", F, [c, 1, k])] + ([("bias", F, [c])] if bias else []) + \
        ([("past", F, ["b", c, k - 1])] if past else [])
    names = ["x", "w", "bias" if bias else "", "past" if past else ""]
    outs = ["y", "state"]
    m = _model([helper.make_node("CausalConvWithState", names, outs, activation=activation)], ins,
               [(o, F) for o in outs], opset=27)
    rng = np.random.default_rng(k)
    feeds = [rng.standard_normal([2, c, 7]).astype(np.float32), rng.standard_normal([c, 1, k]).astype(np.float32)]
    feeds += [rng.standard_normal([c]).astype(np.float32)] if bias else []
    feeds += [rng.standard_normal([2, c, k - 1]).astype(np.float32)] if past else []
    _compare(m, feeds, rtol=1e-5, atol=1e-6)


def test_causal_conv_kernel_one_refused():
    ins = [("x", F, [1, 2, 5]), ("w", F, [2, 1, 1])]
    m = _model([helper.make_node("CausalConvWithState", ["x", "w"], ["y", "state"])], ins, [("y", F), ("state", F)],
               opset=27)
    with pytest.raises(UnsupportedOpsError, match="kernel size 1 and its .empty. present state"):
        to_tflite(m)


def _flex_model(attrs, hq=4, hkv=2, e=8, ev=6):
    node = helper.make_node("FlexAttention", ["q", "k", "v"], ["y"], domain="ai.onnx.preview", **attrs)
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info("q", F, [2, hq, 3, e]),
                                        helper.make_tensor_value_info("k", F, [2, hkv, 5, e]),
                                        helper.make_tensor_value_info("v", F, [2, hkv, 5, ev])],
                          [helper.make_tensor_value_info("y", F, None)])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 26), helper.make_opsetid("ai.onnx.preview", 1)],
                             ir_version=10)


@pytest.mark.parametrize("attrs", [{}, {"scale": 0.3}])
def test_flex_attention_without_mods(attrs):
    """ai.onnx.preview FlexAttention (grouped heads, value head size != query's) vs onnx's
    reference (ONNX Runtime does not run the preview domain)."""
    m = _flex_model(attrs)
    feeds = [_rand(2, 4, 3, 8), _rand(2, 2, 5, 8, seed=1), _rand(2, 2, 5, 6, seed=2)]
    got = tflite_zoo.run(tflite_zoo.interpreter(to_tflite(m)), feeds)[0]
    np.testing.assert_allclose(got, _reference(m, feeds)[0], rtol=1e-5, atol=1e-6)


def test_flex_attention_score_mod_refused_by_name():
    mod = helper.make_graph([helper.make_node("Neg", ["s"], ["t"])], "mod", [helper.make_tensor_value_info("s", F, None)],
                            [helper.make_tensor_value_info("t", F, None)])
    with pytest.raises(UnsupportedOpsError, match="FlexAttention attribute 'score_mod'"):
        to_tflite(_flex_model({"score_mod": mod}))


@pytest.mark.parametrize("reverse", [0, 1])
@pytest.mark.parametrize("in_axis,out_axis", [(0, 0), (1, 1)])
def test_scan_unrolled(reverse, in_axis, out_axis):
    """Scan-16 with two states, a body reading an outer value, scan axes and directions, vs ONNX
    Runtime: a running sum and a running product-with-offset over 4 steps."""
    body = helper.make_graph(
        [helper.make_node("Add", ["s", "x_t"], ["s2"]), helper.make_node("Mul", ["p", "x_t"], ["pm"]),
         helper.make_node("Add", ["pm", "offset"], ["p2"]), helper.make_node("Sub", ["s2", "p2"], ["y_t"])],
        "body", [helper.make_tensor_value_info(n, F, [3]) for n in ("s", "p", "x_t")],
        [helper.make_tensor_value_info(n, F, [3]) for n in ("s2", "p2", "y_t")])
    node = helper.make_node("Scan", ["s0", "p0", "x"], ["s_end", "p_end", "ys"], body=body, num_scan_inputs=1,
                            scan_input_axes=[in_axis], scan_input_directions=[reverse], scan_output_axes=[out_axis],
                            scan_output_directions=[reverse])
    x_shape = [4, 3] if in_axis == 0 else [3, 4]
    m = _model([helper.make_node("Neg", ["s0"], ["offset"]), node],
               [("s0", F, [3]), ("p0", F, [3]), ("x", F, x_shape)], [("s_end", F), ("p_end", F), ("ys", F)], opset=18)
    rng = np.random.default_rng(7)
    _compare(m, [rng.standard_normal(3).astype(np.float32), np.ones(3, np.float32),
                 rng.standard_normal(x_shape).astype(np.float32)], rtol=1e-5, atol=1e-6)


def test_scan_of_unknown_length_refused():
    body = helper.make_graph([helper.make_node("Add", ["s", "x_t"], ["s2"])], "body",
                             [helper.make_tensor_value_info(n, F, [2]) for n in ("s", "x_t")],
                             [helper.make_tensor_value_info("s2", F, [2])])
    node = helper.make_node("Scan", ["s0", "x"], ["s_end"], body=body, num_scan_inputs=1)
    with pytest.raises(UnsupportedOpsError, match="one static length"):
        to_tflite(_model([node], [("s0", F, [2]), ("x", F, ["n", 2])], [("s_end", F)], opset=18))


def test_sizes_a_file_claims_are_bounded():
    """A few bytes of ONNX claiming a DFT of 10**6 samples, a causal conv kernel of 10**5 taps or a
    Scan whose unrolled body is too big are refused naming the bound, before anything is built."""
    dft = helper.make_node("DFT", ["x", "n", "axis"], ["y"])
    m = _model([dft], [("x", F, [1, 1000, 1])], [("y", F)], inits=[("n", np.array(10**6, np.int64)),
                                                                     ("axis", np.array(1, np.int64))], opset=20)
    with pytest.raises(UnsupportedOpsError, match="MAX_DFT_WEIGHT"):
        to_tflite(m)
    conv = helper.make_node("CausalConvWithState", ["x", "w"], ["y", "state"])
    m = _model([conv], [("x", F, [1, 2, 5]), ("w", F, [2, 1, 10**5])], [("y", F), ("state", F)], opset=27)
    with pytest.raises(UnsupportedOpsError, match="at most 4096"):
        to_tflite(m)
    body = helper.make_graph([helper.make_node("Add", ["s", "x_t"], ["s2"])] * 1 +
                             [helper.make_node("Identity", ["s2"], [f"i{j}"]) for j in range(200)], "body",
                             [helper.make_tensor_value_info(n, F, [2]) for n in ("s", "x_t")],
                             [helper.make_tensor_value_info("s2", F, [2])])
    scan = helper.make_node("Scan", ["s0", "x"], ["s_end"], body=body, num_scan_inputs=1)
    m = _model([scan], [("s0", F, [2]), ("x", F, [1000, 2])], [("s_end", F)], opset=18)
    with pytest.raises(UnsupportedOpsError, match="MAX_NODES_PER_LOWERING"):
        to_tflite(m)


_Q_TYPES = {TensorProto.UINT8: np.uint8, TensorProto.INT8: np.int8, TensorProto.INT16: np.int16}


@pytest.mark.parametrize("qtype", sorted(_Q_TYPES))
@pytest.mark.parametrize("per_axis", [False, True])
def test_quantize_dequantize_linear(qtype, per_axis):
    """QuantizeLinear over ties (x / scale = k + 0.5: half to even), values past the type's range
    (saturated) and zero, then DequantizeLinear of every value of the type's edges, per tensor
    and per axis 1, vs ONNX Runtime, exactly."""
    np_t = _Q_TYPES[qtype]
    info = np.iinfo(np_t)
    scale = np.array([0.5, 0.25, 2.0], np.float32) if per_axis else np.array(0.5, np.float32)
    zp = np.array([3, 0, -1 if info.min < 0 else 7], np_t) if per_axis else np.array(info.min // 2 + 5, np_t)
    x = np.concatenate([np.arange(-6, 6, 0.25), [0.0, -0.0, 1e9, -1e9, 2.5, 3.5, -2.5, -3.5, 4.5, -4.5, 0.75, 1e-30]])
    x = x.astype(np.float32).reshape(2, 3, 10)
    q = _model([helper.make_node("QuantizeLinear", ["x", "s", "zp"], ["y"])], [("x", F, list(x.shape))],
               [("y", qtype)], inits=[("s", scale), ("zp", zp)], opset=21)
    _compare(q, [x], rtol=0, atol=0)
    xs = np.resize(np.array([info.min, info.min + 1, -1 if info.min < 0 else 1, 0, 1, info.max - 1, info.max], np_t),
                   (2, 3, 7))
    dq = _model([helper.make_node("DequantizeLinear", ["x", "s", "zp"], ["y"])], [("x", qtype, [2, 3, 7])], [("y", F)],
                inits=[("s", scale), ("zp", zp)], opset=21)
    _compare(dq, [xs], rtol=0, atol=0)


def test_quantize_refusals_name_what():
    ins = [("x", F, [2, 4])]
    blocked = helper.make_node("QuantizeLinear", ["x", "s"], ["y"], axis=1, block_size=2)
    with pytest.raises(UnsupportedOpsError, match="block_size=2"):
        to_tflite(_model([blocked], ins, [("y", TensorProto.UINT8)], inits=[("s", np.ones((2, 2), np.float32))],
                         opset=21))
    dq32 = helper.make_node("DequantizeLinear", ["x", "s"], ["y"])
    with pytest.raises(UnsupportedOpsError, match="DequantizeLinear of INT32"):
        to_tflite(_model([dq32], [("x", TensorProto.INT32, [4])], [("y", F)], inits=[("s", np.float32(2))], opset=21))


def test_dynamic_quantize_linear():
    """DynamicQuantizeLinear over a dynamic shape: mixed signs, all positive, all negative, vs ONNX
    Runtime, exactly; all zero: y and the zero point 0 in both, the scale onnx's reference's 1/255
    (ONNX Runtime gives 1.0; the spec's formula gives 0/0 there)."""
    m = _model([helper.make_node("DynamicQuantizeLinear", ["x"], ["y", "scale", "zp"])], [("x", F, ["n", 3])],
               [("y", TensorProto.UINT8), ("scale", F), ("zp", TensorProto.UINT8)], opset=18)
    it = tflite_zoo.interpreter(to_tflite(m))
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(11)
    for x in [rng.standard_normal((4, 3)) * 3, np.abs(rng.standard_normal((2, 3))) + 1,
              -np.abs(rng.standard_normal((5, 3))) - 0.5, np.zeros((1, 3)), np.array([[-1.0, 0.0, 2.0]])]:
        x = x.astype(np.float32)
        got, want = tflite_zoo.run(it, [x]), sess.run(None, {"x": x})
        if not x.any():
            want[1] = np.float32(1) / np.float32(255)
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g.reshape(w.shape), w)
