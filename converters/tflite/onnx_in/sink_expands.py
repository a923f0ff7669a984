"""Expand of a constant moved past the ops that treat every broadcast copy alike, so the
ops fold and only the final broadcast stays a run-time op.

A program with a dynamic batch often builds one constant row and broadcasts it over the batch
(transformers' ``position_ids.expand(batch, -1)`` and the attention mask made from them): every
op after that ``Expand`` sees a run-time shape and stays in the graph, once per run. Here a
value is tracked as "``C`` broadcast by the shape tensors ``S``" (``Expand(...Expand(C, s1)...,
sn)``, ``C`` a constant) while each op reading it keeps that form, which is exact:

* an elementwise op (broadcasting, any arity) over such values and constants is ``f`` of the
  constants broadcast by all their shape tensors: broadcasting is associative, and ``f`` is
  applied to the same operands at every position;
* ``Slice``, ``CumSum``, ``Concat``, ``Gather`` and the reductions that keep their axes
  (``ReduceMax`` and its peers, axes given as an input; empty axes are every axis,
  or none with ``noop_with_empty_axes``) along an axis that no shape tensor of ``S``
  broadcasts (its entry there is a known 1, or ``S`` does not reach it) act on ``C`` alone;
  ``Gather`` puts ones for the index's axes into each shape tensor (new run-time ``Slice`` and
  ``Concat`` nodes of the shape tensor, which is small);
* ``Gather`` from a constant table by such indices looks the rows up once (ones appended to
  each shape tensor for the table's axes after the gathered one);

Where a tracked value is read by any other op, a subgraph or the graph's outputs, it is
rebuilt (``Expand`` by each shape tensor in turn) just before that reader. New constants are
evaluated with the same evaluator and budget as constant folding (``constant_folding.fold``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import onnx
from onnx import helper, numpy_helper

from ...onnx.graph_tools import DefUse, subgraph_reads
from ...onnx.lazy_initializers import array_of
from ..core.emit import attrs

__all__ = ["dim_known", "sink_expands"]

_ELEMENTWISE = {"Add", "Sub", "Mul", "Div", "Neg", "Abs", "Max", "Min", "Equal", "Less", "LessOrEqual",
                "Greater", "GreaterOrEqual", "And", "Or", "Xor", "Not", "Cast", "Where", "Identity",
                "BitwiseAnd", "BitwiseOr", "BitwiseXor", "BitwiseNot", "IsNaN", "IsInf"}
_REDUCTIONS = {"ReduceMax", "ReduceMin", "ReduceSum", "ReduceProd", "ReduceMean"}
_MAX_ELEMENTS = 1 << 20  # a tracked constant larger than this ends the tracking


def dim_known(d: onnx.TensorShapeProto.Dimension) -> bool:
    """A size ONNX shape inference knows: a value, or a symbol it did not invent (``unk__N``
    names a dim it could not infer, one per dim)."""
    return d.HasField("dim_value") or (d.HasField("dim_param") and not d.dim_param.startswith("unk__"))


@dataclass(frozen=True)
class _Broadcast:
    """A value equal to ``const`` broadcast by each shape tensor of ``shapes`` in turn."""

    const: np.ndarray
    shapes: tuple[str, ...]


class _Sinker:
    def __init__(self, m: onnx.ModelProto, evaluate, budget):
        self.m, self.evaluate, self.budget = m, evaluate, budget
        g = m.graph
        self.consts = {t.name: array_of(t) for t in g.initializer}
        self.infos = {vi.name: vi for vi in list(g.value_info) + list(g.input) + list(g.output)}
        self.producer = DefUse.of_graph(g).producers
        self.tracked: dict[str, _Broadcast] = {}
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []
        self.rebuilt: set[str] = set()
        self.interned: dict[tuple, str] = {}
        self.count = 0
        self.lengths: dict[str, int] = {}  # lengths of the shape tensors made here
        self.keys: dict[str, object] = {}  # shape tensor -> its structural key
        self.by_key: dict[object, str] = {}  # structural key -> the first shape tensor with it

    # ------------------------------------------------------------------ helpers

    def fresh(self, hint: str) -> str:
        self.count += 1
        return f"{hint}__sunk{self.count}"

    def const(self, arr: np.ndarray, hint: str) -> str:
        name = self.fresh(hint)
        self.consts[name] = arr
        self.inits.append(numpy_helper.from_array(arr, name))
        return name

    def shape_len(self, s: str) -> int | None:
        if s in self.consts:
            return int(self.consts[s].size)
        if s in self.lengths:
            return self.lengths[s]
        vi = self.infos.get(s)
        t = vi.type.tensor_type if vi is not None else None
        if t is None or not t.HasField("shape") or len(t.shape.dim) != 1 or not t.shape.dim[0].HasField("dim_value"):
            return None
        return t.shape.dim[0].dim_value

    def shape_entries(self, s: str) -> list[int | None] | None:
        """The shape tensor's entries where they are constants (None where they are not)."""
        if s in self.consts:
            return [int(v) for v in self.consts[s].reshape(-1)]
        n = self.shape_len(s)
        if n is None:
            return None
        node = self.producer.get(s)
        if node is not None and node.op_type == "Concat" and node.domain in ("", "ai.onnx"):
            out: list[int | None] = []
            for piece in node.input:
                if piece in self.consts:
                    out += [int(v) for v in self.consts[piece].reshape(-1)]
                else:
                    k = self.shape_len(piece)
                    if k is None:
                        return None
                    out += [None] * k
            if len(out) == n:
                return out
        return [None] * n

    def key(self, name: str, depth: int = 0):
        """A structural key of how ``name`` is computed (equal keys: equal values)."""
        if name in self.keys:
            return self.keys[name]
        if name in self.consts:
            c = self.consts[name]
            k = ("const", c.dtype.str, c.shape, c.tobytes()) if c.size <= 64 else ("value", name)
        else:
            node = self.producer.get(name)
            if node is None or depth > 16 or node.op_type.startswith("Random") or node.domain not in ("", "ai.onnx"):
                k = ("value", name)
            else:
                attrs = tuple(sorted((a.name, a.SerializeToString()) for a in node.attribute))
                k = (node.op_type, attrs, list(node.output).index(name),
                     tuple(self.key(i, depth + 1) if i else None for i in node.input))
        self.keys[name] = k
        return k

    def canonical(self, s: str) -> str:
        """The first shape tensor computed as ``s`` is."""
        return self.by_key.setdefault(self.key(s), s)

    def rank(self, b: _Broadcast) -> int | None:
        lens = [self.shape_len(s) for s in b.shapes]
        return None if None in lens else max([b.const.ndim, *lens])

    def padded(self, b: _Broadcast, r: int) -> np.ndarray:
        return b.const.reshape((1,) * (r - b.const.ndim) + b.const.shape)

    def free(self, b: _Broadcast, r: int, axis: int) -> bool:
        """Whether no shape tensor of ``b`` broadcasts output axis ``axis`` (of rank ``r``)."""
        for s in b.shapes:
            entries = self.shape_entries(s)
            if entries is None:
                return False
            j = axis - (r - len(entries))
            if j >= 0 and entries[j] != 1:
                return False
        return True

    def eval(self, node: onnx.NodeProto, inputs: list[np.ndarray]) -> np.ndarray | None:
        if not self.budget.afford(node, inputs, {}):
            return None
        out = self.evaluate(node, inputs)
        if out is None or len(out) != 1:
            return None
        arr = np.asarray(out[0])
        if arr.size > _MAX_ELEMENTS or not self.budget.take([arr]):
            return None
        return arr

    # ------------------------------------------------------------------ the rules

    def sunk(self, node: onnx.NodeProto) -> _Broadcast | None:
        """The tracked form of ``node``'s one output, or None when it does not keep it."""
        if node.domain not in ("", "ai.onnx") or len(node.output) != 1:
            return None
        ins = list(node.input)
        if not any(i in self.tracked for i in ins):
            if node.op_type == "Expand" and ins[0] in self.consts and self.consts[ins[0]].size <= _MAX_ELEMENTS:
                return self.seed(self.consts[ins[0]], ins[1])
            return None
        op = node.op_type
        if op == "Expand":
            b = self.tracked.get(ins[0])
            if b is None or ins[1] in self.tracked:
                return None
            s = self.canonical(ins[1])
            return _Broadcast(b.const, b.shapes + ((s,) if s not in b.shapes else ()))
        if op in _ELEMENTWISE:
            return self.elementwise(node, ins)
        if op == "Gather" and ins[0] in self.consts and ins[1] in self.tracked:
            return self.lookup(node, ins)
        if op in ("CumSum", "Slice", "Gather") or (op in _REDUCTIONS and len(ins) > 1 and ins[1]
                                                   and int(attrs(node).get("keepdims", 1)) == 1):
            return self.along_axis(node, ins)
        if op == "Concat":
            return self.concat(node, ins)
        return None

    def seed(self, c: np.ndarray, s: str) -> _Broadcast:
        """``Expand(c, s)`` tracked, with the sizes ``s`` holds as constants moved into ``c``
        (``s``'s entry becomes 1) where ``c`` is 1, so that only run-time sizes broadcast."""
        entries = self.shape_entries(s)
        node = self.producer.get(s)
        if entries is None or len(entries) < c.ndim or not (s in self.consts or (
                node is not None and node.op_type == "Concat" and node.domain in ("", "ai.onnx"))):
            return _Broadcast(c, (self.canonical(s),))
        cp = c.reshape((1,) * (len(entries) - c.ndim) + c.shape)
        target = [e if (d == 1 and e is not None and e > 1) else d for d, e in zip(cp.shape, entries)]
        if list(cp.shape) == target or np.prod(target, dtype=np.float64) > _MAX_ELEMENTS:
            return _Broadcast(c, (self.canonical(s),))
        moved = [t != d for t, d in zip(target, cp.shape)]
        c2 = np.ascontiguousarray(np.broadcast_to(cp, target))
        if s in self.consts:
            new = np.where(moved, 1, self.consts[s]).astype(self.consts[s].dtype)
            return _Broadcast(c2, (self.canonical(self.const(new, "shape")),))
        pieces, at = [], 0
        for piece in node.input:
            k = self.shape_len(piece)
            if piece in self.consts and any(moved[at:at + k]):
                v = self.consts[piece].reshape(-1)
                piece = self.const(np.where(moved[at:at + k], 1, v).astype(v.dtype), "shape_part")
            pieces.append(piece)
            at += k
        return _Broadcast(c2, (self.canonical(self.emit("Concat", pieces, "shape", len(entries), axis=0)),))

    def elementwise(self, node, ins) -> _Broadcast | None:
        vals, shapes = [], []
        for i in ins:
            if i in self.tracked:
                b = self.tracked[i]
                vals.append(b.const)
                shapes += [s for s in b.shapes if s not in shapes]
            elif i in self.consts:
                vals.append(self.consts[i])
            else:
                return None
        try:
            size = np.prod(np.broadcast_shapes(*[v.shape for v in vals]), dtype=np.float64)
        except ValueError:
            return None
        out = self.eval(node, vals) if size <= _MAX_ELEMENTS else None
        return None if out is None else _Broadcast(out, tuple(shapes))

    def along_axis(self, node, ins) -> _Broadcast | None:
        b = self.tracked.get(ins[0])
        if b is None or any(i in self.tracked or (i and i not in self.consts) for i in ins[1:]):
            return None
        r = self.rank(b)
        if r is None or r == 0:
            return None
        params = [self.consts[i] if i else None for i in ins[1:]]
        if node.op_type == "CumSum":
            axes = [int(params[0])]
        elif node.op_type in _REDUCTIONS:
            axes = self.reduced_axes(node, params[0], r)
            if axes is None:
                return b
            params[0] = np.asarray(axes, np.int64)
        elif node.op_type == "Gather":
            axes = [int(attrs(node).get("axis", 0))]
        else:
            axes = [int(v) for v in params[2]] if len(params) > 2 and params[2] is not None \
                else list(range(len(params[0])))
        axes = [a + r if a < 0 else a for a in axes]
        if any(not 0 <= a < r or not self.free(b, r, a) for a in axes):
            return None
        c = self.padded(b, r)
        if node.op_type == "Gather" and c.size / max(c.shape[axes[0]], 1) * params[0].size > _MAX_ELEMENTS:
            return None
        out = self.eval(node, [c] + [p for p in params if p is not None])
        if out is None:
            return None
        if node.op_type != "Gather":
            return _Broadcast(out, b.shapes)
        shapes = tuple(self.gathered_shape(s, r, axes[0], params[0].ndim) for s in b.shapes)
        return None if None in shapes else _Broadcast(out, shapes)

    @staticmethod
    def reduced_axes(node, axes: np.ndarray, r: int) -> list[int] | None:
        """The axes a reduction reduces, spelled out: empty ``axes`` reduce every axis (the
        broadcast ones too, so ``along_axis`` refuses a batch axis), or none at all (None) with
        ``noop_with_empty_axes``."""
        if axes.size:
            return [int(v) for v in axes.reshape(-1)]
        return None if int(attrs(node).get("noop_with_empty_axes", 0)) else list(range(r))

    def lookup(self, node, ins) -> _Broadcast | None:
        """``Gather`` from a constant table by tracked indices: the rows looked up once, then
        broadcast by each shape tensor with ones appended for the table's axes after ``axis``."""
        table, b = self.consts[ins[0]], self.tracked[ins[1]]
        axis, r = int(attrs(node).get("axis", 0)), self.rank(b)
        if table.ndim == 0 or not -table.ndim <= axis < table.ndim or r is None:
            return None
        axis %= table.ndim
        if b.const.size * table.size / max(table.shape[axis], 1) > _MAX_ELEMENTS:
            return None
        # the indices at the broadcast's full rank: the shape tensors then line up with the
        # index's axes of the output (a lower-rank constant would leave them on the table's)
        out = self.eval(node, [table, self.padded(b, r)])
        if out is None:
            return None
        trailing = table.ndim - axis - 1
        shapes = tuple(self.appended_ones(s, trailing) for s in b.shapes)
        return None if None in shapes else _Broadcast(out, shapes)

    def appended_ones(self, s: str, k: int) -> str | None:
        if k == 0:
            return s
        n = self.shape_len(s)
        memo = ("ones after", s, k)
        if n is not None and memo not in self.by_key:
            self.by_key[memo] = self.emit("Concat", [s, self.const(np.ones(k, np.int64), "ones")], "shape", n + k, axis=0)
        return self.by_key.get(memo)

    def gathered_shape(self, s: str, r: int, axis: int, index_rank: int) -> str | None:
        """``s`` with its entry for ``axis`` (a 1) replaced by ``index_rank`` ones."""
        memo = ("gathered", s, r, axis, index_rank)
        if memo not in self.by_key:
            self.by_key[memo] = self._gathered_shape(s, r, axis, index_rank)
        return self.by_key[memo]

    def _gathered_shape(self, s: str, r: int, axis: int, index_rank: int) -> str | None:
        n = self.shape_len(s)
        j = axis - (r - n)
        if j < 0 or index_rank == 1:  # not reached, or a 1 for a 1
            return s
        parts = []
        if j > 0:
            parts.append(self.emit("Slice", [s, self.const(np.array([0], np.int64), "start"),
                                             self.const(np.array([j], np.int64), "end")], "shape_head", j))
        if index_rank:
            parts.append(self.const(np.ones(index_rank, np.int64), "ones"))
        if j + 1 < n:
            parts.append(self.emit("Slice", [s, self.const(np.array([j + 1], np.int64), "start"),
                                             self.const(np.array([n], np.int64), "end")], "shape_tail", n - j - 1))
        if not parts:
            return self.const(np.zeros(0, np.int64), "shape")
        return parts[0] if len(parts) == 1 else self.emit("Concat", parts, "shape", n - 1 + index_rank, axis=0)

    def concat(self, node, ins) -> _Broadcast | None:
        bs = [self.tracked.get(i) for i in ins]
        if any(b is None for b in bs) or len({b.shapes for b in bs}) != 1:
            return None
        ranks = {self.rank(b) for b in bs}
        if len(ranks) != 1 or None in ranks:
            return None
        r = ranks.pop()
        axis = int(attrs(node).get("axis", 0))
        axis = axis + r if axis < 0 else axis
        if not 0 <= axis < r or not self.free(bs[0], r, axis):
            return None
        cs = [self.padded(b, r) for b in bs]
        if len({c.shape[:axis] + c.shape[axis + 1:] for c in cs}) != 1:
            return None
        out = self.eval(node, cs)
        return None if out is None else _Broadcast(out, bs[0].shapes)

    # ------------------------------------------------------------------ rewriting

    def emit(self, op: str, inputs: list[str], hint: str, length: int, **attributes) -> str:
        """A new 1-D int64 shape tensor of ``length`` entries, computed by ``op``."""
        out = self.fresh(hint)
        node = helper.make_node(op, inputs, [out], **attributes)
        self.nodes.append(node)
        self.producer[out] = node
        self.lengths[out] = length
        return out

    def rebuild(self, name: str) -> None:
        """Make the tracked value ``name`` again, as Expand nodes, before its reader."""
        if name in self.rebuilt:
            return
        b = self.tracked[name]
        cur = self.interned_const(b.const, name)
        for k, s in enumerate(b.shapes):
            out = name if k == len(b.shapes) - 1 else self.fresh(name)
            self.nodes.append(helper.make_node("Expand", [cur, s], [out]))
            cur = out
        self.rebuilt.add(name)

    def dims(self, name: str) -> list | None:
        """``name``'s dims as shape inference left them (an int, a symbol, or None: unknown)."""
        vi = self.infos.get(name)
        t = vi.type.tensor_type if vi is not None else None
        if t is None or not t.HasField("shape"):
            return None
        return [(d.dim_value if d.HasField("dim_value") else d.dim_param) if dim_known(d) else None
                for d in t.shape.dim]

    def absorbed(self, node: onnx.NodeProto) -> onnx.NodeProto:
        """``node`` (elementwise) reading the constant behind a tracked input where another,
        run-time input already has every size that input's shape tensors broadcast to: the
        output is then the same (each size the tracked input broadcasts to is that input's)."""
        if node.op_type not in _ELEMENTWISE or node.domain not in ("", "ai.onnx"):
            return node
        runtime = [self.dims(i) for i in node.input if i and i not in self.tracked and i not in self.consts]
        runtime = [d for d in runtime if d is not None]
        swapped = None
        for k, name in enumerate(node.input):
            b = self.tracked.get(name)
            t = self.dims(name) if b is not None else None
            if t is None or not any(self._covers(x, t, b.const) for x in runtime):
                continue
            if swapped is None:
                swapped = onnx.NodeProto()
                swapped.CopyFrom(node)
            swapped.input[k] = self.interned_const(b.const, name)
        node = swapped if swapped is not None else node
        return self.times_one(node) or node

    def times_one(self, node: onnx.NodeProto) -> onnx.NodeProto | None:
        """``Mul(x, ones)`` as ``Identity(x)`` when the float ones broadcast no axis of ``x``
        (``x * 1.0`` is ``x``, bit for bit): the "no fully masked row" factor of a constant
        mask."""
        if node.op_type != "Mul" or len(node.input) != 2:
            return None
        for k in (0, 1):
            c, x = self.consts.get(node.input[k]), node.input[1 - k]
            dims = self.dims(x) if x not in self.consts else None
            if c is None or dims is None or c.dtype.kind != "f" or c.ndim > len(dims) or not np.all(c == 1):
                continue
            cp = (1,) * (len(dims) - c.ndim) + c.shape
            if all(cd == 1 or cd == xd for cd, xd in zip(cp, dims)):
                return helper.make_node("Identity", [x], list(node.output), name=node.name)
        return None

    @staticmethod
    def _covers(x: list, t: list, c: np.ndarray) -> bool:
        """Whether ``x`` (dims) has, on every axis where ``c`` is 1 and ``t`` (the broadcast
        value's dims) is not, the same known size as ``t``; and at least ``t``'s rank."""
        if len(x) < len(t) or c.ndim > len(t):
            return False
        cp = (1,) * (len(t) - c.ndim) + c.shape
        for a, (td, cd) in enumerate(zip(t, cp)):
            if td == cd:
                continue
            if cd != 1 or td is None or x[len(x) - len(t) + a] != td:
                return False
        return True

    def interned_const(self, arr: np.ndarray, hint: str) -> str:
        content = (arr.dtype.str, arr.shape, arr.tobytes())
        name = self.interned.get(content)  # equal tracked values read the same constant, so the
        if name is None:                   # TFLite target's dedupe merges what reads them alike
            name = self.interned[content] = self.const(arr, hint)
        return name

    def run(self) -> bool:
        g = self.m.graph
        for node in g.node:
            b = self.sunk(node)
            if b is not None:
                self.tracked[node.output[0]] = b
                continue
            node = self.absorbed(node)
            for i in list(node.input) + sorted(subgraph_reads(node)):
                if i in self.tracked:
                    self.rebuild(i)
            self.nodes.append(node)
        for o in g.output:
            if o.name in self.tracked:
                self.rebuild(o.name)
        if not self.tracked:
            return False
        del g.node[:]
        g.node.extend(self.nodes)
        g.initializer.extend(self.inits)
        return True


def sink_expands(m: onnx.ModelProto, evaluate, budget) -> bool:
    """Rewrite ``m``'s main graph in place as the module docstring says; whether it changed.
    ``evaluate(node, inputs)`` computes a node's outputs from constants (None when it cannot),
    ``budget`` bounds the work and bytes (``constant_folding.FoldBudget``)."""
    return _Sinker(m, evaluate, budget).run()
