"""The checks a program passes before any converter lowers a node of it.

Lowerings are written for programs torch wrote: they index a node's outputs, read
``self`` as a tensor and ``dim`` as an int, take a rank from ``tensor_values``, hand sizes
and names to protobuf. ``check_model`` refuses, in one ``ProgramCheckError`` naming the
archive member and each field path, a program that breaks any of that:

* the findings of ``pt2x validate`` (``serde.validate.validate_model``) of severity error:
  values defined once and before use, signature specs matching the graph, weights present
  with the graph's shape and dtype, parseable shape expressions with ranges;
* every node against the signature of its target (``signatures.py``): required arguments
  present, each argument of a kind torch's serializer writes for its type, no argument
  twice, the number and kinds of outputs;
* higher-order operators (``cond``, ``while_loop``, ``map_impl``, the wrappers): subgraph
  arguments are graphs whose inputs and outputs match the operands and outputs of the call;
* tensor metadata: a known dtype, rank at most ``MAX_TENSOR_RANK``, sizes in ``[0, 2**63)``,
  strides and offsets within int64; every tensor a node or graph reads has metadata;
* integers in arguments within int64 (protobuf's and ONNX's integer type);
* every name and string that can reach the converted model encodable as UTF-8 (JSON can
  carry lone surrogates such as ``"\\ud800"``; protobuf refuses them).

Written once for every target: ``graph.open_program`` runs it.
"""

from __future__ import annotations

from typing import Iterator

from ...schema import definitions as d
from ...schema.walk import value_refs
from ...serde import limits
from ..errors import ConversionError
from . import registry
from .dtypes import to_numpy
from .failures import describe_node
from .signatures import OpSignature, signature

__all__ = ["ProgramCheckError", "check_model", "check_program", "INT64_MIN", "INT64_MAX", "MAX_LISTED"]

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
_PLAIN = frozenset({"as_tensor", "as_tensors", "as_none", "as_float", "as_floats", "as_bool", "as_scalar_type",
                    "as_layout", "as_memory_format", "as_optional_tensor", "as_optional_tensors", "as_graph",
                    "as_sym_bool", "as_sym_float", "as_sym_bools", "as_sym_floats", "as_complex"})
"""Argument kinds that hold no integer and no string to check."""
MAX_LISTED = 20  # problems spelled out in the message; the rest are counted

_NUMBERS = {"as_int", "as_float", "as_bool", "as_sym_int", "as_sym_float", "as_sym_bool", "as_complex"}
_LISTS = {"as_ints", "as_floats", "as_bools", "as_strings", "as_tensors", "as_optional_tensors", "as_sym_ints",
          "as_sym_floats", "as_sym_bools"}
_KINDS: dict[str, set[str]] = {
    # what torch's serializer writes (by Python value) for an argument of each declared type
    "Tensor": {"as_tensor"} | _NUMBERS,
    "Scalar": _NUMBERS,
    "int": {"as_int", "as_sym_int", "as_bool"},
    "float": {"as_float", "as_int", "as_sym_float", "as_sym_int", "as_bool"},
    "bool": {"as_bool", "as_sym_bool"},
    "str": {"as_string"},
    "ScalarType": {"as_scalar_type"},
    "Layout": {"as_layout"},
    "Device": {"as_device"},
    "MemoryFormat": {"as_memory_format"},
    "Generator": set(),
    "Graph": {"as_graph"},
    "Tensor[]": {"as_tensors", "as_optional_tensors"},
    "Tensor?[]": {"as_tensors", "as_optional_tensors"},
    "int[]": {"as_ints", "as_sym_ints"},  # torch's dispatcher hands ops lists, so a scalar never appears
    "float[]": {"as_floats", "as_sym_floats", "as_ints", "as_sym_ints"},
    "bool[]": {"as_bools", "as_sym_bools"},
    "str[]": {"as_strings"},
    "Scalar[]": {"as_ints", "as_floats", "as_bools", "as_sym_ints", "as_sym_floats", "as_sym_bools"},
    "Value[]": _LISTS | {"as_none"},  # operands of higher-order operators: tensors and SymInts
}
_RETURN_KINDS: dict[str, set[str]] = {
    "Tensor": {"as_tensor", "as_none"},
    "Tensor?": {"as_tensor", "as_none", "as_optional_tensor"},
    "Tensor[]": {"as_tensors"},
    "int": {"as_sym_int", "as_int"},
    "float": {"as_sym_float", "as_float", "as_sym_int", "as_int"},
    "bool": {"as_sym_bool", "as_bool"},
    "Scalar": {"as_sym_int", "as_sym_float", "as_sym_bool", "as_int", "as_float", "as_bool"},
}


class ProgramCheckError(ConversionError):
    """A program that breaks what the converters rely on. ``problems`` lists
    ``(field path, message)``, every one found, of which the message shows ``MAX_LISTED``."""

    def __init__(self, problems: list[tuple[str, str]], *, member: str | None = None):
        self.problems = list(problems)
        lines = [f"{p}: {m}" if p else m for p, m in self.problems[:MAX_LISTED]]
        more = len(self.problems) - len(lines)
        head = f"the program cannot be converted: {len(self.problems)} problem(s)"
        body = "\n  ".join([head + ":"] + lines + ([f"... and {more} more"] if more > 0 else []))
        super().__init__(body, member=member)

    def __reduce__(self):
        return _rebuild, (type(self), self.problems, self.member)


def _rebuild(cls, problems, member):
    return cls(problems, member=member)


def allowed_kinds(typ: str) -> set[str] | None:
    """Argument kinds torch writes for a declared type; None when the type is not checked."""
    optional = typ.endswith("?")
    base = typ[:-1] if optional else typ
    kinds = _KINDS.get(base)
    if kinds is None:
        return None
    kinds = set(kinds)
    if optional:
        kinds |= {"as_none", "as_optional_tensor"} if base == "Tensor" else {"as_none"}
    return kinds


def check_model(model) -> None:
    """Raise ``ProgramCheckError`` when the ``Pt2Model``'s program fails any check."""
    problems = list(_validator_errors(model))
    problems += check_program(model.program)
    if problems:
        raise ProgramCheckError(problems, member=model.json_member)


def _validator_errors(model) -> Iterator[tuple[str, str]]:
    from ...serde.validate import validate_model

    for f in validate_model(model):
        if f.severity == "error":
            where = f.path or (f.member if f.member != model.json_member else "")
            yield where or "", f"{f.message} [{f.code}]"


def check_program(program: d.ExportedProgram) -> list[tuple[str, str]]:
    """``(field path, message)`` for every problem of the program's graphs and signature."""
    out: list[tuple[str, str]] = []
    gm = program.graph_module
    _check_name(program.torch_version, "torch_version", "torch version", out)  # becomes a metadata prop
    _check_signature_names(gm.signature, out)
    _check_graph(gm.graph, "graph_module.graph", out)
    return out


# --------------------------------------------------------------------------- helpers


def _text_ok(s) -> bool:
    if not isinstance(s, str) or s.isascii():
        return True
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _int_ok(v) -> bool:
    return not isinstance(v, int) or isinstance(v, bool) or INT64_MIN <= v <= INT64_MAX


def _check_name(name, path, what: str, out: list) -> None:
    """``path``: the field path, or a function making it (paths are built only for problems)."""
    if not _text_ok(name):
        out.append((path() if callable(path) else path,
                    f"{what} {name!r} is not encodable as UTF-8 (a lone surrogate)"))


def _check_signature_names(sig: d.GraphSignature, out: list) -> None:
    for i, spec in enumerate(sig.input_specs):
        for field in ("parameter_name", "buffer_name", "tensor_constant_name", "custom_obj_name", "name"):
            _check_name(getattr(spec.value, field, None), f"graph_module.signature.input_specs[{i}]", field, out)
    for i, spec in enumerate(sig.output_specs):
        for field in ("buffer_name", "parameter_name", "user_input_name"):
            _check_name(getattr(spec.value, field, None), f"graph_module.signature.output_specs[{i}]", field, out)


# ----------------------------------------------------------------------------- graphs


class _Scope:
    """Tensor metadata visible in a graph: its own, then its enclosing graphs'."""

    def __init__(self, graph: d.Graph, parent: "_Scope | None"):
        self.tensors = graph.tensor_values
        self.parent = parent

    def has_tensor(self, name: str) -> bool:
        s = self
        while s is not None:
            if name in s.tensors:
                return True
            s = s.parent
        return False


def _check_graph(graph: d.Graph, where: str, out: list, parent: _Scope | None = None) -> None:
    scope = _Scope(graph, parent)
    for name, meta in graph.tensor_values.items():
        _check_meta(name, meta, where, out)
    for kind, table in (("sym_int", graph.sym_int_values), ("sym_bool", graph.sym_bool_values),
                        ("sym_float", graph.sym_float_values)):
        for name, v in table.items():
            path = f"{where}.{kind}_values[{name!r}]"
            _check_name(name, path, "value name", out)
            if v.type == "as_int" and not _int_ok(v.value):
                out.append((path, f"{v.value} is outside int64"))
    for i, a in enumerate(graph.inputs):
        _check_refs(a, f"{where}.inputs[{i}]", scope, out)
    for i, a in enumerate(graph.outputs):
        _check_refs(a, f"{where}.outputs[{i}]", scope, out)
    for n, node in enumerate(graph.nodes):
        _check_node(node, f"{where}.nodes[{n}]", scope, out)


def _check_meta(name: str, meta: d.TensorMeta, where: str, out: list) -> None:
    n = len(out)
    _check_meta_fields(name, meta, out)
    for i in range(n, len(out)):  # prefix the problems found with the entry's path
        field, message = out[i]
        out[i] = (f"{where}.tensor_values[{name!r}]{field}", message)


def _check_meta_fields(name: str, meta: d.TensorMeta, out: list) -> None:
    """Problems of one ``tensor_values`` entry, with paths relative to it (``.sizes[1]``)."""
    _check_name(name, "", "value name", out)
    try:
        to_numpy(meta.dtype)
    except (ValueError, TypeError):
        out.append((".dtype", f"dtype {getattr(meta.dtype, 'name', meta.dtype)} has no array type"))
    if len(meta.sizes) > limits.MAX_TENSOR_RANK:
        out.append((".sizes", f"rank {len(meta.sizes)} exceeds MAX_TENSOR_RANK={limits.MAX_TENSOR_RANK}"))
        return
    for k, s in enumerate(meta.sizes):
        if s.type == "as_int" and not 0 <= s.value <= INT64_MAX:
            out.append((f".sizes[{k}]", f"size {s.value} is negative or not below 2**63"))
    if len(meta.strides) > limits.MAX_TENSOR_RANK:
        out.append((".strides", f"{len(meta.strides)} strides exceed MAX_TENSOR_RANK={limits.MAX_TENSOR_RANK}"))
        return
    for k, s in enumerate(meta.strides):
        if s.type == "as_int" and not _int_ok(s.value):
            out.append((f".strides[{k}]", f"stride {s.value} is outside int64"))
    off = meta.storage_offset
    if off.type == "as_int" and not 0 <= off.value <= INT64_MAX:
        out.append((".storage_offset", f"storage offset {off.value} is negative or not below 2**63"))


def _check_refs(arg: d.Argument, path, scope: _Scope, out: list) -> None:
    for kind, name in value_refs(arg):
        if not _text_ok(name):
            out.append((path() if callable(path) else path,
                        f"value name {name!r} is not encodable as UTF-8 (a lone surrogate)"))
        elif kind == "tensor" and not scope.has_tensor(name):
            out.append((path() if callable(path) else path, f"tensor {name!r} has no entry in tensor_values"))


def _describe(node: d.Node) -> str:
    return describe_node(node)


def _check_node(node: d.Node, path: str, scope: _Scope, out: list) -> None:
    _check_name(node.name, path, "node name", out)
    if not _text_ok(node.target):
        out.append((f"{path}.target", f"target {node.target!r} is not encodable as UTF-8"))
        return
    for a, na in enumerate(node.inputs):
        apath = f"{path}.inputs[{a}]"
        _check_name(na.name, apath, "argument name", out)
        if na.arg.type not in _PLAIN:
            _check_literal(na.arg, f"{apath}.arg", out)
        _check_refs(na.arg, apath, scope, out)
        if na.arg.type == "as_graph":
            g = na.arg.value
            _check_name(g.name, f"{apath}.arg.as_graph", "subgraph name", out)
            _check_graph(g.graph, f"{apath}.arg.as_graph.graph", out, scope)
    for o, arg in enumerate(node.outputs):
        _check_refs(arg, lambda: f"{path}.outputs[{o}]", scope, out)
    sig = signature(registry.canonical(node.target))
    if sig is not None:
        _check_call(node, sig, path, out)
        if sig.returns != ("...",):
            _check_outputs(node, sig, path, out)
        else:
            _check_higher_order(node, path, out)


def _check_literal(arg: d.Argument, path: str, out: list) -> None:
    """Integers within int64 and strings encodable, wherever the argument holds them."""
    t, v = arg.type, arg.value
    if t == "as_int" and not _int_ok(v):
        out.append((path, f"integer {v} is outside int64"))
    elif t in ("as_ints", "as_bools") and not all(_int_ok(x) for x in v):
        out.append((path, "an integer of the list is outside int64"))
    elif t == "as_int_lists" and not all(_int_ok(x) for row in v for x in row):
        out.append((path, "an integer of the lists is outside int64"))
    elif t == "as_sym_int" and v.type == "as_int" and not _int_ok(v.value):
        out.append((path, f"integer {v.value} is outside int64"))
    elif t == "as_sym_ints" and not all(x.type != "as_int" or _int_ok(x.value) for x in v):
        out.append((path, "an integer of the list is outside int64"))
    elif t in ("as_string", "as_operator") and not _text_ok(v):
        out.append((path, f"string {v!r} is not encodable as UTF-8 (a lone surrogate)"))
    elif t == "as_strings" and not all(_text_ok(x) for x in v):
        out.append((path, "a string of the list is not encodable as UTF-8 (a lone surrogate)"))
    elif t == "as_device" and not _text_ok(v.type):
        out.append((path, f"device {v.type!r} is not encodable as UTF-8"))
    elif t == "as_string_to_argument":
        for k, x in v.items():
            _check_name(k, path, "key", out)
            _check_literal(x, f"{path}.as_string_to_argument[{k!r}]", out)


# ------------------------------------------------------------------------- signatures


def _bound_params(node: d.Node, sig: OpSignature, path: str, out: list):
    """``(param, argument index, Argument)`` for each argument matched to a declared
    parameter: by name, or by position when unnamed (higher-order operators)."""
    seen: set[str] = set()
    positional = sig.positional
    for i, na in enumerate(node.inputs):
        if na.name:
            p = sig.param(na.name)
            if na.name in seen:
                out.append((f"{path}.inputs[{i}]", f"{_describe(node)} passes argument {na.name!r} twice"))
            seen.add(na.name)
        else:
            p = positional[i] if i < len(positional) else None
            if p is None and not sig.variadic:
                out.append((f"{path}.inputs[{i}]", f"{_describe(node)} takes {len(positional)} positional "
                                                   f"argument(s), got {len(node.inputs)}"))
            if p is not None:
                seen.add(p.name)
        if p is not None:
            yield p, i, na.arg
    for p in sig.params:
        if not p.has_default and p.name not in seen:
            out.append((path, f"{_describe(node)} lacks required argument {p.name!r} ({p.type})"))


def _check_call(node: d.Node, sig: OpSignature, path: str, out: list) -> None:
    for p, i, arg in _bound_params(node, sig, path, out):
        kinds = allowed_kinds(p.type)
        if kinds is None:
            continue
        empty_list = arg.type in _LISTS and p.type.rstrip("?").endswith("[]") and not arg.value
        if arg.type not in kinds and not empty_list:
            out.append((f"{path}.inputs[{i}]", f"{_describe(node)} argument {p.name!r} is {arg.type}, "
                                               f"expected {p.type}"))


def _check_outputs(node: d.Node, sig: OpSignature, path: str, out: list) -> None:
    want = len(sig.returns)
    outs = node.outputs
    if want == 0:
        if any(a.type != "as_none" for a in outs):
            out.append((f"{path}.outputs", f"{_describe(node)} returns nothing, the node lists {len(outs)} output(s)"))
        return
    if len(outs) != want:
        out.append((f"{path}.outputs", f"{_describe(node)} returns {want} value(s), the node lists {len(outs)}"))
        return
    for o, (typ, a) in enumerate(zip(sig.returns, outs)):
        kinds = _RETURN_KINDS.get(typ)
        if kinds is not None and a.type not in kinds:
            out.append((f"{path}.outputs[{o}]", f"{_describe(node)} output {o} is {a.type}, expected {typ}"))


# ------------------------------------------------------------------ higher-order ops


def _list_len(arg: d.Argument) -> int | None:
    if arg.type in _LISTS:
        return len(arg.value)
    return None


def _out_count(node: d.Node) -> int:
    n = 0
    for a in node.outputs:
        if a.type in ("as_tensors", "as_optional_tensors", "as_sym_ints"):
            n += len(a.value)
        else:
            n += 1
    return n


def _check_higher_order(node: d.Node, path: str, out: list) -> None:
    """Subgraph signatures against the call: inputs = operands, outputs = the node's outputs."""
    target = registry.canonical(node.target)
    args = [na.arg for na in node.inputs]
    n_out = _out_count(node)

    def body(i: int, n_in: int, n_res: int, what: str) -> None:
        g = args[i].value.graph
        gpath = f"{path}.inputs[{i}].arg.as_graph.graph"
        if len(g.inputs) != n_in:
            out.append((gpath, f"{_describe(node)} {what} takes {len(g.inputs)} input(s), the call passes {n_in}"))
        if len(g.outputs) != n_res:
            out.append((gpath, f"{_describe(node)} {what} returns {len(g.outputs)} value(s), "
                               f"the call expects {n_res}"))

    def count(i: int, what: str) -> int | None:
        n = _list_len(args[i]) if i < len(args) else None
        if n is None and i < len(args) and args[i].type != "as_none":
            out.append((f"{path}.inputs[{i}]", f"{_describe(node)} {what} is {args[i].type}, expected a list"))
        return 0 if i < len(args) and args[i].type == "as_none" else n

    if any(a.type == "as_graph" for a in args) is False:
        return  # the argument checks above reported the missing graphs
    if target == "higher_order.cond":
        if len(args) < 4 or args[1].type != "as_graph" or args[2].type != "as_graph":
            return
        ops = count(3, "operands")
        if ops is not None:
            body(1, ops, n_out, "true branch")
            body(2, ops, n_out, "false branch")
    elif target == "higher_order.while_loop":
        if len(args) < 3 or args[0].type != "as_graph" or args[1].type != "as_graph":
            return
        carried, extra = count(2, "carried inputs"), (count(3, "additional inputs") if len(args) > 3 else 0)
        if carried is None or extra is None:
            return
        body(0, carried + extra, 1, "condition")
        body(1, carried + extra, carried, "body")
        if n_out != carried:
            out.append((f"{path}.outputs", f"{_describe(node)} carries {carried} value(s), the node lists {n_out}"))
    elif target == "higher_order.map_impl":
        if len(args) < 2 or args[0].type != "as_graph":
            return
        xs, extra = count(1, "xs"), (count(2, "pos_args") if len(args) > 2 else 0)
        if xs is None or extra is None:
            return
        if xs == 0:
            out.append((f"{path}.inputs[1]", f"{_describe(node)} maps over no tensors"))
        body(0, xs + extra, n_out, "body")
    else:  # wrappers: the body takes every argument after it
        gi = next(i for i, a in enumerate(args) if a.type == "as_graph")
        body(gi, len(args) - gi - 1, n_out, "body")
