"""pt2x.converters: torch-free lowering of loaded .pt2 programs to ONNX and TFLite.

``to_onnx`` and ``to_tflite`` are imported lazily so ``import pt2x.converters`` stays
cheap and needs no target's package. When the target's extra is not installed, getting
``to_onnx`` raises ``MissingExtraError`` (an ``ImportError``) naming ``pt2x[onnx]``.
``to_tflite`` needs ``pt2x[tflite]`` (onnx, flatbuffers) the same way.

Shared by every target: ``graph`` (the read-only view of a program), ``lower`` (the driver),
``registry`` (lowerings by ATen overload), ``args`` (argument binding), ``signatures`` and
``precheck`` (what each operator takes, checked before lowering), ``dtypes``, ``report``,
``errors``, ``limits`` and ``guard``. Each target is a subpackage: ``onnx/``, ``tflite/``.
"""

from __future__ import annotations

__all__ = ["to_onnx", "to_tflite"]

# top-level module -> the extra that installs it (pyproject.toml's optional-dependencies)
_EXTRA_OF = {"onnx": "onnx", "flatbuffers": "tflite"}


def _missing_extra(e: ModuleNotFoundError, feature: str, extra: str | None = None) -> Exception:
    """A ``MissingExtraError`` when ``e`` is about an extra's module, else ``e`` itself;
    ``extra`` names the one to install when the feature's extra holds the module too."""
    from ..serde.errors import MissingExtraError

    top = (e.name or "").split(".")[0]
    return MissingExtraError(feature, top, extra or _EXTRA_OF[top]) if top in _EXTRA_OF else e


def __getattr__(name: str):
    if name not in __all__:
        raise AttributeError(name)
    try:
        if name == "to_onnx":
            from .onnx import to_onnx

            return to_onnx
        from .tflite import to_tflite

        return to_tflite
    except ModuleNotFoundError as e:
        err = _missing_extra(e, f"pt2x.converters.{name}", "tflite" if name == "to_tflite" else None)
        if err is e:
            raise
        raise err from e
