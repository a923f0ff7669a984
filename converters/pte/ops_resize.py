"""2-D resizes of NCHW tensors: ``upsample_bilinear2d`` and ``upsample_nearest2d``, each one portable
``.vec_out`` kernel given the output size or the scale factors as torch was (the kernels compute the
source index from them as ATen does: the scale factor when given, else input / output size).

The ``.default`` overloads name an output size and optional per-dim scales; with no scales they are
the ``.vec`` form with the output size, and a scale given is refused (ATen then maps indices by a
scale other than input / output size, which the ``.vec`` kernels take only without a size).
"""

from __future__ import annotations

from ..aten.args import bind
from ..aten.registry import lowering
from ..errors import Unsupported


def _rank4(ctx, name: str, op: str) -> None:
    if ctx.view.tensor(name).rank != 4:
        raise Unsupported(f"{op} of an input of rank other than 4 (NCHW)")


def _vec_args(a, ctx, op: str) -> dict:
    _rank4(ctx, a.input.name, op)
    if (a.output_size is None) == (a.scale_factors is None):
        raise Unsupported(f"{op} needs exactly one of output_size and scale_factors")
    return {"input": a.input, "output_size": a.output_size, "scale_factors": a.scale_factors}


def _default_args(a, ctx, op: str) -> dict:
    _rank4(ctx, a.self.name, op)
    if a.scales_h is not None or a.scales_w is not None:
        raise Unsupported(f"{op} with an output size and scales (scales_h/scales_w)")
    return {"input": a.self, "output_size": a.output_size, "scale_factors": None}


@lowering("pte", "aten.upsample_bilinear2d.vec", "aten.upsample_bilinear2d.default")
def upsample_bilinear2d(ctx, node):
    a = bind(node)
    args = (_vec_args if "scale_factors" in a else _default_args)(a, ctx, "upsample_bilinear2d")
    return ctx.call("upsample_bilinear2d.vec_out", {**args, "align_corners": a.align_corners},
                    [ctx.output(node)]).name


@lowering("pte", "aten.upsample_nearest2d.vec", "aten.upsample_nearest2d.default")
def upsample_nearest2d(ctx, node):
    a = bind(node)
    args = (_vec_args if "scale_factors" in a else _default_args)(a, ctx, "upsample_nearest2d")
    return ctx.call("upsample_nearest2d.vec_out", args, [ctx.output(node)]).name
