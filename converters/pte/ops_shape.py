"""Views and copies of shape: reshapes, permutes, transposes, cat, and ``sym_size``.

A reshape of static shape is a view: its tensor shares the input's storage and no kernel runs
(exir's ``memory.view``, which it emits as no instruction). One of dynamic shape is
``view_copy.out``, its size list holding the run-time values of the shape symbols (as exir
does for a dynamic program).
"""

from __future__ import annotations

from ...schema import definitions as d
from ..aten.args import bind
from ..aten.layouts import strided_reshape
from ..aten.registry import lowering
from ..errors import Unsupported


@lowering("pte", "aten.view.default", "aten.reshape.default", "aten._unsafe_view.default",
          "aten.flatten.using_ints", "aten.squeeze.dim", "aten.unsqueeze.default",
          "aten.squeeze.dims", "aten.squeeze.default", "aten.unflatten.int", "aten.reshape_as.default",
          "aten.view_as.default")
def reshape(ctx, node):
    a = bind(node)
    a.declare_all()  # the output's metadata holds the shape every argument made
    src = ctx.tensor(a.self)
    out_info = ctx.view.tensor(node.outputs[0].value.name)
    if out_info.is_static and not src.dynamic:
        return ctx.view_of(src, node).name
    sizes = [ctx.size_value(s) for s in out_info.shape]
    return ctx.call("view_copy.out", {"self": src, "size": sizes}, [ctx.output(node)]).name


@lowering("pte", "aten.permute.default", "aten.permute_copy.default")
def permute(ctx, node):
    a = bind(node)
    return ctx.call("permute_copy.out", {"self": a.self, "dims": a.dims}, [ctx.output(node)]).name


@lowering("pte", "aten.numpy_T.default")
def numpy_t(ctx, node):
    """``x.T``: every dim reversed."""
    a = bind(node)
    rank = ctx.view.tensor(a.self.name).rank
    return ctx.call("permute_copy.out", {"self": a.self, "dims": list(range(rank))[::-1]}, [ctx.output(node)]).name


@lowering("pte", "aten.transpose.int")
def transpose(ctx, node):
    a = bind(node)
    return ctx.call("transpose_copy.int_out", {"self": a.self, "dim0": a.dim0, "dim1": a.dim1},
                    [ctx.output(node)]).name


@lowering("pte", "aten.t.default")
def t(ctx, node):
    a = bind(node)
    if ctx.view.tensor(a.self.name).rank < 2:  # the identity
        if ctx.view.tensor(a.self.name).is_static:
            return ctx.view_of(ctx.tensor(a.self), node).name
        return ctx.call("clone.out", {"self": a.self}, [ctx.output(node)]).name
    return ctx.call("transpose_copy.int_out", {"self": a.self, "dim0": 0, "dim1": 1}, [ctx.output(node)]).name


@lowering("pte", "aten.cat.default")
def cat(ctx, node):
    a = bind(node)
    return ctx.call("cat.out", {"tensors": a.tensors, "dim": a.dim}, [ctx.output(node)]).name


@lowering("pte", "aten.sym_size.int")
def sym_size(ctx, node):
    a = bind(node)
    v = ctx.call("sym_size.int", {"self": ctx.tensor(a.self), "dim": a.dim}, [])
    ctx.holds_symbol(node.outputs[0], v)
    return v.name


@lowering("pte", "aten.clone.default", "aten.contiguous.default", "aten.alias.default", "aten.alias_copy.default",
          "aten.detach.default", "aten.detach_.default", "aten.detach_copy.default", "aten.lift_fresh.default",
          "aten.lift_fresh_copy.default")
def clone(ctx, node):
    """A copy (``clone.out``): the identities of inference (``detach``, ``alias``, ``lift_fresh``)
    too, as their own tensors (a graph output may not be another value's storage)."""
    a = bind(node)
    a.declare("memory_format")  # every ExecuTorch tensor here is contiguous (dim order 0..n-1)
    return ctx.call("clone.out", {"self": a.self}, [ctx.output(node)]).name


@lowering("pte", "aten._to_copy.default", "aten.to.dtype", "aten.to.dtype_layout", "aten.to.device", "aten.to.other",
          "aten.type_as.default", "aten._to_dim_order_copy.default")
def to_copy(ctx, node):
    """A cast (or a copy) to the output's dtype: ``dim_order_ops::_to_dim_order_copy.out`` with
    the contiguous dim order, what exir emits for ``_to_copy``."""
    a = bind(node)
    a.declare("dtype", "other")  # the output's metadata holds the dtype they give
    plain_memory(node, a)
    rank = ctx.view.tensor(node.outputs[0].value.name).rank
    return ctx.call("dim_order_ops::_to_dim_order_copy.out", {"self": a.self, "dim_order": list(range(rank))},
                    [ctx.output(node)]).name


def plain_memory(node, a) -> None:
    """Refuse a cast or a new tensor asking for more than contiguous CPU memory (a device, a layout,
    pinned memory, channels-last, a dim order other than 0..n-1); ``non_blocking``/``copy`` change
    no value. Shared by the casts here and the new tensors of ``ops_create``."""
    a.declare("non_blocking", "copy")
    device = a.get("device")
    if device is not None and getattr(device, "type", device) != "cpu":
        raise Unsupported(f"{node.target} to device {device}")
    if a.get("layout") not in (None, d.Layout.Strided):
        raise Unsupported(f"{node.target} to layout {a.layout}")
    if a.get("pin_memory"):
        raise Unsupported(f"{node.target} with pin_memory=True")
    if a.get("memory_format") not in (None, d.MemoryFormat.ContiguousFormat, d.MemoryFormat.PreserveFormat):
        raise Unsupported(f"{node.target} to memory format {a.memory_format}")
    order = a.get("dim_order")
    if order is not None and list(order) != list(range(len(order))):
        raise Unsupported(f"{node.target} to dim order {list(order)}")


@lowering("pte", "aten._assert_tensor_metadata.default")
def assert_tensor_metadata(ctx, node):
    """torch's check of a tensor's dtype (and sizes, strides, device, layout) at run time: the
    program's metadata already says what they are, so it holds by construction; a mismatch is
    refused rather than dropped."""
    a = bind(node)
    info = ctx.view.tensor(a.a.name)
    if a.dtype is not None and a.dtype != info.dtype:
        raise Unsupported(f"_assert_tensor_metadata of {a.a.name!r} ({info.dtype.name}) asserts dtype {a.dtype}")
    if a.size is not None and list(a.size) != list(info.shape):
        raise Unsupported(f"_assert_tensor_metadata of {a.a.name!r} asserts sizes {a.size}")
    a.declare("stride", "device", "layout")  # contiguous CPU strided tensors: all ExecuTorch has
    return None


@lowering("pte", "aten.dropout.default", "aten.dropout_.default")
def dropout(ctx, node):
    a = bind(node)
    if a.train:
        raise Unsupported("dropout in training mode")
    a.declare("p")  # no effect at inference
    src = a.input if "input" in a else a.self  # dropout_ names it self
    return ctx.call("clone.out", {"self": src}, [ctx.output(node)]).name


@lowering("pte", "aten.slice.Tensor")
def slice_(ctx, node):
    a = bind(node)
    return ctx.call("slice_copy.Tensor_out", {"self": a.self, "dim": a.dim, "start": a.start, "end": a.end,
                                              "step": a.step}, [ctx.output(node)]).name


@lowering("pte", "aten.select.int")
def select(ctx, node):
    a = bind(node)
    return ctx.call("select_copy.int_out", {"self": a.self, "dim": a.dim, "index": a.index}, [ctx.output(node)]).name


@lowering("pte", "aten.expand.default")
def expand(ctx, node):
    a = bind(node)
    a.declare("implicit", "size")  # implicit changes no value; the output's metadata holds the size
    out_info = ctx.view.tensor(node.outputs[0].value.name)
    sizes = [ctx.size_value(s) for s in out_info.shape]  # -1 resolved by the output's metadata
    return ctx.call("expand_copy.out", {"self": a.self, "size": sizes}, [ctx.output(node)]).name


@lowering("pte", "aten.chunk.default", "aten.split.Tensor", "aten.split_with_sizes.default")
def split(ctx, node):
    """Every piece's size along ``dim`` from the outputs' metadata: ``split_with_sizes_copy.out``
    (what exir emits for all three)."""
    a = bind(node)
    a.declare("chunks", "split_size", "split_sizes")  # the outputs' metadata holds the sizes they made
    names = [t.name for o in node.outputs if o.type == "as_tensors" for t in o.value]
    rank = ctx.view.tensor(a.self.name).rank
    dim = a.dim % rank if rank else 0
    sizes = [ctx.view.tensor(n).shape[dim] for n in names]
    if not all(isinstance(x, int) for x in sizes):
        raise Unsupported("a split along a dynamic dim")
    outs = [ctx.output(node, i) for i in range(len(names))]
    ctx.call("split_with_sizes_copy.out", {"self": a.self, "split_sizes": sizes, "dim": a.dim}, outs)
    return [o.name for o in outs]


@lowering("pte", "aten.unbind.int")
def unbind(ctx, node):
    """One ``select_copy.int_out`` per piece (the portable library has no unbind kernel)."""
    a = bind(node)
    names = [t.name for o in node.outputs if o.type == "as_tensors" for t in o.value]
    outs = [ctx.output(node, i) for i in range(len(names))]
    for i, out in enumerate(outs):
        ctx.call("select_copy.int_out", {"self": a.self, "dim": a.dim, "index": i}, [out])
    return [o.name for o in outs]


@lowering("pte", "aten.flip.default")
def flip(ctx, node):
    a = bind(node)
    return ctx.call("flip.out", {"self": a.self, "dims": a.dims}, [ctx.output(node)]).name


@lowering("pte", "aten.roll.default")
def roll(ctx, node):
    """``roll.out``, a shift per dim. No ``dims`` (torch: roll the flattened tensor) is refused: 1.5.1's
    kernel then fails when it runs (it checks one shift per dim)."""
    a = bind(node)
    if len(a.dims) != len(a.shifts):
        raise Unsupported("roll of the flattened tensor (no dims)")
    return ctx.call("roll.out", {"self": a.self, "shifts": a.shifts, "dims": a.dims}, [ctx.output(node)]).name


@lowering("pte", "aten.tril.default")
def tril(ctx, node):
    """The lower triangle of the last two dims (``tril.out``)."""
    a = bind(node)
    return ctx.call("tril.out", {"self": a.self, "diagonal": a.diagonal}, [ctx.output(node)]).name


@lowering("pte", "aten.triu.default")
def triu(ctx, node):
    """The upper triangle (the library has no ``triu``): ``where(tril(ones, diagonal - 1), 0, self)``
    over the last two dims, so every kept element is ``self``'s own (no arithmetic on it)."""
    a = bind(node)
    info = ctx.view.tensor(a.self.name)
    if info.rank < 2:
        raise Unsupported("triu of a tensor of rank < 2")
    square = list(info.shape[-2:])
    sizes, dynamic = ctx.dims(square, "triu")
    ones = ctx.call("full.out", {"size": [ctx.size_value(s) for s in square], "fill_value": True},
                    [ctx.scratch_sized("triu_ones", sizes, dynamic=dynamic, dtype=d.ScalarType.BOOL)])
    below = ctx.call("tril.out", {"self": ones, "diagonal": a.diagonal - 1},
                     [ctx.scratch_sized("triu_below", sizes, dynamic=dynamic, dtype=d.ScalarType.BOOL)])
    zero = ctx.call("scalar_tensor.out", {"s": False if info.dtype == d.ScalarType.BOOL else 0},
                    [ctx.scratch_sized("triu_zero", (), dynamic=False, dtype=info.dtype)])
    return ctx.call("where.self_out", {"condition": below, "self": zero, "other": a.self}, [ctx.output(node)]).name


@lowering("pte", "aten.as_strided.default", "aten.as_strided_copy.default")
def as_strided(ctx, node):
    """Only a reshape: over a value torch recorded contiguous at storage offset 0, with the strides
    of contiguous memory and as many elements (``layouts.strided_reshape``, symbolic sizes too).
    Any other striding is refused."""
    if not strided_reshape(ctx.view, node):
        raise Unsupported("as_strided that is not a reshape of contiguous memory")
    return reshape(ctx, node)


@lowering("pte", "aten.copy.default")
def copy(ctx, node):
    """``src`` broadcast to ``self``'s shape, in ``self``'s dtype (``copy.out``)."""
    a = bind(node)
    a.declare("non_blocking")  # changes no value
    return ctx.call("copy.out", {"self": a.self, "src": a.src}, [ctx.output(node)]).name
