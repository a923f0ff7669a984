"""ONNX Einsum decomposed into TRANSPOSE/RESHAPE/BATCH_MATMUL/MUL/SUM (ops/einsum.py): single
Einsum nodes vs ONNX Runtime on two input sets (the second after resize_tensor_input to other
dynamic sizes), torch.einsum in a .pt2 vs torch eager, and the refusals naming the equation."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
import torch
from onnx import TensorProto, helper

import tflite_zoo
from pt2x.converters import to_tflite
from pt2x.converters.errors import UnsupportedOpsError

# equation, input shapes with names for dynamic dims, a second size for each dynamic dim
CASES = [
    ("bij,bjk->bik", [["b", 3, 4], ["b", 4, 5]], {"b": 5}),  # batched matmul
    ("bhqd,bhkd->bhqk", [["b", 2, "q", 8], ["b", 2, "k", 8]], {"b": 3, "q": 7, "k": 4}),  # attention scores
    ("bhqk,bhkd->bqhd", [["b", 2, 5, "k"], ["b", 2, "k", 8]], {"b": 1, "k": 9}),  # attention output, heads moved
    ("bsh,hd->bsd", [["b", "s", 6], [6, 4]], {"b": 3, "s": 2}),  # a projection: two run-time dims split back
    ("i,j->ij", [["i"], [4]], {"i": 7}),  # outer product
    ("bi,bj->bij", [["b", 3], ["b", 4]], {"b": 5}),  # batched outer product
    ("ij,ij->i", [[3, "j"], [3, "j"]], {"j": 6}),  # row-wise dot
    ("ii->", [[4, 4]], {}),  # trace
    ("bii->bi", [["b", 3, 3]], {"b": 2}),  # batched diagonal
    ("ij->ji", [["i", 5]], {"i": 2}),  # transpose
    ("bik,bkj", [["b", 2, 3], ["b", 3, 2]], {"b": 4}),  # implicit output
    ("...ij,...jk->...ik", [["b", 2, 3, 4], ["b", 2, 4, 3]], {"b": 3}),  # ellipsis
    ("abc,cd,de->abe", [[2, "b", 3], [3, 4], [4, 5]], {"b": 6}),  # three operands
    ("nchw,oc->nohw", [["n", 3, 4, 4], [5, 3]], {"n": 2}),  # a 1x1 convolution
]


def _model(eq, shapes):
    ins = [helper.make_tensor_value_info(f"x{k}", TensorProto.FLOAT, s) for k, s in enumerate(shapes)]
    node = helper.make_node("Einsum", [f"x{k}" for k in range(len(shapes))], ["y"], equation=eq)
    graph = helper.make_graph([node], "einsum", ins, [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    return onnx.shape_inference.infer_shapes(model)


def _inputs(shapes, sizes, rng):
    return [rng.standard_normal([sizes.get(d, 2) if isinstance(d, str) else d for d in s]).astype(np.float32)
            for s in shapes]


@pytest.mark.parametrize("eq,shapes,second", CASES, ids=[c[0] for c in CASES])
def test_einsum_matches_onnxruntime(eq, shapes, second):
    import onnxruntime as ort

    model = _model(eq, shapes)
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    it = tflite_zoo.interpreter(to_tflite(model))
    rng = np.random.default_rng(0)
    first = {d: 2 + k for k, d in enumerate(sorted(second))}
    for sizes in (first, second):
        xs = _inputs(shapes, sizes, rng)
        (want,) = sess.run(None, {f"x{k}": x for k, x in enumerate(xs)})
        (got,) = tflite_zoo.run(it, xs)
        assert got.shape == want.shape, (eq, sizes, got.shape, want.shape)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5, err_msg=f"{eq} {sizes}")


@pytest.mark.parametrize("eq,shapes,why", [
    ("ii->i", [["n", "n"]], "the diagonal over 'i' has a dynamic size"),
    ("bsh,bhd->bsd", [["b", "s", 6], ["b", 6, "d"]], None),  # fine: no merge needed
])
def test_einsum_refusals_name_the_equation(eq, shapes, why):
    model = _model(eq, shapes)
    if why is None:
        to_tflite(model)
        return
    with pytest.raises(UnsupportedOpsError) as e:
        to_tflite(model)
    assert "ONNX Einsum" in str(e.value) and f"Einsum {eq!r}: {why}" in str(e.value), str(e.value)


def test_integer_contraction_is_refused():
    ins = [helper.make_tensor_value_info(f"x{k}", TensorProto.INT32, [2, 3]) for k in range(2)]
    node = helper.make_node("Einsum", ["x0", "x1"], ["y"], equation="ij,kj->ik")
    graph = helper.make_graph([node], "e", ins, [helper.make_tensor_value_info("y", TensorProto.INT32, [2, 2])])
    with pytest.raises(UnsupportedOpsError, match="a contraction of integers"):
        to_tflite(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]))


class _Einsums(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(6, 8))

    def forward(self, q, k):
        s = torch.einsum("bhqd,bhkd->bhqk", q, k).softmax(-1)
        return torch.einsum("bhqk,bhkd->bqhd", s, k), torch.einsum("bqd,ed->bqe", q.flatten(1, 2), self.w)


def test_torch_einsum_pt2_matches_eager(tmp_path):
    from torch.export import Dim

    from tolerances import assert_close

    torch.manual_seed(0)
    m = _Einsums()
    batch = Dim("batch", min=1, max=8)
    ep = torch.export.export(m, (torch.randn(2, 3, 4, 8), torch.randn(2, 3, 4, 8)),
                             dynamic_shapes=({0: batch}, {0: batch}))
    path = str(tmp_path / "einsum.pt2")
    torch.export.save(ep, path)
    it = tflite_zoo.interpreter(to_tflite(path))
    for b in (2, 5):
        q, k = torch.randn(b, 3, 4, 8), torch.randn(b, 3, 4, 8)
        with torch.no_grad():
            want = m(q, k)
        got = tflite_zoo.run(it, [q.numpy(), k.numpy()])
        for i, (g, w) in enumerate(zip(got, want)):
            assert_close(g, w.numpy(), torch.float32, what=f"einsum batch {b} output {i}")
