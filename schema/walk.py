"""The one walk over a program: the values an ``Argument`` names, the subgraphs it carries,
and what each signature spec kind says.

A value is a tensor, a SymInt/SymBool/SymFloat, a custom object or a token, named by a
string unique within its graph. Literals (ints, floats, strings, dtypes…) name nothing.
Subgraphs (``as_graph``) are returned separately: they are scopes of their own.

``ARGUMENT_MEMBERS`` says, for every member of the ``Argument`` union, what it holds
(``"tensor"``, ``"sym_int"``… for members naming values, ``"graph"``, ``"mapping"`` for a
dict of arguments, ``None`` for literals); a member the schema gains without a row here
fails the tests. ``INPUT_KINDS`` and ``OUTPUT_KINDS`` say, for every member of
``InputSpec``/``OutputSpec``, torch's ``InputKind``/``OutputKind`` name and the field that
holds the spec's target (``parameter_name``…); ``input_spec_parts`` and
``output_spec_parts`` read a spec through them as ``(kind, name, target)``.
"""

from __future__ import annotations

from typing import Iterator, NamedTuple

from . import definitions as d

__all__ = [
    "ARGUMENT_MEMBERS", "value_refs", "subgraphs", "spec_value", "node_inputs", "node_outputs",
    "SpecKind", "INPUT_KINDS", "OUTPUT_KINDS", "SpecParts", "input_spec_parts", "output_spec_parts",
]

# --------------------------------------------------------------------------- arguments

ARGUMENT_MEMBERS: dict[str, str | None] = {
    "as_none": None,
    "as_tensor": "tensor",
    "as_tensors": "tensor",
    "as_int": None,
    "as_ints": None,
    "as_float": None,
    "as_floats": None,
    "as_string": None,
    "as_strings": None,
    "as_sym_int": "sym_int",
    "as_sym_ints": "sym_int",
    "as_scalar_type": None,
    "as_memory_format": None,
    "as_layout": None,
    "as_device": None,
    "as_bool": None,
    "as_bools": None,
    "as_sym_bool": "sym_bool",
    "as_sym_bools": "sym_bool",
    "as_graph": "graph",
    "as_optional_tensors": "tensor",
    "as_custom_obj": "custom_obj",
    "as_operator": None,
    "as_sym_float": "sym_float",
    "as_sym_floats": "sym_float",
    "as_optional_tensor": "tensor",
    "as_complex": None,
    "as_nested_tensors": "tensor",
    "as_int_lists": None,
    "as_float_lists": None,
    "as_string_to_argument": "mapping",
}
"""Every ``Argument`` member -> the kind of value it names, ``"graph"``, ``"mapping"``, or None (a literal)."""


def _tensor(v: d.TensorArgument) -> Iterator[str]:
    yield v.name


def _tensors(v: list) -> Iterator[str]:
    for x in v:
        yield x.name


def _optional_tensor(v: d.OptionalTensorArgument) -> Iterator[str]:
    if v.type == "as_tensor":
        yield v.value.name


def _optional_tensors(v: list) -> Iterator[str]:
    for x in v:
        yield from _optional_tensor(x)


def _nested_tensors(v: list) -> Iterator[str]:
    for row in v:
        yield from _tensors(row)


def _sym(v) -> Iterator[str]:  # SymIntArgument / SymBoolArgument / SymFloatArgument
    if v.type == "as_name":
        yield v.value


def _syms(v: list) -> Iterator[str]:
    for x in v:
        yield from _sym(x)


# how each value-naming member holds its names
_NAMES = {
    "as_tensor": _tensor, "as_tensors": _tensors, "as_optional_tensor": _optional_tensor,
    "as_optional_tensors": _optional_tensors, "as_nested_tensors": _nested_tensors,
    "as_sym_int": _sym, "as_sym_ints": _syms, "as_sym_bool": _sym, "as_sym_bools": _syms,
    "as_sym_float": _sym, "as_sym_floats": _syms, "as_custom_obj": _tensor,
}  # fmt: skip


def value_refs(arg: d.Argument) -> Iterator[tuple[str, str]]:
    """Yield ``(kind, name)`` for every value ``arg`` names, in order; kind is
    tensor|sym_int|sym_bool|sym_float|custom_obj."""
    t = arg.type
    names = _NAMES.get(t)
    if names is not None:
        kind = ARGUMENT_MEMBERS[t]
        for name in names(arg.value):
            yield kind, name
    elif t == "as_string_to_argument":
        for x in arg.value.values():
            yield from value_refs(x)


def subgraphs(arg: d.Argument) -> Iterator[d.GraphArgument]:
    """Yield the subgraphs ``arg`` carries (higher-order ops' branches and bodies)."""
    if arg.type == "as_graph":
        yield arg.value
    elif arg.type == "as_string_to_argument":
        for x in arg.value.values():
            yield from subgraphs(x)


def node_inputs(node: d.Node) -> Iterator[tuple[str, str]]:
    """``(kind, name)`` of every value a node reads, in argument order (repeats kept)."""
    for named in node.inputs:
        yield from value_refs(named.arg)


def node_outputs(node: d.Node) -> Iterator[tuple[str, str]]:
    """``(kind, name)`` of every value a node defines, in output order."""
    for arg in node.outputs:
        yield from value_refs(arg)


def spec_value(arg) -> tuple[str, str] | None:
    """``(kind, name)`` for a signature spec's ``arg`` (TensorArgument, TokenArgument, CustomObjArgument or Argument)."""
    if isinstance(arg, d.TensorArgument):
        return "tensor", arg.name
    if isinstance(arg, d.TokenArgument):
        return "token", arg.name
    if isinstance(arg, d.CustomObjArgument):
        return "custom_obj", arg.name
    return next(value_refs(arg), None)


# ----------------------------------------------------------------------- signature kinds


class SpecKind(NamedTuple):
    torch_kind: str  # torch.export.graph_signature.InputKind / OutputKind member name
    target_field: str | None  # the spec's field naming its target (FQN or user input), if any


INPUT_KINDS: dict[str, SpecKind] = {
    "user_input": SpecKind("USER_INPUT", None),
    "parameter": SpecKind("PARAMETER", "parameter_name"),
    "buffer": SpecKind("BUFFER", "buffer_name"),
    "tensor_constant": SpecKind("CONSTANT_TENSOR", "tensor_constant_name"),
    "custom_obj": SpecKind("CUSTOM_OBJ", "custom_obj_name"),
    "token": SpecKind("TOKEN", None),
    "constant_input": SpecKind("USER_INPUT", None),  # a constant user input, by name and value
}
"""Every ``InputSpec`` member -> torch's kind and its target field."""

OUTPUT_KINDS: dict[str, SpecKind] = {
    "user_output": SpecKind("USER_OUTPUT", None),
    "loss_output": SpecKind("LOSS_OUTPUT", None),
    "buffer_mutation": SpecKind("BUFFER_MUTATION", "buffer_name"),
    "gradient_to_parameter": SpecKind("GRADIENT_TO_PARAMETER", "parameter_name"),
    "gradient_to_user_input": SpecKind("GRADIENT_TO_USER_INPUT", "user_input_name"),
    "user_input_mutation": SpecKind("USER_INPUT_MUTATION", "user_input_name"),
    "token": SpecKind("TOKEN", None),
    "parameter_mutation": SpecKind("PARAMETER_MUTATION", "parameter_name"),
}
"""Every ``OutputSpec`` member -> torch's kind and its target field."""


class SpecParts(NamedTuple):
    kind: str  # the spec's union member: "parameter", "buffer_mutation"...
    name: str | None  # the graph value it binds; a constant input's name; None for a literal user input/output
    target: str | None  # FQN of the parameter/buffer/constant/custom object, or the mutated user input


def _parts(spec, table: dict[str, SpecKind]) -> SpecParts:
    v = spec.value
    field = table[spec.type].target_field
    target = getattr(v, field) if field else None
    if spec.type == "constant_input":
        return SpecParts(spec.type, v.name, None)
    ref = spec_value(v.arg)
    return SpecParts(spec.type, ref[1] if ref else None, target)


def input_spec_parts(spec: d.InputSpec) -> SpecParts:
    """``(kind, name, target)`` of an input spec."""
    return _parts(spec, INPUT_KINDS)


def output_spec_parts(spec: d.OutputSpec) -> SpecParts:
    """``(kind, name, target)`` of an output spec."""
    return _parts(spec, OUTPUT_KINDS)
