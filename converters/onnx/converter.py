"""``to_onnx``: program view -> ONNX ModelProto.

This module assembles the model: opens and checks the program, declares the graph's
inputs, runs the shared driver (``converters/aten/lower.py``) with an ONNX ``Ctx``, declares
the outputs (user outputs, then one per mutated buffer/input), prunes what nothing reads,
and writes the model. Values ONNX cannot hold (a dtype with no ONNX type, a script
object) are reported with the unsupported operators in one ``UnsupportedOpsError``.
"""

from __future__ import annotations

import json
import os

import numpy as np

import onnx
from onnx import helper

from ...serde.codec.symbolic import Symbol, to_infix
from ...serde.errors import Pt2UsageError
from ..aten import registry
from ..aten.args import decode
from ..aten.dtypes import ST
from ..aten.failures import missing_lowerings
from ..aten.graph import ProgramView, UserInput, open_program
from ..aten.lower import LoweringState, MutatedOutput, Names, lower_graph, mutations, program_names, state_weights
from ..errors import ConversionError, Unsupported
from ..guard import stage
from ..weight_quant import check_weight_option
from .context import Ctx, onnx_type
from .fold import fold_batch_norms
from .graph_tools import copy_stamp, live_nodes, producers_of
from .lazy_initializers import LazyInitializers
from .weight_only import store_weights
from .writer import EXTERNAL_THRESHOLD, write_model

__all__ = ["to_onnx", "convert_view", "DEFAULT_OPSET", "MIN_OPSET", "MAX_OPSET", "IR_VERSION"]

DEFAULT_OPSET = 23
MIN_OPSET = 18
MAX_OPSET = 24
IR_VERSION = 10  # onnxruntime 1.20+ reads it; onnx 1.23's make_model would write 14

_loaded = False


def _load_lowerings() -> None:
    global _loaded
    if not _loaded:
        from . import (  # noqa: F401  (registration side effects)
            ops_arrange,
            ops_attention,
            ops_bessel,
            ops_control,
            ops_copy,
            ops_create,
            ops_cumulative,
            ops_diagonal,
            ops_distance,
            ops_elementwise,
            ops_gamma,
            ops_grid,
            ops_index,
            ops_integrate,
            ops_linalg,
            ops_loss,
            ops_nn,
            ops_normalization,
            ops_pad,
            ops_pointwise,
            ops_pool,
            ops_quantized,
            ops_reduce,
            ops_regression_loss,
            ops_repeat,
            ops_rnn,
            ops_scatter,
            ops_shape,
            ops_slice,
            ops_sort,
            ops_special,
            ops_sym,
            ops_unpool,
            ops_windows,
        )

        _loaded = True


def to_onnx(src, dst=None, *, model: str = "model", opset: int = DEFAULT_OPSET,
            dim_names: dict[str, str] | None = None, weights: str | None = None,
            external_data: bool | None = None, progress=None, state: str = "outputs"):
    """Convert one model of a .pt2 (path, file, ``Pt2Archive`` or ``Pt2Model``) to ONNX.

    Without ``dst``: returns the ``onnx.ModelProto``, every weight copied into it. With ``dst``:
    writes the model there, each weight streamed from the archive's memory map into the file
    once (``writer.py``), and returns the model as written, its large initializers pointing at
    their bytes in the file(s) (like ``onnx.load(dst, load_external_data=False)``). Weights go to
    ``<dst>.data`` beside it when they pass protobuf's 2 GiB limit or when ``external_data`` is
    True (False: one file, or a ``ConversionError`` past the limit). ``progress(done, total)``
    is called as weight bytes are written.

    ``state``: what the model does with the buffers the program writes (a KV cache). In both
    modes each one's new value is an extra output, ``<fqn>.mutated``. ``"outputs"``: that is
    all, and each call starts from the buffer's saved value. ``"inputs"``: each such buffer is
    also a graph input named after it (its saved value as the input's default), so a decode
    loop feeds each step's ``.mutated`` outputs back in.

    ``dim_names`` renames shape symbols (``{"s17": "batch"}``): .pt2 files do not carry torch
    ``Dim`` names. ``weights``: ``"int8"`` stores the conv/linear weights as per-channel int8
    behind ``DequantizeLinear``, ``"fp16"`` the large float32 initializers as float16 behind
    ``Cast`` (``weight_only.py``; another value is a ``Pt2UsageError``). Raises
    ``UnsupportedOpsError`` listing every operator that has no lowering.

    The program is checked first (``precheck``: the validator's errors, node arities and
    argument kinds, subgraph signatures, sizes, dtypes, names); a program that fails is
    refused with a ``ConversionError`` listing every problem. Whatever a lowering or the
    model's assembly raises leaves as a ``Pt2Error`` naming the member and the node."""
    if not (MIN_OPSET <= opset <= MAX_OPSET):
        raise ConversionError(f"opset {opset} not supported (pt2x emits opsets {MIN_OPSET}..{MAX_OPSET})")
    check_weight_option(weights)
    view, keep = open_program(src, model)
    lazy = LazyInitializers() if dst is not None else None
    try:
        m = convert_view(view, opset=opset, dim_names=dim_names, lazy=lazy, state=state)
        if weights is not None:
            with stage(view.member, f"storing the weights as {weights}"):
                store_weights(m, weights)
        if dst is not None:
            with stage(view.member, "writing the ONNX model", passthrough=(OSError, Pt2UsageError)):  # the path's fault
                save(m, os.fspath(dst), external=external_data, progress=progress)
        return m
    finally:
        del keep


def save(m: onnx.ModelProto, path: str, *, external: bool | None = None,
         external_threshold: int = EXTERNAL_THRESHOLD, progress=None) -> str:
    """Write ``m`` atomically (``serde.atomic_write``: a failed write leaves the old file); when
    its weights pass ``external_threshold`` bytes (default: just under protobuf's 2 GiB limit)
    or ``external`` is True, the initializers of 1 KiB and more go to ``<name>.data`` beside it,
    aligned for memory mapping, both files complete on disk before either replaces the old one.
    Initializers that hold their bytes keep them; lazy ones (``lazy_initializers``) then point at
    the file. Returns the layout written (``writer.write_model``)."""
    return write_model(m, path, external=external, threshold=external_threshold, progress=progress)


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


STATE_MODES = ("outputs", "inputs", "inputs-no-default")


def convert_view(view: ProgramView, *, opset: int = DEFAULT_OPSET, dim_names=None,
                 shapes: dict | None = None, lazy: LazyInitializers | None = None,
                 state: str = "outputs") -> onnx.ModelProto:
    """``view`` as an ONNX model. Any failure leaves as a ``Pt2Error`` naming the member:
    lowerings' with their node (``lower_graph``), the other steps' with the step. ``shapes``,
    when given, receives torch's shape of every main-graph value (ONNX name -> dims, symbols
    as the graph inputs spell them), which ONNX shape inference cannot always recover. ``lazy``:
    where large constants stay as arrays behind skeleton initializers (``lazy_initializers``).
    ``state``: ``to_onnx``'s; ``"inputs-no-default"`` (what TFLite reads) declares the state
    inputs without their saved values."""
    if state not in STATE_MODES:
        from ...serde.errors import Pt2UsageError

        raise Pt2UsageError(f"state={state!r}: choose one of {', '.join(STATE_MODES)}")
    _load_lowerings()
    member = getattr(view, "member", None)
    with stage(member, "converting to ONNX"):
        dim_names = dict(dim_names or {})
        lowering = LoweringState(missing_lowerings(view, "onnx"))
        ctx = Ctx(view, opset, Names(program_names(view)), weights=view.weights, state=lowering, lazy=lazy)
        with stage(member, "declaring the model's inputs"):
            inputs = _declare_inputs(view, ctx, dim_names)
            carried = _declare_state_inputs(view, ctx, dim_names, inputs, state) if state != "outputs" else []
        lower_graph(ctx)
        lowering.problems.raise_if_any()
        with stage(member, "declaring the model's outputs"):
            outputs, out_nodes, mutated = _declare_outputs(view, ctx, dim_names)
            if state != "outputs":
                _check_state_inputs(view, carried, mutated)
        lowering.problems.raise_if_any()
        if shapes is not None:
            shapes.update(_torch_shapes(view, ctx, dim_names))
        with stage(member, "assembling the ONNX model"):
            return _assemble(view, ctx, opset, inputs, outputs, out_nodes, mutated, dim_names)


def _torch_shapes(view: ProgramView, ctx: Ctx, dim_names) -> dict[str, list]:
    """ONNX name -> torch's dims, for each program tensor of the main graph ``ctx`` bound."""
    out = {}
    for prog_name, onnx_name in ctx.env.items():
        if view.has_tensor(prog_name):
            out.setdefault(onnx_name, _dims(view.tensor(prog_name).shape, dim_names))
    return out


_SYM_INPUT_TYPE = {"sym_int": ST.LONG, "sym_float": ST.DOUBLE, "sym_bool": ST.BOOL}


def _input_info(view: ProgramView, u: UserInput, dim_names):
    """The graph input for a user input (None for a constant, which torch specialised);
    ``Unsupported`` when ONNX cannot hold it."""
    if u.kind == "tensor":
        info = view.tensor(u.name)
        return _value_info(u.name, info.dtype, info.shape, dim_names)
    if u.kind in _SYM_INPUT_TYPE:
        return helper.make_tensor_value_info(u.name, onnx_type(_SYM_INPUT_TYPE[u.kind]), [])
    if u.kind == "custom_obj":
        raise Unsupported("script objects have no ONNX form")
    return None


def _declare_inputs(view: ProgramView, ctx: Ctx, dim_names) -> list:
    """Graph inputs (value infos) for the program's user inputs, bound in ``ctx.env``; an
    input ONNX cannot hold is reported and its readers are skipped."""
    inputs = []
    for u in view.user_inputs:
        try:
            vi = _input_info(view, u, dim_names)
        except Unsupported as e:
            ctx.state.problems.add_value(f"{u.kind} input", u.name, e.reason)
            ctx.state.poisoned.add(u.name)
            continue
        if vi is not None:
            ctx.env[u.name] = ctx.names.claim(u.name)
            inputs.append(vi)
    return inputs


def _declare_state_inputs(view: ProgramView, ctx: Ctx, dim_names, inputs: list, state: str) -> list[str]:
    """A graph input for each buffer the program writes (``lower.state_weights``), named after
    its FQN and bound in place of its constant; with ``state="inputs"`` its saved value stays
    as the input's default (an initializer of the same name). Returns the FQNs."""
    carried = []
    for name in state_weights(view):
        w = view.weights[name]
        info = view.tensor(name)
        onnx_name = ctx.names.claim(w.fqn)
        if state == "inputs":
            ctx.input_default(onnx_name, np.asarray(w.array))
        ctx.env[name] = ctx.root.env[name] = onnx_name
        inputs.append(_value_info(onnx_name, info.dtype, info.shape, dim_names))
        carried.append(w.fqn)
    return carried


def _check_state_inputs(view: ProgramView, carried: list[str], mutated: list[MutatedOutput]) -> None:
    """Every weight the program writes must be an input when state is carried: one written
    only through a view of it is found too late to be one."""
    weights = {w.fqn for w in view.weights.values()}
    missed = [m.target for m in mutated if m.target in weights and m.target not in carried]
    if missed:
        raise ConversionError(f"state {', '.join(missed)} is written through a view: carrying it as an input "
                              "needs a direct write (index_copy_, index_put_, copy_ on the buffer itself)")


def _declare_outputs(view: ProgramView, ctx: Ctx, dim_names):
    """(graph outputs, Identity nodes naming them, mutations) for user outputs and
    mutated buffers/inputs; an output ONNX cannot hold is reported."""
    names, problems = ctx.names, ctx.state.problems
    outputs, out_nodes = [], []
    used: set[str] = set(ctx.root.consts) | set(ctx.env[u.name] for u in view.user_inputs if u.name in ctx.env)

    def emit_output(value_name: str, desired: str, st: ST, shape):
        src = ctx.env.get(value_name) or ctx.lookup(value_name)
        try:
            vi_type = onnx_type(st)
        except Unsupported as e:
            problems.add_value("graph output", desired, e.reason)
            return
        name = src
        if src in used or src != desired and desired not in names.taken:
            name = names.claim(desired) if desired != src else names.fresh(desired)
            out_nodes.append(helper.make_node("Identity", [src], [name], name=name))
        used.add(name)
        outputs.append(helper.make_tensor_value_info(name, vi_type, _dims(shape, dim_names)))

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
    mutated = mutations(view, ctx)
    for m in mutated:
        info = view.tensor(m.like)
        try:
            vi_type = onnx_type(info.dtype)
        except Unsupported as e:
            problems.add_value("mutated output", m.target, e.reason)
            continue
        name = names.claim(f"{m.target}.mutated")
        out_nodes.append(helper.make_node("Identity", [m.value], [name], name=name))
        outputs.append(helper.make_tensor_value_info(name, vi_type, _dims(info.shape, dim_names)))
    return outputs, out_nodes, mutated


def _assemble(view: ProgramView, ctx: Ctx, opset: int, inputs, outputs, out_nodes,
              mutated: list[MutatedOutput], dim_names):
    """The ModelProto: pruned nodes and initializers, opset, metadata props."""
    names = [o.name for o in outputs]
    _stamp_output_nodes(ctx.nodes, out_nodes)
    nodes = fold_batch_norms(ctx, ctx.nodes + out_nodes, names)
    nodes, inits = prune(nodes, names, ctx.root.initializers, keep={i.name for i in inputs})
    graph = helper.make_graph(nodes, view.name or "model", inputs, outputs, initializer=inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)],
                          producer_name="pt2x", producer_version=_version(), ir_version=IR_VERSION)
    meta = {
        "pt2x.range_constraints": json.dumps({dim_names.get(k, k): list(v) for k, v in view.ranges.items()}),
        "pt2x.source_torch_version": view.program.torch_version,
        "pt2x.mutated_outputs": json.dumps([f"{mo.target}.mutated" for mo in mutated]),
    }
    if dim_names:
        meta["pt2x.dim_names"] = json.dumps(dim_names)
    helper.set_model_props(m, meta)
    return m


def _stamp_output_nodes(nodes, out_nodes) -> None:
    """The Identity nodes naming graph outputs carry the origin of the value they name (none
    for an output that is a graph input or a constant: no ATen node made it)."""
    producers = producers_of(nodes, {n.input[0] for n in out_nodes})
    for n in out_nodes:
        src = producers.get(n.input[0])
        if src is not None:
            copy_stamp(src, n)


def prune(nodes, outputs, initializers, keep: set[str] = frozenset()):
    """Drop nodes whose outputs nobody reads (lowerings emit SymInt arithmetic that a
    Reshape with 0/-1 made unnecessary) and initializers nothing reads (weights folded);
    ``keep``: initializers that are graph inputs' defaults (a state the program overwrites
    whole is read by no node, and its input still needs its default)."""
    live, used = live_nodes(nodes, outputs)
    return live, [t for t in initializers if t.name in used or t.name in keep]


def _version() -> str:
    from ... import __version__

    return __version__
