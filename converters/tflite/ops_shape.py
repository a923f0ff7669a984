"""Shape and data-movement ONNX ops: Reshape, Flatten, Transpose, Concat, Slice,
Squeeze/Unsqueeze, Shape/Size, Expand, ConstantOfShape, Range, Split, Tile, Pad, CumSum, Trilu.

Shapes are computed at run time whenever a dim is dynamic (SHAPE, STRIDED_SLICE,
CONCATENATION of int32 pieces): a traced example size is never baked into a RESHAPE.
"""

from __future__ import annotations

import numpy as np

from ..errors import Unsupported
from .emit import Emitter, attrs
from .mappers import maps
from .model import NUMPY_OF, Tensor
from .model import TensorType as T

_I32 = np.iinfo(np.int32)


def _axis(a: int, rank: int) -> int:
    return a + rank if a < 0 else a


def axes_of(em: Emitter, node, input_index: int = 1, attr: str = "axes"):
    """Axes from the attribute (older opsets) or a constant input; None when absent;
    ``Unsupported`` when they are computed at run time."""
    a = attrs(node)
    if attr in a:
        return [int(v) for v in a[attr]]
    if len(node.input) > input_index and node.input[input_index]:
        v = em.const_value(node.input[input_index])
        if v is None:
            raise Unsupported(f"{node.op_type} with axes computed at run time")
        return [int(x) for x in np.asarray(v).reshape(-1)]
    return None


def shape_tensor(em: Emitter, x: int) -> int:
    """SHAPE(x) as int32."""
    rank = em.sub.tensors[x].rank
    return em.unary("SHAPE", x, T.INT32, [rank] if rank is not None else None, ("ShapeOptions", {"out_type": T.INT32}), "shape")


def dims_tensor(em: Emitter, x: int, shape: list[int], start: int, stop: int) -> int:
    """x's dims [start:stop] as a 1-D int32 tensor: a constant when they are static."""
    part = shape[start:stop]
    if all(d >= 0 for d in part):
        return em.const(np.asarray(part, np.int32))
    s = shape_tensor(em, x)
    return _slice1d(em, s, start, stop)


def _slice1d(em: Emitter, v: int, start: int, stop: int) -> int:
    out = em.tmp(T.INT32, [stop - start], "dims")
    em.op("STRIDED_SLICE", [v, em.const(np.array([start], np.int32)), em.const(np.array([stop], np.int32)),
                            em.const(np.array([1], np.int32))], [out], ("StridedSliceOptions", {}))
    return out


@maps("Reshape")
def reshape(em: Emitter, node) -> None:
    x = em.t(node.input[0])
    s = em.const_value(node.input[1])
    if s is None:
        em.op("RESHAPE", [x, _copy_zero_dims(em, node, x)], [em.out()])
        return
    s = np.asarray(s).reshape(-1).astype(np.int64)
    if attrs(node).get("allowzero", 0) or not (s == 0).any():
        em.op("RESHAPE", [x, em.const(s.astype(np.int32))], [em.out()])
        return
    # a 0 copies the input's dim: from its static shape, else from SHAPE at run time
    xs = em.shape(node.input[0])
    if xs is None or len(xs) <= int(np.nonzero(s == 0)[0].max()):
        raise Unsupported("Reshape copying a dim (a 0 in the shape) of a value of unknown or smaller rank")
    s = np.where((s == 0) & (np.asarray(xs + [0] * len(s))[: len(s)] >= 0), np.asarray(xs + [0] * len(s))[: len(s)], s)
    s = _one_inferred_dim(s, xs)
    if not (s == 0).any():
        em.op("RESHAPE", [x, em.const(s.astype(np.int32))], [em.out()])
        return
    shp = shape_tensor(em, x)
    pieces = [_slice1d(em, shp, i, i + 1) if v == 0 else em.const(np.array([v], np.int32)) for i, v in enumerate(s)]
    target = em.tmp(T.INT32, [len(s)], "shape")
    em.op("CONCATENATION", pieces, [target], ("ConcatenationOptions", {"axis": 0}))
    em.op("RESHAPE", [x, target], [em.out()])


def _one_inferred_dim(s: np.ndarray, xs: list[int]) -> np.ndarray:
    """A constant target whose 0s copy run-time dims, as a constant RESHAPE needs no SHAPE chain:
    when exactly one 0 is left, it copies the input's only run-time dim, and the other target
    dims (a -1 among them computed from the input's static dims) multiply to the product of the
    input's static dims, that 0 is written -1 (TFLite infers it: the same value, for every size).
    Else ``s`` unchanged. A constant RESHAPE is what XNNPACK delegates."""
    copies = [i for i, v in enumerate(s) if v == 0]
    if len(copies) != 1 or any(d < 0 for j, d in enumerate(xs) if j != copies[0]):
        return s
    static_in = int(np.prod([d for j, d in enumerate(xs) if j != copies[0]]))
    rest = [int(v) for i, v in enumerate(s) if i != copies[0]]
    if rest.count(-1) > 1 or static_in == 0:
        return s
    known = int(np.prod([v for v in rest if v != -1]))
    if -1 in rest:
        if known == 0 or static_in % known:
            return s
        rest[rest.index(-1)] = static_in // known
    elif known != static_in:
        return s
    return np.asarray(rest[:copies[0]] + [-1] + rest[copies[0]:], np.int64)


def _copy_zero_dims(em: Emitter, node, x: int) -> int:
    """A run-time shape with ONNX's "0 copies the input's dim" applied (allowzero=0)."""
    s = em.t(node.input[1])
    n, xs = em.shape(node.input[1]), em.shape(node.input[0])
    if attrs(node).get("allowzero", 0):
        return s
    if n is None or n[0] < 0 or xs is None:
        raise Unsupported("Reshape to a run-time shape of unknown length (a 0 in it would copy a dim)")
    n = n[0]
    dims = shape_tensor(em, x)
    if len(xs) > n:
        dims = _slice1d(em, dims, 0, n)
    elif len(xs) < n:
        filled = em.tmp(T.INT32, [n], "dims")
        em.op("CONCATENATION", [dims, em.const(np.ones(n - len(xs), np.int32))], [filled],
              ("ConcatenationOptions", {"axis": 0}))
        dims = filled
    zero = em.binary("EQUAL", s, em.const(np.array(0, np.int32)), dtype=T.BOOL)
    out = em.tmp(T.INT32, [n], "shape")
    em.op("SELECT_V2", [zero, dims, s], [out])
    return out


@maps("Flatten")
def flatten(em: Emitter, node) -> None:
    x = em.t(node.input[0])
    shape = em.shape(node.input[0])
    if shape is None:
        raise Unsupported("Flatten of a value of unknown rank")
    axis = _axis(int(attrs(node).get("axis", 1)), len(shape))
    head, tail = shape[:axis], shape[axis:]
    hp, tp = _static_prod(head), _static_prod(tail)
    if hp is not None and tp is not None:
        s = em.const(np.array([hp, tp], np.int32))
    elif hp:  # a -1 is inferable only next to a non-zero product
        s = em.const(np.array([hp, -1], np.int32))
    elif tp:
        s = em.const(np.array([-1, tp], np.int32))
    else:  # both products at run time (either may be 0)
        s = em.tmp(T.INT32, [2], "shape")
        em.op("CONCATENATION", [_prod_of_dims(em, x, shape, 0, axis), _prod_of_dims(em, x, shape, axis, len(shape))],
              [s], ("ConcatenationOptions", {"axis": 0}))
    em.op("RESHAPE", [x, s], [em.out()])


def _static_prod(dims: list[int]) -> int | None:
    return int(np.prod(dims)) if all(d >= 0 for d in dims) else None


def _prod_of_dims(em: Emitter, x: int, shape: list[int], start: int, stop: int) -> int:
    """The product of x's dims [start:stop] as a 1-element int32 tensor (1 for none)."""
    if start == stop:
        return em.const(np.array([1], np.int32))
    prod = em.tmp(T.INT32, [1], "prod")
    em.op("REDUCE_PROD", [dims_tensor(em, x, shape, start, stop), em.const(np.array([0], np.int32))], [prod],
          ("ReducerOptions", {"keep_dims": True}))
    return prod


@maps("Transpose")
def transpose(em: Emitter, node) -> None:
    rank = em.rank(node.input[0])
    perm = attrs(node).get("perm", list(range(rank))[::-1])
    em.op("TRANSPOSE", [em.t(node.input[0]), em.const(np.asarray(perm, np.int32))], [em.out()])


@maps("Concat")
def concat(em: Emitter, node) -> None:
    rank = em.rank(node.output[0])
    ins = [em.t(i) for i in node.input if i]
    em.op("CONCATENATION", ins, [em.out()],
          ("ConcatenationOptions", {"axis": _axis(int(attrs(node)["axis"]), rank)}))


def _full(em: Emitter, node, rank: int, axes: list[int], name: str, default: int) -> tuple[int, int]:
    """(1-D int32 tensor over all ``rank`` axes, mask of axes not sliced) for Slice's starts/ends/steps."""
    mask = sum(1 << a for a in range(rank) if a not in axes)
    v = em.const_value(name) if name else None
    if not name or v is not None:
        vals = [default] * rank
        if name:
            for a, s in zip(axes, np.asarray(v).reshape(-1)):
                vals[a] = int(np.clip(int(s), _I32.min, _I32.max))
        return em.const(np.asarray(vals, np.int32)), mask
    src = _clamped_bounds(em, name)
    pieces = []
    for a in range(rank):
        if a in axes:
            j = axes.index(a)
            pieces.append(_slice1d(em, src, j, j + 1))
        else:
            pieces.append(em.const(np.array([default], np.int32)))
    out = em.tmp(T.INT32, [rank], "slice")
    em.op("CONCATENATION", pieces, [out], ("ConcatenationOptions", {"axis": 0}))
    return out, mask


def _clamped_bounds(em: Emitter, name: str) -> int:
    """Run-time Slice bounds as int32. A graph input's int64 values are clamped to int32's range
    in int64 first (the CAST at the input edge keeps the low 32 bits: an end of INT64_MAX, the
    usual "to the end", would read as -1 and drop the last element, measured)."""
    raw = next((i for i in em.sub.inputs if em.sub.tensors[i].name == name), None)
    if raw is None or em.dtype_of(raw) != T.INT64:
        return em.t(name)
    low = em.binary("MAXIMUM", raw, _int64_const(em, _I32.min))
    high = em.binary("MINIMUM", low, _int64_const(em, _I32.max))
    return em.cast(high, T.INT32)


def _int64_const(em: Emitter, v: int) -> int:
    """An int64 scalar (``Emitter.const`` stores int64 as int32, the compute type)."""
    return em.sub.add(Tensor(em.fresh_name("bound"), T.INT64, [], np.array(v, np.int64)))


@maps("Slice")
def slice_(em: Emitter, node) -> None:
    if "starts" in attrs(node):
        raise Unsupported("Slice-1 (starts/ends as attributes, opset < 10)")
    rank = em.rank(node.input[0])
    ins = list(node.input) + [""] * (5 - len(node.input))
    if ins[3] and em.const_value(ins[3]) is None:
        _slice_run_time_axes(em, node, ins, rank)
        return
    axes = axes_of(em, node, 3)
    axes = list(range(len(np.asarray(em.const_value(ins[1])).reshape(-1)))) if axes is None and \
        em.const_value(ins[1]) is not None else axes
    if axes is None:
        rank_s = em.shape(ins[1])
        if rank_s is None or rank_s[0] < 0:
            raise Unsupported("Slice whose number of axes is known only at run time")
        axes = list(range(rank_s[0]))
    axes = [_axis(a, rank) for a in axes]
    steps = em.const_value(ins[4]) if ins[4] else np.ones(len(axes), np.int64)
    if steps is None:
        raise Unsupported("Slice with steps computed at run time")
    steps = [int(v) for v in np.asarray(steps).reshape(-1)]
    empty = _empty_axes(em.const_value(ins[2]), axes, steps)
    if empty:  # sliced as a whole here, then emptied by a GATHER of no indices
        ins[1:3] = _drop_axes(em, ins[1], axes, empty), _drop_axes(em, ins[2], axes, empty)
        steps = [st for a, st in zip(axes, steps) if a not in empty]
        axes = [a for a in axes if a not in empty]
    begin, mask = _full(em, node, rank, axes, ins[1], 0)
    end, _ = _full(em, node, rank, axes, ins[2], 0)
    vals = [1] * rank
    for a, st in zip(axes, steps):
        vals[a] = st
    y = em.out() if not empty else em.tmp(em.dtype_of(em.t(node.input[0])), None, "sliced")
    em.op("STRIDED_SLICE", [em.t(node.input[0]), begin, end, em.const(np.asarray(vals, np.int32))], [y],
          ("StridedSliceOptions", {"begin_mask": mask, "end_mask": mask}))
    for k, a in enumerate(empty):
        z = em.out() if k == len(empty) - 1 else em.tmp(em.dtype_of(y), None, "emptied")
        em.op("GATHER", [y, em.const(np.zeros(0, np.int32))], [z], ("GatherOptions", {"axis": a}))
        y = z


def _slice_run_time_axes(em: Emitter, node, ins: list[str], rank: int) -> None:
    """Slice over axes computed at run time (their count static): starts, ends and steps are
    spread over every axis at run time (EQUAL of the axes against 0..rank-1, SELECT_V2, SUM);
    an axis not listed is taken whole (0, its dim, 1)."""
    n = em.shape(ins[3])
    if n is None or len(n) != 1 or n[0] < 0:
        raise Unsupported("Slice with axes computed at run time whose count is unknown")
    k = n[0]
    x = em.t(node.input[0])
    axes = em.binary("FLOOR_MOD", em.cast(em.t(ins[3]), T.INT32), em.const(np.array(rank, np.int32)))
    hit = em.binary("EQUAL", _column(em, axes, k), em.const(np.arange(rank, dtype=np.int32).reshape(1, rank)),
                    dtype=T.BOOL)
    listed = em.tmp(T.BOOL, [rank], "listed")
    em.op("REDUCE_ANY", [hit, em.const(np.array([0], np.int32))], [listed], ("ReducerOptions", {"keep_dims": False}))

    def spread(values: int, default: int) -> int:
        picked = em.tmp(T.INT32, [k, rank], "picked")
        em.op("SELECT_V2", [hit, _column(em, values, k), em.const(np.array(0, np.int32))], [picked])
        total = em.tmp(T.INT32, [rank], "total")
        em.op("SUM", [picked, em.const(np.array([0], np.int32))], [total], ("ReducerOptions", {"keep_dims": False}))
        out = em.tmp(T.INT32, [rank], "bounds")
        em.op("SELECT_V2", [listed, total, default], [out])
        return out

    ones = em.const(np.ones(rank, np.int32))
    steps = _bound_vector(em, ins[4]) if ins[4] else em.const(np.ones(k, np.int32))
    begin = spread(_bound_vector(em, ins[1]), em.const(np.zeros(rank, np.int32)))
    end = spread(_bound_vector(em, ins[2]), shape_tensor(em, x))
    em.op("STRIDED_SLICE", [x, begin, end, spread(steps, ones)], [em.out()], ("StridedSliceOptions", {}))


def _column(em: Emitter, v: int, k: int) -> int:
    col = em.tmp(em.dtype_of(v), [k, 1], "column")
    em.op("RESHAPE", [v, em.const(np.array([k, 1], np.int32))], [col])
    return col


def _bound_vector(em: Emitter, name: str) -> int:
    """Slice starts/ends/steps as int32, clamped to int32's range."""
    v = em.const_value(name)
    if v is not None:
        return em.const(np.clip(np.asarray(v, np.int64).reshape(-1), _I32.min, _I32.max).astype(np.int32))
    return _clamped_bounds(em, name)


def _empty_axes(ends, axes: list[int], steps: list[int]) -> list[int]:
    """Axes a constant end of 0 with a positive step makes empty. XNNPACK's STRIDED_SLICE reads
    such an end as "to the end of the dim" (checked with ai-edge-litert 2.3.0: x[:, 0:0] came
    back whole), so these are not left to STRIDED_SLICE."""
    if ends is None:
        return []
    return [a for a, e, st in zip(axes, np.asarray(ends).reshape(-1), steps) if int(e) == 0 and st > 0]


def _drop_axes(em: Emitter, name: str, axes: list[int], drop: list[int]) -> str:
    """A constant starts/ends input without the entries of ``drop`` (a new constant's name)."""
    v = np.asarray(em.const_value(name)).reshape(-1) if name else None
    if v is None:
        raise Unsupported("Slice mixing run-time starts with an empty axis")
    kept = np.asarray([x for a, x in zip(axes, v) if a not in drop], v.dtype)
    new = em.fresh_name(name)
    em.consts[new] = kept
    return new


@maps("Squeeze")
def squeeze(em: Emitter, node) -> None:
    shape = em.shape(node.input[0])
    axes = axes_of(em, node, 1)
    if axes is None:
        if shape is None or any(d < 0 for d in shape):
            raise Unsupported("Squeeze without axes of a value with dynamic dims")
        axes = [i for i, d in enumerate(shape) if d == 1]
    rank = em.rank(node.input[0])
    em.op("SQUEEZE", [em.t(node.input[0])], [em.out()],
          ("SqueezeOptions", {"squeeze_dims": sorted(_axis(a, rank) for a in axes)}))


@maps("Unsqueeze")
def unsqueeze(em: Emitter, node) -> None:
    if "axes" not in attrs(node) and len(node.input) > 1 and em.const_value(node.input[1]) is None:
        _unsqueeze_run_time(em, node)
        return
    out_rank = em.rank(node.output[0])
    axes = sorted(_axis(a, out_rank) for a in axes_of(em, node, 1))
    x = em.t(node.input[0])
    for k, a in enumerate(axes):
        last = k == len(axes) - 1
        y = em.out() if last else em.tmp(em.dtype_of(x), None, "unsqueeze")
        em.op("EXPAND_DIMS", [x, em.const(np.array(a, np.int32))], [y])
        x = y


def _unsqueeze_run_time(em: Emitter, node) -> None:
    """Axes computed at run time (their count static): a RESHAPE to the target shape built at
    run time: 1 at each listed position, else the input's dims in order (the position among
    them is the exclusive CUMSUM of "not listed")."""
    n = em.shape(node.input[1])
    if n is None or len(n) != 1 or n[0] < 0:
        raise Unsupported("Unsqueeze with axes computed at run time whose count is unknown")
    rank_in = em.rank(node.input[0])
    out_rank = rank_in + n[0]
    x = em.t(node.input[0])
    axes = em.binary("FLOOR_MOD", em.cast(em.t(node.input[1]), T.INT32), em.const(np.array(out_rank, np.int32)))
    row = em.tmp(T.INT32, [1, n[0]], "axes")
    em.op("RESHAPE", [axes, em.const(np.array([1, n[0]], np.int32))], [row])
    hit = em.binary("EQUAL", em.const(np.arange(out_rank, dtype=np.int32).reshape(out_rank, 1)), row, dtype=T.BOOL)
    new = em.tmp(T.BOOL, [out_rank], "is_new")
    em.op("REDUCE_ANY", [hit, em.const(np.array([1], np.int32))], [new], ("ReducerOptions", {"keep_dims": False}))
    if rank_in == 0:
        em.op("RESHAPE", [x, em.const(np.ones(out_rank, np.int32))], [em.out()])
        return
    kept = em.tmp(T.INT32, [out_rank], "kept")
    em.op("CAST", [em.unary("LOGICAL_NOT", new)], [kept], ("CastOptions", {"in_data_type": T.BOOL,
                                                                            "out_data_type": T.INT32}))
    pos = em.tmp(T.INT32, [out_rank], "pos")
    em.op("CUMSUM", [kept, em.const(np.array(0, np.int32))], [pos], ("CumsumOptions", {"exclusive": True,
                                                                                        "reverse": False}))
    pos = em.binary("MINIMUM", pos, em.const(np.array(rank_in - 1, np.int32)))
    dims = em.tmp(T.INT32, [out_rank], "dims")
    em.op("GATHER", [shape_tensor(em, x), pos], [dims], ("GatherOptions", {"axis": 0}))
    target = em.tmp(T.INT32, [out_rank], "shape")
    em.op("SELECT_V2", [new, em.const(np.array(1, np.int32)), dims], [target])
    em.op("RESHAPE", [x, target], [em.out()])


@maps("Shape")
def shape(em: Emitter, node) -> None:
    a = attrs(node)
    rank = em.rank(node.input[0])
    start, end = _axis(int(a.get("start", 0)), rank), a.get("end")
    end = rank if end is None else min(_axis(int(end), rank), rank)
    s = shape_tensor(em, em.t(node.input[0]))
    if (start, end) == (0, rank):
        em.bind(node.output[0], s)
        return
    em.op("STRIDED_SLICE", [s, em.const(np.array([start], np.int32)), em.const(np.array([end], np.int32)),
                            em.const(np.array([1], np.int32))], [em.out()], ("StridedSliceOptions", {}))


@maps("Size")
def size(em: Emitter, node) -> None:
    s = shape_tensor(em, em.t(node.input[0]))
    em.op("REDUCE_PROD", [s, em.const(np.array([0], np.int32))], [em.out()], ("ReducerOptions", {"keep_dims": False}))


@maps("Expand")
def expand(em: Emitter, node) -> None:
    x = em.t(node.input[0])
    target = em.const_value(node.input[1])
    xs = em.shape(node.input[0])
    if target is not None and xs is not None and all(d >= 0 for d in xs):
        t = np.asarray(target).reshape(-1)
        n = max(len(t), len(xs))
        a, b = [1] * (n - len(xs)) + list(xs), [1] * (n - len(t)) + [int(v) for v in t]
        s = em.const(np.asarray([y if x_ == 1 else x_ for x_, y in zip(a, b)], np.int32))
    else:
        s = em.tmp(T.INT32, None, "bshape")
        em.op("BROADCAST_ARGS", [shape_tensor(em, x), em.t(node.input[1])], [s])
    em.op("BROADCAST_TO", [x, s], [em.out()])


@maps("ConstantOfShape")
def constant_of_shape(em: Emitter, node) -> None:
    from onnx import numpy_helper

    v = attrs(node).get("value")
    value = numpy_helper.to_array(v).reshape(()) if v is not None else np.float32(0)
    from .emit import to_compute_array

    em.op("FILL", [em.t(node.input[0]), em.const(to_compute_array(value, "ConstantOfShape's value"))], [em.out()])


@maps("Range")
def range_(em: Emitter, node) -> None:
    em.op("RANGE", [em.t(i) for i in node.input], [em.out()])


@maps("Split")
def split(em: Emitter, node) -> None:
    """SPLIT_V with the sizes (constant, or a run-time int32 tensor); without sizes, ONNX's
    ceil(n / k) parts with a smaller last one (SPLIT where they are even, or where n is known
    only at run time: LiteRT then refuses an uneven n at invoke)."""
    if em.dtype_of(em.t(node.input[0])) == T.BOOL:
        raise Unsupported("Split of booleans: LiteRT's SPLIT and SPLIT_V have no bool kernel")
    rank = em.rank(node.input[0])
    axis = _axis(int(attrs(node).get("axis", 0)), rank)
    outs = [em.out(i) for i in range(len(node.output))]
    if len(node.input) > 1 and node.input[1]:
        sizes = em.const_value(node.input[1])
        s = em.const(np.asarray(sizes, np.int32).reshape(-1)) if sizes is not None else \
            em.cast(em.t(node.input[1]), T.INT32)
    else:
        n, k = em.shape(node.input[0])[axis], len(outs)
        if n < 0 or n % k == 0:
            em.op("SPLIT", [em.const(np.array(axis, np.int32)), em.t(node.input[0])], outs,
                  ("SplitOptions", {"num_splits": k}))
            return
        part = -(-n // k)
        s = em.const(np.asarray([part] * (k - 1) + [n - part * (k - 1)], np.int32))
    em.op("SPLIT_V", [em.t(node.input[0]), s, em.const(np.array(axis, np.int32))], outs,
          ("SplitVOptions", {"num_splits": len(outs)}))


@maps("Tile")
def tile(em: Emitter, node) -> None:
    em.op("TILE", [em.t(node.input[0]), em.t(node.input[1])], [em.out()])


@maps("Pad")
def pad(em: Emitter, node) -> None:
    """Constant (PAD/PADV2), reflect (MIRROR_PAD), edge and wrap (a GATHER of source indices per
    padded axis, static dims); ``axes`` spreads the pads over the listed axes; negative pads crop
    afterwards (STRIDED_SLICE, counted from the end, so any size)."""
    a = attrs(node)
    mode = a.get("mode", b"constant")
    mode = mode.decode() if isinstance(mode, bytes) else mode
    rank = em.rank(node.input[0])
    pads = em.const_value(node.input[1])
    if pads is None:
        _pad_run_time(em, node, mode, rank)
        return
    pads = _pads_by_axis(em, node, np.asarray(pads).reshape(-1).astype(np.int64), rank)
    grow, crop = np.maximum(pads, 0).astype(np.int32), np.maximum(-pads, 0).astype(np.int32)
    x = em.t(node.input[0])
    y = em.out() if not crop.any() else em.tmp(em.dtype_of(x), None, "padded")
    if not grow.any():
        y = x
    elif mode == "constant":
        p = em.const(np.ascontiguousarray(grow))
        if len(node.input) > 2 and node.input[2]:
            em.op("PADV2", [x, p, em.t(node.input[2])], [y])
        else:
            em.op("PAD", [x, p], [y])
    elif mode == "reflect":
        em.op("MIRROR_PAD", [x, em.const(np.ascontiguousarray(grow))], [y], ("MirrorPadOptions", {"mode": 0}))
    elif mode in ("edge", "wrap"):
        y = _pad_by_gather(em, node, x, grow, mode, y)
    else:
        raise Unsupported(f"Pad mode {mode!r}")
    if crop.any():
        _crop(em, y, crop, rank)
    elif y == x:
        em.bind(node.output[0], x)


def _pad_run_time(em: Emitter, node, mode: str, rank: int) -> None:
    """Constant or reflect Pad by pads computed at run time (all axes): [begins, ends] as the
    [rank, 2] int32 table PAD/PADV2/MIRROR_PAD read. A negative pad, which would crop, makes
    LiteRT fail at invoke."""
    if len(node.input) > 3 and node.input[3]:
        raise Unsupported("Pad with pads computed at run time over given axes")
    if mode not in ("constant", "reflect"):
        raise Unsupported(f"Pad mode {mode!r} with pads computed at run time")
    pairs = em.tmp(T.INT32, [2, rank], "pads")
    em.op("RESHAPE", [em.cast(em.t(node.input[1]), T.INT32), em.const(np.array([2, rank], np.int32))], [pairs])
    table = em.tmp(T.INT32, [rank, 2], "pads")
    em.op("TRANSPOSE", [pairs, em.const(np.array([1, 0], np.int32))], [table])
    x = em.t(node.input[0])
    if mode == "reflect":
        em.op("MIRROR_PAD", [x, table], [em.out()], ("MirrorPadOptions", {"mode": 0}))
    elif len(node.input) > 2 and node.input[2]:
        em.op("PADV2", [x, table, em.t(node.input[2])], [em.out()])
    else:
        em.op("PAD", [x, table], [em.out()])


def _pads_by_axis(em: Emitter, node, flat: np.ndarray, rank: int) -> np.ndarray:
    """ONNX pads (begins, then ends, over ``axes`` or every axis) as [rank, 2]."""
    axes = list(range(rank))
    if len(node.input) > 3 and node.input[3]:
        v = em.const_value(node.input[3])
        if v is None:
            raise Unsupported("Pad with axes computed at run time")
        axes = [_axis(int(i), rank) for i in np.asarray(v).reshape(-1)]
    if flat.size != 2 * len(axes):
        raise Unsupported("Pad whose pads do not hold a begin and an end per axis")
    out = np.zeros((rank, 2), np.int64)
    for k, ax in enumerate(axes):
        out[ax] = [flat[k], flat[len(axes) + k]]
    return out


def _pad_by_gather(em: Emitter, node, x: int, grow: np.ndarray, mode: str, out: int) -> int:
    """edge: a source index clamped to [0, n); wrap: taken modulo n; one GATHER per padded axis."""
    shape = em.shape(node.input[0])
    padded = [ax for ax in range(len(shape)) if grow[ax].any()]
    if any(shape[ax] <= 0 for ax in padded):
        raise Unsupported(f"Pad mode {mode!r} along a dim known only at run time, or empty")
    for k, ax in enumerate(padded):
        n = shape[ax]
        src = np.arange(-int(grow[ax, 0]), n + int(grow[ax, 1]))
        src = np.clip(src, 0, n - 1) if mode == "edge" else np.mod(src, n)
        y = out if k == len(padded) - 1 else em.tmp(em.dtype_of(x), None, "padded")
        em.op("GATHER", [x, em.const(src.astype(np.int32))], [y], ("GatherOptions", {"axis": ax}))
        x = y
    return x


def _crop(em: Emitter, y: int, crop: np.ndarray, rank: int) -> None:
    end_mask = sum(1 << ax for ax in range(rank) if not crop[ax, 1])
    em.op("STRIDED_SLICE", [y, em.const(crop[:, 0].astype(np.int32)), em.const((-crop[:, 1]).astype(np.int32)),
                            em.const(np.ones(rank, np.int32))], [em.out()],
          ("StridedSliceOptions", {"begin_mask": 0, "end_mask": end_mask}))


@maps("CumSum")
def cumsum(em: Emitter, node) -> None:
    a = attrs(node)
    em.op("CUMSUM", [em.t(node.input[0]), em.t(node.input[1])], [em.out()],
          ("CumsumOptions", {"exclusive": bool(a.get("exclusive", 0)), "reverse": bool(a.get("reverse", 0))}))


@maps("Trilu")
def trilu(em: Emitter, node) -> None:
    """x where ``col - row >= k`` (upper) or ``<= k`` (lower), else 0; the mask is built at run time."""
    x = em.t(node.input[0])
    shape = em.shape(node.input[0])
    k = em.t(node.input[1]) if len(node.input) > 1 and node.input[1] else em.const(np.array(0, np.int32))
    rank = len(shape)
    dims = dims_tensor(em, x, shape, rank - 2, rank)
    zero, one = em.const(np.array(0, np.int32)), em.const(np.array(1, np.int32))

    def arange(i):
        n = em.tmp(T.INT32, [], "n")
        em.op("GATHER", [dims, em.const(np.array(i, np.int32))], [n], ("GatherOptions", {"axis": 0}))
        r = em.tmp(T.INT32, [-1], "range")
        em.op("RANGE", [zero, n, one], [r])
        return r

    r = arange(0)
    rows = em.tmp(T.INT32, [-1, 1], "rows")
    em.op("EXPAND_DIMS", [r, em.const(np.array(1, np.int32))], [rows])
    cols = arange(1)
    diff = em.binary("SUB", cols, rows, options=("SubOptions", {"fused_activation_function": 0}))
    k_ = em.cast(k, T.INT32)
    mask = em.binary("GREATER_EQUAL" if attrs(node).get("upper", 1) else "LESS_EQUAL", diff, k_, dtype=T.BOOL)
    zeros = em.const(np.zeros((), NUMPY_OF[em.dtype_of(x)]))
    em.op("SELECT_V2", [mask, x, zeros], [em.out()])
