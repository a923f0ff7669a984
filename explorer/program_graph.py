"""A ``.pt2`` program as Model Explorer graphs (its adapter JSON), read without torch.

``program_graphs(src)`` opens the archive with pt2x's reader and checks (a malformed or hostile
file raises the reader's ``Pt2Error``; nothing in it runs) and returns one graph per model, plus one
per subgraph of a higher-order operator (``cond``'s branches, ``while_loop``'s condition and body,
``map``'s function), each a dict in the shape of Model Explorer's ``graph_builder.Graph``:

* node ids are the FX node names torch gives the program when it loads it (``fx_names``), as
  Model Explorer's own ``.pt2`` adapter has them, so node data made for one loads on the other; a
  value read by a node is the edge from the node torch names after it (a ``getitem`` for one of
  several outputs);
* a node's namespace is its ``nn_module_stack`` (each call a level, named by its attribute path:
  ``layer1.0/conv1``), so a layer collapses into one box; a weight sits in the deepest module
  every reader of it shares (one nothing reads, in its own module); a user input, the output node
  and a node outside any module sit at the top;
* every value carries ``tensor_name`` and ``tensor_shape`` (``float32[s77, 8]``); inputs and
  weights also their kind, dtype, shape and size in bytes (weights as the archive holds them,
  their bytes never read), and each shape symbol its range (the graph's attributes);
* a higher-order call lists its subgraphs (``subgraphIds``: ``<graph>/<node>.<argument>``).

The main graph's id is ``graph`` (the built-in adapter's) for a one-model archive, else the model's
name. ``pte_graphs`` does the same for an ExecuTorch program.
"""

from __future__ import annotations

from ..converters.aten.graph import GraphView, ProgramView, open_program
from ..converters.aten.module_stack import module_stack
from ..schema import definitions as d
from ..schema.dtypes import row
from ..schema.walk import ARGUMENT_MEMBERS, input_spec_parts, node_inputs, subgraphs, value_refs
from ..serde.archive.loader import load
from ..serde.codec.symbolic import to_infix
from .fx_names import FxNames, target_base_name, target_label

__all__ = ["program_graphs", "MAIN_GRAPH_ID", "OUTPUT_NODE", "shape_text", "dims_text"]

MAIN_GRAPH_ID = "graph"
OUTPUT_NODE = "output"
_NODE_LISTS = ("subgraphIds", "attrs", "incomingEdges", "outputsMetadata", "inputsMetadata")
_SINGLE = ("as_tensor", "as_sym_int", "as_sym_bool", "as_sym_float")
_INPUT_KINDS = {"user_input": "user input", "parameter": "parameter", "buffer": "buffer",
                "tensor_constant": "tensor constant", "custom_obj": "custom object", "token": "token",
                "constant_input": "constant input"}


def program_graphs(src) -> list[dict]:
    """Every model of the archive at ``src`` (a path or file object) and its subgraphs."""
    with load(src) as archive:
        names = sorted(archive.models)
        if not names:  # an AOTInductor package (compiled code) or no model: the archive's own refusal
            archive.model(None)
        graphs: list[dict] = []
        for name in names:
            view, _ = open_program(archive.model(name), name)
            graphs += _ProgramGraphs(view, MAIN_GRAPH_ID if len(names) == 1 else name).graphs
        return graphs


def shape_text(view: GraphView, name: str) -> str | None:
    """``float32[s77, 8]`` for a tensor value, ``SymInt`` for a symbol, None when unknown."""
    if view.has_tensor(name):
        t = view.tensor(name)
        return f"{row(t.dtype).torch_name}{dims_text(t.shape)}"
    v = view
    while v is not None:
        if name in v.sym_ints:
            return "SymInt"
        if name in v.graph.sym_bool_values:
            return "SymBool"
        if name in v.graph.sym_float_values:
            return "SymFloat"
        v = v.parent
    return None


def dims_text(shape) -> str:
    """``[s77, 8]``: ints, and symbolic dims as infix expressions."""
    return "[" + ", ".join(str(s) if isinstance(s, int) else to_infix(s) for s in shape) + "]"


def _kv(key: str, value) -> dict:
    return {"key": key, "value": str(value)}


def _ref_text(x) -> str:
    """A value reference as text: a tensor's or symbol's name, a literal a symbolic slot holds, None."""
    if hasattr(x, "type") and hasattr(x, "value"):  # a union: SymIntArgument, OptionalTensorArgument...
        if x.type == "as_none":
            return "None"
        return str(x.value) if isinstance(x.value, (str, int, float, bool)) else _ref_text(x.value)
    return str(getattr(x, "name", x))


def _arg_text(arg: d.Argument) -> str:
    """An argument as the side panel shows it: value names, literals as written, dtypes by name."""
    kind = ARGUMENT_MEMBERS.get(arg.type)
    if kind == "graph":
        return arg.value.name
    if kind is not None and kind != "mapping":
        if isinstance(arg.value, list):
            return "[" + ", ".join(_ref_text(x) for x in arg.value) + "]"
        return _ref_text(arg.value)
    if arg.type == "as_none":
        return "None"
    if arg.type == "as_scalar_type":
        return row(arg.value).torch_name
    value = arg.value
    return str(value.name if hasattr(value, "name") and not isinstance(value, (str, list)) else value)


class _ProgramGraphs:
    """The graphs of one model: the main graph, then each subgraph, depth first."""

    def __init__(self, view: ProgramView, graph_id: str):
        self.program = view
        self.input_kinds = _input_kinds(view.program.graph_module.signature)
        self.weights = {w.name: w for w in view.weights.values()}
        self.graphs: list[dict] = []
        self._graph(view, graph_id)

    def _graph(self, view: GraphView, graph_id: str) -> None:
        at = len(self.graphs)
        self.graphs.append({})
        names = FxNames()
        ids: dict[str, str] = {}  # value -> the node torch names after it
        nodes: list[dict] = []
        top = view is self.program
        for i, arg in enumerate(view.graph.inputs):
            ref = next(value_refs(arg), None)
            if ref is not None:  # torch makes the placeholder, then renames it to the input's name
                names.create(ref[1])
                ids[ref[1]] = names.keep(ref[1])
                nodes.append(self._input_node(view, ref[1], top))
            elif top:  # a constant input: a placeholder named after its spec
                spec = self.program.program.graph_module.signature.input_specs
                name = names.create((input_spec_parts(spec[i])[1] if i < len(spec) else None) or f"arg{i}")
                nodes.append({"id": name, "label": name, "namespace": "",
                              "attrs": [_kv("kind", "constant input"), _kv("value", _arg_text(arg))]})
        for n in view.nodes:
            nodes += self._node(view, n, names, ids, graph_id)
        returned = [name for a in view.output_args for _, name in value_refs(a)]
        out = {"id": names.create(OUTPUT_NODE), "label": OUTPUT_NODE, "namespace": "",
               "incomingEdges": _edges(returned, ids),
               "attrs": [_kv(f"output {i}", f"{name}: {shape_text(view, name) or '?'}") for i, name in enumerate(returned)]}
        nodes.append(out)
        modules = _module_attrs(view) if top else {}
        if top:
            homes = {attrs["module"]: space for space, attrs in modules.items()}
            _place_weights(nodes, {i: homes.get(self.weights[i].fqn.rpartition(".")[0], "")
                                   for i in ids.values() if i in self.weights})
        for node in nodes:  # every list Model Explorer's GraphNode has, present: readers need not guess
            for key in _NODE_LISTS:
                node.setdefault(key, [])
        graph = {"id": graph_id, "nodes": nodes}
        if top:
            graph["groupNodeAttributes"] = {"": self._program_attrs(), **modules}
        self.graphs[at] = graph

    # ---------------------------------------------------------------------------- nodes

    def _input_node(self, view: GraphView, name: str, top: bool) -> dict:
        kind = self.input_kinds.get(name, "user input") if top else "subgraph input"
        attrs = [_kv("kind", kind)]
        w = self.weights.get(name) if top else None
        if w is not None:
            attrs += [_kv("fqn", w.fqn), _kv("dtype", w.array.dtype.name), _kv("shape", list(w.array.shape)),
                      _kv("size", f"{w.array.nbytes} bytes")]
            if not w.persistent:
                attrs.append(_kv("persistent", False))
        elif view.has_tensor(name):
            t = view.tensor(name)
            attrs += [_kv("dtype", row(t.dtype).torch_name), _kv("shape", dims_text(t.shape))]
        return {"id": name, "label": name, "namespace": "", "attrs": attrs, "outputsMetadata": [_value_meta(view, name, 0)]}

    def _node(self, view: GraphView, n: d.Node, names: FxNames, ids: dict, graph_id: str) -> list[dict]:
        outs = list(n.outputs)
        single = len(outs) == 1 and outs[0].type in _SINGLE and not _hop_tuple(n)
        namespace = "/".join(_levels(n))
        graph_args = [(na, sub) for na in n.inputs for sub in subgraphs(na.arg)]
        # torch reads a subgraph argument as a get_attr node made before the call
        attr_nodes = [{"id": names.create(sub.name), "label": sub.name, "namespace": namespace,
                       "attrs": [_kv("kind", "subgraph")]} for _, sub in graph_args]
        if n.name:
            node_id = names.create(n.name)
        elif single:
            node_id = names.create(next(value_refs(outs[0]))[1])
        else:
            node_id = names.create(target_base_name(n.target))
        if len(outs) == 1 and outs[0].type == "as_none" and not n.name:
            node_id = names.create(f"{target_base_name(n.target)}_unused")
        node = {"id": node_id, "label": target_label(n.target), "namespace": namespace,
                "attrs": self._attrs(n), "incomingEdges": _edges([name for _, name in node_inputs(n)], ids)}
        node["incomingEdges"] += [{"sourceNodeId": a["id"], "sourceNodeOutputId": "0",
                                   "targetNodeInputId": str(len(node["incomingEdges"]) + k)} for k, a in enumerate(attr_nodes)]
        sub_ids = []
        for (_, sub), attr in zip(graph_args, attr_nodes):
            sub_id = f"{graph_id}/{node_id}.{sub.name}"
            sub_ids.append(sub_id)
            attr["subgraphIds"] = [sub_id]
            self._graph(view.subgraph(sub.graph), sub_id)
        if sub_ids:
            node["subgraphIds"] = sub_ids
        made = attr_nodes + [node]
        if single:
            name = next(value_refs(outs[0]))[1]
            ids[name] = node_id
            node["outputsMetadata"] = [_value_meta(view, name, 0)]
        else:
            made += self._getitems(view, outs, node_id, namespace, names, ids)
        return made

    def _getitems(self, view, outs: list[d.Argument], source: str, namespace: str, names: FxNames, ids: dict) -> list[dict]:
        """The ``getitem`` node torch adds for each output value (``fx_names``)."""
        made = []
        if len(outs) == 1 and isinstance(outs[0].value, list):  # one list: a getitem per item, no list getitem
            outs = [_item_argument(t) for t in outs[0].value]
        for i, arg in enumerate(outs):
            refs = [name for _, name in value_refs(arg)]
            edge = [{"sourceNodeId": source, "sourceNodeOutputId": "0", "targetNodeInputId": "0"}]
            if arg.type in _SINGLE:
                made.append(self._getitem(view, refs[0], names.create(refs[0]), i, namespace, edge, ids))
            elif arg.type == "as_none":
                made.append({"id": names.create("as_none"), "label": "getitem", "namespace": namespace,
                             "attrs": [_kv("index", i)], "incomingEdges": edge})
            elif isinstance(arg.value, list):
                list_id = names.create("getitem")
                made.append({"id": list_id, "label": "getitem", "namespace": namespace, "attrs": [_kv("index", i)],
                             "incomingEdges": edge})
                inner = [{"sourceNodeId": list_id, "sourceNodeOutputId": "0", "targetNodeInputId": "0"}]
                for j, name in enumerate(refs):
                    made.append(self._getitem(view, name, names.create(name), j, namespace, inner, ids))
        return made

    def _getitem(self, view, value: str, node_id: str, index: int, namespace: str, edge: list, ids: dict) -> dict:
        ids[value] = node_id
        return {"id": node_id, "label": "getitem", "namespace": namespace, "attrs": [_kv("index", index)],
                "incomingEdges": edge, "outputsMetadata": [_value_meta(view, value, 0)]}

    def _attrs(self, n: d.Node) -> list[dict]:
        attrs = [_kv("target", n.target)]
        attrs += [_kv(na.name or f"arg{i}", _arg_text(na.arg)) for i, na in enumerate(n.inputs)]
        stack = module_stack(n)
        if stack:
            attrs.append(_kv("module", f"{stack[-1].path or '(the exported module)'} ({stack[-1].type})"))
        trace = dict(n.metadata or {}).get("stack_trace")
        if trace:
            attrs.append(_kv("stack_trace", trace))
        return attrs

    def _program_attrs(self) -> dict:
        v = self.program
        attrs = {"model": v.name, "inputs": ", ".join(u.name for u in v.user_inputs if u.name),
                 "weights": f"{len(v.weights)} ({sum(w.array.nbytes for w in v.weights.values())} bytes)"}
        for sym, (lo, hi) in sorted(v.ranges.items()):
            attrs[f"range {sym}"] = f"[{lo}, {'inf' if hi is None else hi}]"
        return attrs


# -------------------------------------------------------------------------------- helpers

_ITEM_MEMBERS = {d.TensorArgument: "as_tensor", d.SymIntArgument: "as_sym_int", d.SymFloatArgument: "as_sym_float",
                 d.SymBoolArgument: "as_sym_bool"}


def _item_argument(item) -> d.Argument:
    """An item of a list output as the ``Argument`` it would be alone (an optional tensor's as_none kept)."""
    if isinstance(item, d.OptionalTensorArgument):
        return d.Argument(as_tensor=item.value) if item.type == "as_tensor" else d.Argument(as_none=True)
    member = _ITEM_MEMBERS.get(type(item))
    return d.Argument(**{member: item}) if member else d.Argument(as_none=True)


def _hop_tuple(n: d.Node) -> bool:
    """A higher-order call returning its one tensor as a one-element tuple (a ``getitem`` follows)."""
    return n.target.startswith("torch.ops.higher_order.") and n.is_hop_single_tensor_return is False


def _input_kinds(signature: d.GraphSignature) -> dict[str, str]:
    out = {}
    for spec in signature.input_specs:
        kind, name, _ = input_spec_parts(spec)
        if name:
            out[name] = _INPUT_KINDS.get(kind, kind)
    return out


def _levels(n: d.Node) -> list[str]:
    """The namespace levels of ``n``: each module call below the root, by its path relative to
    the call it sits in (``layer1.0``, then ``conv1``). ``/`` separates levels, so it is escaped."""
    levels, parent = [], ""
    for call in module_stack(n):
        if not call.path:
            continue
        rel = call.path[len(parent) + 1:] if parent and call.path.startswith(parent + ".") else call.path
        levels.append(rel.replace("/", "\u2215"))
        parent = call.path
    return levels


def _module_attrs(view: ProgramView) -> dict[str, dict[str, str]]:
    """Each namespace -> the module it is (path and class), shown when its box is selected."""
    out: dict[str, dict[str, str]] = {}
    for n in view.walk():
        levels = _levels(n)
        calls = [c for c in module_stack(n) if c.path]
        for depth, call in enumerate(calls):
            out.setdefault("/".join(levels[: depth + 1]), {"module": call.path, "class": call.type})
    return out


def _edges(values: list[str], ids: dict[str, str]) -> list[dict]:
    return [{"sourceNodeId": ids[v], "sourceNodeOutputId": "0", "targetNodeInputId": str(i)}
            for i, v in enumerate(values) if v in ids]


def _value_meta(view: GraphView, name: str, index: int) -> dict:
    attrs = [_kv("tensor_name", name)]
    shape = shape_text(view, name)
    if shape is not None:
        attrs.append(_kv("tensor_shape", shape))
    return {"id": str(index), "attrs": attrs}


def _place_weights(nodes: list[dict], weights: dict[str, str]) -> None:
    """Each weight into the deepest namespace every node reading it shares; one nothing reads
    (``num_batches_tracked``) into its own module's (``weights``: weight -> that namespace)."""
    readers: dict[str, list[str]] = {}
    for node in nodes:
        for e in node.get("incomingEdges", ()):
            if e["sourceNodeId"] in weights:
                readers.setdefault(e["sourceNodeId"], []).append(node["namespace"])
    for node in nodes:
        spaces = readers.get(node["id"])
        if node["id"] in weights and not spaces:
            node["namespace"] = weights[node["id"]]
        elif node["id"] in weights:
            common = spaces[0].split("/")
            for s in spaces[1:]:
                parts = s.split("/")
                k = 0
                while k < min(len(common), len(parts)) and common[k] == parts[k]:
                    k += 1
                common = common[:k]
            node["namespace"] = "/".join(common)
