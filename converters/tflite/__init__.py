"""The TFLite (LiteRT) target: ONNX (pt2x's own, built in memory, or any ONNX file) ->
TFLite builtins, written as a TFL3 flatbuffer with the ``flatbuffers`` package.

Grouped by stage, each importing only the stages below it (pyproject's ``tflite-stages`` contract):

* ``converter`` (``to_tflite``): the ONNX model through ``prepare``, the mappers and the subgraph
  passes, then ``writer`` (with ``schema_generated``, flatc's output for ``tflite_subset.fbs``).
* ``prepare``: load, check and normalise the ONNX model (``onnx_in/``), then the ONNX half of
  ``pipeline.py``.
* ``pipeline.py``: every pass in the order it runs, each with why it stands there.
* ``passes/`` (one pass a file, named after its entry) and ``quant/`` (the int8 plan and kernels,
  the weight-only storage): rewrites of the written subgraphs.
* ``onnx_in/``: the front, what the target reads (checks, opset normalisation, the ONNX passes).
* ``ops/``: the ONNX op -> builtins mappers; importing the package fills ``core.mappers.MAPPERS``.
* ``core/``: the TFLite model as plain data, the builtins table, the emitter, the integer rule.

docs/tflite.md says what is supported and why the rest is not.
"""

from .converter import to_tflite

__all__ = ["to_tflite"]
