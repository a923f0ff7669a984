"""The adapter on ExecuTorch ``.pte`` files, where ``import torch`` fails: pt2x's own (portable
kernels, a dynamic batch; and XNNPACK-delegated, one node per delegate call) and exir's. Each instruction is a node
labeled by its operator, in chain order; edges follow the values (a kernel's operands, its last
argument what it writes, a view read from what was last written at its offset); constants show
dtype, sizes and bytes, never their data. A malformed file is refused with the reader's error."""

from __future__ import annotations

import re

import pytest
import torch

import pte_zoo
from explorer_check import check_well_formed, convert_torch_free


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, str]:
    d = tmp_path_factory.mktemp("pte_adapter")
    out = {}
    for name in ("cnn", "mlp_dynamic", "block"):
        out[name] = str(d / f"{name}.pte")
        with open(out[name], "wb") as f:
            f.write(pte_zoo.converted(name, **pte_zoo.PORTABLE))
    out["cnn_xnnpack"] = str(d / "cnn_xnnpack.pte")
    with open(out["cnn_xnnpack"], "wb") as f:
        f.write(pte_zoo.converted("cnn"))  # delegated: XNNPACK is to_pte's default
    broken = str(d / "broken.pte")
    with open(out["cnn"], "rb") as f, open(broken, "wb") as g:
        data = bytearray(f.read())
        data[0:4] = (len(data) + 64).to_bytes(4, "little")  # the root table past the end
        g.write(bytes(data))
    out["broken"] = broken
    exir = pytest.importorskip("executorch.exir", reason="executorch is not installed: no exir-written file")
    ep = torch.export.export(pte_zoo.module("cnn"), (torch.randn(2, 3, 16, 16),))
    out["exir_cnn"] = str(d / "exir_cnn.pte")
    with open(out["exir_cnn"], "wb") as f:
        f.write(exir.to_edge(ep).to_executorch().buffer)
    return out


@pytest.fixture(scope="module")
def graphs(files) -> dict:
    return convert_torch_free(list(files.values()))


def _nodes(graphs, files, name) -> dict[str, dict]:
    resp = graphs[files[name]]
    assert "error" not in resp, resp
    check_well_formed(resp["graphs"])
    (g,) = resp["graphs"]
    assert g["id"] == "forward"
    return {n["id"]: n for n in g["nodes"]}


def _sources(node: dict) -> list[str]:
    return [e["sourceNodeId"] for e in node["incomingEdges"]]


@pytest.mark.parametrize("name", ["cnn", "exir_cnn"])
def test_kernels_in_order_with_their_operands(graphs, files, name):
    nodes = _nodes(graphs, files, name)
    kernels = [n for n in nodes.values() if re.fullmatch(r"i\d+", n["id"])]
    labels = [n["label"] for n in kernels]
    assert labels[0] == "aten.convolution" and "aten.relu" in labels and labels[-1] == "aten.addmm"
    # each kernel reads the one before it (the CNN is a chain), through a view where shapes change
    data_sources = [[s for s in _sources(n) if s.startswith(("i", "input"))] for n in kernels]
    for k, sources in enumerate(data_sources[1:], 1):
        if kernels[k]["label"] != "aten.permute_copy":  # the linear's weight, transposed: it reads a constant
            assert any(re.fullmatch(r"i\d+", s) for s in sources), (kernels[k]["label"], sources)
    conv = kernels[0]
    assert _sources(conv)[0] == "input0"
    weight = nodes[_sources(conv)[1]]
    attrs = {kv["key"]: kv["value"] for kv in weight["attrs"]}
    assert attrs == {"kind": "constant tensor", "dtype": "float32", "sizes": "[8, 3, 3, 3]", "size": "864 bytes"}
    assert _sources(nodes["output"]) == [kernels[-1]["id"]]


def test_delegate_calls_are_nodes(graphs, files):
    """The CNN delegated: two XNNPACK partitions around the portable adaptive pool XNNPACK has no
    node for (test_pte_xnnpack.EXPECTED), each one node reading what the one before wrote."""
    nodes = _nodes(graphs, files, "cnn_xnnpack")
    kernels = [n for n in nodes.values() if re.fullmatch(r"i\d+", n["id"])]
    assert [n["label"] for n in kernels] == ["delegate XnnpackBackend", "aten._adaptive_avg_pool2d",
                                             "delegate XnnpackBackend"]
    assert _sources(kernels[0])[0] == "input0"
    for k in (1, 2):
        assert kernels[k - 1]["id"] in _sources(kernels[k])
    assert _sources(nodes["output"]) == [kernels[-1]["id"]]


def test_dynamic_input_and_shapes(graphs, files):
    nodes = _nodes(graphs, files, "mlp_dynamic")
    attrs = {kv["key"]: kv["value"] for kv in nodes["input0"]["attrs"]}
    assert attrs["shape_dynamism"] == "DYNAMIC_BOUND" and attrs["dtype"] == "float32"


def test_malformed_file_is_refused(graphs, files):
    resp = graphs[files["broken"]]
    assert resp["error"] == "Pt2FormatError" and "program: table at" in resp["message"], resp


def test_random_byte_flips_are_pt2_errors(files):
    """The graph reads more of the file than inspect does (every value and instruction): flipped
    bytes and truncations still end in a Pt2Error or a graph, never another exception."""
    import random

    from pt2x.explorer.pte_graph import pte_graphs
    from pt2x.serde.errors import Pt2Error

    with open(files["cnn"], "rb") as f:
        data = f.read()
    rng, drawn = random.Random(0), 0
    for i in range(500):
        raw = bytearray(data)
        if i % 10 == 0:
            raw = raw[: rng.randrange(len(raw))]
        for _ in range(rng.randint(1, 8)):
            if raw:
                raw[rng.randrange(min(len(raw), 6000))] = rng.randrange(256)  # the flatbuffer, not the weights
        try:
            pte_graphs(bytes(raw))
            drawn += 1
        except Pt2Error:
            pass
    assert 0 < drawn < 500
