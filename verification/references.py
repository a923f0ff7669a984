"""What a converted file is compared against, on the same input sets.

* ``torch_eager``: the program itself in torch eager (``serde.torch.eager``), when torch is
  importable; intermediates keyed by the program's value names. None when torch is not installed.
* ``onnx_reference``: pt2x's own ONNX of the program (converted in memory), run in ONNX Runtime
  (the reference for a ``.tflite``; graph optimizations off) or in onnx's ``ReferenceEvaluator`` (the reference for a
  ``.onnx``, an implementation independent of ONNX Runtime; also the fallback where ONNX Runtime
  lacks a kernel); intermediates keyed by the ONNX tensor names, which are the program's value
  names where a value has one.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..serde.errors import MissingExtraError, Pt2Error
from .errors import VerificationError
from .inputs import InputSet

__all__ = ["Reference", "torch_eager", "pt2x_onnx", "onnx_reference", "TORCH_EAGER", "ORT", "EVALUATOR"]

TORCH_EAGER = "torch eager"
ORT = "ONNX Runtime on pt2x's ONNX"
EVALUATOR = "onnx ReferenceEvaluator on pt2x's ONNX"


@dataclass
class Reference:
    name: str
    outputs: list[list[np.ndarray]]  # per input set
    values: list[dict[str, np.ndarray]] = field(default_factory=list)  # per input set
    skipped: list[str] = field(default_factory=list)  # input sets the reference refused, with why


def torch_eager(src, model: str, sets: list[InputSet], capture: bool) -> Reference | None:
    try:
        from ..serde.torch.eager import run_program
    except MissingExtraError:
        return None
    ref = Reference(TORCH_EAGER, [], [])
    for s in sets:
        try:
            outs, values = run_program(src, list(s.values), model=model, capture=capture)
        except MissingExtraError:
            return None
        except Pt2Error:
            raise
        except Exception as e:  # torch refused the inputs (a guard, a shape check): name the set
            raise VerificationError(f"torch eager refused the {s.label} inputs {s.shapes()}: "
                                    f"{type(e).__name__}: {str(e).strip().splitlines()[0][:300] if str(e).strip() else ''}") from None
        ref.outputs.append(outs)
        ref.values.append(values)
    return ref


def pt2x_onnx(src, model: str):
    from ..converters import to_onnx

    return to_onnx(src, model=model)


def _evaluator(proto, sets: list[InputSet], names: list[str], capture: bool) -> Reference:
    from onnx.reference import ReferenceEvaluator

    ref = Reference(EVALUATOR, [], [])
    try:
        ev = ReferenceEvaluator(proto)
        outs = [o.name for o in proto.graph.output]
        for s in sets:
            got = ev.run(None, dict(zip(names, s.tensors)), intermediate=capture) if capture else None
            if capture:
                ref.values.append({k: np.asarray(v) for k, v in got.items() if isinstance(v, np.ndarray)})
                ref.outputs.append([np.asarray(got[n]) for n in outs])
            else:
                ref.outputs.append([np.asarray(v) for v in ev.run(None, dict(zip(names, s.tensors)))])
                ref.values.append({})
    except Pt2Error:
        raise
    except Exception as e:
        raise VerificationError(f"the reference ({EVALUATOR}) failed: {type(e).__name__}: {str(e)[:300]}") from None
    return ref


def onnx_reference(proto, sets: list[InputSet], capture: bool, *, prefer_ort: bool) -> Reference:
    names = [i.name for i in proto.graph.input]
    if not prefer_ort:
        return _evaluator(proto, sets, names, capture)
    from .runners import OnnxRun

    try:
        run = OnnxRun(proto, "pt2x's ONNX", every_value=capture, as_reference=True)
        ref = Reference(ORT, [], [])
        for s in sets:
            outs, values = run.run(s.tensors)
            ref.outputs.append(outs)
            ref.values.append(values if capture else {})
        return ref
    except VerificationError:  # ONNX Runtime lacks a kernel or refuses a node: onnx's own evaluator
        return _evaluator(proto, sets, names, capture)
