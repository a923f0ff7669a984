"""An ONNX model from outside pt2x brought to the opsets the TFLite mappers implement, then
checked by onnx itself, before shape inference, folding or any mapper runs.

* **Opset.** The mappers implement the default domain from ``TARGET_OPSET`` (18, the opset
  pt2x's own ONNX is made at) up to the newest onnx knows: every operator version from 18 on
  changes only types (refused where TFLite has none, ``emit.compute_type``) or adds attributes
  and attribute values (refused unless a mapper declares them, ``op_attributes.py``). A model at
  an older opset is converted to ``TARGET_OPSET`` by onnx's own version converter
  (``onnx.version_converter.convert_version``), which rewrites each operator whose semantics
  changed through an adapter (Clip's min/max attributes become inputs, Softmax-11's flattening
  becomes Flatten/Softmax/Reshape, Pad/Reshape/TopK attributes become inputs); an operator
  without an adapter across a breaking version is refused naming it, never passed through, and
  so is one that is deprecated at the target (its semantics would be guessed), and one whose
  adapter was measured to change its semantics (``_UNFAITHFUL_ADAPTERS``: Resize-10, Upsample,
  Hardmax below 13). The converter is given the graph without its weights' data (``_converted``).
* **Checks.** onnx's strict shape inference (``check_type``, ``strict_mode``, ``data_prop``)
  refuses what the schemas' inference functions refuse (``Transpose perm=[0,0]``, an output
  whose stated type or shape contradicts its node); then ``onnx.checker`` (the schemas'
  attribute, input and output rules). The checker also refuses a graph output without a
  shape, which real exporters write and ONNX Runtime runs: it checks a copy in which such
  outputs carry an empty one (after inference has filled in what it could), and in which the
  initializers are graph inputs of their type and dims (their data was checked before). ``onnx_check.py`` keeps pt2x's own
  checks that come first (sizes, tensor data, structure), where onnx's would allocate or crash.

* **Integer operators.** ``QLinearConv``, ``QLinearMatMul``, ``ConvInteger`` and ``MatMulInteger``
  become their exact float32 computation in plain operators (``qlinear_rewrite.py``) before the checks.

Other domains: a model may import them (``ai.onnx.ml``, a vendor's); their nodes have no TFLite
mapping and are reported by the dispatch. Failures here are ``UnsupportedOpsError`` naming the
operator where onnx names one, else ``ConversionError`` with onnx's reason.
"""

from __future__ import annotations

import re

import onnx
from onnx import helper, shape_inference, version_converter

from ...errors import ConversionError
from ...guard import safe_text
from ...onnx.graph_tools import carry_stamps, walk_nodes
from ...report import Problems
from .qlinear_rewrite import rewrite_integer_ops

__all__ = ["TARGET_OPSET", "normalise", "default_opset"]

TARGET_OPSET = 18


def default_opset(m: onnx.ModelProto) -> int:
    return next((o.version for o in m.opset_import if o.domain in ("", "ai.onnx")), 0)


# Adapters of onnx's version converter found to change semantics, measured against ONNX
# Runtime on the original model: op -> (the opset from which the op is taken as converted, why).
# A node of such an op in a model below that opset is refused, never repaired by hand.
_UNFAITHFUL_ADAPTERS = {
    "Resize": (11, "onnx's version converter makes Resize-10 a Resize-11+ without Resize-10's asymmetric "
                   "coordinate transform (linear 2x upsampling then differs from ONNX Runtime by 0.62)"),
    "Upsample": (11, "onnx's version converter makes Upsample a Resize-11+ without Upsample's asymmetric "
                     "coordinate transform (linear 2x upsampling then differs from ONNX Runtime by 0.62)"),
    "Hardmax": (13, "onnx's version converter keeps Hardmax-1/11 as is at 13, where it no longer flattens "
                    "the dims from its axis on (one-hot over a [2,3,4,5] input's dims 2.. then differs "
                    "from ONNX Runtime's by 1)"),
    "Scan": (9, "onnx's version converter makes Scan-8 a Scan-9 and declares the graph's inputs without "
                "Scan-8's batch axis (a [1, 3, 2] input becomes [3, 2]), so the model's own inputs no "
                "longer fit"),
}


def normalise(m: onnx.ModelProto) -> onnx.ModelProto:
    """``m`` at an opset the mappers implement, shape-inferred strictly and checked by onnx."""
    if default_opset(m) < TARGET_OPSET:
        _refuse_unfaithful(m)
        m = _convert(m)
    _refuse_deprecated(m)
    m = rewrite_integer_ops(m)
    m = _strict_inference(m)
    _check(m)
    return m


def _convert(m: onnx.ModelProto) -> onnx.ModelProto:
    opset = default_opset(m)
    try:
        return carry_stamps(m, _converted(m))  # it drops them
    except Exception as e:  # noqa: BLE001 - onnx raises RuntimeError/ConvertError/InferenceError
        reason = f"onnx's version converter cannot bring it from opset {opset} to {TARGET_OPSET}: {_text(e)}"
        _refuse_op(m, e, reason)
        raise ConversionError(f"the ONNX model at opset {opset}: {reason}") from None


def _converted(m: onnx.ModelProto) -> onnx.ModelProto:
    """``convert_version`` of ``m`` without its weights' data: the converter serialises what it
    is given and parses its result back (a 435 MB opset-14 BERT-base: 10.9 s), while its adapters
    read no initializer's values, only types and shapes. It converts a skeleton whose
    initializers are typed graph inputs; the initializers are then put back."""
    skeleton, stated = onnx.ModelProto(ir_version=m.ir_version), {i.name for i in m.graph.input}
    skeleton.opset_import.extend(m.opset_import)
    skeleton.functions.extend(m.functions)
    g = skeleton.graph
    g.name = m.graph.name
    for field in ("node", "input", "output", "value_info"):
        getattr(g, field).extend(getattr(m.graph, field))
    added = [t.name for t in m.graph.initializer if t.name not in stated]
    g.input.extend(helper.make_tensor_value_info(t.name, t.data_type, list(t.dims))
                   for t in m.graph.initializer if t.name not in stated)
    c = version_converter.convert_version(skeleton, TARGET_OPSET)
    added_set = set(added)
    inputs = [i for i in c.graph.input if i.name not in added_set]
    del c.graph.input[:]
    c.graph.input.extend(inputs)
    c.graph.initializer.extend(m.graph.initializer)
    for field in ("producer_name", "producer_version", "domain", "model_version", "doc_string"):
        setattr(c, field, getattr(m, field))
    return c


def _refuse_unfaithful(m: onnx.ModelProto) -> None:
    """Nodes the version converter would carry to the target opset with other semantics."""
    opset = default_opset(m)
    problems = Problems("tflite")
    for node in walk_nodes(m.graph):
        since, why = _UNFAITHFUL_ADAPTERS.get(node.op_type, (0, ""))
        if node.domain in ("", "ai.onnx") and opset < since:
            problems.add(f"ONNX {node.op_type}", node.name or node.output[0],
                         f"{node.op_type} at opset {opset}: {why}")
    problems.raise_if_any()


def _refuse_deprecated(m: onnx.ModelProto) -> None:
    """Operators with no live schema at the model's opset (deprecated, e.g. Scatter, Upsample):
    their semantics are the older version's, which the mappers do not implement."""
    opset = default_opset(m)
    problems = Problems("tflite")
    for node in walk_nodes(m.graph):
        if node.domain not in ("", "ai.onnx"):
            continue
        try:
            schema = onnx.defs.get_schema(node.op_type, opset)
        except onnx.defs.SchemaError:
            continue  # not an onnx op: the dispatch reports it as unmapped
        if schema.deprecated:
            problems.add(f"ONNX {node.op_type}", node.name or node.output[0],
                         f"{node.op_type} is deprecated at opset {opset}: it has only an older version's "
                         "semantics, which pt2x's mappers do not implement")
    problems.raise_if_any()


def _strict_inference(m: onnx.ModelProto) -> onnx.ModelProto:
    try:
        return shape_inference.infer_shapes(m, check_type=True, strict_mode=True, data_prop=True)
    except Exception as e:  # noqa: BLE001 - InferenceError, or a ValidationError from the schemas
        reason = f"onnx's shape inference refuses it: {_text(e)}"
        _refuse_op(m, e, reason)
        raise ConversionError(f"the ONNX model: {reason}") from None


def _check(m: onnx.ModelProto) -> None:
    try:
        onnx.checker.check_model(_checkable(m))
    except Exception as e:  # noqa: BLE001 - ValidationError
        reason = f"onnx's checker refuses it: {_text(e)}"
        _refuse_op(m, e, reason)
        raise ConversionError(f"the ONNX model: {reason}") from None


def _checkable(m: onnx.ModelProto) -> onnx.ModelProto:
    """What the checker reads of ``m``: its graph with each main-graph initializer stated as a
    graph input of its type and dims instead of its data (``onnx_check.py`` has checked the data
    against the dims; serialising the weights for the checker again cost seconds on a 440 MB
    BERT), and every graph output with a shape (an empty one where none is known: the checker
    requires one, exporters do not write one)."""
    c = onnx.ModelProto(ir_version=m.ir_version)
    c.opset_import.extend(m.opset_import)
    c.functions.extend(m.functions)
    g, src = c.graph, m.graph
    g.name = src.name
    g.node.extend(src.node)
    g.input.extend(src.input)
    g.output.extend(src.output)
    g.value_info.extend(src.value_info)
    stated = {i.name for i in src.input}
    g.input.extend(helper.make_tensor_value_info(t.name, t.data_type, list(t.dims))
                   for t in src.initializer if t.name not in stated)
    for o in g.output:
        if o.type.HasField("tensor_type") and not o.type.tensor_type.HasField("shape"):
            o.type.tensor_type.shape.SetInParent()
    return c


def _text(e: Exception) -> str:
    text = re.sub(r"\s+", " ", str(e)).strip()
    text = re.sub(r"^/\S+?:\d+: \w+: ", "", text)  # the C++ source location onnx prefixes
    return safe_text(text, 400)


def _refuse_op(m: onnx.ModelProto, e: Exception, reason: str) -> None:
    """An ``UnsupportedOpsError`` naming the first of the model's operators onnx's message names."""
    text = str(e)
    for node in walk_nodes(m.graph):
        op = node.op_type
        if op and re.search(rf"(?<![A-Za-z]){re.escape(op)}(?![A-Za-z])", text):
            problems = Problems("tflite")
            problems.add(f"ONNX {op}", node.name or (node.output[0] if node.output else op), reason)
            problems.raise_if_any()
