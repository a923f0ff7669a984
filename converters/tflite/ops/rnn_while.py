"""ONNX LSTM and GRU over a sequence length known only at run time: per direction, one WHILE
whose body is one step of the same cell ``ops.rnn`` unrolls (``rnn_cells.lstm_cell``/``gru_cell``).

Per direction: the input is made time-major ([S, B, I]), its projection for every step is
one FULLY_CONNECTED before the loop, and the loop state is [t, S, projection, h, (c), Y]:
the body GATHERs step t's projection (S-1-t in reverse), runs the cell and writes h into
row t (S-1-t) of Y, zeros [S, B, H] sized at run time, with DYNAMIC_UPDATE_SLICE. Every
length in the program's range runs after a resize; the loop state keeps its shapes.
"""

from __future__ import annotations

import numpy as np
import onnx

from ..core.emit import Emitter
from ..core.model import Subgraph, Tensor
from ..core.model import TensorType as T
from .rnn_cells import directions, emit_outputs, fc, gru_cell, initial_state, lstm_cell

__all__ = ["lstm_over_dynamic_sequence", "gru_over_dynamic_sequence"]



def _time_major(em: Emitter, x: int, layout: int) -> int:
    if not layout:
        return x
    s = em.shape_of(x)
    y = em.tmp(T.FLOAT32, None if s is None else [s[1], s[0], s[2]], "time_major")
    em.op("TRANSPOSE", [x, em.const(np.array([1, 0, 2], np.int32))], [y])
    return y


def _dim(em: Emitter, shape: int, k: int) -> int:
    """Dim ``k`` of a SHAPE result as an int32 scalar."""
    y = em.tmp(T.INT32, [], f"dim{k}")
    em.op("GATHER", [shape, em.const(np.array(k, np.int32))], [y], ("GatherOptions", {"axis": 0}))
    return y


def _zero_outputs(em: Emitter, shape: int, hidden: int) -> int:
    """Y's initial value: zeros [S, B, H] (S, B from the time-major input's SHAPE); the body
    writes step t's row with DYNAMIC_UPDATE_SLICE, so every body tensor keeps its shape (a Y
    grown from [0, B, H] by CONCATENATION made LiteRT's WHILE fail to invoke)."""
    sb = em.tmp(T.INT32, [2], "seq_batch")
    em.op("STRIDED_SLICE", [shape, em.const(np.array([0], np.int32)), em.const(np.array([2], np.int32)),
                            em.const(np.array([1], np.int32))], [sb], ("StridedSliceOptions", {}))
    dims = em.tmp(T.INT32, [3], "dims")
    em.op("CONCATENATION", [sb, em.const(np.array([hidden], np.int32))], [dims], ("ConcatenationOptions", {"axis": 0}))
    y = em.tmp(T.FLOAT32, [-1, -1, hidden], "y0")
    em.op("FILL", [dims, em.const(np.float32(0))], [y])
    return y


def _cond(em: Emitter, state: list[int], label: str) -> int:
    """The loop condition t < S."""
    sub = Subgraph(f"{label}/cond")
    sub.inputs = [sub.add(Tensor(f"{label}/cond/in{k}", em.dtype_of(s), em.shape_of(s))) for k, s in enumerate(state)]
    go = sub.add(Tensor(f"{label}/cond/go", T.BOOL, []))
    cond = Emitter(onnx.GraphProto(), sub, parent=em)
    cond.node = em.node
    cond.op("LESS", sub.inputs[:2], [go])
    sub.outputs = [go]
    em.subgraphs.append(sub)
    return len(em.subgraphs) - 1


def _body(em: Emitter, state: list[int], label: str, reverse: bool, step) -> int:
    """The loop body: ``step(body_emitter, xw_t, carried)`` -> (new h, new carried states...)."""
    sub = Subgraph(f"{label}/body")
    sub.inputs = [sub.add(Tensor(f"{label}/body/in{k}", em.dtype_of(s), em.shape_of(s))) for k, s in enumerate(state)]
    body = Emitter(onnx.GraphProto(), sub, parent=em)
    body.node = em.node
    t, n, xw, *carried, y = sub.inputs
    one = body.const(np.array(1, np.int32))
    t_next = body.binary("ADD", t, one, hint="t_next")
    at = body.binary("SUB", n, t_next, hint="rev_t") if reverse else t
    x_t = body.tmp(T.FLOAT32, None, "x_t")
    body.op("GATHER", [xw, at], [x_t], ("GatherOptions", {"axis": 0}))
    new = step(body, x_t, carried)
    zero = body.const(np.array(0, np.int32))
    row = body.tmp(T.FLOAT32, None, "row")
    body.op("EXPAND_DIMS", [new[0], zero], [row])
    at_1 = body.tmp(T.INT32, [1], "at")
    body.op("EXPAND_DIMS", [at, zero], [at_1])
    start = body.tmp(T.INT32, [3], "start")
    body.op("CONCATENATION", [at_1, body.const(np.zeros(2, np.int32))], [start],
            ("ConcatenationOptions", {"axis": 0, "fused_activation_function": 0}))
    y_next = body.tmp(T.FLOAT32, em.shape_of(state[-1]), "y")
    body.op("DYNAMIC_UPDATE_SLICE", [y, row, start], [y_next])
    sub.outputs = [t_next, _copy(body, n), _copy(body, xw)] + list(new) + [y_next]
    em.subgraphs.append(sub)
    return len(em.subgraphs) - 1


def _copy(em: Emitter, idx: int) -> int:
    """A body output equal to a body input (a CAST to its own type, as ops_control's loops do)."""
    dtype = em.dtype_of(idx)
    return em.unary("CAST", idx, options=("CastOptions", {"in_data_type": dtype, "out_data_type": dtype}), hint="same")


def _run(em: Emitter, x: int, xw: int, init: list[int], hidden: int, reverse: bool, step, label: str):
    """WHILE over the steps of one direction; (Y [S, B, H], final states...)."""
    shape = em.tmp(T.INT32, [3], "shape")
    em.op("SHAPE", [x], [shape], ("ShapeOptions", {"out_type": T.INT32}))
    state = [em.const(np.array(0, np.int32)), _dim(em, shape, 0), xw] + init + [_zero_outputs(em, shape, hidden)]
    cond_index = _cond(em, state, label)
    body_index = _body(em, state, label, reverse, step)
    outs = [em.tmp(em.dtype_of(s), em.shape_of(s), "while") for s in state]
    em.op("WHILE", state, outs, ("WhileOptions", {"cond_subgraph_index": cond_index, "body_subgraph_index": body_index}))
    return outs[-1], outs[3:-1]


def _outputs(em: Emitter, node, layout: int, ys: list[int], finals: list[list[int]]) -> None:
    """Y per direction [S, B, H] -> ONNX's Y; the final states as ``ops.rnn`` packs them."""
    if node.output and node.output[0]:
        if layout:  # [B, S, dirs, H]: each direction batch-major first
            ys = [_batch_major(em, y) for y in ys]
        em.op("PACK", ys, [em.out(0)], ("PackOptions", {"values_count": len(ys), "axis": 2 if layout else 1}))
    emit_outputs(em, _without_y(node), layout, [], finals)


def _batch_major(em: Emitter, y: int) -> int:
    out = em.tmp(T.FLOAT32, None, "y_bm")
    em.op("TRANSPOSE", [y, em.const(np.array([1, 0, 2], np.int32))], [out])
    return out


def _without_y(node):
    """``node`` with its Y output blanked (ops_rnn's packer then writes only Y_h, Y_c)."""
    copy = onnx.NodeProto()
    copy.CopyFrom(node)
    if copy.output:
        copy.output[0] = ""
    return copy


def lstm_over_dynamic_sequence(em: Emitter, node, ins, layout, w, r, b, direction, hidden) -> None:
    x = em.t(ins[0])
    xs = _time_major(em, x, layout)
    ys, last_h, last_c = [], [], []
    for d, reverse in enumerate(directions(direction)):
        xw = fc(em, xs, w[d], b[d, : 4 * hidden] + b[d, 4 * hidden:])
        init = [initial_state(em, ins[5], d, x, layout, hidden), initial_state(em, ins[6], d, x, layout, hidden)]
        y, (h, c) = _run(em, xs, xw, init, hidden, reverse,
                         lambda body, x_t, hc, rd=r[d]: lstm_cell(body, x_t, hc[0], hc[1], rd), f"{node.name}/d{d}")
        ys.append(y)
        last_h.append(h)
        last_c.append(c)
    _outputs(em, node, layout, ys, [last_h, last_c])


def gru_over_dynamic_sequence(em: Emitter, node, ins, layout, w, r, b, direction, hidden, before_reset) -> None:
    x = em.t(ins[0])
    xs = _time_major(em, x, layout)
    ys, last_h = [], []
    H = hidden
    for d, reverse in enumerate(directions(direction)):
        xw = fc(em, xs, w[d], b[d, : 3 * H])
        init = [initial_state(em, ins[5], d, x, layout, hidden)]
        y, (h,) = _run(em, xs, xw, init, hidden, reverse,
                       lambda body, x_t, hs, rd=r[d], rb=b[d, 3 * H:]: (gru_cell(body, x_t, hs[0], rd, rb, before_reset),),
                       f"{node.name}/d{d}")
        ys.append(y)
        last_h.append(h)
    _outputs(em, node, layout, ys, [last_h])
