"""``verify``: one converted file (``.onnx``, ``.tflite``, ``.pte``) checked against a reference, phase by phase.

Open the program (``converters.aten``'s view) -> the input sets (``inputs``) -> the reference
(``references``: torch eager when torch is importable, else pt2x's own ONNX) -> the converted
file in its runtime (``runners``) -> inputs and outputs matched by name, else by order -> each
output compared under its dtype's tolerance (``compare``) -> with ``locate``, the first diverging
value (``locate``) -> a ``Report``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from ..converters.aten.graph import ProgramView, open_program
from . import inputs as inputs_mod
from .compare import QUANTIZED_STEPS, TOLERANCES, compare, tolerance
from ..serde.errors import Pt2Error
from .errors import VerificationError
from .locate import first_divergence, onnx_origins, program_origins, quantization_steps, value_differences
from .references import Reference, onnx_reference, pt2x_onnx, torch_eager
from .report import OutputCheck, Report
from .pte_run import RUNTIME as EXECUTORCH, run_pte
from .runners import OnnxRun, RunResult, run_litert

__all__ = ["verify", "target_of"]

_TFLITE_MAGIC = b"TFL3"
_PTE_MAGIC = b"ET12"
_RUNTIMES = {"onnx": ("onnxruntime", "ONNX Runtime (CPU)"), "tflite": ("litert", "LiteRT (XNNPACK)"),
             "pte": ("executorch", EXECUTORCH)}
"""Each target's runtime: its key in ``compare``'s tables, and its name in the report."""
_ORT_TYPES = {
    "tensor(float)": np.float32, "tensor(double)": np.float64, "tensor(float16)": np.float16,
    "tensor(int64)": np.int64, "tensor(int32)": np.int32, "tensor(int16)": np.int16, "tensor(int8)": np.int8,
    "tensor(uint8)": np.uint8, "tensor(bool)": np.bool_,
}
"""ONNX Runtime's input type names -> the numpy dtype it is fed as."""


@dataclass
class Converted:
    label: str
    target: str  # "onnx" | "tflite" | "pte"
    source: object  # a path, TFLite or .pte bytes, or an onnx.ModelProto


def _kind(head: bytes, path: str = "") -> str:
    if head[4:8] == _PTE_MAGIC or path.lower().endswith(".pte"):
        return "pte"
    return "tflite" if head[4:8] == _TFLITE_MAGIC or path.lower().endswith(".tflite") else "onnx"


def target_of(converted) -> Converted:
    """What ``converted`` is: ``.pte`` (``ET12`` at byte 4) or ``.tflite`` (``TFL3``) bytes/files, or ONNX."""
    if isinstance(converted, (bytes, bytearray)):
        return Converted("<bytes>", _kind(bytes(converted[:8])), bytes(converted))
    if hasattr(converted, "graph") and hasattr(converted, "SerializeToString"):
        return Converted("<ModelProto>", "onnx", converted)
    path = os.fspath(converted)
    try:
        with open(path, "rb") as f:
            head = f.read(8)
    except OSError as e:
        raise VerificationError(f"cannot read {path}: {(e.strerror or str(e)).lower()}") from None
    return Converted(path, _kind(head, path), path)


# ----------------------------------------------------------------------------------- inputs

def _input_sets(view: ProgramView, archive, model_name: str, slots, given, seed: int) -> tuple[list, dict]:
    if isinstance(given, (str, os.PathLike)):
        s = inputs_mod.read_npz(os.fspath(given), view, slots)
        return [s], {"source": f"file {os.fspath(given)}", "seed": None}
    if given is not None:
        return [_from_arrays(view, slots, given)], {"source": "given arrays", "seed": None}
    model = archive.model(None if len(archive.models) == 1 else model_name) if archive is not None else None
    unread = ""
    if model is not None:
        try:
            sample = inputs_mod.sample_inputs(model, archive, slots)
        except Pt2Error as e:  # an unsafe or malformed pickle, samples that do not fit: drawn instead, and said
            sample, unread = None, f" (the archive's sample inputs were not used: {e})"
        if sample is not None:
            return [sample], {"source": "the archive's sample inputs", "seed": None}
    sets = inputs_mod.draw_inputs(view, slots, seed)
    return sets, {"source": "drawn from the signature" + unread, "seed": seed}


def _from_arrays(view, slots, given) -> inputs_mod.InputSet:
    tensors = [s for s in slots if s.kind == "tensor"]
    if isinstance(given, dict):
        missing = [s.name for s in tensors if s.name not in given]
        if missing or len(given) != len(tensors):
            raise VerificationError(f"inputs {sorted(given)}; the program's tensor inputs are {[s.name for s in tensors]}")
        arrays = [given[s.name] for s in tensors]
    else:
        arrays = list(given)
        if len(arrays) != len(tensors):
            raise VerificationError(f"{len(arrays)} inputs given; the program has {len(tensors)} tensor inputs")
    it = iter(inputs_mod.checked_array(np.asarray(a), s, f"input {s.name!r}") for a, s in zip(arrays, tensors))
    values = [next(it) if s.kind == "tensor" else s.value for s in slots]
    inputs_mod.check_ranges(view, slots, values, "inputs")
    return inputs_mod.InputSet("given", tuple(values))


# ------------------------------------------------------------------------------- matching

def _match(kind: str, program: list[str | None], file: list[str]) -> tuple[list[int], str]:
    """Indexes into ``file`` for each of ``program``'s names: by name when all are there, else by order."""
    if all(n in file for n in program) and (kind == "output" or len(file) == len(program)):
        return [file.index(n) for n in program], "name"
    if len(file) >= len(program) if kind == "output" else len(file) == len(program):
        return list(range(len(program))), "order"
    raise VerificationError(f"the converted file's {kind}s {file} match the program's {program} neither by name "
                            "nor by order")


def _feed(x: np.ndarray, declared: str | None) -> np.ndarray:
    want = _ORT_TYPES.get(declared or "")
    return x.astype(want) if want is not None and x.dtype != want else x


# ---------------------------------------------------------------------------------- runs

def _run_converted(conv: Converted, sets, input_names: list[str], locate: bool) -> tuple[RunResult, str]:
    if conv.target == "onnx":
        run = OnnxRun(conv.source, conv.label, every_value=locate)
        idx, how = _match("input", input_names, run.input_names)
        result = RunResult(run.input_names, run.output_names, [], [], run.order)
        for s in sets:
            feeds = [None] * len(run.input_names)
            for i, j in enumerate(idx):
                feeds[j] = _feed(s.tensors[i], run.input_types[j])
            outs, values = run.run(feeds)
            result.outputs.append(outs)
            result.values.append(values)
        return result, how
    data = conv.source if isinstance(conv.source, bytes) else _read(conv.source)
    probe = run_litert(data, [s.tensors for s in sets], conv.label, every_value=locate)
    idx, how = _match("input", input_names, probe.input_names)
    if idx != list(range(len(idx))):  # the file lists its inputs in another order: run again, fed in its order
        reorder = [[s.tensors[idx.index(j)] for j in range(len(idx))] for s in sets]
        probe = run_litert(data, reorder, conv.label, every_value=locate)
    return probe, how


def _read(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def _reference(src, model_name: str, sets, conv: Converted, locate: bool, use_torch: bool,
               names: list[str | None]) -> tuple[Reference, object]:
    ref = torch_eager(src, model_name, sets, locate) if use_torch else None
    if ref is not None:
        return ref, None
    proto = pt2x_onnx(src, model_name)
    ref = onnx_reference(proto, sets, locate, prefer_ort=conv.target != "onnx")
    # pt2x's ONNX writes the user outputs, then the mutated buffers and inputs: keep the user outputs
    written = [o.name for o in proto.graph.output]
    idx = [written.index(n) for n in names] if all(n in written for n in names) else list(range(len(names)))
    ref.outputs = [[outs[i] for i in idx] for outs in ref.outputs]
    return ref, proto


# -------------------------------------------------------------------------------- compare

def _output_names(view: ProgramView) -> list[str | None]:
    return [a.value.name if a.type == "as_tensor" else None for a in view.user_outputs]


def _dtype_name(a: np.ndarray) -> str:
    return a.dtype.name


def _compare_outputs(sets, ref: Reference, got: RunResult, names: list, idx: list[int], runtime: str) -> list[OutputCheck]:
    checks = []
    for s, want_outs, got_outs in zip(sets, ref.outputs, got.outputs):
        for i, want in enumerate(want_outs):
            want = np.asarray(want)
            name = (names[i] if i < len(names) else None) or f"output {i}"
            if i >= len(idx):
                checks.append(OutputCheck(s.label, i, name, want.dtype.name, list(want.shape), float("inf"),
                                          float("inf"), "-", want.size, want.size, False, "missing in the file"))
                continue
            g = np.asarray(got_outs[idx[i]])
            g = _channels_first(g, want.shape) if got.channels_last_inputs else g
            tol = tolerance(_dtype_name(want), runtime)
            w = want.astype(np.float32) if want.dtype.name == "bfloat16" else want
            diff = compare(g.astype(np.float32) if g.dtype.name == "bfloat16" else g, w, tol)
            checks.append(OutputCheck(s.label, i, name, want.dtype.name, list(want.shape), diff.max_abs, diff.max_rel,
                                      diff.tolerance or tol.text(), diff.mismatched, diff.total, diff.ok, diff.note))
    return checks


def _channels_first(g: np.ndarray, shape: tuple) -> np.ndarray:
    """A 4-D output a file with channels-last inputs (``nhwc_io``) gives channels-last, and only then,
    back to the program's layout."""
    if g.ndim == 4 and g.shape != tuple(shape) and g.transpose(0, 3, 1, 2).shape == tuple(shape):
        return g.transpose(0, 3, 1, 2)
    return g


def _tolerance_table(runtime: str) -> dict:
    table = {name: tolerance(name, runtime).text() for name in TOLERANCES}
    table.update({name: tolerance(name, runtime).text() for name in QUANTIZED_STEPS})
    table["integers, bool"] = "exact"
    return table


# ---------------------------------------------------------------------------------- verify

def verify(model, converted, inputs=None, *, locate: bool = False, seed: int = inputs_mod.DEFAULT_SEED,
           model_name: str = "model", use_torch: bool = True, data: str | None = None) -> Report:
    """Run ``converted`` (an ``.onnx``/``.tflite``/``.pte`` path, TFLite or .pte bytes, or an
    ``onnx.ModelProto``) against the program in ``model`` (a ``.pt2`` path) and return a ``Report``.
    ``data``: the ``.ptd`` a ``.pte``'s external weights are in (default: the one beside it).

    ``inputs``: None (the archive's sample inputs, else two drawn sets with ``seed``), an
    ``.npz`` path, or arrays (a list in input order, or a dict by input name). ``locate``: also
    name the first diverging value. ``use_torch=False`` takes pt2x's ONNX as the reference even
    where torch is importable. Raises ``VerificationError`` (a ``Pt2Error``) when the files or
    the inputs cannot be used."""
    conv = target_of(converted)
    view, archive = open_program(model, model_name)
    slots = inputs_mod.slots(view)
    sets, inputs_info = _input_sets(view, archive, model_name, slots, inputs, seed)
    src = os.fspath(model) if isinstance(model, (str, os.PathLike)) else model
    names = _output_names(view)
    ref, proto = _reference(src, view.name, sets, conv, locate, use_torch, names)
    if conv.target == "pte":
        got = run_pte(conv.source, conv.label, sets, src=src, model=view.name, locate=locate, data=data,
                      names=set().union(*ref.values) if locate else ())
        in_how = "order"
    else:
        got, in_how = _run_converted(conv, sets, [s.name for s in slots if s.kind == "tensor"], locate)
    idx, out_how = _match("output", [n or f"#{i}" for i, n in enumerate(names)], got.output_names) \
        if all(names) else (list(range(min(len(names), len(got.output_names)))), "order")
    runtime, runtime_name = _RUNTIMES[conv.target]
    checks = _compare_outputs(sets, ref, got, names, idx, runtime)
    inputs_info["sets"] = [{"label": s.label, "shapes": s.shapes()} for s in sets]
    report = Report(ok=all(c.ok for c in checks) and bool(checks), model=str(src), converted=conv.label,
                    target=conv.target, runtime=runtime_name,
                    reference=ref.name, inputs=inputs_info, matched_by=out_how if in_how == out_how else
                    f"inputs by {in_how}, outputs by {out_how}", tolerances=_tolerance_table(runtime), outputs=checks,
                    located=locate)
    if not checks:
        report.notes.append("the program has no output to compare")
    report.notes += got.notes
    if got.channels_last_inputs:
        names_in = [got.input_names[i] for i in got.channels_last_inputs]
        report.notes.append(f"inputs {names_in} are channels-last in the file: fed transposed (NHWC), and 4-D "
                            "outputs of channels-last shape compared transposed back")
    if locate:
        stamps, origins, steps = _stamps(conv, proto), program_origins(view), quantization_steps(view)
        report.divergence, report.compared_values = first_divergence(got.order, got.values, ref.values, runtime, stamps,
                                                                     origins, steps)
        report.values = value_differences(got.order, got.values, ref.values, runtime, stamps, origins, steps)
    return report


def _stamps(conv: Converted, pt2x_proto) -> dict:
    """The origin stamps: the converted ONNX file's own, or for a .tflite those of pt2x's ONNX when
    it was made (the torch-free reference); else none (the program's node names serve)."""
    if conv.target == "onnx":
        from .runners import load_onnx

        proto = conv.source if not isinstance(conv.source, (str, bytes)) else load_onnx(conv.source, conv.label)
        return onnx_origins(proto)
    return onnx_origins(pt2x_proto) if pt2x_proto is not None else {}
