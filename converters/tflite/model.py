"""The TFLite model pt2x builds before writing it: tensors, operators and subgraphs.

Plain data. ``ops_*`` modules append to a ``Subgraph`` through ``emit.Emitter``; the layout
pass (``layout.py``) rewrites the operator list; ``writer.py`` serialises a ``Program``.
A tensor's ``shape`` holds ints with ``-1`` for a dimension known only at run time (its
``shape_signature``); ``None`` means the rank itself is unknown.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

__all__ = ["TensorType", "NUMPY_OF", "TYPE_OF_NUMPY", "Tensor", "Op", "Subgraph", "Program"]


class TensorType:
    """TFLite's TensorType values (a fact of LiteRT's schema)."""

    FLOAT32, FLOAT16, INT32, UINT8, INT64, STRING, BOOL, INT16, COMPLEX64, INT8, FLOAT64 = range(11)


NUMPY_OF = {
    TensorType.FLOAT32: np.float32, TensorType.FLOAT16: np.float16, TensorType.INT32: np.int32,
    TensorType.UINT8: np.uint8, TensorType.INT64: np.int64, TensorType.BOOL: np.bool_,
    TensorType.INT16: np.int16, TensorType.INT8: np.int8, TensorType.FLOAT64: np.float64,
}
TYPE_OF_NUMPY = {np.dtype(v): k for k, v in NUMPY_OF.items()}


@dataclass
class Tensor:
    name: str
    dtype: int  # TensorType
    shape: list[int] | None  # -1: dynamic; None: unknown rank
    data: np.ndarray | None = None  # constant contents (C-contiguous, of ``dtype``)

    @property
    def rank(self) -> int | None:
        return None if self.shape is None else len(self.shape)


@dataclass
class Op:
    code: str  # BuiltinOperator name, e.g. "ADD"
    inputs: list[int]  # tensor indices; -1 for an omitted optional input
    outputs: list[int]
    options: tuple[str, dict] | None = None  # (BuiltinOptions member, {field: value})
    origin: str = ""  # the ONNX node it came from (messages)


@dataclass
class Subgraph:
    name: str
    tensors: list[Tensor] = field(default_factory=list)
    ops: list[Op] = field(default_factory=list)
    inputs: list[int] = field(default_factory=list)
    outputs: list[int] = field(default_factory=list)

    def add(self, t: Tensor) -> int:
        self.tensors.append(t)
        return len(self.tensors) - 1


@dataclass
class Program:
    subgraphs: list[Subgraph]
    description: str = "pt2x"
    metadata: dict[str, bytes] = field(default_factory=dict)  # name -> bytes (a buffer each)
    signature_inputs: list[str] = field(default_factory=list)  # names of subgraph 0's inputs
    signature_outputs: list[str] = field(default_factory=list)
