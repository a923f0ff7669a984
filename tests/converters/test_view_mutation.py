"""The view-mutation pass (``converters/aten/views.py``): in-place writes through views reach their
base and every other view of it, in ONNX Runtime, against torch eager.

Programs are exported by torch at test time, as exported (training IR: the in-place ops and
the views are in the graph) and after ``run_decompositions()`` (torch's functionalization:
``*_scatter`` ops), saved with ``torch.export.save`` and converted by pt2x. Each view kind is
written through on a local, a buffer (its ``<fqn>.mutated`` output must hold torch's new
buffer) and a user input (``<name>.mutated``). What cannot be proved is refused naming the
node.
"""

from __future__ import annotations

import copy
import dataclasses
import inspect
import os
import tempfile

import numpy as np
import onnx
import pytest

torch = pytest.importorskip("torch")

import onnx_zoo  # noqa: E402
from tolerances import assert_close  # noqa: E402
from torchfree import run_torch_free  # noqa: E402

from pt2x.converters import to_onnx  # noqa: E402
from pt2x.converters.errors import UnsupportedOpsError  # noqa: E402
from pt2x.serde import load  # noqa: E402

_TMP = tempfile.mkdtemp(prefix="pt2x-view-mutation-")


def _write_each_view_kind(t: torch.Tensor) -> list[torch.Tensor]:
    """Writes into ``t`` (shape [4, 6]) through every view kind, reading views taken before
    the writes afterwards; returns those reads."""
    row = t[3]  # taken before the writes, read after them
    flat = t.view(-1)
    t[:, 1:3].add_(1.0)  # slice
    t.select(0, 1).mul_(2.0)  # select
    t.view(2, 12)[1].fill_(0.5)  # view
    t.reshape(24)[0:5].sub_(3.0)  # reshape (of contiguous data: a view)
    t.transpose(0, 1)[5].add_(10.0)  # transpose
    t.permute(1, 0)[0, 1:].mul_(-1.0)  # permute
    t.unsqueeze(0)[0, 0].add_(0.25)  # unsqueeze
    t.unsqueeze(1).squeeze(1)[2, 0].fill_(9.0)  # squeeze
    t.narrow(1, 4, 2).mul_(0.5)  # narrow
    t[:, :4].diagonal().fill_(-2.0)  # diagonal
    t.as_strided((6, 4), (4, 1)).select(0, 5).add_(100.0)  # as_strided with contiguous strides
    return [row * 1.0, flat.sum().reshape(1)]


class LocalWrites(torch.nn.Module):
    def forward(self, x):
        t = x * 1.0
        reads = _write_each_view_kind(t)
        return t, *reads


class BufferWrites(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("state", torch.arange(24.0).reshape(4, 6))

    def forward(self, x):
        reads = _write_each_view_kind(self.state)
        return x + self.state, *reads


class InputWrites(torch.nn.Module):
    def forward(self, x, y):
        reads = _write_each_view_kind(x)
        return x + y, *reads


class ChainedAndIndexed(torch.nn.Module):
    """Chains of views, ``copy_``, ``index_put_`` and ``masked_fill_`` on slices, and a read of
    a sibling view after the write."""

    def forward(self, x, idx):
        y = x.clone()
        y[:, 1:3][0].fill_(5.0)  # slice of slice
        y[1:, :][1:][0, 2:].add_(1.0)  # three slices then a select
        y[2, 1:4].copy_(x[0, :3] * 7.0)  # copy_
        sib = y[3]
        y[:, 4:].index_put_((idx,), torch.full((2,), -4.0))  # index_put_ on a slice
        y[0:2].masked_fill_(x[0:2] > 0.5, 0.0)  # masked_fill_ on a slice
        a, b = y.split([2, 4], dim=1)  # pieces of split, chunk and unbind
        b[1:].add_(0.5)
        y.chunk(3, dim=1)[2].mul_(3.0)
        y.unbind(0)[3].sub_(1.0)
        y.t().reshape(-1)[0:3].fill_(100.0)  # a reshape that copies: y does not change
        y.to(torch.float32, copy=True)[0].fill_(100.0)  # a copy too
        return y, sib * 2.0, a * 1.0


def _args(module):
    torch.manual_seed(0)
    if isinstance(module, ChainedAndIndexed):
        return (torch.rand(4, 6), torch.tensor([0, 2]))
    if isinstance(module, InputWrites):
        return (torch.randn(4, 6), torch.randn(4, 6))
    if isinstance(module, DiagonalPlanes):
        return (torch.randn(4, 3, 5),)
    return (torch.randn(4, 6),)


def _convert(module, args, name, decomposed):
    ep = torch.export.export(copy.deepcopy(module), tuple(a.clone() for a in args))
    if decomposed:
        ep = ep.run_decompositions()
    path = os.path.join(_TMP, f"{name}_{int(decomposed)}.pt2")
    torch.export.save(ep, path)
    return ep, to_onnx(path)


def _expected(module, args, mutated_names):
    """torch eager's outputs, then each mutated buffer/input after the call (in the order of
    the model's ``<target>.mutated`` outputs)."""
    m, a = copy.deepcopy(module), [x.clone() for x in args]
    with torch.no_grad():
        outs = onnx_zoo._leaves(m(*a))
    params = list(inspect.signature(m.forward).parameters)
    buffers = dict(m.named_buffers())
    after = [buffers[t] if t in buffers else a[params.index(t)] for t in mutated_names]
    return outs + after


def _check(module, name, decomposed, mutated=()):
    args = _args(module)
    _, model = _convert(module, args, name, decomposed)
    onnx.checker.check_model(model, full_check=True)
    names = [o.name for o in model.graph.output]
    got_mutated = [n[: -len(".mutated")] for n in names if n.endswith(".mutated")]
    assert got_mutated == list(mutated), names
    expected = _expected(module, args, got_mutated)
    got = onnx_zoo.run(onnx_zoo.ort_session(model.SerializeToString()), [a.clone() for a in args])
    assert len(got) == len(expected), names
    for out_name, e, g in zip(names, expected, got):
        assert_close(g, onnx_zoo.to_numpy(e), e.dtype, what=f"{name} {out_name}")
    return model


FORMS = pytest.mark.parametrize("decomposed", [False, True], ids=["exported", "decomposed"])


@FORMS
@pytest.mark.parametrize("module,mutated", [(LocalWrites(), ()), (BufferWrites(), ("state",)),
                                            (InputWrites(), ("x",))], ids=["local", "buffer", "input"])
def test_write_through_each_view_kind(module, mutated, decomposed):
    _check(module, f"kinds_{type(module).__name__}", decomposed, mutated)


@FORMS
def test_chained_views_copy_index_put_masked_fill(decomposed):
    _check(ChainedAndIndexed(), "chained", decomposed)


class DiagonalPlanes(torch.nn.Module):
    """Diagonals of a 3-D value across its first and last dims, with offsets: the lowerings move
    the two dims last and back (the write-back is a ``diagonal_scatter`` in both forms)."""

    def forward(self, x):
        y = x * 1.0
        before = y.diagonal(1, 0, 2)  # taken before the write, read after it
        y.diagonal(-1, 2, 0).add_(5.0)  # dims 2, 0: the permutation is not its own inverse
        return y, before * 2.0


@FORMS
def test_write_through_a_diagonal_of_moved_dims(decomposed):
    _check(DiagonalPlanes(), "diagonal_planes", decomposed)


def test_exported_program_keeps_the_writes_through_views():
    """The training IR really writes through views (so the tests above exercise the pass)."""
    ep = torch.export.export(LocalWrites(), _args(LocalWrites()))
    targets = {str(n.target) for n in ep.graph.nodes}
    for t in ("aten.slice.Tensor", "aten.select.int", "aten.transpose.int", "aten.permute.default",
              "aten.diagonal.default", "aten.as_strided.default", "aten.narrow.default", "aten.fill_.Scalar"):
        assert any(t in x for x in targets), t


class SwinMask(torch.nn.Module):
    """torchvision swin's shifted-window mask: writes into slices of a ``new_zeros`` tensor."""

    def forward(self, x):
        m = x.new_zeros((x.shape[0], 4, 4))
        cnt = 0
        for h in (slice(0, 2), slice(2, 4)):
            for w in (slice(0, 1), slice(1, 4)):
                m[:, h, w] = cnt
                cnt += 1
        return m + x


@FORMS
def test_swin_mask_with_dynamic_batch(decomposed):
    module, x = SwinMask(), torch.randn(2, 4, 4)
    ep = torch.export.export(module, (x,), dynamic_shapes=({0: torch.export.Dim("b", max=64)},))
    if decomposed:
        ep = ep.run_decompositions()
    path = os.path.join(_TMP, f"swin_mask_{int(decomposed)}.pt2")
    torch.export.save(ep, path)
    sess = onnx_zoo.ort_session(to_onnx(path).SerializeToString())
    for b in (1, 3):
        x = torch.randn(b, 4, 4)
        (got,) = onnx_zoo.run(sess, [x])
        np.testing.assert_allclose(got, module(x).numpy(), rtol=1e-6, atol=1e-6)


class StridedPool(torch.nn.Module):
    """swin_t's head: decomposed, the pool's flatten is an ``as_strided`` over a symbolic batch."""

    def __init__(self):
        super().__init__()
        self.pool = torch.nn.AdaptiveAvgPool2d(1)

    def forward(self, x):
        return torch.flatten(self.pool(x.permute(0, 3, 1, 2)), 1)


def test_as_strided_with_symbolic_sizes_and_contiguous_strides_is_a_reshape():
    module = StridedPool()
    ep = torch.export.export(module, (torch.randn(2, 4, 4, 8),),
                             dynamic_shapes=({0: torch.export.Dim("b", max=64)},)).run_decompositions()
    strided = [n for n in ep.graph.nodes if "as_strided" in str(n.target)]
    assert strided and any(isinstance(s, torch.fx.Node) for s in strided[0].args[1]), ep.graph  # a SymInt size
    path = os.path.join(_TMP, "strided_pool.pt2")
    torch.export.save(ep, path)
    sess = onnx_zoo.ort_session(to_onnx(path).SerializeToString())
    for b in (1, 3):
        x = torch.randn(b, 4, 4, 8)
        (got,) = onnx_zoo.run(sess, [x])
        np.testing.assert_allclose(got, module(x).numpy(), rtol=1e-5, atol=1e-6)


class KVCache(torch.nn.Module):
    """A static key/value cache: a buffer written through a slice whose end is symbolic."""

    def __init__(self):
        super().__init__()
        self.register_buffer("cache", torch.zeros(2, 2, 8, 4))

    def forward(self, k):
        self.cache[:, :, 2:2 + k.shape[2]] = k
        return self.cache.sum(2)


def test_buffer_written_through_a_symbolic_slice():
    ep = torch.export.export(KVCache(), (torch.randn(2, 2, 3, 4),),
                             dynamic_shapes=({2: torch.export.Dim("t", min=1, max=6)},))
    path = os.path.join(_TMP, "kv_cache.pt2")
    torch.export.save(ep, path)
    model = to_onnx(path)
    assert [o.name for o in model.graph.output][-1] == "cache.mutated"
    sess = onnx_zoo.ort_session(model.SerializeToString())
    for t in (1, 5):
        k, module = torch.randn(2, 2, t, 4), KVCache()
        expected = module(k.clone())
        out, cache = onnx_zoo.run(sess, [k])
        np.testing.assert_allclose(out, expected.numpy(), rtol=1e-6, atol=1e-6)
        np.testing.assert_array_equal(cache, module.cache.numpy())


class MixedWrites(torch.nn.Module):
    def forward(self, x):
        t = x * 1.0
        t.transpose(1, 2)[:, 0].mul_(3.0)
        t[:, 1:3][1].add_(1.0)
        t.diagonal(0, 1, 2).fill_(-1.0)
        return SwinMask()(x), t


def test_tflite_target_gets_the_same_write_back():
    """The pass lives in the shared driver: the TFLite target (which consumes pt2x's ONNX)
    writes through views too, in LiteRT's interpreter."""
    interpreter = pytest.importorskip("ai_edge_litert.interpreter", reason="ai-edge-litert (test extra) missing")
    from pt2x.converters import to_tflite

    module, x = MixedWrites(), torch.randn(2, 4, 4)
    path = os.path.join(_TMP, "mixed_tflite.pt2")
    torch.export.save(torch.export.export(module, (x,)), path)
    it = interpreter.Interpreter(model_content=bytes(to_tflite(path)))
    it.allocate_tensors()
    it.set_tensor(it.get_input_details()[0]["index"], x.numpy())
    it.invoke()
    expected = module(x)
    outs = it.get_output_details()
    assert len(outs) == len(expected)
    for o, e in zip(outs, expected):
        np.testing.assert_allclose(it.get_tensor(o["index"]), e.numpy(), rtol=1e-6, atol=1e-6)


def test_write_back_runs_torch_free(tmp_path):
    """The pass is converter code: it runs where ``import torch`` fails, and the model it
    writes there matches torch eager (a buffer written through views, its mutation output)."""
    module = BufferWrites()
    args = _args(module)
    path = os.path.join(_TMP, "torch_free.pt2")
    torch.export.save(torch.export.export(copy.deepcopy(module), args), path)
    out = tmp_path / "torch_free.onnx"
    r = run_torch_free("""
        import sys
        from pt2x.converters import to_onnx
        to_onnx(sys.argv[1], sys.argv[2])
        assert sys.modules.get("torch") is None
    """, path, str(out))
    assert r.returncode == 0, r.stderr
    model = onnx.load(str(out))
    names = [o.name for o in model.graph.output]
    assert names[-1] == "state.mutated", names
    got = onnx_zoo.run(onnx_zoo.ort_session(model.SerializeToString()), [a.clone() for a in args])
    for out_name, e, g in zip(names, _expected(module, args, ["state"]), got):
        assert_close(g, onnx_zoo.to_numpy(e), e.dtype, what=f"torch-free {out_name}")


# ---------------------------------------------------------------- refusals


class ExpandWrite(torch.nn.Module):
    def forward(self, x):
        y = x.clone()[:1]
        y.expand(3, 6).add_(1.0)  # every row of the expanded view is the same memory
        return y


class OverlappingStridedWrite(torch.nn.Module):
    def forward(self, x):
        y = x.clone()
        y.as_strided((3, 3), (1, 1)).add_(1.0)  # element (0, 1) is element (1, 0)
        return y


class CondViewWrite(torch.nn.Module):
    def forward(self, x):
        y = x.clone()

        def true_fn(y):
            z = y.clone()
            z[0].fill_(1.0)
            return z

        return torch.cond(x.sum() > 0, true_fn, lambda y: y.clone(), (y,))


@pytest.mark.parametrize("module,node,why", [
    (ExpandWrite(), "add_", "expand"),
    (OverlappingStridedWrite(), "add_", "overlap"),
], ids=["expand", "as_strided_overlap"])
def test_unprovable_aliasing_is_refused_naming_the_node(module, node, why):
    ep = torch.export.export(module, (torch.randn(4, 6),))
    assert any(node in str(n.target) for n in ep.graph.nodes)
    path = os.path.join(_TMP, f"refused_{type(module).__name__}.pt2")
    torch.export.save(ep, path)
    with pytest.raises(UnsupportedOpsError) as e:
        to_onnx(path)
    msg = str(e.value)
    assert node in msg and why in msg, msg


def test_write_inside_a_cond_branch_to_a_local_view_converts():
    """The branch's own clone is the base: the write stays inside the branch."""
    _check(CondViewWrite(), "cond_view", False)


def test_write_inside_a_cond_branch_to_its_operand_is_refused():
    """torch refuses to export a branch that writes into its operand, so the case is made from
    CondViewWrite's program by pointing the branch's ``select`` at the branch input (the
    operand) instead of its clone: the write would have to leave the subgraph."""
    ep = torch.export.export(CondViewWrite(), (torch.randn(4, 6),))
    path = os.path.join(_TMP, "cond_operand.pt2")
    torch.export.save(ep, path)
    archive = load(path)
    model = archive.models["model"]
    (branch,) = [na.arg.value.graph for n in model.program.graph_module.graph.nodes for na in n.inputs
                 if na.arg.type == "as_graph" and len(na.arg.value.graph.nodes) == 3]
    operand = branch.inputs[0].value.name
    i, sel = next((i, n) for i, n in enumerate(branch.nodes) if n.target.endswith("aten.select.int"))
    first = dataclasses.replace(sel.inputs[0], arg=type(sel.inputs[0].arg)(as_tensor=type(
        sel.inputs[0].arg.value)(name=operand)))
    branch.nodes[i] = dataclasses.replace(sel, inputs=[first, *sel.inputs[1:]])
    with pytest.raises(UnsupportedOpsError, match="from outside this subgraph") as e:
        to_onnx(model)
    assert "fill_" in str(e.value), str(e.value)
