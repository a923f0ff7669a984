"""Shape ONNX ops: Reshape, Flatten, Transpose, Squeeze/Unsqueeze, Shape/Size; and the shape
helpers the other mappers share (``shape_tensor``, ``dims_tensor``, ``axes_of``, ``_slice1d``, ``_axis``).

Shapes are computed at run time whenever a dim is dynamic (SHAPE, STRIDED_SLICE,
CONCATENATION of int32 pieces): a traced example size is never baked into a RESHAPE.
"""

from __future__ import annotations

import numpy as np

from ...errors import Unsupported
from ..core.emit import Emitter, attrs
from ..core.mappers import maps
from ..core.model import TensorType as T


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
        out = em.shape(node.output[0])
        fed = any(i.name == node.input[1] for i in em.graph.input)  # a shape the user feeds: as fed
        if out and not fed and all(d != 0 for d in out) and sum(d < 0 for d in out) <= 1:
            # the shape is computed at run time but inference knows every dim but one: a constant
            # RESHAPE (-1 there), the same values, with no SHAPE chain for XNNPACK to stop at
            em.op("RESHAPE", [x, em.const(np.array(out, np.int32))], [em.out()])
            return
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


@maps("Squeeze")
def squeeze(em: Emitter, node) -> None:
    shape = em.shape(node.input[0])
    axes = axes_of(em, node, 1)
    if axes is None:
        if shape is None or any(d < 0 for d in shape):
            raise Unsupported("Squeeze without axes of a value with dynamic dims")
        axes = [i for i, d in enumerate(shape) if d == 1]
    rank = em.rank(node.input[0])
    if _as_reshape(em, node):
        return
    em.op("SQUEEZE", [em.t(node.input[0])], [em.out()],
          ("SqueezeOptions", {"squeeze_dims": sorted(_axis(a, rank) for a in axes)}))


def _as_reshape(em: Emitter, node) -> bool:
    """Squeeze/Unsqueeze as a RESHAPE to a constant shape (-1 for its one run-time dim), where
    the output has at most one: the same values, and XNNPACK takes RESHAPE, not SQUEEZE or
    EXPAND_DIMS."""
    out = em.shape(node.output[0])
    if out is None or sum(d < 0 for d in out) > 1 or em.dtype_of(em.t(node.input[0])) != T.FLOAT32:
        return False  # (XNNPACK computes float32 only: other types keep their own operators)
    em.op("RESHAPE", [em.t(node.input[0]), em.const(np.array(out, np.int32))], [em.out()])
    return True


@maps("Unsqueeze")
def unsqueeze(em: Emitter, node) -> None:
    if "axes" not in attrs(node) and len(node.input) > 1 and em.const_value(node.input[1]) is None:
        _unsqueeze_run_time(em, node)
        return
    out_rank = em.rank(node.output[0])
    axes = sorted(_axis(a, out_rank) for a in axes_of(em, node, 1))
    if _as_reshape(em, node):
        return
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
    from_inputs = _from_graph_inputs(em, node.input[0], start, end)
    if from_inputs is not None:
        em.bind(node.output[0], from_inputs)
        return
    s = shape_tensor(em, em.t(node.input[0]))
    if (start, end) == (0, rank):
        em.bind(node.output[0], s)
        return
    em.op("STRIDED_SLICE", [s, em.const(np.array([start], np.int32)), em.const(np.array([end], np.int32)),
                            em.const(np.array([1], np.int32))], [em.out()], ("StridedSliceOptions", {}))


def _from_graph_inputs(em: Emitter, name: str, start: int, end: int) -> int | None:
    """dims [start:end] of ``name`` built from constants and the graph inputs' SHAPE, where each
    run-time dim carries a symbolic name (dim_param) that a graph input's dim also carries: the
    sizes then depend on the inputs only, are computed once (``passes.merge_and_prune`` merges the repeats) and
    run before the float graph (``passes.hoist_input_only``), not inside it. None where a dim has no such name."""
    dims, names = (em.shape(name) or [])[start:end], (em.dim_names.get(name) or [])[start:end]
    if len(dims) != end - start or len(names) != len(dims):
        return None
    pieces = []
    for d, sym in zip(dims, names):
        if d >= 0:
            pieces.append(em.const(np.array([d], np.int32)))
            continue
        source = _input_with_dim(em, sym) if sym else None
        if source is None:
            return None
        x, i = source
        pieces.append(_slice1d(em, shape_tensor(em, em.t(x)), i, i + 1))
    if len(pieces) == 1:
        return pieces[0]
    out = em.tmp(T.INT32, [len(pieces)], "dims")
    em.op("CONCATENATION", pieces, [out], ("ConcatenationOptions", {"axis": 0}))
    return out


def _input_with_dim(em: Emitter, sym: str) -> tuple[str, int] | None:
    """(graph input, axis) of the first input dim named ``sym``."""
    inits = {t.name for t in em.graph.initializer}
    for vi in em.graph.input:
        if vi.name not in inits and vi.name in em.values:
            names = em.dim_names.get(vi.name) or []
            if sym in names:
                return vi.name, names.index(sym)
    return None


@maps("Size")
def size(em: Emitter, node) -> None:
    s = shape_tensor(em, em.t(node.input[0]))
    em.op("REDUCE_PROD", [s, em.const(np.array([0], np.int32))], [em.out()], ("ReducerOptions", {"keep_dims": False}))
