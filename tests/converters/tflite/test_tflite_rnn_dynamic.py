"""LSTM/GRU over a sequence length known only at run time (one WHILE per direction,
``converters/tflite/ops/rnn_while.py``).

torch.export specialises nn.LSTM/nn.GRU's sequence length (a .pt2 always reaches the TFLite
target with a static one, which is unrolled), so the dynamic-length programs here are ONNX
files: the ones torch.onnx.export's TorchScript exporter writes for torch modules with a dynamic
batch and sequence (vs torch eager), and single ONNX nodes built with onnx's helper for what
torch does not write (initial states as inputs, reverse, linear_before_reset=0; vs ONNX Runtime).
"""

from __future__ import annotations

import io
import warnings

import numpy as np
import onnx
import pytest
import torch
from onnx import TensorProto, helper

import tflite_zoo
from pt2x.converters import to_tflite
from tolerances import assert_close


def _torch_onnx(module: torch.nn.Module, x: torch.Tensor, batch_first: bool, n_out: int) -> onnx.ModelProto:
    f = io.BytesIO()
    axes = {0: "batch", 1: "seq"} if batch_first else {0: "seq", 1: "batch"}
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.onnx.export(module, (x,), f, dynamo=False, input_names=["x"],
                              output_names=["y", "h", "c"][:n_out], dynamic_axes={"x": axes})
    except Exception as e:  # the TorchScript exporter is deprecated in torch 2.x
        pytest.skip(f"torch.onnx.export(dynamo=False) is not available: {type(e).__name__}: {e}")
    return onnx.load_from_string(f.getvalue())


@pytest.mark.parametrize("kind,batch_first", [("lstm", True), ("gru", False)])
def test_torch_rnn_over_a_dynamic_sequence_matches_eager(kind, batch_first):
    """2 layers, bidirectional, resized to other sequence lengths and batches, XNNPACK on and off."""
    torch.manual_seed(0)
    cls = torch.nn.LSTM if kind == "lstm" else torch.nn.GRU
    m = cls(6, 8, num_layers=2, batch_first=batch_first, bidirectional=True).eval()

    def inp(b, s):
        return torch.randn(b, s, 6) if batch_first else torch.randn(s, b, 6)

    data = to_tflite(_torch_onnx(m, inp(2, 5), batch_first, 3 if kind == "lstm" else 2))
    for xnnpack in (True, False):
        it = tflite_zoo.interpreter(data, xnnpack=xnnpack)
        for b, s in ((2, 5), (3, 11), (1, 2)):
            x = inp(b, s)
            with torch.no_grad():
                y, state = m(x)
            want = [y] + (list(state) if kind == "lstm" else [state])
            got = tflite_zoo.run(it, [x.numpy()])
            assert got[0].shape == tuple(y.shape), (got[0].shape, y.shape)
            for i, (g, w) in enumerate(zip(got, want)):
                assert_close(g, w.numpy(), torch.float32, what=f"{kind} batch {b} seq {s} output {i}")


def _node_model(op: str, direction: str, with_states: bool, **attrs) -> onnx.ModelProto:
    rng = np.random.default_rng(0)
    dirs, hidden, n_in = (2 if direction == "bidirectional" else 1), 5, 4
    gates = 4 if op == "LSTM" else 3
    inits = [helper.make_tensor(n, TensorProto.FLOAT, a.shape, a.ravel())
             for n, a in (("W", rng.standard_normal((dirs, gates * hidden, n_in)).astype(np.float32)),
                          ("R", rng.standard_normal((dirs, gates * hidden, hidden)).astype(np.float32)),
                          ("B", rng.standard_normal((dirs, 2 * gates * hidden)).astype(np.float32)))]
    ins = [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["seq", "batch", n_in])]
    node_in = ["x", "W", "R", "B"]
    if with_states:
        node_in += ["", "h0"] + (["c0"] if op == "LSTM" else [])
        ins += [helper.make_tensor_value_info(n, TensorProto.FLOAT, [dirs, "batch", hidden])
                for n in node_in[5:]]
    outs = ["y", "yh"] + (["yc"] if op == "LSTM" else [])
    shapes = [["seq", dirs, "batch", hidden]] + [[dirs, "batch", hidden]] * (len(outs) - 1)
    node = helper.make_node(op, node_in, outs, hidden_size=hidden, direction=direction, **attrs)
    graph = helper.make_graph([node], op.lower(), ins, [helper.make_tensor_value_info(o, TensorProto.FLOAT, sh)
                                                        for o, sh in zip(outs, shapes)], initializer=inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])


@pytest.mark.parametrize("op,direction,with_states,attrs", [
    ("LSTM", "reverse", True, {}),
    ("GRU", "bidirectional", True, {"linear_before_reset": 0}),
    ("GRU", "forward", False, {"linear_before_reset": 1}),
], ids=["lstm-reverse-states", "gru-bidirectional-states-lbr0", "gru-forward-lbr1"])
def test_onnx_rnn_node_over_a_dynamic_sequence_matches_onnxruntime(op, direction, with_states, attrs):
    import onnxruntime as ort

    model = _node_model(op, direction, with_states, **attrs)
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    it = tflite_zoo.interpreter(to_tflite(model))
    rng = np.random.default_rng(1)
    for s, b in ((3, 2), (7, 4)):
        feeds = {"x": rng.standard_normal((s, b, 4)).astype(np.float32)}
        for i in sess.get_inputs()[1:]:
            feeds[i.name] = rng.standard_normal((2 if direction == "bidirectional" else 1, b, 5)).astype(np.float32)
        want = sess.run(None, feeds)
        got = tflite_zoo.run(it, [feeds[i.name] for i in sess.get_inputs()])
        for k, (g, w) in enumerate(zip(got, want)):
            assert g.shape == w.shape, (k, g.shape, w.shape)
            assert_close(g, w, "float32", what=f"{op} {direction} seq {s} output {k}")


@pytest.mark.parametrize("op", ["LSTM", "GRU"])
def test_onnx_rnn_node_batch_major_layout_matches_onnx_reference(op):
    """layout=1 ([batch, seq, ...] input, initial state and outputs), bidirectional, with h0,
    against onnx's ReferenceEvaluator: ONNX Runtime's CPU kernels do not implement layout=1."""
    from onnx.reference import ReferenceEvaluator

    rng = np.random.default_rng(0)
    hidden, n_in, gates = 5, 4, 4 if op == "LSTM" else 3
    inits = [helper.make_tensor(n, TensorProto.FLOAT, s, rng.standard_normal(s).astype(np.float32).ravel())
             for n, s in (("W", (2, gates * hidden, n_in)), ("R", (2, gates * hidden, hidden)),
                          ("B", (2, 2 * gates * hidden)))]
    outs = ["y", "yh"] + (["yc"] if op == "LSTM" else [])
    node = helper.make_node(op, ["x", "W", "R", "B", "", "h0"], outs, hidden_size=hidden, layout=1,
                            direction="bidirectional")
    graph = helper.make_graph(
        [node], "rnn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "seq", n_in]),
                        helper.make_tensor_value_info("h0", TensorProto.FLOAT, ["batch", 2, hidden])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", "seq", 2, hidden])]
        + [helper.make_tensor_value_info(o, TensorProto.FLOAT, ["batch", 2, hidden]) for o in outs[1:]],
        initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])
    it = tflite_zoo.interpreter(to_tflite(model))
    for b, s in ((2, 3), (3, 6)):
        x = rng.standard_normal((b, s, n_in)).astype(np.float32)
        h0 = rng.standard_normal((b, 2, hidden)).astype(np.float32)
        want = ReferenceEvaluator(model).run(None, {"x": x, "h0": h0})
        got = tflite_zoo.run(it, [x, h0])
        for k, (g, w) in enumerate(zip(got, want)):
            assert_close(g, w, "float32", what=f"{op} layout=1 batch {b} seq {s} output {k}")
