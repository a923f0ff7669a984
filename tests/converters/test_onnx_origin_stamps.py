"""Origin stamps: every ONNX node pt2x makes names the ATen node (and module path) it was made
from, through BatchNorm folding and into If bodies; the TFLite target's refusals read them."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch
from onnx import TensorProto, helper

from pt2x.converters.aten.graph import open_program
from pt2x.converters.errors import UnsupportedOpsError
from pt2x.converters.onnx.converter import to_onnx
from pt2x.converters.onnx.graph_tools import origin_of, stamp, walk_nodes
from pt2x.converters.tflite import to_tflite
from pt2x.converters.tflite.onnx_in.normalise import normalise


class _Inner(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3, padding=1)
        self.bn = torch.nn.BatchNorm2d(4)

    def forward(self, x):
        return torch.relu(self.bn(self.conv(x)))


class _Scatterer(torch.nn.Module):
    def forward(self, x, idx):
        return torch.scatter(x, 1, idx, x * 2.0)


class _Model(torch.nn.Module):
    """Nested submodules: blocks.0 (conv + bn, folded), blocks.1.inner (scatter: no TFLite
    builtin), a var whose lowering makes several nodes, and a cond whose branches are bodies."""

    def __init__(self):
        super().__init__()
        self.blocks = torch.nn.ModuleList([_Inner(), torch.nn.Module()])
        self.blocks[1].inner = _Scatterer()

    def forward(self, x, idx):
        y = self.blocks[0](x)
        y = (y + torch.var(y, dim=1, keepdim=True)).flatten(2)
        z = torch.cond(y.sum() > 0, lambda t: t.cos(), lambda t: t.sin() + 1, (y,))
        return self.blocks[1].inner(z, idx)


@pytest.fixture(scope="module")
def program(tmp_path_factory):
    torch.manual_seed(0)
    m = _Model().eval()
    m.blocks[0].bn.running_mean.uniform_(-0.5, 0.5)
    m.blocks[0].bn.running_var.uniform_(0.5, 2.0)
    args = (torch.randn(1, 3, 4, 4), torch.tensor([[[0, 1, 2, 3] * 4] * 4]))
    path = str(tmp_path_factory.mktemp("stamps") / "nested.pt2")
    torch.export.save(torch.export.export(m, args), path)
    with torch.no_grad():
        want = m(*args).numpy()
    return path, [a.numpy() for a in args], want


def _aten_nodes(path) -> dict[str, str]:
    view, keep = open_program(path, "model")
    try:
        return {n.name: str(n.target) for n in view.walk()}
    finally:
        del keep


def test_every_onnx_node_names_a_real_aten_node(program):
    path, args, want = program
    m = to_onnx(path)
    aten = _aten_nodes(path)
    nodes = list(walk_nodes(m.graph))
    assert any(n.op_type == "If" for n in nodes) and not any(n.op_type == "BatchNormalization" for n in nodes)
    for n in nodes:
        o = origin_of(n)
        assert o.get("pt2x.aten_node") in aten, (n.op_type, n.name, o)
        assert aten[o["pt2x.aten_node"]] == o["pt2x.aten_target"], (n.name, o)
    by_op = {}
    for n in nodes:
        by_op.setdefault(n.op_type, []).append(origin_of(n))
    conv = by_op["Conv"][0]  # the BatchNorm folded into it keeps the convolution's stamp
    assert conv["pt2x.aten_target"] == "torch.ops.aten.conv2d.default"
    assert conv["pt2x.module_path"] == "blocks.0.conv"
    assert by_op["ScatterElements"][0]["pt2x.module_path"] == "blocks.1.inner"
    var = [o for ops in by_op.values() for o in ops if o["pt2x.aten_target"] == "torch.ops.aten.var.dim"]
    assert len(var) >= 4  # the nodes a lowering makes inside itself carry its node too
    assert {o["pt2x.aten_node"] for o in by_op["Sin"] + by_op["Cos"]} <= set(aten)  # inside the If bodies
    s = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    got = s.run(None, {i.name: a for i, a in zip(m.graph.input, args)})[0]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)  # stamps change nothing that runs


def test_tflite_refusal_names_the_stamped_origin(program, tmp_path):
    path, _, _ = program
    for src in (path, _saved_onnx(path, tmp_path)):  # the .pt2, and pt2x's ONNX written to a file
        with pytest.raises(UnsupportedOpsError) as e:
            to_tflite(src)
        text = str(e.value)
        assert [p.target for p in e.value.ops] == ["ONNX ScatterElements"], text
        assert "from ATen node scatter = torch.ops.aten.scatter.src" in text, text


def _saved_onnx(path, tmp_path) -> str:
    out = str(tmp_path / "nested.onnx")
    onnx.save(to_onnx(path, opset=18), out)
    return out


def test_version_conversion_keeps_stamps():
    """onnx's version converter drops metadata_props; normalise puts the stamps back."""
    n = helper.make_node("Relu", ["x"], ["y"], name="y")
    stamp(n, "relu", "torch.ops.aten.relu.default", "blocks.0")
    g = helper.make_graph([n], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
    out = normalise(m)
    assert out.opset_import[0].version == 18
    assert origin_of(out.graph.node[0]) == {"pt2x.aten_node": "relu", "pt2x.aten_target": "torch.ops.aten.relu.default",
                                            "pt2x.module_path": "blocks.0"}
