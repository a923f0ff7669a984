"""DepthToSpace and SpaceToDepth (torch's pixel_shuffle / pixel_unshuffle) as RESHAPE ->
6-D TRANSPOSE -> RESHAPE on the channels-first value, with run-time N, H, W. (TFLite's
DEPTH_TO_SPACE is NHWC and DCR-ordered only; the reshapes are exact for both ONNX modes.)"""

from __future__ import annotations

import numpy as np

from ...errors import Unsupported
from ..core.emit import Emitter, attrs
from ..core.mappers import maps
from ..core.model import TensorType as T
from .shape import _slice1d, shape_tensor



def _concat(em: Emitter, pieces: list[int]) -> int:
    out = em.tmp(T.INT32, [6 if len(pieces) > 4 else 4], "shape")
    em.op("CONCATENATION", pieces, [out], ("ConcatenationOptions", {"axis": 0}))
    return out


def _c(v) -> int:
    return np.asarray(v, np.int32)


def _blocks(em: Emitter, node):
    a = attrs(node)
    b = int(a["blocksize"])
    if em.rank(node.input[0]) != 4:
        raise Unsupported(f"{node.op_type} of a value that is not 4-D")
    c = em.shape(node.input[0])[1]
    if c < 0:
        raise Unsupported(f"{node.op_type} with a dynamic channel count")
    mode = a.get("mode", b"DCR")
    return b, c, mode.decode() if isinstance(mode, bytes) else mode


@maps("DepthToSpace")
def depth_to_space(em: Emitter, node) -> None:
    b, c, mode = _blocks(em, node)
    x = em.t(node.input[0])
    s = shape_tensor(em, x)
    n, h, w = _slice1d(em, s, 0, 1), _slice1d(em, s, 2, 3), _slice1d(em, s, 3, 4)
    cc = c // (b * b)
    if mode == "DCR":
        split, perm = em.const(_c([b, b, cc])), [0, 3, 4, 1, 5, 2]
    else:
        split, perm = em.const(_c([cc, b, b])), [0, 1, 4, 2, 5, 3]
    x6 = em.tmp(em.dtype_of(x), None, "blocks")
    em.op("RESHAPE", [x, _concat(em, [n, split, h, w])], [x6])
    t = em.tmp(em.dtype_of(x), None, "moved")
    em.op("TRANSPOSE", [x6, em.const(_c(perm))], [t])
    hb = em.binary("MUL", h, em.const(_c([b])))
    wb = em.binary("MUL", w, em.const(_c([b])))
    em.op("RESHAPE", [t, _concat(em, [n, em.const(_c([cc])), hb, wb])], [em.out()])


@maps("SpaceToDepth")
def space_to_depth(em: Emitter, node) -> None:
    b, c, _mode = _blocks(em, node)
    x = em.t(node.input[0])
    s = shape_tensor(em, x)
    n, h, w = _slice1d(em, s, 0, 1), _slice1d(em, s, 2, 3), _slice1d(em, s, 3, 4)
    hb = em.binary("FLOOR_DIV", h, em.const(_c([b])))
    wb = em.binary("FLOOR_DIV", w, em.const(_c([b])))
    x6 = em.tmp(em.dtype_of(x), None, "blocks")
    em.op("RESHAPE", [x, _concat(em, [n, em.const(_c([c])), hb, em.const(_c([b])), wb, em.const(_c([b]))])], [x6])
    t = em.tmp(em.dtype_of(x), None, "moved")
    em.op("TRANSPOSE", [x6, em.const(_c([0, 3, 5, 1, 2, 4]))], [t])
    em.op("RESHAPE", [t, _concat(em, [n, em.const(_c([c * b * b])), hb, wb])], [em.out()])
