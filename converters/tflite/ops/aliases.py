"""ONNX ops that are another op at inference: CastLike (Cast to the second input's type),
Dropout (Identity when not training; its mask all true) and Mean (Sum, then a division by the
number of inputs). Each runs the other op's mapper or builtin, so its semantics stay written once.
"""

from __future__ import annotations

import numpy as np
from onnx import helper

from ...errors import Unsupported
from ..core.emit import Emitter, attrs
from ..core.mappers import MAPPERS, maps
from ..core.model import TensorType as T



def _as(em: Emitter, node, op_type: str, inputs: list[str], **attributes) -> None:
    """Run ``op_type``'s mapper for a node with ``node``'s name and outputs."""
    other = helper.make_node(op_type, inputs, list(node.output), name=node.name, **attributes)
    em.node = other
    try:
        MAPPERS[op_type](em, other)
    finally:
        em.node = node


@maps("CastLike")
def cast_like(em: Emitter, node) -> None:
    keep = attrs(node)
    _as(em, node, "Cast", [node.input[0]], to=em.elem(node.input[1]), **keep)


@maps("Dropout")
def dropout(em: Emitter, node) -> None:
    """Identity unless ``training_mode`` is given and not a constant false, with a ratio that
    is not a constant 0 (then refused: the mask is random)."""
    if len(node.input) > 2 and node.input[2]:
        training = em.const_value(node.input[2])
        ratio = em.const_value(node.input[1]) if len(node.input) > 1 and node.input[1] else np.float32(0.5)
        drops = ratio is None or float(np.asarray(ratio).reshape(-1)[0]) != 0.0
        if (training is None or bool(np.asarray(training).reshape(-1)[0])) and drops:
            raise Unsupported("Dropout in training mode (random; only inference is exact)")
    x = em.t(node.input[0])
    em.bind(node.output[0], x)
    if len(node.output) > 1 and node.output[1]:
        em.op("FILL", [em.unary("SHAPE", x, T.INT32, None, ("ShapeOptions", {"out_type": T.INT32}), "shape"),
                       em.const(np.array(True))], [em.out(1)])


@maps("Mean")
def mean(em: Emitter, node) -> None:
    ins = [em.t(i) for i in node.input if i]
    if em.dtype_of(ins[0]) != T.FLOAT32:
        raise Unsupported("Mean of integers")
    acc = ins[0]
    for x in ins[1:]:
        acc = em.binary("ADD", acc, x)
    em.op("DIV", [acc, em.const(np.float32(len(ins)))], [em.out()])
