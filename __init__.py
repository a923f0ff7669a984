"""pt2x: read, validate and convert ``torch.export`` ``.pt2`` programs.

The repository root is the ``pt2x`` package (see ``package-dir`` in pyproject.toml):
``pt2x.schema`` (definitions), ``pt2x.serde`` (bytes <-> schema objects <-> torch),
``pt2x.converters`` (ONNX, TFLite) and ``pt2x.tools`` (the ``pt2x`` command).
Importing ``pt2x`` imports nothing heavy: no torch, no onnx.
"""

__version__ = "0.1.0"
