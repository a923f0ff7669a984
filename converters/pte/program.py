"""The ExecuTorch program pt2x builds before writing it: one execution plan (``forward``).

``Values`` are the plan's ``EValue``s in order: tensors (a planned activation or input, a
weight's constant, or a view sharing another tensor's storage), scalars (Int, Double, Bool,
String, Null) and lists (an ``IntList`` or ``TensorList`` holds the indices of other values).
``Plan.calls`` is the chain, in order: ``Call``s are its ``KernelCall``s (an operator index and
value indices in the kernel's schema order, its ``out`` tensors, then the returned value);
``JumpFalse`` and ``Move`` are the control-flow instructions a ``cond`` becomes
(``control_flow.py``). ``state`` lists the planned tensors that persist from one call of the
method to the next (mutable buffers, each starting from its ``initial`` value). Every tensor
value has a name (the driver renames a node's output after the program's value).

A delegated part of the plan is one ``DelegateCall`` (its inputs, then its outputs) of a
``Delegate`` (the backend's id and its payload, written in a segment); ``NamedData`` are the
blobs a payload names (its constants), each streamed into a segment of its own.

``quant_ops`` records what each PT2E quantize or dequantize was before ``ops_quant.py`` wrote it
as float arithmetic in portable calls (a ``QuantOp``: its int8 and float tensors, its
quantization parameters, and those calls), so a later stage can run it otherwise (the XNNPACK
delegate folds it into int8 values); the calls stay the plan's truth.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Iterable

import numpy as np

__all__ = ["TensorValue", "ScalarValue", "ListValue", "Call", "JumpFalse", "Move", "DelegateCall", "Delegate",
           "NamedData", "QuantOp", "Plan"]


@dataclass(eq=False)
class TensorValue:
    name: str
    scalar_type: int  # ExecuTorch's ScalarType (FLOAT = 6)
    sizes: tuple  # ints: the static sizes, or each dynamic dim's upper bound
    itemsize: int
    dynamic: bool = False  # DYNAMIC_BOUND: the kernels resize it, within ``sizes``
    weight: str | None = None  # the weight placeholder whose bytes are this constant
    alias_of: "TensorValue | None" = None  # a view: the storage of this tensor
    initial: str | None = None  # a mutable buffer: the weight placeholder whose bytes it holds at method load
    index: int = -1

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.sizes, dtype=np.int64)) * self.itemsize

    def storage(self) -> "TensorValue":
        v = self
        while v.alias_of is not None:
            v = v.alias_of
        return v


@dataclass(eq=False)
class ScalarValue:
    kind: str  # "Int" | "Double" | "Bool" | "String" | "Null"
    value: object = None
    name: str = ""
    index: int = -1


@dataclass(eq=False)
class ListValue:
    kind: str  # "IntList" | "TensorList" | "OptionalTensorList": values (their indices are written, -1 for
    # an OptionalTensorList's None) | "DoubleList" | "BoolList": Python numbers, written inline
    items: list
    name: str = ""
    index: int = -1


@dataclass(eq=False)
class Call:
    op: tuple  # (name, overload): aten::addmm, out
    args: list  # of values: inputs in schema order, then outs, then the returned value
    reads: list  # tensor values the kernel reads (lists expanded)
    writes: list  # tensor values it writes


@dataclass(eq=False)
class JumpFalse:
    """``JumpFalseCall``: unless ``cond`` holds, the next instruction is ``destination`` (an index
    into ``Plan.calls``, set once the instructions jumped over are emitted). ``cond`` is a Bool
    value, or a bool tensor: the runtime takes it as true when every element is."""

    cond: object  # ScalarValue (Bool) or TensorValue (bool)
    destination: int = -1

    @property
    def reads(self) -> list:
        return [self.cond] if isinstance(self.cond, TensorValue) else []

    @property
    def writes(self) -> list:
        return []


@dataclass(eq=False)
class Move:
    """``MoveCall``: value ``dest`` becomes value ``source`` (the ``EValue``: for a tensor, its
    ``TensorImpl``, sizes included; no bytes are copied)."""

    source: TensorValue
    dest: TensorValue

    @property
    def reads(self) -> list:
        return [self.source]

    @property
    def writes(self) -> list:
        return [self.dest]


@dataclass(eq=False)
class DelegateCall:
    delegate: int  # index in Plan.delegates
    args: list  # TensorValues: the delegate's inputs, then its outputs
    reads: list
    writes: list


@dataclass(eq=False)
class Delegate:
    backend: str  # the runtime's backend id ("XnnpackBackend")
    payload: bytes  # what the backend's init receives (written in a segment of its own)


@dataclass(eq=False)
class NamedData:
    key: str
    nbytes: int
    chunks: Callable[[], Iterable]  # () -> the blob's bytes, in pieces (streamed, never joined)


@dataclass(eq=False)
class QuantOp:
    """A ``quantized_decomposed`` quantize (float ``source`` -> int8 ``result``) or dequantize
    (int8 ``source`` -> float ``result``), and the portable ``calls`` it was written as, in order.

    Per tensor: ``scale`` a float, ``zero_point`` an int. Per channel (a dequantize of a weight):
    ``scale`` and ``zero_point`` the names of the weights holding them (1-D), ``axis`` the
    channel dim of ``source``; ``zero_point`` None when the program gives none."""

    kind: str  # "quantize_per_tensor" | "dequantize_per_tensor" | "dequantize_per_channel"
    source: TensorValue
    result: TensorValue
    scale: object  # float, or a weight's name
    zero_point: object  # int, a weight's name, or None
    quant_min: int
    quant_max: int
    calls: list
    axis: int | None = None

    @property
    def op(self) -> tuple:
        return f"quantized_decomposed::{self.kind}", ""

    @property
    def args(self) -> list:
        return [self.source, self.result]

    @property
    def reads(self) -> list:
        return [self.source]

    @property
    def writes(self) -> list:
        return [self.result]

    @property
    def per_tensor(self) -> tuple | None:
        """(scale, zero point) of a per-tensor op, else None."""
        return None if self.axis is not None else (self.scale, self.zero_point)


@dataclass
class Plan:
    values: list = field(default_factory=list)
    calls: list = field(default_factory=list)  # the chain: Call, DelegateCall, JumpFalse, Move
    inputs: list = field(default_factory=list)  # TensorValues (or ScalarValues)
    outputs: list = field(default_factory=list)
    state: list = field(default_factory=list)  # TensorValues that persist across calls (mutable buffers)
    delegates: list = field(default_factory=list)  # Delegates
    named_data: list = field(default_factory=list)  # NamedData
    quant_ops: list = field(default_factory=list)  # QuantOp: what the PT2E calls were

    def add(self, value):
        self.values.append(value)
        return value

    def number(self) -> None:
        """Give every value its index in the plan."""
        for i, v in enumerate(self.values):
            v.index = i

    def operators(self) -> list[tuple]:
        """The distinct operators in first-use order."""
        return list(dict.fromkeys(c.op for c in self.calls if isinstance(c, Call)))
