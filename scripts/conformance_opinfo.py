"""torch's OpInfo suite as the front end's conformance test: ``python -m scripts.conformance_opinfo``.

Every entry of ``torch.testing._internal.common_methods_invocations.op_db`` (about 700), float32
and the integer/bool dtypes the entry supports on CPU (``--dtypes`` narrows them), ``--samples N`` of its
sample inputs (``op.sample_inputs("cpu", dtype)``: the first one, then the first 0-d or empty one
when the entry has one, then the next in order), each one case:

  module    an ``nn.Module`` calling ``op.op(input, *args, **kwargs)``: the sample's tensors are
            its inputs, everything else is baked in
  eager     the module run by torch twice under two seeds: outputs that differ are random
            (``bernoulli``, ``empty``): compared by shape and dtype only; so are the index outputs
            of ``topk``/``sort``/``median``/... (``TIE_NAMES``) when an input value repeats
  export    ``torch.export.export`` with ``Dim.AUTO`` on the first dim of every tensor input, the
            static shapes when that fails; ``torch.export.save``
  columns   ``onnx``: ``pt2x.converters.to_onnx`` run in ONNX Runtime; ``tflite``:
            ``pt2x.converters.to_tflite`` run in ai-edge-litert (XNNPACK as LiteRT applies it);
            ``pte``: ``pt2x.converters.to_pte`` run in ExecuTorch's runtime (``executorch.runtime``,
            portable kernels), a shape symbol torch left unbounded given ``max_dims`` of twice its
            size in the sample (at least 8: ``PTE_MIN_BOUND``) and run at the sample's size;
            ``torch.onnx``: ``torch.onnx.export(exported program, dynamo=True)`` run in ONNX Runtime.
            ``--targets`` chooses them (``--targets pte``: that one alone); ``--no-torch-onnx``
            leaves torch.onnx out

Classes per column:

  match    every output equals eager's: shape, dtype, values under ``verification/compare.py``'s
           table for the runtime (NaN where eager has NaN and nowhere else, infinities equal;
           integers and booleans exactly)
  wrong    the file ran and some output differs (value, shape, dtype, count): silently wrong
  refused  pt2x raised ``UnsupportedOpsError``/``ConversionError``/``Unsupported`` (not from a bug:
           below); for torch.onnx, ``torch.onnx.export`` raised anything
  loud     any other exception out of pt2x (a traceback), a ``ConversionError`` a lowering or
           step raised from ``IndexError``/``KeyError``/``TypeError``/``ZeroDivisionError``/...
           (``BUG_TYPES``: the driver dresses what a lowering raises as a ``ConversionError``),
           a file the runtime rejects at load or run, a worker killed by a signal or a timeout

A case torch itself cannot run or export (eager raises, an output that is no tensor, a complex or
low-precision tensor, ``torch.export`` fails) is ``skipped``, with why, and in no column.

Each case runs in a worker process (``--jobs`` of them, each restarted after
``--max-tasks-per-child`` entries, a crash or a timeout of ``--timeout`` seconds per case), so a
runtime that aborts kills a worker, not the run. Seeded per case (a CRC of its name), so two runs
give the same cases and results; ``CI=true`` changes nothing but is accepted.

Output: the table (per column: match, silently wrong, refused, loud error), the wrong and loud
cases with their messages, ``--out FILE`` the JSON of every case.

    nice -n 10 python -m scripts.conformance_opinfo --jobs 2 --out opinfo.json --table opinfo.txt
    python -m scripts.conformance_opinfo --ci --jobs 2 --write-known tests/converters/opinfo_known_refused.txt
    python -m scripts.conformance_opinfo -k cdist -k nonzero --verbose
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import sys
import time
import traceback
import zlib
from collections import Counter
from dataclasses import asdict, dataclass, field

__all__ = ["COLUMNS", "PT2X_COLUMNS", "CLASSES", "BUG_TYPE_NAMES", "CaseResult", "entry_names", "entry_family",
           "select_entries", "run_cases", "format_table", "unlowered_overloads", "main"]

COLUMNS = ("onnx", "tflite", "pte", "torch.onnx")
PT2X_COLUMNS = ("onnx", "tflite", "pte")
"""The columns of pt2x's own converters: their wrong and loud cases fail the run, their refusals are listed."""
COLUMN_LABELS = {"onnx": "pt2x ONNX", "tflite": "pt2x TFLite", "pte": "pt2x PTE", "torch.onnx": "torch.onnx"}
COLUMN_RUNS = {"onnx": "to_onnx -> ONNX Runtime", "tflite": "to_tflite -> ai-edge-litert",
               "pte": "to_pte -> executorch.runtime", "torch.onnx": "torch.onnx -> ONNX Runtime"}
PTE_MIN_BOUND = 8
"""The pte column bounds a shape symbol torch left unbounded at twice its size in the sample, at least this."""
CLASSES = ("match", "wrong", "refused", "loud")
INT_DTYPES = ("bool", "uint8", "int8", "int16", "int32", "int64")
DEFAULT_DTYPES = ("float32", *INT_DTYPES)
"""float32 and every integer/bool dtype, where the entry supports it on CPU (about 3,300 entry-dtype
pairs; ``--dtypes float32,int64,bool`` is the cheaper run docs/conformance.md reports)."""
MAX_SAMPLES_SCANNED = 48  # sample inputs read per entry and dtype when looking for a 0-d/empty one
CI_ENTRIES, CI_SAMPLES, CI_DTYPES = 60, 1, ("float32", "int64")
"""The subset tests/converters/test_opinfo_conformance.py runs (``--ci``): ``select_entries(op_db, 60)``,
one sample each, float32 and int64, the pt2x columns only (``PT2X_COLUMNS``)."""
DEFAULT_TIMEOUT = 120.0
WORKER_MEMORY_MIB = 6144
BUG_TYPE_NAMES = ("IndexError", "KeyError", "TypeError", "AttributeError", "AssertionError", "ZeroDivisionError",
                  "NameError", "RecursionError", "UnboundLocalError", "OverflowError", "ValueError")
"""Exceptions of Python code going wrong: a ``ConversionError`` raised from one of these is a pt2x bug
(the driver wraps whatever a lowering raises), not a refusal."""
TIE_NAMES = ("topk", "sort", "argsort", "msort", "kthvalue", "median", "nanmedian", "mode")
"""Entries whose index outputs torch leaves unspecified among equal values (``topk``, an unstable
``sort``): with a repeated input value, their int64 outputs are compared by shape and dtype only."""
RANDOM_NAMES = ("empty", "empty_like", "new_empty", "new_empty_strided", "empty_strided", "empty_permuted",
                "bernoulli", "cauchy", "exponential", "geometric", "log_normal", "multinomial", "normal", "rand_like",
                "randn_like", "randint", "randint_like", "randn", "rand", "uniform", "nn.functional.dropout",
                "nn.functional.dropout2d", "nn.functional.dropout3d", "nn.functional.alpha_dropout",
                "nn.functional.feature_alpha_dropout", "nn.functional.rrelu")
"""Entries whose outputs hold whatever memory held or draw random numbers (two eager runs under two
seeds can agree where the draw is nearly certain): compared by shape and dtype only."""


@dataclass
class CaseResult:
    case: str  # "<entry>[<dtype>#<sample>]"
    entry: str
    family: str
    dtype: str
    sample: int  # the sample's index among the entry's sample inputs
    desc: str = ""  # the sample's tensors' shapes and dtypes, the baked arguments
    skipped: str = ""  # why torch itself could not run or export it
    dynamic: bool = False  # exported with a dynamic first dim
    random: bool = False  # outputs compared by shape and dtype only
    ties: bool = False  # index outputs among equal values compared by shape and dtype only (TIE_NAMES)
    cls: dict = field(default_factory=dict)  # column -> class
    detail: dict = field(default_factory=dict)  # column -> message
    seconds: float = 0.0


# ============================================================================ entries


def entry_names(op_db) -> list[str]:
    return [_entry_name(op) for op in op_db]


def _entry_name(op) -> str:
    return f"{op.name}.{op.variant_test_name}" if op.variant_test_name else op.name


def entry_family(op) -> str:
    """The entry's family: its namespace (``nn.functional``, ``linalg``, ``special``, ...) and OpInfo class."""
    ns = op.name.rsplit(".", 1)[0] if "." in op.name else "torch"
    return f"{ns}/{type(op).__name__}"


def select_entries(op_db, count: int) -> list[str]:
    """``count`` entries spread over the families: round robin over the families (sorted), each
    family's entries taken at even strides of its sorted names. Deterministic."""
    groups: dict[str, list[str]] = {}
    for op in op_db:
        groups.setdefault(entry_family(op), []).append(_entry_name(op))
    for names in groups.values():
        names.sort()
    # each family's entries reordered so a prefix is spread over the whole family
    spread = {}
    for fam, names in groups.items():
        order, step = [], len(names)
        seen = set()
        while len(order) < len(names):
            step = max(1, step // 2)
            for i in range(0, len(names), step):
                if i not in seen:
                    seen.add(i)
                    order.append(names[i])
        spread[fam] = order
    chosen: list[str] = []
    fams = sorted(spread)
    depth = 0
    while len(chosen) < count and any(depth < len(v) for v in spread.values()):
        for fam in fams:
            if depth < len(spread[fam]) and len(chosen) < count:
                chosen.append(spread[fam][depth])
        depth += 1
    return sorted(chosen)


# ============================================================================ worker side


def _seed(text: str) -> int:
    return zlib.crc32(text.encode())


def _pick_samples(samples: list, n: int) -> list[int]:
    """Indices: the first sample, the first 0-d or empty one, then the next ones in order."""
    import torch
    from torch.utils._pytree import tree_leaves

    def special(s) -> bool:
        ts = [x for x in tree_leaves((s.input, s.args, s.kwargs)) if isinstance(x, torch.Tensor)]
        return any(t.dim() == 0 or t.numel() == 0 for t in ts)

    picks = [0] if samples else []
    for i, s in enumerate(samples):
        if len(picks) < n and i not in picks and special(s):
            picks.append(i)
            break
    for i in range(len(samples)):
        if len(picks) >= n:
            break
        if i not in picks:
            picks.append(i)
    return sorted(picks[:n])


def _describe(leaves, tensor_pos) -> str:
    import torch

    parts = []
    for i, x in enumerate(leaves):
        if isinstance(x, torch.Tensor):
            parts.append(f"{str(x.dtype).replace('torch.', '')}{list(x.shape)}")
        else:
            parts.append(repr(x)[:40])
    return ", ".join(parts)[:300]


def _module(fn, leaves, spec, tensor_pos):
    import torch
    from torch.utils._pytree import tree_leaves, tree_unflatten

    class Case(torch.nn.Module):
        def forward(self, *xs):
            vals = list(leaves)
            for p, x in zip(tensor_pos, xs):
                vals[p] = x
            inp, args, kwargs = tree_unflatten(vals, spec)
            out = fn(inp, *args, **kwargs)
            # a flat tuple: torch.export.save cannot write a torch.return_types namedtuple's spec
            return out if isinstance(out, torch.Tensor) else tuple(tree_leaves(out))

    return Case()


def _eager(module, inputs, seed: int):
    import torch
    from torch.utils._pytree import tree_leaves

    torch.manual_seed(seed)
    out = module(*[x.clone() for x in inputs])
    return tree_leaves(out)


_SKIP_DTYPES = ("complex", "bfloat16", "float16", "quint", "qint", "float8", "uint16", "uint32", "uint64", "bits")


def _unsupported_dtype(t) -> bool:
    """A complex, low-precision or quantized tensor, or a sparse/nested one (no strided layout)."""
    return t.layout != _strided() or getattr(t, "is_nested", False) or any(s in str(t.dtype) for s in _SKIP_DTYPES)


def _strided():
    import torch

    return torch.strided


def _compare_outputs(got: list, want: list, runtime: str, random: bool, ties: bool = False) -> str | None:
    """None when ``got`` (the runtime's arrays) equals ``want`` (eager's), else why not."""
    import numpy as np

    from pt2x.verification.compare import Tolerance, compare, tolerance

    if len(got) != len(want):
        return f"{len(got)} outputs, eager has {len(want)}"
    for i, (g, w) in enumerate(zip(got, want)):
        g = np.asarray(g)
        if g.dtype != w.dtype:
            return f"output {i}: dtype {g.dtype}, eager {w.dtype}"
        if g.shape != w.shape:
            return f"output {i}: shape {list(g.shape)}, eager {list(w.shape)}"
        if random or (ties and w.dtype == "int64"):
            continue
        tol = tolerance(str(w.dtype), runtime) if w.dtype.kind == "f" else Tolerance(0.0, 0.0, "exact")
        d = compare(g, w, tol)
        if not d.ok:
            return (f"output {i} {str(w.dtype)}{list(w.shape)}: {d.mismatched}/{d.total} elements differ, "
                    f"max abs {d.max_abs:.3g} ({d.tolerance}){' ' + d.note if d.note else ''}")
    return None


def _chain(e: BaseException) -> list[BaseException]:
    out, seen = [], set()
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        out.append(e)
        e = e.__cause__ or (e.__context__ if not e.__suppress_context__ else None)
    return out


def _pt2x_failure(e: BaseException) -> tuple[str, str]:
    """(class, message) for an exception out of ``to_onnx``/``to_tflite``/``to_pte``."""
    import re

    from pt2x.converters.errors import ConversionError

    msg = f"{type(e).__name__}: {e}"[:1500]
    if not isinstance(e, ConversionError):
        return "loud", msg + "\n" + "".join(traceback.format_exception(e))[-2500:]
    bug = [c for c in _chain(e)[1:] if type(c).__name__ in BUG_TYPE_NAMES]
    # the driver's ConversionError for a lowering's failure: "lowering ops_x.y: ZeroDivisionError: ..."
    m = re.search(r"lowering [\w.\[\]]+: (\w+): ", str(e))
    if bug or (m and m.group(1) in BUG_TYPE_NAMES):
        tb = "".join(traceback.format_exception(bug[0]))[-2500:] if bug else ""
        return "loud", f"{msg}\n{tb}" if tb else msg
    return "refused", msg


def _run_ort(model_bytes: bytes, names: list[str], inputs: list) -> tuple[str, object]:
    import onnxruntime as ort

    try:
        so = ort.SessionOptions()
        so.intra_op_num_threads = 1
        so.log_severity_level = 4
        sess = ort.InferenceSession(model_bytes, so, providers=["CPUExecutionProvider"])
    except Exception as e:  # noqa: BLE001 - the runtime refused the file
        return "load", f"ONNX Runtime rejects the file at load: {type(e).__name__}: {str(e)[:800]}"
    feed_names = [i.name for i in sess.get_inputs()]
    by_name = dict(zip(names, inputs))
    missing = [n for n in feed_names if n not in by_name]
    if missing:
        if len(feed_names) == len(inputs):
            by_name = dict(zip(feed_names, inputs))
        else:
            return "load", f"the file's inputs {feed_names} are not the program's {names}"
    try:
        return "ok", sess.run(None, {n: by_name[n] for n in feed_names})
    except Exception as e:  # noqa: BLE001
        return "run", f"ONNX Runtime fails at run: {type(e).__name__}: {str(e)[:800]}"


def _run_litert(data: bytes, names: list[str], inputs: list) -> tuple[str, object]:
    import numpy as np
    from ai_edge_litert.interpreter import Interpreter

    try:
        it = Interpreter(model_content=data, num_threads=1)
        details = it.get_input_details()
        dnames = [d["name"] for d in details]
        by_name = dict(zip(names, inputs))
        if all(n in by_name for n in dnames):
            arrays = [by_name[n] for n in dnames]
        elif len(details) == len(inputs):
            arrays = list(inputs)
        else:
            return "load", f"the file's inputs {dnames} are not the program's {names}"
        for d, x in zip(details, arrays):
            it.resize_tensor_input(d["index"], list(x.shape), strict=True)
        it.allocate_tensors()
    except Exception as e:  # noqa: BLE001
        return "load", f"LiteRT rejects the file at load/allocate: {type(e).__name__}: {str(e)[:800]}"
    try:
        for d, x in zip(details, arrays):
            it.set_tensor(d["index"], np.array(x, dtype=d["dtype"], order="C"))
        it.invoke()
        outs = []
        for d in it.get_output_details():
            if 0 in list(d["shape"]):  # LiteRT's get_tensor refuses a tensor of no elements
                outs.append(np.zeros(d["shape"], d["dtype"]))
            else:
                outs.append(it.get_tensor(d["index"]))
        return "ok", outs
    except Exception as e:  # noqa: BLE001
        return "run", f"LiteRT fails at run: {type(e).__name__}: {str(e)[:800]}"


def _run_executorch(data: bytes, inputs: list) -> tuple[str, object]:
    """``data`` (a .pte) run in ExecuTorch's runtime on ``inputs`` (torch tensors, the program's
    order, passed contiguous as the other columns pass C-order arrays: the runtime's Python binding
    takes no other strides): ("ok", numpy outputs), or ("load"/"run", why). A file the runtime
    aborts on kills the worker."""
    import torch
    from executorch.runtime import Runtime

    try:
        program = Runtime.get().load_program(data)  # reads ``data`` in place: it stays referenced below
        method = program.load_method("forward")
    except Exception as e:  # noqa: BLE001
        return "load", f"ExecuTorch rejects the file at load: {type(e).__name__}: {str(e)[:800]}"
    try:
        feeds = [x.clone(memory_format=torch.contiguous_format) for x in inputs]
        outs = [t.detach().numpy().copy() for t in method.execute(feeds)]
    except Exception as e:  # noqa: BLE001
        return "run", f"ExecuTorch fails at run: {type(e).__name__}: {str(e)[:800]}"
    finally:
        del method, program
    return "ok", outs


def _pte_bounds(ep, inputs: list) -> dict[str, int]:
    """``max_dims`` for ``to_pte``: each shape symbol torch left unbounded, by the user input dim
    that carries it, bounded at twice that dim's size in the sample (at least ``PTE_MIN_BOUND``)."""
    import sympy
    from torch.utils._sympy.numbers import int_oo

    unbounded = {str(s) for s, vr in ep.range_constraints.items()
                 if vr.upper == int_oo or (vr.upper.is_number and int(vr.upper) >= 2**62)}
    placeholders = {n.name: n for n in ep.graph.nodes if n.op == "placeholder"}
    bounds: dict[str, int] = {}
    for name, x in zip(ep.graph_signature.user_inputs, inputs):
        val = placeholders[name].meta.get("val")
        for dim, size in zip(getattr(val, "shape", ()), x.shape):
            expr = getattr(getattr(dim, "node", None), "expr", None)
            if isinstance(expr, sympy.Symbol) and str(expr) in unbounded:
                bounds[str(expr)] = max(bounds.get(str(expr), 0), 2 * size, PTE_MIN_BOUND)
    return bounds


class _Reporter:
    def __init__(self, conn):
        self.conn = conn

    def stage(self, case: str, stage: str) -> None:
        self.conn.send(("stage", case, stage))


def _run_one(op, dtype_name: str, index: int, sample, columns, tmpdir: str, report: _Reporter) -> CaseResult:
    import torch
    from torch.export import Dim
    from torch.utils._pytree import tree_flatten

    entry = _entry_name(op)
    case = f"{entry}[{dtype_name}#{index}]"
    r = CaseResult(case, entry, entry_family(op), dtype_name, index)
    t0 = time.monotonic()
    seed = _seed(case)
    leaves, spec = tree_flatten((sample.input, sample.args, sample.kwargs))
    tensor_pos = [i for i, x in enumerate(leaves) if isinstance(x, torch.Tensor)]
    r.desc = _describe(leaves, tensor_pos)
    inputs = [leaves[i].detach().clone() for i in tensor_pos]
    if any(_unsupported_dtype(t) for t in inputs):
        r.skipped = ("an input of a dtype or layout the harness leaves out (complex, low-precision float, "
                     "quantized, sparse)")
        return r
    module = _module(op.op, leaves, spec, tensor_pos)
    report.stage(case, "eager")
    try:
        want = _eager(module, inputs, seed)
        again = _eager(module, inputs, seed + 1)
    except Exception as e:  # noqa: BLE001 - torch refuses the sample: not a case
        r.skipped = f"eager raises {type(e).__name__}: {str(e)[:200]}"
        return r
    if not want or not all(isinstance(t, torch.Tensor) for t in want):
        r.skipped = "an output that is no tensor" if want else "no outputs"
        return r
    if any(_unsupported_dtype(t) for t in want):
        r.skipped = "an output of a dtype or layout the harness leaves out"
        return r
    r.random = op.name in RANDOM_NAMES or any(
        a.shape != b.shape or not torch.equal(a.nan_to_num(0.0) if a.is_floating_point() else a,
                                              b.nan_to_num(0.0) if b.is_floating_point() else b)
        or not torch.equal(a.isnan() if a.is_floating_point() else a, b.isnan() if b.is_floating_point() else b)
        for a, b in zip(want, again))
    want_np = [t.detach().contiguous().numpy().copy() for t in want]
    r.ties = op.name in TIE_NAMES and any(t.numel() > 1 and t.unique().numel() < t.numel() for t in inputs)
    report.stage(case, "export")
    ep = None
    dyn = tuple({0: Dim.AUTO} if t.dim() >= 1 else None for t in inputs)
    for dynamic in (True, False):
        try:
            torch.manual_seed(seed)
            ep = torch.export.export(module, tuple(x.clone() for x in inputs),
                                     dynamic_shapes=(dyn,) if dynamic and inputs else None)
            r.dynamic = dynamic and any(ep.range_constraints) if inputs else False
            break
        except Exception as e:  # noqa: BLE001
            err = e
    if ep is None:
        r.skipped = f"torch.export fails: {type(err).__name__}: {str(err).splitlines()[0][:200] if str(err) else ''}"
        return r
    path = os.path.join(tmpdir, "case.pt2")
    try:
        torch.export.save(ep, path)
    except Exception as e:  # noqa: BLE001
        r.skipped = f"torch.export.save fails: {type(e).__name__}: {str(e)[:200]}"
        return r
    names = list(ep.graph_signature.user_inputs)
    arrays = [x.numpy().copy() for x in inputs]

    def record(col: str, cls: str, detail: str = "") -> None:
        r.cls[col] = cls
        if detail:
            r.detail[col] = detail

    if "onnx" in columns:
        report.stage(case, "onnx")
        from pt2x.converters import to_onnx

        try:
            model = to_onnx(path).SerializeToString()
        except Exception as e:  # noqa: BLE001
            record("onnx", *_pt2x_failure(e))
        else:
            status, got = _run_ort(model, names, arrays)
            if status != "ok":
                record("onnx", "loud", got)
            else:
                why = _compare_outputs(got, want_np, "onnxruntime", r.random, r.ties)
                record("onnx", "wrong" if why else "match", why or "")
    if "torch.onnx" in columns:
        report.stage(case, "torch.onnx")
        try:
            import warnings

            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                prog = torch.onnx.export(ep, tuple(inputs), dynamo=True, verbose=False)
                model = prog.model_proto.SerializeToString()
        except Exception as e:  # noqa: BLE001 - torch.onnx refuses
            record("torch.onnx", "refused", f"{type(e).__name__}: {str(e)[:600]}")
        else:
            status, got = _run_ort(model, names, arrays)
            if status != "ok":
                record("torch.onnx", "loud", got)
            else:
                why = _compare_outputs(got, want_np, "onnxruntime", r.random, r.ties)
                record("torch.onnx", "wrong" if why else "match", why or "")
    if "tflite" in columns:
        report.stage(case, "tflite")
        from pt2x.converters import to_tflite

        try:
            data = to_tflite(path)
        except Exception as e:  # noqa: BLE001
            record("tflite", *_pt2x_failure(e))
        else:
            status, got = _run_litert(data, names, arrays)
            if status != "ok":
                record("tflite", "loud", got)
            else:
                why = _compare_outputs(got, want_np, "litert", r.random, r.ties)
                record("tflite", "wrong" if why else "match", why or "")
    if "pte" in columns:
        report.stage(case, "pte")
        from pt2x.converters import to_pte

        try:
            data = to_pte(path, max_dims=_pte_bounds(ep, inputs))
        except Exception as e:  # noqa: BLE001
            record("pte", *_pt2x_failure(e))
        else:
            status, got = _run_executorch(data, inputs)
            if status != "ok":
                record("pte", "loud", got)
            else:
                why = _compare_outputs(got, want_np, "executorch", r.random, r.ties)
                record("pte", "wrong" if why else "match", why or "")
    r.seconds = round(time.monotonic() - t0, 2)
    return r


def _import_runtimes(columns) -> None:
    """The runtimes (and converters) of ``columns``, imported once per worker, before its first case."""
    if "onnx" in columns or "torch.onnx" in columns:
        import onnxruntime  # noqa: F401
    if "tflite" in columns:
        from ai_edge_litert import interpreter  # noqa: F401
    if "pte" in columns:
        from executorch.runtime import Runtime

        Runtime.get()
        import pt2x.converters.pte.converter  # noqa: F401
    if "onnx" in columns or "tflite" in columns:
        import pt2x.converters.onnx  # noqa: F401


def _worker(conn, columns, samples_per_entry: int) -> None:
    """A worker: receives (entry, dtype, first pick), runs the entry's picked samples from that
    one on, sends ("stage", ...) before each step and ("case", result) after each case."""
    import tempfile
    import warnings

    warnings.simplefilter("ignore")
    os.environ.setdefault("TORCHDYNAMO_VERBOSE", "0")
    import logging

    logging.disable(logging.WARNING)
    import torch

    torch.set_num_threads(1)
    from torch.testing._internal.common_methods_invocations import op_db

    _import_runtimes(columns)
    try:
        from pt2x.tools.process_limits import limit_address_space

        limit_address_space(WORKER_MEMORY_MIB)
    except Exception:  # noqa: BLE001 - a limit is a courtesy here
        pass
    ops = {_entry_name(op): op for op in op_db}
    report = _Reporter(conn)
    conn.send(("ready",))
    with tempfile.TemporaryDirectory(prefix="pt2x-opinfo-") as tmpdir:
        while True:
            msg = conn.recv()
            if msg is None:
                return
            entry, dtype_name, start = msg
            op = ops[entry]
            dtype = getattr(torch, dtype_name)
            report.stage(f"{entry}[{dtype_name}]", "samples")
            try:
                torch.manual_seed(_seed(f"{entry}[{dtype_name}]"))
                samples = []
                for s in op.sample_inputs("cpu", dtype, requires_grad=False):
                    samples.append(s)
                    if len(samples) >= MAX_SAMPLES_SCANNED:
                        break
                picks = _pick_samples(samples, samples_per_entry)
            except Exception as e:  # noqa: BLE001
                conn.send(("samples_failed", f"{type(e).__name__}: {str(e)[:200]}"))
                continue
            conn.send(("picks", picks))
            for index in picks[start:]:
                try:
                    r = _run_one(op, dtype_name, index, samples[index], columns, tmpdir, report)
                except Exception as e:  # noqa: BLE001 - the harness's own failure: reported, not fatal
                    r = CaseResult(f"{entry}[{dtype_name}#{index}]", entry, entry_family(op), dtype_name, index,
                                   skipped=f"harness error {type(e).__name__}: {str(e)[:300]}")
                conn.send(("case", asdict(r)))
            conn.send(("done",))


# ============================================================================ parent side


class _Worker:
    def __init__(self, ctx, columns, samples):
        self.ctx, self.columns, self.samples = ctx, columns, samples
        self.proc = None
        self.start()

    def start(self):
        parent, child = self.ctx.Pipe()
        self.proc = self.ctx.Process(target=_worker, args=(child, self.columns, self.samples), daemon=True)
        self.proc.start()
        child.close()
        self.conn = parent
        self.tasks = 0
        self.ready = False
        self.task = None
        self.picks = None
        self.stage = None
        self.done_in_task = 0
        self.deadline = time.monotonic() + 300

    def kill(self):
        if self.proc.is_alive():
            self.proc.kill()
        self.proc.join(10)
        self.conn.close()


def run_cases(entries: list[str], dtypes_of: dict[str, list[str]], *, samples: int = 2, jobs: int = 1,
              columns=COLUMNS, timeout: float = DEFAULT_TIMEOUT, max_tasks_per_child: int = 40,
              progress=None) -> list[CaseResult]:
    """Run every (entry, dtype) in workers; the results sorted by case."""
    from multiprocessing.connection import wait

    ctx = multiprocessing.get_context("spawn")
    pending = [(e, d, 0) for e in entries for d in dtypes_of[e]]
    pending.reverse()
    results: list[CaseResult] = []
    workers = [_Worker(ctx, tuple(columns), samples) for _ in range(max(1, min(jobs, len(pending) or 1)))]
    family_of: dict[str, str] = {}

    def died(w: _Worker, why: str):
        entry, dtype_name, start = w.task
        if w.picks is None or w.stage is None or w.stage[1] == "samples":
            results.append(CaseResult(f"{entry}[{dtype_name}]", entry, family_of.get(entry, ""), dtype_name, -1,
                                      skipped=f"sample generation {why}"))
        else:
            case, stage = w.stage
            index = w.picks[start + w.done_in_task]
            r = CaseResult(case, entry, family_of.get(entry, ""), dtype_name, index)
            if stage in columns:
                r.cls[stage] = "loud"
                r.detail[stage] = f"worker {why} in {stage}"
            else:
                r.skipped = f"worker {why} in {stage}"
            results.append(r)
            if progress:
                progress(r)
            nxt = start + w.done_in_task + 1
            if nxt < len(w.picks):
                pending.append((entry, dtype_name, nxt))
        w.kill()
        w.start()

    try:
        while pending or any(w.task for w in workers):
            for w in workers:
                if w.ready and w.task is None and pending:
                    if w.tasks >= max_tasks_per_child:
                        w.conn.send(None)
                        w.kill()
                        w.start()
                        continue
                    w.task = pending.pop()
                    w.tasks += 1
                    w.picks, w.stage, w.done_in_task = None, None, 0
                    w.deadline = time.monotonic() + timeout
                    w.conn.send(w.task)
            ready = wait([w.conn for w in workers] + [w.proc.sentinel for w in workers], timeout=1.0)
            now = time.monotonic()
            for w in workers:
                if w.conn in ready:
                    try:
                        msg = w.conn.recv()
                    except (EOFError, OSError):
                        msg = ("eof",)
                    kind = msg[0]
                    if kind == "ready":
                        w.ready = True
                        w.deadline = now + timeout
                    elif kind == "stage":
                        w.stage = (msg[1], msg[2])
                    elif kind == "picks":
                        w.picks = msg[1]
                    elif kind == "samples_failed":
                        entry, dtype_name, _ = w.task
                        results.append(CaseResult(f"{entry}[{dtype_name}]", entry, "", dtype_name, -1,
                                                  skipped=f"sample_inputs raises {msg[1]}"))
                        w.task = None
                    elif kind == "case":
                        r = CaseResult(**msg[1])
                        family_of[r.entry] = r.family
                        results.append(r)
                        w.done_in_task += 1
                        w.deadline = now + timeout
                        if progress:
                            progress(r)
                    elif kind == "done":
                        w.task = None
                    elif kind == "eof":
                        if w.task:
                            died(w, f"died ({_exit_text(w.proc)})")
                        else:
                            w.kill()
                            w.start()
                elif w.proc.sentinel in ready and not w.proc.is_alive() and not w.conn.poll():
                    if w.task:
                        died(w, f"died ({_exit_text(w.proc)})")
                    else:
                        w.kill()
                        w.start()
                elif now > w.deadline and (w.task or not w.ready):
                    if w.task:
                        died(w, f"timed out after {timeout:.0f} s")
                    else:
                        w.kill()
                        w.start()
    finally:
        for w in workers:
            try:
                w.conn.send(None)
            except (OSError, ValueError):
                pass
            w.kill()
    return sorted(results, key=lambda r: (r.entry, r.dtype, r.sample))


def _exit_text(proc) -> str:
    proc.join(5)
    rc = proc.exitcode
    if rc is None:
        return "still running"
    if rc < 0:
        import signal

        try:
            return signal.Signals(-rc).name
        except ValueError:
            return f"signal {-rc}"
    return f"exit status {rc}"


# ============================================================================ report


def counts(results: list[CaseResult]) -> dict[str, Counter]:
    """column -> class -> cases."""
    out = {c: Counter() for c in COLUMNS}
    for r in results:
        for col, cls in r.cls.items():
            out[col][cls] += 1
    return out


def format_table(results: list[CaseResult], columns=COLUMNS, title: str = "") -> str:
    cases = [r for r in results if not r.skipped]
    skipped = [r for r in results if r.skipped]
    entries = {r.entry for r in results}
    c = counts(results)
    out = [title] if title else []
    out.append(f"{len(entries)} entries, {len(cases)} cases run ({sum(r.dynamic for r in cases)} with a dynamic "
               f"first dim, {sum(r.random for r in cases)} random: shape and dtype only), {len(skipped)} skipped")
    out.append("")
    out.append(f"| {'column':<12} | {'match':>6} | {'silently wrong':>14} | {'refused':>7} | {'loud error':>10} |")
    out.append(f"|{'-' * 14}|{'-' * 8}|{'-' * 16}|{'-' * 9}|{'-' * 12}|")
    for col in columns:
        k = c[col]
        out.append(f"| {COLUMN_LABELS[col]:<12} | {k['match']:>6} | {k['wrong']:>14} | {k['refused']:>7} "
                   f"| {k['loud']:>10} |")
    out.append("")
    why = Counter(r.skipped.split(":")[0][:60] for r in skipped)
    if why:
        out.append("skipped (torch itself cannot run or export the case, or a dtype left out):")
        out += [f"  {n:5d}  {k}" for k, n in why.most_common()]
        out.append("")
    for cls in ("wrong", "loud"):
        for col in columns:
            bad = [r for r in cases if r.cls.get(col) == cls]
            if bad:
                out.append(f"== {col}: {'silently wrong' if cls == 'wrong' else 'loud error'} ({len(bad)})")
                for r in bad:
                    out.append(f"  {r.case} ({r.desc[:120]}): {r.detail.get(col, '').splitlines()[0][:300]}")
                out.append("")
    refused = Counter()
    for r in cases:
        for col in PT2X_COLUMNS:
            if r.cls.get(col) == "refused":
                refused[(col, _refusal_kind(r.detail.get(col, "")))] += 1
    if refused:
        out.append("pt2x refusals by operator:")
        out += [f"  {n:5d}  {col}: {k}" for (col, k), n in sorted(refused.items(), key=lambda kv: (-kv[1], kv[0]))]
    for col in (c for c in columns if c in PT2X_COLUMNS):
        missing = unlowered_overloads(cases, col)
        if missing:
            out.append("")
            out.append(f"{col}: the overloads with no lowering, by the refused cases that name each "
                       f"(top {TOP_UNLOWERED} of {len(missing)}):")
            out += [f"  {n:5d}  {op}" for op, n in missing.most_common(TOP_UNLOWERED)]
    return "\n".join(out) + "\n"


TOP_UNLOWERED = 30


def unlowered_overloads(results: list[CaseResult], column: str) -> Counter:
    """overload -> the refused cases of ``column`` whose ``UnsupportedOpsError`` names it as having
    no lowering (a case naming several counts for each): what a new lowering would convert."""
    import re

    out = Counter()
    for r in results:
        if r.cls.get(column) != "refused":
            continue
        lines = r.detail.get(column, "").splitlines()
        named = {m.group(1) for line, why in zip(lines, lines[1:])
                 if (m := re.match(r"\s+((?:aten|prims|_operator)\.[\w.]+)\s+x\d+", line)) and "no " in why
                 and " lowering" in why}
        out.update(named)
    return out


def _refusal_kind(msg: str) -> str:
    import re

    ops = re.findall(r"\b(aten\.[\w.]+|prims\.[\w.]+)", msg)
    return ", ".join(sorted(set(ops))[:4]) if ops else msg.splitlines()[0][:100] if msg else "?"


# ============================================================================ main


def _parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("-k", "--filter", action="append", default=[],
                   help="run only entries whose name contains this (repeatable)")
    p.add_argument("--entries", type=int, default=0, help="a stratified subset of this many entries (select_entries)")
    p.add_argument("--samples", type=int, default=2, help="sample inputs per entry and dtype (default 2)")
    p.add_argument("--dtypes", default=",".join(DEFAULT_DTYPES),
                   help=f"dtypes to try, where the entry supports them (default {','.join(DEFAULT_DTYPES)})")
    p.add_argument("--jobs", type=int, default=1, help="worker processes (default 1)")
    p.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT, help="seconds per case")
    p.add_argument("--max-tasks-per-child", type=int, default=40, help="entries a worker runs before it is restarted")
    p.add_argument("--targets", default=",".join(COLUMNS),
                   help=f"the columns to run, comma-separated (default {','.join(COLUMNS)}; --targets pte: that one)")
    p.add_argument("--no-torch-onnx", action="store_true", help="leave out the torch.onnx column")
    p.add_argument("--out", help="write the JSON of every case here")
    p.add_argument("--table", help="write the table here as well as printing it")
    p.add_argument("--verbose", action="store_true", help="one line per case as it finishes")
    p.add_argument("--ci", action="store_true", help=f"the CI subset: --entries {CI_ENTRIES} --samples {CI_SAMPLES} "
                                                     f"--dtypes {','.join(CI_DTYPES)} --no-torch-onnx")
    p.add_argument("--write-known", metavar="FILE", help="write the refused cases (one 'case column' a line) here: "
                                                         "tests/converters/opinfo_known_refused.txt with --ci")
    args = p.parse_args(argv)
    if args.ci:
        args.entries, args.samples, args.dtypes, args.no_torch_onnx = CI_ENTRIES, CI_SAMPLES, ",".join(CI_DTYPES), True
    targets = [t.strip() for t in args.targets.split(",") if t.strip()]
    unknown = [t for t in targets if t not in COLUMNS]
    if unknown or not targets:
        p.error(f"--targets {args.targets!r}: the columns are {', '.join(COLUMNS)}")
    args.columns = tuple(c for c in COLUMNS if c in targets and not (args.no_torch_onnx and c == "torch.onnx"))
    if not args.columns:
        p.error("no column left to run")
    return args


def refused_lines(results: list[CaseResult]) -> list[str]:
    """``<case> <column>`` for every pt2x refusal, sorted: the known-refusals list's lines."""
    return sorted(f"{r.case} {col}" for r in results for col in PT2X_COLUMNS if r.cls.get(col) == "refused")


def write_known(path: str, results: list[CaseResult]) -> None:
    with open(path, "w", encoding="utf-8") as f:
        f.write("# pt2x refusals on the OpInfo CI subset (scripts/conformance_opinfo.py --ci), one\n"
                "# '<case> <column>' a line. tests/converters/test_opinfo_conformance.py fails on a refusal not\n"
                "# listed here; remove lines as lowerings land (a listed case that converts is fine).\n"
                "# Regenerate: python -m scripts.conformance_opinfo --ci --jobs 2 --write-known <this file>\n"
                "# (with executorch installed: without it the pte column does not run and its lines drop)\n")
        f.writelines(line + "\n" for line in refused_lines(results))


def plan(filters=(), entries: int = 0, dtypes=DEFAULT_DTYPES) -> tuple[list[str], dict[str, list[str]]]:
    """The entries to run and each one's dtypes (those of ``dtypes`` it supports on CPU)."""
    import torch
    from torch.testing._internal.common_methods_invocations import op_db

    names = select_entries(op_db, entries) if entries else entry_names(op_db)
    if filters:
        names = [n for n in names if any(f in n for f in filters)]
    chosen = set(names)
    dtypes_of = {}
    for op in op_db:
        n = _entry_name(op)
        if n in chosen:
            supported = {str(d).replace("torch.", "") for d in op.supported_dtypes("cpu")}
            dtypes_of[n] = [d for d in dtypes if d in supported and hasattr(torch, d)]
    return names, dtypes_of


def main(argv=None) -> int:
    args = _parse_args(argv)
    columns = args.columns
    names, dtypes_of = plan(args.filter, args.entries, tuple(args.dtypes.split(",")))
    t0 = time.monotonic()
    done = [0]

    partial = open(args.out + ".partial", "w", encoding="utf-8") if args.out else None

    def progress(r: CaseResult) -> None:
        done[0] += 1
        if partial:
            partial.write(json.dumps(asdict(r), sort_keys=True) + "\n")
            partial.flush()
        if args.verbose:
            cls = " ".join(f"{c}={r.cls.get(c, '-')}" for c in columns)
            print(f"[{done[0]}] {r.case}: {r.skipped[:100] if r.skipped else cls} ({r.seconds:.1f} s)", flush=True)
        elif done[0] % 100 == 0:
            print(f"... {done[0]} cases, {time.monotonic() - t0:.0f} s", file=sys.stderr, flush=True)

    results = run_cases(names, dtypes_of, samples=args.samples, jobs=args.jobs, columns=columns,
                        timeout=args.timeout, max_tasks_per_child=args.max_tasks_per_child, progress=progress)
    import torch

    title = (f"torch {torch.__version__} OpInfo op_db through {', '.join(COLUMN_RUNS[c] for c in columns)}: "
             f"{len(names)} entries, --samples {args.samples}, dtypes {args.dtypes}; "
             f"{time.monotonic() - t0:.0f} s, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    table = format_table(results, columns, title)
    print(table)
    if args.table:
        with open(args.table, "w", encoding="utf-8") as f:
            f.write(table)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            json.dump([asdict(r) for r in results], f, indent=0, sort_keys=True)
    if args.write_known:
        write_known(args.write_known, results)
    return 1 if any(r.cls.get(c) in ("wrong", "loud") for r in results for c in PT2X_COLUMNS) else 0


if __name__ == "__main__":
    sys.exit(main())
