"""pt2x.verification: a converted file checked against a reference, and the first diverging value named.

``verify(model, converted, inputs=None, *, locate=False, seed=0, data=None) -> Report`` (also
``pt2x.verify``): the ``.onnx`` (ONNX Runtime, CPU), ``.tflite`` (LiteRT as shipped, XNNPACK, in a
child process) or ``.pte`` (ExecuTorch's runtime, in a child process; ``data``: its ``.ptd``) run
against torch eager of the program when torch is importable, else against pt2x's own ONNX (in
ONNX Runtime for a ``.tflite`` or ``.pte``, in onnx's ``ReferenceEvaluator`` for a ``.onnx``), on
the archive's sample inputs, inputs drawn inside the program's range constraints, or the user's.

A layer between ``tools`` and ``converters``, one concern per module: ``inputs`` (drawing and
reading inputs), ``references`` (torch eager, pt2x's ONNX), ``runners`` (ONNX Runtime, the LiteRT
child ``litert_child``), ``pte_run`` (a ``.pte``: its ``.ptd`` checked, the ExecuTorch child
``executorch_child``, ``--locate``'s debug copy), ``compare`` (the one tolerance table), ``locate`` (intermediates matched
by name, the first divergence in execution order), ``report`` (``Report``, table and JSON),
``check`` (the phases in order), ``errors``.
"""

from __future__ import annotations

__all__ = ["verify", "Report", "VerificationError"]


def __getattr__(name: str):
    if name == "verify":
        from .check import verify

        return verify
    if name == "Report":
        from .report import Report

        return Report
    if name == "VerificationError":
        from .errors import VerificationError

        return VerificationError
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
