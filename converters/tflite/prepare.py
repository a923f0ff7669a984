"""The ONNX model the TFLite target maps: from a .pt2 (built in memory by pt2x's ONNX
target, its weights left in the archive's map) or an ONNX file/``ModelProto`` from anywhere
(its external data memory-mapped), then run through the ONNX half of ``pipeline.py``.

pt2x's ONNX target is asked for the mappers' opset, ``normalise.TARGET_OPSET`` (18): at that
opset it decomposes ``Attention`` and ``RMSNormalization`` into plain ops itself, so ATen
semantics stay written once (in the ONNX lowerings).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import onnx

from ..errors import ConversionError, UnsupportedOpsError
from ..onnx.lazy_initializers import LazyInitializers, is_lazy
from .onnx_in.external_data import load_external_data
from .onnx_in.normalise import TARGET_OPSET, normalise
from .onnx_in.onnx_check import check_onnx_model
from .pipeline import OnnxStep, run_onnx_passes

__all__ = ["Prepared", "load_onnx", "prepare"]


@dataclass
class Prepared:
    """A shape-inferred, folded ONNX model and what the TFLite model records about its source."""

    model: onnx.ModelProto
    source: str  # "pt2" or "onnx"
    ranges: dict = field(default_factory=dict)  # shape symbol -> [min, max] (None: unbounded)
    member: str | None = None  # the archive member holding the program (pt2 only), named in reports
    shapes: dict = field(default_factory=dict)  # ONNX name -> torch's dims (pt2 only; apply_torch_shapes)
    lazy: LazyInitializers | None = None  # the arrays behind the model's skeleton initializers (held here)


def _is_onnx_path(src) -> bool:
    if isinstance(src, (str, os.PathLike)):
        p = os.fspath(src)
        if p.lower().endswith(".onnx"):
            return True
        try:
            with open(p, "rb") as f:
                return f.read(2) != b"PK"  # a .pt2 is a zip
        except OSError:
            return False
    return False


def load_onnx(src, model: str = "model", state: str = "outputs") -> Prepared:
    """``src`` as ONNX: a ``ModelProto``, an ``.onnx`` path, or a .pt2 (path, file, archive,
    ``Pt2Model``) converted by pt2x's ONNX target at ``TARGET_OPSET``; ``state="inputs"`` makes
    each buffer the program writes an input too (TFLite inputs have no default value)."""
    if isinstance(src, onnx.ModelProto):
        return Prepared(src, "onnx")
    if _is_onnx_path(src):
        try:
            m = onnx.load(os.fspath(src), load_external_data=False)
        except OSError as e:
            from ...serde.errors import Pt2UsageError

            raise Pt2UsageError(f"cannot open {os.fspath(src)}: {e.strerror or e}") from e
        except Exception as e:
            raise ConversionError(f"{os.fspath(src)}: not a readable ONNX model ({type(e).__name__}: {e})") from e
        lazy = LazyInitializers()
        load_external_data(m, os.path.dirname(os.path.abspath(os.fspath(src))), lazy)
        return Prepared(m, "onnx", lazy=lazy)
    from ..aten.graph import open_program
    from ..onnx.converter import convert_view

    view, keep = open_program(src, model)
    try:
        shapes: dict = {}
        lazy = LazyInitializers()  # the weights stay in the archive's map until the file is written
        try:
            m = convert_view(view, opset=TARGET_OPSET, shapes=shapes, lazy=lazy,
                             state="inputs-no-default" if state == "inputs" else state)
        except UnsupportedOpsError as e:
            raise _as_tflite_report(e) from None
        ranges = {k: [lo, hi] for k, (lo, hi) in view.ranges.items()}
        return Prepared(m, "pt2", ranges=ranges, member=getattr(view, "member", None), shapes=shapes, lazy=lazy)
    finally:
        del keep


def _as_tflite_report(e: UnsupportedOpsError) -> UnsupportedOpsError:
    """``e`` (the ONNX stage's report) saying which conversion was asked for: TFLite, by way of
    ONNX. The operators and their lowering hint (registered for "onnx") stay as they are."""
    head, _, rest = e.reason.partition("\n")
    prefix = "cannot convert to onnx: "
    if head.startswith(prefix):
        head = f"cannot convert to tflite: {head[len(prefix):].rstrip(':')} with no ONNX lowering (TFLite is written from pt2x's ONNX):"
    return UnsupportedOpsError(head + ("\n" + rest if rest else ""), e.ops, member=e.member)


def prepare(p: Prepared) -> Prepared:
    """An ONNX model from outside pt2x checked and normalised (``onnx_check.py``, then
    ``normalise.py``: its opset brought to the mappers', strict shape inference, onnx's checker);
    then the ONNX half of ``pipeline.py``, in its order."""
    m = onnx.ModelProto()
    m.CopyFrom(p.model)
    if any(t.data_location == onnx.TensorProto.EXTERNAL and not is_lazy(t) for t in m.graph.initializer):
        raise ConversionError("the ONNX model keeps weights in external files: pass its path, or the "
                              "ModelProto with its weights loaded (onnx.load(path))")
    if p.source == "onnx":
        check_onnx_model(m)
        m = normalise(m)
    try:
        m = run_onnx_passes(OnnxStep(m, p))
    except onnx.shape_inference.InferenceError as e:
        raise ConversionError(f"ONNX shape inference failed: {e}") from e
    p.model = m
    return p
