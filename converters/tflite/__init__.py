"""The TFLite (LiteRT) target: ONNX (pt2x's own, built in memory, or any ONNX file) ->
TFLite builtins, written as a TFL3 flatbuffer with the ``flatbuffers`` package.

Modules: ``prepare`` (the ONNX model, shape-inferred and folded), ``emit`` (the mapping
state), ``ops_*`` (one mapper per ONNX op, by family; ``mappers`` holds the table),
``layout`` (the NCHW -> NHWC pass), ``model`` (the TFLite model as plain data), ``writer``
(serialisation), ``schema_generated`` (flatc's output for ``tflite_subset.fbs``),
``converter`` (``to_tflite``).
"""

from .converter import to_tflite

__all__ = ["to_tflite"]
