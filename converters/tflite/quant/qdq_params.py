"""The quantization parameters of an ONNX ``QuantizeLinear``/``DequantizeLinear`` node, read when
they are constants, and how LiteRT stores the quantized value they describe.

``QParams``: scale (float32), zero point (int64), the ONNX integer type and, per channel, the
axis. LiteRT's int8 kernels take int8 activations; a uint8 value (ONNX Runtime's QUInt8,
torchao's x86 quantizer) is stored as int8 ``q - 128`` with zero point ``zp - 128``: the same
reals, exactly (``storage_quant``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from onnx import TensorProto

from ..core.emit import Emitter, attrs
from ..core.model import Quantization

__all__ = ["QParams", "read_params", "QUANT_ELEMS", "storage_quant"]

# ONNX type -> (the shift to int8 storage, qmin, qmax of the stored type)
QUANT_ELEMS = {TensorProto.INT8: (0, -128, 127), TensorProto.UINT8: (-128, -128, 127),
               TensorProto.INT32: (0, -2**31, 2**31 - 1)}


@dataclass(frozen=True)
class QParams:
    scale: np.ndarray  # float32, 0-d (per tensor) or 1-D (per channel along ``axis``)
    zero_point: np.ndarray  # int64, the scale's shape
    elem: int  # ONNX integer type (QUANT_ELEMS)
    axis: int | None  # per channel: the axis of the value; None: per tensor

    @property
    def per_tensor(self) -> bool:
        return self.axis is None

    def stored_zero_point(self) -> np.ndarray:
        return self.zero_point + QUANT_ELEMS[self.elem][0]

    def same(self, other: "QParams") -> bool:
        """The same reals for the same stored integers (uint8 and int8 compare after the shift)."""
        return (self.axis == other.axis and self.scale.shape == other.scale.shape
                and bool(np.all(self.scale == other.scale))
                and bool(np.all(self.stored_zero_point() == other.stored_zero_point())))

    def scalar(self) -> tuple[float, int]:
        """(scale, stored zero point) of a per-tensor value."""
        return float(self.scale.reshape(-1)[0]), int(self.stored_zero_point().reshape(-1)[0])


def storage_quant(p: QParams, dimension: int = 0) -> Quantization:
    """The TFLite parameters of the value's int8 (or int32) storage; ``dimension``: where the
    channel axis lands in the TFLite tensor (a weight re-laid out as OHWI or 1HWC)."""
    zp = p.stored_zero_point().reshape(-1)
    return Quantization(tuple(float(s) for s in p.scale.reshape(-1)), tuple(int(z) for z in zp),
                        dimension if not p.per_tensor else 0)


def read_params(em: Emitter, node) -> QParams | None:
    """The node's parameters when its scale and zero point are constants of a supported kind
    (float32 scales > 0 and finite; int8/uint8/int32 zero points in range; per tensor, or 1-D
    along ``axis``; no blocked quantization); else None."""
    a = attrs(node)
    if int(a.get("block_size", 0)) or a.get("precision") or a.get("output_dtype"):
        return None
    scale = em.const_value(node.input[1])
    zp_name = node.input[2] if len(node.input) > 2 and node.input[2] else ""
    zp = em.const_value(zp_name) if zp_name else None
    if scale is None or scale.dtype != np.float32 or (zp_name and zp is None):
        return None
    elem = _elem(em, node, zp)
    if elem not in QUANT_ELEMS or scale.ndim > 1 or not np.all(np.isfinite(scale)) or not np.all(scale > 0):
        return None
    zero_point = np.zeros(scale.shape, np.int64) if zp is None else zp.astype(np.int64)
    if zero_point.size != scale.size or zero_point.ndim > 1:  # a [1] scale may come with a 0-d zero point
        return None
    zero_point = zero_point.reshape(scale.shape)
    axis = None
    if scale.ndim == 1 and scale.size > 1:
        rank = em.rank(node.input[0])
        axis = int(a.get("axis", 1)) % max(rank, 1)
    return QParams(scale.reshape(scale.shape if axis is not None else ()),
                   zero_point.reshape(zero_point.shape if axis is not None else ()), elem, axis)


def _elem(em: Emitter, node, zp) -> int:
    if node.op_type == "DequantizeLinear":
        return em.elem(node.input[0])
    return {np.dtype(np.int8): TensorProto.INT8, np.dtype(np.uint8): TensorProto.UINT8}.get(
        zp.dtype if zp is not None else np.dtype(np.uint8), 0)
