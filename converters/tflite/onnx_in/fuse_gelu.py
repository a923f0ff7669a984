"""GELU written out with Erf or Tanh, found in the ONNX graph and mapped as one ``Gelu``.

Below opset 20 ONNX has no Gelu: pt2x's own ONNX at the TFLite target's opset and other
exporters write ``0.5 * x * (1 + erf(x / sqrt(2)))`` with Mul/Div, Erf, Add and Mul nodes, and
the tanh approximation ``0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3)))`` (torch's
``gelu(approximate="tanh")``, and the ``NewGELUActivation`` GPT-2 and others write in Python).
TFLite has no ERF, so Erf alone is a ten-operator polynomial (``ops.elementwise.erf``), and the
tanh form is nine elementwise operators; TFLite's GELU (``approximate`` false or true) computes
each function in one kernel, which XNNPACK takes. A chain is rewritten only when it is that
function of one value ``x``:

- ``e = Erf(Mul(x, c))`` with c = 1/sqrt(2) as float32 rounds it, or ``Erf(Div(x, sqrt(2)))``;
- or ``e = Tanh(Mul(Add(x, Mul(x³, 0.044715)), sqrt(2/pi)))`` (any operand order), x³ being
  ``Pow(x, 3)``, ``Mul(x, Mul(x, x))`` or ``Mul(Mul(x, x), x)``, each constant as float32 rounds it;
- ``a = Add(e, 1)`` (either order), and then either ``Mul(Mul(x, 0.5), a)`` or
  ``Mul(Mul(x, a), 0.5)`` (any operand order), the output of the last Mul being the GELU;
- every intermediate value is read only inside the chain and is not a graph output.

The chain's nodes are replaced by one ``Gelu`` node (``approximate="tanh"`` for the Tanh chain)
writing the last Mul's output (same name, so the shape information ``prepare`` computed stays).
Everything else is left as it is.
"""

from __future__ import annotations

import math

import numpy as np
import onnx
from onnx import helper

from ...onnx.graph_tools import DefUse, copy_stamp
from ...onnx.lazy_initializers import array_of

__all__ = ["fuse_gelu"]

_F32 = np.float32
_INV_SQRT2 = _F32(1 / math.sqrt(2))
_SQRT2 = _F32(math.sqrt(2))
_SQRT_2_OVER_PI = _F32(math.sqrt(2 / math.pi))
_KAPPA = _F32(0.044715)


class _Graph:
    """The def-use index (``graph_tools.DefUse`` of the top level) and the scalar constants of one
    ONNX graph."""

    def __init__(self, g: onnx.GraphProto):
        self.uses = DefUse.of_graph(g, nested=False)
        self.consts = {t.name: t for t in g.initializer}
        for n in g.node:
            if n.op_type == "Constant" and n.attribute and n.attribute[0].name == "value":
                self.consts[n.output[0]] = n.attribute[0].t

    def scalar(self, name: str) -> float | None:
        t = self.consts.get(name)
        if t is None or t.data_type != onnx.TensorProto.FLOAT:
            return None
        v = array_of(t)
        return float(v.reshape(())) if v.size == 1 and v.ndim <= 1 else None

    def only_reader(self, name: str, op_type: str):
        """The one node reading ``name`` (once), when it is an ``op_type`` and ``name`` is internal."""
        r = self.uses.sole_reader(name)
        return r if r is not None and r.op_type == op_type else None

    def other(self, node, name: str) -> str:
        return node.input[1] if node.input[0] == name else node.input[0]


def _erf_input(gr: _Graph, erf) -> tuple[str, list] | None:
    """(x, the scaling node) for Erf(x * 1/sqrt2) or Erf(x / sqrt2)."""
    pre = gr.uses.producers.get(erf.input[0])
    if pre is None or gr.only_reader(pre.output[0], "Erf") is not erf:
        return None
    x = _scaled_by(gr, pre, _INV_SQRT2)
    if x is not None:
        return x, [pre]
    if pre.op_type == "Div" and _is(gr, pre.input[1], _SQRT2):
        return pre.input[0], [pre]
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
    half = gr.uses.producers.get(other)  # Mul(Mul(x, 0.5), a)
    if (half is not None and half.op_type == "Mul" and x in half.input and _is(gr, gr.other(half, x), 0.5)
            and gr.only_reader(half.output[0], "Mul") is m1):
        return [half, m1], m1.output[0]
    return None


def _scaled_by(gr: _Graph, node, value: np.float32) -> str | None:
    """The other operand of a Mul by the float32 scalar ``value``."""
    if node is None or node.op_type != "Mul":
        return None
    for a, c in ((node.input[0], node.input[1]), (node.input[1], node.input[0])):
        if gr.scalar(c) is not None and _F32(gr.scalar(c)) == value and gr.scalar(a) is None:
            return a
    return None


def _cube(gr: _Graph, name: str) -> tuple[str, list] | None:
    """(x, the nodes) where ``name`` is Pow(x, 3), Mul(x, Mul(x, x)) or Mul(Mul(x, x), x)."""
    node = gr.uses.producers.get(name)
    if node is None:
        return None
    if node.op_type == "Pow" and _is(gr, node.input[1], 3.0) and gr.scalar(node.input[0]) is None:
        return node.input[0], [node]
    if node.op_type != "Mul":
        return None
    for x, sq in ((node.input[0], node.input[1]), (node.input[1], node.input[0])):
        inner = gr.uses.producers.get(sq)
        if (inner is not None and inner.op_type == "Mul" and list(inner.input) == [x, x]
                and gr.only_reader(sq, "Mul") is node):
            return x, [inner, node]
    return None


def _tanh_input(gr: _Graph, tanh) -> tuple[str, list] | None:
    """(x, the nodes before the Tanh) for Tanh(sqrt(2/pi) * (x + 0.044715 * x³))."""
    pre = gr.uses.producers.get(tanh.input[0])
    a = _scaled_by(gr, pre, _SQRT_2_OVER_PI)
    if a is None or gr.only_reader(pre.output[0], "Tanh") is not tanh:
        return None
    add = gr.uses.producers.get(a)
    if add is None or add.op_type != "Add" or gr.only_reader(a, "Mul") is not pre:
        return None
    for x, m in ((add.input[0], add.input[1]), (add.input[1], add.input[0])):
        mul = gr.uses.producers.get(m)
        c = _scaled_by(gr, mul, _KAPPA)
        cube = _cube(gr, c) if c is not None and gr.only_reader(m, "Add") is add else None
        if cube is not None and cube[0] == x and gr.only_reader(c, "Mul") is mul:
            return x, cube[1] + [mul, add, pre]
    return None


# the nodes before the Erf or Tanh, by its op type: (x, those nodes) or None
_INPUTS = {"Erf": _erf_input, "Tanh": _tanh_input}


def _chain(gr: _Graph, node) -> tuple[str, list, str] | None:
    """(x, the chain's nodes, the GELU's output) for 0.5 * x * (1 + node(...)), node an Erf or Tanh."""
    found = _INPUTS[node.op_type](gr, node)
    if found is None:
        return None
    x, before = found
    add = gr.only_reader(node.output[0], "Add")
    if add is None or not _is(gr, gr.other(add, node.output[0]), 1.0):
        return None
    tail = _tail(gr, x, add)
    if tail is None:
        return None
    return x, before + [node, add] + tail[0], tail[1]


def fuse_gelu(g: onnx.GraphProto) -> int:
    """Rewrite every GELU chain of ``g`` (its top level) as one Gelu; the count."""
    gr = _Graph(g)
    replace: dict[int, onnx.NodeProto] = {}  # id of the chain's last node -> the Gelu
    drop: set[int] = set()
    for node in [n for n in g.node if n.op_type in _INPUTS]:
        found = _chain(gr, node)
        if found is None or any(id(n) in drop for n in found[1]):
            continue
        x, nodes, out = found
        drop.update(id(n) for n in nodes)
        extra = {"approximate": "tanh"} if node.op_type == "Tanh" else {}
        gelu = helper.make_node("Gelu", [x], [out], name=(node.name or out) + "/gelu", **extra)
        copy_stamp(node, gelu)  # the ATen node it came from, for messages
        replace[id(nodes[-1])] = gelu
    if not replace:
        return 0
    kept = [replace.get(id(n), n) for n in g.node if id(n) not in drop or id(n) in replace]
    del g.node[:]
    g.node.extend(kept)
    return len(replace)
