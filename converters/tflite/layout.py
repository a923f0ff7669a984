"""The layout pass: NCHW programs, NHWC kernels (``ops_nn`` wraps each NHWC op in a pair of
TRANSPOSEs). Here transposes sink through layout-agnostic elementwise ops (the op then runs
in NHWC) and pairs that undo each other cancel, so transposes remain only at the edges of
NHWC regions. A transpose whose result is a graph output, or read by more than one op, stays.
"""

from __future__ import annotations

import numpy as np

from .model import Op, Subgraph, Tensor, TensorType

__all__ = ["optimize_layout"]

# ops that compute each element from the same element of their inputs (any layout)
_ELEMENTWISE_UNARY = {"RELU", "RELU6", "LOGISTIC", "TANH", "EXP", "ABS", "NEG", "GELU", "HARD_SWISH",
                      "LEAKY_RELU", "ELU", "SQRT", "RSQRT", "LOG", "SIN", "COS", "FLOOR", "CEIL", "CAST", "SIGN"}
_ELEMENTWISE_BINARY = {"ADD", "SUB", "MUL", "DIV", "MAXIMUM", "MINIMUM"}


def _perm(sub: Subgraph, op: Op) -> list[int] | None:
    if op.code != "TRANSPOSE":
        return None
    t = sub.tensors[op.inputs[1]]
    return None if t.data is None else [int(v) for v in t.data]


def _readers(sub: Subgraph) -> dict[int, list[Op]]:
    r: dict[int, list[Op]] = {}
    for op in sub.ops:
        for i in op.inputs:
            r.setdefault(i, []).append(op)
    return r


def _cancel_pairs(sub: Subgraph) -> bool:
    """TRANSPOSE(q)(TRANSPOSE(p)(x)) with q undoing p: readers of the second read x."""
    producers = {o: op for op in sub.ops for o in op.outputs}
    readers = _readers(sub)
    for op in sub.ops:
        q = _perm(sub, op)
        first = producers.get(op.inputs[0]) if q is not None else None
        p = _perm(sub, first) if first is not None else None
        if p is None or len(p) != len(q) or [p[i] for i in q] != list(range(len(p))):
            continue
        x, y = first.inputs[0], op.outputs[0]
        if y in sub.outputs:  # the output becomes x itself, renamed
            if x in sub.outputs or x in sub.inputs or sub.tensors[x].data is not None:
                continue
            sub.outputs = [x if o == y else o for o in sub.outputs]
            sub.tensors[x].name = sub.tensors[y].name
        for r in readers.get(y, []):
            r.inputs = [x if i == y else i for i in r.inputs]
        sub.ops.remove(op)
        if not readers.get(first.outputs[0]) or readers[first.outputs[0]] == [op]:
            if first.outputs[0] not in sub.outputs:
                sub.ops.remove(first)
        return True
    return False


def _sink(sub: Subgraph) -> bool:
    """op(TRANSPOSE(p)(x), ...) -> TRANSPOSE(p)(op(x, ...)) for elementwise ops whose other
    operands are scalars or transposed by the same p; the transpose(s) must have no other reader."""
    producers = {o: op for op in sub.ops for o in op.outputs}
    readers = _readers(sub)
    for k, op in enumerate(sub.ops):
        if op.code in _ELEMENTWISE_UNARY:
            data_inputs = op.inputs[:1]
        elif op.code in _ELEMENTWISE_BINARY:
            data_inputs = op.inputs[:2]
        else:
            continue
        perm, new_inputs, ok = None, list(op.inputs), True
        for j, i in enumerate(data_inputs):
            t = sub.tensors[i]
            if t.data is not None and t.data.size == 1:
                continue
            prod = producers.get(i)
            p = _perm(sub, prod) if prod is not None else None
            if p is None or (perm is not None and p != perm) or len(readers.get(i, [])) != 1 or i in sub.outputs:
                ok = False
                break
            perm = p
            new_inputs[j] = prod.inputs[0]
        if not ok or perm is None:
            continue
        out = op.outputs[0]
        t_out = sub.tensors[out]
        inv = list(np.argsort(perm))
        mid = sub.add(type(t_out)(t_out.name + "/nhwc", t_out.dtype,
                                  None if t_out.shape is None else [t_out.shape[i] for i in perm]))
        perm_t = producers[next(i for i in data_inputs if producers.get(i) is not None and _perm(sub, producers[i]))]
        op.inputs, op.outputs = new_inputs, [mid]
        for i in data_inputs:
            prod = producers.get(i)
            if prod is not None and prod.code == "TRANSPOSE" and prod in sub.ops and i not in new_inputs:
                sub.ops.remove(prod)
        sub.ops.insert(sub.ops.index(op) + 1, Op("TRANSPOSE", [mid, perm_t.inputs[1]], [out], None, op.origin))
        del inv
        return True
    return False


def nhwc_edges(sub: Subgraph) -> None:
    """Every 4-D input and output channels-last: the subgraph reads an NHWC input and moves it
    to NCHW with a TRANSPOSE (which the pass then cancels against the first NHWC op's), and
    each 4-D output is transposed to NHWC last. The I/O tensors keep their names."""
    to_nchw = np.array([0, 3, 1, 2], np.int32)
    to_nhwc = np.array([0, 2, 3, 1], np.int32)
    for k, idx in enumerate(sub.inputs):
        t = sub.tensors[idx]
        if t.rank != 4:
            continue
        new = sub.add(Tensor(t.name, t.dtype, [t.shape[i] for i in to_nhwc]))
        t.name += "/nchw"
        perm = sub.add(Tensor(t.name + "/perm", TensorType.INT32, [4], to_nchw))
        sub.ops.insert(0, Op("TRANSPOSE", [new, perm], [idx], None, "nhwc_io"))
        sub.inputs[k] = new
    for k, idx in enumerate(sub.outputs):
        t = sub.tensors[idx]
        if t.rank != 4:
            continue
        new = sub.add(Tensor(t.name, t.dtype, [t.shape[i] for i in to_nhwc]))
        t.name += "/nchw"
        perm = sub.add(Tensor(t.name + "/perm", TensorType.INT32, [4], to_nhwc))
        sub.ops.append(Op("TRANSPOSE", [idx, perm], [new], None, "nhwc_io"))
        sub.outputs[k] = new


def optimize_layout(sub: Subgraph, *, nhwc_io: bool = False) -> None:
    """``nhwc_io``: the main subgraph's 4-D inputs and outputs become channels-last first."""
    if nhwc_io:
        nhwc_edges(sub)
    for _ in range(10 * len(sub.ops) + 10):
        if not (_cancel_pairs(sub) or _sink(sub)):
            break
