"""Writes at positions: ``index_put``, ``index_copy``, ``slice_scatter``, ``select_scatter`` and
``copy``, what a static KV cache's update and the front end's write-backs through views lower to.

The in-place forms (``index_put_``; ``index_copy_`` and ``copy_`` derived by the registry) are the
same lowerings: the front end rebinds the written tensor to the result (a mutated buffer is written back after the graph,
``state.py``). ``index_copy`` has no portable kernel: it is ``index_put`` with its index at
``dim`` and every other dim taken whole (core ATen's decomposition).

Index tensors are int64. An int64 user input that the program reads only as such an index (a
decode position) is declared as one (``declare_index_input``); any other use of it is refused by
the float32 rule of the inputs.
"""

from __future__ import annotations

from ...schema import definitions as d
from ..aten.args import TensorRef, bind
from ..aten.graph import ProgramView
from ..aten.registry import canonical, lowering
from ..errors import Unsupported

__all__ = ["INDEX_ARGUMENTS", "read_only_as_index", "declare_index_input"]

INDEX_ARGUMENTS = {  # ATen overload -> the argument holding its int64 index tensor(s)
    "aten.index_put.default": "indices", "aten.index_put_.default": "indices",
    "aten.index_copy.default": "index", "aten.index_copy_.default": "index",
    "aten.index_add.default": "index", "aten.index_add_.default": "index",
}


def read_only_as_index(view: ProgramView, name: str) -> bool:
    """Whether every node reading value ``name`` reads it only as an index (``INDEX_ARGUMENTS``)."""
    readers = view.consumers.get(name, [])
    if not readers or any(ref == name for a in view.output_args for ref in _tensor_names(a)):
        return False
    for n in readers:
        key = INDEX_ARGUMENTS.get(canonical(n.target))
        if key is None or any(name in _tensor_names(na.arg) for na in n.inputs if na.name != key):
            return False
    return True


def _tensor_names(arg: d.Argument) -> list[str]:
    if arg.type == "as_tensor":
        return [arg.value.name]
    if arg.type == "as_tensors":
        return [t.name for t in arg.value]
    if arg.type == "as_optional_tensors":
        return [t.value.name for t in arg.value if t.type == "as_tensor"]
    return []


def declare_index_input(ctx, name: str):
    """An int64 user input read only as an index: a planned int64 tensor bound to ``name``."""
    info = ctx.view.tensor(name)
    if info.dtype != d.ScalarType.LONG:
        raise Unsupported(f"is {info.dtype.name}: an index input must be int64")
    v = ctx.new_tensor(name, info.dtype, info.shape, f"input {name!r}")
    ctx.env[name] = v.name
    return v


def _int64_indices(ctx, refs) -> None:
    for r in refs:
        if r is not None and ctx.view.tensor(r.name).dtype != d.ScalarType.LONG:
            raise Unsupported(f"an index tensor of {ctx.view.tensor(r.name).dtype.name} (a mask or int32 index): "
                              "the pte target converts int64 indices")


@lowering("pte", "aten.index_put.default", "aten.index_put_.default")
def index_put(ctx, node):
    a = bind(node)
    _int64_indices(ctx, a.indices)
    return ctx.call("index_put.out", {"self": a.self, "indices": a.indices, "values": a.values,
                                      "accumulate": a.accumulate}, [ctx.output(node)]).name


def _rows_at(ctx, a, op: str) -> list:
    """``[None] * dim + [index]``: the index list that puts ``source``'s rows at ``index`` along
    ``dim`` (the indexed shape is ``source``'s)."""
    _int64_indices(ctx, [a.index])
    if ctx.view.tensor(a.index.name).rank != 1:
        raise Unsupported(f"{op} with an index that is not 1-D")
    rank = ctx.view.tensor(a.self.name).rank
    if rank == 0 or ctx.view.tensor(a.source.name).rank != rank:
        raise Unsupported(f"{op} of a 0-d tensor, or with a source of another rank")
    return [None] * (a.dim % rank) + [TensorRef(a.index.name)]


@lowering("pte", "aten.index_copy.default")
def index_copy(ctx, node):
    """``self`` with the rows ``index`` along ``dim`` replaced by ``source``'s."""
    a = bind(node)
    return ctx.call("index_put.out", {"self": a.self, "indices": _rows_at(ctx, a, "index_copy"), "values": a.source,
                                      "accumulate": False}, [ctx.output(node)]).name


@lowering("pte", "aten.index_add.default")
def index_add(ctx, node):
    """``self`` with ``alpha * source``'s rows added at ``index`` along ``dim`` (repeated indices
    add up): ``index_put`` with ``accumulate``, as core ATen decomposes it."""
    a = bind(node)
    indices = _rows_at(ctx, a, "index_add")
    source = a.source
    if a.alpha != 1:
        source = ctx.call("mul.Scalar_out", {"self": a.source, "other": a.alpha},
                          [ctx.scratch("index_add_source", ctx.view.tensor(a.source.name).shape)])
    return ctx.call("index_put.out", {"self": a.self, "indices": indices, "values": source, "accumulate": True},
                    [ctx.output(node)]).name


@lowering("pte", "aten.slice_scatter.default")
def slice_scatter(ctx, node):
    a = bind(node)
    return ctx.call("slice_scatter.out", {"self": a.self, "src": a.src, "dim": a.dim, "start": a.start,
                                          "end": a.end, "step": a.step}, [ctx.output(node)]).name


@lowering("pte", "aten.select_scatter.default")
def select_scatter(ctx, node):
    a = bind(node)
    return ctx.call("select_scatter.out", {"self": a.self, "src": a.src, "dim": a.dim, "index": a.index},
                    [ctx.output(node)]).name


@lowering("pte", "aten.copy.default")
def copy(ctx, node):
    """``src`` broadcast to ``self``'s shape (float32 both: no dtype conversion here)."""
    a = bind(node)
    a.declare("non_blocking")  # no effect on the values
    if ctx.view.tensor(a.src.name).dtype != ctx.view.tensor(a.self.name).dtype:
        raise Unsupported("copy between dtypes")
    return ctx.call("copy.out", {"self": a.self, "src": a.src, "non_blocking": False}, [ctx.output(node)]).name
