"""PT2E int8 programs (``tests/support/pt2e.py``, the XNNPACK-style quantizer, a dynamic batch)
delegated to XNNPACK's int8 nodes: converted where ``import torch`` fails, run in ExecuTorch's
runtime at two batch sizes, compared with the quantized module's eager output in quantization
steps of the output, and the payload read back: which XNNPACK values are int8, which nodes,
how many partitions and portable kernels are left."""

from __future__ import annotations

import struct
from collections import Counter

import numpy as np
import pytest

pytest.importorskip("executorch", reason="executorch is not installed (pip install executorch==1.5.1): "
                                         "the .pte files are checked by running them in its runtime")
pytest.importorskip("torchao", reason="the PT2E flow needs torchao (the test extra)")

import pt2e  # noqa: E402
import pte_zoo  # noqa: E402

from pt2x.converters.pte.reader import read_pte  # noqa: E402
from pt2x.converters.pte.xnnpack import schema_generated as xfb  # noqa: E402

ONE_STEP = 1.0 + 1e-4  # a float rounding difference may move a value across a tie: one step
DATATYPES = {v: k.removeprefix("xnn_datatype_") for k, v in vars(xfb.XNNDatatype).items() if not k.startswith("_")}
NODES = {v: k for k, v in vars(xfb.XNodeUnion).items() if not k.startswith("_")}


def _graphs(data: bytes) -> list:
    """Each delegate's XNNGraph."""
    s = read_pte(data)
    base = s["extended_header"]["segment_base_offset"]
    out = []
    for d in s["execution_plans"][0]["delegates"]:
        seg = s["segments"][d["index"]]
        blob = data[base + seg["offset"]: base + seg["offset"] + seg["size"]]
        _length, fb_off, fb_size = struct.unpack_from("<HII", blob, 8)
        out.append(xfb.XNNGraph.GetRootAs(blob[fb_off:fb_off + fb_size], 0))
    return out


def _values(graph) -> Counter:
    """The graph's values by datatype (a quantized one: with its kind of parameters)."""
    kinds = Counter()
    for i in range(graph.XvaluesLength()):
        xv = graph.Xvalues(i)
        if xv.XvalueUnionType() == xfb.XValueUnion.XNNQuantizedTensorValue:
            q = xfb.XNNQuantizedTensorValue()
            q.Init(xv.XvalueUnion().Bytes, xv.XvalueUnion().Pos)
            per = "tensor" if q.QuantParamsType() == xfb.XNNQuantParams.PerTensorQuant else "channel"
            kinds[f"{DATATYPES[q.TensorValue().Datatype()]}/{per}"] += 1
        else:
            t = xfb.XNNTensorValue()
            t.Init(xv.XvalueUnion().Bytes, xv.XvalueUnion().Pos)
            kinds[DATATYPES[t.Datatype()]] += 1
    return kinds


def _nodes(graph) -> Counter:
    return Counter(NODES[graph.Xnodes(i).XnodeUnionType()] for i in range(graph.XnodesLength()))


def _steps(p, data: bytes) -> dict:
    """Batch -> the largest difference from eager, in steps of the output's quantization."""
    step = [float(n.args[1]) for n in p.exported.graph.nodes
            if n.op == "call_function" and str(n.target).startswith("quantized_decomposed.quantize_per_tensor")][-1]
    out = {}
    for b in pt2e.BATCHES:
        expected = p.expected[b].numpy()
        assert float(expected.std()) > 1e-2, "a degenerate reference matches anything"
        (got,) = pte_zoo.run(data, p.inputs[b])
        assert got.shape == expected.shape
        out[b] = float(np.abs(got.numpy() - expected).max()) / step
    return out


@pytest.fixture(scope="module")
def converted(tmp_path_factory):
    """name -> (the quantized program, pt2x's .pte of it), each converted once, torch-free."""
    cache = {}

    def get(name: str):
        if name not in cache:
            p = pt2e.program(name, "xnnpack")
            path = pt2e.save(p.exported, tmp_path_factory.mktemp("int8") / f"{name}.pt2")
            cache[name] = p, pte_zoo.convert_torch_free("to_pte", path)
        return cache[name]

    return get


def test_mobile_cnn_runs_int8_in_one_partition(converted):
    """conv-bn-ReLU6 (strided), max pool, an inverted residual (1x1 and depthwise ReLU6 convs, a
    residual add), global average pool, linear: one partition of int8 nodes, float32 only at its
    edges (the program's input and output), nothing left on the portable kernels."""
    p, data = converted("mobile_cnn")
    plan = read_pte(data)["execution_plans"][0]
    assert (plan["delegate_calls"], plan["operators"]) == (1, {})
    (graph,) = _graphs(data)
    values = _values(graph)
    assert values["fp32"] == 2 and values["qint8/tensor"] >= 10
    assert values["qcint8/channel"] == 5 and values["qcint32/channel"] == 5  # 4 convolutions, the linear
    nodes = _nodes(graph)
    assert nodes["XNNConvert"] == 2  # the input quantized, the output dequantized
    assert (nodes["XNNConv2d"], nodes["XNNDepthwiseConv2d"], nodes["XNNFullyConnected"]) == (3, 1, 1)
    assert nodes["XNNClamp"] == 0  # the ReLU6s are the convolutions' output bounds
    assert {"XNNMaxPooling2d", "XNNAdd", "XNNGlobalAvgPooling2d"} <= set(nodes)
    for b, steps in _steps(p, data).items():
        assert steps <= ONE_STEP, f"batch {b}: {steps:.3f} steps off"


def test_small_cnn_is_int8_and_within_one_step(converted):
    """conv-bn-relu, depthwise and pointwise convs, a residual add, adaptive pool, flatten, linear."""
    p, data = converted("cnn")
    plan = read_pte(data)["execution_plans"][0]
    assert (plan["delegate_calls"], plan["operators"]) == (1, {})
    (graph,) = _graphs(data)
    assert _values(graph)["fp32"] == 2
    for b, steps in _steps(p, data).items():
        assert steps <= ONE_STEP, f"batch {b}: {steps:.3f} steps off"


def test_float_ops_between_int8_ones(converted):
    """A sigmoid (float in XNNPACK: its int8 input converted, its output converted back) stays in
    the partition; a log_softmax (no XNNPACK node) splits it: the first partition gives it a float
    tensor, the second quantizes what it returns."""
    p, data = converted("boundary_cnn")
    plan = read_pte(data)["execution_plans"][0]
    assert (plan["delegate_calls"], plan["operators"]) == (2, {"aten::_log_softmax.out": 1})
    first, second = (_nodes(g) for g in _graphs(data))
    assert first["XNNSigmoid"] == 1 and first["XNNConvert"] == 4 and first["XNNConv2d"] == 2
    assert second["XNNConvert"] == 2 and second["XNNConv2d"] == 1
    for b, steps in _steps(p, data).items():
        assert steps <= ONE_STEP, f"batch {b}: {steps:.3f} steps off"


def test_uint8_activations_stay_on_the_portable_kernels(tmp_path):
    """X86's quantizer writes uint8 activations: XNNPACK's qint8 does not hold them, so those
    quantizes and dequantizes, and the convolutions reading int8 weights through them, stay portable
    (correct, as test_pte_pt2e checks), none folded into a wrong int8 node."""
    p = pt2e.program("cnn", "x86")
    data = pte_zoo.convert_torch_free("to_pte", pt2e.save(p.exported, tmp_path / "cnn_x86.pt2"))
    left = read_pte(data)["execution_plans"][0]["operators"]
    assert left.get("aten::convolution.out") == 3 and left.get("aten::round.out", 0) >= 1
    for graph in _graphs(data):
        assert not any(k.startswith(("qint8", "qcint")) for k in _values(graph))


def test_resnet18_is_one_int8_partition(converted):
    """ResNet-18 (64x64): one partition, every convolution int8. Over its 20 requantized layers
    the integer kernels round differently from the float reference: exir 1.5.1's own lowering of
    this program is 2 and 7 steps off at batches 1 and 3 (mean 1.1 and 1.7), and pt2x's output
    is within those bounds (measured equal)."""
    p, data = converted("resnet18")
    plan = read_pte(data)["execution_plans"][0]
    assert (plan["delegate_calls"], plan["operators"]) == (1, {})
    (graph,) = _graphs(data)
    assert _values(graph)["qcint8/channel"] == 21  # 20 convolutions and the linear
    assert _values(graph)["fp32"] == 2
    steps = _steps(p, data)
    assert steps[1] <= 2 + 1e-4 and steps[3] <= 7 + 1e-4, steps
