"""pt2x.serde.load of files written by torch.export.save, against what torch holds."""

from __future__ import annotations

import io

import pytest
import torch

import pt2x.serde as serde
from pt2x.schema.walk import spec_value
import zoo
from torch_compare import assert_array_equals_tensor, assert_weights_match, input_specs, output_specs, range_constraints, target_text

NAMES = zoo.exportable_names()


def _saved(ep) -> bytes:
    buf = io.BytesIO()
    torch.export.save(ep, buf)
    return buf.getvalue()


def _our_inputs(program):
    out = []
    for s in program.graph_module.signature.input_specs:
        v = s.value
        if s.type == "user_input":
            ref = spec_value(v.arg)
            out.append(("user_input", ref[1] if ref else None, None, None))
        elif s.type == "constant_input":
            out.append(("user_input", v.name, None, None))
        else:
            target = getattr(v, "parameter_name", None) or getattr(v, "buffer_name", None) or getattr(v, "tensor_constant_name", None) or getattr(v, "custom_obj_name", None)
            out.append((s.type, v.arg.name, target, v.persistent if s.type == "buffer" else None))
    return out


def _our_outputs(program):
    out = []
    for s in program.graph_module.signature.output_specs:
        v = s.value
        ref = spec_value(v.arg)
        name = ref[1] if ref else None
        target = getattr(v, "buffer_name", None) or getattr(v, "user_input_name", None) or getattr(v, "parameter_name", None)
        out.append((s.type, name, target))
    return out


@pytest.mark.parametrize("decomposed", [False, True], ids=["exported", "decomposed"])
@pytest.mark.parametrize("name", NAMES)
def test_load_matches_torch(name, decomposed):
    ep = zoo.exported(name, decomposed)
    archive = serde.load(_saved(ep))
    model = archive.models["model"]
    program = model.program

    # weights and constants: bit for bit, with torch's shapes, strides and dtypes
    assert_weights_match(model, ep)

    # signature, ranges, module call graph
    theirs = input_specs(ep)
    ours = _our_inputs(program)
    assert [o[0] for o in ours] == [t[0] for t in theirs]
    assert [o[2:] for o in ours if o[0] != "user_input"] == [t[2:] for t in theirs if t[0] != "user_input"]
    assert [o[1] for o in ours if o[1]] == [t[1] for t in theirs if t[1]]
    assert _our_outputs(program) == output_specs(ep)
    assert {k: (r.min_val, r.max_val) for k, r in program.range_constraints.items()} == range_constraints(ep)
    assert [e.fqn for e in program.graph_module.module_call_graph] == [e.fqn for e in ep.module_call_graph]

    # the same nodes and targets, in order
    import operator

    # torch writes a multi-output op's getitem users as that op's outputs, not as nodes
    fx_nodes = [n for n in ep.graph.nodes if n.op == "call_function" and n.target is not operator.getitem]
    assert [n.name for n in program.graph_module.graph.nodes] == [n.name for n in fx_nodes]
    for ours_node, fx in zip(program.graph_module.graph.nodes, fx_nodes):
        assert ours_node.target.endswith(target_text(fx.target)), (ours_node.target, fx.target)


def test_two_models_and_extra_files(tmp_path):
    from torch.export.pt2_archive._package import package_pt2

    a, b = zoo.exported("mlp_dynamic"), zoo.exported("tied_weights")
    path = tmp_path / "two.pt2"
    package_pt2(str(path), exported_programs={"encoder": a, "head": b}, extra_files={"notes.txt": "hello"})
    archive = serde.load(path)
    assert sorted(archive.models) == ["encoder", "head"]
    assert archive.extra == {"notes.txt": b"hello"}
    for name, ep in (("encoder", a), ("head", b)):
        for fqn, t in ep.state_dict.items():
            assert_array_equals_tensor(archive.models[name].state_dict[fqn], t, f"{name}:{fqn}")
    with pytest.raises(serde.Pt2UsageError, match="encoder"):
        archive.model("nope")


def test_weights_are_views_over_the_file(tmp_path):
    """Stored members are memory-mapped: arrays are read-only views, not copies."""
    path = tmp_path / "m.pt2"
    torch.export.save(zoo.exported("tied_weights"), path)
    archive = serde.load(path)
    sd = archive.models["model"].state_dict
    emb, head = sd["emb.weight"], sd["head.weight"]
    assert not emb.flags.writeable and not emb.flags.owndata
    # tied weights: torch stores one storage, so both FQNs view the same bytes
    assert emb.__array_interface__["data"][0] == head.__array_interface__["data"][0]


def test_float8_and_exotic_dtypes():
    """float8 (ml_dtypes), uint16/uint32 and complex weights read with their dtypes and bits."""

    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("e4m3", torch.randn(3, 4).to(torch.float8_e4m3fn))
            self.register_buffer("e5m2", torch.randn(5).to(torch.float8_e5m2))
            self.register_buffer("u16", torch.arange(6).to(torch.uint16))
            self.register_buffer("c64", torch.randn(2, dtype=torch.complex64))

        def forward(self, x):
            return x + self.e4m3.float().sum() + self.e5m2.float().sum()

    ep = torch.export.export(M(), (torch.randn(2),))
    model = serde.load(_saved(ep)).models["model"]
    for fqn, t in ep.state_dict.items():
        assert_array_equals_tensor(model.state_dict[fqn], t, fqn)
    assert str(model.state_dict["e4m3"].dtype) == "float8_e4m3fn"
