"""``to_onnx``: program view -> ONNX ModelProto, node by node through the registry."""

from __future__ import annotations

import json
import os

import onnx
from onnx import helper

from ...serde.codec.symbolic import Symbol, to_infix
from .. import registry
from ..args import decode
from ..dtypes import ST
from ..errors import ConversionError, NotConverted, Unsupported
from ..graph import GraphView, ProgramView, open_program, output_names
from ..guard import lowering_failure, stage
from ..report import Problems, missing_lowerings
from .context import Ctx, Names, onnx_type

__all__ = ["to_onnx", "convert_view", "DEFAULT_OPSET", "MIN_OPSET", "MAX_OPSET", "IR_VERSION"]

DEFAULT_OPSET = 23
MIN_OPSET = 18
MAX_OPSET = 24
IR_VERSION = 10  # onnxruntime 1.20+ reads it; onnx 1.23's make_model would write 14
_EXTERNAL_DATA_THRESHOLD = 2**31 - 2**20  # protobuf's 2 GB limit, with room for the graph

_loaded = False


def _load_lowerings() -> None:
    global _loaded
    if not _loaded:
        from . import (  # noqa: F401  (registration side effects)
            ops_attention,
            ops_control,
            ops_create,
            ops_elementwise,
            ops_index,
            ops_nn,
            ops_pool,
            ops_reduce,
            ops_rnn,
            ops_shape,
            ops_sym,
        )

        _loaded = True


def to_onnx(src, dst=None, *, model: str = "model", opset: int = DEFAULT_OPSET,
            dim_names: dict[str, str] | None = None):
    """Convert one model of a .pt2 (path, file, ``Pt2Archive`` or ``Pt2Model``) to ONNX.

    Returns the ``onnx.ModelProto``; writes it to ``dst`` when given (weights past 2 GB go to
    ``<dst>.data`` beside it). ``dim_names`` renames shape symbols (``{"s17": "batch"}``):
    .pt2 files do not carry torch ``Dim`` names. Raises ``UnsupportedOpsError`` listing every
    operator that has no lowering.

    The program is checked first (``precheck``: the validator's errors, node arities and
    argument kinds, subgraph signatures, sizes, dtypes, names); a program that fails is
    refused with a ``ConversionError`` listing every problem. Whatever a lowering or the
    model's assembly raises leaves as a ``Pt2Error`` naming the member and the node."""
    if not (MIN_OPSET <= opset <= MAX_OPSET):
        raise ConversionError(f"opset {opset} not supported (pt2x emits opsets {MIN_OPSET}..{MAX_OPSET})")
    view, keep = open_program(src, model)
    try:
        m = convert_view(view, opset=opset, dim_names=dim_names)
        if dst is not None:
            with stage(view.member, "writing the ONNX model", passthrough=(OSError,)):
                save(m, os.fspath(dst))
        return m
    finally:
        del keep


def save(m: onnx.ModelProto, path: str, *, external_threshold: int = _EXTERNAL_DATA_THRESHOLD) -> None:
    """Write ``m``; when its weights pass ``external_threshold`` bytes (default: just under
    protobuf's 2 GB limit) they go to ``<name>.data`` beside it."""
    size = sum(len(t.raw_data) for t in m.graph.initializer)
    if size > external_threshold:
        onnx.save_model(m, path, save_as_external_data=True, all_tensors_to_one_file=True,
                        location=os.path.basename(path) + ".data", size_threshold=1024)
        # save_model moved the weights out of ``m``; the caller still holds it: read them back
        from onnx.external_data_helper import load_external_data_for_model

        load_external_data_for_model(m, os.path.dirname(os.path.abspath(path)))
    else:
        with open(path, "wb") as f:
            f.write(m.SerializeToString())


def _dims(shape, dim_names):
    out = []
    for s in shape:
        if isinstance(s, int):
            out.append(s)
        elif isinstance(s, Symbol):
            out.append(dim_names.get(s.name, s.name))
        else:
            out.append(to_infix(s))
    return out


def _value_info(name, st, shape, dim_names):
    return helper.make_tensor_value_info(name, onnx_type(st), _dims(shape, dim_names))


def convert_view(view: ProgramView, *, opset: int = DEFAULT_OPSET, dim_names=None) -> onnx.ModelProto:
    """``view`` as an ONNX model. Any failure leaves as a ``Pt2Error`` naming the member:
    lowerings' with their node (``lower_graph``), the other steps' with the step."""
    _load_lowerings()
    member = getattr(view, "member", None)
    with stage(member, "converting to ONNX"):
        dim_names = dict(dim_names or {})
        problems = missing_lowerings(view, "onnx")
        reserved = {n for g in _all_graphs(view) for n in g.tensors} | set(view.sym_ints)
        names = Names(reserved)
        ctx = Ctx(view, opset, names, weights=view.weights, problems=problems)
        with stage(member, "declaring the model's inputs"):
            inputs = _declare_inputs(view, ctx, names, problems, dim_names)
        lower_graph(ctx)
        problems.raise_if_any()
        with stage(member, "declaring the model's outputs"):
            outputs, out_nodes, mutations = _declare_outputs(view, ctx, names, dim_names)
        with stage(member, "assembling the ONNX model"):
            return _assemble(view, ctx, opset, inputs, outputs, out_nodes, mutations, dim_names)


def _declare_inputs(view: ProgramView, ctx: Ctx, names: Names, problems: Problems, dim_names) -> list:
    """Graph inputs (value infos) for the program's user inputs, bound in ``ctx.env``."""
    inputs = []
    for u in view.user_inputs:
        if u.kind == "tensor":
            info = view.tensor(u.name)
            ctx.env[u.name] = names.claim(u.name)
            inputs.append(_value_info(u.name, info.dtype, info.shape, dim_names))
        elif u.kind in ("sym_int", "sym_float", "sym_bool"):
            st = {"sym_int": ST.LONG, "sym_float": ST.DOUBLE, "sym_bool": ST.BOOL}[u.kind]
            ctx.env[u.name] = names.claim(u.name)
            inputs.append(helper.make_tensor_value_info(u.name, onnx_type(st), []))
        elif u.kind == "custom_obj":
            problems.add(_fake_node("custom_obj input", u.name), "script objects have no ONNX form")
    return inputs


def _declare_outputs(view: ProgramView, ctx: Ctx, names: Names, dim_names):
    """(graph outputs, Identity nodes naming them, mutations) for user outputs and
    mutated buffers/inputs."""
    outputs, out_nodes = [], []
    used: set[str] = set(ctx.root.consts) | set(ctx.env[u.name] for u in view.user_inputs if u.name in ctx.env)

    def emit_output(value_name: str, desired: str, st: ST, shape):
        nonlocal used
        src = ctx.env.get(value_name) or ctx.lookup(value_name)
        name = src
        if src in used or src != desired and desired not in names.taken:
            name = names.claim(desired) if desired != src else names.fresh(desired)
            out_nodes.append(helper.make_node("Identity", [src], [name], name=name))
        used.add(name)
        outputs.append(_value_info(name, st, shape, dim_names))

    for i, a in enumerate(view.user_outputs):
        if a.type == "as_tensor":
            info = view.tensor(a.value.name)
            emit_output(a.value.name, a.value.name, info.dtype, info.shape)
        elif a.type in ("as_sym_int", "as_sym_bool", "as_sym_float") and a.value.type == "as_name":
            st = {"as_sym_int": ST.LONG, "as_sym_bool": ST.BOOL, "as_sym_float": ST.DOUBLE}[a.type]
            emit_output(a.value.value, a.value.value, st, [])
        elif a.type in ("as_int", "as_float", "as_bool") or (a.type.startswith("as_sym_") and a.value.type != "as_name"):
            v = decode(a)
            st = ST.BOOL if isinstance(v, bool) else ST.LONG if isinstance(v, int) else ST.DOUBLE
            c = ctx.const(v, st)
            name = names.fresh(f"output_{i}")
            out_nodes.append(helper.make_node("Identity", [c], [name], name=name))
            outputs.append(helper.make_tensor_value_info(name, onnx_type(st), []))
        else:
            raise ConversionError(f"user output {i} is {a.type}: ONNX outputs are tensors only")
    mutations = _mutations(view, ctx)
    for target, value_name, like in mutations:
        info = view.tensor(like)
        src = ctx.env.get(value_name, value_name)
        name = names.claim(f"{target}.mutated")
        out_nodes.append(helper.make_node("Identity", [src], [name], name=name))
        outputs.append(_value_info(name, info.dtype, info.shape, dim_names))
    return outputs, out_nodes, mutations


def _assemble(view: ProgramView, ctx: Ctx, opset: int, inputs, outputs, out_nodes, mutations, dim_names):
    """The ModelProto: pruned nodes and initializers, opset, metadata props."""
    nodes, inits = prune(ctx.nodes + out_nodes, [o.name for o in outputs], ctx.root.initializers)
    graph = helper.make_graph(nodes, view.name or "model", inputs, outputs, initializer=inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)],
                          producer_name="pt2x", producer_version=_version(), ir_version=IR_VERSION)
    meta = {
        "pt2x.range_constraints": json.dumps({dim_names.get(k, k): list(v) for k, v in view.ranges.items()}),
        "pt2x.source_torch_version": view.program.torch_version,
        "pt2x.mutated_outputs": json.dumps([f"{t}.mutated" for t, _, _ in mutations]),
    }
    if dim_names:
        meta["pt2x.dim_names"] = json.dumps(dim_names)
    helper.set_model_props(m, meta)
    return m


def _subgraph_inputs(node, acc: set) -> None:
    for attr in node.attribute:
        for g in ([attr.g] if attr.HasField("g") else []) + list(attr.graphs):
            for n in g.node:
                acc.update(n.input)
                _subgraph_inputs(n, acc)


def prune(nodes, outputs, initializers):
    """Drop nodes whose outputs nobody reads (lowerings emit SymInt arithmetic that a
    Reshape with 0/-1 made unnecessary) and initializers nothing reads (weights folded)."""
    used = set(outputs)
    keep = []
    for n in reversed(nodes):
        if any(o in used for o in n.output):
            keep.append(n)
            used.update(n.input)
            _subgraph_inputs(n, used)
    keep.reverse()
    return keep, [t for t in initializers if t.name in used]


def _version() -> str:
    from ... import __version__

    return __version__


def _all_graphs(view: GraphView):
    yield view
    for n in view.nodes:
        for na in n.inputs:
            if na.arg.type == "as_graph":
                yield from _all_graphs(view.subgraph(na.arg.value.graph))


def _fake_node(target, name):
    from ...schema import definitions as d

    return d.Node(target=target, inputs=[], outputs=[], metadata={}, name=name)


def _mutations(view: ProgramView, ctx: Ctx) -> list[tuple[str, str, str]]:
    """(target, value, value with its metadata) for each mutated buffer/input: from the
    signature (functional IR) or from in-place ops on placeholders (training IR keeps
    ``add_`` and lists no mutation)."""
    out = [(m.target, m.value, m.value) for m in view.mutations]
    seen = {t for t, _, _ in out}
    for placeholder, value in ctx.root.mutated.items():
        w = view.weights.get(placeholder)
        target = w.fqn if w is not None else placeholder
        if target not in seen and (w is None or w.kind == "buffer"):
            ctx.env[f"__mut_{placeholder}"] = value
            out.append((target, f"__mut_{placeholder}", placeholder))
            seen.add(target)
    return out


def lower_graph(ctx: Ctx) -> None:
    """Lower every node of ``ctx.view`` into ``ctx.nodes``; record problems, poison outputs."""
    problems: Problems = ctx.root.problems
    poisoned: set[str] = ctx.root.poisoned
    from ..graph import input_names

    for node in ctx.view.nodes:
        outs = output_names(node)
        fn = registry.get("onnx", node.target)
        if fn is None or any(n in poisoned for n in input_names(node)):
            poisoned.update(outs)
            continue
        start = len(ctx.nodes)
        ctx.node = node
        ctx.root.emitted = 0
        try:
            res = fn(ctx, node)
            _bind(ctx, node, res, start)
            if _is_inplace(node):
                _rebind_mutated(ctx, node)
        except Unsupported as e:
            if not isinstance(e, NotConverted):
                problems.add(node, e.reason)
            del ctx.nodes[start:]
            poisoned.update(outs)
            continue
        except Exception as e:  # not KeyboardInterrupt/SystemExit; MemoryError and RecursionError are
            raise lowering_failure(e, ctx.view, node, fn) from e
        finally:
            ctx.node = None


def _is_inplace(node) -> bool:
    parts = registry.canonical(node.target).split(".")
    return len(parts) == 3 and parts[0] == "aten" and parts[1].endswith("_") and not parts[1].startswith("_")


def _rebind_mutated(ctx: Ctx, node) -> None:
    """After ``x.add_(y)`` later readers of ``x`` see the new value; placeholders that are
    mutated this way become extra outputs (see ``_mutations``)."""
    first = node.inputs[0].arg if node.inputs else None
    outs = output_names(node)
    if first is None or first.type != "as_tensor" or not outs or outs[0] not in ctx.env:
        return
    target, new = first.value.name, ctx.env[outs[0]]
    ctx.env[target] = new
    view = ctx.view
    if ctx.root is ctx and (target in view.weights or any(u.name == target for u in view.user_inputs)):
        ctx.mutated[target] = new


def _bind(ctx: Ctx, node, res, start: int) -> None:
    if res is None:
        return
    flat = _flat_outputs(node)
    if isinstance(res, str):
        res = [res]
    made = {o for n in ctx.nodes[start:] for o in n.output}
    for prog, r in zip(flat, res):
        if prog is None or r is None:
            continue
        if r in made and r not in ctx.root.consts:
            new = ctx.names.claim(prog)
            _rename(ctx.nodes, start, r, new)
            made.discard(r)
            r = new
        ctx.env[prog] = r


def _flat_outputs(node) -> list:
    out = []
    for a in node.outputs:
        if a.type == "as_tensors":
            out.extend(t.name for t in a.value)
        elif a.type == "as_optional_tensors":
            out.extend(t.value.name if t.type == "as_tensor" else None for t in a.value)
        elif a.type in ("as_tensor",):
            out.append(a.value.name)
        elif a.type in ("as_sym_int", "as_sym_bool", "as_sym_float"):
            out.append(a.value.value if a.value.type == "as_name" else None)
        elif a.type == "as_none":
            out.append(None)
        else:
            out.append(getattr(a.value, "name", None))
    return out


def _rename(nodes, start: int, old: str, new: str) -> None:
    for n in nodes[start:]:
        for i, o in enumerate(n.output):
            if o == old:
                n.output[i] = new
                if n.name == old:
                    n.name = new
        for i, x in enumerate(n.input):
            if x == old:
                n.input[i] = new
