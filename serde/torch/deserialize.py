"""Schema program (+ numpy weights) -> ``torch.export.ExportedProgram``: pt2x's loader.

``load_exported_program(f)`` reads the archive with pt2x's torch-free reader
(``pt2x.serde.load``: every safety check, no pickle) and hands the model to
``from_schema``, which builds:
  * the FX graph with fake-tensor ``val`` metadata under a ShapeEnv carrying the
    program's symbols, hints and range constraints (``graph_builder``,
    ``shape_env``; operators resolved by ``ops``);
  * the graph signature and module call graph (this module);
  * parameters/buffers/constants as torch tensors over the archive's memory map (no
    copy where the bytes allow it), with torch's exact sizes, strides and dtypes.

Pickled members (sample inputs, ``use_pickle`` payloads, custom objects) are never
unpickled unless ``allow_pickle=True``, and then only by ``torch.load(weights_only=True)``.
Every failure is a ``Pt2Error`` naming the member and the field path or node.
Imported lazily (imports torch); re-exported by ``pt2x.serde.torch.api``.
"""

from __future__ import annotations

import io
import os
import warnings
from typing import Any

import numpy as np
import torch

from ...schema import definitions as d
from ...schema.walk import OUTPUT_KINDS, input_spec_parts, output_spec_parts
from ..errors import Pt2Error, Pt2FormatError, Pt2UsageError, UnsafeContentError

__all__ = ["from_schema", "load_exported_program", "tensors_from_numpy"]


# --------------------------------------------------------------------------- tensors


def _np_root(a: np.ndarray):
    """The buffer an array ultimately views (through ``as_strided``'s DummyArray too)."""
    b = a
    while not isinstance(b, (memoryview, bytes, bytearray)):
        nb = getattr(b, "base", None)
        if nb is None:
            break
        b = nb
    return b


def _addr(obj) -> tuple[int, int]:
    """(address, nbytes) of a buffer-like object."""
    if isinstance(obj, np.ndarray):
        return obj.__array_interface__["data"][0], obj.nbytes
    arr = np.frombuffer(obj, dtype=np.uint8)
    return arr.__array_interface__["data"][0], arr.nbytes


_NP_TO_TORCH: dict | None = None


def _natural_dtype(a: np.ndarray):
    """The torch dtype whose numpy counterpart (as ``pt2x.serde.load`` maps them) ``a`` has."""
    global _NP_TO_TORCH
    if _NP_TO_TORCH is None:
        from .ops import DTYPES
        from ..archive.tensor_data import numpy_dtype

        table = {}
        for st, td in DTYPES.items():
            try:
                table.setdefault(numpy_dtype(st), td)
            except Pt2Error:
                continue  # no numpy counterpart (complex32)
        _NP_TO_TORCH = table
    return _NP_TO_TORCH.get(a.dtype)


def _torch_dtype(a: np.ndarray, want: torch.dtype | None, name: str, member):
    natural = _natural_dtype(a)
    if want is not None and natural is not None and natural != want:
        raise Pt2FormatError(f"data is {natural} but the graph says {want}", member=member, path=name)
    if want is not None:
        return want
    if natural is None:
        raise Pt2FormatError(f"array dtype {a.dtype} has no torch dtype", member=member, path=name)
    return natural


class _Storages:
    """One torch storage per distinct memory region the arrays view, so aliasing survives."""

    def __init__(self):
        self.flat: dict[tuple, tuple[torch.Tensor, bool]] = {}

    def view(self, a: np.ndarray, dtype: torch.dtype) -> tuple[torch.Tensor | None, bool]:
        """(zero-copy tensor with ``a``'s layout or None when the bytes don't allow it, writable)."""
        isz = a.dtype.itemsize
        if a.size == 0 or isz != dtype.itemsize or any(s < 0 or s % isz for s in a.strides):
            return None, False
        size, stride = a.shape, tuple(s // isz for s in a.strides)
        root = _np_root(a)
        try:
            rptr, rlen = _addr(root)
        except (TypeError, ValueError, BufferError):
            return None, False
        aptr = a.__array_interface__["data"][0]
        if rlen % isz or (aptr - rptr) % isz or aptr < rptr:
            return None, False
        extent = (aptr - rptr) // isz + sum((n - 1) * s for n, s in zip(size, stride)) + 1
        if extent * isz > rlen:
            return None, False
        key = (rptr, rlen, dtype)
        entry = self.flat.get(key)
        if entry is None:
            if isinstance(root, np.ndarray):
                if not root.flags.c_contiguous:
                    return None, False
                writable = bool(root.flags.writeable)
                buf = root.reshape(-1).view(np.uint8)
            elif isinstance(root, memoryview):
                writable, buf = not root.readonly, root
            else:
                writable, buf = False, root
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # "non-writable buffer": callers copy what gets written
                flat = torch.frombuffer(buf, dtype=dtype, count=rlen // isz)
            entry = self.flat[key] = (flat, writable)
        flat, writable = entry
        return flat.as_strided(size, stride, (aptr - rptr) // isz), writable


def _copy(a: np.ndarray, dtype: torch.dtype) -> torch.Tensor:
    isz = a.dtype.itemsize
    stride = tuple(s // isz for s in a.strides) if all(s >= 0 and s % isz == 0 for s in a.strides) else None
    raw = np.ascontiguousarray(a)
    if raw.size:
        src = torch.frombuffer(bytearray(raw.view(np.uint8).tobytes()), dtype=dtype).reshape(a.shape)
    else:
        src = torch.empty(a.shape, dtype=dtype)
    if stride is None:
        return src
    out = torch.empty_strided(a.shape, stride, dtype=dtype)
    out.copy_(src)
    return out


def tensors_from_numpy(
    arrays: dict[str, Any],
    *,
    dtypes: dict[str, torch.dtype] | None = None,
    copy: bool | set[str] = False,
    member: str | None = None,
    storages: _Storages | None = None,
) -> dict[str, torch.Tensor]:
    """numpy arrays (as ``pt2x.serde.load`` gives them) -> torch tensors sharing their memory.

    Layout (shape, strides, dtype, incl. bfloat16/float8 through their bytes) is kept;
    arrays viewing one memory region become tensors on one storage. Names in ``copy``
    (all with ``copy=True``) that view read-only memory get private writable copies, so
    nothing ever writes into a read-only map. Values that are already tensors pass through.
    """
    storages = storages or _Storages()
    out: dict[str, torch.Tensor] = {}
    for name, a in arrays.items():
        if isinstance(a, torch.Tensor) or not isinstance(a, np.ndarray):
            out[name] = a
            continue
        dtype = _torch_dtype(a, (dtypes or {}).get(name), name, member)
        if a.dtype.itemsize != dtype.itemsize:
            raise Pt2FormatError(
                f"array of {a.dtype} ({a.dtype.itemsize} bytes/item) cannot hold {dtype}", member=member, path=name
            )
        must_write = copy is True or (isinstance(copy, set) and name in copy)
        t, writable = storages.view(a, dtype)
        if t is None or (must_write and not writable):
            t = _copy(a, dtype)
        out[name] = t
    return out


def _written_state(gm: torch.fx.GraphModule) -> set[str]:
    """Placeholders of ``gm`` that some in-place op writes (directly or through a view)."""
    written: set[str] = set()
    for node in gm.graph.nodes:
        t = node.target
        if node.op != "call_function" or not isinstance(t, torch._ops.OpOverload) or not t._schema.is_mutable:
            continue
        for i, sa in enumerate(t._schema.arguments):
            if sa.alias_info is None or not sa.alias_info.is_write:
                continue
            v = node.args[i] if i < len(node.args) else node.kwargs.get(sa.name)
            for n in v if isinstance(v, (list, tuple)) else (v,):
                while isinstance(n, torch.fx.Node) and n.op == "call_function":
                    tt = n.target  # walk back through views to what they alias
                    if not (isinstance(tt, torch._ops.OpOverload) and tt._schema.returns and tt._schema.returns[0].alias_info):
                        break
                    n = n.args[0] if n.args else None
                if isinstance(n, torch.fx.Node) and n.op == "placeholder":
                    written.add(n.name)
    return written


# ------------------------------------------------------------------------- signature


def _arg_spec(a: d.Argument, graph_builder, path: str):
    from torch.export import graph_signature as gs

    t, v = a.type, a.value
    if t == "as_tensor":
        return gs.TensorArgument(name=v.name)
    if t == "as_sym_int":
        return gs.SymIntArgument(name=v.value) if v.type == "as_name" else gs.ConstantArgument(name="", value=v.value)
    if t == "as_sym_float":
        return gs.SymFloatArgument(name=v.value) if v.type == "as_name" else gs.ConstantArgument(name="", value=v.value)
    if t == "as_sym_bool":
        return gs.SymBoolArgument(name=v.value) if v.type == "as_name" else gs.ConstantArgument(name="", value=v.value)
    if t == "as_custom_obj":
        return gs.CustomObjArgument(name=v.name, class_fqn=v.class_fqn)
    if t == "as_token":
        return gs.TokenArgument(name=v.name)
    if t in ("as_none", "as_int", "as_float", "as_bool", "as_string", "as_ints", "as_floats", "as_bools", "as_strings"):
        val = None if t == "as_none" else (list(v) if isinstance(v, list) else v)
        return gs.ConstantArgument(name="", value=val)
    raise Pt2FormatError(f"argument of kind {t} cannot appear in a signature", member=graph_builder.member, path=path)


def _constant_value(c: d.ConstantValue):
    return None if c.type == "as_none" else c.value


def _signature(sig: d.GraphSignature, gb, path: str):
    from torch.export import graph_signature as gs

    IK, OK = gs.InputKind, gs.OutputKind
    ins = []
    for i, s in enumerate(sig.input_specs):
        p = f"{path}.input_specs[{i}]"
        t, v = s.type, s.value
        if t == "user_input":
            ins.append(gs.InputSpec(IK.USER_INPUT, _arg_spec(v.arg, gb, p + ".arg"), None))
        elif t == "parameter":
            ins.append(gs.InputSpec(IK.PARAMETER, gs.TensorArgument(v.arg.name), v.parameter_name))
        elif t == "buffer":
            ins.append(gs.InputSpec(IK.BUFFER, gs.TensorArgument(v.arg.name), v.buffer_name, persistent=v.persistent))
        elif t == "tensor_constant":
            ins.append(gs.InputSpec(IK.CONSTANT_TENSOR, gs.TensorArgument(v.arg.name), v.tensor_constant_name))
        elif t == "custom_obj":
            ins.append(gs.InputSpec(IK.CUSTOM_OBJ, gs.CustomObjArgument(v.arg.name, v.arg.class_fqn), v.custom_obj_name))
        elif t == "token":
            ins.append(gs.InputSpec(IK.TOKEN, gs.TokenArgument(v.arg.name), None))
        elif t == "constant_input":
            ins.append(gs.InputSpec(IK.USER_INPUT, gs.ConstantArgument(v.name, _constant_value(v.value)), None))
        else:
            raise Pt2FormatError(f"input spec kind {t} is not supported", member=gb.member, path=p)
    outs = []
    for i, s in enumerate(sig.output_specs):
        p = f"{path}.output_specs[{i}]"
        t, v = s.type, s.value
        if t == "user_output":
            outs.append(gs.OutputSpec(OK.USER_OUTPUT, _arg_spec(v.arg, gb, p + ".arg"), None))
        elif t == "token":
            outs.append(gs.OutputSpec(OK.TOKEN, gs.TokenArgument(v.arg.name), None))
        elif t in OUTPUT_KINDS:  # every other kind binds a tensor (and names its target, if any)
            kind, field = OUTPUT_KINDS[t]
            outs.append(gs.OutputSpec(getattr(OK, kind), gs.TensorArgument(v.arg.name), getattr(v, field) if field else None))
        else:
            raise Pt2FormatError(f"output spec kind {t} is not supported", member=gb.member, path=p)
    return gs.ExportGraphSignature(input_specs=ins, output_specs=outs)


def _treespec(s: str, member, path):
    from torch.utils._pytree import treespec_loads

    try:
        return treespec_loads(s)
    except Exception as e:  # torch raises NotImplementedError/KeyError/ValueError/json errors
        raise Pt2FormatError(f"pytree spec: {type(e).__name__}: {e}", member=member, path=path) from None


def _module_call_graph(entries: list[d.ModuleCallEntry], gb, path: str):
    from torch.export.exported_program import ModuleCallEntry, ModuleCallSignature

    out = []
    for i, e in enumerate(entries):
        p = f"{path}[{i}]"
        sig = None
        if e.signature is not None:
            s = e.signature
            sig = ModuleCallSignature(
                inputs=[_arg_spec(a, gb, f"{p}.signature.inputs[{j}]") for j, a in enumerate(s.inputs)],
                outputs=[_arg_spec(a, gb, f"{p}.signature.outputs[{j}]") for j, a in enumerate(s.outputs)],
                in_spec=_treespec(s.in_spec, gb.member, f"{p}.signature.in_spec"),
                out_spec=_treespec(s.out_spec, gb.member, f"{p}.signature.out_spec"),
                forward_arg_names=s.forward_arg_names or None,
            )
        out.append(ModuleCallEntry(fqn=e.fqn, signature=sig))
    return out


# -------------------------------------------------------------------------- program


def _release(program: d.ExportedProgram) -> str:
    v = program.schema_version
    return f"torch {program.torch_version} (schema {v.major}.{v.minor})"


def from_schema(
    program: d.ExportedProgram,
    state_dict: dict[str, Any],
    constants: dict[str, Any],
    *,
    example_inputs=None,
    member: str | None = None,
    copy: bool = False,
    _not_loaded: dict[str, tuple[str, str]] | None = None,
) -> "torch.export.ExportedProgram":
    """Build a ``torch.export.ExportedProgram`` from a schema program and its weights.

    ``state_dict`` / ``constants`` map FQNs to numpy arrays (as ``pt2x.serde.load`` gives
    them) or torch tensors. Parameters (per the signature) become ``nn.Parameter`` with
    the graph's ``requires_grad``. Arrays are shared, not copied, except buffers and
    parameters the program mutates when their memory is read-only (``copy=True``
    copies everything into writable memory).
    """
    try:
        return _from_schema(program, state_dict, constants, example_inputs, member, copy, _not_loaded or {})
    except Pt2FormatError as e:
        raise _with_release(e, program) from None


def _from_schema(program, state_dict, constants, example_inputs, member, copy, not_loaded):
    """The phases, in order: which state the graph needs; that the archive has it; the
    graph module; the tensors; that they fit the graph; metadata and verifiers; assembly."""
    gm_s = program.graph_module
    needed, params, mutated = _state_needed(gm_s.signature)
    _check_state_present(needed, state_dict, constants, not_loaded, member)
    sym = _symbolic_context(program, member)
    gm, gb, signature, mcg = _graph_module(gm_s, sym, constants, member)
    # State the program writes (mutation outputs, in-place ops on its placeholders) must
    # not live in read-only memory.
    by_placeholder = {ph: fqn for fqn, (_, ph) in needed.items()}
    mutated |= {by_placeholder[n] for n in _written_state(gm) if n in by_placeholder}
    sd, consts = _state_tensors(state_dict, constants, needed, params, gm_s.graph.tensor_values,
                                copy=True if copy else mutated, member=member)
    _check_state_fits_graph(needed, sd, consts, gb.st, member)
    gm.meta = _graph_module_meta(gm_s, member)
    verifiers = _verifiers(program, member)
    try:
        ep = _exported_program(gm, signature, sd, consts, sym, mcg, example_inputs, verifiers)
    except Pt2Error:
        raise
    except Exception as e:  # torch's own consistency checks (signature vs graph vs state)
        raise Pt2FormatError(
            f"torch rejected the program ({type(e).__name__}: {str(e)[:500]})",
            member=member,
        ) from None
    ep._guards_code = list(program.guards_code)
    return ep


_STATE_KINDS = {"parameter": "parameter", "buffer": "buffer", "tensor_constant": "tensor constant",
                "custom_obj": "custom object"}
"""Input spec kinds that bind program state, and how messages name each."""


def _state_needed(sig: d.GraphSignature):
    """(fqn -> (kind, placeholder) for every state input, fqn -> placeholder for parameters,
    fqns the signature says the program mutates)."""
    needed: dict[str, tuple[str, str]] = {}
    for spec in sig.input_specs:
        kind, placeholder, fqn = input_spec_parts(spec)
        if kind in _STATE_KINDS:
            needed[fqn] = (_STATE_KINDS[kind], placeholder)
    params = {fqn: ph for fqn, (k, ph) in needed.items() if k == "parameter"}
    mutated = {output_spec_parts(s).target for s in sig.output_specs
               if s.type in ("buffer_mutation", "parameter_mutation")}
    return needed, params, mutated


def _check_state_present(needed, state_dict, constants, not_loaded, member) -> None:
    """Every state input has data (in either dict); a pickled payload not loaded is named as such."""
    for fqn, (kind, _) in needed.items():
        where = state_dict if kind in ("parameter", "buffer") else constants
        if fqn not in where:
            alt = constants if where is state_dict else state_dict
            if fqn in alt:
                continue
            if fqn in not_loaded:
                nl_member, nl_kind = not_loaded[fqn]
                raise UnsafeContentError(
                    f"{kind} {fqn!r} is a pickled payload ({nl_kind}); it is not loaded without "
                    f"allow_pickle=True (then only with torch.load(weights_only=True))",
                    member=nl_member,
                )
            raise Pt2FormatError(f"{kind} {fqn!r} has no data in the archive", member=member, path="graph_module.signature")


def _symbolic_context(program: d.ExportedProgram, member):
    from .shape_env import SymbolicContext

    try:
        return SymbolicContext(program.range_constraints, member=member)
    except Exception as e:
        raise Pt2FormatError(f"range constraints: {type(e).__name__}: {e}", member=member, path="range_constraints") from None


def _graph_module(gm_s: d.GraphModule, sym, constants, member):
    """(torch GraphModule, its GraphBuilder, signature, module call graph) from the schema graph module."""
    from torch.export.exported_program import _create_graph_module_for_export

    from .graph_builder import GraphBuilder

    gb = GraphBuilder(sym, gm_s.signature, constants, member=member)
    try:
        graph = gb.build_graph(gm_s.graph, "graph_module.graph")
        signature = _signature(gm_s.signature, gb, "graph_module.signature")
        mcg = _module_call_graph(gm_s.module_call_graph, gb, "graph_module.module_call_graph")
        gm = _create_graph_module_for_export(gb.st.module, graph)
    except Pt2Error:
        raise
    except Exception as e:  # torch refusing the signature / call graph / graph module
        raise Pt2FormatError(f"torch rejected it: {type(e).__name__}: {str(e)[:500]}", member=member, path="graph_module") from None
    return gm, gb, signature, mcg


def _state_tensors(state_dict, constants, needed, params, tensor_values, *, copy, member):
    """(state_dict, constants) as torch tensors in the dtypes the graph's placeholders declare;
    parameters as ``nn.Parameter`` with the graph's ``requires_grad``; ``copy`` (True, or
    the fqns to copy) into writable memory."""
    from .ops import DTYPES

    def dtypes_for(names):
        out = {}
        for fqn in names:
            ph = needed.get(fqn, (None, None))[1]
            tm = tensor_values.get(ph) if ph else None
            if tm is not None and tm.dtype in DTYPES:
                out[fqn] = DTYPES[tm.dtype]
        return out

    storages = _Storages()
    try:
        sd = tensors_from_numpy(state_dict, dtypes=dtypes_for(state_dict), copy=copy, member=member, storages=storages)
        consts = tensors_from_numpy(constants, dtypes=dtypes_for(constants), copy=copy, member=member, storages=storages)
        for fqn, ph in params.items():
            t = sd.get(fqn)
            if t is None or isinstance(t, torch.nn.Parameter):
                continue
            tm = tensor_values.get(ph)
            rg = bool(tm.requires_grad) if tm is not None else True
            sd[fqn] = torch.nn.Parameter(t, requires_grad=rg and (t.dtype.is_floating_point or t.dtype.is_complex))
    except Pt2Error:
        raise
    except Exception as e:
        raise Pt2FormatError(f"weights: {type(e).__name__}: {str(e)[:300]}", member=member) from None
    return sd, consts


def _check_state_fits_graph(needed, sd, consts, st, member) -> None:
    """The data must fit what the graph was traced with: dtype, and shape where it is static."""
    for fqn, (kind, ph) in needed.items():
        t = sd.get(fqn, consts.get(fqn))
        node = st.nodes.get(ph)
        val = node.meta.get("val") if node is not None else None
        if not isinstance(t, torch.Tensor) or not isinstance(val, torch.Tensor):
            continue
        if t.dtype != val.dtype or (
            all(isinstance(x, int) for x in val.shape) and tuple(t.shape) != tuple(val.shape)
        ):
            raise Pt2FormatError(
                f"{kind} {fqn!r} is {t.dtype} {list(t.shape)} but the graph's {ph!r} is {val.dtype} {list(val.shape)}",
                member=member,
                path="graph_module.signature",
            )


def _graph_module_meta(gm_s: d.GraphModule, member) -> dict[str, Any]:
    meta: dict[str, Any] = {}
    if custom := gm_s.metadata.get("custom"):
        from ..codec.json_codec import parse_json

        meta["custom"] = parse_json(custom, member=member)
    meta["treespec_namedtuple_fields"] = {k: v.field_names for k, v in gm_s.treespec_namedtuple_fields.items()}
    return meta


def _verifiers(program: d.ExportedProgram, member) -> list:
    from torch._export.verifier import load_verifier

    verifiers = []
    for i, v in enumerate(program.verifiers):
        try:
            verifiers.append(load_verifier(v))
        except KeyError:
            raise Pt2FormatError(
                f"verifier/dialect {v!r} is not known to this torch ({torch.__version__})",
                member=member,
                path=f"verifiers[{i}]",
            ) from None
    return verifiers


def _exported_program(gm, signature, sd, consts, sym, mcg, example_inputs, verifiers):
    from torch.export.exported_program import ExportedProgram

    return ExportedProgram(
        root=gm,
        graph=gm.graph,
        graph_signature=signature,
        state_dict=sd,
        range_constraints=sym.range_constraints(),
        module_call_graph=mcg,
        example_inputs=example_inputs,
        constants=consts,
        verifiers=verifiers,
    )


def _with_release(e: Pt2Error, program: d.ExportedProgram) -> Pt2Error:
    """Add which release wrote the file to an error, once."""
    if not isinstance(e, Pt2FormatError) or "written by" in e.reason:
        return e
    msg = f"{e.reason} [file written by {_release(program)}]"
    new = type(e).__new__(type(e))
    Pt2FormatError.__init__(new, msg, member=e.member, path=e.path)
    return new


def _torch_load_safe(data: bytes, what: str, member: str):
    try:
        return torch.load(io.BytesIO(data), weights_only=True, map_location="cpu")
    except Exception as e:
        text = str(e)
        # torch's message advises weights_only=False; keep only what it refused.
        why = next((ln.strip() for ln in text.splitlines() if "WeightsUnpickler error" in ln), text.splitlines()[0] if text else "")
        raise UnsafeContentError(
            f"{what}: torch.load(weights_only=True) refused it ({type(e).__name__}: {why[:300]}); pt2x never "
            f"unpickles with weights_only=False (use torch.export.load only for files you trust)",
            member=member,
        ) from None


def _private_buffer(f):
    """The archive's bytes in memory the returned tensors may write to without touching the file.

    A path (or a real file) is memory-mapped copy-on-write: pages are shared with the file
    until written, writes stay private to this process. Other sources are copied once into
    a ``bytearray``.
    """
    import mmap
    import os

    if isinstance(f, (str, os.PathLike)):
        path = os.fspath(f)
        try:
            with open(path, "rb") as fh:
                if os.fstat(fh.fileno()).st_size == 0:
                    return f  # let the reader report it, with the file name
                return memoryview(mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_COPY))
        except OSError:
            return f  # the reader names the problem
    if isinstance(f, (bytes, bytearray, memoryview)):
        return bytearray(f)
    fileno = getattr(f, "fileno", None)
    if fileno is not None:
        try:
            fd = fileno()
            if os.fstat(fd).st_size > 0 and f.seek(0, os.SEEK_CUR) == 0:
                return memoryview(mmap.mmap(fd, 0, access=mmap.ACCESS_COPY))
        except (OSError, ValueError, io.UnsupportedOperation):
            pass
    read = getattr(f, "read", None)
    if read is None:
        return f
    return bytearray(read())


def load_exported_program(
    f,
    *,
    model: str = "model",
    allow_pickle: bool = False,
    copy: bool = False,
) -> "torch.export.ExportedProgram":
    """Load one model of a .pt2 file as a ``torch.export.ExportedProgram``, safely.

    ``f``: path, binary file or bytes. Reads with ``pt2x.serde.load`` (no pickle, all
    checks). Pickled members are loaded only with ``allow_pickle=True`` and only via
    ``torch.load(weights_only=True)``: sample inputs become ``example_inputs``, pickled
    tensors join the state. Without it, a program that needs one raises
    ``UnsafeContentError`` naming the member. Weights are zero-copy views of a private
    copy-on-write memory map of the file (writable; writes never reach the file; the
    map lives as long as the tensors); ``copy=True`` copies them into ordinary memory.
    """
    from ..archive.loader import load as pt2_load

    buf = _private_buffer(f)
    try:
        archive = pt2_load(buf)
    except Pt2Error:
        if buf is f or isinstance(f, (bytes, bytearray, memoryview)):
            raise
        if hasattr(f, "seek"):
            f.seek(0)
        pt2_load(f)  # the same failure, reported under the file's own name
        raise
    try:
        m = archive.model(model)
    except Pt2UsageError as e:
        label = os.path.basename(os.fspath(f)) if isinstance(f, (str, os.PathLike)) else getattr(f, "name", "<bytes>")
        raise Pt2UsageError(str(e).replace("<bytes>", str(label))) from None
    sd, consts = dict(m.state_dict), dict(m.constants)
    not_loaded: dict[str, tuple[str, str]] = {}
    example_inputs = None
    for nl in m.pickled:
        if nl.kind == "sample_inputs":
            if allow_pickle:
                example_inputs = _torch_load_safe(archive.zip.read(nl.member), "sample inputs", nl.member)
            continue
        if nl.fqn is None:
            continue
        if not allow_pickle:
            not_loaded[nl.fqn] = (nl.member, nl.kind)
            continue
        val = _torch_load_safe(archive.zip.read(nl.member), f"{nl.kind} {nl.fqn!r}", nl.member)
        in_weights = m.weights_config is not None and nl.fqn in m.weights_config.config
        (sd if in_weights else consts)[nl.fqn] = val
    ep = from_schema(
        m.program, sd, consts, example_inputs=example_inputs, member=m.json_member, copy=copy, _not_loaded=not_loaded
    )
    return ep  # the tensors hold the memory map's buffer alive
