"""``torchvision::nms`` in plain torch, defined before torchvision (or transformers) imports.

torchvision from the registry is a CUDA build: next to the CPU torch its C++ ops do not
register and ``import torchvision`` fails ("operator torchvision::nms does not exist"), and
transformers imports torchvision whenever it is installed. ``register_torchvision_ops()``
defines ``nms`` (CPU) and declares ``qnms`` first; torchvision's own fake kernels then
register. Only detection models call them. Used by tests/conftest.py, the model zoo and the
benchmark scripts that build transformers models.
"""

from __future__ import annotations

import sys

import torch

_TV_LIB = None


def _nms(dets: torch.Tensor, scores: torch.Tensor, iou_threshold: float) -> torch.Tensor:
    """Greedy NMS in plain torch (torchvision's semantics: indices by descending score)."""
    order = scores.argsort(descending=True)
    boxes = dets[order]
    area = (boxes[:, 2] - boxes[:, 0]).clamp(min=0) * (boxes[:, 3] - boxes[:, 1]).clamp(min=0)
    keep, alive = [], torch.ones(len(order), dtype=torch.bool)
    for i in range(len(order)):
        if not alive[i]:
            continue
        keep.append(int(order[i]))
        lt = torch.maximum(boxes[i, :2], boxes[:, :2])
        rb = torch.minimum(boxes[i, 2:], boxes[:, 2:])
        inter = (rb - lt).clamp(min=0).prod(dim=1)
        iou = inter / (area[i] + area - inter)
        alive &= iou <= iou_threshold
    return torch.tensor(keep, dtype=torch.int64)


def register_torchvision_ops() -> None:
    """Define ``torchvision::nms``/``qnms`` unless torchvision is imported or already has them."""
    global _TV_LIB
    if _TV_LIB is not None or "torchvision" in sys.modules:
        return
    try:
        torch.ops.torchvision.nms.default  # a working torchvision build registered it already
        return
    except (AttributeError, RuntimeError):
        pass
    _TV_LIB = torch.library.Library("torchvision", "DEF")
    _TV_LIB.define("nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
    _TV_LIB.impl("nms", _nms, "CPU")
    _TV_LIB.define("qnms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
