"""Fold inference BatchNormalization into the Conv, ConvTranspose or Gemm that feeds it.

Runs on the assembled root graph (subgraphs are left alone). A ``BatchNormalization``
node folds when all of these hold, else the graph is left as it is:
  * it is in inference form (one output, no ``training_mode``) and its scale, bias, mean
    and variance are constants (initializers);
  * its input is the only output of a Conv / ConvTranspose / Gemm / MatMul (2-D input,
    known from the program's metadata; it becomes a Gemm) in the same graph,
    read by nothing else (no other node, no subgraph, no graph output);
  * that producer's weight (and bias, when it has one) are constants of the BN's dtype,
    and the channel counts agree; a Gemm has default ``alpha``/``beta`` and a 1-D bias.

With ``s = scale / sqrt(var + eps)``: ``W' = W * s`` per output channel and
``b' = (b - mean) * s + bias``, computed in float64 and cast to the weight's dtype. The
folded weights are new initializers (the originals may be tied elsewhere; ``prune``
drops them when nothing reads them), counted against the constant budget.
"""

from __future__ import annotations

import numpy as np
from onnx import helper

from ..errors import ConversionError
from .graph_tools import DefUse, attrs, copy_stamp

__all__ = ["fold_batch_norms"]

_PRODUCERS = ("Conv", "ConvTranspose", "Gemm", "MatMul")


def _rank2(ctx, name: str) -> bool:
    """Whether the ONNX value ``name`` is a program tensor known to be 2-D."""
    for prog_name, onnx_name in ctx.root.env.items():
        if onnx_name == name:
            try:
                return ctx.root.view.tensor(prog_name).rank == 2
            except Exception:  # a SymInt or a value without tensor metadata
                return False
    return False


def _bn_params(bn, consts):
    """(scale, bias, mean, var, eps) as float64 when ``bn`` is a foldable inference BN."""
    if bn.domain not in ("", "ai.onnx") or len(bn.output) != 1 or len(bn.input) != 5:
        return None
    if attrs(bn).get("training_mode", 0):
        return None
    vals = [consts.get(x) for x in bn.input[1:]]
    if any(v is None or v.ndim != 1 for v in vals) or len({v.shape for v in vals}) != 1:
        return None
    if any(v.dtype.kind != "f" for v in vals):
        return None
    return [v.astype(np.float64) for v in vals] + [float(attrs(bn).get("epsilon", 1e-5)), vals[0].dtype]


def _scaled_weight(prod, w, s):
    """``w`` scaled per output channel of ``prod`` (float64), or None when the layout is not
    one this pass knows."""
    c = s.shape[0]
    if prod.op_type == "Conv":
        if w.ndim < 3 or w.shape[0] != c:
            return None
        return w * s.reshape((c,) + (1,) * (w.ndim - 1))
    if prod.op_type == "ConvTranspose":
        g = int(attrs(prod).get("group", 1))
        if w.ndim < 3 or w.shape[0] % g or w.shape[1] * g != c:
            return None
        wg = w.reshape((g, w.shape[0] // g) + w.shape[1:])  # [g, cin/g, cout/g, k...]
        sg = s.reshape((g, 1, c // g) + (1,) * (w.ndim - 2))
        return (wg * sg).reshape(w.shape)
    # Gemm: Y = A' @ B' with B' = B.T when transB; output channel is B''s last axis.
    # MatMul reaches here only 2-D x 2-D (it becomes a Gemm without attributes)
    if attrs(prod).get("alpha", 1.0) != 1.0 or attrs(prod).get("beta", 1.0) != 1.0 or w.ndim != 2:
        return None
    if attrs(prod).get("transB", 0):
        return w * s[:, None] if w.shape[0] == c else None
    return w * s[None, :] if w.shape[1] == c else None


def _fold_one(ctx, prod, bn, params):
    """The producer rewritten to compute the BN's output, or None when it cannot fold."""
    consts = ctx.root.consts
    scale, beta, mean, var, eps, bn_dtype = params
    w = consts.get(prod.input[1]) if len(prod.input) > 1 else None
    b = consts.get(prod.input[2]) if len(prod.input) > 2 and prod.input[2] else None
    if w is None or w.dtype != bn_dtype or (len(prod.input) > 2 and prod.input[2] and b is None):
        return None
    c = scale.shape[0]
    if b is not None and (b.dtype != bn_dtype or b.shape != (c,)):
        return None
    try:  # the folded copies must fit the constant budget; a BN that does not fit is kept
        ctx.reserve(w.nbytes + c * w.itemsize, f"{prod.input[1]!r} folded with a BatchNorm", account=False)
    except ConversionError:
        return None
    s = scale / np.sqrt(var + eps)
    w2 = _scaled_weight(prod, w.astype(np.float64), s)
    if w2 is None:
        return None
    b0 = np.zeros(c) if b is None else b.astype(np.float64)
    b2 = (b0 - mean) * s + beta
    w_name = ctx.const_array(w2.astype(w.dtype), name=f"{prod.input[1]}.bn_folded")
    b_name = ctx.const_array(b2.astype(w.dtype), name=f"{bn.name or 'bn'}.bias_folded")
    op = "Gemm" if prod.op_type == "MatMul" else prod.op_type
    new = helper.make_node(op, [prod.input[0], w_name, b_name], [bn.output[0]],
                           name=prod.name, domain=prod.domain or None)
    new.attribute.extend(prod.attribute)
    copy_stamp(prod, new)  # the producer's origin (the BN's node is folded into it)
    return new


def fold_batch_norms(ctx, nodes: list, outputs: list[str]) -> list:
    """``nodes`` with each foldable BatchNormalization merged into its producer."""
    consts = ctx.root.consts
    uses = DefUse.of_nodes(nodes, outputs)
    position = {id(n): i for i, n in enumerate(nodes)}
    out = list(nodes)
    drop: set[int] = set()
    for j, bn in enumerate(nodes):
        if bn.op_type != "BatchNormalization":
            continue
        params = _bn_params(bn, consts)
        i = position.get(id(uses.producers.get(bn.input[0])))
        if params is None or i is None or i in drop or uses.sole_reader(bn.input[0]) is not bn:
            continue
        prod = out[i]
        if prod.op_type not in _PRODUCERS or prod.domain not in ("", "ai.onnx") or len(prod.output) != 1:
            continue
        if prod.op_type == "MatMul" and not _rank2(ctx, prod.input[0]):
            continue  # only mm (2-D x 2-D) becomes a Gemm; a batched MatMul's channels are not dim 1
        new = _fold_one(ctx, prod, bn, params)
        if new is not None:
            out[i] = new
            drop.add(j)
    return [n for k, n in enumerate(out) if k not in drop]
