"""Constant folding of the ONNX model the TFLite target reads: every node whose inputs are all
constants is evaluated once with onnx's reference evaluator (and ``Shape`` of a fully static
value), so static shape arithmetic never reaches the TFLite graph; bounded in work
(``fold_cost.py``) and bytes (``FoldBudget``). Also torch's shapes for the values ONNX inference
left unknown (``apply_torch_shapes``). ``pipeline.py`` says when each runs.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import helper, numpy_helper, shape_inference

from ... import limits
from ...onnx.lazy_initializers import MIN_LAZY_BYTES, LazyInitializers, array_of
from ..core.emit import attrs
from .fold_cost import fold_work
from .sink_expands import dim_known

__all__ = ["fold", "apply_torch_shapes", "FoldBudget", "evaluate", "expands_a_constant", "constants"]

_FOLD_MAX_ELEMENTS = 1 << 22  # a folded constant larger than this stays a computation
_NO_FOLD = {"RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike", "Multinomial",
            "If", "Loop", "Scan",
            "DequantizeLinear"}  # quantized weights stay int8 for the QDQ pass (ops_quantize folds the rest)
# ops whose output size comes from an input's values, not its size: folded only when shape
# inference bounds their output (a 3-element shape constant can ask for 10**18 elements)
_AMPLIFIERS = {"ConstantOfShape", "Expand", "Tile", "Range", "Pad", "Resize", "Upsample", "OneHot", "EyeLike",
               "CenterCropPad", "Col2Im"}


def constants(g: onnx.GraphProto) -> dict[str, np.ndarray]:
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


def evaluate(node: onnx.NodeProto, inputs: list[np.ndarray], opset_imports) -> list[np.ndarray] | None:
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


class FoldBudget:
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
              budget: FoldBudget) -> list[np.ndarray] | None:
    """The node's outputs when it can be folded within the bounds, else None."""
    if node.op_type == "Constant":
        return evaluate(node, [], opset_imports)
    if node.op_type == "Shape" and node.input[0] in infos and _static_shape(infos[node.input[0]]) is not None:
        shape = _static_shape(infos[node.input[0]])
        if np.prod(shape, dtype=np.float64) >= _FOLD_MAX_ELEMENTS:
            return None
        return evaluate(node, [np.zeros(shape, np.float32)], opset_imports)
    if node.input and all((not i) or i in consts for i in node.input) and _bounded(node, infos):
        inputs = [consts[i] for i in node.input if i]
        if budget.afford(node, inputs, infos):
            return evaluate(node, inputs, opset_imports)
    return None


def fold(m: onnx.ModelProto, budget: "FoldBudget | None" = None, lazy: LazyInitializers | None = None) -> onnx.ModelProto:
    """Evaluate nodes of the main graph whose inputs are all constants; ``Shape`` of a value
    whose shape inference found fully static becomes a constant too. A node stays a run-time op
    when its output would be over ``_FOLD_MAX_ELEMENTS``, or past what ``FoldBudget`` has left:
    the work (estimated by ``fold_cost.py`` before it runs) and the bytes folded so far. With
    ``lazy``, a large folded value is kept there as an array, not copied into the graph."""
    g = m.graph
    consts = constants(g)
    budget = budget if budget is not None else FoldBudget(consts)
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


def expands_a_constant(g: onnx.GraphProto) -> bool:
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


