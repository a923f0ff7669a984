"""The converted file run in its runtime: ONNX Runtime for ``.onnx``, LiteRT for ``.tflite`` (a
``.pte`` runs in ExecuTorch: ``pte_run``).

``OnnxRun`` opens an ONNX model (a file, with its external data, or a ``ModelProto``) in ONNX
Runtime on the CPU (``as_reference``: with its graph optimizations off, so a quantized graph is
computed as written, not by fused integer kernels); with ``every_value`` every node output of the main graph is also a graph
output (in memory), so intermediates come back by name. ``run_litert`` runs a ``.tflite`` in a
child process (``litert_child``), LiteRT as shipped (its default delegate XNNPACK, one thread),
so that a kernel that aborts the process fails the verification instead of killing the caller;
with ``every_value`` the interpreter keeps every tensor (``experimental_preserve_all_tensors``).
A file a runtime cannot read or run is a ``VerificationError`` naming the file and the runtime's
own message.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field

import numpy as np

from ..serde.errors import MissingExtraError
from .errors import VerificationError

__all__ = ["RunResult", "OnnxRun", "run_litert", "load_onnx", "child_meta", "LITERT_TIMEOUT_S"]

LITERT_TIMEOUT_S = 600.0
"""Seconds the LiteRT child may take for all input sets."""


@dataclass
class RunResult:
    input_names: list[str]
    output_names: list[str]
    outputs: list[list[np.ndarray]]  # per input set, in the file's output order
    values: list[dict[str, np.ndarray]] = field(default_factory=list)  # per input set: name -> intermediate
    order: list[tuple[str, str, list[str], list[str]]] = field(default_factory=list)  # (node or op, op type, inputs, outputs) in run order
    channels_last_inputs: list[int] = field(default_factory=list)  # inputs the file declares NHWC (fed transposed)
    notes: list[str] = field(default_factory=list)  # what the run could not do, for the report


def _short(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0][:300] if text else ''}"


def _ort():
    try:
        import onnxruntime
    except ImportError:
        raise MissingExtraError("pt2x verify of an ONNX file", "onnxruntime", "verify") from None
    return onnxruntime


class OnnxRun:
    """ONNX Runtime on one model; ``run(feeds_in_input_order)`` -> (outputs, values)."""

    def __init__(self, model, label: str, *, every_value: bool = False, as_reference: bool = False):
        ort = _ort()
        self.label = label
        self.order: list[tuple[str, str, list[str], list[str]]] = []
        options = ort.SessionOptions()
        options.intra_op_num_threads = 1
        if as_reference:  # the graph as written: no fusion of DQ -> op -> Q into ONNX Runtime's integer kernels
            options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        options.log_severity_level = 4  # its errors reach the report, not stderr
        source, proto = model, None
        if every_value:
            proto = model if not isinstance(model, (str, bytes)) else load_onnx(model, label)
            source = _with_every_value(proto, self.order)
        elif not isinstance(model, (str, bytes)):
            source = model.SerializeToString()
        self.session = self._session(source, options)
        self.output_names = [o.name for o in self.session.get_outputs()] if proto is None else \
            [o.name for o in proto.graph.output]
        widened = [o.name for o in self.session.get_outputs() if o.type == "tensor(bfloat16)"]
        if widened:  # ONNX Runtime's Python API returns no bfloat16 array: those outputs are cast to float32
            base = load_onnx(source if isinstance(source, bytes) else model, label)
            self.session = self._session(_widened(base, widened), options)
        self.input_names = [i.name for i in self.session.get_inputs()]
        self.all_outputs = [o.name.removesuffix(_WIDENED) for o in self.session.get_outputs()]
        self.input_types = [i.type for i in self.session.get_inputs()]

    def _session(self, source, options):
        ort = _ort()
        try:
            return ort.InferenceSession(source, options, providers=["CPUExecutionProvider"])
        except Exception as e:  # onnxruntime's Fail/InvalidGraph/NotImplemented...: the file, in its words
            raise VerificationError(f"{self.label}: ONNX Runtime cannot load it ({_short(e)})") from None

    def run(self, feeds: list[np.ndarray]) -> tuple[list[np.ndarray], dict[str, np.ndarray]]:
        try:
            got = self._run(dict(zip(self.input_names, feeds)))
        except Exception as e:
            raise VerificationError(f"{self.label}: ONNX Runtime failed to run it ({_short(e)})") from None
        by_name = dict(zip(self.all_outputs, got))
        return [by_name[n] for n in self.output_names], by_name

    def _run(self, feeds: dict) -> list[np.ndarray]:
        """ONNX Runtime's Python API takes no bfloat16 array: those inputs go as OrtValues of their bytes."""
        if not any(x.dtype.name == "bfloat16" for x in feeds.values()):
            return self.session.run(None, feeds)
        from onnx import TensorProto

        ort = _ort()
        values = {k: ort.OrtValue.ortvalue_from_numpy_with_onnx_type(np.array(x, order="C").view(np.uint16),
                                                                     TensorProto.BFLOAT16)
                  if x.dtype.name == "bfloat16" else ort.OrtValue.ortvalue_from_numpy(x) for k, x in feeds.items()}
        names = [o.name for o in self.session.get_outputs()]
        return [v.numpy() for v in self.session.run_with_ort_values(names, values)]


_WIDENED = "/pt2x.float32"


def _widened(model, names: list[str]) -> bytes:
    """``model`` with each of the graph outputs ``names`` (bfloat16) cast to float32 (exact) under
    the name ``<name>/pt2x.float32``."""
    from onnx import TensorProto, helper

    wanted = set(names)
    for o in model.graph.output:
        if o.name in wanted:
            model.graph.node.append(helper.make_node("Cast", [o.name], [o.name + _WIDENED], to=TensorProto.FLOAT))
            o.name += _WIDENED
            if o.type.tensor_type.elem_type:
                o.type.tensor_type.elem_type = TensorProto.FLOAT
    return model.SerializeToString()


def load_onnx(model, label: str):
    import onnx

    try:
        if isinstance(model, bytes):
            return onnx.load_model_from_string(model)
        return onnx.load(model, load_external_data=True)
    except Exception as e:  # DecodeError, a missing .data file...
        raise VerificationError(f"{label}: not a readable ONNX model ({_short(e)})") from None


def _with_every_value(model, order: list) -> bytes:
    """``model`` with every main-graph node output also a graph output (types left to the runtime)."""
    import onnx

    m = onnx.ModelProto()
    m.CopyFrom(model)
    have = {o.name for o in m.graph.output}
    for i, node in enumerate(m.graph.node):
        outs = [o for o in node.output if o]
        order.append((node.name or f"#{i}", node.op_type, [x for x in node.input if x], outs))
        for o in outs:
            if o not in have:
                m.graph.output.add().name = o
                have.add(o)
    try:
        return m.SerializeToString()
    except ValueError as e:  # over protobuf's 2 GB
        raise VerificationError(f"the model with every value as an output cannot be serialized ({e})") from None


# ------------------------------------------------------------------------------ LiteRT child

def _storable(x: np.ndarray) -> np.ndarray:
    return x.astype(np.float32) if x.dtype.name == "bfloat16" else x


def run_litert(model_bytes: bytes, input_sets: list[list[np.ndarray]], label: str, *,
               every_value: bool = False) -> RunResult:
    import importlib.util

    if importlib.util.find_spec("ai_edge_litert") is None:  # the child would only say ModuleNotFoundError
        raise MissingExtraError("pt2x verify of a .tflite file", "ai_edge_litert", "verify")
    with tempfile.TemporaryDirectory(prefix="pt2x-verify-") as d:
        with open(os.path.join(d, "model.tflite"), "wb") as f:
            f.write(model_bytes)
        for i, feeds in enumerate(input_sets):  # bfloat16 as float32: the .tflite computes it so, and npz has no bf16
            np.savez(os.path.join(d, f"in{i}.npz"), *(_storable(x) for x in feeds))
        argv = [sys.executable, "-m", "pt2x.verification.litert_child", d, str(len(input_sets)), str(int(every_value))]
        env = {**os.environ, "OMP_NUM_THREADS": "1", "TF_CPP_MIN_LOG_LEVEL": "3"}
        try:
            proc = subprocess.run(argv, capture_output=True, timeout=LITERT_TIMEOUT_S, env=env)
        except subprocess.TimeoutExpired:
            raise VerificationError(f"{label}: LiteRT took longer than {LITERT_TIMEOUT_S:g} s") from None
        return _child_result(d, proc, len(input_sets), label)


def child_meta(d: str, proc: subprocess.CompletedProcess, runtime: str, label: str) -> dict:
    """The ``result.json`` a runtime's child process (``litert_child``, ``executorch_child``) wrote
    in ``d``; ``VerificationError`` when it ended without one (a crash: the signal or exit status
    and its last line of stderr) or with its ``error``."""
    meta_path = os.path.join(d, "result.json")
    if not os.path.exists(meta_path):
        tail = proc.stderr.decode(errors="replace").strip().splitlines()[-1:] or [""]
        how = f"signal {-proc.returncode}" if proc.returncode < 0 else f"exit status {proc.returncode}"
        raise VerificationError(f"{label}: {runtime} ended with {how} before answering ({tail[0][:300]})")
    with open(meta_path, encoding="utf-8") as f:
        meta = json.load(f)
    if meta.get("error"):
        raise VerificationError(f"{label}: {runtime} {meta['error']}")
    return meta


def _child_result(d: str, proc: subprocess.CompletedProcess, n_sets: int, label: str) -> RunResult:
    meta = child_meta(d, proc, "LiteRT", label)
    outputs, values = [], []
    for i in range(n_sets):
        with np.load(os.path.join(d, f"out{i}.npz"), allow_pickle=False) as z:
            outputs.append([z[f"o{j}"] for j in range(len(meta["outputs"]))])
            values.append({name: z[f"t{k}"] for k, name in meta["tensors"].items() if f"t{k}" in z.files})
    names = meta["tensors"]
    order = [(f"#{o['index']}", o["op"], [names[k] for k in o["inputs"] if k in names],
              [names[k] for k in o["outputs"] if k in names]) for o in meta["ops"]]
    return RunResult(meta["inputs"], meta["outputs"], outputs, values, order, meta.get("channels_last_inputs", []))
