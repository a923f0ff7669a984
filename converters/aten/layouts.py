"""What torch recorded about memory layout, and what it proves: each value's sizes, strides
and storage offset (``TensorMeta``), read by the view-mutation pass (``views.py``) and by the
``as_strided`` lowerings.

* ``contiguous_at_zero``: a value's elements, in order, are its storage's first elements.
* ``reshape_is_view``: whether ``reshape``/``flatten``/``contiguous`` returned a view or a copy
  (ATen's ``computeStride`` on the recorded strides; None when symbolic strides leave it open).
* ``strided_reshape``: an ``as_strided`` that is a reshape of contiguous memory, symbolic sizes
  included.
* ``same_dim``: two sizes equal for every value of their symbols (polynomials are compared by
  evaluation on a grid their degree cannot vanish on; anything else is unequal unless identical).
"""

from __future__ import annotations

from ...schema import definitions as d
from ...serde.codec.symbolic import Add, Expr, Integer, Mul, Pow, Symbol
from . import registry
from .args import SymRef, bind
from .graph import Dim, GraphView, first_input, output_names, sym_dim

__all__ = ["same_dim", "contiguous_at_zero", "reshape_is_view", "strided_reshape"]


# ------------------------------------------------------------------ symbolic sizes


def _degree(e: Expr) -> int | None:
    """Degree of a polynomial in its symbols; None when ``e`` is not a polynomial."""
    if isinstance(e, Integer):
        return 0
    if isinstance(e, Symbol):
        return 1
    if isinstance(e, (Add, Mul)):
        ds = [_degree(a) for a in e.args]
        if any(x is None for x in ds):
            return None
        return max(ds) if isinstance(e, Add) else sum(ds)
    if isinstance(e, Pow) and isinstance(e.exp, Integer) and e.exp.value >= 0:
        b = _degree(e.base)
        return None if b is None else b * e.exp.value
    return None


def same_dim(a: Dim, b: Dim) -> bool:
    """Whether two sizes are equal for every value of their symbols: ints compared, polynomials
    by evaluation on a grid that a non-zero difference of their degree cannot vanish on."""
    if isinstance(a, int) and isinstance(b, int):
        return a == b
    ea, eb = (Integer(x) if isinstance(x, int) else x for x in (a, b))
    if ea == eb:
        return True
    da, db = _degree(ea), _degree(eb)
    syms = sorted(ea.free_symbols | eb.free_symbols)
    if da is None or db is None or len(syms) > 3:
        return False
    points = range(2, 3 + max(da, db))
    grid = [{}]
    for s in syms:
        grid = [{**g, s: v} for g in grid for v in points]
    return all(ea.evaluate(g) == eb.evaluate(g) for g in grid)


def _product(dims) -> Dim:
    ints = 1
    rest = []
    for x in dims:
        if isinstance(x, int):
            ints *= x
        else:
            rest.append(x)
    if not rest:
        return ints
    return Mul(tuple([Integer(ints), *rest])) if ints != 1 else (rest[0] if len(rest) == 1 else Mul(tuple(rest)))


def _contiguous_strides(sizes, strides) -> bool:
    """Row-major strides for ``sizes`` (a dim of size 1 may have any stride)."""
    for i, (n, st) in enumerate(zip(sizes, strides)):
        if isinstance(n, int) and n == 1:
            continue
        if not same_dim(st, _product(sizes[i + 1:])):
            return False
    return True


def _meta(view: GraphView, name: str) -> d.TensorMeta | None:
    v = view
    while v is not None:
        m = v.graph.tensor_values.get(name)
        if m is not None:
            return m
        v = v.parent
    return None


def _layout(view: GraphView, name: str) -> tuple[list, list, Dim] | None:
    """(sizes, strides, storage offset) torch recorded for ``name``."""
    m = _meta(view, name)
    if m is None:
        return None
    return [sym_dim(s) for s in m.sizes], [sym_dim(s) for s in m.strides], sym_dim(m.storage_offset)


def contiguous_at_zero(view: GraphView, name: str) -> bool:
    """Whether torch recorded ``name`` as row-major contiguous at storage offset 0: its
    elements in order are its storage's first elements."""
    lay = _layout(view, name)
    return lay is not None and same_dim(lay[2], 0) and _contiguous_strides(lay[0], lay[1])


def _view_strides(sizes: list[int], strides: list[int], new: list[int]) -> bool:
    """Whether ``new`` sizes can view memory of ``sizes``/``strides`` (ATen's computeStride:
    each run of dims that is contiguous within itself must be split/merged whole)."""
    if not sizes or 0 in sizes:
        return True
    view_d, base, t_numel, v_numel = len(new) - 1, strides[-1], 1, 1
    for t in range(len(sizes) - 1, -1, -1):
        t_numel *= sizes[t]
        if t == 0 or (sizes[t - 1] != 1 and strides[t - 1] != t_numel * base):
            while view_d >= 0 and (v_numel < t_numel or new[view_d] == 1):
                v_numel *= new[view_d]
                view_d -= 1
            if v_numel != t_numel:
                return False
            if t > 0:
                base, t_numel, v_numel = strides[t - 1], 1, 1
    return view_d == -1


def reshape_is_view(view: GraphView, node: d.Node) -> bool | None:
    """Whether a ``reshape``/``reshape_as``/``flatten``/``contiguous`` node returned a view of
    its input (True) or a copy (False), from the layout torch recorded for the input; None when
    symbolic strides leave it open."""
    lay = _layout(view, first_input(node))
    if lay is None:
        return None
    sizes, strides, _ = lay
    if registry.canonical(node.target) == "aten.contiguous.default":
        fmt = bind(node, "self", memory_format=d.MemoryFormat.ContiguousFormat).memory_format
        if fmt != d.MemoryFormat.ContiguousFormat:
            return None
        return _contiguous_strides(sizes, strides)
    if _contiguous_strides(sizes, strides):
        return True
    new = list(view.tensor(output_names(node)[0]).shape)
    if all(isinstance(x, int) for x in sizes + strides + new):
        return _view_strides(sizes, strides, new)
    return None


def _sym(view: GraphView, x) -> Dim:
    """A bound int argument as a size: an int, or the expression of its SymInt."""
    if isinstance(x, SymRef):
        v = view
        while v is not None:
            if x.name in v.sym_ints:
                return v.sym_ints[x.name]
            v = v.parent
        return Symbol(f"?{x.name}")  # unknown: equal only to itself
    return x


def strided_reshape(view: GraphView, node: d.Node) -> bool:
    """Whether ``as_strided(self, size, stride, storage_offset)`` is a reshape of ``self``:
    ``self`` contiguous at offset 0, the strides row-major for ``size``, offset 0 (or
    unset) and as many elements as ``self``."""
    a = bind(node, "self", "size", "stride", storage_offset=None)
    if not contiguous_at_zero(view, a.self.name):
        return False
    size = [_sym(view, x) for x in a.size]
    stride = [_sym(view, x) for x in a.stride]
    if a.storage_offset is not None and not same_dim(_sym(view, a.storage_offset), 0):
        return False
    return (len(size) == len(stride) and _contiguous_strides(size, stride)
            and same_dim(_product(size), _product(view.tensor(a.self.name).shape)))
