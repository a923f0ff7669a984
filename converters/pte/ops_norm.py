"""Group norm and weight norm (batch and layer norm are in ``ops_nn``).

``group_norm`` and ``native_group_norm`` are ``native_group_norm.out`` (its mean and rstd, ``[N,
groups]``, scratch tensors for the first); N and the spatial size are the input's dims, at run time
when dynamic. ``_weight_norm(v, g, dim)`` is torch's ``v * (g / norm(v))``, the 2-norm over every dim
but ``dim`` (over all of them for ``dim=-1``, as torch's ``norm_except_dim``), composed (no portable
kernel): ``mul.out``, ``sum.IntList_out``, ``sqrt.out``, ``div.out``, ``mul.out``.
"""

from __future__ import annotations

from ..aten.args import bind
from ..aten.registry import lowering
from ..errors import Unsupported
from .shapes import product


def _group_norm_call(ctx, a, x_name, groups, outs):
    shape = ctx.view.tensor(x_name).shape
    if len(shape) < 2 or not isinstance(shape[1], int):
        raise Unsupported("group norm of an input of rank < 2 or a symbolic channel count")
    return ctx.call("native_group_norm.out", {
        "input": ctx.tensor(a.input), "weight": a.weight, "bias": a.bias, "N": ctx.size_value(shape[0]),
        "C": shape[1], "HxW": ctx.size_value(product(shape[2:])), "group": groups, "eps": a.eps}, outs)


@lowering("pte", "aten.group_norm.default")
def group_norm(ctx, node):
    """``cudnn_enabled`` changes no value."""
    a = bind(node)
    a.declare("cudnn_enabled")
    shape = ctx.view.tensor(a.input.name).shape
    out = ctx.output(node)
    stats = [ctx.scratch(f"gn_{s}", [shape[0], a.num_groups]) for s in ("mean", "rstd")]
    _group_norm_call(ctx, a, a.input.name, a.num_groups, [out] + stats)
    return out.name


@lowering("pte", "aten.native_group_norm.default")
def native_group_norm(ctx, node):
    """Its N, C and HxW are the input's (the output's metadata was made from them)."""
    a = bind(node)
    a.declare("N", "C", "HxW")
    outs = [ctx.output(node, i) for i in range(3)]
    _group_norm_call(ctx, a, a.input.name, a.group, outs)
    return [o.name for o in outs]


@lowering("pte", "aten._weight_norm.default")
def weight_norm(ctx, node):
    a = bind(node)
    v_shape = list(ctx.view.tensor(a.v.name).shape)
    rank = len(v_shape)
    if not -1 <= a.dim < rank:
        raise Unsupported(f"_weight_norm over dim {a.dim} of a rank-{rank} tensor")
    dim = a.dim  # -1: torch's norm_except_dim takes the norm of the whole tensor
    v = ctx.tensor(a.v)
    kept = [s if i == dim else 1 for i, s in enumerate(v_shape)]
    square = ctx.call("mul.out", {"self": v, "other": v}, [ctx.scratch("wn_square", v_shape)])
    total = ctx.call("sum.IntList_out", {"self": square, "dim": [i for i in range(rank) if i != dim],
                                         "keepdim": True, "dtype": None}, [ctx.scratch("wn_sum", kept)])
    norm = ctx.call("sqrt.out", {"self": total}, [ctx.scratch("wn_norm", kept)])
    scale = ctx.call("div.out", {"self": a.g, "other": norm}, [ctx.scratch("wn_scale", kept)])
    return ctx.call("mul.out", {"self": v, "other": scale}, [ctx.output(node)]).name
