"""Hostile programs given to ``to_onnx``: each ends in pt2x's own error (a ``ConversionError``
or another ``Pt2Error``) naming the archive member and the node or field at fault, never in
``TypeError``/``IndexError``/``MemoryError`` from inside a lowering. Programs are the
committed fixtures (written by torch 2.13.0) with their JSON edited; needs no torch."""

from __future__ import annotations

import io
import json
import os
import zipfile

import numpy as np
import pytest

from paths import FIXTURES
from torchfree import run_torch_free

from pt2x.converters import to_onnx
from pt2x.converters.errors import ConversionError, UnsupportedOpsError
from pt2x.converters.limits import MAX_CONSTANT_BYTES
from pt2x.converters.aten.precheck import ProgramCheckError
from pt2x.serde import limits
from pt2x.serde.errors import Pt2Error, SymbolicExprError

FIX = os.path.join(FIXTURES, "pt2", "torch-2.13.0")


def _fixture(name: str) -> str:
    return os.path.join(FIX, f"{name}.pt2")


def _member(name: str) -> str:
    return f"{name}/models/model.json"


def _edit(name: str, fn, rel: str = "models/model.json") -> bytes:
    """The fixture ``name`` with member ``<root>/rel`` (JSON) passed through ``fn(obj)``."""
    out = io.BytesIO()
    with zipfile.ZipFile(_fixture(name)) as zin, zipfile.ZipFile(out, "w") as zout:
        for info in zin.infolist():
            data = zin.read(info.filename)
            if info.filename == f"{name}/{rel}":
                obj = json.loads(data)
                fn(obj)
                data = json.dumps(obj).encode()  # ensure_ascii: lone surrogates travel as \\udXXX escapes
            zout.writestr(info.filename, data)
    return out.getvalue()


def _graph(obj) -> dict:
    return obj["graph_module"]["graph"]


def _node(obj, name: str) -> dict:
    return next(n for n in _graph(obj)["nodes"] if n["name"] == name)


def _arg(node: dict, name: str) -> dict:
    return next(a for a in node["inputs"] if a["name"] == name)


def _refused(data: bytes, exc=ConversionError) -> Pt2Error:
    with pytest.raises(exc) as info:
        to_onnx(data)
    err = info.value
    str(err).encode("utf-8")  # printable: no lone surrogate copied into the message
    return err


# ---------------------------------------------------------------- node against its signature


def test_missing_required_argument():
    data = _edit("dict_inputs", lambda j: _node(j, "add")["inputs"].pop(1))  # add.Tensor without `other`
    e = _refused(data, ProgramCheckError)
    assert e.member == _member("dict_inputs")
    assert "graph_module.graph.nodes[0]: node 'add' (aten.add.Tensor) lacks required argument 'other'" in str(e)


def test_wrong_argument_kind():
    def edit(j):
        _arg(_node(j, "add"), "self")["arg"] = {"as_string": "x"}

    e = _refused(_edit("dict_inputs", edit), ProgramCheckError)
    assert "nodes[0].inputs[0]: node 'add' (aten.add.Tensor) argument 'self' is as_string, expected Tensor" in str(e)


def test_list_where_a_tensor_belongs():
    """The fuzzer's ``TypeError: unhashable type: 'list'`` inside ``ctx.info``."""
    def edit(j):
        n = _node(j, "max_pool2d_with_indices")
        _arg(n, "self")["arg"] = {"as_tensors": [{"name": "relu"}]}

    e = _refused(_edit("conv_bn_pool", edit), ProgramCheckError)
    assert ("node 'max_pool2d_with_indices' (aten.max_pool2d_with_indices.default) "
            "argument 'self' is as_tensors") in str(e)


def test_argument_passed_twice():
    def edit(j):
        n = _node(j, "mul")
        n["inputs"].append(json.loads(json.dumps(n["inputs"][1])))

    e = _refused(_edit("dict_inputs", edit), ProgramCheckError)
    assert "node 'mul' (aten.mul.Tensor) passes argument 'other' twice" in str(e)


def test_output_count():
    def edit(j):
        n = _node(j, "relu")
        n["outputs"].append({"as_tensor": {"name": "relu_extra"}})
        _graph(j)["tensor_values"]["relu_extra"] = _graph(j)["tensor_values"]["relu"]

    e = _refused(_edit("mlp_dynamic", edit), ProgramCheckError)
    assert "node 'relu' (aten.relu.default) returns 1 value(s), the node lists 2" in str(e)


def test_missing_output_of_multi_output_op():
    """``ctx.out_info(i)`` indexed past the listed outputs (``IndexError``) before the prechecks."""
    def edit(j):
        _node(j, "_native_batch_norm_legit_no_training")["outputs"][1:] = []

    e = _refused(_edit("conv_bn_pool", edit), ProgramCheckError)
    assert "returns 3 value(s), the node lists 1" in str(e)


# ------------------------------------------------------------------------- tensor metadata


@pytest.mark.parametrize("size", [2**63, 2**64, -1])
def test_size_outside_int64_or_negative(size):
    def edit(j):
        _graph(j)["tensor_values"]["matmul"]["sizes"][1] = {"as_int": size}

    e = _refused(_edit("lifted_constant", edit), ProgramCheckError)
    assert e.member == _member("lifted_constant")
    assert f"graph_module.graph.tensor_values['matmul'].sizes[1]: size {size} is negative or not below 2**63" in str(e)


def test_rank_past_limit():
    def edit(j):
        meta = _graph(j)["tensor_values"]["relu"]
        meta["sizes"] = [{"as_int": 1}] * (limits.MAX_TENSOR_RANK + 1)
        meta["strides"] = [{"as_int": 1}] * (limits.MAX_TENSOR_RANK + 1)

    e = _refused(_edit("mlp_dynamic", edit), ProgramCheckError)
    assert f"tensor_values['relu'].sizes: rank {limits.MAX_TENSOR_RANK + 1} exceeds MAX_TENSOR_RANK" in str(e)


def test_unknown_dtype():
    e = _refused(_edit("mlp_dynamic", lambda j: _graph(j)["tensor_values"]["relu"].update(dtype=0)), ProgramCheckError)
    assert "tensor_values['relu'].dtype: dtype UNKNOWN has no array type" in str(e)


def test_input_of_a_dtype_onnx_lacks_is_reported():
    """FLOAT8E8M0FNU passes the prechecks (it has an array type) but has no ONNX type: the
    input is reported like an unsupported operator, and its readers are skipped (fuzz 13:2456)."""
    e = _refused(_edit("dict_inputs", lambda j: _graph(j)["tensor_values"]["inputs_b"].update(dtype=33)),
                 UnsupportedOpsError)
    assert e.member == _member("dict_inputs")
    assert [p.target for p in e.ops] == ["tensor input"]
    assert "inputs_b = tensor input()" in str(e) and "reason: dtype FLOAT8E8M0FNU has no ONNX type" in str(e)
    assert "Custom operators" not in str(e)


def test_output_of_a_dtype_onnx_lacks_is_reported():
    e = _refused(_edit("dict_inputs", lambda j: _graph(j)["tensor_values"]["mul"].update(dtype=33)),
                 UnsupportedOpsError)
    assert "reason: dtype FLOAT8E8M0FNU has no ONNX type" in str(e)


def test_integer_argument_outside_int64():
    e = _refused(_edit("cond", lambda j: _arg(_node(j, "gt"), "other")["arg"].update(as_int=2**64)), ProgramCheckError)
    assert "graph_module.graph.nodes[1].inputs[1].arg: integer 18446744073709551616 is outside int64" in str(e)


# ------------------------------------------------------------------------------- names


def test_lone_surrogate_in_node_name():
    e = _refused(_edit("mlp_dynamic", lambda j: _node(j, "relu").update(name="re\ud800lu")), ProgramCheckError)
    assert "graph_module.graph.nodes[1]: node name 're\\ud800lu' is not encodable as UTF-8" in str(e)


def test_lone_surrogate_in_value_name():
    """Every reference to the value is renamed: the program stays consistent, only the name is bad."""
    def edit(j):
        text = json.dumps(j).replace('"relu"', '"relu\\udfff"')
        j.clear()
        j.update(json.loads(text))

    e = _refused(_edit("mlp_dynamic", edit), ProgramCheckError)
    assert "value name 'relu\\udfff' is not encodable as UTF-8" in str(e)


def test_lone_surrogate_in_weight_name():
    def edit(j):
        spec = j["graph_module"]["signature"]["input_specs"][0]["parameter"]
        spec["parameter_name"] = "fc1.\ud83dweight"

    e = _refused(_edit("mlp_dynamic", edit), Pt2Error)
    assert "input_specs[0]" in str(e) and _member("mlp_dynamic") in str(e)


# ------------------------------------------------------------------------------ subgraphs


def test_cond_branch_takes_other_inputs_than_the_call():
    def edit(j):
        branches = [a for a in _node(j, "cond")["inputs"] if "as_graph" in a["arg"]]
        branches[0]["arg"]["as_graph"]["graph"]["inputs"].append({"as_tensor": {"name": "x"}})

    e = _refused(_edit("cond", edit), ProgramCheckError)
    assert "graph_module.graph.nodes[2].inputs[1].arg.as_graph.graph: node 'cond' (higher_order.cond) true branch " \
           "takes 2 input(s), the call passes 1" in str(e)


def test_cond_branch_returns_other_outputs_than_the_call():
    def edit(j):
        branches = [a for a in _node(j, "cond")["inputs"] if "as_graph" in a["arg"]]
        branches[1]["arg"]["as_graph"]["graph"]["outputs"].append({"as_tensor": {"name": "x"}})

    e = _refused(_edit("cond", edit), ProgramCheckError)
    assert "node 'cond' (higher_order.cond) false branch returns 2 value(s), the call expects 1" in str(e)


def test_cond_operands_not_a_list():
    def edit(j):
        _node(j, "cond")["inputs"][3]["arg"] = {"as_int": 3}

    e = _refused(_edit("cond", edit), ProgramCheckError)
    assert "node 'cond' (higher_order.cond) argument 'operands' is as_int, expected Value[]" in str(e)


def test_unsupported_op_inside_a_branch_is_reported_as_unsupported():
    """A branch whose op has no lowering: the report lists it (the cond lowering used to fail
    reading the branch's missing value instead)."""
    def edit(j):
        branches = [a for a in _node(j, "cond")["inputs"] if "as_graph" in a["arg"]]
        branches[0]["arg"]["as_graph"]["graph"]["nodes"][0]["target"] = "my_ns.my_sin.default"

    e = _refused(_edit("cond", edit), UnsupportedOpsError)
    assert [p.target for p in e.ops] == ["my_ns.my_sin.default"]
    assert str(e).startswith("cond/models/model.json: cannot convert to onnx: 1 unsupported operator(s)")


# ------------------------------------------------------------ failures inside a lowering


def test_lowering_failure_names_node_target_lowering_and_member():
    """``permute`` with too few dims: numpy refuses the transpose the lowering folds."""
    def edit(j):
        _arg(_node(j, "permute"), "dims")["arg"] = {"as_ints": [1]}

    e = _refused(_edit("mlp_core_aten", edit))
    assert type(e) is ConversionError and e.node == "permute"
    assert str(e).startswith("mlp_core_aten/models/model.json: graph_module.graph.nodes[0]: "
                             "node 'permute' (aten.permute.default), lowering ops_shape.permute: ValueError: ")
    assert isinstance(e.__cause__, ValueError)


def test_lowering_index_error():
    """Batch norm reads the channel dim of an input whose metadata says rank 1."""
    def edit(j):
        meta = _graph(j)["tensor_values"]["convolution"]
        meta["sizes"], meta["strides"] = meta["sizes"][:1], meta["strides"][:1]

    e = _refused(_edit("conv_bn_pool", edit))
    assert "node '_native_batch_norm_legit_no_training' (aten._native_batch_norm_legit_no_training.default), " \
           "lowering ops_normalization.batch_norm_no_training: IndexError" in str(e)
    assert e.member == _member("conv_bn_pool") and e.path == "graph_module.graph.nodes[1]"


def test_protobuf_refusal_inside_a_lowering():
    """An empty stride list: onnx.helper cannot type the attribute (the fuzzer's ValueError)."""
    e = _refused(_edit("conv_bn_pool", lambda j: _arg(_node(j, "convolution"), "stride")["arg"].update(as_ints=[])))
    assert "node 'convolution' (aten.convolution.default), lowering ops_nn.convolution: ValueError" in str(e)


@pytest.fixture
def custom_op():
    """``relu`` of mlp_dynamic retargeted to ``pt2x_test.boom.default``; yields a function that
    registers the lowering to run for it (unregistered afterwards)."""
    from pt2x.converters.aten import registry

    target = "pt2x_test.boom.default"

    def use(fn):
        registry.register("onnx", target, fn, override=True)
        return _edit("mlp_dynamic", lambda j: _node(j, "relu").update(target=f"torch.ops.{target}"))

    yield use
    registry.unregister("onnx", target)


def test_symbolic_error_inside_a_lowering_names_member_and_node(custom_op):
    from pt2x.serde.codec.symbolic import parse

    def boom(ctx, node):
        return parse("s0 +")

    e = _refused(custom_op(boom), SymbolicExprError)
    assert e.member == _member("mlp_dynamic") and e.path == "graph_module.graph.nodes[1]"
    assert ("node 'relu' (pt2x_test.boom.default), lowering "
            "test_onnx_hostile.test_symbolic_error_inside_a_lowering_names_member_and_node.boom: ") in str(e)


def test_memory_error_inside_a_lowering(custom_op):
    def boom(ctx, node):
        raise MemoryError()

    e = _refused(custom_op(boom))
    assert str(e) == ("mlp_dynamic/models/model.json: graph_module.graph.nodes[1]: node 'relu' "
                      "(pt2x_test.boom.default), lowering test_onnx_hostile.test_memory_error_inside_a_lowering.boom: "
                      "MemoryError")


def test_keyboard_interrupt_is_not_caught(custom_op):
    def boom(ctx, node):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        to_onnx(custom_op(boom))


# ----------------------------------------------------------------------------- constants


def test_constant_from_claimed_shape_is_bounded():
    """``relu`` replaced by ``eye(10**6)`` whose output metadata claims 10**6 x 10**6: the
    lowering would build an 8 TB identity; the constant budget refuses before numpy runs."""
    def edit(j):
        n = _node(j, "relu")
        n["target"] = "torch.ops.aten.eye.default"
        n["inputs"] = [{"name": "n", "arg": {"as_int": 10**6}, "kind": 1}]
        meta = _graph(j)["tensor_values"]["relu"]
        meta["sizes"] = [{"as_int": 10**6}, {"as_int": 10**6}]
        meta["strides"] = [{"as_int": 10**6}, {"as_int": 1}]

    e = _refused(_edit("mlp_dynamic", edit))
    assert "node 'relu' (aten.eye.default), lowering ops_create.eye: eye of 8000000000000 bytes would pass " \
           "the conversion's constant budget" in str(e)
    assert e.member == _member("mlp_dynamic") and e.path == "graph_module.graph.nodes[1]"
    assert MAX_CONSTANT_BYTES < 8 * 10**12


def test_node_count_from_an_argument_is_bounded(monkeypatch):
    """``diff(x, n=10**9)`` would emit three nodes per step without end."""
    from pt2x.converters import limits as climits

    monkeypatch.setattr(climits, "MAX_NODES_PER_LOWERING", 300)

    def edit(j):
        n = _node(j, "relu")
        n["target"] = "torch.ops.aten.diff.default"
        n["inputs"] = [{"name": "self", "arg": {"as_tensor": {"name": "linear"}}, "kind": 1},
                       {"name": "n", "arg": {"as_int": 10**9}, "kind": 1}]

    e = _refused(_edit("mlp_dynamic", edit))
    assert "node 'relu' (aten.diff.default), lowering ops_slice.diff: more than " \
           "converters.limits.MAX_NODES_PER_LOWERING=300 ONNX nodes for one program node" in str(e)


def test_stored_bytes_of_an_expanded_view():
    """The budget grows with the bytes weights occupy, not with what stride-0 views claim."""
    from numpy.lib.stride_tricks import as_strided

    from pt2x.converters.onnx.context import stored_bytes

    base = np.arange(4, dtype=np.float32)
    assert stored_bytes(base) == 16
    assert stored_bytes(as_strided(base, (2**20, 2**20), (0, 0))) == 4
    assert stored_bytes(base[::2]) == 12 and stored_bytes(base[:0]) == 0


# ------------------------------------------------------------------- shape expressions


def test_bad_expression_names_the_member_when_unchecked():
    """Even with the prechecks off, the converter's own parse names member and field."""
    from pt2x.converters.aten.graph import open_program
    from pt2x.serde import load

    def edit(j):
        _graph(j)["tensor_values"]["relu"]["sizes"][0] = {"as_expr": {"expr_str": "s0 +* 2", "hint": None}}

    with load(_edit("mlp_dynamic", edit)) as archive:
        with pytest.raises(SymbolicExprError) as info:
            open_program(archive, check=False)
    assert info.value.member == _member("mlp_dynamic")
    assert info.value.path == "graph_module.graph.tensor_values['relu'].sizes[0]"


def test_bad_expression_in_a_branch_names_member_and_field():
    """Subgraph shapes are parsed by the converter itself (with the prechecks off): the error
    keeps its class and names the member and the field inside the branch."""
    from pt2x.converters.aten.graph import open_program
    from pt2x.converters.onnx import convert_view
    from pt2x.serde import load

    def edit(j):
        branch = [a for a in _node(j, "cond")["inputs"] if "as_graph" in a["arg"]][0]["arg"]["as_graph"]["graph"]
        branch["tensor_values"]["sin"]["sizes"][0] = {"as_expr": {"expr_str": "Symbol('s0'", "hint": None}}

    with load(_edit("cond", edit)) as archive:
        view, _ = open_program(archive, check=False)
        with pytest.raises(SymbolicExprError) as info:
            convert_view(view)
    e = info.value
    assert e.member == _member("cond")
    assert e.path == "graph_module.graph.nodes[2].inputs[1].arg.as_graph.graph.tensor_values['sin'].sizes[0]"


def test_bad_expression_is_refused_by_the_prechecks():
    def edit(j):
        _graph(j)["tensor_values"]["relu"]["sizes"][0] = {"as_expr": {"expr_str": "__import__('os')", "hint": None}}

    e = _refused(_edit("mlp_dynamic", edit), ProgramCheckError)
    assert "tensor_values['relu'].sizes[0]" in str(e) and "[bad-expression]" in str(e)


# ------------------------------------------------------------------------------ torch-free


def test_hostile_program_refused_without_torch(tmp_path):
    data = _edit("dict_inputs", lambda j: _node(j, "add")["inputs"].pop(1))
    path = tmp_path / "arity.pt2"
    path.write_bytes(data)
    r = run_torch_free(
        """
        import sys
        from pt2x.converters import to_onnx
        from pt2x.converters.errors import ConversionError
        try:
            to_onnx(sys.argv[1])
        except ConversionError as e:
            print(type(e).__name__, e.member)
            print(e)
        """,
        str(path),
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("ProgramCheckError dict_inputs/models/model.json")
    assert "lacks required argument 'other'" in r.stdout


def test_fixtures_still_pass_the_prechecks():
    from pt2x.converters.aten.precheck import check_model
    from pt2x.serde import load

    for name in ("mlp_dynamic", "cond", "conv_bn_pool", "tied_weights", "buffer_mutation", "bf16_linear"):
        with load(_fixture(name)) as archive:
            check_model(archive.model())
    m = to_onnx(_fixture("cond"))
    assert [n.op_type for n in m.graph.node][-1] == "If"


def test_signature_table_is_current():
    """``_signature_table.py`` is what torch's schemas say for every lowered ATen target."""
    pytest.importorskip("torch")
    from workshop import load_script

    gen_signature_table = load_script("gen_signature_table")

    assert gen_signature_table.main(["--check"]) == 0, "run: python -m scripts.gen_signature_table"
