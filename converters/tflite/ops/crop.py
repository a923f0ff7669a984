"""CenterCropPad: each listed axis cropped (STRIDED_SLICE) or zero-padded (PAD) to the constant
target length, centred as ONNX defines it: a crop starts at (dim - target) // 2, a pad puts
(target - dim) // 2 in front and the rest behind. The input's dims on those axes must be static
(whether an axis is cropped or padded depends on them)."""

from __future__ import annotations

import numpy as np

from ...errors import Unsupported
from ..core.emit import Emitter, attrs
from ..core.mappers import maps
from .shape import _axis


@maps("CenterCropPad")
def center_crop_pad(em: Emitter, node) -> None:
    shape = em.shape(node.input[0])
    target = em.const_value(node.input[1])
    if target is None or shape is None:
        raise Unsupported("CenterCropPad with a shape computed at run time, or of unknown rank")
    rank = len(shape)
    axes = [_axis(int(v), rank) for v in attrs(node).get("axes", range(rank))]
    target = [int(v) for v in np.asarray(target).reshape(-1)]
    if len(target) != len(axes):
        raise Unsupported("CenterCropPad whose shape has not one entry per axis")
    if any(shape[ax] < 0 for ax in axes):
        raise Unsupported("CenterCropPad over a dim known only at run time")
    begin, end, pads = np.zeros(rank, np.int32), np.zeros(rank, np.int32), np.zeros((rank, 2), np.int32)
    mask = sum(1 << i for i in range(rank) if i not in axes)
    for ax, t in zip(axes, target):
        d = shape[ax]
        if t <= d:
            begin[ax] = (d - t) // 2
            end[ax] = begin[ax] + t
        else:
            end[ax] = d
            pads[ax] = [(t - d) // 2, t - d - (t - d) // 2]
    x = em.t(node.input[0])
    y = em.tmp(em.dtype_of(x), None, "cropped")
    em.op("STRIDED_SLICE", [x, em.const(begin), em.const(end), em.const(np.ones(rank, np.int32))], [y],
          ("StridedSliceOptions", {"begin_mask": mask, "end_mask": mask}))
    if not pads.any():
        em.bind(node.output[0], y)
        return
    em.op("PAD", [y, em.const(pads)], [em.out()])
