"""``Emitter``: what an op mapper (``ops_*``) sees while one ONNX graph becomes a TFLite subgraph.

Invariant: every ONNX value lives in TFLite in its *compute* dtype (``COMPUTE_TYPE``):
int64 as int32 (TFLite's shape, index and arithmetic kernels are int32), float64, float16 and
bfloat16 as float32 (most TFLite CPU kernels are float32 only; pt2x's ONNX already computes
low-precision floats in float32). Graph inputs and outputs keep the model's own dtype where
TFLite has one, with a CAST at the edge (``converter.py``); int8, uint8 and int16 keep their
type, and ``op`` applies ``int_compute``'s rule to every operator (computed in int32 where
LiteRT's kernel for the type is a quantized one). Mappers read values with ``t``, constants
with ``const_value``, and create operators with ``op``.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper

from ...errors import ConversionError, Unsupported
from ...onnx.graph_tools import attrs
from ...onnx.lazy_initializers import MIN_LAZY_BYTES, Deferred, array_of
from .builtins import broadcast, default_options
from .int_compute import emit_with_integer_rule
from .model import NUMPY_OF, Op, Subgraph, Tensor, TensorType

__all__ = ["Emitter", "COMPUTE_TYPE", "attrs"]

T = TensorType
# ONNX elem type -> the TFLite type the value is computed in
# ops outside the default domain that have a mapper under the same name
PREVIEW_OPS = frozenset({"FlexAttention"})  # ai.onnx.preview


def _mapped_domain(node: onnx.NodeProto) -> bool:
    return node.domain in ("", "ai.onnx") or (node.domain == "ai.onnx.preview" and node.op_type in PREVIEW_OPS)


COMPUTE_TYPE = {
    TensorProto.FLOAT: T.FLOAT32, TensorProto.DOUBLE: T.FLOAT32, TensorProto.FLOAT16: T.FLOAT32,
    TensorProto.BFLOAT16: T.FLOAT32, TensorProto.INT64: T.INT32, TensorProto.INT32: T.INT32,
    TensorProto.INT16: T.INT16, TensorProto.INT8: T.INT8, TensorProto.UINT8: T.UINT8,
    TensorProto.BOOL: T.BOOL,
}
_INT32 = np.iinfo(np.int32)


def compute_type(elem: int, what: str) -> int:
    try:
        return COMPUTE_TYPE[elem]
    except KeyError:
        raise Unsupported(f"{what} has ONNX type {TensorProto.DataType.Name(elem)}, which pt2x's TFLite target "
                          "does not compute") from None


def to_compute_array(arr: np.ndarray, what: str) -> np.ndarray:
    """A constant in its compute dtype; int64 values outside int32 are refused."""
    arr = np.asarray(arr)
    if arr.dtype == np.int64 or arr.dtype == np.uint64 or arr.dtype == np.uint32:
        if arr.size and (arr.min() < _INT32.min or arr.max() > _INT32.max):
            raise Unsupported(f"{what} holds integers outside int32, the type TFLite computes int64 in")
        return arr.astype(np.int32)
    if arr.dtype.kind == "f" or str(arr.dtype) == "bfloat16":
        return arr.astype(np.float32, copy=False)  # a float32 weight stays the archive's view
    return arr


def _widened_later(arr) -> bool:
    """A float constant of another width that float32 compute would copy whole now."""
    return arr.nbytes >= MIN_LAZY_BYTES and (arr.dtype == np.float16 or str(arr.dtype) == "bfloat16")


class Emitter:
    """Emission state for one ONNX graph into one ``Subgraph``."""

    def __init__(self, graph: onnx.GraphProto, sub: Subgraph, parent: "Emitter | None" = None):
        self.graph = graph
        self.sub = sub
        self.parent = parent
        # every subgraph of the model, the main one first (control-flow mappers append theirs)
        self.subgraphs: list[Subgraph] = parent.subgraphs if parent is not None else [sub]
        self.values: dict[str, int] = {}  # ONNX name -> tensor index
        self.consts: dict[str, np.ndarray] = {t.name: array_of(t) for t in graph.initializer}
        if parent is not None:  # outer constants are materialised where they are read
            self.consts = {**parent.consts, **self.consts}
        self.infos: dict[str, tuple[int, list | None]] = dict(parent.infos) if parent is not None else {}
        for vi in list(graph.input) + list(graph.value_info) + list(graph.output):
            self.infos[vi.name] = _info(vi)
        # ONNX name -> its dims' symbolic names (dim_param; "" where static or unnamed): one name
        # is one size throughout the graph, so a run-time size can be read off a graph input
        self.dim_names: dict[str, list[str]] = {
            vi.name: [d.dim_param for d in vi.type.tensor_type.shape.dim]
            for vi in list(graph.input) + list(graph.value_info) + list(graph.output)
            if vi.type.tensor_type.HasField("shape")} if parent is None else {}
        self.node: onnx.NodeProto | None = None
        # per-node mappers taking precedence over MAPPERS, keyed by the node's first output (the
        # QDQ pass's int8 kernels and the Q/DQ nodes they absorb: ``qdq_pass``)
        self.node_mappers: dict = {}
        self._const_cache: dict = {}
        self._fresh = 0

    # ------------------------------------------------------------ reading values

    def elem(self, name: str) -> int:
        """The ONNX elem type of a value."""
        if name in self.consts:
            return helper.np_dtype_to_tensor_dtype(self.consts[name].dtype)
        if name in self.infos:
            return self.infos[name][0]
        raise Unsupported(f"the type of {name!r} is unknown (ONNX shape inference found none)")

    def shape(self, name: str) -> list[int] | None:
        """Dims with -1 for dynamic ones; None when the rank is unknown."""
        if name in self.consts:
            return list(self.consts[name].shape)
        return self.infos.get(name, (0, None))[1]

    def rank(self, name: str) -> int:
        s = self.shape(name)
        if s is None:
            raise Unsupported(f"the rank of {name!r} is unknown (ONNX shape inference found none)")
        return len(s)

    def const_value(self, name: str) -> np.ndarray | None:
        return self.consts.get(name) if name else None

    def t(self, name: str) -> int:
        """The tensor index of an ONNX value (constants are materialised on first use)."""
        if name in self.values:
            return self.values[name]
        if name in self.consts:
            arr = self.consts[name]
            if _widened_later(arr):  # a large float16/bfloat16 weight: float32 made when written
                idx = self.sub.add(Tensor(name, TensorType.FLOAT32, list(arr.shape),
                                          Deferred(arr.shape, np.float32, lambda a=arr: a.astype(np.float32))))
            else:
                idx = self.const(to_compute_array(arr, f"constant {name!r}"), name)
            self.values[name] = idx
            return idx
        raise Unsupported(f"value {name!r} is not available (its producer was not converted)")

    # ------------------------------------------------------------ making tensors

    def fresh_name(self, hint: str) -> str:
        self._fresh += 1
        return f"{hint}__{self._fresh}"

    def const(self, arr, name: str | None = None, dtype=None) -> int:
        """A constant tensor (deduplicated by value)."""
        arr = np.asarray(arr, dtype=dtype)
        if arr.dtype == np.int64:
            arr = to_compute_array(arr, name or "a constant")
        if arr.dtype == np.float64:
            arr = arr.astype(np.float32)
        key = (arr.dtype.str, arr.shape, arr.tobytes()) if arr.size <= 64 else None
        if key is not None and key in self._const_cache:
            return self._const_cache[key]
        ttype = {np.dtype(v): k for k, v in NUMPY_OF.items()}[arr.dtype]
        data = arr if arr.nbytes >= MIN_LAZY_BYTES else np.ascontiguousarray(arr)  # large: a view, made contiguous when written
        idx = self.sub.add(Tensor(name or self.fresh_name("const"), ttype, list(arr.shape), data))
        if key is not None:
            self._const_cache[key] = idx
        return idx

    def tmp(self, dtype: int, shape: list[int] | None, hint: str = "t") -> int:
        base = self.node.output[0] if self.node is not None and self.node.output else "t"
        return self.sub.add(Tensor(self.fresh_name(f"{base}/{hint}"), dtype, None if shape is None else list(shape)))

    def out(self, i: int = 0) -> int:
        """The tensor for the current node's output ``i`` (bound to its ONNX name)."""
        name = self.node.output[i]
        if name in self.values:
            return self.values[name]
        dtype = compute_type(self.elem(name), f"output {name!r}")
        idx = self.sub.add(Tensor(name, dtype, self.shape(name)))
        self.values[name] = idx
        return idx

    def bind(self, name: str, idx: int) -> None:
        """Make ONNX value ``name`` the existing tensor ``idx`` (an identity)."""
        self.values[name] = idx

    def dtype_of(self, idx: int) -> int:
        return self.sub.tensors[idx].dtype

    def shape_of(self, idx: int):
        return self.sub.tensors[idx].shape

    def output(self, name: str, io_type: int | None = None, used: set | None = None) -> int:
        """A tensor to list as a subgraph output for ONNX value ``name``: a CAST to ``io_type``,
        or a copy (CAST to the same type) where the value is a subgraph input, a constant or
        already an output; else the value's own tensor, renamed after it."""
        idx = self.t(name)
        t = self.sub.tensors[idx]
        io = t.dtype if io_type is None else io_type
        used = set(self.sub.inputs) if used is None else used
        if io != t.dtype or idx in used or t.data is not None:
            out = self.sub.add(Tensor(name, io, t.shape))
            self.op("CAST", [idx], [out], ("CastOptions", {"in_data_type": t.dtype, "out_data_type": io}))
            idx = out
        else:
            t.name = name
        used.add(idx)
        return idx

    def map_nodes(self, report) -> None:
        """Every node of the graph through its mapper; ``report(node, Unsupported)`` for each one
        TFLite cannot take (its readers are skipped, not reported)."""
        from .mappers import MAPPERS

        poisoned: set[str] = set()
        for node in self.graph.node:
            if any(i in poisoned for i in node.input if i):
                poisoned.update(node.output)
                continue
            self.node = node
            fn = self.node_mappers.get(node.output[0]) if node.output else None
            if fn is None:
                fn = MAPPERS.get(node.op_type) if _mapped_domain(node) else None
            try:
                if fn is None:
                    raise Unsupported("no TFLite mapping (no builtin expresses it)")
                fn(self, node)
            except Unsupported as e:
                report(node, e)
                poisoned.update(node.output)
            except ConversionError:
                raise
            except Exception as e:  # a mapper bug: name the node
                raise ConversionError(f"mapping ONNX node {node.name!r} ({node.op_type}) to TFLite failed: "
                                      f"{type(e).__name__}: {e}", node=node.name) from e
        self.node = None

    # ------------------------------------------------------------ making operators

    def op(self, code: str, inputs: list[int], outputs: list[int], options: tuple[str, dict] | None = None) -> None:
        """Append ``code(inputs) -> outputs``, under the integer rule (``int_compute``): an
        8/16-bit integer never reaches a kernel LiteRT would treat as quantized. Without
        ``options``, the code's default ones (``builtins.default_options``)."""
        if options is None:
            options = default_options(code)
        if emit_with_integer_rule(self, code, inputs, outputs, options):
            return
        self.sub.append_op(Op(code, list(inputs), list(outputs), options))

    def unary(self, code: str, x: int, dtype: int | None = None, shape=None, options=None, hint: str = "t") -> int:
        """A new tensor ``code(x)``."""
        y = self.tmp(self.dtype_of(x) if dtype is None else dtype, self.shape_of(x) if shape is None else shape, hint)
        self.op(code, [x], [y], options)
        return y

    def binary(self, code: str, a: int, b: int, dtype: int | None = None, options=None, hint: str = "t") -> int:
        y = self.tmp(self.dtype_of(a) if dtype is None else dtype, broadcast(self.shape_of(a), self.shape_of(b)), hint)
        self.op(code, [a, b], [y], options)
        return y

    def cast(self, x: int, dtype: int) -> int:
        if self.dtype_of(x) == dtype:
            return x
        return self.unary("CAST", x, dtype, options=("CastOptions", {"in_data_type": self.dtype_of(x),
                                                                    "out_data_type": dtype}), hint="cast")


def _info(vi) -> tuple[int, list | None]:
    t = vi.type.tensor_type
    if not t.HasField("shape"):
        return t.elem_type, None
    return t.elem_type, [d.dim_value if d.HasField("dim_value") else -1 for d in t.shape.dim]
