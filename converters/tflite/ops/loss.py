"""NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss (inputs [N, C] or [N, C, d1, ...]).

The picked log-probability ``input[n, target[n, d], d]`` is a selection, not a gather: EQUAL of
the target against the class indices (a constant [1, C, 1, ...]) marks one class per position,
SELECT_V2 keeps its value (zeros elsewhere, so an inf or NaN of another class never leaks) and a
SUM over the class axis returns it exactly; the class weight is picked the same way. A target
equal to ``ignore_index`` (in range or not) contributes loss 0 and weight 0. ``reduction``:
none, sum, or mean = sum(loss) / sum(picked weights) (MEAN when no weight and no ignore_index).
SoftmaxCrossEntropyLoss is the same loss on LOG_SOFTMAX over the class axis, its optional
second output.
"""

from __future__ import annotations

import numpy as np

from ...errors import Unsupported
from ..core.emit import Emitter, attrs
from ..core.mappers import maps
from ..core.model import TensorType as T
from .reduce import _reduce
from .shape import _slice1d, shape_tensor

_REDUCTIONS = ("none", "sum", "mean")


def _reduction(node) -> str:
    r = attrs(node).get("reduction", b"mean")
    r = r.decode() if isinstance(r, bytes) else r
    if r not in _REDUCTIONS:
        raise Unsupported(f"{node.op_type} with reduction={r!r}")
    return r


def _picked(em: Emitter, hit: int, values: int) -> int:
    """SUM over axis 1 of ``values`` where ``hit``, else 0."""
    kept = em.tmp(T.FLOAT32, None, "kept")
    em.op("SELECT_V2", [hit, values, em.const(np.float32(0))], [kept])
    out = em.tmp(T.FLOAT32, None, "picked")
    _reduce(em, "SUM", kept, [1], False, out)
    return out


def _nll(em: Emitter, node, log_prob: int, rank: int, classes: int) -> None:
    """The loss of ``log_prob`` [N, C, ...] against ``node.input[1]``, weights ``node.input[2]``."""
    a = attrs(node)
    reduction = _reduction(node)
    target = em.cast(em.t(node.input[1]), T.INT32)
    target_shape = None
    if rank > 3:  # [N, C, d1 * ... * dk]: XNNPACK takes at most 6 dims
        target_shape = shape_tensor(em, target)
        log_prob = _reshaped(em, log_prob, [0, classes, -1])
        target = _reshaped(em, target, [0, -1])
        rank = 3
    along = [1] * rank
    along[1] = classes
    class_ids = em.const(np.arange(classes, dtype=np.int32).reshape(along))
    t1 = em.tmp(T.INT32, None, "target")
    em.op("EXPAND_DIMS", [target, em.const(np.array(1, np.int32))], [t1])
    hit = em.binary("EQUAL", t1, class_ids, dtype=T.BOOL)
    loss = em.unary("NEG", _picked(em, hit, log_prob))
    weight = None
    if len(node.input) > 2 and node.input[2]:
        w = em.tmp(T.FLOAT32, along, "weight")
        em.op("RESHAPE", [em.t(node.input[2]), em.const(np.asarray(along, np.int32))], [w])
        weight = _picked(em, hit, w)
        loss = em.binary("MUL", loss, weight)
    if "ignore_index" in a:
        valid = em.binary("NOT_EQUAL", target, em.const(np.array(int(a["ignore_index"]), np.int32)), dtype=T.BOOL)
        zero = em.const(np.float32(0))
        masked = em.tmp(T.FLOAT32, None, "loss")
        em.op("SELECT_V2", [valid, loss, zero], [masked])
        loss = masked
        ones = weight if weight is not None else em.const(np.float32(1))
        w_valid = em.tmp(T.FLOAT32, None, "weight")
        em.op("SELECT_V2", [valid, ones, zero], [w_valid])
        weight = w_valid
    _finish(em, node, loss, weight, rank - 1, reduction, target_shape)


def _reshaped(em: Emitter, x: int, dims: list[int]) -> int:
    """x reshaped to ``dims``, whose 0 is x's (run-time) first dim."""
    first = _slice1d(em, shape_tensor(em, x), 0, 1)
    target = em.tmp(T.INT32, [len(dims)], "shape")
    em.op("CONCATENATION", [first, em.const(np.asarray(dims[1:], np.int32))], [target],
          ("ConcatenationOptions", {"axis": 0}))
    y = em.tmp(em.dtype_of(x), None, "flat")
    em.op("RESHAPE", [x, target], [y])
    return y


def _finish(em: Emitter, node, loss: int, weight: int | None, rank: int, reduction: str,
            shape: int | None) -> None:
    if reduction == "none":
        if shape is None:
            em.bind(node.output[0], loss)
        else:
            em.op("RESHAPE", [loss, shape], [em.out()])
        return
    every = list(range(rank))
    if reduction == "sum" or weight is None:
        _reduce(em, "SUM" if reduction == "sum" else "MEAN", loss, every, False, em.out())
        return
    total = em.tmp(T.FLOAT32, [], "total")
    _reduce(em, "SUM", loss, every, False, total)
    norm = em.tmp(T.FLOAT32, [], "norm")
    _reduce(em, "SUM", weight, every, False, norm)
    em.op("DIV", [total, norm], [em.out()])


def _classes(em: Emitter, node) -> tuple[int, int]:
    shape = em.shape(node.input[0])
    if shape is None or len(shape) < 2:
        raise Unsupported(f"{node.op_type} of a value of unknown rank or rank below 2")
    if shape[1] < 0:
        raise Unsupported(f"{node.op_type} with a class count known only at run time")
    if em.dtype_of(em.t(node.input[0])) != T.FLOAT32:
        raise Unsupported(f"{node.op_type} of a non-float input")
    return len(shape), shape[1]


@maps("NegativeLogLikelihoodLoss")
def nll_loss(em: Emitter, node) -> None:
    rank, classes = _classes(em, node)
    _nll(em, node, em.t(node.input[0]), rank, classes)


@maps("SoftmaxCrossEntropyLoss")
def softmax_cross_entropy(em: Emitter, node) -> None:
    rank, classes = _classes(em, node)
    x = em.t(node.input[0])
    perm = list(range(rank))
    perm[1], perm[-1] = perm[-1], perm[1]
    if rank > 2:
        x = _permute(em, x, perm)
    log_prob = em.unary("LOG_SOFTMAX", x)
    if rank > 2:
        log_prob = _permute(em, log_prob, perm)
    if len(node.output) > 1 and node.output[1]:
        em.bind(node.output[1], log_prob)
    _nll(em, node, log_prob, rank, classes)


def _permute(em: Emitter, x: int, perm: list[int]) -> int:
    y = em.tmp(em.dtype_of(x), None, "t")
    em.op("TRANSPOSE", [x, em.const(np.asarray(perm, np.int32))], [y])
    return y
