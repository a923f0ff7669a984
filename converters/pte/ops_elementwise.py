"""Elementwise ops (arithmetic, powers, modulo, the unary math functions), activations, softmax and
mean: one portable kernel each, or a few where the library has none (silu, hardswish, hardsigmoid)."""

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


for _op in ("relu", "sigmoid", "tanh", "abs", "exp", "log", "neg", "sqrt", "rsqrt", "erf", "sin", "cos",
            "reciprocal", "floor", "ceil", "trunc", "sign", "log1p", "expm1", "log2", "tan", "atan"):
    lowering("pte", f"aten.{_op}.default")(_unary(_op))


@lowering("pte", "aten.pow.Tensor_Scalar", "aten.pow.Tensor_Tensor", "aten.pow.Scalar")
def pow_(ctx, node):
    """``pow.Tensor_Scalar_out``, ``pow.Tensor_Tensor_out`` or ``pow.Scalar_out`` (a number base)."""
    a = bind(node)
    key = "pow.Scalar_out" if not isinstance(a.self, TensorRef) else \
        "pow.Tensor_Tensor_out" if isinstance(a.exponent, TensorRef) else "pow.Tensor_Scalar_out"
    return ctx.call(key, {"self": a.self, "exponent": a.exponent}, [ctx.output(node)]).name


def _modulo(op: str):
    """``fmod`` (the sign of the dividend) and ``remainder`` (the sign of the divisor), of a tensor
    or a number."""
    def lower(ctx, node):
        a = bind(node)
        key = f"{op}.Tensor_out" if isinstance(a.other, TensorRef) else f"{op}.Scalar_out"
        return ctx.call(key, {"self": a.self, "other": a.other}, [ctx.output(node)]).name

    lower.__name__ = op
    return lower


for _op in ("fmod", "remainder"):
    lowering("pte", f"aten.{_op}.Tensor", f"aten.{_op}.Scalar")(_modulo(_op))


@lowering("pte", "aten.rsub.Scalar")
def rsub(ctx, node):
    """``other - alpha * self``."""
    a = bind(node)
    return ctx.call("rsub.Scalar_out", {"self": a.self, "other": a.other, "alpha": a.alpha}, [ctx.output(node)]).name


_COMPARISONS = ("gt", "lt", "ge", "le", "eq", "ne")


def _comparison(op: str):
    def lower(ctx, node):
        a = bind(node)
        if not isinstance(a.self, TensorRef):
            raise Unsupported(f"{op} of a number and a tensor")
        key = f"{op}.Tensor_out" if isinstance(a.other, TensorRef) else f"{op}.Scalar_out"
        return ctx.call(key, {"self": a.self, "other": a.other}, [ctx.output(node)]).name

    lower.__name__ = op
    return lower


for _op in _COMPARISONS:
    lowering("pte", f"aten.{_op}.Tensor", f"aten.{_op}.Scalar")(_comparison(_op))


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


@lowering("pte", "aten.hardtanh.default")
def hardtanh(ctx, node):
    a = bind(node)
    return ctx.call("hardtanh.out", {"self": a.self, "min_val": a.min_val, "max_val": a.max_val},
                    [ctx.output(node)]).name


@lowering("pte", "aten.clamp.default")
def clamp(ctx, node):
    a = bind(node)
    return ctx.call("clamp.out", {"self": a.self, "min": a.min, "max": a.max}, [ctx.output(node)]).name


@lowering("pte", "aten.leaky_relu.default")
def leaky_relu(ctx, node):
    a = bind(node)
    return ctx.call("leaky_relu.out", {"self": a.self, "negative_slope": a.negative_slope}, [ctx.output(node)]).name


@lowering("pte", "aten.silu.default")
def silu(ctx, node):
    """``x * sigmoid(x)``: the portable library has no silu kernel."""
    a = bind(node)
    x = ctx.tensor(a.self)
    s = ctx.call("sigmoid.out", {"self": x}, [ctx.scratch("sigmoid", ctx.view.tensor(a.self.name).shape)])
    return ctx.call("mul.out", {"self": x, "other": s}, [ctx.output(node)]).name


def _relu6_of_x_plus_3(ctx, x, shape):
    """``min(max(x + 3, 0), 6)``, hardswish's and hardsigmoid's common part."""
    shifted = ctx.call("add.Scalar_out", {"self": x, "other": 3}, [ctx.scratch("add", shape)])
    return ctx.call("hardtanh.out", {"self": shifted, "min_val": 0, "max_val": 6}, [ctx.scratch("hardtanh", shape)])


@lowering("pte", "aten.hardsigmoid.default")
def hardsigmoid(ctx, node):
    """``relu6(x + 3) / 6``: the portable library has no hardsigmoid kernel."""
    a = bind(node)
    shape = ctx.view.tensor(a.self.name).shape
    clipped = _relu6_of_x_plus_3(ctx, ctx.tensor(a.self), shape)
    return ctx.call("div.Scalar_out", {"self": clipped, "other": 6}, [ctx.output(node)]).name


@lowering("pte", "aten.hardswish.default")
def hardswish(ctx, node):
    """``x * relu6(x + 3) / 6`` (torch's order of operations): no portable hardswish kernel."""
    a = bind(node)
    x = ctx.tensor(a.self)
    shape = ctx.view.tensor(a.self.name).shape
    clipped = _relu6_of_x_plus_3(ctx, x, shape)
    prod = ctx.call("mul.out", {"self": x, "other": clipped}, [ctx.scratch("mul", shape)])
    return ctx.call("div.Scalar_out", {"self": prod, "other": 6}, [ctx.output(node)]).name


@lowering("pte", "aten.log_softmax.int", "aten._log_softmax.default")
def log_softmax(ctx, node):
    a = bind(node)
    if "half_to_float" in a:
        if a.half_to_float:
            raise Unsupported("_log_softmax with half_to_float=True")
    elif a.dtype is not None:
        a.declare("dtype")
        if ctx.view.tensor(a.self.name).dtype != a.dtype:
            raise Unsupported("log_softmax with a dtype other than its input's")
    return ctx.call("_log_softmax.out", {"self": a.self, "dim": a.dim, "half_to_float": False},
                    [ctx.output(node)]).name


@lowering("pte", "aten.sum.dim_IntList", "aten.sum.default")
def sum_dims(ctx, node):
    """``sum.default`` (every element) is ``sum.IntList_out`` with no dims, as exir emits it. A 0-d
    input's dim (``0`` or ``-1``, torch's one dim of a scalar) is given as no dims: 1.5.1's kernel
    reads the size of that dim and aborts the runtime (a 0-d sum is its input either way)."""
    a = bind(node)
    if a.dtype is not None:
        raise Unsupported("sum with a dtype")
    dim = a.get("dim")
    if ctx.view.tensor(a.self.name).rank == 0:
        dim = None  # torch checks the dims at export: 0 or -1 only
    return ctx.call("sum.IntList_out", {"self": a.self, "dim": dim, "keepdim": a.get("keepdim", False),
                                        "dtype": None}, [ctx.output(node)]).name


@lowering("pte", "aten.relu6.default")
def relu6(ctx, node):
    a = bind(node)
    return ctx.call("hardtanh.out", {"self": a.self, "min_val": 0, "max_val": 6}, [ctx.output(node)]).name
