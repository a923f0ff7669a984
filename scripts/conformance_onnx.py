"""ONNX's own backend node tests through ``to_tflite`` and LiteRT: ``python -m scripts.conformance_onnx``.

The cases are the ``onnx/backend/test/data/node/test_*`` folders of the onnx 1.22.0 wheel (the
last release that ships them): a ``model.onnx`` and ``test_data_set_*/{input,output}_*.pb``.
``--wheel PATH`` names the wheel; without it the script looks in ``--cache DIR`` (default
``~/.cache/pt2x-conformance``) and, when it is not there, runs ``pip download --no-deps
onnx==1.22.0`` into it (any platform's wheel holds the same cases; it is read, never installed). ``--cases DIR`` reads case folders from a directory instead
(the committed subset under ``tests/fixtures/onnx_node/``).

Each case runs in a long-lived worker process, one request at a time, each under a time limit
(``--timeout``), so a LiteRT kernel that aborts or segfaults kills the worker, not the run:

  convert   ``pt2x.converters.to_tflite`` of the model (with ``--const-inputs``: every graph
            input but the first rewritten as an initializer holding the stored input)
  run       the .tflite in ai-edge-litert on every stored input set, once with the XNNPACK
            delegate LiteRT applies by default and once with no default delegate
  ort       ONNX Runtime on the original model and inputs (a sanity check of the stored
            outputs; a disagreement is noted, not counted against pt2x)

Classes per case (and per LiteRT variant):

  match                 every output of every input set equals the stored one
  wrong                 LiteRT ran and some output differs (value, shape, dtype, count): silent
  refused               ``UnsupportedOpsError`` / ``ConversionError``: op and message recorded
  abort                 the worker died by a signal (a LiteRT abort; in convert, a pt2x crash)
  rejected_at_allocate  LiteRT refused the file at load, resize or allocate_tensors
  rejected_at_invoke    LiteRT refused it at set_tensor or invoke
  error                 any other exception out of ``to_tflite``, or a ``ConversionError`` raised
                        from an IndexError/KeyError/TypeError/... (``_BUG_TYPES``): a pt2x bug
  timeout               a request ran past ``--timeout`` seconds

Comparison, as ONNX's backend test runner does by default: ``rtol=1e-3, atol=1e-7`` for floats
(``numpy.isclose``, NaN where NaN is stored and nowhere else, infinities with their sign), with
atol raised to ``ATOL_OF_MAGNITUDE`` (1e-6) times the output's largest finite magnitude (float32
rounding of sums: an inverse DFT's zeros are 1.9e-7 off in the stored outputs themselves),
integers and booleans exactly; shapes and dtypes must equal the stored ones, except that a
bfloat16 tensor is float32 at the .tflite's edge (documented in docs/tflite.md). An output of no
elements, which LiteRT's Python ``get_tensor`` refuses to hand back, is read as its shape and dtype.

Output: the per-op table (the op family is the case's single node's op type, or for an expanded
function the op its name starts with) with totals, and with ``--out FILE`` one JSON object per
case. ``--jobs N`` runs N workers.

    python -m scripts.conformance_onnx --jobs 2 --out baseline.jsonl --table baseline.txt
    python -m scripts.conformance_onnx --const-inputs --jobs 2 --out const.jsonl
    python -m scripts.conformance_onnx -k test_clip --verbose
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import pickle
import queue
import re
import select
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import zipfile
from collections import Counter, defaultdict
from dataclasses import asdict, dataclass, field

import numpy as np

__all__ = ["CLASSES", "BAD_CLASSES", "RTOL", "ATOL", "Case", "CaseResult", "WheelCases", "DirCases", "find_wheel",
           "run_cases", "format_table", "main"]

ONNX_WHEEL_VERSION = "1.22.0"
NODE_DIR = "onnx/backend/test/data/node/"
CLASSES = ("match", "wrong", "refused", "abort", "rejected_at_allocate", "rejected_at_invoke", "error", "timeout")
BAD_CLASSES = ("wrong", "abort", "error", "timeout")  # what a right-or-refused converter never shows
RTOL, ATOL = 1e-3, 1e-7  # onnx.backend.test.runner's defaults
# float32 arithmetic rounds at about 1.2e-7 of the magnitudes it sums: an element near zero in an
# output whose values reach M is within float error at 1e-6 * M (8 ulps of M), e.g. an inverse DFT's
# zero imaginary parts (1.9e-7 off in the stored output, 3e-15 in LiteRT's)
ATOL_OF_MAGNITUDE = 1e-6
VARIANTS = ("xnnpack", "builtin")  # LiteRT as shipped (XNNPACK by default), and no default delegate
DEFAULT_TIMEOUT = 120.0
WORKER_MEMORY_MIB = 4096
DEFAULT_CACHE = os.path.expanduser("~/.cache/pt2x-conformance")


# ============================================================================ cases


@dataclass
class Case:
    """One node test: the model and its input/output sets, as the serialized protos."""

    name: str
    model: bytes
    datasets: list[tuple[list[bytes], list[bytes]]]


class WheelCases:
    """The node tests inside an onnx wheel, read with zipfile (the wheel is never installed)."""

    def __init__(self, path: str):
        self.path = path
        self.zip = zipfile.ZipFile(path)
        self.files: dict[str, list[str]] = defaultdict(list)
        for n in self.zip.namelist():
            if n.startswith(NODE_DIR) and not n.endswith("/"):
                self.files[n[len(NODE_DIR):].split("/", 1)[0]].append(n[len(NODE_DIR):])

    def names(self) -> list[str]:
        return sorted(self.files)

    def read(self, rel: str) -> bytes:
        return self.zip.read(NODE_DIR + rel)

    def load(self, name: str) -> Case:
        return _load_case(name, self.files[name], self.read)


class DirCases:
    """Case folders under one directory (``<dir>/test_x/model.onnx`` ...)."""

    def __init__(self, path: str):
        self.path = path

    def names(self) -> list[str]:
        return sorted(n for n in os.listdir(self.path) if os.path.isfile(os.path.join(self.path, n, "model.onnx")))

    def read(self, rel: str) -> bytes:
        with open(os.path.join(self.path, rel), "rb") as f:
            return f.read()

    def load(self, name: str) -> Case:
        root = os.path.join(self.path, name)
        rels = [os.path.relpath(p, self.path) for p in glob.glob(os.path.join(root, "**", "*"), recursive=True)
                if os.path.isfile(p)]
        return _load_case(name, rels, self.read)


def _load_case(name: str, rels: list[str], read) -> Case:
    sets: dict[str, dict[str, list[tuple[int, str]]]] = defaultdict(lambda: {"input": [], "output": []})
    for rel in rels:
        m = re.fullmatch(r"[^/]+/(test_data_set_\d+)/(input|output)_(\d+)\.pb", rel.replace(os.sep, "/"))
        if m:
            sets[m.group(1)][m.group(2)].append((int(m.group(3)), rel))
    datasets = []
    for key in sorted(sets, key=lambda s: int(s.rsplit("_", 1)[1])):
        ins = [read(r) for _, r in sorted(sets[key]["input"])]
        outs = [read(r) for _, r in sorted(sets[key]["output"])]
        datasets.append((ins, outs))
    return Case(name, read(f"{name}/model.onnx"), datasets)


def find_wheel(cache: str | None = None) -> str:
    """The onnx 1.22.0 wheel in ``cache`` (default ``DEFAULT_CACHE``), ``pip download``-ed there
    when it is not."""
    target = cache or DEFAULT_CACHE
    found = sorted(glob.glob(os.path.join(target, f"onnx-{ONNX_WHEEL_VERSION}-*.whl")))
    if found:
        return found[0]
    os.makedirs(target, exist_ok=True)
    # any platform's wheel holds the same test data; the node tests are not compiled
    subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d", target,
                    f"onnx=={ONNX_WHEEL_VERSION}"], check=True)
    found = sorted(glob.glob(os.path.join(target, f"onnx-{ONNX_WHEEL_VERSION}-*.whl")))
    if not found:
        raise SystemExit(f"pip download left no onnx-{ONNX_WHEEL_VERSION} wheel in {target}")
    return found[0]


# ============================================================================ protos -> arrays


def _graph_io(model_bytes: bytes):
    """(model, the graph's non-initializer inputs, op types of its nodes)."""
    import onnx

    m = onnx.load_from_string(model_bytes)
    inits = {t.name for t in m.graph.initializer}
    inputs = [i for i in m.graph.input if i.name not in inits]
    return m, inputs, [n.op_type for n in m.graph.node]


def _value(data: bytes, type_proto):
    """A stored .pb as the model's input/output type says: an array, or a list for a sequence."""
    import onnx
    from onnx import numpy_helper

    kind = type_proto.WhichOneof("value") if type_proto is not None else "tensor_type"
    if kind == "sequence_type":
        s = onnx.SequenceProto()
        s.ParseFromString(data)
        return numpy_helper.to_list(s)
    if kind == "optional_type":
        o = onnx.OptionalProto()
        o.ParseFromString(data)
        return numpy_helper.to_optional(o)
    if kind == "map_type":
        mp = onnx.MapProto()
        mp.ParseFromString(data)
        return numpy_helper.to_dict(mp)
    t = onnx.TensorProto()
    t.ParseFromString(data)
    return numpy_helper.to_array(t)


def _is_tensor(type_proto) -> bool:
    return type_proto.WhichOneof("value") == "tensor_type"


# ============================================================================ comparison


def compare(got, want, rtol: float = RTOL, atol: float = ATOL) -> str | None:
    """None when ``got`` equals the stored ``want`` under the suite's tolerance, else why not."""
    if not isinstance(want, np.ndarray):
        return f"stored output is a {type(want).__name__}, LiteRT gave a tensor"
    got = np.asarray(got)
    wdt = str(want.dtype)
    if str(got.dtype) != wdt and not (wdt == "bfloat16" and got.dtype == np.float32):
        return f"dtype {got.dtype}, expected {wdt}"
    if got.shape != want.shape:
        return f"shape {list(got.shape)}, expected {list(want.shape)}"
    if want.dtype.kind in "biuUSO" or wdt == "bool":
        bad = got != want
        return f"{int(bad.sum())}/{bad.size} elements differ (exact)" if bad.any() else None
    g, w = got.astype(np.float64), want.astype(np.float64)
    finite_w = np.abs(w[np.isfinite(w)])
    if finite_w.size:
        atol = max(atol, ATOL_OF_MAGNITUDE * float(finite_w.max()))
    ok = np.isclose(g, w, rtol=rtol, atol=atol, equal_nan=True)
    if ok.all():
        return None
    nan_moved = int((np.isnan(g) != np.isnan(w)).sum())
    finite = ~ok & np.isfinite(g) & np.isfinite(w)
    worst = float(np.abs(g - w)[finite].max()) if finite.any() else float("nan")
    return (f"{int((~ok).sum())}/{ok.size} elements differ beyond rtol={rtol} atol={atol} "
            f"(max abs diff {worst:.3g}{f', NaN at {nan_moved} other positions' if nan_moved else ''})")


# ============================================================================ worker side


def _dump(path: str, obj) -> None:
    with open(path, "wb") as f:
        pickle.dump(obj, f, protocol=pickle.HIGHEST_PROTOCOL)


def _load(path: str):
    with open(path, "rb") as f:
        return pickle.load(f)


def worker_main() -> None:
    """A worker (``pt2x.tools.supervised``'s child side): one JSON line per request naming the file
    that holds it (models, arrays: a pickle this script wrote), the reply pickled beside it."""
    import faulthandler
    import warnings

    from pt2x.tools.supervised import child_channel

    channel = child_channel()
    faulthandler.enable(file=sys.stderr, all_threads=True)
    warnings.simplefilter("ignore")
    import onnx  # noqa: F401  (imported before the memory limit)
    import onnxruntime  # noqa: F401
    from ai_edge_litert import interpreter  # noqa: F401

    from pt2x.converters.tflite.converter import load_mappers
    from pt2x.tools.process_limits import limit_address_space

    load_mappers()
    limit_address_space(WORKER_MEMORY_MIB)
    channel.write(json.dumps({"ready": True}) + "\n")
    for line in sys.stdin:
        path = json.loads(line)["request"]
        req = _load(path)
        kind = req.pop("kind")
        sys.stderr.write(f"\n=== {kind} {req.get('case', '')}\n")
        sys.stderr.flush()
        try:
            reply = _HANDLERS[kind](**req)
        except Exception as e:  # noqa: BLE001 - the worker reports a harness bug instead of dying
            reply = {"status": "harness", "message": f"{type(e).__name__}: {e}",
                     "traceback": traceback.format_exc()[-4000:]}
        _dump(path + ".reply", reply)
        channel.write(json.dumps({"reply": path + ".reply"}) + "\n")


_BUG_TYPES = (IndexError, KeyError, TypeError, AttributeError, AssertionError, ZeroDivisionError, NameError,
              RecursionError)
"""Exceptions of Python code going wrong: a ``ConversionError`` raised from one (``guard.stage`` and the
mapping loop wrap whatever a step raised) is the ``error`` class, not a refusal. ValueError and
RuntimeError are left out: onnx's version converter and checker refuse invalid input with them."""


def _root_cause(e: BaseException) -> BaseException | None:
    """The innermost ``__cause__`` of ``e`` (None when it has none)."""
    seen, cause = set(), e.__cause__
    while cause is not None and cause.__cause__ is not None and id(cause) not in seen:
        seen.add(id(cause))
        cause = cause.__cause__
    return cause


def _do_convert(case: str, model: bytes, const: list[bytes] | None = None) -> dict:
    """``to_tflite`` of the model (with the given inputs 1.. as initializers): the file or why not."""
    from pt2x.converters import to_tflite
    from pt2x.converters.errors import ConversionError, UnsupportedOpsError

    m = _with_constants(model, const) if const is not None else model
    src = m if not isinstance(m, bytes) else _parse(m)
    try:
        data = to_tflite(src)
    except UnsupportedOpsError as e:
        ops = [{"op": p.target, "reasons": list(p.reasons)} for p in e.ops]
        return {"status": "refused", "kind": type(e).__name__, "ops": ops, "message": str(e)[:2000]}
    except ConversionError as e:
        cause = _root_cause(e)
        if isinstance(cause, _BUG_TYPES):  # pt2x's own code failed, and the guard dressed it as a refusal
            return {"status": "error", "kind": f"{type(e).__name__} from {type(cause).__name__}",
                    "message": str(e)[:2000], "traceback": "".join(traceback.format_exception(cause))[-4000:]}
        return {"status": "refused", "kind": type(e).__name__, "ops": [], "message": str(e)[:2000],
                "cause": type(cause).__name__ if cause is not None else None}
    except Exception as e:  # noqa: BLE001 - anything else out of pt2x is the bug class
        return {"status": "error", "kind": type(e).__name__, "message": str(e)[:2000],
                "traceback": traceback.format_exc()[-4000:]}
    return {"status": "ok", "tflite": data}


def _parse(model: bytes):
    import onnx

    return onnx.load_from_string(model)


def _with_constants(model: bytes, const: list[bytes]):
    """The model with graph inputs 1.. replaced by initializers holding ``const`` (TensorProtos)."""
    import onnx

    m = onnx.load_from_string(model)
    inits = {t.name for t in m.graph.initializer}
    inputs = [i for i in m.graph.input if i.name not in inits]
    for vi, data in zip(inputs[1:], const):
        t = onnx.TensorProto()
        t.ParseFromString(data)
        t.name = vi.name
        m.graph.initializer.append(t)
    if m.ir_version >= 4:  # a constant, not an overridable default (IR 3 lists every initializer as an input)
        keep = [vi for vi in m.graph.input if vi.name not in {t.name for t in m.graph.initializer}]
        del m.graph.input[:]
        m.graph.input.extend(keep)
    return m


def _do_run(case: str, tflite: bytes, inputs: list, xnnpack: bool) -> dict:
    """The .tflite in LiteRT on one input set: outputs, or the step LiteRT refused at."""
    from ai_edge_litert.interpreter import Interpreter, OpResolverType

    step = "load"
    try:
        kind = OpResolverType.AUTO if xnnpack else OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES
        it = Interpreter(model_content=tflite, experimental_op_resolver_type=kind, num_threads=1)
        details = it.get_input_details()
        if len(details) != len(inputs):
            return {"status": "wrong", "message": f"{len(details)} inputs, the case has {len(inputs)}"}
        feeds = []
        for i, (d, x) in enumerate(zip(details, inputs)):
            x = np.asarray(x)
            if str(x.dtype) == "bfloat16":
                x = x.astype(np.float32)
            if x.dtype != d["dtype"]:
                return {"status": "wrong", "message": f"input {i} is {np.dtype(d['dtype'])} in the .tflite, "
                                                      f"the model's is {x.dtype}"}
            feeds.append(np.array(x, order="C"))  # (np.ascontiguousarray makes a 0-d value 1-d)
        step = "resize"
        for d, x in zip(details, feeds):
            it.resize_tensor_input(d["index"], list(x.shape), strict=False)
        step = "allocate"
        it.allocate_tensors()
        step = "set_tensor"
        for d, x in zip(it.get_input_details(), feeds):
            it.set_tensor(d["index"], x)
        step = "invoke"
        it.invoke()
        step = "get_tensor"
        outs = [_output(it, d) for d in it.get_output_details()]
    except Exception as e:  # noqa: BLE001 - LiteRT's refusals are ValueError/RuntimeError, classed by step
        cls = "rejected_at_allocate" if step in ("load", "resize", "allocate") else "rejected_at_invoke"
        return {"status": cls, "message": f"{step}: {type(e).__name__}: {str(e)[:1500]}"}
    return {"status": "ok", "outputs": outs}


def _output(it, d) -> np.ndarray:
    """An output after invoke. LiteRT's Python ``get_tensor`` refuses a tensor of no elements
    ("Invalid tensor size"); its shape and dtype are what a caller sees then."""
    try:
        return np.array(it.get_tensor(d["index"]))
    except ValueError:
        shape = [int(n) for n in d["shape"]]  # the details are read after invoke: the run's shape
        if 0 not in shape:
            raise
        return np.zeros(shape, d["dtype"])


def _do_ort(case: str, model: bytes, feeds: dict) -> dict:
    import onnxruntime as ort

    try:
        so = ort.SessionOptions()
        so.intra_op_num_threads = 1
        so.inter_op_num_threads = 1
        so.log_severity_level = 4
        sess = ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])
        outs = sess.run(None, feeds)
    except Exception as e:  # noqa: BLE001 - ORT not running a case is information, not a failure
        return {"status": "fails", "message": f"{type(e).__name__}: {str(e)[:300]}"}
    return {"status": "ok", "outputs": outs}


_HANDLERS = {"convert": _do_convert, "run": _do_run, "ort": _do_ort}


# ============================================================================ parent side


def _death_note(log: str) -> str:
    """What a dead worker printed last before Python's fatal-error report, and the innermost frame."""
    before, _, after = log.rpartition("Fatal Python error")
    if not _:
        return log.strip()[-400:] or "no message"
    said = "\n".join(ln for ln in before.splitlines() if ln.strip() and not ln.startswith("=== "))[-400:]
    frame = re.search(r'File "([^"]+)", line (\d+) in (\S+)', after)
    where = f" (in {os.path.basename(frame.group(1))}:{frame.group(2)} {frame.group(3)})" if frame else ""
    return (said.strip() or "no message") + where


class Worker:
    """One worker process seen from the parent (a ``pt2x.tools.supervised.Supervised``), started on
    the first request and again after it died or ran past its time."""

    STARTUP_TIMEOUT = 120.0

    def __init__(self, logdir: str, wid: int):
        from pt2x.tools.supervised import Supervised

        self.dir = os.path.join(logdir, f"worker{wid}")
        os.makedirs(self.dir, exist_ok=True)
        self.sup = Supervised([sys.executable, os.path.abspath(__file__), "--worker"],
                              startup_timeout=self.STARTUP_TIMEOUT, log_path=os.path.join(logdir, f"worker{wid}.log"),
                              env={"TF_CPP_MIN_LOG_LEVEL": "2"}, new_session=True)
        self.n = 0

    def call(self, req: dict, timeout: float) -> dict:
        """The worker's reply, or ``{"status": "abort"|"timeout", ...}`` when it died or hung."""
        if not self._alive():
            return {"status": "abort", "message": f"{req['kind']}: the worker did not start: {self._gone()}"}
        self.n += 1
        path = os.path.join(self.dir, f"request{self.n % 2}")
        _dump(path, req)
        self.sup.begin_task(timeout)
        self.sup.send({"request": path})
        msg = self._next()
        if msg == "timeout":
            self.sup.kill()
            return {"status": "timeout", "message": f"{req['kind']} ran past {timeout:.0f} s"}
        if msg is None:
            return {"status": "abort", "message": f"{req['kind']}: worker died: {self._gone()}"}
        return _load(msg["reply"])

    def _alive(self) -> bool:
        if self.sup.proc is not None and self.sup.proc.poll() is None:
            return True
        self.sup.start()
        ready = self._next()
        if ready == "timeout":
            self.sup.kill()
        return ready not in (None, "timeout")

    def _next(self):
        """The worker's next message; "timeout" past its deadline; None when it died."""
        while True:
            left = self.sup.deadline - time.monotonic()
            if left <= 0:
                return "timeout"
            select.select([self.sup.fileno()], [], [], left)
            msgs, eof = self.sup.read()
            if msgs:
                return msgs[0]
            if eof:
                return None

    def _gone(self) -> str:
        """How the worker died (it closed its output), in words, once it has exited."""
        from pt2x.tools.supervised import exit_text

        rc = self.sup.reap()
        death = self.sup.death(rc)
        oom = " (out of memory)" if death.kind == "oom" else ""
        return f"{exit_text(rc)}{oom}: {_death_note(self.sup.log_since_task())}"

    def stop(self) -> None:
        self.sup.stop()


@dataclass
class CaseResult:
    case: str
    family: str
    ops: list[str]
    mode: str  # "plain" or "const-inputs"
    cls: str = ""  # the class with LiteRT as shipped (XNNPACK)
    cls_builtin: str = ""  # the class with no default delegate
    detail: str = ""
    detail_builtin: str = ""
    refusal: dict | None = None  # kind, ops [{op, reasons}], message, names_op
    ort: str = ""  # agrees / disagrees / fails / skipped
    ort_detail: str = ""
    seconds: float = 0.0
    extra: dict = field(default_factory=dict)


def run_case(case: Case, worker: Worker, *, const_inputs: bool = False, timeout: float = DEFAULT_TIMEOUT,
             variants: tuple[str, ...] = VARIANTS, ort: bool = True) -> CaseResult:
    """One case through convert, LiteRT (each variant, each input set) and ONNX Runtime."""
    t0 = time.monotonic()
    model, inputs, ops = _graph_io(case.model)
    res = CaseResult(case.name, family_of(case.name, ops), sorted(set(ops)), "const-inputs" if const_inputs else "plain")
    outs_info = list(model.graph.output)
    sets = [([_value(b, vi.type) for b, vi in zip(ins, inputs)], [_value(b, vo.type) for b, vo in zip(outs, outs_info)])
            for ins, outs in case.datasets]
    converted: dict[int, dict] = {}  # input set -> convert reply (one for all sets unless const_inputs)
    per_variant = {v: ("match", "") for v in variants}
    for k, (ins, want) in enumerate(sets):
        if const_inputs or not converted:
            const = case.datasets[k][0][1:] if const_inputs else None
            rep = worker.call({"kind": "convert", "case": case.name, "model": case.model, "const": const}, timeout)
            converted[k] = rep
        rep = converted[k] if const_inputs else converted[0]
        if rep["status"] != "ok":
            _record_conversion(res, rep, model, ops, variants)
            break
        feeds = ins[:1] if const_inputs else ins
        for v in variants:
            if per_variant[v][0] != "match":
                continue
            per_variant[v] = _run_variant(worker, case.name, rep["tflite"], feeds, want, v, timeout, k, len(sets))
    else:
        res.cls, res.detail = per_variant.get("xnnpack", ("", ""))
        res.cls_builtin, res.detail_builtin = per_variant.get("builtin", ("", ""))
    if ort:
        res.ort, res.ort_detail = _ort_check(worker, case, inputs, sets, timeout)
    res.seconds = round(time.monotonic() - t0, 3)
    return res


def _record_conversion(res: CaseResult, rep: dict, model, ops: list[str], variants) -> None:
    status = rep["status"]
    res.cls = res.cls_builtin = {"harness": "error"}.get(status, status)
    if "builtin" not in variants:
        res.cls_builtin = ""
    res.detail = rep.get("message", "")
    if status == "refused":
        res.refusal = {"kind": rep["kind"], "ops": rep["ops"], "message": rep["message"],
                       "names_op": _names_op(rep, model, ops), "cause": rep.get("cause")}
    elif status == "error":
        res.detail = f"{rep['kind']}: {rep['message']}"
        res.extra["traceback"] = rep.get("traceback", "")
    res.detail_builtin = res.detail if res.cls_builtin else ""


def _names_op(rep: dict, model, ops: list[str]) -> bool:
    """Whether a refusal names an op: an ONNX op in its report's entries (the model's, or what onnx's
    version converter made of it: Scatter -> ScatterElements), or an op or node of the model in its message."""
    named = [o["op"] for o in rep["ops"]]
    if any(n.startswith("ONNX ") and n[5:].isidentifier() or n == "tensor input" for n in named):
        return True
    msg = rep["message"]
    return any(re.search(rf"\b{re.escape(op)}\b", msg) for op in set(ops)) or any(
        n.name and n.name in msg for n in model.graph.node)


def _run_variant(worker: Worker, name: str, tflite: bytes, feeds: list, want: list, variant: str, timeout: float,
                 k: int, nsets: int) -> tuple[str, str]:
    where = f"input set {k}: " if nsets > 1 else ""
    if any(not isinstance(x, np.ndarray) for x in feeds):
        return "error", where + "harness: a non-tensor input reached LiteRT (to_tflite accepted it)"
    rep = worker.call({"kind": "run", "case": name, "tflite": tflite, "inputs": feeds,
                       "xnnpack": variant == "xnnpack"}, timeout)
    if rep["status"] == "harness":
        return "error", where + "harness: " + rep["message"]
    if rep["status"] != "ok":
        return rep["status"], where + rep.get("message", "")
    got = rep["outputs"]
    if len(got) != len(want):
        return "wrong", where + f"{len(got)} outputs, stored {len(want)}"
    for i, (g, w) in enumerate(zip(got, want)):
        why = compare(g, w)
        if why:
            return "wrong", where + f"output {i}: {why}"
    return "match", ""


def _ort_check(worker: Worker, case: Case, inputs, sets, timeout: float) -> tuple[str, str]:
    for k, (ins, want) in enumerate(sets):
        feeds = {vi.name: x for vi, x in zip(inputs, ins)}
        rep = worker.call({"kind": "ort", "case": case.name, "model": case.model, "feeds": feeds}, timeout)
        if rep["status"] != "ok":
            return ("abort" if rep["status"] in ("abort", "timeout") else "fails"), rep.get("message", "")[:300]
        for i, (g, w) in enumerate(zip(rep["outputs"], want)):
            if not isinstance(w, np.ndarray):
                continue  # sequences/optionals: not compared here
            why = compare(g, w)
            if why:
                return "disagrees", f"input set {k} output {i}: {why}"
    return "agrees", ""


# ---------------------------------------------------------------------------- op families


def _snake_ops() -> dict[str, str]:
    """Every ONNX op's name without case or underscores -> the op name."""
    from onnx import defs

    return {s.name.lower(): s.name for s in defs.get_all_schemas_with_history() if s.domain in ("", "ai.onnx")}


_OPS_BY_KEY: dict[str, str] | None = None


_ALIASES = {"sce": "SoftmaxCrossEntropyLoss", "nllloss": "NegativeLogLikelihoodLoss", "mvn": "MeanVarianceNormalization",
            "greaterequal": "GreaterOrEqual", "lessequal": "LessOrEqual"}  # case names that abbreviate the op


def family_of(case: str, ops: list[str]) -> str:
    """The op a case tests: its single node's op type, or (an expanded function, several nodes) the
    op its name starts with."""
    global _OPS_BY_KEY
    expanded = re.search(r"_expanded(_ver\d+)?$", case) is not None
    if len(set(ops)) == 1 and not expanded:
        return ops[0]
    if _OPS_BY_KEY is None:
        _OPS_BY_KEY = {**_snake_ops(), **{k: v for k, v in _ALIASES.items()}}
    key = case.removeprefix("test_").replace("_", "").lower()
    best = max((k for k in _OPS_BY_KEY if key.startswith(k)), key=len, default=None)
    if best:
        return _OPS_BY_KEY[best]
    return ops[0] if ops else "(no node)"


# ---------------------------------------------------------------------------- the run


def run_cases(source, names: list[str], *, jobs: int = 1, const_inputs: bool = False,
              timeout: float = DEFAULT_TIMEOUT, variants: tuple[str, ...] = VARIANTS, ort: bool = True,
              progress=None) -> list[CaseResult]:
    """Every named case of ``source`` on ``jobs`` workers; results in the order of ``names``."""
    results: list[CaseResult | None] = [None] * len(names)
    lock = threading.Lock()

    def one(item: tuple[int, str], w: Worker) -> None:
        i, n = item
        with lock:
            case = source.load(n)
        if const_inputs and not _const_applicable(case):
            return
        try:
            r = run_case(case, w, const_inputs=const_inputs, timeout=timeout, variants=variants, ort=ort)
        except Exception as e:  # noqa: BLE001 - a harness bug on one case must not end the run
            r = CaseResult(n, n, [], "const-inputs" if const_inputs else "plain", cls="error",
                           detail=f"harness: {type(e).__name__}: {e}")
            r.extra["traceback"] = traceback.format_exc()[-4000:]
        results[i] = r
        if progress:
            with lock:
                progress(r)

    run_on_workers(list(enumerate(names)), one, jobs=jobs, prefix="pt2x-conformance-")
    return [r for r in results if r is not None]


def run_on_workers(items: list, one, *, jobs: int, prefix: str) -> None:
    """``one(item, worker)`` for each of ``items``, on ``jobs`` threads that each own a ``Worker``
    (its LiteRT child process, logging under one fresh folder) and take items until none is left;
    each worker is stopped when its thread ends."""
    todo: queue.Queue = queue.Queue()
    for item in items:
        todo.put(item)
    logdir = tempfile.mkdtemp(prefix=prefix)

    def work(wid: int) -> None:
        w = Worker(logdir, wid)
        try:
            while True:
                try:
                    item = todo.get_nowait()
                except queue.Empty:
                    return
                one(item, w)
        finally:
            w.stop()

    threads = [threading.Thread(target=work, args=(j,), daemon=True) for j in range(max(1, jobs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def _const_applicable(case: Case) -> bool:
    """``--const-inputs`` changes a case with two or more graph inputs, all tensors."""
    _, inputs, _ = _graph_io(case.model)
    return len(inputs) >= 2 and all(_is_tensor(i.type) for i in inputs)


# ---------------------------------------------------------------------------- the report


_SHORT = {"match": "match", "wrong": "wrong", "refused": "refused", "abort": "abort",
          "rejected_at_allocate": "rej@alloc", "rejected_at_invoke": "rej@inv", "error": "error",
          "timeout": "timeout"}


def format_table(results: list[CaseResult], *, title: str = "") -> str:
    """The per-op table (LiteRT with XNNPACK), totals for both variants, and every bad case."""
    fams: dict[str, Counter] = defaultdict(Counter)
    for r in results:
        fams[r.family][r.cls] += 1
        if r.cls_builtin and r.cls_builtin != r.cls:
            fams[r.family]["delegate-differs"] += 1
        if r.ort == "disagrees":
            fams[r.family]["ort-differs"] += 1
    cols = [*CLASSES, "delegate-differs", "ort-differs"]
    heads = ["op", "cases", *[_SHORT.get(c, c) for c in cols]]
    rows = [[f, str(sum(fams[f][c] for c in CLASSES)), *[str(fams[f][c] or "") for c in cols]] for f in sorted(fams)]
    total = Counter(r.cls for r in results)
    total_b = Counter(r.cls_builtin for r in results if r.cls_builtin)
    rows.append(["TOTAL", str(len(results)), *[str(total[c]) for c in CLASSES],
                 str(sum(f["delegate-differs"] for f in fams.values())),
                 str(sum(f["ort-differs"] for f in fams.values()))])
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(heads)]
    line = lambda cells: "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths)))  # noqa: E731
    out = [title] if title else []
    out += [line(heads), line(["-" * w for w in widths])]
    out += [line(r) for r in rows[:-1]] + [line(["-" * w for w in widths]), line(rows[-1])]
    out.append("")
    out.append("totals, LiteRT with XNNPACK (as shipped): " + ", ".join(f"{c} {total[c]}" for c in CLASSES))
    if total_b:
        out.append("totals, LiteRT without default delegate:  " + ", ".join(f"{c} {total_b[c]}" for c in CLASSES))
    unnamed = [r for r in results if r.refusal and not r.refusal["names_op"]]
    ortc = Counter(r.ort for r in results if r.ort)
    if ortc:
        out.append("ONNX Runtime vs the stored outputs: " + ", ".join(f"{k} {v}" for k, v in sorted(ortc.items())))
    out.append(f"refusals that name no op of the model: {len(unnamed)}")
    kinds = Counter(refusal_kind(asdict(r)) for r in results if r.refusal)
    if kinds:
        out.append("")
        out.append(f"refusals by kind ({len(kinds)} kinds):")
        out += [f"  {n:5d}  {k}" for k, n in kinds.most_common()]
    out.append("")
    for c in (*BAD_CLASSES, "rejected_at_allocate", "rejected_at_invoke"):
        bad = [r for r in results if r.cls == c or r.cls_builtin == c]
        if bad:
            out.append(f"== {c} ({len(bad)})")
            for r in bad:
                which = r.detail if r.cls == c else f"[no delegate] {r.detail_builtin}"
                out.append(f"  {r.case} [{r.family}] xnnpack={r.cls} builtin={r.cls_builtin or '-'}: {which[:300]}")
    if unnamed:
        out.append(f"== refusals naming no op ({len(unnamed)})")
        for r in unnamed:
            out.append(f"  {r.case} [{r.family}]: {r.refusal['message'][:300]}")
    diff = [r for r in results if r.ort == "disagrees"]
    if diff:
        out.append(f"== ONNX Runtime disagrees with the stored outputs ({len(diff)})")
        for r in diff:
            out.append(f"  {r.case}: {r.ort_detail[:200]}")
    return "\n".join(out) + "\n"


# ---------------------------------------------------------------------------- the CI subset


def refusal_kind(r: dict) -> str:
    """A refusal's kind: its exception and the first words of its first reason, names and numbers blanked."""
    ref = r["refusal"]
    ops = ref["ops"]
    reason = ops[0]["reasons"][0] if ops and ops[0]["reasons"] else ref["message"]
    shape = re.sub(r"'[^']*'|\"[^\"]*\"|\d+|\[[^\]]*\]|\([^)]*\)", "_", reason)
    return f"{ref['kind']}: {' '.join(shape.split()[:7])}"


def select_subset(results: list[dict], sizes: dict[str, int], max_bytes: int = 100_000) -> list[str]:
    """The stratified subset CI runs, from the JSONL of full runs (plain and --const-inputs):
    every case that is not match or refused in some run, and the smallest case (under ``max_bytes``)
    of each op family that matches, of each op family that is refused, and of each refusal kind."""
    chosen = {r["case"] for r in results
              if r["cls"] not in ("match", "refused") or r["cls_builtin"] not in ("", "match", "refused")}
    best: dict[tuple, str] = {}
    for r in results:
        keys = [("family", r["family"], r["cls"])] if r["cls"] in ("match", "refused") else []
        if r["refusal"]:
            keys.append(("refusal", refusal_kind(r)))
        for k in keys if sizes[r["case"]] <= max_bytes else ():
            if k not in best or (sizes[r["case"]], r["case"]) < (sizes[best[k]], best[k]):
                best[k] = r["case"]
    return sorted(chosen | set(best.values()))


def write_subset(source: WheelCases, names: list[str], dst: str) -> int:
    """Copy the named case folders out of the wheel into ``dst``; the bytes written."""
    total = 0
    for name in names:
        for rel in source.files[name]:
            data = source.read(rel)
            path = os.path.join(dst, rel)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "wb") as f:
                f.write(data)
            total += len(data)
    return total


def _parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--wheel", help=f"the onnx {ONNX_WHEEL_VERSION} wheel (default: found in --cache, else pip download)")
    p.add_argument("--cache", help=f"where to look for / download the wheel (default {DEFAULT_CACHE})")
    p.add_argument("--cases", help="a directory of case folders instead of the wheel (tests/fixtures/onnx_node)")
    p.add_argument("-k", "--filter", action="append", default=[], help="run only cases whose name contains this (repeatable)")
    p.add_argument("--jobs", type=int, default=1, help="worker processes (default 1)")
    p.add_argument("--const-inputs", action="store_true", help="every graph input but the first as an initializer "
                                                               "(cases with two or more tensor inputs)")
    p.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT, help="seconds per request (convert, run, ort)")
    p.add_argument("--no-builtin", action="store_true", help="run LiteRT with XNNPACK only")
    p.add_argument("--no-ort", action="store_true", help="skip the ONNX Runtime check")
    p.add_argument("--out", help="write one JSON object per case here (JSONL)")
    p.add_argument("--table", help="write the table here as well as printing it")
    p.add_argument("--verbose", action="store_true", help="one line per case as it finishes")
    p.add_argument("--write-subset", metavar="DIR", help="copy the stratified CI subset chosen from the --from "
                                                         "JSONL files out of the wheel into DIR, and stop")
    p.add_argument("--from", dest="from_", action="append", default=[], metavar="JSONL",
                   help="results of full runs (plain and --const-inputs) for --write-subset")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    return p.parse_args(argv)


def main(argv=None) -> int:
    args = _parse_args(argv)
    if args.worker:
        worker_main()
        return 0
    source = DirCases(args.cases) if args.cases else WheelCases(args.wheel or find_wheel(args.cache))
    if args.write_subset:
        return _write_subset_command(source, args)
    names = [n for n in source.names() if not args.filter or any(f in n for f in args.filter)]
    variants = ("xnnpack",) if args.no_builtin else VARIANTS
    t0 = time.monotonic()
    done = [0]

    def progress(r: CaseResult) -> None:
        done[0] += 1
        if args.verbose:
            print(f"[{done[0]}/{len(names)}] {r.case}: {r.cls}/{r.cls_builtin or '-'} {r.detail[:160]}", flush=True)
        elif done[0] % 100 == 0:
            print(f"... {done[0]}/{len(names)} cases, {time.monotonic() - t0:.0f} s", file=sys.stderr, flush=True)

    results = run_cases(source, names, jobs=args.jobs, const_inputs=args.const_inputs, timeout=args.timeout,
                        variants=variants, ort=not args.no_ort, progress=progress)
    where = args.cases or os.path.basename(source.path)
    title = (f"ONNX node tests ({where}) through pt2x.converters.to_tflite and ai-edge-litert"
             f"{', inputs 1.. as constants' if args.const_inputs else ''}: {len(results)} cases, "
             f"{time.monotonic() - t0:.0f} s, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    table = format_table(results, title=title)
    print(table)
    if args.table:
        with open(args.table, "w", encoding="utf-8") as f:
            f.write(table)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            for r in results:
                f.write(json.dumps(asdict(r), sort_keys=True) + "\n")
    return 1 if any(r.cls in BAD_CLASSES for r in results) else 0


def _write_subset_command(source: WheelCases, args) -> int:
    results = []
    for path in args.from_:
        with open(path, encoding="utf-8") as f:
            results += [json.loads(line) for line in f if line.strip()]
    sizes = {n: sum(source.zip.getinfo(NODE_DIR + rel).file_size for rel in rels) for n, rels in source.files.items()}
    names = select_subset(results, sizes)
    total = write_subset(source, names, args.write_subset)
    print(f"{len(names)} cases, {total / 1e6:.2f} MB, in {args.write_subset}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
