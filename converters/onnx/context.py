"""``Ctx``: what an ONNX lowering sees while one graph is being emitted.

Invariant: every program tensor value lives in ONNX with exactly its metadata dtype and
is reached through ``ctx.t(ref)``; symbolic ints are 0-d int64 tensors. Lowerings build
nodes with ``ctx.op`` and return the ONNX name(s) of the node's outputs; the shared driver
(``converters/aten/lower.py``) then renames the values they made after the program's values so
graphs stay readable. Every node made while lowering an ATen node (in its subgraphs too, and in
the write-backs an in-place node needs) is stamped with that node's origin when the lowering
ends (``graph_tools.stamp``: the ATen node's name and target, its module path).
bfloat16/float16 arithmetic is computed in float32 and rounded back per op (ONNX Runtime
CPU lacks most bf16 kernels; torch CPU also accumulates these in float32).
"""

from __future__ import annotations

import numpy as np

from onnx import TensorProto, helper

from .. import limits
from ..aten import dtypes
from ..aten.args import SymRef, TensorRef
from ..aten.dtypes import ST
from ..aten.graph import GraphView, TensorInfo
from ..aten.lower import LoweringState, Names
from ..errors import ConversionError, NotConverted, Unsupported
from .graph_tools import origin_entries, origin_of, stamp_entries, subgraphs
from .lazy_initializers import MIN_LAZY_BYTES, LazyInitializers

__all__ = ["Ctx", "ONNX_TYPE", "onnx_type"]

ONNX_TYPE = {
    ST.FLOAT: TensorProto.FLOAT, ST.BYTE: TensorProto.UINT8, ST.CHAR: TensorProto.INT8,
    ST.UINT16: TensorProto.UINT16, ST.SHORT: TensorProto.INT16, ST.INT: TensorProto.INT32,
    ST.LONG: TensorProto.INT64, ST.BOOL: TensorProto.BOOL, ST.HALF: TensorProto.FLOAT16,
    ST.DOUBLE: TensorProto.DOUBLE, ST.UINT32: TensorProto.UINT32, ST.UINT64: TensorProto.UINT64,
    ST.COMPLEXFLOAT: TensorProto.COMPLEX64, ST.COMPLEXDOUBLE: TensorProto.COMPLEX128,
    ST.BFLOAT16: TensorProto.BFLOAT16, ST.FLOAT8E4M3FN: TensorProto.FLOAT8E4M3FN,
    ST.FLOAT8E4M3FNUZ: TensorProto.FLOAT8E4M3FNUZ, ST.FLOAT8E5M2: TensorProto.FLOAT8E5M2,
    ST.FLOAT8E5M2FNUZ: TensorProto.FLOAT8E5M2FNUZ,
}

_LOW_FLOAT = (ST.HALF, ST.BFLOAT16)
_SMALL_INT = (ST.BYTE, ST.CHAR, ST.SHORT, ST.UINT16)


def onnx_type(st: ST) -> int:
    try:
        return ONNX_TYPE[st]
    except KeyError:
        raise Unsupported(f"dtype {ST(st).name} has no ONNX type") from None


def stored_bytes(arr: np.ndarray) -> int:
    """Bytes an array spans in its buffer: ``itemsize * (1 + sum((n - 1) * |stride|))``.
    A stride-0 (expanded) view of one element spans one element whatever its shape."""
    if arr.size == 0:
        return 0
    return arr.itemsize + sum((n - 1) * abs(st) for n, st in zip(arr.shape, arr.strides))


def array_bytes(shape, itemsize: int) -> int:
    """Bytes of a C-contiguous array of ``shape`` (Python ints: no overflow); refuses a
    negative or non-integer dim."""
    n = itemsize
    for s in shape:
        if not isinstance(s, (int, np.integer)) or isinstance(s, bool) or s < 0:
            raise ConversionError(f"cannot materialise an array of shape {list(shape)!r}")
        n *= int(s)
    return n


class Ctx:
    """Emission state for one graph (``root`` holds initializers shared by all graphs); the
    ``lower.Target`` the shared driver lowers through (``state``: its bookkeeping, shared
    by all graphs).

    Constants are bounded: the root's ``budget`` is ``limits.MAX_CONSTANT_BYTES`` plus
    ``limits.WEIGHT_BYTES_FACTOR`` times the bytes the weights occupy in the archive;
    ``const_array`` counts every initializer against it and lowerings ``reserve`` bytes
    before they build an array from sizes found in the program."""

    backend = "onnx"

    def __init__(self, view: GraphView, opset: int, names: Names, root: "Ctx | None" = None,
                 weights: dict | None = None, state: LoweringState | None = None,
                 lazy: LazyInitializers | None = None):
        self.view = view
        self.opset = opset
        self.names = names
        self.root = root or self
        self.nodes: list = []
        self.env: dict[str, str] = {}
        self.node = None  # the program node being lowered
        self._origin = None  # (the outermost program node being lowered, where its nodes start)
        self.state = root.state if root is not None else state
        if root is None:
            self.initializers: list = []
            self.consts: dict[str, np.ndarray] = {}  # ONNX name -> value, for folding
            self._const_cache: dict = {}
            self.weights = weights or {}
            self.lazy = lazy  # where large constants stay as arrays (None: copied into the graph)
            self.materialised = 0  # bytes of constants made so far
            self.budget = limits.MAX_CONSTANT_BYTES + limits.WEIGHT_BYTES_FACTOR * sum(
                stored_bytes(np.asarray(w.array)) for w in self.weights.values())
            self.emitted = 0  # ONNX nodes made for the program node being lowered

    # ---------------------------------------------------------------- values

    def info(self, ref) -> TensorInfo:
        return self.view.tensor(ref.name if isinstance(ref, TensorRef) else ref)

    def dtype(self, ref) -> ST:
        if isinstance(ref, SymRef):
            return {"int": ST.LONG, "bool": ST.BOOL, "float": ST.DOUBLE}[ref.kind]
        return self.info(ref).dtype

    def rank(self, ref) -> int:
        return self.info(ref).rank

    def out_info(self, i: int = 0) -> TensorInfo:
        from ..aten.graph import output_names

        return self.view.tensor(output_names(self.node)[i])

    def t(self, ref, st: ST | None = None) -> str:
        """ONNX name of a ``TensorRef``/``SymRef``/number, cast to ``st`` when given."""
        if isinstance(ref, (TensorRef, SymRef)):
            name = self.lookup(ref.name)
            if st is not None:
                name = self.cast(name, self.dtype(ref), st)
            return name
        if isinstance(ref, str):
            return self.lookup(ref)
        if ref is None:
            raise Unsupported("a required tensor argument is None")
        return self.const(ref, st if st is not None else dtypes.result_type(ref))

    def lookup(self, name: str) -> str:
        if name in self.env:
            return self.env[name]
        r = self.root
        if name in self.state.poisoned:
            raise NotConverted(f"value {name!r} comes from a node that was not converted")
        if name in r.weights:
            if name in r.env:
                return r.env[name]
            w = r.weights[name]
            onnx_name = self.const_array(np.asarray(w.array), name=w.fqn)
            r.env[name] = onnx_name
            self.env[name] = onnx_name
            return onnx_name
        raise ConversionError(f"value {name!r} used before it is defined")

    def value_of(self, ref) -> np.ndarray | None:
        """The constant value of a ref (weights, folded constants, numbers), else None."""
        if isinstance(ref, (int, float, bool)):
            return np.asarray(ref)
        if not isinstance(ref, TensorRef):
            return None
        r = self.root
        name = self.env.get(ref.name)
        if name is None:
            w = r.weights.get(ref.name)
            if w is None:
                return None
            v = np.asarray(w.array)
            self.reserve(v.nbytes, f"weight {w.fqn!r}", account=False)  # folding copies it
            return v
        return r.consts.get(name)

    def foldable(self, ref) -> np.ndarray | None:
        """``value_of(ref)`` when folding an op over it stores no second copy of a large
        constant: small values, or values this node is the only reader of (a parameter
        tied to an embedding is also read elsewhere, so its transpose stays a node, which
        ONNX Runtime folds at load time)."""
        v = self.value_of(ref)
        if v is None or v.size <= 4096 or not isinstance(ref, TensorRef):
            return v
        readers = self.view.consumers.get(ref.name, [])
        return v if len(readers) <= 1 else None

    # ------------------------------------------------------------- constants

    def reserve(self, nbytes: int, what: str = "a constant", *, account: bool = True) -> None:
        """Count ``nbytes`` of constants against the conversion's budget (``account=False``:
        only check they would fit); raises ``ConversionError`` past it."""
        r = self.root
        if r.materialised + nbytes > r.budget:
            raise ConversionError(
                f"{what} of {nbytes} bytes would pass the conversion's constant budget of {r.budget} bytes "
                f"(converters.limits.MAX_CONSTANT_BYTES + WEIGHT_BYTES_FACTOR x the weights' stored bytes; "
                f"{r.materialised} used)")
        if account:
            r.materialised += nbytes

    def reserve_array(self, shape, itemsize: int = 8, what: str = "a constant") -> None:
        """Check that an array of ``shape`` (sizes taken from the program) would fit the budget
        before a lowering builds it; it is counted when ``const_array`` stores it."""
        self.reserve(array_bytes(shape, itemsize), what, account=False)

    def const_array(self, arr: np.ndarray, name: str = "const") -> str:
        """An initializer holding ``arr``. With a ``lazy`` store, an array of ``MIN_LAZY_BYTES``
        and more is kept as it is (a view of the archive's map stays one) behind a skeleton
        initializer, and the writer copies it into the file once; else its bytes are copied in."""
        r = self.root
        arr = np.asarray(arr)
        self.reserve(arr.nbytes, f"constant {name!r}")
        st = dtypes.from_numpy(arr.dtype)
        onnx_name = r.names.fresh(name)
        if r.lazy is not None and arr.nbytes >= MIN_LAZY_BYTES:
            t = r.lazy.skeleton(onnx_name, arr, onnx_type(st))
        else:
            if not arr.flags.c_contiguous:
                arr = arr.copy(order="C")  # (np.ascontiguousarray would turn 0-d into 1-d)
            t = helper.make_tensor(onnx_name, onnx_type(st), arr.shape, arr.tobytes(), raw=True)
        r.initializers.append(t)
        r.consts[onnx_name] = arr
        return onnx_name

    def input_default(self, name: str, arr: np.ndarray) -> None:
        """An initializer named like graph input ``name``: the value it holds when a caller
        does not feed it. Not a constant: nothing folds over it (it is not in ``consts``)."""
        r = self.root
        arr = np.asarray(arr)
        st = dtypes.from_numpy(arr.dtype)
        if r.lazy is not None and arr.nbytes >= MIN_LAZY_BYTES:
            r.initializers.append(r.lazy.skeleton(name, arr, onnx_type(st)))
            return
        if not arr.flags.c_contiguous:
            arr = arr.copy(order="C")
        r.initializers.append(helper.make_tensor(name, onnx_type(st), arr.shape, arr.tobytes(), raw=True))

    def const(self, value, st: ST) -> str:
        """A (cached) constant of dtype ``st`` from a number or nested list/array."""
        arr = np.asarray(value).astype(dtypes.to_numpy(st))
        r = self.root
        key = (st, arr.shape, arr.tobytes()) if arr.size <= 64 else None
        if key is not None and key in r._const_cache:
            return r._const_cache[key]
        name = self.const_array(arr, "c_" + ("_".join(str(x) for x in arr.ravel()[:4]) if arr.size <= 4 else "arr"))
        if key is not None:
            r._const_cache[key] = name
        return name

    def ints(self, values) -> str:
        """A 1-D int64 tensor from ints and ``SymRef``s (a constant when all are static)."""
        if all(isinstance(v, (int, np.integer)) for v in values):
            return self.const(np.asarray(values, dtype=np.int64).reshape(-1), ST.LONG)
        parts, run = [], []
        for v in values:
            if isinstance(v, (int, np.integer)):
                run.append(int(v))
                continue
            if run:
                parts.append(self.const(np.asarray(run, np.int64), ST.LONG))
                run = []
            parts.append(self.unsqueeze0(self.t(v, ST.LONG)))
        if run:
            parts.append(self.const(np.asarray(run, np.int64), ST.LONG))
        return parts[0] if len(parts) == 1 else self.op("Concat", *parts, axis=0)

    # ------------------------------------------------------------------ nodes

    def op(self, op_type: str, *inputs, outputs: int = 1, domain: str = "", **attrs):
        """Emit one node; returns its output name (or a list when ``outputs`` > 1)."""
        r = self.root
        r.emitted += 1
        if r.emitted > limits.MAX_NODES_PER_LOWERING:
            raise ConversionError(f"more than converters.limits.MAX_NODES_PER_LOWERING="
                                  f"{limits.MAX_NODES_PER_LOWERING} ONNX nodes for one program node")
        base = self.node.name if self.node is not None and self.node.name else op_type.lower()
        outs = [self.names.fresh(base) for _ in range(outputs)]
        ins = ["" if i is None else i for i in inputs]
        while ins and ins[-1] == "":
            ins.pop()
        attrs = {k: v for k, v in attrs.items() if v is not None}
        self.nodes.append(helper.make_node(op_type, ins, outs, name=outs[0], domain=domain or None, **attrs))
        return outs[0] if outputs == 1 else outs

    def cast(self, name: str, src: ST, dst: ST) -> str:
        if src == dst:
            return name
        v = self.root.consts.get(name)
        if v is not None and self.root.lazy is not None and v.nbytes >= MIN_LAZY_BYTES:
            return self.op("Cast", name, to=onnx_type(dst))  # a weight keeps its dtype in the file (bf16 stays bf16)
        if v is not None:  # fold: weights are stored in the dtype they are computed in
            self.reserve(v.size * dtypes.to_numpy(dst).itemsize, f"{name!r} cast", account=False)
            if v.size <= 64:
                return self.const(v.astype(dtypes.to_numpy(dst)), dst)
            return self.const_array(v.astype(dtypes.to_numpy(dst)), name=name)
        return self.op("Cast", name, to=onnx_type(dst))

    def compute_type(self, st: ST) -> ST:
        """Where ONNX Runtime CPU lacks kernels: low floats in float32, small ints in int32."""
        if st in _LOW_FLOAT:
            return ST.FLOAT
        if st in _SMALL_INT:
            return ST.INT
        return st

    def unsqueeze0(self, name: str) -> str:
        return self.op("Unsqueeze", name, self.const(np.array([0], np.int64), ST.LONG))

    def shape(self, name: str, start: int | None = None, end: int | None = None) -> str:
        return self.op("Shape", name, start=start, end=end)

    def dim(self, ref, axis: int) -> str:
        """Dim ``axis`` of a tensor as a 1-D int64 of length 1 (a constant when static)."""
        info = self.info(ref)
        axis = axis % info.rank
        s = info.shape[axis]
        if isinstance(s, int):
            return self.const(np.array([s], np.int64), ST.LONG)
        return self.shape(self.t(ref), axis, axis + 1)

    def shape_of(self, ref) -> str:
        info = self.info(ref)
        if info.is_static:
            return self.const(np.array(info.shape, np.int64).reshape(-1), ST.LONG)
        return self.shape(self.t(ref))

    # ------------------------------------------- what the driver needs (lower.Target)

    def begin_node(self, node) -> int:
        if self._origin is None:  # a write-back lowers nodes inside the current one: X stays the origin
            self._origin = (node, len(self.nodes))
        self.node = node
        self.root.emitted = 0
        return len(self.nodes)

    def end_node(self) -> None:
        if self._origin is not None and len(self.nodes) > self._origin[1]:
            node, mark = self._origin
            _stamp_all(self.nodes[mark:], node)
        self._origin = None
        self.node = None

    def made_since(self, mark: int) -> set[str]:
        return {o for n in self.nodes[mark:] for o in n.output}

    def discard_since(self, mark: int) -> None:
        del self.nodes[mark:]

    def rename_since(self, mark: int, old: str, new: str) -> None:
        for n in self.nodes[mark:]:
            for i, o in enumerate(n.output):
                if o == old:
                    n.output[i] = new
                    if n.name == old:
                        n.name = new
            for i, x in enumerate(n.input):
                if x == old:
                    n.input[i] = new

    # ------------------------------------------------------------- subgraphs

    def child(self, view: GraphView) -> "Ctx":
        c = Ctx(view, self.opset, self.names, root=self.root)
        c.env = dict(self.env)
        return c


def module_path(node) -> str | None:
    """The module ``node`` came from: the innermost ``nn_module_stack`` entry's path (entries
    ``key,path,type`` joined by ``;``; "" is the exported module itself), None when unrecorded."""
    stack = (node.metadata or {}).get("nn_module_stack")
    if not stack:
        return None
    parts = stack.rsplit(";", 1)[-1].split(",", 2)
    return parts[1] if len(parts) == 3 else None


def _stamp_all(nodes, aten_node, entries=None) -> None:
    """Stamp each of ``nodes`` not stamped yet (and the nodes of its subgraphs) with ``aten_node``."""
    if entries is None:
        entries = origin_entries(aten_node.name or "", str(aten_node.target), module_path(aten_node))
    for n in nodes:
        if not n.metadata_props or not origin_of(n):
            stamp_entries(n, entries)
        for g in subgraphs(n):
            _stamp_all(g.node, aten_node, entries)
