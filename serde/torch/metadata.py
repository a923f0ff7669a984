"""Torch program metadata -> schema: node metadata strings, graph signature, module
call graph (pytree specs), range constraints.

String formats follow torch's serializer (facts):
  stack_trace      the string as recorded
  nn_module_stack  "key,path,type" per entry, joined with ";"
  source_fn_stack  "name,qualified_target" per entry, joined with ";"
  torch_fn         the pair joined with ";"
  custom           json.dumps(meta["custom"])
  from_node        json.dumps([NodeSource.to_dict(), ...])
"""

from __future__ import annotations

import json
import math

from ...schema import definitions as d
from ...schema.kinds import type_hints
from ...schema.walk import INPUT_KINDS, OUTPUT_KINDS
from ...schema.version import TREESPEC_VERSION
from ..codec.stack_text import ENTRY_SEPARATOR
from . import values as ba



def qualified_name(target) -> str:
    """How torch names a call target: ``torch.ops.aten.add.Tensor``, ``_operator.mul``."""
    if isinstance(target, str):
        return target
    module = target.__module__
    if module.startswith("torch._ops"):
        module = module.replace("torch._ops", "torch.ops")
    return f"{module}.{target.__name__}"


def _nn_module_entry(key, val) -> str:
    if not (isinstance(val, tuple) and len(val) == 2 and all(isinstance(x, str) for x in val)):
        raise ValueError(f"nn_module_stack entry {key!r} is not a (path, type) pair of strings: {val!r}")
    return f"{key},{val[0]},{val[1]}"


def _from_node(sources) -> str:
    if sources is None:
        return json.dumps(None)
    from torch.fx.traceback import NodeSource

    return json.dumps([s.to_dict() for s in sources if isinstance(s, NodeSource)])


# meta key -> how to write it (only truthy values are written, except from_node)
NODE_META = [
    ("stack_trace", lambda v: v),
    ("nn_module_stack", lambda v: ENTRY_SEPARATOR.join(_nn_module_entry(k, x) for k, x in v.items())),
    ("source_fn_stack", lambda v: ENTRY_SEPARATOR.join(f"{s[0]},{qualified_name(s[1])}" for s in v)),
    ("torch_fn", lambda v: ENTRY_SEPARATOR.join(list(v))),
    ("custom", json.dumps),
]


def node_metadata(meta: dict) -> dict[str, str]:
    out = {}
    for key, write in NODE_META:
        v = meta.get(key)
        if v:
            out[key] = write(v)
    if "from_node" in meta:
        out["from_node"] = _from_node(meta["from_node"])
    return out


def graph_module_metadata(meta: dict) -> dict[str, str]:
    custom = meta.get("custom")
    return {"custom": json.dumps(custom)} if custom else {}


# ---------------------------------------------------------------------- signature

def _by_torch_kind(union, kinds) -> dict[str, tuple[str, type, str | None]]:
    """torch kind name -> (spec union member, its struct, field holding spec.target), from
    ``schema.walk``'s kind tables (USER_INPUT/USER_OUTPUT and TOKEN are built apart)."""
    hints = type_hints(union)
    return {k.torch_kind: (member, hints[member], k.target_field) for member, k in kinds.items()
            if k.torch_kind not in ("USER_INPUT", "USER_OUTPUT", "TOKEN")}


_INPUT_SPECS = _by_torch_kind(d.InputSpec, INPUT_KINDS)
_OUTPUT_SPECS = _by_torch_kind(d.OutputSpec, OUTPUT_KINDS)


def argument_spec(x, constant_arg) -> d.Argument:
    """A torch ``ArgumentSpec`` (signature / module-call-signature entry) as an Argument."""
    from torch.export import graph_signature as gs

    if isinstance(x, gs.TensorArgument):
        return d.Argument(as_tensor=d.TensorArgument(name=x.name))
    if isinstance(x, gs.SymIntArgument):
        return d.Argument(as_sym_int=d.SymIntArgument(as_name=x.name))
    if isinstance(x, gs.SymFloatArgument):
        return d.Argument(as_sym_float=d.SymFloatArgument(as_name=x.name))
    if isinstance(x, gs.SymBoolArgument):
        return d.Argument(as_sym_bool=d.SymBoolArgument(as_name=x.name))
    if isinstance(x, gs.ConstantArgument):
        return constant_arg(x.value)
    if isinstance(x, gs.CustomObjArgument):
        return d.Argument(as_custom_obj=d.CustomObjArgument(name=x.name, class_fqn=x.class_fqn))
    raise TypeError(f"unsupported argument spec {x!r}")


def input_spec(spec, constant_arg) -> d.InputSpec:
    kind = spec.kind.name
    if kind == "USER_INPUT":
        from torch.export import graph_signature as gs

        if isinstance(spec.arg, gs.ConstantArgument):
            return d.InputSpec(
                constant_input=d.InputToConstantInputSpec(name=spec.arg.name, value=ba.constant_value(spec.arg.value))
            )
        return d.InputSpec(user_input=d.UserInputSpec(arg=argument_spec(spec.arg, constant_arg)))
    if kind == "CUSTOM_OBJ":
        arg = d.CustomObjArgument(name=spec.arg.name, class_fqn=spec.arg.class_fqn)
        return d.InputSpec(custom_obj=d.InputToCustomObjSpec(arg=arg, custom_obj_name=spec.target))
    if kind == "TOKEN":
        return d.InputSpec(token=d.InputTokenSpec(arg=d.TokenArgument(name=spec.arg.name)))
    member, cls, target_field = _INPUT_SPECS[kind]
    kw = {target_field: spec.target}
    if kind == "BUFFER":
        if spec.persistent is None:
            raise ValueError(f"buffer {spec.target!r} has no persistent flag")
        kw["persistent"] = spec.persistent
    return d.InputSpec(**{member: cls(arg=d.TensorArgument(name=spec.arg.name), **kw)})


def output_spec(spec, constant_arg) -> d.OutputSpec:
    kind = spec.kind.name
    if kind == "USER_OUTPUT":
        return d.OutputSpec(user_output=d.UserOutputSpec(arg=argument_spec(spec.arg, constant_arg)))
    if kind == "TOKEN":
        return d.OutputSpec(token=d.OutputTokenSpec(arg=d.TokenArgument(name=spec.arg.name)))
    member, cls, target_field = _OUTPUT_SPECS[kind]
    kw = {target_field: spec.target} if target_field else {}
    return d.OutputSpec(**{member: cls(arg=d.TensorArgument(name=spec.arg.name), **kw)})


def graph_signature(sig, constant_arg) -> d.GraphSignature:
    return d.GraphSignature(
        input_specs=[input_spec(s, constant_arg) for s in sig.input_specs],
        output_specs=[output_spec(s, constant_arg) for s in sig.output_specs],
    )


# ---------------------------------------------------------------- module call graph


class TreespecWriter:
    """``treespec_dumps`` plus the namedtuple field names torch records beside them."""

    def __init__(self):
        self.namedtuple_fields: dict[str, d.NamedTupleDef] = {}

    def dumps(self, spec) -> str:
        from torch.utils import _pytree as pytree

        text = pytree.treespec_dumps(spec, TREESPEC_VERSION)
        self._walk(spec, pytree)
        return text

    def _walk(self, ts, pytree):
        if ts.type is None:
            return
        from collections import namedtuple

        if ts.type is namedtuple or pytree.is_namedtuple_class(ts.type):
            tname = pytree.SUPPORTED_SERIALIZED_TYPES[ts.context].serialized_type_name
            fields = list(ts.context._fields)
            known = self.namedtuple_fields.get(tname)
            if known is None:
                self.namedtuple_fields[tname] = d.NamedTupleDef(field_names=fields)
            elif known.field_names != fields:
                raise ValueError(f"namedtuple {tname} seen with fields {known.field_names} and {fields}")
        for child in ts.children():
            self._walk(child, pytree)


def module_call_graph(entries, constant_arg, treespecs: TreespecWriter) -> list[d.ModuleCallEntry]:
    out = []
    for e in entries:
        sig = e.signature
        if sig is None:
            out.append(d.ModuleCallEntry(fqn=e.fqn, signature=None))
            continue
        out.append(
            d.ModuleCallEntry(
                fqn=e.fqn,
                signature=d.ModuleCallSignature(
                    inputs=[argument_spec(x, constant_arg) for x in sig.inputs],
                    outputs=[argument_spec(x, constant_arg) for x in sig.outputs],
                    in_spec=treespecs.dumps(sig.in_spec),
                    out_spec=treespecs.dumps(sig.out_spec),
                    forward_arg_names=sig.forward_arg_names or None,
                ),
            )
        )
    return out


# ---------------------------------------------------------------- range constraints


def _bound(v, rounding) -> int | None:
    import sympy
    from torch.utils._sympy.numbers import int_oo

    if v in (sympy.oo, int_oo, -sympy.oo, -int_oo):
        return None
    if isinstance(v, sympy.Integer):
        return int(v)
    return rounding(v)  # torch rounds fractional bounds inward


def range_constraints(rc: dict) -> dict[str, d.RangeConstraint]:
    return {str(k): d.RangeConstraint(_bound(v.lower, math.ceil), _bound(v.upper, math.floor)) for k, v in rc.items()}
