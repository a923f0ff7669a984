"""The layout pass: NCHW programs, NHWC kernels (``ops.nn`` wraps each NHWC op in a pair of
TRANSPOSEs). Here transposes sink through layout-agnostic elementwise ops (the op then runs
in NHWC) and pairs that undo each other cancel, so transposes remain only at the edges of
NHWC regions. A transpose whose result is a graph output, or read by more than one op, stays.
Which ops transposes move through is ``builtins.BUILTINS``' ``layout_agnostic`` column. The
pass edits the ops through the subgraph's producers/readers index (``Subgraph.uses``) and spends at most ``MAX_LAYOUT_WORK`` op visits (``converters/limits.py``).
"""

from __future__ import annotations

import numpy as np

from ...limits import MAX_LAYOUT_WORK
from ..core.builtins import BUILTINS, REDUCTIONS
from ..core.model import Op, Subgraph, Tensor, TensorType

__all__ = ["optimize_layout"]

def _perm(sub: Subgraph, op: Op) -> list[int] | None:
    if op.code != "TRANSPOSE":
        return None
    t = sub.tensors[op.inputs[1]]
    return None if t.data is None else [int(v) for v in t.data]


def _reading(sub: Subgraph, y: int) -> list[Op]:
    """The ops reading ``y``, each once, in op order."""
    rs = {id(r): r for r in sub.uses.readers.get(y, [])}
    return sorted(rs.values(), key=sub.position)


def _reader_count(readers: dict, y: int) -> int:
    """How many ops read ``y`` (an op reading it in two slots counts once)."""
    return len({id(r) for r in readers.get(y, [])})


def _replace_input(sub: Subgraph, y: int, x: int) -> None:
    for r in _reading(sub, y):
        sub.rewire(r, inputs=[x if i == y else i for i in r.inputs])


def _cancel_pairs(sub: Subgraph) -> bool:
    """TRANSPOSE(q)(TRANSPOSE(p)(x)) with q undoing p: readers of the second read x."""
    producers, readers = sub.uses.producer, sub.uses.readers
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
        _replace_input(sub, y, x)
        sub.remove_op(op)
        if not readers.get(first.outputs[0]) and first.outputs[0] not in sub.outputs:
            sub.remove_op(first)
        return True
    return False


def _data_inputs(op: Op) -> list[int] | None:
    b = BUILTINS.get(op.code)
    return op.inputs[:b.arity] if b is not None and b.layout_agnostic else None


def _relaid_constant(sub: Subgraph, idx: int, perm: list[int], full_rank: bool = False) -> int | None:
    """A constant operand in the layout before ``perm`` (rank-padded with leading 1s, as
    broadcasting reads it); None when it cannot broadcast against a rank-``len(perm)`` value
    (``full_rank``, a concatenation's operand: when it is not of that rank)."""
    data = sub.tensors[idx].data
    if data.ndim > len(perm) or (full_rank and data.ndim != len(perm)):
        return None
    padded = data.reshape((1,) * (len(perm) - data.ndim) + data.shape)
    moved = np.ascontiguousarray(padded.transpose(np.argsort(perm)))
    t = sub.tensors[idx]
    return sub.add(Tensor(t.name + "/relaid", t.dtype, list(moved.shape), moved, quant=t.quant))


def _sink(sub: Subgraph) -> bool:
    """op(TRANSPOSE(p)(x), ...) -> TRANSPOSE(q)(op'(x, ...)) for an op the transposes move
    through (``_movable``): an elementwise op whose other operands are scalars, constants
    (re-laid out once) or transposed by the same p; a reduction over constant axes; a
    concatenation. Each of those transposes must have no other reader. op' is op with its axes
    remapped through p, q is what is left of p on its output (none when that is the identity)."""
    producers, readers = sub.uses.producer, sub.uses.readers
    for op in sub.ops:
        data_inputs = _movable(sub, op)
        if data_inputs is None:
            continue
        perm, moved, consts = None, {}, []
        for i in data_inputs:
            t = sub.tensors[i]
            if t.data is not None:
                consts.append(i)
                continue
            prod = producers.get(i)
            p = _perm(sub, prod) if prod is not None else None
            if p is None or (perm is not None and p != perm) or _reader_count(readers, i) != 1 or i in sub.outputs:
                perm = None
                break
            perm = p
            moved[i] = prod
        if perm is None:
            continue
        relaid = {}
        concat = op.code == "CONCATENATION"
        for c in consts:
            if not concat and sub.tensors[c].data.size == 1 and sub.tensors[c].data.ndim <= len(perm):
                continue  # a scalar broadcasts the same in any layout
            r = _relaid_constant(sub, c, perm, full_rank=concat)
            if r is None:
                break
            relaid[c] = r
        else:
            _rewrite_sunk(sub, op, perm, moved, relaid)
            return True
    return False


# reductions over constant axes (``builtins.REDUCTIONS``) and concatenation run on the
# untransposed value with their axes remapped through the perm (``_remap``)


def _movable(sub: Subgraph, op: Op) -> list[int] | None:
    """The data operands a transpose may move through ``op`` from; None: not movable."""
    data = _data_inputs(op)
    if data is not None:
        return data
    if op.code in REDUCTIONS and len(op.outputs) == 1 and sub.tensors[op.inputs[1]].data is not None:
        return op.inputs[:1]
    if (op.code == "CONCATENATION" and len(op.outputs) == 1 and op.options is not None
            and not op.options[1].get("fused_activation_function")):
        return list(op.inputs)
    return None


def _remap(sub: Subgraph, op: Op, perm: list[int]) -> tuple[list[int], tuple | None, list[int]]:
    """``op`` run on the value before TRANSPOSE(perm): its inputs with the axes operand
    (reductions) remapped, its options (concatenation's axis), and the perm q its output then
    needs (y = TRANSPOSE(q)(op'(x)))."""
    r = len(perm)
    if op.code in REDUCTIONS:
        axes = sorted({int(a) % r for a in np.asarray(sub.tensors[op.inputs[1]].data).reshape(-1)})
        new_axes = sorted(perm[a] for a in axes)
        name = sub.tensors[op.inputs[1]].name + "/relaid"
        axes_t = sub.add(Tensor(name, TensorType.INT32, [len(new_axes)], np.asarray(new_axes, np.int32)))
        if op.options[1].get("keep_dims"):
            return [op.inputs[0], axes_t], op.options, perm
        kept_new = [j for j in range(r) if j not in new_axes]  # x's dims left, in x's order
        kept_old = [perm[i] for i in range(r) if i not in axes]  # the same dims, in y's order
        return [op.inputs[0], axes_t], op.options, [kept_new.index(d) for d in kept_old]
    axis = int(op.options[1]["axis"]) % r
    return list(op.inputs), (op.options[0], {**op.options[1], "axis": perm[axis]}), perm


def _rewrite_sunk(sub: Subgraph, op: Op, perm: list[int], moved: dict, relaid: dict) -> None:
    out = op.outputs[0]
    t_out = sub.tensors[out]
    inputs, options, out_perm = list(op.inputs), op.options, perm
    if _data_inputs(op) is None:
        inputs, options, out_perm = _remap(sub, op, perm)
    inputs = [moved[i].inputs[0] if i in moved else relaid.get(i, i) for i in inputs]
    for prod in moved.values():
        sub.remove_op(prod)
    op.options = options
    if out_perm == list(range(len(out_perm))):
        sub.rewire(op, inputs, [out])
        return
    inv = list(np.argsort(out_perm))
    mid = sub.add(Tensor(t_out.name + "/moved", t_out.dtype,
                         None if t_out.shape is None else [t_out.shape[i] for i in inv], quant=t_out.quant))
    sub.rewire(op, inputs, [mid])
    perm_tensor = sub.add(Tensor(t_out.name + "/perm", TensorType.INT32, [len(out_perm)],
                                 np.asarray(out_perm, np.int32)))
    sub.insert_op(sub.position(op) + 1, Op("TRANSPOSE", [mid, perm_tensor], [out]))


def _split_fan_out(sub: Subgraph) -> bool:
    """A TRANSPOSE read by several ops it can move through becomes one TRANSPOSE per reader, so
    each can sink on its own (SiLU's x * sigmoid(x) reads x twice; a squeeze-excite block's
    MEAN and MUL read the same feature map)."""
    for op in sub.ops:
        if _perm(sub, op) is None:
            continue
        y = op.outputs[0]
        rs = _reading(sub, y)  # each reader once (x * x reads y twice: one reader)
        if len(rs) < 2 or y in sub.outputs or any(_movable(sub, r) is None for r in rs):
            continue
        for r in rs[1:]:
            t = sub.tensors[y]
            dup = sub.add(Tensor(t.name + "/dup", t.dtype, t.shape, quant=t.quant))
            sub.insert_op(sub.position(op) + 1, Op("TRANSPOSE", list(op.inputs), [dup]))
            sub.rewire(r, inputs=[dup if i == y else i for i in r.inputs])
        return True
    return False


def _merge_duplicates(sub: Subgraph) -> None:
    """Transposes of the same tensor by the same perm left over from ``_split_fan_out``: one."""
    seen: dict = {}
    for op in list(sub.ops):
        p = _perm(sub, op)
        if p is None or op.outputs[0] in sub.outputs:
            continue
        key = (op.inputs[0], tuple(p))
        if key in seen:
            _replace_input(sub, op.outputs[0], seen[key])
            sub.remove_op(op)
        else:
            seen[key] = op.outputs[0]


def _only_unit_dims_move(shape: list[int] | None, perm: list[int]) -> bool:
    """Whether TRANSPOSE(perm) of a value of ``shape`` keeps its elements in order: the dims that
    are not statically 1 (-1 counts as not) keep their relative order, so it only reshapes."""
    if shape is None or len(shape) != len(perm):
        return False
    moved = [p for p in perm if shape[p] != 1]
    return moved == sorted(moved)


def _reshape_reads_source(sub: Subgraph) -> bool:
    """RESHAPE(TRANSPOSE(p)(x)) where the transpose only moves dims of size 1: the RESHAPE reads
    x (the same elements in the same order; a global pool's [N, 1, 1, C] before a flatten)."""
    producers = sub.uses.producer
    for op in sub.ops:
        if op.code != "RESHAPE":
            continue
        prod = producers.get(op.inputs[0])
        p = _perm(sub, prod) if prod is not None else None
        if p is None or not _only_unit_dims_move(sub.tensors[prod.inputs[0]].shape, p):
            continue
        y = prod.outputs[0]
        sub.rewire(op, inputs=[prod.inputs[0]] + op.inputs[1:])
        if not sub.uses.readers.get(y) and y not in sub.outputs:
            sub.remove_op(prod)
        return True
    return False


def nhwc_edges(sub: Subgraph) -> None:
    """Every 4-D input and output channels-last: the subgraph reads an NHWC input and moves it
    to NCHW with a TRANSPOSE (which the pass then cancels against the first NHWC op's), and
    each 4-D output is transposed to NHWC last. The I/O tensors keep their names."""
    to_nchw = np.array([0, 3, 1, 2], np.int32)
    to_nhwc = np.array([0, 2, 3, 1], np.int32)
    for k, idx in enumerate(sub.inputs):
        new, perm = _nhwc_twin(sub, idx, to_nchw)
        if new is not None:
            sub.insert_op(0, Op("TRANSPOSE", [new, perm], [idx]))
            sub.inputs[k] = new
    for k, idx in enumerate(sub.outputs):
        new, perm = _nhwc_twin(sub, idx, to_nhwc)
        if new is not None:
            sub.append_op(Op("TRANSPOSE", [idx, perm], [new]))
            sub.outputs[k] = new


def _nhwc_twin(sub: Subgraph, idx: int, perm: np.ndarray) -> tuple[int | None, int | None]:
    """For a 4-D I/O tensor: its NHWC twin, which takes its name (it becomes ``<name>/nchw``),
    and the constant ``perm`` the TRANSPOSE between them reads; (None, None) for another rank."""
    t = sub.tensors[idx]
    if t.rank != 4:
        return None, None
    new = sub.add(Tensor(t.name, t.dtype, [t.shape[i] for i in (0, 2, 3, 1)], quant=t.quant))
    t.name += "/nchw"
    return new, sub.add(Tensor(t.name + "/perm", TensorType.INT32, [4], perm))


def optimize_layout(sub: Subgraph, *, nhwc_io: bool = False) -> None:
    """``nhwc_io``: the main subgraph's 4-D inputs and outputs become channels-last first."""
    if nhwc_io:
        nhwc_edges(sub)
    work = 0
    for _ in range(10 * len(sub.ops) + 10):
        work += 3 * len(sub.ops)  # each step below visits every op
        if work > MAX_LAYOUT_WORK or not (_cancel_pairs(sub) or _sink(sub) or _split_fan_out(sub)
                                           or _reshape_reads_source(sub)):
            break
    _merge_duplicates(sub)
