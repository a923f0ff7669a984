"""``aten.lstm.input`` / ``aten.gru.input`` -> ONNX LSTM/GRU, one node per layer.

torch orders gates (i, f, g, o) for LSTM and (r, z, n) for GRU; ONNX wants (i, o, f, c) and
(z, r, h). Weights are reordered at conversion time, so they must be constants (they are:
parameters). GRU uses ``linear_before_reset=1``, which is torch's formulation.
"""

from __future__ import annotations

import numpy as np

from ..aten import dtypes
from ..aten.args import bind
from ..aten.registry import lowering
from ..errors import Unsupported
from .shapes import axes_const


def _gates(w: np.ndarray, order: list[int]) -> np.ndarray:
    parts = np.split(w, len(order), axis=0)
    return np.concatenate([parts[i] for i in order], axis=0)


def _rnn(ctx, node, kind: str):
    a = bind(node, "input", "hx", "params", "has_biases", "num_layers", "dropout", "train", "bidirectional",
             "batch_first")
    a.declare("dropout")  # read below where train is set
    if a.train and a.dropout:
        raise Unsupported(f"{kind} with dropout in training mode")
    out_st, cst = ctx.out_info().dtype, ctx.compute_type(ctx.out_info().dtype)
    npdt = dtypes.to_numpy(cst)
    hx = a.hx if kind == "lstm" else [a.hx]
    params = [ctx.value_of(p) for p in a.params]
    if any(p is None for p in params):
        raise Unsupported(f"{kind} weights that are not constants")
    per = 4 if a.has_biases else 2
    ndir = 2 if a.bidirectional else 1
    if len(params) != per * ndir * a.num_layers:
        raise Unsupported(f"{kind} with projections (proj_size)")
    order = [0, 3, 1, 2] if kind == "lstm" else [1, 0, 2]
    x = ctx.t(a.input, cst)
    if a.batch_first:
        x = ctx.op("Transpose", x, perm=[1, 0, 2])
    unbatched = ctx.rank(a.input) == 2
    if unbatched:
        x = ctx.op("Unsqueeze", x, axes_const(ctx, [1]))
    states = [ctx.t(h, cst) for h in hx]
    if unbatched:
        states = [ctx.op("Unsqueeze", s, axes_const(ctx, [1])) for s in states]
    hidden = params[1].shape[1]
    hs, cs = [], []
    for layer in range(a.num_layers):
        W, R, B = [], [], []
        for d in range(ndir):
            p = params[(layer * ndir + d) * per:(layer * ndir + d + 1) * per]
            W.append(_gates(p[0], order))
            R.append(_gates(p[1], order))
            if a.has_biases:
                B.append(np.concatenate([_gates(p[2], order), _gates(p[3], order)]))
            else:
                B.append(np.zeros(2 * p[0].shape[0], npdt))
        w = ctx.const_array(np.stack(W).astype(npdt), f"{node.name}.W{layer}")
        r = ctx.const_array(np.stack(R).astype(npdt), f"{node.name}.R{layer}")
        b = ctx.const_array(np.stack(B).astype(npdt), f"{node.name}.B{layer}")
        sl = lambda s: ctx.op("Slice", s, ctx.ints([layer * ndir]), ctx.ints([(layer + 1) * ndir]), ctx.ints([0]))  # noqa: E731
        direction = "bidirectional" if a.bidirectional else "forward"
        if kind == "lstm":
            y, yh, yc = ctx.op("LSTM", x, w, r, b, None, sl(states[0]), sl(states[1]), hidden_size=hidden,
                               direction=direction, outputs=3)
            cs.append(yc)
        else:
            y, yh = ctx.op("GRU", x, w, r, b, None, sl(states[0]), hidden_size=hidden, direction=direction,
                           linear_before_reset=1, outputs=2)
        hs.append(yh)
        # Y: (seq, ndir, batch, hidden) -> (seq, batch, ndir * hidden)
        x = ctx.op("Reshape", ctx.op("Transpose", y, perm=[0, 2, 1, 3]), ctx.ints([0, 0, -1]))
    out = x
    if unbatched:
        out = ctx.op("Squeeze", out, axes_const(ctx, [1]))
    elif a.batch_first:
        out = ctx.op("Transpose", out, perm=[1, 0, 2])
    res = [out, hs[0] if len(hs) == 1 else ctx.op("Concat", *hs, axis=0)]
    if kind == "lstm":
        res.append(cs[0] if len(cs) == 1 else ctx.op("Concat", *cs, axis=0))
    if unbatched:
        res[1:] = [ctx.op("Squeeze", s, axes_const(ctx, [1])) for s in res[1:]]
    return [ctx.cast(v, cst, out_st) for v in res]


@lowering("onnx", "aten.lstm.input")
def lstm(ctx, node):
    return _rnn(ctx, node, "lstm")


@lowering("onnx", "aten.gru.input")
def gru(ctx, node):
    return _rnn(ctx, node, "gru")
