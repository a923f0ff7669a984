"""The TFLite target's front: the ONNX model it reads, before any builtin exists. An ONNX file
from outside is checked (``onnx_check``) with its external data (``external_data``), brought to the
mappers' opset (``normalise``, with ``qlinear_rewrite`` for the QLinear/Integer ops); then the ONNX
half of ``pipeline.py`` runs the passes here: ``constant_folding`` (each fold bounded by
``fold_cost``), ``sink_expands``, ``transpose_into_weights`` and ``fuse_gelu``."""
