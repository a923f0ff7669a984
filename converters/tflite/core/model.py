"""The TFLite model pt2x builds before writing it: tensors, operators and subgraphs.

Plain data. ``ops_*`` modules append to a ``Subgraph`` through ``emit.Emitter``; the passes
(``pipeline.py``) rewrite the operator list through ``Subgraph``'s edit methods, which keep its
producers/readers index (``Subgraph.uses``) current; ``writer.py`` serialises a ``Program``.
A tensor's ``shape`` holds ints with ``-1`` for a dimension known only at run time (its
``shape_signature``); ``None`` means the rank itself is unknown.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

__all__ = ["TensorType", "NUMPY_OF", "TYPE_OF_NUMPY", "Quantization", "Tensor", "Op", "Uses", "Subgraph", "Program"]


class TensorType:
    """TFLite's TensorType values (a fact of LiteRT's schema)."""

    FLOAT32, FLOAT16, INT32, UINT8, INT64, STRING, BOOL, INT16, COMPLEX64, INT8, FLOAT64 = range(11)


NUMPY_OF = {
    TensorType.FLOAT32: np.float32, TensorType.FLOAT16: np.float16, TensorType.INT32: np.int32,
    TensorType.UINT8: np.uint8, TensorType.INT64: np.int64, TensorType.BOOL: np.bool_,
    TensorType.INT16: np.int16, TensorType.INT8: np.int8, TensorType.FLOAT64: np.float64,
}
TYPE_OF_NUMPY = {np.dtype(v): k for k, v in NUMPY_OF.items()}


@dataclass(frozen=True)
class Quantization:
    """A quantized tensor's parameters, as LiteRT reads them: real = scale * (q - zero_point),
    one scale and zero point per tensor, or one each along ``dimension`` (per channel)."""

    scale: tuple[float, ...]
    zero_point: tuple[int, ...]
    dimension: int = 0

    @property
    def per_tensor(self) -> bool:
        return len(self.scale) == 1


@dataclass
class Tensor:
    name: str
    dtype: int  # TensorType
    shape: list[int] | None  # -1: dynamic; None: unknown rank
    data: np.ndarray | None = None  # constant contents (C-contiguous, of ``dtype``)
    quant: Quantization | None = None  # set on the int8/int32 tensors of quantized kernels (``qdq_*``)

    @property
    def rank(self) -> int | None:
        return None if self.shape is None else len(self.shape)


@dataclass
class Op:
    code: str  # BuiltinOperator name, e.g. "ADD"
    inputs: list[int]  # tensor indices; -1 for an omitted optional input
    outputs: list[int]
    options: tuple[str, dict] | None = None  # (BuiltinOptions member, {field: value})
    version: int = 1  # its operator code's version, where its tensor types need more (LiteRT's op_version rules)


# TFLite's ActivationFunctionType values (a fact of LiteRT's schema), by the name of the operator
# a fused activation stands for; NONE: no activation
ACTIVATION_CODE = {"NONE": 0, "RELU": 1, "RELU_N1_TO_1": 2, "RELU6": 3}


class Uses:
    """The producer of each tensor of a subgraph and its readers (an op once per input slot
    reading it, in no set order: a pass that needs op order sorts by position)."""

    def __init__(self, ops: list[Op]):
        self.producer: dict[int, Op] = {}
        self.readers: dict[int, list[Op]] = {}
        for op in ops:
            self.add(op)

    def add(self, op: Op) -> None:
        for i in op.inputs:
            self.readers.setdefault(i, []).append(op)
        for o in op.outputs:
            self.producer[o] = op

    def drop(self, op: Op) -> None:
        for i in op.inputs:
            rs = self.readers[i]
            del rs[next(k for k, r in enumerate(rs) if r is op)]
        for o in op.outputs:
            if self.producer.get(o) is op:
                del self.producer[o]

    def count(self, t: int) -> int:
        """How many input slots read tensor ``t``."""
        return len(self.readers.get(t, ()))


@dataclass
class Subgraph:
    """A subgraph's tensors and operators. The operator list is edited only through the methods
    below (``append_op``, ``insert_op``, ``remove_op``, ``rewire``, ``set_ops``), which keep the
    producers/readers index ``uses`` current; it is built on first use."""

    name: str
    tensors: list[Tensor] = field(default_factory=list)
    ops: list[Op] = field(default_factory=list)
    inputs: list[int] = field(default_factory=list)
    outputs: list[int] = field(default_factory=list)
    _uses: Uses | None = field(default=None, init=False, repr=False, compare=False)

    @property
    def uses(self) -> Uses:
        if self._uses is None:
            self._uses = Uses(self.ops)
        return self._uses

    def add(self, t: Tensor) -> int:
        self.tensors.append(t)
        return len(self.tensors) - 1

    def append_op(self, op: Op) -> Op:
        self.ops.append(op)
        if self._uses is not None:
            self._uses.add(op)
        return op

    def insert_op(self, pos: int, op: Op) -> None:
        self.ops.insert(pos, op)
        if self._uses is not None:
            self._uses.add(op)

    def remove_op(self, op: Op) -> None:
        del self.ops[self.position(op)]
        if self._uses is not None:
            self._uses.drop(op)

    def position(self, op: Op) -> int:
        """The index of ``op`` in ``ops``."""
        return next(k for k, o in enumerate(self.ops) if o is op)

    def rewire(self, op: Op, inputs: list[int] | None = None, outputs: list[int] | None = None) -> None:
        """Give ``op`` new inputs and/or outputs."""
        if self._uses is not None:
            self._uses.drop(op)
        if inputs is not None:
            op.inputs = inputs
        if outputs is not None:
            op.outputs = outputs
        if self._uses is not None:
            self._uses.add(op)

    def set_ops(self, ops: list[Op]) -> None:
        """The operator list becomes ``ops`` (a reordering, with ops dropped or added)."""
        if self._uses is not None:
            old, new = {id(op) for op in self.ops}, {id(op) for op in ops}
            for op in self.ops:
                if id(op) not in new:
                    self._uses.drop(op)
            for op in ops:
                if id(op) not in old:
                    self._uses.add(op)
        self.ops = list(ops)


@dataclass
class Program:
    subgraphs: list[Subgraph]
    description: str = "pt2x"
    metadata: dict[str, bytes] = field(default_factory=dict)  # name -> bytes (a buffer each)
    signature_inputs: list[str] = field(default_factory=list)  # names of subgraph 0's inputs
    signature_outputs: list[str] = field(default_factory=list)
