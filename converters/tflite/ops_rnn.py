"""ONNX LSTM and GRU: over a static sequence length unrolled into FULLY_CONNECTED,
LOGISTIC/TANH and elementwise builtins (one recurrent FULLY_CONNECTED per step and
direction); over a dynamic one, the same cell in a WHILE subgraph (``ops_rnn_while``).
TFLite's UNIDIRECTIONAL/BIDIRECTIONAL_SEQUENCE_LSTM keep their state in variable tensors
(carried from one invoke to the next, no initial state input) and there is no GRU builtin:
both routes keep ONNX's semantics exact. sequence_lens, peepholes, clipping and
non-default activations are refused."""

from __future__ import annotations

import numpy as np

from ..errors import Unsupported
from .emit import Emitter, attrs
from .mappers import maps
from .model import TensorType as T

_ADD = ("AddOptions", {"fused_activation_function": 0})
_MUL = ("MulOptions", {"fused_activation_function": 0})
_SUB = ("SubOptions", {"fused_activation_function": 0})


def _check(em: Emitter, node, n_gates: int):
    a = attrs(node)
    for key in ("activations", "clip", "activation_alpha", "activation_beta"):
        if key in a:
            raise Unsupported(f"{node.op_type} with {key}")
    if a.get("input_forget", 0):
        raise Unsupported("LSTM with input_forget")
    ins = list(node.input) + [""] * (8 - len(node.input))
    if ins[4] or (node.op_type == "LSTM" and ins[7]):
        raise Unsupported(f"{node.op_type} with sequence_lens or peepholes")
    layout = int(a.get("layout", 0))
    x_shape = em.shape(ins[0])
    if x_shape is None or len(x_shape) != 3:
        raise Unsupported(f"{node.op_type} whose input rank is unknown")
    seq = x_shape[1 if layout else 0]
    w, r = em.const_value(ins[1]), em.const_value(ins[2])
    b = em.const_value(ins[3]) if ins[3] else None
    if w is None or r is None or (ins[3] and b is None):
        raise Unsupported(f"{node.op_type} with weights computed at run time")
    direction = a.get("direction", b"forward")
    direction = direction.decode() if isinstance(direction, bytes) else direction
    hidden = int(a["hidden_size"])
    if b is None:
        b = np.zeros((w.shape[0], 2 * n_gates * hidden), np.float32)
    return ins, layout, seq, w.astype(np.float32), r.astype(np.float32), b.astype(np.float32), direction, hidden


def _steps(em: Emitter, x: int, layout: int, seq: int) -> list[int]:
    """The per-step [B, I] inputs (UNPACK along the sequence axis)."""
    outs = [em.tmp(em.dtype_of(x), None, f"x{t}") for t in range(seq)]
    em.op("UNPACK", [x], outs, ("UnpackOptions", {"num": seq, "axis": 1 if layout else 0}))
    return outs


def fc(em: Emitter, x: int, w: np.ndarray, b: np.ndarray | None) -> int:
    y = em.tmp(T.FLOAT32, None, "fc")
    em.op("FULLY_CONNECTED", [x, em.const(np.ascontiguousarray(w)), em.const(b) if b is not None else -1], [y],
          ("FullyConnectedOptions", {"fused_activation_function": 0, "keep_num_dims": True}))
    return y


def _split(em: Emitter, x: int, n: int) -> list[int]:
    outs = [em.tmp(T.FLOAT32, None, "gate") for _ in range(n)]
    em.op("SPLIT", [em.const(np.array(1, np.int32)), x], outs, ("SplitOptions", {"num_splits": n}))
    return outs


def initial_state(em: Emitter, name: str, d: int, x: int, layout: int, hidden: int) -> int:
    """Direction ``d``'s initial state [B, H]: from the input, else zeros sized at run time."""
    if name:
        s = em.tmp(T.FLOAT32, None, "h0")
        em.op("GATHER", [em.t(name), em.const(np.array(d, np.int32))], [s], ("GatherOptions", {"axis": 1 if layout else 0}))
        return s
    shape = em.tmp(T.INT32, [3], "shape")
    em.op("SHAPE", [x], [shape], ("ShapeOptions", {"out_type": T.INT32}))
    b = em.tmp(T.INT32, [1], "batch")
    em.op("STRIDED_SLICE", [shape, em.const(np.array([0 if layout else 1], np.int32)),
                            em.const(np.array([1 if layout else 2], np.int32)), em.const(np.array([1], np.int32))],
          [b], ("StridedSliceOptions", {}))
    dims = em.tmp(T.INT32, [2], "dims")
    em.op("CONCATENATION", [b, em.const(np.array([hidden], np.int32))], [dims], ("ConcatenationOptions", {"axis": 0}))
    z = em.tmp(T.FLOAT32, None, "zeros")
    em.op("FILL", [dims, em.const(np.float32(0))], [z])
    return z


def directions(direction: str) -> list[bool]:
    return {"forward": [False], "reverse": [True], "bidirectional": [False, True]}[direction]


def _emit_outputs(em: Emitter, node, layout: int, per_dir_hs: list[list[int]], finals: list[list[int]]) -> None:
    """Y [S, dirs, B, H] (layout 0) or [B, S, dirs, H]; Y_h, Y_c [dirs, B, H] (or [B, dirs, H])."""
    outputs = list(node.output) + [""] * 3
    if outputs[0]:
        stacked = []
        for hs in per_dir_hs:
            s = em.tmp(T.FLOAT32, None, "y_dir")
            em.op("PACK", hs, [s], ("PackOptions", {"values_count": len(hs), "axis": 1 if layout else 0}))
            stacked.append(s)
        em.op("PACK", stacked, [em.out(0)], ("PackOptions", {"values_count": len(stacked), "axis": 2 if layout else 1}))
    for k, final in enumerate(finals):
        if outputs[k + 1]:
            em.op("PACK", final, [em.out(k + 1)], ("PackOptions", {"values_count": len(final), "axis": 1 if layout else 0}))


def lstm_cell(em: Emitter, xw: int, h: int, c: int, r: np.ndarray) -> tuple[int, int]:
    """One step: ``xw`` is x_t @ W^T + Wb + Rb [B, 4H] (gates i, o, f, c); the new (h, c)."""
    g = em.binary("ADD", xw, fc(em, h, r, None), options=_ADD)
    i, o, f, cc = _split(em, g, 4)
    i, o, f = em.unary("LOGISTIC", i), em.unary("LOGISTIC", o), em.unary("LOGISTIC", f)
    c = em.binary("ADD", em.binary("MUL", f, c, options=_MUL),
                  em.binary("MUL", i, em.unary("TANH", cc), options=_MUL), options=_ADD)
    return em.binary("MUL", o, em.unary("TANH", c), options=_MUL), c


def gru_cell(em: Emitter, xw: int, h: int, r: np.ndarray, rb: np.ndarray, before_reset: int) -> int:
    """One step: ``xw`` is x_t @ W^T + Wb [B, 3H] (gates z, r, h); the new h."""
    H = r.shape[1]
    xz, xr, xh = _split(em, xw, 3)
    if before_reset:
        hz, hr, hh = _split(em, fc(em, h, r, rb), 3)
    else:
        hz, hr = _split(em, fc(em, h, r[: 2 * H], rb[: 2 * H]), 2)
    z = em.unary("LOGISTIC", em.binary("ADD", xz, hz, options=_ADD))
    rr = em.unary("LOGISTIC", em.binary("ADD", xr, hr, options=_ADD))
    if before_reset:
        pre = em.binary("MUL", rr, hh, options=_MUL)
    else:
        pre = fc(em, em.binary("MUL", rr, h, options=_MUL), r[2 * H:], rb[2 * H:])
    n = em.unary("TANH", em.binary("ADD", xh, pre, options=_ADD))
    return em.binary("ADD", n, em.binary("MUL", z, em.binary("SUB", h, n, options=_SUB), options=_MUL), options=_ADD)


@maps("LSTM")
def lstm(em: Emitter, node) -> None:
    ins, layout, seq, w, r, b, direction, hidden = _check(em, node, 4)
    if seq < 0:
        from .ops_rnn_while import lstm_over_dynamic_sequence

        lstm_over_dynamic_sequence(em, node, ins, layout, w, r, b, direction, hidden)
        return
    x = em.t(ins[0])
    steps = _steps(em, x, layout, seq)
    per_dir, last_h, last_c = [], [], []
    for d, reverse in enumerate(directions(direction)):
        xw = [fc(em, xt, w[d], b[d, : 4 * hidden] + b[d, 4 * hidden:]) for xt in steps]
        h, c = initial_state(em, ins[5], d, x, layout, hidden), initial_state(em, ins[6], d, x, layout, hidden)
        hs = [None] * seq
        for t in (reversed(range(seq)) if reverse else range(seq)):
            h, c = lstm_cell(em, xw[t], h, c, r[d])
            hs[t] = h
        per_dir.append(hs)
        last_h.append(h)
        last_c.append(c)
    _emit_outputs(em, node, layout, per_dir, [last_h, last_c])


@maps("GRU")
def gru(em: Emitter, node) -> None:
    ins, layout, seq, w, r, b, direction, hidden = _check(em, node, 3)
    before_reset = int(attrs(node).get("linear_before_reset", 0))
    if seq < 0:
        from .ops_rnn_while import gru_over_dynamic_sequence

        gru_over_dynamic_sequence(em, node, ins, layout, w, r, b, direction, hidden, before_reset)
        return
    x = em.t(ins[0])
    steps = _steps(em, x, layout, seq)
    per_dir, last_h = [], []
    H = hidden
    for d, reverse in enumerate(directions(direction)):
        wb, rb = b[d, : 3 * H], b[d, 3 * H:]
        xw = [fc(em, xt, w[d], wb) for xt in steps]
        h = initial_state(em, ins[5], d, x, layout, hidden)
        hs = [None] * seq
        for t in (reversed(range(seq)) if reverse else range(seq)):
            h = gru_cell(em, xw[t], h, r[d], rb, before_reset)
            hs[t] = h
        per_dir.append(hs)
        last_h.append(h)
    _emit_outputs(em, node, layout, per_dir, [last_h])
