"""Elementwise ops, activations and softmax. They keep their input's layout (a 4-D tensor stays
NHWC between convolutions); a binary op takes its operands in one layout (NumPy broadcasting,
which a permutation of two 4-D operands' dims keeps), a constant operand taken in that layout too.

The portable lowerings decompose ``hardswish`` into ``x * hardtanh(x + 3, 0, 6) / 6``: that chain,
each link read only by the next, is XNNPACK's ``Hardswish`` node.
"""

from __future__ import annotations

from ..program import TensorValue
from .builder import NHWC, STD, TO_NHWC, literal
from .constants import weight_blob
from .index import kernel_key
from .fuse import ACTIVATIONS, activation_bounds, fused_activation
from .rules import literal_or_none, number, tensor_problem
from .table import xnn_op

# portable kernel -> XNNPACK node (its table is _XNNNode1x1)
UNARY = {"sigmoid.out": "XNNSigmoid", "tanh.out": "XNNTanh", "abs.out": "XNNAbs", "exp.out": "XNNExp",
         "log.out": "XNNLog", "neg.out": "XNNNegate", "sqrt.out": "XNNSquareRoot",
         "rsqrt.out": "XNNReciprocalSquareRoot", "gelu.out": "XNNGelu"}
BINARY = {"add": "XNNAdd", "sub": "XNNSubtract", "mul": "XNNMultiply", "div": "XNNDiv"}


def _check_unary(ix, c, a):
    if kernel_key(c) == "gelu.out" and literal_or_none(ix, a["approximate"]) != "none":
        return "gelu with approximate other than 'none' (XNNPACK's is the erf form)"
    if kernel_key(c) == "leaky_relu.out" and number(ix, a["negative_slope"]) is None:
        return "leaky_relu with a run-time slope"
    if kernel_key(c) in ACTIVATIONS and activation_bounds(ix, c) is None:
        return "a clamp with run-time or crossed bounds"
    return tensor_problem(a["self"], "the input")


def _same_layout_in(b, x: TensorValue):
    """``x`` in the layout it is held in (a constant or a new input: ``std``)."""
    if b.ix.constant_view(x) is not None and x.storage() not in b.refs:
        return b.tensor(x), STD
    ref = b.ref(x)
    layout = ref.layout if tuple(x.sizes) == ref.sizes else STD
    return b.tensor(x, layout), layout


@xnn_op(*UNARY, *ACTIVATIONS, "leaky_relu.out", check=_check_unary)
def unary(b, c, a):
    xin, layout = _same_layout_in(b, a["self"])
    key = kernel_key(c)
    y = b.define(c.writes[0], layout)
    if key in UNARY:
        b.node(UNARY[key], "_XNNNode1x1", input_id=xin.id, output_id=y.id, flags=0)
    elif key == "leaky_relu.out":
        b.node("XNNLeakyReLU", "XNNLeakyReLU", negative_slope=float(literal(a["negative_slope"])), input_id=xin.id,
               output_id=y.id, flags=0)
    else:
        b.node("XNNClamp", "_XNNNode1x1", input_id=xin.id, output_id=y.id, flags=0).output_min_max = \
            activation_bounds(b.ix, c)


# torch computes these powers by multiplication or a square root (its CPU kernel's special cases)
POWERS = (2.0, 3.0, 0.5)


def _check_pow(ix, c, a):
    if number(ix, a["exponent"]) not in POWERS:
        return f"a power other than {', '.join(map(str, POWERS))} (or a run-time one)"
    if ix.constant_view(a["self"]) is not None:
        return "a power of a constant"
    return tensor_problem(a["self"], "the input")


@xnn_op("pow.Tensor_Scalar_out", check=_check_pow)
def power(b, c, a):
    """``x ** 2`` is ``Square``, ``x ** 3`` ``(x * x) * x``, ``x ** 0.5`` ``SquareRoot``: GPT-2's
    gelu cubes its input, and the portable kernel's ``pow`` is its slowest call."""
    xin, layout = _same_layout_in(b, a["self"])
    e = number(b.ix, a["exponent"])
    y = b.define(c.writes[0], layout)
    if e == 0.5:
        b.node("XNNSquareRoot", "_XNNNode1x1", input_id=xin.id, output_id=y.id, flags=0)
    elif e == 2.0:
        b.node("XNNSquare", "_XNNNode1x1", input_id=xin.id, output_id=y.id, flags=0)
    else:
        sq = b.g.value(xin.dims)
        b.node("XNNSquare", "_XNNNode1x1", input_id=xin.id, output_id=sq.id, flags=0)
        b.node("XNNMultiply", "_XNNNode2x1", input1_id=sq.id, input2_id=xin.id, output_id=y.id, flags=0)


# ------------------------------------------------------------------ binary


def _check_binary(ix, c, a):
    x, y = a["self"], a["other"]
    if "alpha" in a and number(ix, a["alpha"]) != 1:
        return "add/sub with alpha other than 1"
    if not isinstance(y, TensorValue) and number(ix, y) is None:
        return "a run-time scalar operand"
    tensors = [t for t in (x, y) if isinstance(t, TensorValue)]
    if all(ix.constant_view(t) is not None for t in tensors):
        return "an op of constants only"
    return next((p for t in tensors if (p := tensor_problem(t, "an operand"))), None)


def _binary_layout(b, tensors) -> str:
    """NHWC when an operand is held so and every other is 4-D (a constant one: of any rank)."""
    held = [b.ref(t).layout for t in tensors if b.ix.constant_view(t) is None or t.storage() in b.refs]
    if NHWC not in held:
        return STD
    ok = all(len(t.sizes) == 4 or b.ix.constant_view(t) is not None and t.storage() not in b.refs for t in tensors)
    return NHWC if ok else STD


def _operand(b, t, layout, rank):
    """``t`` in ``layout``; a constant of lower rank first padded to ``rank`` with leading 1s."""
    if layout == NHWC and b.ix.constant_view(t) is not None and t.storage() not in b.refs and len(t.sizes) < rank:
        key, arr = b.ix.constant_view(t)
        if not arr.flags.c_contiguous:
            return None
        arr = arr.reshape((1,) * (rank - arr.ndim) + arr.shape).transpose(TO_NHWC)
        return b.constant(weight_blob(f"{key}|rank{rank}|nhwc", arr), arr.shape)
    return b.tensor(t, layout)


def binary(b, c, a, kind: str):
    x, y = a["self"], a["other"]
    tensors = [t for t in (x, y) if isinstance(t, TensorValue)]
    layout = _binary_layout(b, tensors)
    rank = max(len(t.sizes) for t in tensors)
    ins = [(_operand(b, t, layout, rank) if isinstance(t, TensorValue) else b.scalar_constant(literal(t)))
           for t in (x, y)]
    if any(v is None for v in ins):
        layout = STD
        ins = [(b.tensor(t) if isinstance(t, TensorValue) else b.scalar_constant(literal(t))) for t in (x, y)]
    out, bounds = fused_activation(b, c.writes[0])
    v = b.define(out, layout)
    b.node(kind, "_XNNNode2x1", input1_id=ins[0].id, input2_id=ins[1].id, output_id=v.id, flags=0).output_min_max = bounds


def _hardswish_chain(b, c, a):
    """The calls after ``x + 3`` that make it ``x * hardtanh(x + 3, 0, 6) / 6``, or None."""
    ix, x = b.ix, a["self"]
    if kernel_key(c) != "add.Scalar_out" or number(ix, a["other"]) != 3 or number(ix, a["alpha"]) != 1:
        return None
    chain, t = [], c.writes[0]
    for key in ("hardtanh.out", "mul.out", "div.Scalar_out"):
        r = ix.sole_reader(t)
        if not b.in_group(r) or id(r) in b.absorbed or kernel_key(r) != key:
            return None
        ra = ix.args(r)
        if key == "hardtanh.out" and activation_bounds(ix, r) != (0.0, 6.0):
            return None
        if key == "mul.out" and {id(ra["self"]), id(ra["other"])} != {id(x), id(t)}:
            return None
        if key == "div.Scalar_out" and (ra["self"] is not t or number(ix, ra["other"]) != 6):
            return None
        chain.append(r)
        t = r.writes[0]
    return chain


def _binary_op(op: str, scalar: bool):
    def emit(b, c, a):
        if scalar and op == "add":
            chain = _hardswish_chain(b, c, a)
            if chain is not None:
                b.absorbed.update(id(r) for r in chain)
                xin, layout = _same_layout_in(b, a["self"])
                y = b.define(chain[-1].writes[0], layout)
                b.node("XNNHardswish", "_XNNNode1x1", input_id=xin.id, output_id=y.id, flags=0)
                return
        binary(b, c, a, BINARY[op])

    emit.__name__ = op
    return emit


for _op in BINARY:
    xnn_op(f"{_op}.out", check=_check_binary)(_binary_op(_op, False))
    xnn_op(f"{_op}.Scalar_out", check=_check_binary)(_binary_op(_op, True))


# ------------------------------------------------------------------ softmax


def _check_softmax(ix, c, a):
    x, dim = a["self"], literal_or_none(ix, a["dim"])
    if not isinstance(dim, int) or literal_or_none(ix, a["half_to_float"]) is not False:
        return "softmax with a run-time dim or half_to_float"
    rank = len(x.sizes)
    if dim % rank != rank - 1 and not (rank == 4 and dim % 4 == 1):
        return "softmax over a dim that is not the last (or a 4-D tensor's channels)"
    return tensor_problem(x, "the input")


@xnn_op("_softmax.out", check=_check_softmax)
def softmax(b, c, a):
    x, rank = a["self"], len(a["self"].sizes)
    layout = STD if int(literal(a["dim"])) % rank == rank - 1 else NHWC
    xin = b.tensor(x, layout)
    y = b.define(c.writes[0], layout)
    b.node("XNNSoftmax", "_XNNNode1x1", input_id=xin.id, output_id=y.id, flags=0)
