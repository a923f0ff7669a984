"""pt2x.converters: torch-free lowering of loaded .pt2 programs to ONNX and TFLite.

``to_onnx`` and ``to_tflite`` are imported lazily so ``import pt2x.converters`` stays
cheap and needs neither onnx nor flatbuffers.
"""

from __future__ import annotations

__all__ = ["to_onnx", "to_tflite"]


def __getattr__(name: str):
    if name == "to_onnx":
        from .onnx import to_onnx

        return to_onnx
    if name == "to_tflite":
        from .tflite import to_tflite

        return to_tflite
    raise AttributeError(name)
