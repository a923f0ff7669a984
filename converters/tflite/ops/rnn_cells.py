"""The LSTM and GRU cells and what both of their forms share (``ops.rnn`` unrolls them over a
static sequence length, ``ops.rnn_while`` loops them in a WHILE): the node's checks and
weights, FULLY_CONNECTED projections, gate splits, initial states, one step of each cell,
and the outputs packed in ONNX's layouts."""

from __future__ import annotations

import numpy as np

from ...errors import Unsupported
from ..core.emit import Emitter, attrs
from ..core.model import TensorType as T

__all__ = ["check", "fc", "initial_state", "directions", "emit_outputs", "lstm_cell", "gru_cell"]



def check(em: Emitter, node, n_gates: int):
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


def emit_outputs(em: Emitter, node, layout: int, per_dir_hs: list[list[int]], finals: list[list[int]]) -> None:
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
    g = em.binary("ADD", xw, fc(em, h, r, None))
    i, o, f, cc = _split(em, g, 4)
    i, o, f = em.unary("LOGISTIC", i), em.unary("LOGISTIC", o), em.unary("LOGISTIC", f)
    c = em.binary("ADD", em.binary("MUL", f, c),
                  em.binary("MUL", i, em.unary("TANH", cc)))
    return em.binary("MUL", o, em.unary("TANH", c)), c


def gru_cell(em: Emitter, xw: int, h: int, r: np.ndarray, rb: np.ndarray, before_reset: int) -> int:
    """One step: ``xw`` is x_t @ W^T + Wb [B, 3H] (gates z, r, h); the new h."""
    H = r.shape[1]
    xz, xr, xh = _split(em, xw, 3)
    if before_reset:
        hz, hr, hh = _split(em, fc(em, h, r, rb), 3)
    else:
        hz, hr = _split(em, fc(em, h, r[: 2 * H], rb[: 2 * H]), 2)
    z = em.unary("LOGISTIC", em.binary("ADD", xz, hz))
    rr = em.unary("LOGISTIC", em.binary("ADD", xr, hr))
    if before_reset:
        pre = em.binary("MUL", rr, hh)
    else:
        pre = fc(em, em.binary("MUL", rr, h), r[2 * H:], rb[2 * H:])
    n = em.unary("TANH", em.binary("ADD", xh, pre))
    return em.binary("ADD", n, em.binary("MUL", z, em.binary("SUB", h, n)))
