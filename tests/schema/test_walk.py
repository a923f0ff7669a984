"""schema.walk, the one walk: every Argument member and every signature spec kind is known
to it, so a schema change that adds one fails here first."""

from __future__ import annotations

import pytest

from pt2x.schema import definitions as d
from pt2x.schema import walk
from pt2x.schema.kinds import type_hints

T = d.TensorArgument


def test_every_argument_member_is_known():
    assert set(walk.ARGUMENT_MEMBERS) == set(d.Argument._fields)


def test_every_spec_member_is_known():
    assert set(walk.INPUT_KINDS) == set(d.InputSpec._fields)
    assert set(walk.OUTPUT_KINDS) == set(d.OutputSpec._fields)
    for union, kinds in ((d.InputSpec, walk.INPUT_KINDS), (d.OutputSpec, walk.OUTPUT_KINDS)):
        hints = type_hints(union)
        for member, kind in kinds.items():
            if kind.target_field is not None:
                assert kind.target_field in type_hints(hints[member]), (member, kind)


def test_torch_kind_names():
    gs = pytest.importorskip("torch.export.graph_signature")
    assert {k.torch_kind for k in walk.INPUT_KINDS.values()} == set(gs.InputKind.__members__)
    assert {k.torch_kind for k in walk.OUTPUT_KINDS.values()} == set(gs.OutputKind.__members__)


# one example of each value-naming member, and what the walk finds in it
_NAMING = {
    "as_tensor": (T(name="a"), [("tensor", "a")]),
    "as_tensors": ([T(name="a"), T(name="b")], [("tensor", "a"), ("tensor", "b")]),
    "as_optional_tensor": (d.OptionalTensorArgument(as_tensor=T(name="a")), [("tensor", "a")]),
    "as_optional_tensors": ([d.OptionalTensorArgument(as_none=True), d.OptionalTensorArgument(as_tensor=T(name="b"))],
                            [("tensor", "b")]),
    "as_nested_tensors": ([[T(name="a")], [T(name="b"), T(name="c")]], [("tensor", "a"), ("tensor", "b"), ("tensor", "c")]),
    "as_sym_int": (d.SymIntArgument(as_name="s"), [("sym_int", "s")]),
    "as_sym_ints": ([d.SymIntArgument(as_int=3), d.SymIntArgument(as_name="s")], [("sym_int", "s")]),
    "as_sym_bool": (d.SymBoolArgument(as_name="b"), [("sym_bool", "b")]),
    "as_sym_bools": ([d.SymBoolArgument(as_name="b")], [("sym_bool", "b")]),
    "as_sym_float": (d.SymFloatArgument(as_name="f"), [("sym_float", "f")]),
    "as_sym_floats": ([d.SymFloatArgument(as_float=1.0), d.SymFloatArgument(as_name="f")], [("sym_float", "f")]),
    "as_custom_obj": (d.CustomObjArgument(name="o", class_fqn="x.Y"), [("custom_obj", "o")]),
}


@pytest.mark.parametrize("member", sorted(m for m, k in walk.ARGUMENT_MEMBERS.items() if k not in (None, "graph", "mapping")))
def test_value_refs_of_each_naming_member(member):
    value, want = _NAMING[member]
    assert list(walk.value_refs(d.Argument(**{member: value}))) == want
    assert walk.ARGUMENT_MEMBERS[member] == want[0][0]


def test_literals_name_nothing():
    literals = [m for m, k in walk.ARGUMENT_MEMBERS.items() if k is None]
    assert "as_int" in literals and "as_tensor" not in literals
    for m in ("as_none", "as_int", "as_ints", "as_string", "as_scalar_type", "as_int_lists"):
        value = {"as_none": True, "as_int": 1, "as_ints": [1], "as_string": "x",
                 "as_scalar_type": d.ScalarType.FLOAT, "as_int_lists": [[1]]}[m]
        assert list(walk.value_refs(d.Argument(**{m: value}))) == []


def _graph(*outs):
    return d.Graph(inputs=[], outputs=list(outs), nodes=[], tensor_values={}, sym_int_values={},
                   sym_bool_values={}, is_single_tensor_return=False)


def test_mapping_and_subgraphs():
    g = d.GraphArgument(name="branch", graph=_graph())
    arg = d.Argument(as_string_to_argument={
        "x": d.Argument(as_tensor=T(name="a")),
        "body": d.Argument(as_graph=g),
        "inner": d.Argument(as_string_to_argument={"y": d.Argument(as_sym_int=d.SymIntArgument(as_name="s"))}),
    })
    assert list(walk.value_refs(arg)) == [("tensor", "a"), ("sym_int", "s")]
    assert list(walk.subgraphs(arg)) == [g]
    assert list(walk.value_refs(d.Argument(as_graph=g))) == []
    assert list(walk.subgraphs(d.Argument(as_graph=g))) == [g]


def test_spec_parts():
    p = walk.input_spec_parts(d.InputSpec(parameter=d.InputToParameterSpec(arg=T(name="p_w"), parameter_name="fc.w")))
    assert p == ("parameter", "p_w", "fc.w")
    p = walk.input_spec_parts(d.InputSpec(user_input=d.UserInputSpec(arg=d.Argument(as_int=3))))
    assert p == ("user_input", None, None)
    p = walk.input_spec_parts(d.InputSpec(constant_input=d.InputToConstantInputSpec(name="k", value=d.ConstantValue(as_int=3))))
    assert p == ("constant_input", "k", None)
    p = walk.input_spec_parts(d.InputSpec(token=d.InputTokenSpec(arg=d.TokenArgument(name="tok"))))
    assert p == ("token", "tok", None)
    p = walk.output_spec_parts(d.OutputSpec(user_input_mutation=d.UserInputMutationSpec(arg=T(name="x1"), user_input_name="x")))
    assert p == ("user_input_mutation", "x1", "x")
    p = walk.output_spec_parts(d.OutputSpec(user_output=d.UserOutputSpec(arg=d.Argument(as_sym_int=d.SymIntArgument(as_name="s")))))
    assert p == ("user_output", "s", None)
