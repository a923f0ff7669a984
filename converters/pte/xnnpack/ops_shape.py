"""Permutes, reshapes, copies, concatenation and slices.

A permute of an NHWC tensor is composed with its layout (``permute(x, [0, 2, 3, 1])`` of a tensor
held NHWC is that tensor: no node). A reshape's run-time size (a dynamic batch) is XNNPACK's 0,
"inferred", of which one is allowed. A slice is along a static dim; its size along a run-time
dim is XNNPACK's 0, "the whole dim".
"""

from __future__ import annotations

from ..program import TensorValue
from .builder import NHWC, STD, TO_NHWC, TO_STD, literal
from .index import kernel_key
from .int8 import weight_view
from .rules import NOT_LITERAL, ints, literal_or_none, tensor_problem
from .table import xnn_op

MAX_CAT = 5  # XNNConcatenate2..5


def _check_permute(ix, c, a):
    if ix.constant_view(a["self"]) is not None or weight_view(ix, a["self"]) is not None:
        return "a permute of a constant (folded into the constant)"
    return tensor_problem(a["self"], "the input")


def _perm(ix, c, a, rank):
    if kernel_key(c) == "permute_copy.out":
        return [d % rank for d in ints(ix, a["dims"])]
    perm = list(range(rank))
    i, j = int(literal(a["dim0"])) % rank, int(literal(a["dim1"])) % rank
    perm[i], perm[j] = perm[j], perm[i]
    return perm


@xnn_op("permute_copy.out", "transpose_copy.int_out", check=_check_permute)
def permute(b, c, a):
    """Written in whichever layout makes it no node, else in its input's: a 4-D output held NHWC
    is stored in the order ``TO_NHWC`` of its torch dims."""
    x, out = a["self"], c.writes[0]
    ref = b.ref(x)
    layout = ref.layout if ref.sizes == tuple(x.sizes) else STD
    perm = _perm(b.ix, c, a, len(x.sizes))
    on_stored = [TO_STD[d] for d in perm] if layout == NHWC else perm  # where torch's dim d is stored
    options = {STD: on_stored}
    if len(perm) == 4:
        options[NHWC] = [on_stored[TO_NHWC[k]] for k in range(4)]
    identity = [lay for lay, p in options.items() if p == list(range(len(p)))]
    out_layout = identity[0] if identity else (layout if layout in options else STD)
    xin = b.tensor(x, layout)
    if identity:
        return b.bind(out, xin, out_layout)
    y = b.define(out, out_layout)
    p = options[out_layout]
    b.node("XNNStaticTranspose", "XNNStaticTranspose", num_dims=len(p), perm=p, input_id=xin.id,
           output_id=y.id, flags=0)


def _check_view(ix, c, a):
    sizes = a["size"].items
    run_time = sum(1 for s in sizes if ix.run_time_int(s))
    if run_time > 1 or any(not ix.run_time_int(s) and literal_or_none(ix, s) in (None, -1) for s in sizes):
        return "a reshape with more than one run-time size"
    return tensor_problem(a["self"], "the input") or tensor_problem(c.writes[0], "the output")


@xnn_op("view_copy.out", check=_check_view)
def view(b, c, a):
    new_shape = [0 if b.ix.run_time_int(s) else int(s.value) for s in a["size"].items]
    xin = b.tensor(a["self"])
    out = c.writes[0]
    b.bind(out, b.reshape(xin, new_shape, out.sizes), STD)


def _check_clone(ix, a):
    if literal_or_none(ix, a["memory_format"]) not in (None, 0, 1):  # preserve_format, contiguous_format
        return "a clone to another memory format"
    return tensor_problem(a["self"], "the input")


def _check_same_dtype_copy(ix, c, a):
    x, out = a["self"], c.writes[0]
    if not isinstance(x, TensorValue) or x.scalar_type != out.scalar_type:
        return "a cast to another dtype"
    order = literal_or_none(ix, a["dim_order"])
    if order is not None and order != list(range(len(x.sizes))):
        return "a copy to another dim order"
    return tensor_problem(x, "the input")


def _check_copy(ix, c, a):
    if kernel_key(c) == "clone.out":
        return _check_clone(ix, a)
    return _check_same_dtype_copy(ix, c, a)


@xnn_op("clone.out", "dim_order_ops::_to_dim_order_copy.out", check=_check_copy)
def clone(b, c, a):
    """The copy is the input itself inside the delegate (an output is copied when it must be): a
    clone, or a ``.to()`` of a tensor to its own dtype and dim order (Llama's RMSNorm casts to
    float32 what is float32 already)."""
    x = a["self"]
    ref = b.ref(x) if b.ix.constant_view(x) is None else None
    if ref is not None and ref.sizes == tuple(x.sizes):
        return b.bind(c.writes[0], ref.value, ref.layout)
    b.bind(c.writes[0], b.tensor(x), STD)


def _check_cat(ix, c, a):
    tensors = list(a["tensors"].items)
    dim = literal_or_none(ix, a["dim"])
    if not isinstance(dim, int) or not tensors:
        return "a concatenation of no tensor or along a run-time dim"
    if any(ix.constant_view(t) is not None for t in tensors):
        return "a concatenation of a constant"
    return next((p for t in tensors if (p := tensor_problem(t, "an input"))), None)


def _concat(b, values: list, axis: int, out_dims: tuple):
    n = len(values)
    y = b.g.value(out_dims)
    ids = {f"input{i + 1}_id": v.id for i, v in enumerate(values)}
    b.node(f"XNNConcatenate{n}", "_XNNCat", axis=axis, **ids, output_id=y.id, flags=0)
    return y


@xnn_op("cat.out", check=_check_cat)
def cat(b, c, a):
    tensors, out = list(a["tensors"].items), c.writes[0]
    rank = len(out.sizes)
    dim = int(literal(a["dim"])) % rank
    nhwc = rank == 4 and all(b.ref(t).layout == NHWC and b.ref(t).sizes == tuple(t.sizes) for t in tensors)
    layout = NHWC if nhwc else STD
    axis = TO_STD[dim] if nhwc else dim
    values = [b.tensor(t, layout) for t in tensors]
    while len(values) > 1:  # at most five at a time, left to right (one tensor: itself)
        head, values = values[:MAX_CAT], values[MAX_CAT:]
        dims = list(head[0].dims)
        dims[axis] = sum(v.dims[axis] for v in head)
        values.insert(0, _concat(b, head, axis, tuple(dims)))
    b.bind(out, values[0], layout)


def _check_slice(ix, c, a):
    x = a["self"]
    if ix.constant_view(x) is not None:
        return "a slice of a constant (folded into the constant)"
    for k, v in a.items():
        value = ints(ix, v) if k == "split_sizes" else literal_or_none(ix, v)
        if k != "self" and (value is None and k not in ("start", "end") or value is NOT_LITERAL
                            or not isinstance(value, (int, list, type(None))) or isinstance(value, bool)):
            return "a slice with run-time bounds"
    dyn = ix.dynamic_dims(x)
    if dyn is None or dyn[int(literal(a["dim"])) % len(x.sizes)]:
        return "a slice along a run-time dim (or of a tensor whose run-time dims are not known)"
    if kernel_key(c) == "select_copy.int_out" and sum(dyn) > 1:
        return "a select of a tensor with more than one run-time dim (its reshape infers one)"
    if kernel_key(c) == "slice_copy.Tensor_out" and literal_or_none(ix, a["step"]) != 1:
        return "a slice with a step"
    return tensor_problem(x, "the input") or tensor_problem(c.writes[0], "the output")


def _slice(b, x: TensorValue, dim: int, start: int, size: int, out: TensorValue):
    ref = b.ref(x)
    layout = ref.layout if ref.sizes == tuple(x.sizes) else STD
    xin = b.tensor(x, layout)
    axis = TO_STD[dim] if layout == NHWC else dim
    dyn = b.dynamic_dims(x)
    dyn = [dyn[p] for p in TO_NHWC] if layout == NHWC else list(dyn)
    y = _slice_value(b, xin, dyn, axis, start, size)
    b.bind(out, y, layout, tuple(out.sizes) if tuple(out.sizes) == _sized(x.sizes, dim, size) else None)
    return y, layout


def _slice_value(b, v, dyn, axis: int, start: int, size: int):
    """A ``StaticSlice`` of ``v`` along ``axis`` (``dyn``: which of its dims are run-time sizes)."""
    offsets = [0] * len(v.dims)
    sizes = [0 if d else n for n, d in zip(v.dims, dyn)]  # 0: the whole (run-time) dim
    offsets[axis], sizes[axis] = start, size
    y = b.g.value(tuple(size if i == axis else n for i, n in enumerate(v.dims)))
    b.node("XNNStaticSlice", "XNNStaticSlice", num_dims=len(sizes), offsets=offsets, sizes=sizes, input_id=v.id,
           output_id=y.id, flags=0)
    return y


def _sized(sizes, dim, size):
    s = list(sizes)
    s[dim] = size
    return tuple(s)


@xnn_op("slice_copy.Tensor_out", check=_check_slice)
def slice_(b, c, a):
    x, out = a["self"], c.writes[0]
    rank = len(x.sizes)
    dim = int(literal(a["dim"])) % rank
    n = x.sizes[dim]
    start = literal(a["start"])
    start = 0 if start is None else (start + n if start < 0 else start)
    start = min(max(start, 0), n)
    _slice(b, x, dim, start, out.sizes[dim], out)


@xnn_op("select_copy.int_out", check=_check_slice)
def select(b, c, a):
    x, out = a["self"], c.writes[0]
    rank = len(x.sizes)
    dim = int(literal(a["dim"])) % rank
    index = int(literal(a["index"]))
    index = index + x.sizes[dim] if index < 0 else index
    piece = _sized(x.sizes, dim, 1)
    holder = TensorValue("", out.scalar_type, piece, out.itemsize, x.dynamic)  # the 1-wide slice
    b.dims_of[holder] = b.dynamic_dims(x)
    _slice(b, x, dim, index, 1, holder)
    b.dims_of[out] = tuple(d for i, d in enumerate(b.dynamic_dims(x)) if i != dim)
    b.bind(out, b.tensor(holder, STD), STD, piece)  # a view of the slice: read as ``out``, it is reshaped


@xnn_op("split_with_sizes_copy.out", check=_check_slice)
def split(b, c, a):
    x = a["self"]
    dim = int(literal(a["dim"])) % len(x.sizes)
    start = 0
    for out in c.writes:
        _slice(b, x, dim, start, out.sizes[dim], out)
        start += out.sizes[dim]


def _check_roll(ix, c, a):
    x = a["self"]
    shifts, dims = ints(ix, a["shifts"]), ints(ix, a["dims"])
    if shifts is None or dims is None or not dims or len(shifts) != len(dims):
        return "a roll of the flattened tensor (no dims) or with run-time shifts"
    if ix.constant_view(x) is not None:
        return "a roll of a constant"
    dyn = ix.dynamic_dims(x)
    if dyn is None or any(dyn[d % len(x.sizes)] for d in dims):
        return "a roll along a run-time dim (or of a tensor whose run-time dims are not known)"
    return tensor_problem(x, "the input")


@xnn_op("roll.out", check=_check_roll)
def roll(b, c, a):
    """``roll(x, k, d)`` is its last ``k`` along ``d`` then the rest: two ``StaticSlice``s and a
    ``Concatenate2`` per rolled dim (swin's shifted windows; the portable kernel was a fifth of
    its run)."""
    x = a["self"]
    dyn = list(b.dynamic_dims(x))
    v = b.tensor(x, STD)
    for shift, dim in zip(ints(b.ix, a["shifts"]), ints(b.ix, a["dims"])):
        d = dim % len(x.sizes)
        n = x.sizes[d]
        k = shift % n
        if k:
            tail, head = _slice_value(b, v, dyn, d, n - k, k), _slice_value(b, v, dyn, d, 0, n - k)
            v = _concat(b, [tail, head], d, v.dims)
    b.bind(c.writes[0], v, STD)
