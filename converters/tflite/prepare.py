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

from ..onnx.lazy_initializers import MIN_LAZY_BYTES, LazyInitializers, array_of, is_lazy
from .. import limits
from ..errors import ConversionError, UnsupportedOpsError
from ..onnx.graph_tools import prune_unused
from .emit import attrs
from .expand_sinking import dim_known, sink_expands
from .external_data import load_external_data
from .fold_cost import fold_work
from .normalise import normalise
from .onnx_check import check_onnx_model
from .qdq_weights import transpose_into_weights

__all__ = ["Prepared", "ONNX_OPSET", "load_onnx", "prepare"]

ONNX_OPSET = 18
_FOLD_MAX_ELEMENTS = 1 << 22  # a folded constant larger than this stays a computation
_NO_FOLD = {"RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike", "Multinomial",
            "If", "Loop", "Scan",
            "DequantizeLinear"}  # quantized weights stay int8 for the QDQ pass (ops_quantize folds the rest)
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
    member: str | None = None  # the archive member holding the program (pt2 only), named in reports
    shapes: dict = field(default_factory=dict)  # ONNX name -> torch's dims (pt2 only; apply_torch_shapes)
    lazy: LazyInitializers | None = None  # the arrays behind the model's skeleton initializers (held here)


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


def load_onnx(src, model: str = "model", state: str = "outputs") -> Prepared:
    """``src`` as ONNX: a ``ModelProto``, an ``.onnx`` path, or a .pt2 (path, file, archive,
    ``Pt2Model``) converted by pt2x's ONNX target at ``ONNX_OPSET``; ``state="inputs"`` makes
    each buffer the program writes an input too (TFLite inputs have no default value)."""
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
        lazy = LazyInitializers()
        load_external_data(m, os.path.dirname(os.path.abspath(os.fspath(src))), lazy)
        return Prepared(m, "onnx", lazy=lazy)
    from ..aten.graph import open_program
    from ..onnx.converter import convert_view

    view, keep = open_program(src, model)
    try:
        shapes: dict = {}
        lazy = LazyInitializers()  # the weights stay in the archive's map until the file is written
        try:
            m = convert_view(view, opset=ONNX_OPSET, shapes=shapes, lazy=lazy,
                             state="inputs-no-default" if state == "inputs" else state)
        except UnsupportedOpsError as e:
            raise _as_tflite_report(e) from None
        ranges = {k: [lo, hi] for k, (lo, hi) in view.ranges.items()}
        return Prepared(m, "pt2", ranges=ranges, member=getattr(view, "member", None), shapes=shapes, lazy=lazy)
    finally:
        del keep


def _as_tflite_report(e: UnsupportedOpsError) -> UnsupportedOpsError:
    """``e`` (the ONNX stage's report) saying which conversion was asked for: TFLite, by way of
    ONNX. The operators and their lowering hint (registered for "onnx") stay as they are."""
    head, _, rest = e.reason.partition("\n")
    prefix = "cannot convert to onnx: "
    if head.startswith(prefix):
        head = f"cannot convert to tflite: {head[len(prefix):].rstrip(':')} with no ONNX lowering (TFLite is written from pt2x's ONNX):"
    return UnsupportedOpsError(head + ("\n" + rest if rest else ""), e.ops, member=e.member)


def _constants(g: onnx.GraphProto) -> dict[str, np.ndarray]:
    return {t.name: array_of(t) for t in g.initializer}


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


def _gather_elements(node: onnx.NodeProto, inputs: list[np.ndarray]) -> list[np.ndarray] | None:
    """GatherElements in numpy (onnx 1.22's reference evaluator fails on an index shorter than
    the data along the axis); None for an index out of range, which the spec leaves undefined."""
    data, index = inputs
    axis = attrs(node).get("axis", 0)
    if data.ndim == 0 or index.ndim != data.ndim or not -data.ndim <= axis < data.ndim:
        return None
    axis %= data.ndim
    n = data.shape[axis]
    if index.size and (index.min() < -n or index.max() >= n):
        return None
    if any(i > d for k, (i, d) in enumerate(zip(index.shape, data.shape)) if k != axis):
        return None
    idx = np.where(index < 0, index + n, index)
    sliced = data[tuple(slice(0, i) if k != axis else slice(None) for k, i in enumerate(index.shape))]
    return [np.take_along_axis(sliced, idx, axis=axis)]


_NUMPY_EVAL = {"GatherElements": _gather_elements}


def _eval(node: onnx.NodeProto, inputs: list[np.ndarray], opset_imports) -> list[np.ndarray] | None:
    from onnx.reference import ReferenceEvaluator

    if node.op_type in _NUMPY_EVAL and node.domain in ("", "ai.onnx"):
        return _NUMPY_EVAL[node.op_type](node, inputs)

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


class _Budget:
    """What folding may still spend: bytes (``limits.constant_budget`` of the initializers, with
    ``MAX_FOLDED_BYTES`` as the allowance) and estimated work (``MAX_FOLD_WORK`` per node,
    ``MAX_FOLD_TOTAL_WORK`` plus ``FOLD_WORK_PER_WEIGHT`` per initializer element in all)."""

    def __init__(self, consts: dict[str, np.ndarray]):
        self.left = limits.constant_budget(sum(a.nbytes for a in consts.values()), limits.MAX_FOLDED_BYTES)
        self.work_left = limits.MAX_FOLD_TOTAL_WORK + limits.FOLD_WORK_PER_WEIGHT * sum(
            a.size for a in consts.values())

    def afford(self, node: onnx.NodeProto, inputs: list[np.ndarray], infos: dict) -> bool:
        """Whether evaluating ``node`` fits the work bounds (estimated before it runs); counts it."""
        outs = [_static_shape(infos[o]) if o in infos else None for o in node.output]
        work = fold_work(node, [a.shape for a in inputs], outs)
        if work > limits.MAX_FOLD_WORK or work > self.work_left:
            return False
        self.work_left -= work
        return True

    def take(self, arrays) -> bool:
        need = sum(np.asarray(a).nbytes for a in arrays)
        if need > self.left:
            return False
        self.left -= need
        return True


def _fold_one(node: onnx.NodeProto, consts: dict, infos: dict, opset_imports,
              budget: _Budget) -> list[np.ndarray] | None:
    """The node's outputs when it can be folded within the bounds, else None."""
    if node.op_type == "Constant":
        return _eval(node, [], opset_imports)
    if node.op_type == "Shape" and node.input[0] in infos and _static_shape(infos[node.input[0]]) is not None:
        shape = _static_shape(infos[node.input[0]])
        if np.prod(shape, dtype=np.float64) >= _FOLD_MAX_ELEMENTS:
            return None
        return _eval(node, [np.zeros(shape, np.float32)], opset_imports)
    if node.input and all((not i) or i in consts for i in node.input) and _bounded(node, infos):
        inputs = [consts[i] for i in node.input if i]
        if budget.afford(node, inputs, infos):
            return _eval(node, inputs, opset_imports)
    return None


def fold(m: onnx.ModelProto, budget: "_Budget | None" = None, lazy: LazyInitializers | None = None) -> onnx.ModelProto:
    """Evaluate nodes of the main graph whose inputs are all constants; ``Shape`` of a value
    whose shape inference found fully static becomes a constant too. A node stays a run-time op
    when its output would be over ``_FOLD_MAX_ELEMENTS``, or past what ``_Budget`` has left:
    the work (estimated by ``fold_cost.py`` before it runs) and the bytes folded so far. With
    ``lazy``, a large folded value is kept there as an array, not copied into the graph."""
    g = m.graph
    consts = _constants(g)
    budget = budget if budget is not None else _Budget(consts)
    infos = {vi.name: vi for vi in list(g.value_info) + list(g.input) + list(g.output)}
    kept, new_inits = [], []
    for node in g.node:
        if node.domain not in ("", "ai.onnx") or node.op_type in _NO_FOLD:
            kept.append(node)
            continue
        out = _fold_one(node, consts, infos, m.opset_import, budget)
        if out is None or any(np.asarray(o).size > _FOLD_MAX_ELEMENTS for o in out) or not budget.take(out):
            kept.append(node)
            continue
        for name, arr in zip(node.output, out):
            arr = np.asarray(arr)
            consts[name] = arr
            new_inits.append(_initializer(arr, name, lazy))
    del g.node[:]
    g.node.extend(kept)
    g.initializer.extend(new_inits)
    return m


def _initializer(arr: np.ndarray, name: str, lazy: LazyInitializers | None) -> onnx.TensorProto:
    if lazy is not None and arr.nbytes >= MIN_LAZY_BYTES:
        return lazy.skeleton(name, arr, helper.np_dtype_to_tensor_dtype(arr.dtype))
    return numpy_helper.from_array(arr, name)


def _expands_a_constant(g: onnx.GraphProto) -> bool:
    consts = {t.name for t in g.initializer}
    return any(n.op_type == "Expand" and n.input and n.input[0] in consts for n in g.node)


def apply_torch_shapes(m: onnx.ModelProto, shapes: dict) -> onnx.ModelProto:
    """Fill the dims ONNX shape inference left unknown (a ``Reshape`` to ``-1``) from torch's
    shapes of the same values (``convert_view(shapes=...)``), where the rank agrees and every
    dim inference did find equals torch's; then infer again from them, its own ``unk__``
    names cleared, so the values lowerings made in between get them too. ``m`` as it was when
    that inference fails."""
    before = [onnx.ValueInfoProto.FromString(vi.SerializeToString()) for vi in m.graph.value_info]
    for vi in m.graph.value_info:
        dims = shapes.get(vi.name)
        t = vi.type.tensor_type
        if dims is None or not t.HasField("shape") or len(t.shape.dim) != len(dims):
            continue
        known = [(d, h) for d, h in zip(t.shape.dim, dims) if dim_known(d)]
        if any((d.dim_value if d.HasField("dim_value") else d.dim_param) != h for d, h in known):
            continue
        for d, h in zip(t.shape.dim, dims):
            if not dim_known(d):
                d.Clear()
                if isinstance(h, int):
                    d.dim_value = h
                else:
                    d.dim_param = h
    for vi in m.graph.value_info:
        for d in vi.type.tensor_type.shape.dim:
            if not dim_known(d):
                d.Clear()
    try:
        return shape_inference.infer_shapes(m, data_prop=True)
    except onnx.shape_inference.InferenceError:
        del m.graph.value_info[:]
        m.graph.value_info.extend(before)
        return m


def prepare(p: Prepared) -> Prepared:
    """An ONNX model from outside pt2x checked and normalised (``onnx_check.py``, then
    ``normalise.py``: its opset brought to the mappers', strict shape inference, onnx's checker);
    pt2x's own shape-inferred. Then constant folding (and, where an ``Expand`` of a constant
    feeds ops that act on each broadcast copy alike, ``expand_sinking``, and folding again) and
    shape inference again."""
    m = onnx.ModelProto()
    m.CopyFrom(p.model)
    if any(t.data_location == onnx.TensorProto.EXTERNAL and not is_lazy(t) for t in m.graph.initializer):
        raise ConversionError("the ONNX model keeps weights in external files: pass its path, or the "
                              "ModelProto with its weights loaded (onnx.load(path))")
    if p.source == "onnx":
        check_onnx_model(m)
        m = normalise(m)
    try:
        if p.source != "onnx":
            m = shape_inference.infer_shapes(m, data_prop=True)
        transpose_into_weights(m)
        budget = _Budget(_constants(m.graph))
        m = fold(m, budget, p.lazy)
        if p.shapes and _expands_a_constant(m.graph):  # what expand_sinking reads the dims for
            m = apply_torch_shapes(m, p.shapes)
        if sink_expands(m, lambda node, inputs: _eval(node, inputs, m.opset_import), budget):
            m = fold(m, budget, p.lazy)
        prune_unused(m)
        m = shape_inference.infer_shapes(m, data_prop=True)
    except onnx.shape_inference.InferenceError as e:
        raise ConversionError(f"ONNX shape inference failed: {e}") from e
    p.model = m
    return p
