"""ONNX backend: ``to_onnx(src, dst=None, *, model="model", opset=23)``.

Imports onnx, never torch. Lowerings register under backend "onnx"; see
``pt2x/converters/README.md`` and ``docs/onnx.md``.
"""

from __future__ import annotations

from .converter import DEFAULT_OPSET, IR_VERSION, MAX_OPSET, MIN_OPSET, convert_view, to_onnx

__all__ = ["to_onnx", "convert_view", "DEFAULT_OPSET", "MIN_OPSET", "MAX_OPSET", "IR_VERSION"]
