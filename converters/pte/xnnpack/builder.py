"""One partition of the plan -> its ``XGraph``: the values, the layout, the constants, the externals.

Every tensor of the partition is held as a ``Ref``: its XNNPACK value, the sizes it has in torch's
order, and its layout there: ``std`` (torch's order) or ``nhwc`` (a 4-D tensor stored N, H, W, C,
the order XNNPACK's convolutions and pools take). ``tensor(t, layout)`` gives a tensor in the
layout an op asks for: a ``StaticTranspose`` converts it (once per tensor and layout), and a view
(a tensor sharing another's storage with other sizes) is a ``StaticReshape`` of it in ``std``.
The partition's inputs are read in ``std`` and its outputs written in ``std``: the transposes
at the delegate's edges are pt2x's choice, as on the TFLite side.

Constants (weights, and what is folded from them: a transposed weight, a filter with a batch norm
folded in, a scalar operand) are ``Blob``s, each a named blob of the program, shared by every
partition that reads it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...errors import ConversionError
from ..program import ListValue, ScalarValue, TensorValue
from .constants import Blob, as_float16, literal_blob, weight_blob
from .graph import FP16, FP32, XGraph, XValue
from .index import PlanIndex
from .rules import FLOAT, HALF
from .schedule import schedule

__all__ = ["Builder", "Ref", "STD", "NHWC", "TO_NHWC", "TO_STD", "literal"]

STD, NHWC = "std", "nhwc"
TO_NHWC = (0, 2, 3, 1)  # the stored dims of an nhwc tensor, in torch's dims
TO_STD = (0, 3, 1, 2)


@dataclass
class Ref:
    value: XValue
    sizes: tuple  # torch's order
    layout: str


def literal(v):
    """A call argument's Python value: a number, a bool, a string, None, or a list of ints;
    ``ConversionError`` for a run-time value (the op's check should have refused it)."""
    if isinstance(v, ListValue):
        return [literal(x) for x in v.items]
    if isinstance(v, ScalarValue):
        if v.kind == "Null":
            return None
        if v.name:
            raise ConversionError(f"a run-time value ({v.name}) where XNNPACK needs a literal")
        return v.value
    raise ConversionError(f"{v!r} is not a literal")


def _keeps_order(dims: tuple, perm: tuple) -> bool:
    """Whether transposing ``dims`` by ``perm`` moves no byte (its dims other than 1 stay in order)."""
    moved = [p for p in perm if dims[p] != 1]
    return moved == sorted(moved)


_NAMES = {FP32: "float32", FP16: "float16"}


def _float_dtype(calls) -> int:
    """FP16 for a partition of float16 tensors, FP32 for one of float32 (``ConversionError`` for both)."""
    kinds = {t.scalar_type for c in calls for t in list(c.reads) + list(c.writes)} & {FLOAT, HALF}
    if kinds == {FLOAT, HALF}:
        raise ConversionError("a partition of float32 and float16 tensors")
    return FP16 if kinds == {HALF} else FP32


def stored(sizes: tuple, layout: str) -> tuple:
    return tuple(sizes[p] for p in TO_NHWC) if layout == NHWC else tuple(sizes)


class Builder:
    def __init__(self, index: PlanIndex, calls: list, blobs: dict, handle: int = 0):
        self.ix = index
        self.calls = calls
        self.members = {id(c) for c in calls}
        self.blobs = blobs  # key -> Blob: the program's named blobs so far
        self.g = XGraph()
        self.refs: dict = {}  # storage -> Ref
        self._converted: dict = {}  # (storage, sizes, layout) -> XValue
        self.absorbed: set = set()  # ids of calls a fusion took into an earlier node
        self.inputs: list = []  # the partition's input storages, in external id order
        self.dims_of: dict = {}  # an emitter's own tensor -> which of its dims are run-time
        self._reshaped: dict = {}  # id of a reshape's result -> the value it reshapes
        self.handle = handle  # the debug handle of the call being emitted
        self.dequantized: dict = {}  # a dequantize's float result (storage) -> its QuantOp (int8.py)
        self.g.float_dtype = _float_dtype(calls)

    # ------------------------------------------------------------------ reading

    def in_group(self, call) -> bool:
        return call is not None and id(call) in self.members

    def tensor(self, t: TensorValue, layout: str = STD) -> XValue:
        """``t`` (its own sizes) in ``layout``."""
        s = t.storage()
        if s.weight is not None or s not in self.refs and self.ix.constant_view(t) is not None:
            return self.constant_tensor(t, layout)
        ref = self.refs.get(s)
        if ref is None:
            ref = self._input(s)
        if ref.sizes == tuple(t.sizes) and ref.layout == layout:
            return ref.value
        key = (s, tuple(t.sizes), layout)
        if key not in self._converted:
            self._converted[key] = self._convert(ref, t, layout)
        return self._converted[key]

    def ref(self, t: TensorValue) -> Ref:
        """How ``t``'s storage is held now (its producer's layout), defining an input if new."""
        s = t.storage()
        if s.weight is not None:
            raise ConversionError("a constant has no layout of its own")
        return self.refs.get(s) or self._input(s)

    def _input(self, s: TensorValue) -> Ref:
        if s in self.dequantized:  # read as float: a Convert of the int8 value it dequantizes
            src = self.ref(self.dequantized[s].source)
            v = self.g.value(src.value.dims)
            self.node("XNNConvert", "_XNNNode1x1", input_id=src.value.id, output_id=v.id, flags=0)
            self.refs[s] = Ref(v, src.sizes, src.layout)
            return self.refs[s]
        v = self.g.value(s.sizes)
        self.g.inputs.append(v)
        self.inputs.append(s)
        self.refs[s] = Ref(v, tuple(s.sizes), STD)
        return self.refs[s]

    def _convert(self, ref: Ref, t: TensorValue, layout: str) -> XValue:
        v, sizes = ref.value, tuple(t.sizes)
        if ref.layout == NHWC and _keeps_order(v.dims, TO_STD) and self._shape(t) is not None:
            if ref.sizes != sizes or layout == STD:  # N, 1, 1, C holds the bytes of N, C, 1, 1
                v = self.reshape(v, self._shape(t), sizes)
        else:
            if ref.layout == NHWC:
                v = self.transpose(v, TO_STD)
            if ref.sizes != sizes:
                if self._shape(t) is None:
                    raise ConversionError(f"a view of {t.name!r} with more than one run-time dim")
                v = self.reshape(v, self._shape(t), sizes)
        if layout == NHWC:
            v = self.transpose(v, TO_NHWC)
        return v

    def dynamic_dims(self, t: TensorValue) -> tuple | None:
        """Which of ``t``'s dims are run-time (None: not known)."""
        return self.dims_of[t] if t in self.dims_of else self.ix.dynamic_dims(t)

    def _shape(self, t: TensorValue) -> list | None:
        """``t``'s sizes as a reshape writes them: a run-time dim is 0 (inferred; one at most)."""
        dyn = self.dynamic_dims(t)
        if dyn is None or sum(dyn) > 1:
            return None
        return [0 if d else n for n, d in zip(t.sizes, dyn)]

    def transpose(self, v: XValue, perm: tuple) -> XValue:
        """A ``StaticTranspose`` of ``v``."""
        out = self.g.value(tuple(v.dims[p] for p in perm), like=v)
        self.g.node("XNNStaticTranspose", "XNNStaticTranspose", self.handle, num_dims=len(perm), perm=list(perm),
                    input_id=v.id, output_id=out.id, flags=0)
        return out

    def reshape(self, v: XValue, new_shape: tuple, dims: tuple) -> XValue:
        """A ``StaticReshape`` of ``v`` to ``new_shape`` (a 0 is inferred at run time); ``dims``:
        the new value's (upper-bound) dims. A reshape of a reshape reads the first one's input."""
        v = self._reshaped.get(v.id, v)
        out = self.g.value(dims, like=v)
        self._reshaped[out.id] = v
        self.g.node("XNNStaticReshape", "XNNStaticReshape", self.handle, num_dims=len(new_shape),
                    new_shape=[int(d) for d in new_shape], input_id=v.id, output_id=out.id, flags=0)
        return out

    # ------------------------------------------------------------------ constants

    def blob(self, blob: Blob) -> Blob:
        """The program's blob of this key (the first made), so partitions share it."""
        return self.blobs.setdefault(blob.key, blob)

    def constant(self, blob: Blob, dims: tuple, dtype: int | None = None, quant=None) -> XValue:
        """A constant value of the blob's bytes (of XNNPACK ``dtype`` and ``quant``; by default the
        partition's float datatype, a float32 blob rounded to float16 for a float16 partition)."""
        if dtype is None:
            dtype = self.g.float_dtype
            if dtype == FP16 and blob.dtype == np.float32:
                blob = as_float16(blob)
            if (dtype == FP16) != (blob.dtype == np.float16):
                raise ConversionError(f"constant {blob.key!r} of {blob.dtype} in a partition of {_NAMES[dtype]}")
        blob = self.blob(blob)
        if int(np.prod(dims, dtype=np.int64)) * blob.dtype.itemsize != blob.nbytes:
            raise ConversionError(f"constant {blob.key!r}: {blob.nbytes} bytes for dims {dims}")
        return self.g.value(dims, constant=self.g.constant(blob.key, blob.nbytes), dtype=dtype, quant=quant)

    def constant_tensor(self, t: TensorValue, layout: str = STD) -> XValue:
        """A weight (or a transpose of one) as a constant value, in ``layout``."""
        found = self.ix.constant_view(t)  # a static view of a weight comes reshaped, a view of its bytes
        if found is None:
            raise ConversionError(f"constant {t.name!r} is a reshape of a transposed weight (it would be copied whole)")
        key, arr = found
        if layout == NHWC:
            arr, key = arr.transpose(TO_NHWC), key + "|nhwc"
        return self.constant(weight_blob(key, arr), arr.shape)

    def scalar_constant(self, x: float) -> XValue:
        """A number as a one-element tensor (broadcast against any operand)."""
        x = float(np.float32(x))
        return self.constant(literal_blob(f"pt2x.scalar|{np.float32(x).tobytes().hex()}", [x]), (1,))

    # ------------------------------------------------------------------ writing

    def define(self, t: TensorValue, layout: str = STD, sizes: tuple | None = None) -> XValue:
        """A new value holding ``t`` (or ``sizes``, torch's order) in ``layout``."""
        sizes = tuple(t.sizes if sizes is None else sizes)
        v = self.g.value(stored(sizes, layout))
        self.bind(t, v, layout, sizes)
        return v

    def bind(self, t: TensorValue, v: XValue, layout: str, sizes: tuple | None = None) -> None:
        """``t`` is ``v`` (a fusion's result, or an op that changes nothing)."""
        self.refs[t.storage()] = Ref(v, tuple(t.sizes if sizes is None else sizes), layout)

    def node(self, kind: str, table: str, **fields):
        return self.g.node(kind, table, self.handle, **fields)

    def finish(self, outputs: list) -> XGraph:
        """Mark the partition's outputs (storages, written in ``std`` with their own sizes)."""
        for s in outputs:
            v = self.tensor(s, STD)
            if v in self.g.inputs or v in self.g.outputs or v.constant:
                copy = self.g.value(v.dims, like=v)
                self.node("XNNCopy", "_XNNNode1x1", input_id=v.id, output_id=copy.id, flags=0)
                v = copy
            self.g.outputs.append(v)
        self.g.mark_externals()
        self.g.drop_unread()
        schedule(self.g)
        return self.g
