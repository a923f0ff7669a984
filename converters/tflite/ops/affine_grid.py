"""AffineGrid (2-D: theta [N, 2, 3], size (N, C, H, W); 3-D: theta [N, 3, 4], size (N, C, D, H, W))
with a constant size: the normalised base grid [1, H*W, 3] (x, y, 1) -- pixel centres
(2i + 1) / W - 1, or with ``align_corners`` -1 + 2i / (W - 1) -- is a constant, and the grid
is one BATCH_MATMUL with theta transposed, reshaped to [N, H, W, 2]."""

from __future__ import annotations

import numpy as np

from ...errors import Unsupported
from ..core.emit import Emitter, attrs
from ..core.mappers import maps
from ..core.model import TensorType as T


def _coords(n: int, align: bool) -> np.ndarray:
    i = np.arange(n, dtype=np.float64)
    if align:
        return -1 + 2 * i / (n - 1) if n > 1 else np.zeros(1)
    return (2 * i + 1) / n - 1


@maps("AffineGrid")
def affine_grid(em: Emitter, node) -> None:
    size = em.const_value(node.input[1])
    if size is None:
        raise Unsupported("AffineGrid with a size computed at run time")
    size = [int(v) for v in np.asarray(size).reshape(-1)]
    if len(size) not in (4, 5):
        raise Unsupported("AffineGrid with a size other than (N, C, H, W) or (N, C, D, H, W)")
    align = bool(attrs(node).get("align_corners", 0))
    spatial = size[2:]
    axes = [_coords(n, align) for n in spatial]  # D, H, W order (slowest first)
    mesh = np.meshgrid(*axes, indexing="ij")
    # columns x (W), y (H)[, z (D)], 1
    cols = [m.reshape(-1) for m in reversed(mesh)] + [np.ones(int(np.prod(spatial)))]
    base = np.stack(cols, axis=1)[None].astype(np.float32)  # [1, prod, k + 1]
    theta = em.t(node.input[0])
    if em.dtype_of(theta) != T.FLOAT32:
        raise Unsupported("AffineGrid of a non-float theta")
    grid = em.tmp(T.FLOAT32, [-1, base.shape[1], len(spatial)], "grid")
    em.op("BATCH_MATMUL", [em.const(base), theta], [grid], ("BatchMatMulOptions", {"adj_x": False, "adj_y": True}))
    em.op("RESHAPE", [grid, em.const(np.asarray([-1, *spatial, len(spatial)], np.int32))], [em.out()])
