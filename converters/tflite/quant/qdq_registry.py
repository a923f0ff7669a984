"""The int8 kernels of the QDQ pass: ``INT8_OPS[op_type]``, one ``Int8Op`` per ONNX op, filled by
``qdq_conv``, ``qdq_elementwise`` and ``qdq_movement`` with ``@int8_op(...)``; and the helpers
their emitters share.

A ``Pattern`` is one ONNX op whose data inputs are ``DequantizeLinear`` outputs and whose result
(through an optional Relu/Clip the kernel fuses, directly or through a QuantizeLinear ->
DequantizeLinear pair of the parameters the activation's own QuantizeLinear has) goes to one
``QuantizeLinear``. An ``Int8Op``
says which input slots must be dequantized values (``slots``), whether it fuses an activation,
``check`` (the reason LiteRT's int8 kernel cannot compute this instance, or None) and ``emit``
(the int8 builtins). Its operators are appended as they are: int8 tensors here carry their
quantization parameters, so ``int_compute``'s rule for plain integers does not apply.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np
import onnx

from ..core.emit import Emitter
from ..core.model import ACTIVATION_CODE, Op, Quantization, Tensor
from ..core.model import TensorType as T
from ..core.op_versions import int8_version
from .qdq_params import QParams, storage_quant

__all__ = ["Pattern", "Int8Op", "INT8_OPS", "int8_op", "append", "qtensor", "q_input", "q_output", "constant_reason",
           "transpose_q", "ACTIVATION_CODE", "requant_scale_ok", "relu6_tie_bound", "clamp_to_six"]


@dataclass
class Pattern:
    node: onnx.NodeProto
    dq: dict[int, onnx.NodeProto]  # input slot -> the DequantizeLinear producing it
    params: dict[int, QParams]  # input slot -> its parameters
    q: onnx.NodeProto  # the QuantizeLinear of the result
    out: QParams
    activation: str = "NONE"  # fused: NONE, RELU, RELU6
    act_node: onnx.NodeProto | None = None
    act_through: tuple[onnx.NodeProto, ...] = ()  # a QuantizeLinear/DequantizeLinear pair before act_node
    bias: np.ndarray | None = field(default=None, repr=False)  # the real bias (float64), when the op has one
    bias_node: onnx.NodeProto | None = None  # the Add of a constant bias the kernel takes in (MatMul)
    nonnegative: frozenset[int] = frozenset()  # input slots an earlier pattern clamped to >= 0 (fused RELU/RELU6)
    six: int | None = None  # RELU6 at a rounding tie: the stored int8 of 6 (ONNX's), clamped by a MINIMUM


@dataclass(frozen=True)
class Int8Op:
    slots: tuple[int, ...]  # input slots read through a DequantizeLinear (the others: constants)
    check: Callable[[Emitter, Pattern], str | None]
    emit: Callable[[Emitter, Pattern], None]
    fuses: bool = False  # a following Relu / Clip(0, 6) becomes its fused activation
    all_inputs: bool = False  # every input is a dequantized value (Concat)
    bias_slot: int | None = None  # a real constant (float, or dequantized int32) read as int32 bias
    bias_add: bool = False  # a following Add of a constant vector is its bias (MatMul + Add)


INT8_OPS: dict[str, Int8Op] = {}


def int8_op(*op_types: str, slots=(0,), fuses: bool = False, all_inputs: bool = False,
            bias_slot: int | None = None, bias_add: bool = False, check=None):
    """Register ``emit`` as the int8 kernel of ``op_types``; ``check`` returns why an instance
    cannot run in int8 (None: it can)."""

    def register(emit):
        for t in op_types:
            assert t not in INT8_OPS, t
            INT8_OPS[t] = Int8Op(tuple(slots), check or (lambda em, p: None), emit, fuses, all_inputs, bias_slot,
                                bias_add)
        return emit

    return register


def append(em: Emitter, code: str, inputs: list[int], outputs: list[int], options=None) -> None:
    """An operator on quantized tensors, as is, at the version LiteRT gives its int8 kernel."""
    version = int8_version(em.sub.tensors, code, inputs, outputs, options)
    em.sub.append_op(Op(code, list(inputs), list(outputs), options, version=version))


def qtensor(em: Emitter, shape, quant: Quantization, hint: str, dtype: int = T.INT8) -> int:
    return em.sub.add(Tensor(em.fresh_name(f"{em.node.output[0]}/{hint}"), dtype,
                             None if shape is None else list(shape), quant=quant))


def q_input(em: Emitter, p: Pattern, slot: int) -> int:
    """The int8 tensor of the dequantized value at ``slot``: the quantized value itself, or a
    dequantized constant written as an int8 constant with its parameters (the planner's
    ``constant_reason`` saw its integers fit int8 after the uint8 shift)."""
    source = p.dq[slot].input[0]
    c = em.const_value(source)
    if c is None:
        return em.t(source)
    stored = _stored(c, p.params[slot]).astype(np.int8)
    idx = qtensor(em, stored.shape, storage_quant(p.params[slot]), "const")
    em.sub.tensors[idx].data = np.ascontiguousarray(stored)
    return idx


def int8_storage(em: Emitter, p: Pattern, slot: int) -> np.ndarray | None:
    """A dequantized constant operand's integers and zero point in int8 storage (the uint8
    shift applied), as int64; None for a run-time value."""
    c = em.const_value(p.dq[slot].input[0])
    if c is None:
        return None
    prm = p.params[slot]
    return np.append(_stored(c, prm).reshape(-1), prm.stored_zero_point())


def _stored(c: np.ndarray, prm: QParams) -> np.ndarray:
    """A constant's integers in int8 storage as int64: the uint8 shift applied (per channel
    along ``prm.axis``)."""
    shift = prm.stored_zero_point() - prm.zero_point
    if prm.axis is not None and c.ndim:
        shape = [1] * c.ndim
        shape[prm.axis % c.ndim] = -1
        shift = shift.reshape(shape)
    return c.astype(np.int64) + shift


def constant_reason(em: Emitter, p: Pattern, slot: int) -> str | None:
    """Why the constant dequantized at ``slot`` cannot be an int8 kernel's operand (its integers
    or zero point do not fit int8: a cast would wrap), else None. Checked for every kernel."""
    stored = int8_storage(em, p, slot)
    if stored is None or (stored.min(initial=0) >= -128 and stored.max(initial=0) <= 127):
        return None
    elem = onnx.TensorProto.DataType.Name(p.params[slot].elem)
    return (f"input {slot} dequantizes a {elem} constant whose integers or zero point do not fit int8 "
            f"(LiteRT's int8 {p.node.op_type} takes int8 operands)")


def q_output(em: Emitter, p: Pattern) -> int:
    """The int8 tensor of the pattern's QuantizeLinear output, bound to its ONNX name."""
    name = p.q.output[0]
    idx = em.sub.add(Tensor(name, T.INT8, em.shape(name), quant=storage_quant(p.out)))
    em.bind(name, idx)
    return idx


def transpose_q(em: Emitter, x: int, perm: list[int], out: int | None = None) -> int:
    """TRANSPOSE of a quantized tensor (same parameters), into ``out`` when given."""
    t = em.sub.tensors[x]
    if out is None:
        out = qtensor(em, None if t.shape is None else [t.shape[i] for i in perm], t.quant, "perm")
    append(em, "TRANSPOSE", [x, em.const(np.asarray(perm, np.int32))], [out])
    return out


def requant_scale_ok(in_scale: np.ndarray, out_scale: float) -> bool:
    """XNNPACK's and LiteRT's requantization needs input scale / output scale in [2^-32, 256)."""
    r = np.asarray(in_scale, np.float64) / out_scale
    return bool(np.all(r >= 2.0**-32) and np.all(r < 256.0))


def relu6_tie_bound(out: QParams) -> int | None:
    """The stored int8 of 6 at ``out``'s parameters as ONNX's QuantizeLinear rounds it (half to
    even), where LiteRT's RELU6 bound (fused or its own kernel: ``zp + TfLiteRound(6.f / scale)``,
    half away from zero) would be one step above it; None where they agree."""
    scale, zp = out.scalar()
    t = float(np.float32(6.0) / np.float32(scale))  # both divide in float32; t + 0.5 is exact in float64
    onnx_q = int(np.clip(zp + np.rint(t), -128, 127))
    litert_q = int(np.clip(zp + np.floor(t + 0.5), -128, 127))  # t > 0
    return onnx_q if onnx_q != litert_q else None


def clamp_to_six(em: Emitter, p: Pattern) -> None:
    """The pattern's output, written through a fused RELU, clamped above at ``p.six`` by an int8
    MINIMUM (same parameters in and out: an exact integer minimum)."""
    out = em.t(p.q.output[0])
    producer = em.sub.uses.producer[out]
    t = em.sub.tensors[out]
    below = qtensor(em, t.shape, t.quant, "relu")
    em.sub.rewire(producer, outputs=[below if o == out else o for o in producer.outputs])
    six = qtensor(em, [1], t.quant, "six")
    em.sub.tensors[six].data = np.array([p.six], np.int8)
    append(em, "MINIMUM", [below, six], [out])
