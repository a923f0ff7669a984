"""Finding the int8 patterns of a QDQ model, before any node is mapped.

- A *quantized value* is a ``QuantizeLinear`` output (float32 in, per tensor, int8/uint8, constant
  parameters) that only ``DequantizeLinear`` nodes with the same parameters read and that is no
  graph output: in TFLite it is one int8 tensor with those parameters (``qdq_params``).
- A *pattern* (``qdq_registry.Pattern``) is an op with an int8 kernel (``INT8_OPS``) whose
  declared input slots are dequantized quantized values or dequantized constants (weights),
  whose one result goes, through an optional Relu/Clip(0, 6) it fuses, to one QuantizeLinear of
  a quantized value, and which its kernel's constraints accept (``Int8Op.check``). The activation
  may also read the op's quantized value through a DequantizeLinear, when its own QuantizeLinear
  has the same parameters (PT2E's XNNPACK annotation: hardtanh shares the conv's quantization).
  That is exact: clamping a value already on the grid to [0, 6] and quantizing it again is the
  clamp of the integers to [q(0), q(6)], which is what the kernel's fused activation does to its
  output (LiteRT's ``CalculateActivationRangeQuantized``). XNNPACK takes no int8 RELU/RELU6 op,
  so an unfused one would end its partition. LiteRT rounds that bound, ``6 / scale``, half away
  from zero where ONNX rounds it to even: at such a tie the kernel fuses RELU and an int8 MINIMUM
  at ONNX's step follows (``Pattern.six``; a Clip(0, 6) of its own likewise: RELU, MINIMUM).
- Every other op that reads a DequantizeLinear or feeds a QuantizeLinear stays float, with the
  reason (``Plan.float_ops``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import onnx
from onnx import TensorProto

from ...errors import Unsupported
from ...onnx.graph_tools import DefUse
from ..core.emit import Emitter, _mapped_domain
from .qdq_params import QParams, read_params
from .qdq_registry import constant_reason, INT8_OPS, Int8Op, Pattern, relu6_tie_bound

__all__ = ["Plan", "find_patterns", "real_constant"]


@dataclass
class Plan:
    patterns: dict[str, Pattern] = field(default_factory=dict)  # the op's output[0] -> its pattern
    values: dict[str, QParams] = field(default_factory=dict)  # quantized value (a Q output) -> parameters
    float_ops: list[tuple[onnx.NodeProto, str]] = field(default_factory=list)  # kept float, and why
    absorbed: set[str] = field(default_factory=set)  # output[0] of the Q/Relu/Clip nodes patterns emit
    dq_absorbed: set[str] = field(default_factory=set)  # DQ outputs read by patterns only
    writers: dict[str, Pattern] = field(default_factory=dict)  # quantized value -> the pattern writing it


def _is(node, op_type: str) -> bool:
    return node is not None and node.op_type == op_type and _mapped_domain(node)


def find_patterns(em: Emitter) -> Plan:
    g = DefUse.of_graph(em.graph, nested=False)
    plan = Plan(values=_quantized_values(em, g))
    for node in em.graph.node:
        if node.output and node.output[0] in plan.absorbed:  # an earlier pattern took it in
            continue
        op = INT8_OPS.get(node.op_type) if _mapped_domain(node) else None
        touches = _touches_qdq(node, g)
        if op is None or not touches:
            if touches and node.op_type not in ("QuantizeLinear", "DequantizeLinear"):
                plan.float_ops.append((node, "pt2x has no int8 kernel for it"))
            continue
        pattern, reason = _match(em, g, plan, node, op)
        if pattern is None:
            plan.float_ops.append((node, reason))
            continue
        pattern.nonnegative = _clamped_inputs(plan, pattern)
        plan.patterns[node.output[0]] = pattern
        plan.writers[pattern.q.output[0]] = pattern
        plan.absorbed.add(pattern.q.output[0])
        for extra in (pattern.act_node, pattern.bias_node, *pattern.act_through):
            if extra is not None:
                plan.absorbed.add(extra.output[0])
    plan.float_ops = [(n, r) for n, r in plan.float_ops if n.output[0] not in plan.absorbed]
    plan.dq_absorbed = _absorbed_dequantizes(g, plan)
    return plan


def _touches_qdq(node, g: DefUse) -> bool:
    return (any(_is(g.producers.get(i), "DequantizeLinear") for i in node.input if i)
            or any(_is(r, "QuantizeLinear") for o in node.output for r in g.readers.get(o, [])))


def _quantized_values(em: Emitter, g: DefUse) -> dict[str, QParams]:
    values = {}
    for node in em.graph.node:
        if not _is(node, "QuantizeLinear") or node.output[0] in g.outputs:
            continue
        p = read_params(em, node)
        if p is None or not p.per_tensor or p.elem not in (TensorProto.INT8, TensorProto.UINT8):
            continue
        if em.elem(node.input[0]) != TensorProto.FLOAT:
            continue
        readers = g.readers.get(node.output[0], [])
        if readers and all(_is(r, "DequantizeLinear") and _same(read_params(em, r), p) for r in readers):
            values[node.output[0]] = p
    return values


def _same(a: QParams | None, b: QParams) -> bool:
    return a is not None and a.same(b)


def _match(em: Emitter, g: DefUse, plan: Plan, node, op: Int8Op) -> tuple[Pattern | None, str]:
    slots = tuple(range(len(node.input))) if op.all_inputs else op.slots
    dq, params = {}, {}
    for s in slots:
        name = node.input[s] if s < len(node.input) else ""
        d = g.producers.get(name) if name else None
        if not _is(d, "DequantizeLinear"):
            return None, f"input {s} is not a DequantizeLinear output"
        p = read_params(em, d)
        if p is None:
            return None, f"input {s}'s DequantizeLinear has parameters that are not constant (or of another kind)"
        if d.input[0] not in plan.values and em.const_value(d.input[0]) is None:
            return None, f"input {s} dequantizes a value that is neither a quantized activation nor a constant"
        dq[s], params[s] = d, p
    bias = None
    if op.bias_slot is not None and len(node.input) > op.bias_slot and node.input[op.bias_slot]:
        bias = real_constant(em, g, node.input[op.bias_slot])
        if bias is None:
            return None, "its bias is computed at run time"
    if len([o for o in node.output if o]) != 1:
        return None, "it has more than one output"
    last, bias_node = node.output[0], None
    if op.bias_add and bias is None:
        bias, bias_node = _bias_add(em, g, last)
        last = bias_node.output[0] if bias_node is not None else last
    act, act_node, last = _activation(em, g, last) if op.fuses else ("NONE", None, last)
    q = g.reader_node(last)
    if not _is(q, "QuantizeLinear"):
        return None, _not_quantized(g, last)
    if q.output[0] not in plan.values:
        return None, "its QuantizeLinear is not a per-tensor int8/uint8 value read only by DequantizeLinear"
    through: tuple = ()
    if op.fuses and act_node is None:
        act, act_node, through, q = _requantized_activation(em, g, plan, q)
    pattern = Pattern(node, dq, params, q, plan.values[q.output[0]], act, act_node, through, bias, bias_node)
    _exact_six(em, pattern)
    try:
        reason = next(filter(None, (constant_reason(em, pattern, s) for s in sorted(dq))), None) \
            or op.check(em, pattern)
    except Unsupported as e:  # the geometry or an attribute the float mapper would refuse too
        reason = e.reason
    return (None, reason) if reason else (pattern, "")


def _exact_six(em: Emitter, p: Pattern) -> None:
    """A RELU6 (fused, or a Clip(0, 6) of its own) whose bound LiteRT would round the other way
    than ONNX (6 / scale a tie): RELU, then an int8 MINIMUM at ONNX's step (``p.six``)."""
    own = p.node.op_type == "Clip" and _clip_is_relu6(em, p.node)
    if p.activation != "RELU6" and not own:
        return
    p.six = relu6_tie_bound(p.out)
    if p.six is not None and not own:
        p.activation = "RELU"


def _clip_is_relu6(em: Emitter, node) -> bool:
    ins = list(node.input) + ["", ""]
    lo = em.const_value(ins[1]) if ins[1] else None
    hi = em.const_value(ins[2]) if ins[2] else None
    return all(v is not None and v.size == 1 for v in (lo, hi)) and float(lo) == 0.0 and float(hi) == 6.0


def _not_quantized(g: DefUse, y: str) -> str:
    readers = sorted({r.op_type for r in g.readers.get(y, [])})
    if "QuantizeLinear" in readers:
        others = ", ".join(r for r in readers if r != "QuantizeLinear")
        return (f"its result is also read unquantized (by {others or 'a second QuantizeLinear'}): "
                "an int8 kernel would give them the rounded value")
    where = " and a graph output" if y in g.outputs else ""
    return (f"its result is not quantized (read by {', '.join(readers) or 'nothing'}{where}, not by one "
            "QuantizeLinear): LiteRT's int8 kernels write int8")


def _bias_add(em: Emitter, g: DefUse, y: str):
    """(real bias, the Add) when an Add of a constant vector alone reads ``y``; else (None, None)."""
    r = g.reader_node(y)
    if not _is(r, "Add") or len(r.input) != 2:
        return None, None
    other = r.input[1] if r.input[0] == y else r.input[0]
    c = real_constant(em, g, other)
    if c is None or c.ndim > 1:
        return None, None
    return c, r


def _activation(em: Emitter, g: DefUse, y: str):
    """(fused activation, its node, the value it writes) of a Relu/Clip(0, 6) that alone reads ``y``."""
    r = g.reader_node(y)
    if _is(r, "Relu"):
        return "RELU", r, r.output[0]
    if _is(r, "Clip") and len(r.input) >= 2 and r.input[1]:
        lo = em.const_value(r.input[1])
        hi = em.const_value(r.input[2]) if len(r.input) > 2 and r.input[2] else None
        if lo is not None and lo.size == 1 and float(lo) == 0.0:
            if hi is None and not (len(r.input) > 2 and r.input[2]):
                return "RELU", r, r.output[0]
            if hi is not None and hi.size == 1 and float(hi) == 6.0:
                return "RELU6", r, r.output[0]
    return "NONE", None, y


def _clamped_inputs(plan: Plan, p: Pattern) -> frozenset[int]:
    """The input slots whose quantized value a pattern wrote through a fused RELU/RELU6: every
    integer is at least the zero point, real 0."""
    return frozenset(s for s, d in p.dq.items()
                     if d.input[0] in plan.writers and plan.writers[d.input[0]].activation in ("RELU", "RELU6"))


def _requantized_activation(em: Emitter, g: DefUse, plan: Plan, q):
    """(activation, its node, (``q``, the DequantizeLinear), the activation's QuantizeLinear) when a
    Relu/Clip(0, 6) alone reads ``q``'s value through one DequantizeLinear and its QuantizeLinear
    has ``q``'s parameters; else ("NONE", None, (), q)."""
    none = ("NONE", None, (), q)
    dq = g.reader_node(q.output[0])
    if not _is(dq, "DequantizeLinear"):
        return none
    act, act_node, y = _activation(em, g, dq.output[0])
    q2 = g.reader_node(y) if act_node is not None else None
    if not _is(q2, "QuantizeLinear") or q2.output[0] not in plan.values:
        return none
    if not plan.values[q2.output[0]].same(plan.values[q.output[0]]):
        return none
    return act, act_node, (q, dq), q2


def real_constant(em: Emitter, g: DefUse, name: str) -> np.ndarray | None:
    """A float constant, or the DequantizeLinear of a constant computed as ONNX's reference does
    (float32), as float64; None when it is computed at run time."""
    c = em.const_value(name)
    if c is not None:
        return c.astype(np.float64) if c.dtype.kind == "f" else None
    d = g.producers.get(name)
    x = em.const_value(d.input[0]) if _is(d, "DequantizeLinear") else None
    p = read_params(em, d) if x is not None else None
    if p is None:
        return None
    shape = [1] * x.ndim
    if p.axis is not None:
        shape[p.axis] = -1
    real = (x.astype(np.float32) - p.zero_point.astype(np.float32).reshape(shape)) * p.scale.reshape(shape)
    return real.astype(np.float64)


def _absorbed_dequantizes(g: DefUse, plan: Plan) -> set[str]:
    claimed = {d.output[0] for p in plan.patterns.values() for d in p.dq.values()}
    for p in plan.patterns.values():
        op = INT8_OPS[p.node.op_type]
        if op.bias_slot is not None and len(p.node.input) > op.bias_slot:
            claimed.add(p.node.input[op.bias_slot])
    out = set()
    for name in claimed:
        readers = g.readers.get(name, [])
        if name not in g.outputs and all(r.output[0] in plan.patterns for r in readers):
            out.add(name)
    return out
