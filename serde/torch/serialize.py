"""torch ``ExportedProgram`` -> pt2x schema ``ExportedProgram`` (+ the payloads to store).

``to_schema(ep)`` walks the FX graph once, writing the nodes torch's serializer would
write for it (same names, argument kinds, output naming, metadata), so the JSON that
``json_codec.dumps`` produces equals ``torch.export.save``'s ``models/<name>.json``.
``export_model(ep)`` adds what the archive needs beside the program: weights and
constants as ``package.Payload`` entries (raw storage bytes, read lazily) and the
pickled example inputs.

Differences from torch's serializer, on purpose: it does not call
``ep.validate()`` nor run ``canonicalize`` (a self-check torch discards); neither
changes the output. Triton kernels and ``aoti_call_delegate`` nodes (inductor-only,
not produced by ``torch.export``) are refused.

Torch is only imported inside functions.
"""

from __future__ import annotations

import inspect
import io
import operator
from typing import Any

from ...schema import definitions as d
from ...schema.version import SCHEMA_VERSION
from . import values as ba
from . import metadata as bm
from ..errors import Pt2Error
from ..archive.package import ModelPayload, Payload

__all__ = ["ExportError", "to_schema", "export_model", "schema_and_constants"]


class ExportError(Pt2Error):
    """A program (or one of its nodes) that pt2x cannot write."""


class _GraphState:
    __slots__ = (
        "inputs", "outputs", "nodes", "tensor_values", "sym_int_values",
        "sym_bool_values", "sym_float_values", "custom_obj_values", "is_single_tensor_return",
    )

    def __init__(self):
        self.inputs: list[d.Argument] = []
        self.outputs: list[d.Argument] = []
        self.nodes: list[d.Node] = []
        self.tensor_values: dict[str, d.TensorMeta] = {}
        self.sym_int_values: dict[str, d.SymInt] = {}
        self.sym_bool_values: dict[str, d.SymBool] = {}
        self.sym_float_values: dict[str, d.SymFloat] = {}
        self.custom_obj_values: dict[str, d.CustomObjArgument] = {}
        self.is_single_tensor_return = False

    def graph(self) -> d.Graph:
        return d.Graph(
            inputs=self.inputs, outputs=self.outputs, nodes=self.nodes, tensor_values=self.tensor_values,
            sym_int_values=self.sym_int_values, sym_bool_values=self.sym_bool_values,
            is_single_tensor_return=self.is_single_tensor_return, custom_obj_values=self.custom_obj_values,
            sym_float_values=self.sym_float_values,
        )


def _tensor_arg(name: str) -> d.Argument:
    return d.Argument(as_tensor=d.TensorArgument(name=name))


class _GraphWriter:
    """One program's graphs (top level and nested) -> schema Graphs."""

    def __init__(self):
        import torch
        import torch.fx

        self.T = ba.tables()
        self.torch = torch
        self.Node = torch.fx.Node
        self.OpOverload = torch._ops.OpOverload
        self.HOP = torch._ops.HigherOrderOperator
        from torch.export import graph_signature as gs

        self.CustomObjMeta = gs.CustomObjArgument
        self.state = _GraphState()
        self.custom_objs: dict[str, Any] = {}
        self.duplicate_getitems: dict[str, str] = {}
        try:
            from torch._export.serde.serialize import _serialization_registry as reg
        except ImportError:  # pragma: no cover
            reg = {}
        self.extensions = reg

    # ------------------------------------------------------------------ graphs

    def graph(self, gm) -> d.Graph:
        handlers = {
            "placeholder": self.placeholder, "call_function": self.call_function,
            "get_attr": _noop, "output": self.output,
        }
        for node in gm.graph.nodes:
            handler = handlers.get(node.op)
            if handler is None:
                raise ExportError(f"node {node.name}: op {node.op!r} cannot be serialized")
            try:
                handler(node)
            except ExportError:
                raise
            except Exception as e:
                raise ExportError(f"node {node.name} ({node.format_node()}): {type(e).__name__}: {e}") from e
        return self.state.graph()

    def subgraph(self, gm) -> d.Graph:
        saved, self.state = self.state, _GraphState()
        try:
            return self.graph(gm)
        finally:
            self.state = saved

    def placeholder(self, node):
        val = node.meta["val"]
        T = self.T
        if isinstance(val, self.torch.Tensor):
            arg = d.Argument(as_tensor=self.tensor_out(node.name, val))
        elif isinstance(val, T.SymInt):
            arg = d.Argument(as_sym_int=self.sym_int_out(node.name, val))
        elif isinstance(val, T.SymFloat):
            raise ExportError(f"placeholder {node.name}: SymFloat graph inputs are not supported (nor by torch)")
        elif isinstance(val, (int, bool, str, float, type(None))):
            arg = self.arg(val)
        elif isinstance(val, self.CustomObjMeta):
            arg = d.Argument(as_custom_obj=d.CustomObjArgument(name=node.name, class_fqn=val.class_fqn))
            self.state.custom_obj_values[node.name] = d.CustomObjArgument(name=val.name, class_fqn=val.class_fqn)
        else:
            raise ExportError(f"placeholder {node.name}: unsupported input value {type(val).__name__}")
        self.state.inputs.append(arg)

    def output(self, node):
        (res,) = node.args
        if isinstance(res, self.Node):
            self.state.is_single_tensor_return = True
            self.state.outputs = [self.arg(res)]
        else:
            self.state.outputs = [self.arg(a) for a in res]

    # ------------------------------------------------------------------- nodes

    def call_function(self, node):
        target = node.target
        if target is operator.getitem:
            return  # folded into the producer's outputs
        meta_val = node.meta.get("val")
        T = self.T
        common = dict(name=node.name, target=bm.qualified_name(target), metadata=bm.node_metadata(node.meta))
        if target in T.sym_ops or isinstance(meta_val, (T.SymInt, T.SymBool, T.SymFloat)):
            if node.kwargs:
                raise ExportError(f"symbolic op {node.name} has keyword arguments")
            out = d.Node(inputs=self.sym_op_inputs(target, node.args), outputs=[self.out(node.name, meta_val)], **common)
        elif isinstance(target, self.OpOverload):
            out = d.Node(inputs=self.op_inputs(target._schema, node.args, node.kwargs), outputs=self.op_outputs(node), **common)
        elif isinstance(target, self.HOP):
            if target.__name__ in ("aoti_call_delegate", "triton_kernel_wrapper_functional"):
                raise ExportError(f"node {node.name}: {target.__name__} is not supported by pt2x's writer")
            out = d.Node(
                inputs=self.hop_inputs(node.args, node.kwargs), outputs=self.hop_outputs(node),
                is_hop_single_tensor_return=isinstance(meta_val, self.torch.Tensor), **common,
            )
        elif type(target) in self.extensions:
            h = self.extensions[type(target)]
            common["target"] = f"#{h.namespace()}:{h.to_op_name(target)}"
            out = d.Node(inputs=self.op_inputs(h.op_schema(target), node.args, node.kwargs), outputs=self.op_outputs(node, h.op_schema(target)), **common)
        elif callable(target):
            out = d.Node(inputs=self.hop_inputs(node.args, node.kwargs), outputs=self.hop_outputs(node), **common)
        else:
            raise ExportError(f"node {node.name}: cannot serialize target {target!r}")
        self.state.nodes.append(out)

    def sym_op_inputs(self, op, args) -> list[d.NamedArgument]:
        if isinstance(op, self.OpOverload):
            names = [a.name for a in op._schema.arguments]
        else:
            names = list(inspect.signature(op).parameters)
        P = d.ArgumentKind.POSITIONAL
        return [d.NamedArgument(name=n, arg=self.arg(a), kind=P) for n, a in zip(names, args)]

    def op_inputs(self, schema, args, kwargs) -> list[d.NamedArgument]:
        out = []
        for i, sa in enumerate(schema.arguments):
            if sa.name in kwargs:
                out.append(d.NamedArgument(name=sa.name, arg=self.arg(kwargs[sa.name], sa.type), kind=d.ArgumentKind.KEYWORD))
            elif not sa.kwarg_only and i < len(args):
                out.append(d.NamedArgument(name=sa.name, arg=self.arg(args[i], sa.type), kind=d.ArgumentKind.POSITIONAL))
            # arguments left at their defaults are not written
        return out

    def hop_inputs(self, args, kwargs) -> list[d.NamedArgument]:
        out = [d.NamedArgument(name="", arg=self.arg(a), kind=d.ArgumentKind.POSITIONAL) for a in args]
        out += [d.NamedArgument(name=k, arg=self.arg(a), kind=d.ArgumentKind.KEYWORD) for k, a in kwargs.items()]
        return out

    # ---------------------------------------------------------------- outputs

    def user_at(self, node, index):
        """The getitem user reading ``node[index]`` (duplicates are folded onto the first)."""
        found = None
        for user in node.users:
            if user.target is not operator.getitem:
                raise ExportError(f"{user.name} uses multi-output {node.name} without getitem")
            if user.args[1] == index:
                if found is None:
                    found = user
                else:
                    self.duplicate_getitems[user.name] = found.name
        return found

    def name_at(self, node, index) -> str:
        user = self.user_at(node, index)
        return f"{node.name}_unused_{index}" if user is None else user.name

    def op_outputs(self, node, schema=None) -> list[d.Argument]:
        torch = self.torch
        returns = (schema or node.target._schema).returns
        if not returns:
            return []
        meta_val = node.meta["val"]
        if len(returns) == 1:
            rt = returns[0].real_type
            if isinstance(rt, torch.ListType) and isinstance(rt.getElementType(), torch.TensorType):
                return [d.Argument(as_tensors=[self.tensor_out(self.name_at(node, i), m) for i, m in enumerate(meta_val)])]
            return [self.out(node.name, meta_val)]
        outs = []
        for idx, meta in enumerate(meta_val):
            if meta is None:
                outs.append(d.Argument(as_none=True))
            elif isinstance(meta, list):
                user = self.user_at(node, idx)
                tensors = []
                for i, m in enumerate(meta):
                    if m is None:
                        continue
                    name = f"{node.name}_unused_{idx}_{i}" if user is None else self.name_at(user, i)
                    tensors.append(self.tensor_out(name, m))
                outs.append(d.Argument(as_tensors=tensors))
            else:
                outs.append(self.out(self.name_at(node, idx), meta))
        return outs

    def hop_outputs(self, node) -> list[d.Argument]:
        meta_val = node.meta["val"]
        if isinstance(meta_val, tuple):
            outs = []
            for i, m in enumerate(meta_val):
                user = self.user_at(node, i)
                if isinstance(m, list):
                    tensors = []
                    for j, t in enumerate(m):
                        if not isinstance(t, self.torch.Tensor):
                            raise ExportError(f"{node.name}: list output element of type {type(t).__name__}")
                        name = f"{node.name}_unused_{i}_{j}" if user is None else self.name_at(user, j)
                        tensors.append(self.tensor_out(name, t))
                    outs.append(d.Argument(as_tensors=tensors))
                else:
                    outs.append(self.out(user.name if user is not None else f"{node.name}_unused_{i}", m))
            return outs
        if isinstance(meta_val, dict):
            tensors = []
            for key, m in meta_val.items():
                if not isinstance(m, self.torch.Tensor):
                    raise ExportError(f"{node.name}: dict output of type {type(m).__name__}")
                tensors.append(self.tensor_out(self.name_at(node, key), m))
            return [d.Argument(as_tensors=tensors)]
        return [self.out(node.name, meta_val)]

    def out(self, name, v) -> d.Argument:
        T = self.T
        if v is None:
            return d.Argument(as_none=True)
        if isinstance(v, self.torch.Tensor):
            return d.Argument(as_tensor=self.tensor_out(name, v))
        if isinstance(v, (bool, T.SymBool)):
            return d.Argument(as_sym_bool=self._value(self.state.sym_bool_values, name, ba.sym_bool(v, T), d.SymBoolArgument))
        if isinstance(v, (int, T.SymInt)):
            return d.Argument(as_sym_int=self.sym_int_out(name, v))
        if isinstance(v, (float, T.SymFloat)):
            return d.Argument(as_sym_float=self._value(self.state.sym_float_values, name, ba.sym_float(v, T), d.SymFloatArgument))
        raise ExportError(f"cannot serialize output {name} of type {type(v).__name__}")

    def _value(self, table, name, value, arg_cls):
        if name in table:
            raise ExportError(f"value {name!r} defined twice")
        table[name] = value
        return arg_cls(as_name=name)

    def tensor_out(self, name, t) -> d.TensorArgument:
        table = self.state.tensor_values
        if name in table:
            raise ExportError(f"tensor {name!r} defined twice")
        table[name] = ba.tensor_meta(t, self.T)
        return d.TensorArgument(name=name)

    def sym_int_out(self, name, v) -> d.SymIntArgument:
        return self._value(self.state.sym_int_values, name, ba.sym_int(v, self.T), d.SymIntArgument)

    # -------------------------------------------------------------- arguments

    def arg(self, a, arg_type=None) -> d.Argument:
        if isinstance(a, self.Node):
            return self.node_arg(a)
        member = ba.SCALAR_ARGS.get(type(a))
        if member is not None:
            return d.Argument(**{member: a})
        if a is None:
            return d.Argument(as_none=True)
        T = self.T
        if isinstance(a, T.SymInt):
            return d.Argument(as_sym_int=d.SymIntArgument(as_name=str(a)))
        if isinstance(a, T.SymFloat):
            return d.Argument(as_sym_float=d.SymFloatArgument(as_name=str(a)))
        if type(a) is complex:
            return d.Argument(as_complex=d.ComplexValue(real=a.real, imag=a.imag))
        if isinstance(a, dict):
            for k in a:
                if not isinstance(k, str):
                    raise ExportError(f"dict argument keys must be strings, got {type(k).__name__}")
            return d.Argument(as_string_to_argument={k: self.arg(v) for k, v in a.items()})
        if isinstance(a, (list, tuple)):
            return self.list_arg(a, arg_type)
        got = ba.torch_object_arg(a, T)
        if got is not None:
            return got
        torch = self.torch
        if isinstance(a, torch._C.ScriptObject):
            if not (a._has_method("__getstate__") and a._has_method("__setstate__")):
                raise ExportError(f"custom class {a} has no def_pickle() serialization")
            name = f"_custom_obj_{len(self.custom_objs)}"
            self.custom_objs[name] = a
            return d.Argument(as_custom_obj=d.CustomObjArgument(name=name, class_fqn=a._type().qualified_name()))
        opaque = _opaque_type_name(a)
        if opaque is not None:
            name = f"_custom_obj_{len(self.custom_objs)}"
            self.custom_objs[name] = a
            return d.Argument(as_custom_obj=d.CustomObjArgument(name=name, class_fqn=opaque))
        if isinstance(a, (self.OpOverload, self.HOP)):
            return d.Argument(as_operator=bm.qualified_name(a))
        raise ExportError(f"unsupported argument type {type(a).__name__} (schema type {arg_type})")

    def node_arg(self, a) -> d.Argument:
        st = self.state
        name = a.name
        if a.op == "get_attr":
            attr = getattr(a.graph.owning_module, a.target)
            if isinstance(attr, self.torch.fx.GraphModule):
                return d.Argument(as_graph=d.GraphArgument(name=a.target, graph=self.subgraph(attr)))
            if type(attr).__name__ == "LoweredBackendModule":
                return d.Argument(as_string=f"{attr.module_name}-{attr.backend_id}")
            raise ExportError(f"get_attr {a.target} of type {type(attr).__name__} cannot be an argument")
        if name in st.sym_int_values:
            return d.Argument(as_sym_int=d.SymIntArgument(as_name=name))
        if name in st.sym_float_values:
            return d.Argument(as_sym_float=d.SymFloatArgument(as_name=name))
        if name in st.sym_bool_values:
            return d.Argument(as_sym_bool=d.SymBoolArgument(as_name=name))
        val = a.meta["val"]
        if isinstance(val, self.CustomObjMeta):
            return d.Argument(as_custom_obj=d.CustomObjArgument(name=name, class_fqn=val.class_fqn))
        return _tensor_arg(self.duplicate_getitems.get(name, name))

    def _tensor_list(self, nodes) -> list[d.TensorArgument]:
        out = []
        for n in nodes:
            if n.op == "get_attr":
                raise ExportError(f"get_attr {n.target} cannot be a tensor argument")
            out.append(d.TensorArgument(name=n.name))
        return out

    def list_arg(self, a, arg_type) -> d.Argument:
        if not a:
            return d.Argument(**{_empty_list_member(arg_type, self.torch): []})
        for tp, member in ba.SCALAR_LISTS:
            if all(type(x) is tp for x in a):
                return d.Argument(**{member: list(a)})
        T, st, Node = self.T, self.state, self.Node
        if all(type(x) is int or isinstance(x, T.SymInt) for x in a):
            return d.Argument(as_sym_ints=[
                d.SymIntArgument(as_int=x) if type(x) is int else d.SymIntArgument(as_name=str(x)) for x in a])
        if all(isinstance(x, T.SymFloat) for x in a):
            return d.Argument(as_sym_floats=[d.SymFloatArgument(as_name=str(x)) for x in a])

        def named_or(table, plain):
            return all(plain(x) or (isinstance(x, Node) and x.name in table) for x in a)

        if named_or(st.sym_int_values, lambda x: type(x) is int):
            return d.Argument(as_sym_ints=[
                d.SymIntArgument(as_name=x.name) if isinstance(x, Node) else d.SymIntArgument(as_int=x) for x in a])
        if named_or(st.sym_float_values, lambda x: isinstance(x, float)):
            return d.Argument(as_sym_floats=[
                d.SymFloatArgument(as_name=x.name) if isinstance(x, Node) else d.SymFloatArgument(as_float=x) for x in a])
        if named_or(st.sym_bool_values, lambda x: isinstance(x, bool)):
            return d.Argument(as_sym_bools=[
                d.SymBoolArgument(as_name=x.name) if isinstance(x, Node) else d.SymBoolArgument(as_bool=x) for x in a])
        if all(isinstance(x, Node) for x in a):
            return d.Argument(as_tensors=self._tensor_list(a))
        if all(isinstance(x, (list, tuple)) and all(isinstance(t, Node) for t in x) for x in a):
            return d.Argument(as_nested_tensors=[self._tensor_list(x) for x in a])
        if all(x is None or isinstance(x, Node) for x in a):
            return d.Argument(as_optional_tensors=[
                d.OptionalTensorArgument(as_none=True) if x is None
                else d.OptionalTensorArgument(as_tensor=d.TensorArgument(name=x.name)) for x in a])
        if all(isinstance(x, tuple) and all(type(v) is int for v in x) for x in a):
            return d.Argument(as_int_lists=[list(x) for x in a])
        if all(isinstance(x, (list, tuple)) and all(isinstance(v, float) for v in x) for x in a):
            return d.Argument(as_float_lists=[list(x) for x in a])
        raise ExportError(f"unsupported list argument of {[type(x).__name__ for x in a]}")


def _noop(node):
    pass


def _empty_list_member(arg_type, torch) -> str:
    if arg_type is None:
        return "as_tensors"  # HOP arguments have no schema; torch defaults to a tensor list
    if isinstance(arg_type, torch.OptionalType):
        arg_type = arg_type.getElementType()
    if not isinstance(arg_type, torch.ListType):
        raise ExportError(f"empty list for non-list schema type {arg_type}")
    elem = arg_type.getElementType()
    if isinstance(elem, torch.OptionalType):
        elem = elem.getElementType()
    member = ba.EMPTY_LIST_BY_ELEMENT.get(type(elem).__name__)
    if member is None:
        raise ExportError(f"empty list of {elem} cannot be serialized")
    return member


def _opaque_type_name(a):
    try:
        from torch._library.opaque_object import get_opaque_type_name, is_opaque_value
    except ImportError:  # older torch
        return None
    return get_opaque_type_name(type(a)) if is_opaque_value(a) else None


# ------------------------------------------------------------------------ programs


def schema_and_constants(ep, opset_version: dict[str, int] | None = None) -> tuple[d.ExportedProgram, dict[str, Any]]:
    """The schema program and every constant to store (custom objects met in the graph first)."""
    import torch

    w = _GraphWriter()
    w.T.sym_int_cache.clear()  # per program: bounded, and no sharing across calls
    graph = w.graph(ep.graph_module)
    constant_arg = w.arg
    signature = bm.graph_signature(ep.graph_signature, constant_arg)
    treespecs = bm.TreespecWriter()
    mcg = bm.module_call_graph(ep.module_call_graph, constant_arg, treespecs)
    gm = d.GraphModule(
        graph=graph,
        signature=signature,
        module_call_graph=mcg,
        metadata=bm.graph_module_metadata(ep.graph_module.meta),
        treespec_namedtuple_fields=treespecs.namedtuple_fields,
    )
    opsets = dict(opset_version or {})
    opsets.setdefault("aten", torch._C._get_max_operator_version())
    program = d.ExportedProgram(
        graph_module=gm,
        opset_version=opsets,
        range_constraints=bm.range_constraints(ep.range_constraints),
        schema_version=d.SchemaVersion(major=SCHEMA_VERSION[0], minor=SCHEMA_VERSION[1]),
        verifiers=[v.dialect for v in ep.verifiers],
        torch_version=torch.__version__,
        guards_code=list(getattr(ep, "_guards_code", None) or []),
    )
    constants = dict(w.custom_objs)
    for k, v in ep.constants.items():
        if k in constants:
            raise ExportError(f"constant name {k!r} used twice")
        constants[k] = v
    return program, constants


def to_schema(ep, *, opset_version: dict[str, int] | None = None) -> d.ExportedProgram:
    """The pt2x schema ``ExportedProgram`` for a torch ``ExportedProgram``."""
    return schema_and_constants(ep, opset_version)[0]


# ------------------------------------------------------------------------ payloads


def _storage_bytes(t):
    """A zero-copy view of the tensor's whole untyped storage (b"" for fake/empty)."""
    import torch
    from torch._subclasses.fake_tensor import FakeTensor

    if isinstance(t, FakeTensor) or not t.data_ptr():
        return b""
    t = t.detach()
    if t.device.type != "cpu":
        t = t.cpu()
    storage = t.untyped_storage()
    flat = torch.empty(0, dtype=torch.uint8).set_(storage, 0, (storage.nbytes(),), (1,))
    return memoryview(flat.numpy()).cast("B")


def _pickle_tensor(t, protocol):
    import torch

    buf = io.BytesIO()
    torch.save(t, buf, pickle_protocol=protocol)
    return buf.getvalue()


def _is_plain_or_fake(t) -> bool:
    import torch
    from torch._subclasses.fake_tensor import FakeTensor

    return isinstance(t, FakeTensor) or type(t.data) is torch.Tensor


def _tensor_payload(fqn, t, T, protocol) -> Payload:
    import torch

    meta = ba.tensor_meta(t, T)
    is_param = isinstance(t, torch.nn.Parameter)
    if not _is_plain_or_fake(t):  # tensor subclasses are pickled, as torch does
        return Payload(fqn, lambda: _pickle_tensor(t, protocol), meta, is_param, "pickle")
    from torch._subclasses.fake_tensor import FakeTensor

    ptr = None if isinstance(t, FakeTensor) else t.untyped_storage().data_ptr()
    return Payload(fqn, lambda: _storage_bytes(t), meta, is_param, "raw", (ptr, t.dtype))


def _object_payload(fqn, obj, protocol) -> Payload:
    import pickle

    import torch

    if isinstance(obj, torch._C.ScriptObject):
        return Payload(fqn, lambda: torch._C._pickle_save(obj), None, False, "custom_obj")
    return Payload(fqn, lambda: pickle.dumps(obj, protocol=protocol), None, False, "opaque_obj")


def sample_inputs_bytes(example_inputs, protocol: int = 2) -> bytes:
    """``data/sample_inputs/<name>.pt``: torch.save of ``ep.example_inputs`` (b"" if None).

    Only ``torch.export.load`` reads it back (as ``ep.example_inputs``); pt2x's own
    reader never unpickles it.
    """
    if example_inputs is None:
        return b""
    return _pickle_tensor(example_inputs, protocol)


def export_model(ep, *, opset_version=None, pickle_protocol: int = 2) -> ModelPayload:
    """Everything one model contributes to an archive."""
    import torch

    T = ba.tables()
    # Constants written are ep.constants, as torch's packager does (custom objects
    # met only as graph arguments are not stored by torch either).
    program, _ = schema_and_constants(ep, opset_version)
    constants = ep.constants
    weights = []
    for fqn, t in ep.state_dict.items():
        if not isinstance(t, torch.Tensor):
            raise ExportError(f"state_dict entry {fqn!r} is not a tensor")
        weights.append(_tensor_payload(fqn, t, T, pickle_protocol))
    consts = []
    for fqn, c in constants.items():
        if isinstance(c, torch.Tensor):
            consts.append(_tensor_payload(fqn, c, T, pickle_protocol))
        elif isinstance(c, torch._C.ScriptObject) or _opaque_type_name(c) is not None:
            consts.append(_object_payload(fqn, c, pickle_protocol))
        else:
            raise ExportError(f"constant {fqn!r} of type {type(c).__name__} cannot be stored")
    return ModelPayload(
        program=program, weights=weights, constants=consts,
        sample_inputs=sample_inputs_bytes(ep.example_inputs, pickle_protocol),
    )
