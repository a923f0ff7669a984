"""A light read-only view over a schema program, shared by the converters.

``ProgramView`` answers what every lowering asks: a value's dtype and symbolic shape
(from ``tensor_values``; dims are ``int`` or a parsed ``symbolic.Expr``), who produces and
who consumes a value, the user inputs and outputs in order, which placeholders are
parameters/buffers/constants and their numpy arrays, what the program mutates, and the
range of each shape symbol. Subgraphs of ``cond``/``while_loop``/``map`` get a
``GraphView`` of their own (``view.subgraph(graph)``).

``open_program(src, model)`` accepts a path, a file object, a loaded ``Pt2Archive`` or a
``Pt2Model`` and never imports torch.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator, Union

import numpy as np

from ...schema import definitions as d
from ...schema.walk import input_spec_parts, node_inputs, node_outputs, output_spec_parts, subgraphs, value_refs
from ...serde.codec.symbolic import Expr, Integer, Symbol, parse_cached
from ...serde.errors import Pt2FormatError
from ..errors import ConversionError

__all__ = [
    "Dim", "TensorInfo", "GraphView", "ProgramView", "UserInput", "Weight", "Mutation",
    "open_program", "sym_dim", "output_names", "input_names", "first_input",
]

Dim = Union[int, Expr]


def sym_dim(s: d.SymInt) -> Dim:
    """A schema ``SymInt`` as an int, or a parsed expression (a bare integer expression
    becomes an int)."""
    if s.type == "as_int":
        return s.value
    e = parse_cached(s.value.expr_str)
    return e.value if isinstance(e, Integer) else e


@dataclass(frozen=True)
class TensorInfo:
    dtype: d.ScalarType
    shape: tuple  # of Dim

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def is_static(self) -> bool:
        return all(isinstance(s, int) for s in self.shape)

    def numel(self) -> int | None:
        if not self.is_static:
            return None
        n = 1
        for s in self.shape:
            n *= s
        return n


@dataclass(frozen=True)
class UserInput:
    name: str  # placeholder name (also the converted model's input name)
    kind: str  # "tensor" | "sym_int" | "sym_float" | "sym_bool" | "constant" | "custom_obj"
    value: object = None  # the constant for kind "constant"


@dataclass(frozen=True)
class Weight:
    name: str  # placeholder name in the graph (b_steps, p_fc1_weight, c_table)
    fqn: str  # parameter/buffer/constant name in the module (fc1.weight)
    kind: str  # "parameter" | "buffer" | "tensor_constant"
    array: np.ndarray
    persistent: bool = True


@dataclass(frozen=True)
class Mutation:
    kind: str  # "buffer" | "user_input" | "parameter"
    value: str  # the graph value holding the new contents
    target: str  # buffer FQN or user input placeholder name


class GraphView:
    """One graph: its nodes, values with metadata, producers and consumers."""

    def __init__(self, graph: d.Graph, parent: "GraphView | None" = None, *, member: str | None = None,
                 path: str = "graph_module.graph"):
        self.graph = graph
        self.parent = parent
        self.member = member if member is not None else (parent.member if parent is not None else None)
        self.path = path  # field path of this graph inside the member
        self.nodes: list[d.Node] = graph.nodes
        self.tensors: dict[str, TensorInfo] = {
            k: TensorInfo(m.dtype, tuple(self._dim(s, k, i) for i, s in enumerate(m.sizes)))
            for k, m in graph.tensor_values.items()
        }
        self.sym_ints: dict[str, Dim] = {k: self._dim(v, k) for k, v in graph.sym_int_values.items()}
        self.producer: dict[str, d.Node] = {}
        self.consumers: dict[str, list[d.Node]] = {}
        for n in self.nodes:
            for name in output_names(n):
                self.producer[name] = n
            for name in input_names(n):
                self.consumers.setdefault(name, []).append(n)
        self.input_names: list[str] = [_arg_name(a) for a in graph.inputs]
        self.output_args: list[d.Argument] = graph.outputs

    def tensor(self, name: str) -> TensorInfo:
        v = self
        while v is not None:
            t = v.tensors.get(name)
            if t is not None:
                return t
            v = v.parent
        raise ConversionError(f"no tensor metadata for value {name!r}", member=self.member)

    def _dim(self, s: d.SymInt, value: str, axis: int | None = None) -> Dim:
        """``sym_dim`` naming the member and field path of an expression it cannot parse
        (``value``'s size ``axis``, or the SymInt ``value`` when ``axis`` is None)."""
        try:
            return sym_dim(s)
        except Pt2FormatError as e:
            if e.member is not None:
                raise
            field = f"sym_int_values[{value!r}]" if axis is None else f"tensor_values[{value!r}].sizes[{axis}]"
            raise type(e)(e.reason, member=self.member, path=f"{self.path}.{field}") from None

    def node_path(self, node: d.Node) -> str:
        """Field path of one of this graph's nodes (``graph_module.graph.nodes[3]``)."""
        for i, n in enumerate(self.nodes):
            if n is node:
                return f"{self.path}.nodes[{i}]"
        return self.path

    def has_tensor(self, name: str) -> bool:
        return name in self.tensors or (self.parent is not None and self.parent.has_tensor(name))

    def subgraph(self, graph: d.Graph) -> "GraphView":
        return GraphView(graph, parent=self, path=self._subgraph_path(graph))

    def _subgraph_path(self, graph: d.Graph) -> str:
        for i, n in enumerate(self.nodes):
            for j, na in enumerate(n.inputs):
                if na.arg.type == "as_graph" and na.arg.value.graph is graph:
                    return f"{self.path}.nodes[{i}].inputs[{j}].arg.as_graph.graph"
        return f"{self.path}.<subgraph>"

    def walk(self) -> Iterator[d.Node]:
        """Every node, subgraphs included (depth first, in program order)."""
        for n in self.nodes:
            yield n
            for na in n.inputs:
                for sub in subgraphs(na.arg):
                    yield from self.subgraph(sub.graph).walk()


def _arg_name(a: d.Argument) -> str | None:
    """The first value ``a`` names (a graph input's placeholder), or None for a literal."""
    ref = next(value_refs(a), None)
    return ref[1] if ref else None


def output_names(n: d.Node) -> list[str]:
    """Every value node ``n`` defines, in output order (``schema.walk``)."""
    return [name for _, name in node_outputs(n)]


def input_names(n: d.Node) -> list[str]:
    """Every value node ``n`` reads, in argument order (``schema.walk``; subgraphs are scopes
    of their own and not included)."""
    return [name for _, name in node_inputs(n)]


def first_input(n: d.Node) -> str | None:
    """The first value node ``n`` reads (what an in-place or view op writes or views), or None."""
    names = input_names(n)
    return names[0] if names else None


# user input Argument member -> UserInput.kind (other members are constants)
_USER_INPUT_KINDS = {"as_tensor": "tensor", "as_sym_int": "sym_int", "as_sym_float": "sym_float",
                     "as_sym_bool": "sym_bool", "as_custom_obj": "custom_obj"}
# OutputSpec member -> Mutation.kind
_MUTATION_KINDS = {"buffer_mutation": "buffer", "user_input_mutation": "user_input", "parameter_mutation": "parameter"}


class ProgramView(GraphView):
    """The top-level graph plus the program's signature, weights and ranges."""

    def __init__(self, program: d.ExportedProgram, state_dict: dict, constants: dict, name: str = "model",
                 member: str | None = None):
        gm = program.graph_module
        super().__init__(gm.graph, member=member)
        self.program = program
        self.name = name
        self.user_inputs: list[UserInput] = []
        self.weights: dict[str, Weight] = {}
        self.tokens: list[str] = []
        for i, spec in enumerate(gm.signature.input_specs):
            self._input_spec(i, spec, state_dict, constants)
        self.user_outputs: list[d.Argument] = []
        self.mutations: list[Mutation] = []
        for spec in gm.signature.output_specs:
            self._output_spec(spec)
        self.ranges: dict[str, tuple[int | None, int | None]] = {
            k: (r.min_val, r.max_val) for k, r in program.range_constraints.items()
        }

    def _input_spec(self, i: int, spec: d.InputSpec, state_dict: dict, constants: dict) -> None:
        kind, name, fqn = input_spec_parts(spec)
        v = spec.value
        if kind == "user_input":
            a = v.arg
            ukind = _USER_INPUT_KINDS.get(a.type, "constant")
            self.user_inputs.append(UserInput(name or "", ukind) if ukind != "constant" else UserInput("", ukind, a.value))
        elif kind == "constant_input":
            self.user_inputs.append(UserInput(name, "constant", v.value.value))
        elif kind in ("parameter", "buffer", "tensor_constant"):
            arr = state_dict.get(fqn) if fqn in state_dict else constants.get(fqn)
            if arr is None:
                raise ConversionError(f"{kind} {fqn!r} (input {name!r}) has no data in the archive",
                                      member=self.member, path=f"graph_module.signature.input_specs[{i}]")
            self.weights[name] = Weight(name, fqn, kind, arr, getattr(v, "persistent", True))
        elif kind == "token":
            self.tokens.append(name)
        else:  # custom_obj
            self.user_inputs.append(UserInput(name, "custom_obj"))

    def _output_spec(self, spec: d.OutputSpec) -> None:
        kind, name, target = output_spec_parts(spec)
        if kind == "user_output":
            self.user_outputs.append(spec.value.arg)
        elif kind in _MUTATION_KINDS:
            self.mutations.append(Mutation(_MUTATION_KINDS[kind], name, target))
        elif kind == "loss_output":
            self.user_outputs.append(d.Argument(as_tensor=spec.value.arg))
        # gradients and tokens have no meaning at inference

    @property
    def tensor_user_inputs(self) -> list[UserInput]:
        return [u for u in self.user_inputs if u.kind == "tensor"]

    def symbol_sources(self) -> dict[str, tuple[str, int]]:
        """Each shape symbol -> (user input, axis) where it first appears as a whole dim."""
        out: dict[str, tuple[str, int]] = {}
        for u in self.user_inputs:
            if u.kind != "tensor":
                continue
            for axis, s in enumerate(self.tensor(u.name).shape):
                if isinstance(s, Symbol) and s.name not in out:
                    out[s.name] = (u.name, axis)
        return out

    def weight_by_fqn(self, fqn: str) -> Weight | None:
        return next((w for w in self.weights.values() if w.fqn == fqn), None)


def open_program(src, model: str | None = "model", *, check: bool = True):
    """``(ProgramView, keepalive)`` from a path, file object, ``Pt2Archive`` or ``Pt2Model``.
    Keep ``keepalive`` (the archive) referenced while the weight arrays are in use.

    With ``check`` (the default) the program first passes ``precheck.check_model``: a
    program that breaks what lowerings rely on is refused with a ``ConversionError``
    naming the member and every field at fault."""
    from ...serde.archive.loader import Pt2Archive, Pt2Model, load

    if isinstance(src, Pt2Model):
        archive, m = None, src
    else:
        archive = src if isinstance(src, Pt2Archive) else load(src)
        if model not in archive.models and len(archive.models) == 1 and model == "model":
            model = None
        m = archive.model(model)
    from ..guard import stage

    if check:
        from .precheck import check_model

        with stage(m.json_member, "checking the program"):
            check_model(m)
    with stage(m.json_member, "reading the program"):
        view = ProgramView(m.program, m.state_dict, m.constants, name=m.name, member=m.json_member)
    return view, archive
