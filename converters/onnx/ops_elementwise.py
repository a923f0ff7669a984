"""Elementwise lowerings: arithmetic, comparisons, activations, logic, where/masked_fill.

Arithmetic results take the program's output dtype; inputs are cast to it (torch's
promotion already decided it). Comparisons promote their inputs with ``dtypes.result_type``
since only the bool output carries a dtype; their result is cast to the output dtype, which
is ``self``'s for the in-place variants (``eq_``, ``logical_and_``). In-place overloads are
derived by the registry from the out-of-place lowerings here (``registry.get``), so every
lowering produces exactly the node's output dtype.
"""

from __future__ import annotations

import math

import numpy as np

from ..aten import dtypes
from ..aten.args import SymRef, TensorRef, bind
from ..aten.dtypes import ST
from ..aten.registry import lowering
from ..errors import Unsupported


def operand(ctx, x):
    """``x`` for ``dtypes.result_type``: (dtype, rank) for tensors, int64 for SymInts."""
    if isinstance(x, TensorRef):
        return (ctx.dtype(x), ctx.rank(x))
    if isinstance(x, SymRef):
        return {"int": 0, "bool": False, "float": 0.0}[x.kind]
    return x


def nary(ctx, op_type: str, *xs, st: ST | None = None, **attrs) -> str:
    """``op_type`` over inputs cast to the compute type of the output dtype, result in it."""
    out = ctx.out_info().dtype if st is None else st
    cst = ctx.compute_type(out)
    r = ctx.op(op_type, *[ctx.t(x, cst) for x in xs], **attrs)
    return ctx.cast(r, cst, out)


def _add_sub(op_type):
    def lower(ctx, node):
        a = bind(node, "self", "other")
        out = ctx.out_info().dtype
        cst = ctx.compute_type(out)
        other = ctx.t(a.other, cst)
        if a.alpha != 1:
            other = ctx.op("Mul", other, ctx.const(a.alpha, cst))
        if out == ST.BOOL:
            return ctx.op("Or" if op_type == "Add" else "Xor", ctx.t(a.self, ST.BOOL), ctx.t(a.other, ST.BOOL))
        return ctx.cast(ctx.op(op_type, ctx.t(a.self, cst), other), cst, out)

    return lower


lowering("onnx", "aten.add.Tensor", "aten.add.Scalar")(_add_sub("Add"))
lowering("onnx", "aten.sub.Tensor", "aten.sub.Scalar")(_add_sub("Sub"))


@lowering("onnx", "aten.rsub.Tensor", "aten.rsub.Scalar")
def rsub(ctx, node):
    a = bind(node, "self", "other")
    out = ctx.out_info().dtype
    cst = ctx.compute_type(out)
    x = ctx.t(a.self, cst)
    if a.alpha != 1:
        x = ctx.op("Mul", x, ctx.const(a.alpha, cst))
    return ctx.cast(ctx.op("Sub", ctx.t(a.other, cst), x), cst, out)


@lowering("onnx", "aten.mul.Tensor", "aten.mul.Scalar")
def mul(ctx, node):
    a = bind(node, "self", "other")
    if ctx.out_info().dtype == ST.BOOL:
        return ctx.op("And", ctx.t(a.self, ST.BOOL), ctx.t(a.other, ST.BOOL))
    return nary(ctx, "Mul", a.self, a.other)


@lowering("onnx", "aten.div.Tensor", "aten.div.Scalar", "aten.div.Tensor_mode", "aten.div.Scalar_mode", "aten.true_divide.Tensor")
def div(ctx, node):
    a = bind(node, "self", "other", rounding_mode=None)  # the overloads without a rounding_mode
    out = ctx.out_info().dtype
    if a.rounding_mode is None or dtypes.is_floating(out):
        cst = ctx.compute_type(out)
        r = ctx.op("Div", ctx.t(a.self, cst), ctx.t(a.other, cst))
        if a.rounding_mode == "trunc":
            r = _trunc(ctx, r)
        elif a.rounding_mode == "floor":
            r = ctx.op("Floor", r)
        return ctx.cast(r, cst, out)
    # integer division with a rounding mode: compute exactly in float64 then round
    x, y = ctx.t(a.self, ST.DOUBLE), ctx.t(a.other, ST.DOUBLE)
    r = ctx.op("Div", x, y)
    r = ctx.op("Floor", r) if a.rounding_mode == "floor" else _trunc(ctx, r)
    return ctx.cast(r, ST.DOUBLE, out)


def _trunc(ctx, x):
    return ctx.op("Mul", ctx.op("Floor", ctx.op("Abs", x)), ctx.op("Sign", x))


@lowering("onnx", "aten.floor_divide.default", "aten.floor_divide.Scalar")
def floor_divide(ctx, node):
    a = bind(node, "self", "other")
    out = ctx.out_info().dtype
    if dtypes.is_floating(out):
        cst = ctx.compute_type(out)
        return ctx.cast(ctx.op("Floor", ctx.op("Div", ctx.t(a.self, cst), ctx.t(a.other, cst))), cst, out)
    x, y = ctx.t(a.self, ST.LONG), ctx.t(a.other, ST.LONG)
    q = ctx.op("Div", ctx.op("Sub", x, ctx.op("Mod", x, y)), y)
    return ctx.cast(q, ST.LONG, out)


@lowering("onnx", "aten.remainder.Tensor", "aten.remainder.Scalar")
def remainder(ctx, node):
    a = bind(node, "self", "other")
    out = ctx.out_info().dtype
    if dtypes.is_floating(out):  # x - floor(x / y) * y, Python's sign rule
        cst = ctx.compute_type(out)
        x, y = ctx.t(a.self, cst), ctx.t(a.other, cst)
        r = ctx.op("Sub", x, ctx.op("Mul", ctx.op("Floor", ctx.op("Div", x, y)), y))
        return ctx.cast(r, cst, out)
    return nary(ctx, "Mod", a.self, a.other)


@lowering("onnx", "aten.fmod.Tensor", "aten.fmod.Scalar")
def fmod(ctx, node):
    a = bind(node, "self", "other")
    return nary(ctx, "Mod", a.self, a.other, fmod=1)


@lowering("onnx", "aten.pow.Tensor_Tensor", "aten.pow.Tensor_Scalar", "aten.pow.Scalar")
def pow_(ctx, node):
    a = bind(node, "self", "exponent")
    out = ctx.out_info().dtype
    cst = ctx.compute_type(out)
    if a.exponent == 2 and isinstance(a.self, TensorRef):
        x = ctx.t(a.self, cst)
        return ctx.cast(ctx.op("Mul", x, x), cst, out)
    if a.exponent == 0.5:
        return ctx.cast(ctx.op("Sqrt", ctx.t(a.self, cst)), cst, out)
    return nary(ctx, "Pow", a.self, a.exponent)


def _unary(op_type, **attrs):
    def lower(ctx, node):
        x = bind(node, "self")[0]
        if op_type in ("Floor", "Ceil", "Round") and not dtypes.is_floating(ctx.dtype(x)):
            return ctx.op("Identity", ctx.t(x))  # torch rounds an integer to itself; ONNX's take floats only
        if op_type == "Sign" and ctx.dtype(x) == ST.BOOL:
            return ctx.op("Identity", ctx.t(x))  # the sign of a boolean is itself; ONNX's Sign takes numbers
        if op_type == "Relu" and not dtypes.is_floating(ctx.dtype(x)):
            return nary(ctx, "Max", x, 0)  # ONNX Runtime has no integer Relu
        return nary(ctx, op_type, x, **attrs)

    lower.__name__ = op_type.lower()
    return lower


for _names, _op in [
    (("aten.neg.default",), "Neg"), (("aten.abs.default",), "Abs"), (("aten.exp.default",), "Exp"),
    (("aten.log.default",), "Log"), (("aten.sqrt.default",), "Sqrt"), (("aten.sin.default",), "Sin"),
    (("aten.cos.default",), "Cos"), (("aten.tan.default",), "Tan"), (("aten.tanh.default",), "Tanh"),
    (("aten.sigmoid.default",), "Sigmoid"), (("aten.relu.default",), "Relu"),
    (("aten.erf.default",), "Erf"), (("aten.reciprocal.default",), "Reciprocal"),
    (("aten.sign.default", "aten.sgn.default"), "Sign"), (("aten.floor.default",), "Floor"),
    (("aten.ceil.default",), "Ceil"), (("aten.round.default",), "Round"), (("aten.asin.default",), "Asin"),
    (("aten.acos.default",), "Acos"), (("aten.atan.default",), "Atan"), (("aten.sinh.default",), "Sinh"),
    (("aten.cosh.default",), "Cosh"), (("aten.asinh.default",), "Asinh"), (("aten.acosh.default",), "Acosh"),
    (("aten.atanh.default",), "Atanh"), (("aten.hardswish.default",), "HardSwish"),
    (("aten.mish.default",), "Mish"),
]:
    lowering("onnx", *_names)(_unary(_op))


@lowering("onnx", "aten.softplus.default")
def softplus(ctx, node):
    """torch's softplus: log(1 + exp(beta x)) / beta, and x itself where beta x > threshold
    (ONNX's Softplus is the beta = 1 curve with no threshold)."""
    a = bind(node, "self", "beta", "threshold")
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (a.beta, a.threshold)):
        raise Unsupported("softplus with a beta or threshold computed at run time")
    beta, threshold = float(a.beta), float(a.threshold)
    if beta == 0:
        raise Unsupported("softplus with beta=0 (torch divides by it)")
    out = ctx.out_info().dtype
    cst = ctx.compute_type(out)
    x = ctx.t(a.self, cst)
    bx = x if beta == 1 else ctx.op("Mul", x, ctx.const(beta, cst))
    curve = ctx.op("Softplus", bx)
    if beta != 1:
        curve = ctx.op("Div", curve, ctx.const(beta, cst))
    r = ctx.op("Where", ctx.op("Greater", bx, ctx.const(threshold, cst)), x, curve)
    return ctx.cast(r, cst, out)


@lowering("onnx", "aten.hardsigmoid.default")
def hardsigmoid(ctx, node):
    return nary(ctx, "HardSigmoid", bind(node, "self")[0], alpha=1.0 / 6, beta=0.5)


@lowering("onnx", "aten.rsqrt.default")
def rsqrt(ctx, node):
    out = ctx.out_info().dtype
    cst = ctx.compute_type(out)
    return ctx.cast(ctx.op("Reciprocal", ctx.op("Sqrt", ctx.t(bind(node, "self")[0], cst))), cst, out)


@lowering("onnx", "aten.log1p.default")
def log1p(ctx, node):
    out = ctx.out_info().dtype
    cst = ctx.compute_type(out)
    x = ctx.t(bind(node, "self")[0], cst)
    return ctx.cast(ctx.op("Log", ctx.op("Add", x, ctx.const(1, cst))), cst, out)


@lowering("onnx", "aten.expm1.default")
def expm1(ctx, node):
    out = ctx.out_info().dtype
    cst = ctx.compute_type(out)
    x = ctx.t(bind(node, "self")[0], cst)
    return ctx.cast(ctx.op("Sub", ctx.op("Exp", x), ctx.const(1, cst)), cst, out)


@lowering("onnx", "aten.log2.default", "aten.log10.default")
def log_base(ctx, node):
    out = ctx.out_info().dtype
    cst = ctx.compute_type(out)
    base = 2.0 if "log2" in node.target else 10.0
    x = ctx.op("Log", ctx.t(bind(node, "self")[0], cst))
    return ctx.cast(ctx.op("Div", x, ctx.const(math.log(base), cst)), cst, out)


@lowering("onnx", "aten.trunc.default")
def trunc(ctx, node):
    out = ctx.out_info().dtype
    x = bind(node, "self")[0]
    if not dtypes.is_floating(ctx.dtype(x)):
        return ctx.op("Identity", ctx.t(x))  # an integer truncates to itself
    cst = ctx.compute_type(out)
    return ctx.cast(_trunc(ctx, ctx.t(x, cst)), cst, out)


@lowering("onnx", "aten.silu.default")
def silu(ctx, node):
    out = ctx.out_info().dtype
    cst = ctx.compute_type(out)
    x = ctx.t(bind(node, "self")[0], cst)
    return ctx.cast(ctx.op("Mul", x, ctx.op("Sigmoid", x)), cst, out)


@lowering("onnx", "aten.gelu.default")
def gelu(ctx, node):
    a = bind(node, "self")
    out = ctx.out_info().dtype
    cst = ctx.compute_type(out)
    x = ctx.t(a.self, cst)
    if ctx.opset >= 20:
        return ctx.cast(ctx.op("Gelu", x, approximate=a.approximate), cst, out)
    c = lambda v: ctx.const(v, cst)  # noqa: E731
    if a.approximate == "tanh":  # 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
        inner = ctx.op("Mul", c(math.sqrt(2 / math.pi)),
                       ctx.op("Add", x, ctx.op("Mul", c(0.044715), ctx.op("Mul", x, ctx.op("Mul", x, x)))))
        r = ctx.op("Mul", ctx.op("Mul", c(0.5), x), ctx.op("Add", c(1.0), ctx.op("Tanh", inner)))
    else:
        r = ctx.op("Mul", ctx.op("Mul", c(0.5), x),
                   ctx.op("Add", c(1.0), ctx.op("Erf", ctx.op("Mul", x, c(1 / math.sqrt(2))))))
    return ctx.cast(r, cst, out)


@lowering("onnx", "aten.leaky_relu.default")
def leaky_relu(ctx, node):
    a = bind(node, "self")
    return nary(ctx, "LeakyRelu", a.self, alpha=float(a.negative_slope))


@lowering("onnx", "aten.elu.default")
def elu(ctx, node):
    """``scale * (x if x > 0 else alpha * (exp(input_scale * x) - 1))`` (selu and celu decompose
    into it)."""
    a = bind(node, "self")
    if a.scale == 1 and a.input_scale == 1:
        return nary(ctx, "Elu", a.self, alpha=float(a.alpha))
    out = ctx.out_info().dtype
    cst = ctx.compute_type(out)
    x = ctx.t(a.self, cst)
    c = lambda v: ctx.t(v, cst)  # noqa: E731
    neg = ctx.op("Mul", c(a.alpha), ctx.op("Sub", ctx.op("Exp", ctx.op("Mul", x, c(a.input_scale))), c(1)))
    r = ctx.op("Mul", c(a.scale), ctx.op("Where", ctx.op("Greater", x, c(0)), x, neg))
    return ctx.cast(r, cst, out)


@lowering("onnx", "aten.hardtanh.default", "aten.relu6.default")
def hardtanh(ctx, node):
    a = bind(node, "self")  # relu6 has no min_val/max_val (read only for hardtanh)
    if "relu6" in node.target:
        lo, hi = 0.0, 6.0
    else:
        lo, hi = a.min_val, a.max_val
    out = ctx.out_info().dtype
    cst = ctx.compute_type(out)
    return ctx.cast(ctx.op("Clip", ctx.t(a.self, cst), ctx.const(lo, cst), ctx.const(hi, cst)), cst, out)


@lowering("onnx", "aten.clamp.default", "aten.clamp.Tensor", "aten.clamp_min.default", "aten.clamp_max.default",
          "aten.clamp_min.Tensor", "aten.clamp_max.Tensor")
def clamp(ctx, node):
    a = bind(node, "self", min=None, max=None)  # clamp_max has no min, clamp_min no max
    lo, hi = a.min, a.max
    if "clamp_max" in node.target:
        lo, hi = None, a.get("max")
    out = ctx.out_info().dtype
    cst = ctx.compute_type(out)
    if cst == ST.BOOL and (isinstance(lo, TensorRef) or isinstance(hi, TensorRef)):
        cst = ST.INT  # ONNX's Max/Min take no bool: or/and of 0 and 1
    x = ctx.t(a.self, cst)
    if isinstance(lo, TensorRef) or isinstance(hi, TensorRef):
        if lo is not None:
            x = ctx.op("Max", x, ctx.t(lo, cst))
        if hi is not None:
            x = ctx.op("Min", x, ctx.t(hi, cst))
        return ctx.cast(x, cst, out)
    if cst == ST.BOOL:
        raise Unsupported("clamp on bool")
    r = ctx.op("Clip", x, None if lo is None else ctx.t(lo, cst), None if hi is None else ctx.t(hi, cst))
    return ctx.cast(r, cst, out)


@lowering("onnx", "aten.maximum.default", "aten.minimum.default", "aten.fmax.default", "aten.fmin.default",
          "aten.max.other", "aten.min.other")
def maximum(ctx, node):
    a = bind(node, "self", "other")
    is_max = "max" in node.target.split(".")[-2]
    if ctx.out_info().dtype == ST.BOOL:  # ONNX's Max/Min take no bool: the max of booleans is or, the min and
        return ctx.op("Or" if is_max else "And", ctx.t(a.self, ST.BOOL), ctx.t(a.other, ST.BOOL))
    return nary(ctx, "Max" if is_max else "Min", a.self, a.other)


@lowering("onnx", "aten.atan2.default")
def atan2(ctx, node):
    a = bind(node, "self", "other")
    out = ctx.out_info().dtype
    cst = ctx.compute_type(out)
    y, x = ctx.t(a.self, cst), ctx.t(a.other, cst)
    at = ctx.op("Atan", ctx.op("Div", y, x))
    pi = ctx.const(math.pi, cst)
    zero = ctx.const(0, cst)
    # x < 0: add pi*sign(y) (sign(0) taken as +1)
    sy = ctx.op("Where", ctx.op("Less", y, zero), ctx.op("Neg", pi), pi)
    r = ctx.op("Where", ctx.op("Less", x, zero), ctx.op("Add", at, sy), at)
    # y = x = 0: 0/0 is NaN, torch's atan2 gives 0
    origin = ctx.op("And", ctx.op("Equal", y, zero), ctx.op("Equal", x, zero))
    return ctx.cast(ctx.op("Where", origin, zero, r), cst, out)


# ------------------------------------------------------------------- compare / logic

_CMP = {"eq": "Equal", "ne": "Equal", "lt": "Less", "le": "LessOrEqual", "gt": "Greater", "ge": "GreaterOrEqual"}


def _compare(ctx, node):
    a = bind(node, "self", "other")
    op = node.target.split(".")[-2] if node.target.startswith("torch.") else node.target.split(".")[1]
    st = dtypes.result_type(operand(ctx, a.self), operand(ctx, a.other))
    cst = ctx.compute_type(st)
    if cst == ST.BOOL and op not in ("eq", "ne"):
        cst = ST.INT
    r = ctx.op(_CMP[op], ctx.t(a.self, cst), ctx.t(a.other, cst))
    r = ctx.op("Not", r) if op == "ne" else r
    return ctx.cast(r, ST.BOOL, ctx.out_info().dtype)  # bool, or self's dtype in place (eq_)


for _op in _CMP:
    lowering("onnx", f"aten.{_op}.Tensor", f"aten.{_op}.Scalar")(_compare)


@lowering("onnx", "aten.logical_not.default", "aten.bitwise_not.default")
def logical_not(ctx, node):
    x = bind(node, "self")[0]
    if "bitwise" in node.target and ctx.dtype(x) != ST.BOOL:
        return ctx.op("BitwiseNot", ctx.t(x))
    return ctx.cast(ctx.op("Not", ctx.t(x, ST.BOOL)), ST.BOOL, ctx.out_info().dtype)


def _logic(op_type, bitwise):
    def lower(ctx, node):
        a = bind(node, "self", "other")
        out = ctx.out_info().dtype
        if out == ST.BOOL or "logical" in node.target:  # logical_and_ on floats: 0/1 in self's dtype
            return ctx.cast(ctx.op(op_type, ctx.t(a.self, ST.BOOL), ctx.t(a.other, ST.BOOL)), ST.BOOL, out)
        return ctx.op(bitwise, ctx.t(a.self, out), ctx.t(a.other, out))

    return lower


for _name, _op, _bit in [("and", "And", "BitwiseAnd"), ("or", "Or", "BitwiseOr"), ("xor", "Xor", "BitwiseXor")]:
    lowering("onnx", f"aten.logical_{_name}.default", f"aten.bitwise_{_name}.Tensor",
             f"aten.bitwise_{_name}.Scalar", f"aten.__{_name}__.Tensor", f"aten.__{_name}__.Scalar")(_logic(_op, _bit))


@lowering("onnx", "aten.isnan.default")
def isnan(ctx, node):
    x = bind(node, "self")[0]
    if not dtypes.is_floating(ctx.dtype(x)):
        return _all_false(ctx, x)
    return ctx.op("IsNaN", ctx.t(x, ctx.compute_type(ctx.dtype(x))))


def _all_false(ctx, x):
    """False in every place of ``x`` (an integer or boolean has no NaN or infinity)."""
    xi = ctx.t(x, ST.INT)
    return ctx.op("Not", ctx.op("Equal", xi, xi))


@lowering("onnx", "aten.isinf.default")
def isinf(ctx, node):
    x = bind(node, "self")[0]
    if not dtypes.is_floating(ctx.dtype(x)):
        return _all_false(ctx, x)
    return ctx.op("IsInf", ctx.t(x, ctx.compute_type(ctx.dtype(x))))


@lowering("onnx", "aten.where.self", "aten.where.ScalarSelf", "aten.where.ScalarOther", "aten.where.Scalar")
def where(ctx, node):
    a = bind(node, "condition", "self", "other")
    out = ctx.out_info().dtype
    cst = ctx.compute_type(out) if out != ST.BOOL else ST.INT  # ONNX Runtime has no Where for bool values
    r = ctx.op("Where", ctx.t(a.condition, ST.BOOL), ctx.t(a.self, cst), ctx.t(a.other, cst))
    return ctx.cast(r, cst, out)


@lowering("onnx", "aten.masked_fill.Scalar", "aten.masked_fill.Tensor")
def masked_fill(ctx, node):
    a = bind(node, "self", "mask", "value")
    out = ctx.out_info().dtype
    cst = ctx.compute_type(out) if out != ST.BOOL else ST.INT  # ONNX Runtime has no Where for bool values
    r = ctx.op("Where", ctx.t(a.mask, ST.BOOL), ctx.t(a.value, cst), ctx.t(a.self, cst))
    return ctx.cast(r, cst, out)


@lowering("onnx", "aten.lerp.Scalar", "aten.lerp.Tensor")
def lerp(ctx, node):
    a = bind(node, "self", "end", "weight")
    out = ctx.out_info().dtype
    cst = ctx.compute_type(out)
    x, e = ctx.t(a.self, cst), ctx.t(a.end, cst)
    r = ctx.op("Add", x, ctx.op("Mul", ctx.t(a.weight, cst), ctx.op("Sub", e, x)))
    return ctx.cast(r, cst, out)


@lowering("onnx", "aten.addcmul.default", "aten.addcdiv.default")
def addcmul(ctx, node):
    a = bind(node, "self", "tensor1", "tensor2")
    out = ctx.out_info().dtype
    cst = ctx.compute_type(out)
    p = ctx.op("Mul" if "addcmul" in node.target else "Div", ctx.t(a.tensor1, cst), ctx.t(a.tensor2, cst))
    if a.value != 1:
        p = ctx.op("Mul", p, ctx.const(a.value, cst))
    return ctx.cast(ctx.op("Add", ctx.t(a.self, cst), p), cst, out)


@lowering("onnx", "aten.nan_to_num.default")
def nan_to_num(ctx, node):
    a = bind(node, "self")
    out = ctx.out_info().dtype
    if not dtypes.is_floating(out):  # integers and booleans hold no NaN or infinity
        a.declare("nan", "posinf", "neginf")  # replacements for values an integer cannot hold
        return ctx.op("Identity", ctx.t(a.self))
    cst = ctx.compute_type(out)
    x = ctx.t(a.self, cst)
    fi = np.finfo(dtypes.to_numpy(out)) if out != ST.BFLOAT16 else None
    big = float(fi.max) if fi is not None else 3.3895313892515355e38
    x = ctx.op("Where", ctx.op("IsNaN", x), ctx.const(a.nan or 0.0, cst), x)
    x = ctx.op("Where", ctx.op("IsInf", x, detect_negative=0), ctx.const(big if a.posinf is None else a.posinf, cst), x)
    x = ctx.op("Where", ctx.op("IsInf", x, detect_positive=0), ctx.const(-big if a.neginf is None else a.neginf, cst), x)
    return ctx.cast(x, cst, out)


@lowering("onnx", "aten.frac.default")
def frac(ctx, node):
    out = ctx.out_info().dtype
    cst = ctx.compute_type(out)
    x = ctx.t(bind(node, "self")[0], cst)
    return ctx.cast(ctx.op("Sub", x, _trunc(ctx, x)), cst, out)


@lowering("onnx", "aten.hypot.default")
def hypot(ctx, node):
    a = bind(node, "self", "other")
    out = ctx.out_info().dtype
    cst = ctx.compute_type(out)
    x, y = ctx.t(a.self, cst), ctx.t(a.other, cst)
    return ctx.cast(ctx.op("Sqrt", ctx.op("Add", ctx.op("Mul", x, x), ctx.op("Mul", y, y))), cst, out)


@lowering("onnx", "aten.log_sigmoid.default", "aten.log_sigmoid_forward.default")
def log_sigmoid(ctx, node):
    """-softplus(-x), stable for large |x|."""
    out = ctx.out_info().dtype
    cst = ctx.compute_type(out)
    x = ctx.t(bind(node, "self")[0], cst)
    r = ctx.cast(ctx.op("Neg", ctx.op("Softplus", ctx.op("Neg", x))), cst, out)
    return [r, None] if "forward" in node.target else r


@lowering("onnx", "aten.special_expit.default")
def expit(ctx, node):
    return nary(ctx, "Sigmoid", bind(node, "self")[0])
