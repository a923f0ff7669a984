"""Quantized weights kept quantized through the folding of ``prepare``: a ``Transpose`` of a
``DequantizeLinear`` of constants (torch.onnx and pt2x write ``x @ W.T`` so) becomes the
``DequantizeLinear`` of the transposed integer constant, its per-axis ``axis`` moved with it.
The same reals: dequantization is elementwise. Folding then leaves the DequantizeLinear, which
the QDQ pass reads as int8 weights and ``ops.quantize`` folds to float where an op stays float.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import helper, numpy_helper
from ...onnx.graph_tools import DefUse, attrs
from ...onnx.lazy_initializers import array_of

__all__ = ["transpose_into_weights"]


def transpose_into_weights(m: onnx.ModelProto) -> None:
    """Rewrite, in place, each Transpose(DequantizeLinear(constants)) of the main graph."""
    g = m.graph
    inits = {t.name: t for t in g.initializer}
    producer = DefUse.of_graph(g).producers
    nodes, added = [], []
    for node in g.node:
        new = _rewritten(node, producer, inits, added) if node.op_type == "Transpose" and not node.domain else None
        nodes.append(new if new is not None else node)
    if added:
        del g.node[:]
        g.node.extend(nodes)
        g.initializer.extend(added)


def _rewritten(node, producer, inits, added) -> onnx.NodeProto | None:
    dq = producer.get(node.input[0])
    if dq is None or dq.op_type != "DequantizeLinear" or dq.domain or any(i and i not in inits for i in dq.input):
        return None
    x = array_of(inits[dq.input[0]])
    scale = array_of(inits[dq.input[1]])
    a = attrs(dq)
    if x.dtype not in (np.int8, np.uint8) or set(a) - {"axis"} or scale.ndim > 1:
        return None
    perm_attr = attrs(node).get("perm")
    perm = list(perm_attr) if perm_attr is not None else list(range(x.ndim))[::-1]
    if len(perm) != x.ndim:
        return None
    name = f"{dq.input[0]}/transposed_{'_'.join(map(str, perm))}"
    if all(t.name != name for t in added):
        added.append(numpy_helper.from_array(np.ascontiguousarray(x.transpose(perm)), name))
    axis = {}
    if scale.size > 1:
        axis["axis"] = perm.index(int(a.get("axis", 1)) % x.ndim)
    return helper.make_node("DequantizeLinear", [name, *dq.input[1:]], list(node.output),
                            name=(node.name or node.output[0]) + "/dequantize_transposed", **axis)
