"""The ONNX model the TFLite target maps: from a .pt2 (built in memory by pt2x's ONNX
target) or an ONNX file/``ModelProto`` from anywhere, then shape-inferred and
constant-folded.

pt2x's ONNX target is asked for ``ONNX_OPSET`` (18): at that opset it decomposes
``Attention`` and ``RMSNormalization`` into plain ops itself, so ATen semantics stay written
once (in the ONNX lowerings). Folding evaluates every node whose inputs are all constants
with onnx's reference evaluator (and ``Shape`` of a fully static value), so static shape
arithmetic never reaches the TFLite graph.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import numpy as np
import onnx
from onnx import helper, numpy_helper, shape_inference

from ..errors import ConversionError
from .onnx_check import check_onnx_model

__all__ = ["Prepared", "ONNX_OPSET", "load_onnx", "prepare"]

ONNX_OPSET = 18
_FOLD_MAX_ELEMENTS = 1 << 22  # a folded constant larger than this stays a computation
_NO_FOLD = {"RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike", "Multinomial",
            "If", "Loop", "Scan"}
# ops whose output size comes from an input's values, not its size: folded only when shape
# inference bounds their output (a 3-element shape constant can ask for 10**18 elements)
_AMPLIFIERS = {"ConstantOfShape", "Expand", "Tile", "Range", "Pad", "Resize", "Upsample", "OneHot", "EyeLike",
               "CenterCropPad", "Col2Im"}


@dataclass
class Prepared:
    """A shape-inferred, folded ONNX model and what the TFLite model records about its source."""

    model: onnx.ModelProto
    source: str  # "pt2" or "onnx"
    ranges: dict = field(default_factory=dict)  # shape symbol -> [min, max] (None: unbounded)
    origin: dict = field(default_factory=dict)  # ONNX value name -> "node = aten.target" (pt2 only)
    member: str | None = None  # the archive member holding the program (pt2 only), named in reports


def _is_onnx_path(src) -> bool:
    if isinstance(src, (str, os.PathLike)):
        p = os.fspath(src)
        if p.lower().endswith(".onnx"):
            return True
        try:
            with open(p, "rb") as f:
                return f.read(2) != b"PK"  # a .pt2 is a zip
        except OSError:
            return False
    return False


def load_onnx(src, model: str = "model") -> Prepared:
    """``src`` as ONNX: a ``ModelProto``, an ``.onnx`` path, or a .pt2 (path, file, archive,
    ``Pt2Model``) converted by pt2x's ONNX target at ``ONNX_OPSET``."""
    if isinstance(src, onnx.ModelProto):
        return Prepared(src, "onnx")
    if _is_onnx_path(src):
        try:
            m = onnx.load(os.fspath(src), load_external_data=False)
        except OSError as e:
            from ...serde.errors import Pt2UsageError

            raise Pt2UsageError(f"cannot open {os.fspath(src)}: {e.strerror or e}") from e
        except Exception as e:
            raise ConversionError(f"{os.fspath(src)}: not a readable ONNX model ({type(e).__name__}: {e})") from e
        _load_external_data(m, os.path.dirname(os.path.abspath(os.fspath(src))))
        return Prepared(m, "onnx")
    from ..aten.graph import open_program, output_names
    from ..onnx.converter import convert_view

    view, keep = open_program(src, model)
    try:
        m = convert_view(view, opset=ONNX_OPSET)
        origin = {}
        for n in view.walk():
            for o in output_names(n):
                origin[o] = f"{n.name} = {n.target}"
        ranges = {k: [lo, hi] for k, (lo, hi) in view.ranges.items()}
        return Prepared(m, "pt2", ranges=ranges, origin=origin, member=getattr(view, "member", None))
    finally:
        del keep


def _load_external_data(m: onnx.ModelProto, folder: str) -> None:
    """Weights kept beside the model (torch.onnx.export writes ``<name>.onnx.data``): read
    only from files inside the model's own folder; any other location is refused."""
    from onnx import external_data_helper as ext

    tensors = [t for t in ext._get_all_tensors(m) if ext.uses_external_data(t)]
    root = os.path.realpath(folder)
    for t in tensors:
        loc = next((e.value for e in t.external_data if e.key == "location"), "")
        if not isinstance(loc, str) or "\x00" in loc:  # protobuf hands over invalid UTF-8 as bytes
            raise ConversionError(f"initializer {t.name!r}: its external data location {loc!r} is not a file name")
        path = os.path.realpath(os.path.join(root, loc))
        if not loc or os.path.isabs(loc) or os.path.commonpath([root, path]) != root:
            raise ConversionError(f"initializer {t.name!r} keeps its data at {loc!r}, outside the model's folder")
    for t in tensors:
        try:
            ext.load_external_data_for_tensor(t, root)
        except (OSError, ValueError, onnx.checker.ValidationError) as e:
            raise ConversionError(f"initializer {t.name!r}: cannot read its external weights: {e}") from e


def _constants(g: onnx.GraphProto) -> dict[str, np.ndarray]:
    return {t.name: numpy_helper.to_array(t) for t in g.initializer}


def _static_shape(vi) -> list[int] | None:
    t = vi.type.tensor_type
    if not t.HasField("shape"):
        return None
    dims = []
    for d in t.shape.dim:
        if not d.HasField("dim_value"):
            return None
        dims.append(d.dim_value)
    return dims


def _eval(node: onnx.NodeProto, inputs: list[np.ndarray], opset_imports) -> list[np.ndarray] | None:
    from onnx.reference import ReferenceEvaluator

    names = [f"in{i}" for i in range(len(node.input))]
    ins = [n if n else "" for n in node.input]
    feeds, graph_inputs = {}, []
    for i, (name, arr) in enumerate(zip(ins, inputs)):
        if name:
            feeds[names[i]] = arr
            graph_inputs.append(helper.make_tensor_value_info(names[i], helper.np_dtype_to_tensor_dtype(arr.dtype), arr.shape))
    n2 = onnx.NodeProto()
    n2.CopyFrom(node)
    del n2.input[:]
    n2.input.extend(names[i] if ins[i] else "" for i in range(len(ins)))
    outs = [f"out{i}" for i in range(len(node.output))]
    del n2.output[:]
    n2.output.extend(outs)
    g = helper.make_graph([n2], "fold", graph_inputs, [helper.make_tensor_value_info(o, 0, None) for o in outs])
    m = helper.make_model(g, opset_imports=opset_imports)
    try:
        return ReferenceEvaluator(m).run(None, feeds)
    except Exception:  # the evaluator lacks the op or this case: keep the node, the mapper decides
        return None


def _bounded(node: onnx.NodeProto, infos: dict) -> bool:
    """Whether evaluating ``node`` makes outputs of at most ``_FOLD_MAX_ELEMENTS`` each: shape
    inference says so, or the op's outputs are no larger than what its inputs bound."""
    for o in node.output:
        shape = _static_shape(infos[o]) if o in infos else None
        if shape is None:
            if node.op_type in _AMPLIFIERS:
                return False
        elif np.prod(shape, dtype=np.float64) > _FOLD_MAX_ELEMENTS:
            return False
    return True


def fold(m: onnx.ModelProto) -> onnx.ModelProto:
    """Evaluate nodes of the main graph whose inputs are all constants; ``Shape`` of a value
    whose shape inference found fully static becomes a constant too."""
    g = m.graph
    consts = _constants(g)
    infos = {vi.name: vi for vi in list(g.value_info) + list(g.input)}
    kept, new_inits = [], []
    for node in g.node:
        if node.domain not in ("", "ai.onnx") or node.op_type in _NO_FOLD:
            kept.append(node)
            continue
        if node.op_type == "Constant":
            out = _eval(node, [], m.opset_import)
        elif node.op_type == "Shape" and node.input[0] in infos and _static_shape(infos[node.input[0]]) is not None:
            out = _eval(node, [np.zeros(_static_shape(infos[node.input[0]]), np.float32)], m.opset_import) \
                if np.prod(_static_shape(infos[node.input[0]])) < _FOLD_MAX_ELEMENTS else None
        elif node.input and all((not i) or i in consts for i in node.input) and _bounded(node, infos):
            out = _eval(node, [consts[i] for i in node.input if i], m.opset_import)
        else:
            out = None
        if out is None or any(np.asarray(o).size > _FOLD_MAX_ELEMENTS for o in out):
            kept.append(node)
            continue
        for name, arr in zip(node.output, out):
            arr = np.asarray(arr)
            consts[name] = arr
            new_inits.append(numpy_helper.from_array(arr, name))
    del g.node[:]
    g.node.extend(kept)
    g.initializer.extend(new_inits)
    return m


def _prune(m: onnx.ModelProto) -> None:
    """Drop nodes and initializers nothing reads (graph outputs and subgraphs count)."""
    g = m.graph
    needed = {o.name for o in g.output}

    def sub_reads(node):
        for a in node.attribute:
            for sg in ([a.g] if a.type == onnx.AttributeProto.GRAPH else list(a.graphs)):
                for n in sg.node:
                    yield from n.input
                    yield from sub_reads(n)

    kept = []
    for node in reversed(list(g.node)):
        if any(o in needed for o in node.output):
            kept.append(node)
            needed.update(i for i in node.input if i)
            needed.update(sub_reads(node))
    kept.reverse()
    del g.node[:]
    g.node.extend(kept)
    inits = [t for t in g.initializer if t.name in needed]
    del g.initializer[:]
    g.initializer.extend(inits)


def prepare(p: Prepared) -> Prepared:
    """Shape inference (with data propagation), constant folding, shape inference again."""
    m = onnx.ModelProto()
    m.CopyFrom(p.model)
    if any(t.data_location == onnx.TensorProto.EXTERNAL for t in m.graph.initializer):
        raise ConversionError("the ONNX model keeps weights in external files: pass its path, or the "
                              "ModelProto with its weights loaded (onnx.load(path))")
    if p.source == "onnx":
        check_onnx_model(m)
    try:
        m = shape_inference.infer_shapes(m, data_prop=True)
        m = fold(m)
        _prune(m)
        m = shape_inference.infer_shapes(m, data_prop=True)
    except onnx.shape_inference.InferenceError as e:
        raise ConversionError(f"ONNX shape inference failed: {e}") from e
    p.model = m
    return p
