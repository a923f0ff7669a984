"""to_onnx's contract beyond parity: symbolic dims and ranges, mutation outputs, opsets and
fused ops, IR version, external data, the unsupported-operator report and custom
lowerings, the CLI, and conversion where ``import torch`` fails."""

from __future__ import annotations

import functools
import importlib.util
import json
import os

import numpy as np
import onnx
import pytest
import torch

import onnx_zoo
from pt2x.converters import to_onnx
from pt2x.converters.aten import registry
from pt2x.converters.aten.args import bind
from pt2x.converters.aten.dtypes import ST
from pt2x.converters.errors import ConversionError, UnsupportedOpsError
from pt2x.converters.aten.graph import open_program
from torchfree import run_cli_torch_free, run_torch_free


def _model(name, decomposed=False):
    return onnx.load_from_string(onnx_zoo.converted(name, decomposed))


def _dims(vi):
    return [d.dim_param or d.dim_value for d in vi.type.tensor_type.shape.dim]


def test_symbolic_dims_and_ranges():
    m = _model("dynamic_reshape")
    ranges = json.loads({p.key: p.value for p in m.metadata_props}["pt2x.range_constraints"])
    x, y = m.graph.input
    b, s = _dims(x)
    assert isinstance(b, str) and isinstance(s, str) and b in ranges and s in ranges
    assert ranges[s] == [3, 64]
    assert _dims(y) == [b, 4]  # same symbol, same dim_param
    # outputs: symbolic expressions print as infix
    assert _dims(m.graph.output[1]) == [f"{b}*({s} + 4)"]
    assert _dims(m.graph.output[2]) == [b, f"FloorDiv({s} + 1, 2)"]


def test_dim_names_rename_symbols():
    path = onnx_zoo.saved("mlp_dynamic")
    sym = _dims(_model("mlp_dynamic").graph.input[0])[0]
    m = to_onnx(path, dim_names={sym: "batch"})
    assert _dims(m.graph.input[0])[0] == "batch" and _dims(m.graph.output[0])[0] == "batch"
    props = {p.key: p.value for p in m.metadata_props}
    assert "batch" in json.loads(props["pt2x.range_constraints"])


@pytest.mark.parametrize("decomposed", [False, True])
def test_buffer_mutation_is_an_extra_output(decomposed):
    m = _model("buffer_mutation", decomposed)
    assert [o.name for o in m.graph.output][1:] == ["steps.mutated"]
    sess = onnx_zoo.ort_session(m.SerializeToString())
    x = torch.randn(3)
    module = onnx_zoo.case("buffer_mutation").make()
    out = module(x.clone())
    got = onnx_zoo.run(sess, [x])
    np.testing.assert_allclose(got[0], out.detach().numpy(), rtol=1e-6)
    np.testing.assert_allclose(got[1], module.steps.numpy())


@pytest.mark.parametrize("decomposed", [False, True])
def test_input_mutation_is_an_extra_output(decomposed):
    m = _model("input_mutation", decomposed)
    names = [o.name for o in m.graph.output]
    assert names[1] == "x.mutated"
    x, y = torch.randn(3), torch.randn(3)
    got = onnx_zoo.run(onnx_zoo.ort_session(m.SerializeToString()), [x, y])
    np.testing.assert_allclose(got[1], (x + y).numpy(), rtol=1e-6)


def test_ir_version_and_opset():
    m = _model("mlp_dynamic")
    assert m.ir_version == 10
    assert [(o.domain, o.version) for o in m.opset_import] == [("", 23)]


@pytest.mark.parametrize("opset", [18, 20, 23, 24])
def test_opsets_fuse_what_they_have(opset):
    m = onnx.load_from_string(onnx_zoo.converted("transformer_encoder", False, opset))
    onnx.checker.check_model(m, full_check=True)
    ops = {n.op_type for n in m.graph.node}
    assert "LayerNormalization" in ops
    assert ("Attention" in ops) == (opset >= 23)
    onnx_zoo.check_parity("transformer_encoder", False, onnx_zoo.ort_session(m.SerializeToString()), scale=10)


def test_attention_decomposed_below_opset_23():
    m = onnx.load_from_string(onnx_zoo.converted("sdpa_masks_gqa", False, 21))
    assert "Attention" not in {n.op_type for n in m.graph.node}
    onnx_zoo.check_parity("sdpa_masks_gqa", False, onnx_zoo.ort_session(m.SerializeToString()), scale=10)


def test_gelu_fused_from_opset_20():
    m18 = onnx.load_from_string(onnx_zoo.converted("cnn_upsample", False, 18))
    m20 = onnx.load_from_string(onnx_zoo.converted("cnn_upsample", False, 20))
    assert "Gelu" not in {n.op_type for n in m18.graph.node}
    assert "Gelu" in {n.op_type for n in m20.graph.node}
    onnx_zoo.check_parity("cnn_upsample", False, onnx_zoo.ort_session(m18.SerializeToString()))


def test_bad_opset_is_refused():
    with pytest.raises(ConversionError, match="opset"):
        to_onnx(onnx_zoo.saved("mlp_dynamic"), opset=11)


def test_writes_file_and_external_data(tmp_path):
    from pt2x.converters.onnx.converter import save

    dst = tmp_path / "m.onnx"
    m = to_onnx(onnx_zoo.saved("transformer_encoder"), dst)
    assert dst.stat().st_size > 1000 and onnx.load(str(dst)).graph.node
    ext = tmp_path / "ext.onnx"
    before = m.SerializeToString()
    save(m, str(ext), external_threshold=1024)
    assert m.SerializeToString() == before or all(t.raw_data for t in m.graph.initializer)
    assert (tmp_path / "ext.onnx.data").exists()
    assert ext.stat().st_size < dst.stat().st_size
    import onnxruntime as ort

    sess = ort.InferenceSession(str(ext), providers=["CPUExecutionProvider"])
    onnx_zoo.check_parity("transformer_encoder", False, sess, scale=10)


def test_accepts_loaded_archive_and_model():
    from pt2x.serde import load

    with load(onnx_zoo.saved("mlp_dynamic")) as archive:
        a = to_onnx(archive)
        b = to_onnx(archive.model())
    assert a.graph.SerializeToString() == b.graph.SerializeToString()


# ----------------------------------------------------------------- unsupported report


@torch.library.custom_op("pt2x_onnx_test::twice", mutates_args=())
def twice(x: torch.Tensor) -> torch.Tensor:
    return x * 2


@twice.register_fake
def _(x):
    return torch.empty_like(x)


class TwoCustomOps(torch.nn.Module):
    def forward(self, x, y):
        a = torch.ops.pt2x_test.scaled_add(x, y, 0.5)
        b = torch.ops.pt2x_test.scaled_add(a, y, 2.0)
        return torch.ops.pt2x_onnx_test.twice(b) + torch.randn(2, 3)


def test_report_lists_every_unsupported_op_once(tmp_path):
    import zoo  # noqa: F401  (defines pt2x_test::scaled_add)

    ep = torch.export.export(TwoCustomOps(), (torch.randn(2, 3), torch.randn(2, 3)))
    path = tmp_path / "two.pt2"
    torch.export.save(ep, path)
    with pytest.raises(UnsupportedOpsError) as err:
        to_onnx(path)
    ops = {p.target: p for p in err.value.ops}
    assert set(ops) == {"pt2x_test.scaled_add.default", "pt2x_onnx_test.twice.default", "aten.randn.default"}
    assert ops["pt2x_test.scaled_add.default"].count == 2
    text = str(err.value)
    assert "3 unsupported operator(s) in 4 node(s)" in text
    assert "@lowering('onnx', " in text and "scaled_add" in ops["pt2x_test.scaled_add.default"].example


def test_registering_a_custom_lowering_converts():
    def scaled_add(ctx, node):
        a = bind(node, "x", "y", "alpha")
        return ctx.op("Add", ctx.t(a.x), ctx.op("Mul", ctx.t(a.y), ctx.const(a.alpha, ST.FLOAT)))

    registry.register("onnx", "pt2x_test.scaled_add.default", scaled_add)
    try:
        with pytest.raises(ValueError, match="already has a lowering"):
            registry.register("onnx", "pt2x_test.scaled_add.default", lambda ctx, node: None)
        m = to_onnx(onnx_zoo.saved("custom_op"))
        onnx_zoo.check_parity("custom_op", False, onnx_zoo.ort_session(m.SerializeToString()))
    finally:
        registry.unregister("onnx", "pt2x_test.scaled_add.default")


# ------------------------------------------------------------------ torch-free, CLI

TORCH_FREE = ["mlp_dynamic", "transformer_encoder", "cond", "lstm", "conv_bn_pool", "bf16_mlp", "hf_bert"]


def test_conversion_runs_without_torch(tmp_path):
    names = [n for n in TORCH_FREE if "hf" not in onnx_zoo.case(n).tags or importlib.util.find_spec("transformers")]
    paths = {n: onnx_zoo.saved(n) for n in names}
    code = """
        import sys, json
        from pt2x.converters import to_onnx
        for name, src in json.loads(sys.argv[1]).items():
            to_onnx(src, sys.argv[2] + "/" + name + ".onnx")
        assert "torch" not in [m.split(".")[0] for m in sys.modules if sys.modules[m] is not None]
        print("converted", len(json.loads(sys.argv[1])))
    """
    r = run_torch_free(code, json.dumps(paths), str(tmp_path))
    assert r.returncode == 0, r.stderr
    for name in names:
        sess = onnx_zoo.ort_session(open(tmp_path / f"{name}.onnx", "rb").read())
        onnx_zoo.check_parity(name, False, sess, scale=10)


def test_import_is_lean():
    r = run_torch_free("""
        import sys
        import pt2x.converters
        assert "onnx" not in sys.modules
        import pt2x.converters.onnx
        heavy = [m for m in ("torch", "onnxruntime", "onnx_ir", "onnxscript", "transformers") if sys.modules.get(m) is not None]
        assert not heavy, heavy
    """)
    assert r.returncode == 0, r.stderr


def test_cli_convert(tmp_path):
    out = tmp_path / "cli.onnx"
    r = run_cli_torch_free("convert", onnx_zoo.saved("mlp_dynamic"), "--to", "onnx", "-o", str(out), "--opset", "20")
    assert r.returncode == 0, r.stderr
    m = onnx.load(str(out))
    assert m.opset_import[0].version == 20
    onnx_zoo.check_parity("mlp_dynamic", False, onnx_zoo.ort_session(m.SerializeToString()))


def test_cli_reports_unsupported(tmp_path):
    r = run_cli_torch_free("convert", onnx_zoo.saved("custom_op"), "--to", "onnx", "-o", str(tmp_path / "x.onnx"))
    assert r.returncode != 0
    assert "pt2x_test.scaled_add.default" in r.stderr + r.stdout
    assert not os.path.exists(tmp_path / "x.onnx")


class RefusedArgument(torch.nn.Module):
    def forward(self, x):
        a = torch.linalg.det(x)  # of 8x8 matrices: pt2x expands cofactors up to 3x3
        b = torch.ops.pt2x_onnx_test.twice(x)
        return a.sum() + b.sum() + torch.linalg.det(b).sum()


def test_report_collects_lowering_refusals_with_reasons(tmp_path):
    ep = torch.export.export(RefusedArgument(), (torch.randn(1, 2, 8, 8),))
    path = tmp_path / "refused.pt2"
    torch.export.save(ep, path)
    with pytest.raises(UnsupportedOpsError) as err:
        to_onnx(path)
    ops = {p.target: p for p in err.value.ops}
    det = next(p for t, p in ops.items() if "linalg_det" in t)
    assert det.count == 1  # the second det reads a value already refused: not reported twice
    assert any("up to 3x3" in r for r in det.reasons)
    assert "pt2x_onnx_test.twice.default" in ops


# --------------------------------------------------------- any size within the ranges

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


@functools.cache
def _sess(name):
    return onnx_zoo.ort_session(onnx_zoo.converted(name))


def _compare(name, args, scale=1.0):
    from tolerances import assert_close

    expected = onnx_zoo.eager_outputs(name, args, {})
    got = onnx_zoo.run(_sess(name), list(args))
    for i, (e, g) in enumerate(zip(expected, got)):
        e = e if isinstance(e, torch.Tensor) else torch.tensor(e)
        assert_close(g, onnx_zoo.to_numpy(e), e.dtype, what=f"{name} output {i} at {[a.shape for a in args]}",
                     scale=scale)


@settings(max_examples=6, deadline=None)
@given(b=st.integers(2, 32), s=st.integers(3, 64))
def test_dynamic_reshape_any_size_in_range(b, s):
    _compare("dynamic_reshape", (torch.randn(b, s), torch.randn(b, 4)))


@settings(max_examples=4, deadline=None)
@given(b=st.integers(1, 16), s=st.integers(2, 48))
def test_llama_any_size_in_range(b, s):
    pytest.importorskip("transformers")
    _compare("hf_llama", (torch.randint(0, 100, (b, s)),), scale=10)


def test_conversion_is_deterministic():
    path = onnx_zoo.saved("transformer_encoder")
    assert to_onnx(path).SerializeToString() == to_onnx(path).SerializeToString()


@pytest.mark.parametrize("name", ["transformer_encoder", "hf_gpt2", "lstm", "tied_weights"])
def test_weights_are_stored_once(name):
    """Folded transposes replace their source; nothing is duplicated or left unread."""
    if "hf" in onnx_zoo.case(name).tags:
        pytest.importorskip("transformers")
    from pt2x.serde import load

    m = _model(name)
    stored = sum(len(t.raw_data) for t in m.graph.initializer)
    with load(onnx_zoo.saved(name)) as archive:
        model = archive.model()
        arrays = {id(w.array): w.array for w in open_program(model)[0].weights.values()}  # tied: one placeholder
        weights = sum(a.nbytes for a in arrays.values())
    assert stored <= weights * 1.01 + 4096
    used = {i for n in m.graph.node for i in n.input}
    assert all(t.name in used for t in m.graph.initializer)
