"""The checks an ONNX model from outside pt2x passes before the TFLite target reads it.

A ``.onnx`` file or ``ModelProto`` is user input like a ``.pt2``: each thing it states that the
converter would otherwise trust is checked here, and a failure is a ``ConversionError`` naming
the graph, node, initializer or value and the field, before shape inference, folding or any
mapper runs:

* size: nodes (every subgraph counted) and subgraph nesting (``converters/limits.py``);
* the default-domain opset import: present once, at a version onnx knows;
* every stated dim (inputs, outputs, value infos, initializers) within ``[0, MAX_ONNX_DIM]``
  and ranks within the loader's ``MAX_TENSOR_RANK``;
* every initializer and ``Constant`` tensor: a known data type whose stored data (``raw_data``
  or the typed field) holds exactly as many elements as its dims say;
* structure: every value defined once in its graph (inputs, initializers, node outputs), every
  node input defined before the node (in its graph or an enclosing one), so no cycles;
* node attributes against the operator's schema at the model's opset: each attribute the
  schema declares has its type, each required one is present.

These run before anything of onnx's reads the model (its version converter, shape inference
and checker, ``normalise.py``, which run next): onnx trusts stated sizes and data where these
checks do not (it allocates from a stated dim, and can crash in protobuf on tensor data that
disagrees with its dims). ``onnx.checker`` alone would also refuse files real exporters write
and ONNX Runtime runs (a graph output without a shape); ``normalise.py`` runs it on a copy that
accepts them.

pt2x's own ONNX (a ``.pt2`` converted in memory) does not pass through here: it is made by
the ONNX target from a program the loader already bounded.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import AttributeProto, TensorProto, helper

from ....serde.limits import MAX_TENSOR_RANK
from ...errors import ConversionError
from ...guard import safe_text
from ...limits import MAX_ONNX_DIM, MAX_ONNX_NODES, MAX_ONNX_SUBGRAPH_DEPTH
from ...onnx.graph_tools import subgraphs
from ...onnx.lazy_initializers import is_lazy

__all__ = ["check_onnx_model"]

# typed field that holds each data type's values when raw_data is empty, and values per element
_TYPED_FIELD = {
    TensorProto.FLOAT: ("float_data", 1), TensorProto.DOUBLE: ("double_data", 1),
    TensorProto.INT64: ("int64_data", 1), TensorProto.UINT64: ("uint64_data", 1),
    TensorProto.UINT32: ("uint64_data", 1), TensorProto.COMPLEX64: ("float_data", 2),
    TensorProto.COMPLEX128: ("double_data", 2), TensorProto.STRING: ("string_data", 1),
}
_INT32_FIELD_TYPES = (TensorProto.INT32, TensorProto.INT16, TensorProto.INT8, TensorProto.UINT16,
                      TensorProto.UINT8, TensorProto.BOOL, TensorProto.FLOAT16, TensorProto.BFLOAT16)


def check_onnx_model(m: onnx.ModelProto) -> None:
    """Raise ``ConversionError`` for the first thing in ``m`` the TFLite target must not trust."""
    _check_opset(m)
    count = [0]
    opsets = {o.domain or "ai.onnx": o.version for o in m.opset_import}
    _check_graph(m.graph, "graph", 0, count, frozenset(), opsets)


def _check_opset(m: onnx.ModelProto) -> None:
    default = [o for o in m.opset_import if o.domain in ("", "ai.onnx")]
    if len(default) != 1:
        ops = sorted({f"{n.domain}.{n.op_type}" if n.domain else n.op_type for n in m.graph.node})
        listed = ", ".join(ops[:8]) + (f" and {len(ops) - 8} more" if len(ops) > 8 else "")
        raise ConversionError(f"opset_import: the model imports the default ONNX domain {len(default)} times "
                              f"(once is required); its operators: {listed or 'none'}")
    known = onnx.defs.onnx_opset_version()
    if not 1 <= default[0].version <= known:
        raise ConversionError(f"opset_import: default-domain version {default[0].version} is not one onnx "
                              f"{onnx.__version__} knows (1..{known})")


def _check_graph(g: onnx.GraphProto, path: str, depth: int, count: list[int], outer: frozenset,
                 opsets: dict) -> None:
    if depth > MAX_ONNX_SUBGRAPH_DEPTH:
        raise ConversionError(f"{path}: subgraphs nest more than {MAX_ONNX_SUBGRAPH_DEPTH} deep "
                              "(converters/limits.py MAX_ONNX_SUBGRAPH_DEPTH)")
    count[0] += len(g.node)
    if count[0] > MAX_ONNX_NODES:
        raise ConversionError(f"the model holds more than {MAX_ONNX_NODES} nodes (converters/limits.py MAX_ONNX_NODES)")
    for field in ("input", "output", "value_info"):
        for vi in getattr(g, field):
            _check_value_info(vi, f"{path}.{field} {safe_text(repr(vi.name), 200)}")
    for t in g.initializer:
        _check_tensor(t, f"{path}.initializer {safe_text(repr(t.name), 200)}")
    for t in g.sparse_initializer:
        raise ConversionError(f"{path}.sparse_initializer {safe_text(repr(t.values.name), 200)}: sparse "
                              "initializers are not supported by pt2x's TFLite target")
    defined: set[str] = set()
    for what, names in (("graph input", [v.name for v in g.input]), ("initializer", [t.name for t in g.initializer])):
        seen: set[str] = set()
        for name in names:
            if name in seen:
                raise ConversionError(f"{path}: {what} {safe_text(repr(name), 200)} is defined twice")
            seen.add(name)
        defined |= seen
    for i, node in enumerate(g.node):
        where = f"{path}.node[{i}] {safe_text(repr(node.name), 200)} ({safe_text(node.op_type, 100)})"
        for k, name in enumerate(node.input):
            if name and name not in defined and name not in outer:
                raise ConversionError(f"{where}: input {k} {safe_text(repr(name), 200)} is not defined before the "
                                      "node (a missing value, or a cycle)")
        _check_schema(node, where, opsets)
        if next(subgraphs(node), None) is not None:
            inner = outer | defined  # a body sees what is defined before its node
        else:
            inner = outer
        for a in node.attribute:
            _check_attribute(a, where, depth, count, inner, opsets)
        for k, name in enumerate(node.output):
            if name and (name in defined or name in outer):
                raise ConversionError(f"{where}: output {k} {safe_text(repr(name), 200)} is already defined "
                                      "(ONNX values are assigned once)")
            defined.add(name)
    for k, o in enumerate(g.output):
        if o.name not in defined and o.name not in outer:
            raise ConversionError(f"{path}.output[{k}] {safe_text(repr(o.name), 200)}: nothing defines it")


def _check_schema(node: onnx.NodeProto, where: str, opsets: dict) -> None:
    """The node's attributes against its schema (an op onnx does not know is left to the mappers,
    which report it as unsupported)."""
    domain = node.domain or "ai.onnx"
    if domain not in opsets:
        if domain == "ai.onnx":
            raise ConversionError(f"{where}: the model imports no opset for its domain")
        return
    try:
        schema = onnx.defs.get_schema(node.op_type, opsets[domain], "" if domain == "ai.onnx" else domain)
    except Exception:  # noqa: BLE001 - SchemaError: no such op at this opset
        return
    declared = schema.attributes
    names = [a.name for a in node.attribute]
    if len(set(names)) != len(names):
        raise ConversionError(f"{where}: an attribute is given twice")
    for a in node.attribute:
        spec = declared.get(a.name)
        if spec is not None and int(spec.type) != int(a.type):
            raise ConversionError(f"{where} attribute {safe_text(repr(a.name), 100)}: type "
                                  f"{AttributeProto.AttributeType.Name(a.type) if a.type in _ATTR_TYPES else a.type}, "
                                  f"the {node.op_type} schema says {AttributeProto.AttributeType.Name(int(spec.type))}")
    for name, spec in declared.items():
        if spec.required and name not in names:
            raise ConversionError(f"{where}: required attribute {name!r} is missing")


_ATTR_TYPES = set(AttributeProto.AttributeType.values())


def _check_attribute(a: AttributeProto, where: str, depth: int, count: list[int], outer: frozenset,
                     opsets: dict) -> None:
    at = f"{where} attribute {safe_text(repr(a.name), 100)}"
    if a.type == AttributeProto.TENSOR:
        _check_tensor(a.t, at)
    elif a.type == AttributeProto.TENSORS:
        for j, t in enumerate(a.tensors):
            _check_tensor(t, f"{at}[{j}]")
    elif a.type == AttributeProto.GRAPH:
        _check_graph(a.g, f"{at}", depth + 1, count, outer, opsets)
    elif a.type == AttributeProto.GRAPHS:
        for j, sg in enumerate(a.graphs):
            _check_graph(sg, f"{at}[{j}]", depth + 1, count, outer, opsets)


def _check_dims(dims, where: str) -> None:
    if len(dims) > MAX_TENSOR_RANK:
        raise ConversionError(f"{where}: rank {len(dims)} is over the limit of {MAX_TENSOR_RANK}")
    for k, d in enumerate(dims):
        if not 0 <= d <= MAX_ONNX_DIM:
            raise ConversionError(f"{where}: dim {k} is {d}, outside 0..{MAX_ONNX_DIM}")


def _check_value_info(vi: onnx.ValueInfoProto, where: str) -> None:
    t = vi.type
    if t.HasField("tensor_type") and t.tensor_type.HasField("shape"):
        shape = t.tensor_type.shape
        _check_dims([d.dim_value for d in shape.dim if d.HasField("dim_value")], f"{where} shape")
        if len(shape.dim) > MAX_TENSOR_RANK:
            raise ConversionError(f"{where}: rank {len(shape.dim)} is over the limit of {MAX_TENSOR_RANK}")


def _check_tensor(t: TensorProto, where: str) -> None:
    _check_dims(list(t.dims), f"{where} dims")
    if t.data_location == TensorProto.EXTERNAL:
        if is_lazy(t):  # memory-mapped by external_data.py, after its checks of location, offset and size
            return
        raise ConversionError(f"{where}: its data is still in an external file (not loaded)")
    if t.HasField("segment"):
        raise ConversionError(f"{where}: segmented tensors are not supported")
    try:
        np_dtype = helper.tensor_dtype_to_np_dtype(t.data_type)
    except (KeyError, ValueError, TypeError):
        raise ConversionError(f"{where}: data_type {t.data_type} is not an ONNX tensor type") from None
    n = int(np.prod(np.asarray(t.dims, dtype=np.float64))) if len(t.dims) else 1
    if t.data_type == TensorProto.STRING:
        have, unit = len(t.string_data), "strings"
    elif t.raw_data:
        bits = _bits(t.data_type, np_dtype)
        want = (n * bits + 7) // 8
        if len(t.raw_data) != want:
            raise ConversionError(f"{where}: raw_data holds {len(t.raw_data)} bytes, its dims {list(t.dims)} and "
                                  f"type {TensorProto.DataType.Name(t.data_type)} need {want}")
        return
    else:
        fld, per = _TYPED_FIELD.get(t.data_type, ("int32_data", 1))
        if t.data_type not in _TYPED_FIELD and t.data_type not in _INT32_FIELD_TYPES:
            per = 8 // _bits(t.data_type, np_dtype) if _bits(t.data_type, np_dtype) < 8 else 1
            n = -(-n // per)  # packed sub-byte types: several elements per int32_data entry
            per = 1
        have, unit = len(getattr(t, fld)) // per, fld
    if have != n:
        raise ConversionError(f"{where}: holds {have} values ({unit}), its dims {list(t.dims)} need {n}")


def _bits(data_type: int, np_dtype) -> int:
    name = TensorProto.DataType.Name(data_type)
    if name.startswith(("INT4", "UINT4", "FLOAT4")):
        return 4
    if name.startswith(("INT2", "UINT2")):
        return 2
    return np.dtype(np_dtype).itemsize * 8
