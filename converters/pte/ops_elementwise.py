"""Elementwise ops, activations, softmax and mean: one portable kernel each."""

from __future__ import annotations

from ..aten.args import TensorRef, bind
from ..aten.registry import lowering
from ..errors import Unsupported

_BINARY = {"add": True, "sub": True, "mul": False, "div": False}  # op -> has alpha


def _binary(op: str):
    def lower(ctx, node):
        a = bind(node)
        args = {"self": a.self, "other": a.other}
        if _BINARY[op]:
            args["alpha"] = a.alpha
        tensor_other = isinstance(a.other, TensorRef)
        if not isinstance(a.self, TensorRef):
            raise Unsupported(f"{op} of a number by a tensor")
        key = f"{op}.out" if tensor_other else f"{op}.Scalar_out"
        return ctx.call(key, args, [ctx.output(node)]).name

    lower.__name__ = op
    return lower


for _op in _BINARY:
    lowering("pte", f"aten.{_op}.Tensor", f"aten.{_op}.Scalar")(_binary(_op))


def _unary(op: str):
    def lower(ctx, node):
        a = bind(node)
        return ctx.call(f"{op}.out", {"self": a.self}, [ctx.output(node)]).name

    lower.__name__ = op
    return lower


for _op in ("relu", "sigmoid", "tanh", "abs", "exp", "log", "neg", "sqrt", "rsqrt", "erf"):
    lowering("pte", f"aten.{_op}.default")(_unary(_op))


@lowering("pte", "aten.gelu.default")
def gelu(ctx, node):
    a = bind(node)
    if a.approximate not in ("none", "tanh"):
        raise Unsupported(f"gelu approximate={a.approximate!r}")
    return ctx.call("gelu.out", {"self": a.self, "approximate": a.approximate}, [ctx.output(node)]).name


@lowering("pte", "aten.softmax.int", "aten._softmax.default")
def softmax(ctx, node):
    a = bind(node)
    if "half_to_float" in a:  # _softmax
        if a.half_to_float:
            raise Unsupported("_softmax with half_to_float=True")
    elif a.dtype is not None:
        a.declare("dtype")
        if ctx.view.tensor(a.self.name).dtype != a.dtype:
            raise Unsupported("softmax with a dtype other than its input's")
    return ctx.call("_softmax.out", {"self": a.self, "dim": a.dim, "half_to_float": False}, [ctx.output(node)]).name


@lowering("pte", "aten.mean.dim")
def mean(ctx, node):
    a = bind(node)
    if a.dtype is not None:
        raise Unsupported("mean with a dtype")
    return ctx.call("mean.out", {"self": a.self, "dim": a.dim, "keepdim": a.keepdim, "dtype": None},
                    [ctx.output(node)]).name
