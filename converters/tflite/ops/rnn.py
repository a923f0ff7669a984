"""ONNX LSTM and GRU: over a static sequence length unrolled into FULLY_CONNECTED,
LOGISTIC/TANH and elementwise builtins (one recurrent FULLY_CONNECTED per step and
direction); over a dynamic one, the same cell in a WHILE subgraph (``ops.rnn_while``).
TFLite's UNIDIRECTIONAL/BIDIRECTIONAL_SEQUENCE_LSTM keep their state in variable tensors
(carried from one invoke to the next, no initial state input) and there is no GRU builtin:
both routes keep ONNX's semantics exact. sequence_lens, peepholes, clipping and
non-default activations are refused."""

from __future__ import annotations

from ..core.emit import Emitter, attrs
from ..core.mappers import maps
from .rnn_cells import check, directions, emit_outputs, fc, gru_cell, initial_state, lstm_cell
from .rnn_while import gru_over_dynamic_sequence, lstm_over_dynamic_sequence


def _steps(em: Emitter, x: int, layout: int, seq: int) -> list[int]:
    """The per-step [B, I] inputs (UNPACK along the sequence axis)."""
    outs = [em.tmp(em.dtype_of(x), None, f"x{t}") for t in range(seq)]
    em.op("UNPACK", [x], outs, ("UnpackOptions", {"num": seq, "axis": 1 if layout else 0}))
    return outs


@maps("LSTM")
def lstm(em: Emitter, node) -> None:
    ins, layout, seq, w, r, b, direction, hidden = check(em, node, 4)
    if seq < 0:
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
    emit_outputs(em, node, layout, per_dir, [last_h, last_c])


@maps("GRU")
def gru(em: Emitter, node) -> None:
    ins, layout, seq, w, r, b, direction, hidden = check(em, node, 3)
    before_reset = int(attrs(node).get("linear_before_reset", 0))
    if seq < 0:
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
    emit_outputs(em, node, layout, per_dir, [last_h])
