"""pt2x.converters: torch-free lowering of loaded .pt2 programs to ONNX and TFLite.

``to_onnx``, ``to_tflite`` and ``to_pte`` are imported lazily so ``import pt2x.converters`` stays
cheap and needs no target's package. When the target's extra is not installed, getting
``to_onnx`` raises ``MissingExtraError`` (an ``ImportError``) naming ``pt2x[onnx]``.
``to_tflite`` needs ``pt2x[tflite]`` (onnx, flatbuffers) the same way, ``to_pte``
``pt2x[pte]`` (flatbuffers).

The rooms, in the order data flows:

* ``aten/``: the ATen front end: the read-only view of a program, its prechecks, the
  lowering registry and driver, the view-mutation pass (see its ``__init__``). It imports
  no target.
* ``onnx/``: ATen -> ONNX, lowerings registered in ``aten.registry``.
* ``tflite/``: ONNX -> TFLite: the ONNX that ``onnx/`` builds, or an ONNX file.
* ``pte/``: ATen -> ExecuTorch ``.pte`` (portable out-variant kernels), lowerings registered
  in ``aten.registry`` beside ONNX's.

At the root, what every target shares: ``errors``, ``limits``, ``guard`` (a failed step
named with its archive member), ``report`` (the one unsupported-operator report) and
``weight_quant`` (the numbers of the weight-only options, ``weights="fp16"|"int8"``).
"""

from __future__ import annotations

__all__ = ["to_onnx", "to_tflite", "to_pte"]

# each converter -> the extra that installs what it imports (pyproject.toml's optional-dependencies)
_EXTRA_OF = {"to_onnx": "onnx", "to_tflite": "tflite", "to_pte": "pte"}
# the top-level modules those extras install
_EXTRA_MODULES = frozenset({"onnx", "flatbuffers"})


def __getattr__(name: str):
    if name not in __all__:
        raise AttributeError(name)
    try:
        if name == "to_onnx":
            from .onnx import to_onnx

            return to_onnx
        if name == "to_pte":
            from .pte import to_pte

            return to_pte
        from .tflite import to_tflite

        return to_tflite
    except ModuleNotFoundError as e:
        top = (e.name or "").split(".")[0]
        if top not in _EXTRA_MODULES:
            raise
        from ..serde.errors import MissingExtraError

        raise MissingExtraError(f"pt2x.converters.{name}", top, _EXTRA_OF[name]) from e
