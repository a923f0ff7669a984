"""The exact GELU written out with Erf, found in the ONNX graph and mapped as one ``Gelu``.

Below opset 20 ONNX has no Gelu: pt2x's own ONNX at the TFLite target's opset and other
exporters write ``0.5 * x * (1 + erf(x / sqrt(2)))`` with Mul/Div, Erf, Add and Mul nodes. TFLite
has no ERF, so Erf alone is a ten-operator polynomial (``ops_elementwise.erf``); TFLite's GELU
(``approximate=False``) computes this very function in one kernel, which XNNPACK takes. A chain is
rewritten only when it is that function of one value ``x``:

- ``e = Erf(Mul(x, c))`` with c = 1/sqrt(2) as float32 rounds it, or ``Erf(Div(x, sqrt(2)))``;
- ``a = Add(e, 1)`` (either order), and then either ``Mul(Mul(x, 0.5), a)`` or
  ``Mul(Mul(x, a), 0.5)`` (any operand order), the output of the last Mul being the GELU;
- every intermediate value is read only inside the chain and is not a graph output.

The chain's nodes are replaced by one ``Gelu`` node writing the last Mul's output (same name,
so the shape information ``prepare`` computed stays). Everything else is left as it is.
"""

from __future__ import annotations

import math

import numpy as np
import onnx
from onnx import helper, numpy_helper

from ..onnx.graph_tools import copy_stamp

__all__ = ["fuse_erf_gelu"]

_F32 = np.float32
_INV_SQRT2 = _F32(1 / math.sqrt(2))
_SQRT2 = _F32(math.sqrt(2))


class _Graph:
    """Producers, readers and scalar constants of one ONNX graph's nodes."""

    def __init__(self, g: onnx.GraphProto):
        self.g = g
        self.producer = {o: n for n in g.node for o in n.output}
        self.readers: dict[str, list] = {}
        for n in g.node:
            for i in n.input:
                self.readers.setdefault(i, []).append(n)
        self.outputs = {o.name for o in g.output}
        self.consts = {t.name: t for t in g.initializer}
        for n in g.node:
            if n.op_type == "Constant" and n.attribute and n.attribute[0].name == "value":
                self.consts[n.output[0]] = n.attribute[0].t

    def scalar(self, name: str) -> float | None:
        t = self.consts.get(name)
        if t is None or t.data_type != onnx.TensorProto.FLOAT:
            return None
        v = numpy_helper.to_array(t)
        return float(v.reshape(())) if v.size == 1 and v.ndim <= 1 else None

    def only_reader(self, name: str, op_type: str):
        """The one node reading ``name`` (once), when it is an ``op_type`` and ``name`` is internal."""
        rs = self.readers.get(name, [])
        if len(rs) != 1 or rs[0].op_type != op_type or name in self.outputs or list(rs[0].input).count(name) != 1:
            return None
        return rs[0]

    def other(self, node, name: str) -> str:
        return node.input[1] if node.input[0] == name else node.input[0]


def _erf_input(gr: _Graph, erf) -> tuple[str, object] | None:
    """(x, the scaling node) for Erf(x * 1/sqrt2) or Erf(x / sqrt2)."""
    pre = gr.producer.get(erf.input[0])
    if pre is None or gr.only_reader(pre.output[0], "Erf") is not erf:
        return None
    if pre.op_type == "Mul":
        for x, c in ((pre.input[0], pre.input[1]), (pre.input[1], pre.input[0])):
            if gr.scalar(c) is not None and _F32(gr.scalar(c)) == _INV_SQRT2 and gr.scalar(x) is None:
                return x, pre
    if pre.op_type == "Div" and gr.scalar(pre.input[1]) is not None and _F32(gr.scalar(pre.input[1])) == _SQRT2:
        return pre.input[0], pre
    return None


def _is(gr: _Graph, name: str, value: float) -> bool:
    v = gr.scalar(name)
    return v is not None and _F32(v) == _F32(value)


def _tail(gr: _Graph, x: str, add) -> tuple[list, str] | None:
    """The nodes after ``add`` that make 0.5 * x * add, and the GELU's output name."""
    m1 = gr.only_reader(add.output[0], "Mul")
    if m1 is None:
        return None
    other = gr.other(m1, add.output[0])
    if other == x:  # Mul(Mul(x, a), 0.5)
        m2 = gr.only_reader(m1.output[0], "Mul")
        if m2 is not None and _is(gr, gr.other(m2, m1.output[0]), 0.5):
            return [m1, m2], m2.output[0]
        return None
    half = gr.producer.get(other)  # Mul(Mul(x, 0.5), a)
    if (half is not None and half.op_type == "Mul" and x in half.input and _is(gr, gr.other(half, x), 0.5)
            and gr.only_reader(half.output[0], "Mul") is m1):
        return [half, m1], m1.output[0]
    return None


def _chain(gr: _Graph, erf) -> tuple[str, list, str] | None:
    found = _erf_input(gr, erf)
    if found is None:
        return None
    x, pre = found
    add = gr.only_reader(erf.output[0], "Add")
    if add is None or not _is(gr, gr.other(add, erf.output[0]), 1.0):
        return None
    tail = _tail(gr, x, add)
    if tail is None:
        return None
    return x, [pre, erf, add] + tail[0], tail[1]


def fuse_erf_gelu(g: onnx.GraphProto) -> int:
    """Rewrite every exact-GELU chain of ``g`` (its top level) as one Gelu; the count."""
    gr = _Graph(g)
    replace: dict[int, onnx.NodeProto] = {}  # id of the chain's last node -> the Gelu
    drop: set[int] = set()
    for erf in [n for n in g.node if n.op_type == "Erf"]:
        found = _chain(gr, erf)
        if found is None or any(id(n) in drop for n in found[1]):
            continue
        x, nodes, out = found
        drop.update(id(n) for n in nodes)
        gelu = helper.make_node("Gelu", [x], [out], name=(erf.name or out) + "/gelu")
        copy_stamp(erf, gelu)  # the ATen node it came from, for messages
        replace[id(nodes[-1])] = gelu
    if not replace:
        return 0
    kept = [replace.get(id(n), n) for n in g.node if id(n) not in drop or id(n) in replace]
    del g.node[:]
    g.node.extend(kept)
    return len(replace)
