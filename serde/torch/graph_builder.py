"""Schema ``Graph`` -> ``torch.fx.Graph`` with fake-tensor ``val`` metadata.

The FX graph torch's own loader would build (facts of torch's format, pt2x's code):
placeholders named after the graph inputs; one ``call_function`` node per serialized
node, named after its single output (or ``Node.name``); multiple outputs unpacked by
``getitem`` nodes named after each output; subgraphs (``as_graph``) as ``get_attr``
nodes on child modules; one ``output`` node. Every value's ``val`` is a fake tensor or
symbolic scalar created under the program's ``SymbolicContext``.

Errors are ``Pt2FormatError``s naming the member and ``graph...nodes[i] (name)``.
Imported lazily by the bridge (imports torch).
"""

from __future__ import annotations

import keyword
import operator
from typing import Any

import torch
from torch._subclasses.fake_tensor import FakeTensor
from torch.fx.experimental import symbolic_shapes

from ...schema import definitions as d
from ...schema.walk import input_spec_parts
from .ops import DTYPES, LAYOUTS, MEMORY_FORMATS, SYM_OPS, resolve_meta_func, resolve_target
from .shape_env import SymbolicContext
from ..errors import Pt2FormatError
from ..codec.json_codec import parse_json
from ..codec.stack_text import ENTRY_SEPARATOR, split_fields

__all__ = ["GraphBuilder", "deserialize_metadata"]

_POSITIONAL = d.ArgumentKind.POSITIONAL
_KEYWORD = d.ArgumentKind.KEYWORD
_SYM_ARG_TYPES = ("as_sym_int", "as_sym_bool", "as_sym_float")
# Higher-order operators whose tensor-list operands torch traces as tuples (lists elsewhere).
_HOP_TUPLE_OPERANDS = frozenset({"cond", "while_loop", "while_loop_stack_output"})
_LIST_OUTPUTS = ("as_tensors", "as_sym_ints", "as_sym_floats", "as_ints", "as_floats", "as_strings", "as_bools", "as_sym_bools")


def _returns_one_list(target) -> bool:
    if not isinstance(target, torch._ops.OpOverload):
        return False
    rets = target._schema.returns
    return len(rets) == 1 and isinstance(rets[0].real_type, torch.ListType)


def deserialize_metadata(md: dict[str, str], *, member: str | None, path: str) -> dict[str, Any]:
    """A node's string metadata as the objects torch keeps in ``node.meta``."""
    ret: dict[str, Any] = {}
    if st := md.get("stack_trace"):
        ret["stack_trace"] = st
    if nms := md.get("nn_module_stack"):
        stack = {}
        for item in nms.split(ENTRY_SEPARATOR):
            parts = split_fields(item)
            if len(parts) != 3:
                raise Pt2FormatError(
                    f"nn_module_stack entry {item!r} is not 'key,path,type'", member=member, path=f"{path}.metadata"
                )
            stack[parts[0]] = (parts[1], parts[2])
        ret["nn_module_stack"] = stack
    if sfs := md.get("source_fn_stack"):
        fns = []
        for item in sfs.split(ENTRY_SEPARATOR):
            parts = item.split(",")
            if len(parts) != 2:
                raise Pt2FormatError(
                    f"source_fn_stack entry {item!r} is not 'name,target'", member=member, path=f"{path}.metadata"
                )
            fns.append((parts[0], resolve_meta_func(parts[1])))
        ret["source_fn_stack"] = fns
    if tf := md.get("torch_fn"):
        ret["torch_fn"] = tuple(tf.split(ENTRY_SEPARATOR))
    if custom := md.get("custom"):
        ret["custom"] = parse_json(custom, member=member)
    if fn := md.get("from_node"):
        from torch.fx.traceback import NodeSource

        data = parse_json(fn, member=member)
        if data is not None:
            if not isinstance(data, list):
                raise Pt2FormatError("from_node is not a list", member=member, path=f"{path}.metadata")
            try:
                ret["from_node"] = [ns for x in data if (ns := NodeSource._from_dict(x)) is not None]
            except Exception as e:  # malformed provenance is not worth failing over... but say so
                raise Pt2FormatError(f"from_node: {type(e).__name__}: {e}", member=member, path=f"{path}.metadata") from None
    return ret


class _GraphState:
    __slots__ = ("graph", "module", "nodes", "metas", "meta_cache", "unbacked", "path")

    def __init__(self, path: str):
        self.graph = torch.fx.Graph()
        self.module = torch.nn.Module()
        self.nodes: dict[str, torch.fx.Node] = {}
        self.metas: dict[str, tuple[str, Any]] = {}
        self.meta_cache: dict[str, Any] = {}
        self.unbacked: set = set()
        self.path = path


class GraphBuilder:
    """Builds the FX graphs of one program (the top graph and every nested subgraph)."""

    def __init__(self, sym: SymbolicContext, signature: d.GraphSignature, constants: dict[str, Any], *, member: str | None):
        self.sym = sym
        self.signature = signature
        self.constants = constants
        self.member = member
        self.st: _GraphState | None = None

    def fail(self, msg: str, path: str) -> Pt2FormatError:
        return Pt2FormatError(msg, member=self.member, path=path)

    # ------------------------------------------------------------------ values

    def _meta(self, name: str, path: str):
        st = self.st
        try:
            return st.meta_cache[name]
        except KeyError:
            pass
        entry = st.metas.get(name)
        if entry is None:
            raise self.fail(f"value {name!r} has no entry in tensor_values/sym_*_values", path)
        kind, v = entry
        vpath = f"{st.path}.{kind}[{name!r}]"
        sym = self.sym
        if kind == "tensor_values":
            val = self._fake(v, vpath)
        elif kind == "sym_int_values":
            val = sym.sym_int(v, vpath)
        elif kind == "sym_float_values":
            val = sym.sym_float(v, vpath)
        elif kind == "sym_bool_values":
            val = sym.sym_bool(v, vpath)
        else:  # custom_obj_values
            from torch.export.graph_signature import CustomObjArgument

            val = CustomObjArgument(name=v.name, class_fqn=v.class_fqn)
        st.meta_cache[name] = val
        return val

    def _fake(self, tm: d.TensorMeta, path: str):
        dtype = DTYPES.get(tm.dtype)
        if dtype is None:
            raise self.fail(f"dtype {tm.dtype.name} is not supported by this torch", f"{path}.dtype")
        if tm.layout != d.Layout.Strided:
            raise self.fail(f"layout {tm.layout.name} is not supported (only strided tensors)", f"{path}.layout")
        sym = self.sym
        sizes = tuple(sym.sym_int(s, f"{path}.sizes[{i}]") for i, s in enumerate(tm.sizes))
        strides = tuple(sym.sym_int(s, f"{path}.strides[{i}]") for i, s in enumerate(tm.strides))
        if len(sizes) != len(strides):
            raise self.fail(f"{len(sizes)} sizes but {len(strides)} strides", path)
        dev = tm.device
        try:
            device = torch.device(dev.type, dev.index) if dev.index is not None else torch.device(dev.type)
        except RuntimeError as e:
            raise self.fail(f"device {dev.type!r}: {e}", f"{path}.device") from None
        # A FakeTensor over a meta tensor, built directly: what ``empty_strided`` under the
        # fake mode gives, without its dispatch and cache-validation cost.
        meta = torch.empty_strided(sizes, strides, device="meta", dtype=dtype)
        so = tm.storage_offset
        if not (so.type == "as_int" and so.value == 0):
            # A view's offset into its base (torch's loader drops it; the traced value had it).
            try:
                off = sym.sym_int(so, f"{path}.storage_offset")
                extent = 1 + sum((n - 1) * st for n, st in zip(sizes, strides))
                base = torch.empty_strided((off + extent,), (1,), device="meta", dtype=dtype)
                meta = base.as_strided(sizes, strides, off)
            except Exception:  # noqa: BLE001  (an offset torch cannot express: keep the offset-less value)
                pass
        fake = FakeTensor(sym.fake_mode, meta, device)
        if tm.requires_grad:
            fake.requires_grad_(True)
        return fake

    def _sync(self, name: str, node: torch.fx.Node, path: str) -> None:
        st = self.st
        if name in st.nodes:
            raise self.fail(f"value {name!r} is defined twice", path)
        node.name = name
        st.nodes[name] = node
        node.meta["val"] = self._meta(name, path)

    def _ref(self, name: str, path: str) -> torch.fx.Node:
        node = self.st.nodes.get(name)
        if node is None:
            raise self.fail(f"value {name!r} is used before it is defined", path)
        return node

    def _sym_arg(self, a, path):
        if a.type == "as_name":
            return self._ref(a.value, path)
        return a.value

    def _input(self, a: d.Argument, path: str):
        t, v = a.type, a.value
        if t == "as_tensor":
            return self._ref(v.name, path)
        if t == "as_none":
            return None
        if t in ("as_int", "as_float", "as_bool", "as_string"):
            return v
        if t in ("as_ints", "as_floats", "as_bools", "as_strings"):
            return list(v)
        if t == "as_tensors":
            return [self._ref(x.name, path) for x in v]
        if t in _SYM_ARG_TYPES:
            return self._sym_arg(v, path)
        if t in ("as_sym_ints", "as_sym_bools", "as_sym_floats"):
            return [self._sym_arg(x, path) for x in v]
        if t == "as_scalar_type":
            dt = DTYPES.get(v)
            if dt is None:
                raise self.fail(f"dtype {v.name} is not supported by this torch", path)
            return dt
        if t == "as_memory_format":
            return MEMORY_FORMATS.get(v) or self._bad(f"memory format {v.name}", path)
        if t == "as_layout":
            return LAYOUTS.get(v) or self._bad(f"layout {v.name}", path)
        if t == "as_device":
            try:
                return torch.device(v.type, v.index) if v.index is not None else torch.device(v.type)
            except RuntimeError as e:
                raise self.fail(f"device {v.type!r}: {e}", path) from None
        if t == "as_optional_tensors":
            return [None if x.type == "as_none" else self._ref(x.value.name, path) for x in v]
        if t == "as_optional_tensor":
            return None if v.type == "as_none" else self._ref(v.value.name, path)
        if t == "as_complex":
            return complex(v.real, v.imag)
        if t == "as_int_lists":
            return [tuple(x) for x in v]
        if t == "as_float_lists":
            return [list(x) for x in v]
        if t == "as_nested_tensors":
            return [[self._ref(x.name, path) for x in inner] for inner in v]
        if t == "as_string_to_argument":
            return {k: self._input(x, f"{path}[{k!r}]") for k, x in v.items()}
        if t == "as_graph":
            return self._subgraph(v, path)
        if t == "as_custom_obj":
            if v.name in self.st.nodes:
                return self.st.nodes[v.name]
            if v.name not in self.constants:
                raise self.fail(f"custom object {v.name!r} ({v.class_fqn}) is not loaded", path)
            return self.constants[v.name]
        if t == "as_operator":
            return resolve_target(v, member=self.member, path=path)
        raise self.fail(f"argument kind {t} is not supported", path)

    def _bad(self, what, path):
        raise self.fail(f"{what} is not supported by this torch", path)

    def _subgraph(self, ga: d.GraphArgument, path: str) -> torch.fx.Node:
        from torch.export.exported_program import _create_graph_module_for_export

        outer = self.st
        graph = self.build_graph(ga.graph, f"{path}.graph")
        inner = self.st
        self.st = outer
        sub = _create_graph_module_for_export(inner.module, graph)
        outer.module.register_module(ga.name, sub)
        return outer.graph.create_node("get_attr", ga.name, name=ga.name)

    # ------------------------------------------------------------------ graph

    def build_graph(self, g: d.Graph, path: str) -> torch.fx.Graph:
        """Build ``g``; leaves ``self.st`` set to its state (callers restore theirs)."""
        st = self.st = _GraphState(path)
        for kind in ("tensor_values", "sym_int_values", "sym_float_values", "sym_bool_values", "custom_obj_values"):
            for name, v in getattr(g, kind).items():
                st.metas[name] = (kind, v)
        sym = self.sym
        saved_unbacked, sym.unbacked = sym.unbacked, st.unbacked
        where = f"{path}.inputs"
        try:
            self._inputs(g, path)
            for i, sn in enumerate(g.nodes):
                where = npath = f"{path}.nodes[{i}]" + (f" ({sn.name})" if sn.name else "")
                target = resolve_target(sn.target, member=self.member, path=f"{npath}.target")
                self._node(sn, target, npath)
                self.st = st  # subgraphs swap it
            where = f"{path}.outputs"
            self._outputs(g, path)
            self._drop_unused_outputs()
            self._bind_unbacked(path)
        except Pt2FormatError:
            raise
        except Exception as e:  # torch/sympy refusing what the file says (bad sizes, ranges, args)
            raise self.fail(f"torch rejected it: {type(e).__name__}: {str(e)[:500]}", where) from None
        finally:
            sym.unbacked = saved_unbacked
        return st.graph

    def _inputs(self, g: d.Graph, path: str) -> None:
        st = self.st
        specs = self.signature.input_specs
        for i, a in enumerate(g.inputs):
            ipath = f"{path}.inputs[{i}]"
            t = a.type
            if t in ("as_tensor", "as_custom_obj") or (t == "as_sym_int" and a.value.type == "as_name") or (
                t in ("as_sym_float", "as_sym_bool") and a.value.type == "as_name"
            ):
                name = a.value.name if t in ("as_tensor", "as_custom_obj") else a.value.value
                node = st.graph.placeholder(name)
                self._sync(name, node, ipath)
            elif t in ("as_int", "as_float", "as_bool", "as_none", "as_string"):
                name = ""
                if i < len(specs):
                    kind, spec_name, _ = input_spec_parts(specs[i])
                    if kind in ("constant_input", "user_input"):
                        name = spec_name or ""
                node = st.graph.placeholder(name or f"arg{i}")
                node.meta["val"] = self._input(a, ipath)
            else:
                raise self.fail(f"graph input of kind {t} is not supported", ipath)

    def _outputs(self, g: d.Graph, path: str) -> None:
        st = self.st
        outs = []
        for i, a in enumerate(g.outputs):
            opath = f"{path}.outputs[{i}]"
            t = a.type
            if t == "as_tensor":
                outs.append(self._ref(a.value.name, opath))
            elif t in _SYM_ARG_TYPES:
                if a.value.type != "as_name":
                    raise self.fail(f"constant {t} graph output", opath)
                outs.append(self._ref(a.value.value, opath))
            elif t in ("as_int", "as_float", "as_bool"):
                outs.append(a.value)
            elif t == "as_none":
                outs.append(None)
            else:
                raise self.fail(f"graph output of kind {t} is not supported", opath)
        if g.is_single_tensor_return:
            if len(outs) != 1 or not isinstance(outs[0], torch.fx.Node):
                raise self.fail("is_single_tensor_return with other than one tensor output", f"{path}.outputs")
            node = st.graph.output(outs[0])
            node.meta["val"] = outs[0].meta["val"]
        else:
            node = st.graph.output(tuple(outs))
            node.meta["val"] = tuple(o.meta["val"] if isinstance(o, torch.fx.Node) else o for o in outs)

    def _drop_unused_outputs(self) -> None:
        """Erase the getitem nodes torch's writer invented for unused outputs (``<node>_unused_<i>``):
        the traced graph never had them."""
        g = self.st.graph
        for node in reversed(list(g.nodes)):
            if node.target is operator.getitem and not node.users and node.op == "call_function":
                parent = node.args[0]
                invented = isinstance(parent, torch.fx.Node) and node.name.startswith(f"{parent.name}_unused_")
                if invented or (node.name.startswith("as_none") and node.meta.get("val", 0) is None):
                    g.erase_node(node)
                    self.st.nodes.pop(node.name, None)

    def _bind_unbacked(self, path: str) -> None:
        st, env = self.st, self.sym.shape_env
        for node in st.graph.nodes:
            val = node.meta.get("val")
            if val is None or not st.unbacked:
                continue
            b = symbolic_shapes._free_unbacked_symbols_with_path(val, (), shape_env=env, pending=st.unbacked, simplify=True)
            if b:
                node.meta["unbacked_bindings"] = b
        if st.unbacked:
            raise self.fail(
                f"unbacked symbols {sorted(map(str, st.unbacked))} are used but no node defines them", path
            )

    # ------------------------------------------------------------------ nodes

    def _node(self, sn: d.Node, target, path: str) -> None:
        st = self.st
        meta = deserialize_metadata(sn.metadata, member=self.member, path=path)
        if target in SYM_OPS or target is torch.ops.aten.item.default:
            if not sn.outputs or sn.outputs[0].type not in _SYM_ARG_TYPES or sn.outputs[0].value.type != "as_name":
                raise self.fail("symbolic operation without a named symbolic output", f"{path}.outputs")
            out_name = sn.outputs[0].value.value
            args = tuple(self._input(x.arg, f"{path}.inputs[{j}]") for j, x in enumerate(sn.inputs))
            node = st.graph.create_node("call_function", target, args, {}, sn.name or out_name)
            self._sync(out_name, node, f"{path}.outputs[0]")
        elif isinstance(target, torch._ops.HigherOrderOperator):
            args, kwargs = self._hop_inputs(sn, path)
            if target.name() in _HOP_TUPLE_OPERANDS:
                args = tuple(tuple(a) if isinstance(a, list) else a for a in args)
            for x in (*args, *kwargs.values()):
                if isinstance(x, torch.fx.Node) and x.op == "get_attr":
                    x.meta.update(meta)
            name = sn.name
            if not name and len(sn.outputs) == 1 and sn.outputs[0].type == "as_tensor" and sn.is_hop_single_tensor_return:
                name = sn.outputs[0].value.name
            node = st.graph.create_node("call_function", target, args, kwargs, name or None)
            self._outputs_of(sn, node, meta, path)
        elif isinstance(target, torch._ops.OpOverload):
            schema = target._schema
            name = sn.name
            if not name:
                rets = schema.returns
                if len(rets) == 1 and isinstance(rets[0].real_type, torch.TensorType) and sn.outputs and sn.outputs[0].type == "as_tensor":
                    name = sn.outputs[0].value.name
            args, kwargs = self._op_inputs(sn, schema, path)
            node = st.graph.create_node("call_function", target, args, kwargs, name or None)
            self._outputs_of(sn, node, meta, path)
        else:
            args, kwargs = self._hop_inputs(sn, path)
            node = st.graph.create_node("call_function", target, args, kwargs, sn.name or None)
            self._outputs_of(sn, node, meta, path)
        node.meta.update(meta)

        env = self.sym.shape_env
        if target is torch.ops.aten._assert_scalar.default:
            arg = node.args[0] if node.args else None
            if isinstance(arg, torch.fx.Node) and isinstance(arg.meta.get("val"), torch.SymBool):
                env.guard_or_defer_runtime_assert(arg.meta["val"].node.expr, "", node)
        elif target is torch.ops.aten.sym_constrain_range_for_size.default:
            arg = node.args[0] if node.args else None
            if isinstance(arg, torch.fx.Node) and isinstance(arg.meta.get("val"), torch.SymInt):
                env._constrain_range_for_size(arg.meta["val"].node.expr)
        if "nn_module_stack" not in node.meta:
            node.meta["nn_module_stack"] = {}

    def _hop_inputs(self, sn: d.Node, path: str):
        args, kwargs = [], {}
        for j, x in enumerate(sn.inputs):
            v = self._input(x.arg, f"{path}.inputs[{j}]")
            if x.kind == _POSITIONAL or x.name == "":
                args.append(v)
            else:
                kwargs[x.name] = v
        return tuple(args), kwargs

    def _op_inputs(self, sn: d.Node, schema, path: str):
        given: dict[str, tuple[Any, Any]] = {}
        for j, x in enumerate(sn.inputs):
            given[x.name] = (self._input(x.arg, f"{path}.inputs[{j}]"), x.kind)
        known = {a.name for a in schema.arguments}
        extra = [n for n in given if n not in known]
        if extra:
            raise self.fail(f"arguments {extra} are not in the schema of {schema.name}.{schema.overload_name or 'default'}: {schema}", f"{path}.inputs")
        args: list = []
        kwargs: dict = {}
        for sa in schema.arguments:
            name = sa.name
            if name in given:
                val, kind = given[name]
                if kind == _POSITIONAL:
                    args.append(val)
                    continue
                if kind == _KEYWORD and not keyword.iskeyword(name):
                    kwargs[name] = val
                    continue
            if not sa.has_default_value() and not sa.kwarg_only:
                if name not in given:
                    raise self.fail(f"required argument {name!r} of {schema.name} is missing", f"{path}.inputs")
                args.append(given[name][0])
            elif keyword.iskeyword(name):
                if name in given:
                    args.append(given[name][0])
            elif name in given:
                kwargs[name] = given[name][0]
        return tuple(args), kwargs

    def _outputs_of(self, sn: d.Node, node: torch.fx.Node, meta: dict, path: str) -> None:
        outs = sn.outputs
        if not outs:
            return
        opath = f"{path}.outputs"
        if (
            len(outs) == 1
            and isinstance(node.target, torch._ops.HigherOrderOperator)
            and not sn.is_hop_single_tensor_return
            and outs[0].type not in ("as_none", "as_tensors")  # as_tensors: torch <= 2.6's form, below
        ):
            a = outs[0]
            if a.type == "as_tensor":
                arg = a.value
            elif a.type in _SYM_ARG_TYPES:
                arg = a.value
            else:
                raise self.fail(f"higher-order operator output of kind {a.type}", opath)
            vals: list = []
            self._getitem(vals, node, arg, 0, meta, opath)
            node.meta["val"] = tuple(vals)
            self.st.nodes[node.name] = node
            return
        if len(outs) == 1:
            a = outs[0]
            if a.type == "as_tensor":
                self._sync(a.value.name, node, f"{opath}[0]")
                return
            if a.type in _SYM_ARG_TYPES:
                if a.value.type != "as_name":
                    raise self.fail(f"constant {a.type} as a node output", f"{opath}[0]")
                self._sync(a.value.value, node, f"{opath}[0]")
                return
            if a.type == "as_none":
                node.meta["val"] = None
                node._rename(f"{self.st.graph._target_to_str(node.target)}_unused")
                return
        vals = []
        if len(outs) == 1:
            if outs[0].type != "as_tensors":
                raise self.fail(f"single output of kind {outs[0].type} is not supported", f"{opath}[0]")
            self._getitems(vals, node, outs[0].value, meta, opath)
        else:
            self._getitems(vals, node, outs, meta, opath)
        # An op returning one Tensor[] (split, unbind, ...) traces to a list, several returns to a tuple.
        node.meta["val"] = vals if _returns_one_list(node.target) else tuple(vals)
        self.st.nodes[node.name] = node

    def _getitem(self, vals: list, node, arg, idx: int, meta: dict, path: str) -> None:
        if isinstance(arg, d.TensorArgument):
            name = arg.name
        elif isinstance(arg, (d.SymIntArgument, d.SymFloatArgument, d.SymBoolArgument)) and arg.type == "as_name":
            name = arg.value
        else:
            raise self.fail(f"output {idx} is not a named value", path)
        item = self.st.graph.create_node("call_function", operator.getitem, (node, idx), name=name)
        self._sync(name, item, f"{path}[{idx}]")
        vals.append(item.meta["val"])
        item.meta.update(meta)

    def _getitems(self, vals: list, node, args, meta: dict, path: str) -> None:
        g = self.st.graph
        for idx, a in enumerate(args):
            ipath = f"{path}[{idx}]"
            if isinstance(a, (d.TensorArgument, d.SymIntArgument, d.SymFloatArgument)):
                self._getitem(vals, node, a, idx, meta, ipath)
            elif not isinstance(a, d.Argument):
                raise self.fail(f"unexpected output {a!r}", ipath)
            elif a.type in ("as_tensor", "as_sym_int", "as_sym_float"):
                self._getitem(vals, node, a.value, idx, meta, ipath)
            elif a.type in _LIST_OUTPUTS:
                lst = g.create_node("call_function", operator.getitem, (node, idx))
                sub: list = []
                vals.append(sub)
                self._getitems(sub, lst, a.value, meta, ipath)
                lst.meta.update(meta)
                lst.meta["val"] = sub
            elif a.type == "as_none":
                item = g.create_node("call_function", operator.getitem, (node, idx), name="as_none")
                vals.append(None)
                item.meta["val"] = None
                item.meta.update(meta)
            else:
                raise self.fail(f"node output of kind {a.type} is not supported", ipath)
