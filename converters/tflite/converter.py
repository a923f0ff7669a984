"""``to_tflite``: a .pt2 program or an ONNX model -> a TFLite (LiteRT) flatbuffer.

Phases: ``prepare`` (the ONNX model checked, then the ONNX half of ``pipeline.py``) -> the
graph's inputs, each ONNX node through its mapper (``mappers.MAPPERS``), the outputs -> the
subgraph half of ``pipeline.py`` -> ``writer.write``. Every ONNX node TFLite cannot take is reported at once
in one ``UnsupportedOpsError`` naming the ONNX node and, for a .pt2, the ATen node it came from.
An ONNX model from outside pt2x is checked first (``onnx_check.py``); anything that still
fails in a phase leaves as a ``ConversionError`` naming the phase (``guard.stage``).
"""

from __future__ import annotations

import json

import onnx
from onnx import TensorProto

from ...serde.errors import Pt2Error, Pt2UsageError
from ..errors import ConversionError, Unsupported
from ..guard import stage
from ..onnx.graph_tools import origin_of
from ..report import Problems
from ..weight_quant import check_weight_option
from .core.emit import Emitter, compute_type
from .core.model import Program, Subgraph, Tensor, TensorType
from .onnx_in.fuse_gelu import fuse_gelu
from .onnx_in.normalise import TARGET_OPSET
from .ops import MAPPERS
from .pipeline import run_subgraph_passes
from .prepare import load_onnx, prepare
from .quant.qdq_pass import install as install_qdq
from .quant.weight_storage import onnx_weights, store_weights
from .writer import write, write_file

__all__ = ["to_tflite", "MIN_RUNTIME"]

MIN_RUNTIME = "ai-edge-litert 2.3.0"  # the runtime pt2x's parity tests run (recorded in the metadata)

# graph I/O keeps these ONNX types (CAST at the edge); bfloat16 I/O is float32 (numpy has none)
_IO_TYPE = {TensorProto.INT64: TensorType.INT64, TensorProto.FLOAT16: TensorType.FLOAT16,
            TensorProto.DOUBLE: TensorType.FLOAT64}


def to_tflite(src, dst=None, *, model: str = "model", nhwc_io: bool = False, weights: str | None = None,
              progress=None, state: str = "outputs") -> bytes:
    """Convert ``src`` to a TFLite file; returns its bytes and writes ``dst`` when given.

    ``src``: a .pt2 (path, binary file, ``Pt2Archive`` or ``Pt2Model``; ``model`` picks the
    program in a multi-model archive) or ONNX (an ``.onnx`` path or ``onnx.ModelProto``).
    ``nhwc_io``: every 4-D input and output is channels-last (NHWC) instead of the program's
    own layout; the transposes this adds cancel against the NHWC kernels' (``passes/optimize_layout.py``).
    ``weights``: ``None`` keeps float32 constants; ``"fp16"`` stores them as float16, ``"int8"``
    stores the conv/fully-connected/matmul weights as per-channel int8 (dynamic range), both
    with float32 activations (``weight_storage.py``); another value is a ``Pt2UsageError``.

    Dynamic dims become ``shape_signature`` -1 and shapes are computed at run time, so any
    size in the program's ranges works after ``Interpreter.resize_tensor_input``. Raises
    ``UnsupportedOpsError`` listing every op TFLite cannot take (for a .pt2, the ATen nodes
    they came from), ``ConversionError`` for a model that cannot be read.

    Size: while the constants fit flatbuffers' 2 GiB they are inside the flatbuffer. Past that
    they follow it in the same file, each addressed by ``Buffer.offset``/``size`` (the
    single-file layout LiteRT reads past 2 GiB, ``writer.py``), and ``dst`` is written one
    constant at a time; the return value is then the flatbuffer alone (graph and metadata,
    which ``Interpreter(model_content=)`` cannot run: load ``dst`` with ``model_path=``).
    Without ``dst`` such a model is returned whole, in memory. ``progress(done, total)`` is
    called as the constants' bytes are written. ``state``: as ``to_onnx``'s (a KV cache's
    buffers as extra outputs, ``"inputs"``: also as inputs, which here have no default value:
    the first step is fed the buffers' initial values, zeros for a cache)."""
    check_weight_option(weights)
    with stage(None, "reading the ONNX model", passthrough=(Pt2Error,)):
        prepared = prepare(load_onnx(src, model, state))
    with stage(prepared.member, "converting to TFLite"):  # a ConversionError gains the archive member
        program = convert_prepared(prepared, nhwc_io=nhwc_io)
        if weights is not None:
            store_weights(program, weights, onnx_weights(prepared.model))  # only the model's weights
    if dst is None:
        with stage(prepared.member, "writing the TFLite flatbuffer"):
            return write(program)
    # the output file's own errors (a full disk, a FIFO) leave as they are: not the input's fault
    with stage(prepared.member, "writing the TFLite flatbuffer", passthrough=(OSError, Pt2UsageError)):
        return write_file(program, dst, progress=progress)  # atomic: a failed write leaves the old file


def load_mappers() -> dict:
    """The mapper table (filled when the ``ops`` package is imported)."""
    return MAPPERS


def convert_prepared(p, *, nhwc_io: bool = False) -> Program:
    g = p.model.graph
    fuse_gelu(g)
    sub = Subgraph("main")
    em = Emitter(g, sub)
    problems = Problems("tflite", p.member)
    _declare_inputs(em, g, problems)
    load_mappers()
    quantization = install_qdq(em)
    em.map_nodes(lambda node, e: _report_node(problems, node, e))
    problems.raise_if_any()
    names = _declare_outputs(em, g)
    run_subgraph_passes(em.subgraphs, nhwc_io=nhwc_io)  # pipeline.py: the order, and why
    meta = {"producer": "pt2x", "source": p.source, "onnx_opset": TARGET_OPSET if p.source == "pt2" else _opset(p.model),
            "range_constraints": p.ranges, "min_runtime": MIN_RUNTIME, "int64_computed_as": "int32",
            "inputs": _input_names(g), "outputs": names}
    if quantization is not None:
        meta["quantization"] = quantization.as_dict()
    return Program(em.subgraphs, description="pt2x: converted from " + p.source,
                   metadata={"pt2x": json.dumps(meta, sort_keys=True).encode(),
                             "min_runtime_version": MIN_RUNTIME.encode()},
                   signature_inputs=_input_names(g), signature_outputs=names)


def _opset(m: onnx.ModelProto) -> int:
    return next((o.version for o in m.opset_import if o.domain in ("", "ai.onnx")), 0)


def _input_names(g) -> list[str]:
    inits = {t.name for t in g.initializer}
    return [i.name for i in g.input if i.name not in inits]


def _report_node(problems: Problems, node, e: Unsupported) -> None:
    """An ONNX node the mappers refused, with the ATen node it was made from when its origin
    stamp says (pt2x's ONNX target stamps every node it makes: ``onnx/graph_tools.py``)."""
    stamp = origin_of(node)
    aten = stamp.get("pt2x.aten_node")
    where = f"{aten} = {stamp.get('pt2x.aten_target', '?')}" if aten else None
    problems.add(f"ONNX {node.op_type}", node.name or node.output[0], e.reason,
                 origin=f"ATen node {where}" if where else None)


def _declare_inputs(em: Emitter, g, problems: Problems) -> None:
    for name in _input_names(g):
        elem, shape = em.infos[name]
        if shape is None:
            raise ConversionError(_no_rank_input(g, name))
        try:
            dtype = compute_type(elem, f"graph input {name!r}")
        except Unsupported as e:
            problems.add_value("tensor input", name, e.reason)
            continue
        io = _IO_TYPE.get(elem, dtype)
        idx = em.sub.add(Tensor(name, io, shape))
        em.sub.inputs.append(idx)
        em.bind(name, em.cast(idx, dtype) if io != dtype else idx)


def _no_rank_input(g, name: str) -> str:
    """Why graph input ``name`` cannot be a TFLite input, naming the operators that read it."""
    kind = next((vi.type.WhichOneof("value") for vi in g.input if vi.name == name), None)
    what = {"sequence_type": "a sequence", "optional_type": "an optional", "map_type": "a map",
            "sparse_tensor_type": "a sparse tensor"}.get(kind, "a tensor of unknown rank")
    readers = sorted({n.op_type for n in g.node if name in n.input})
    return (f"graph input {name!r} is {what}: TFLite inputs are tensors of known rank "
            f"(read by {', '.join(readers) or 'no operator'})")


def _declare_outputs(em: Emitter, g) -> list[str]:
    """Graph outputs with the ONNX names, CAST back to their I/O type (``_IO_TYPE``)."""
    names, used = [], set(em.sub.inputs)
    for o in g.output:
        io = _IO_TYPE.get(o.type.tensor_type.elem_type)
        em.sub.outputs.append(em.output(o.name, io, used))
        names.append(o.name)
    return names
