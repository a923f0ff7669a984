"""Structure-aware fuzzer for pt2x's readers: ``python -m fuzz.fuzz --n 2000``.

Each case is a committed fixture (``tests/fixtures/pt2/torch-*/``, every torch release)
with one to four mutations from ``fuzz_mutations.py`` (JSON fields, zip members, weight
files and pickles, header bytes, code-running payloads), made from ``(seed, index)``
alone, so ``--replay SEED:INDEX`` rebuilds it exactly. Each case goes through stages,
each (but cli) only if the one before succeeded:

  load      ``pt2x.serde.load`` and every array of every model summed, as a user would
  validate  ``serde.validate.validate_archive`` (findings as ``--json`` prints them) and
            ``serde.compat.check_target`` for a torch release
  onnx      ``pt2x.converters.to_onnx`` for every model, serialized
  tflite    ``pt2x.converters.to_tflite`` for every model (needs only load to have succeeded)
  explorer  the Model Explorer adapter's graphs (``pt2x.explorer.program_graphs``) of the file,
            as JSON (reads the file itself; needs only load to have succeeded)
  cli       ``pt2x inspect`` (text and --json), ``pt2x validate`` (text, and --json with a
            --target), ``pt2x convert --to pt2 --target-schema`` for a release and for 8.8
            or 8.2 in turn where that is another schema (the torch 2.8 and 2.6 layouts;
            each output must load again), in
            process, printing to strict UTF-8; runs after a refusal too
  scan      ``pt2x scan``'s discovery over a tree holding the case: link loops, a link to the
            case, a FIFO, deep folders (``fuzz_scan_stages.py``; every 25th case): quick,
            regular files only, each file once
  resume    ``pt2x scan --resume`` over a results file of mutated records: records or a
            ``Pt2UsageError``, nothing else (``fuzz_scan_stages.py``; every 5th case)

With ``--onnx`` the cases are ONNX models instead (``fuzz_onnx_mutations.py``: pt2x's own
``to_onnx`` output of fixtures and hand-built graphs, mutated as ModelProtos or as bytes,
some pointing at external data inside, beside (a symlink) or outside their folder), through
the stages

  tflite-onnx  ``to_tflite`` of the ``.onnx`` file and of the parsed ``ModelProto``;
               external data outside the model's folder must be refused
  cli-onnx     ``pt2x convert X.onnx --to tflite -o Y``

in long-lived worker processes (``pt2x.tools.supervised``, as ``pt2x scan``'s), one case at
a time, each case under a time limit (the parent dumps the worker's stack, kills it and
starts another) and an address-space limit (``RLIMIT_AS`` = the worker's size after
imports + ``--memory`` MiB).

Outcomes per stage: ``ok``, ``pt2error:<Class>`` (pt2x refused the file: fine),
``escape:<Type>`` (any other exception: the bug class), ``timeout``, ``memory``
(MemoryError, the worker killed by the system, or dead after an allocation failure),
``crash`` (the worker died).
Workers run in an empty directory; payloads create ``PT2X_FUZZ_MARKER`` there if
anything in a file is ever executed, and the run fails loudly if anything appears.

The summary lists every distinct site (exception type + innermost pt2x frame) with a
replay command; ``--out DIR`` keeps the smallest reproducer per site (the .pt2 and a
JSON with seed, index, mutations, stage, outcome, exception and frame). Exit status 1
when any escape, timeout, memory blow-up, crash or marker happened, else 0.

    python -m fuzz.fuzz --n 2000 --seed 1 --out fuzz-out
    python -m fuzz.fuzz --replay 1:417            # one case again, with its traceback
    python -m fuzz.fuzz --replay fuzz-out/s1-i417.pt2
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import os
import re
import select
import shutil
import signal
import sys
import tempfile
import time
import traceback
from collections import Counter, defaultdict, deque
from dataclasses import asdict, dataclass, field
from pathlib import Path

from pt2x.tools.supervised import Supervised, child_channel, exit_text

__all__ = [
    "STAGES",
    "FuzzConfig",
    "StageResult",
    "CaseResult",
    "FuzzReport",
    "default_fixtures",
    "fuzz",
    "run_files",
    "replay",
    "main",
    "worker_main",
]

STAGES = ("load", "validate", "onnx", "tflite", "explorer", "cli", "scan", "resume")
ONNX_STAGES = ("tflite-onnx", "cli-onnx")
"""The stages of an ``--onnx`` run (cases are ``.onnx`` models, not archives)."""
_SELFTEST = ("selftest-sleep", "selftest-alloc", "selftest-crash", "selftest-escape", "selftest-marker")
"""Stages that misbehave on purpose, so tests can check the fuzzer's own verdicts."""

_HERE = os.path.dirname(os.path.abspath(__file__))  # fuzz/: the fuzzer and its mutation modules
_PKG = Path(_HERE).parent  # the repository root is the pt2x package, and holds the fuzz package
_TARGETS = ("torch==2.6", "torch==2.8", "torch==2.10", "8.20")
_OLD_LAYOUTS = ("8.8", "8.2")  # cli: convert --to pt2 for these too (torch 2.8's and 2.6's layouts)
_BAD = ("escape", "timeout", "memory", "crash", "generror")
_READY_TIMEOUT = 120.0


def default_fixtures() -> list[str]:
    """Every committed fixture: ``tests/fixtures/pt2/torch-*/*.pt2`` (all torch releases), sorted."""
    return sorted(str(p) for p in (_PKG / "tests" / "fixtures" / "pt2").glob("torch-*/*.pt2"))


def _fixture_files(dirs_or_files: list[str] | None) -> list[str]:
    if not dirs_or_files:
        return default_fixtures()
    out: list[str] = []
    for d in dirs_or_files:
        p = Path(d)
        out += [str(x.resolve()) for x in sorted(p.glob("*.pt2"))] if p.is_dir() else [str(p.resolve())]
    if not out:
        raise SystemExit(f"no .pt2 fixtures in {dirs_or_files}")
    return sorted(out)


def _rel(path: str) -> str:
    try:
        return str(Path(path).resolve().relative_to(_PKG))
    except ValueError:
        return path


# ============================================================================ results


@dataclass
class StageResult:
    """What one stage did with one case."""

    stage: str
    outcome: str  # ok | pt2error:<Class> | escape:<Type> | timeout | memory | crash | generror:<Type>
    exception: str | None = None  # exception type, or "signal SIGSEGV" / "exit 3" for a dead worker
    message: str | None = None
    site: str | None = None  # innermost pt2x frame: "serde/codec/json_codec.py:123 (_decode)"
    frame: str | None = None  # innermost frame anywhere (numpy, zipfile, ...)
    seconds: float = 0.0

    @property
    def bad(self) -> bool:
        return self.outcome.split(":", 1)[0] in _BAD

    @property
    def kind(self) -> str:
        return self.outcome.split(":", 1)[0]


@dataclass
class CaseResult:
    """One case: where it came from, its stage results, and whether the marker appeared."""

    seed: int | None
    index: int | None
    file: str | None = None  # set when a saved file was run instead of a generated case
    fixture: str | None = None
    steps: list[str] = field(default_factory=list)
    size: int = 0
    sha256: str | None = None
    stages: list[StageResult] = field(default_factory=list)
    marker: list[str] = field(default_factory=list)  # files that appeared in the worker's directory
    traceback: str | None = None
    seconds: float = 0.0
    onnx: bool = False  # an ONNX-input case (--onnx)

    @property
    def bad(self) -> bool:
        return bool(self.marker) or any(s.bad for s in self.stages)

    @property
    def first_bad(self) -> StageResult | None:
        return next((s for s in self.stages if s.bad), None)

    @property
    def label(self) -> str:
        return self.file if self.file else f"{self.seed}:{self.index}"

    def replay_command(self) -> str:
        return f"python -m fuzz.fuzz --replay {self.label}" + (" --onnx" if self.onnx and not self.file else "")


@dataclass
class FuzzConfig:
    """Options of one run (the command line's, as an API)."""

    n: int = 1000
    seed: int = 0
    jobs: int = 1
    timeout: float = 10.0
    memory_mib: int = 2048
    stages: tuple[str, ...] = STAGES
    fixtures: list[str] | None = None  # .pt2 files; None: default_fixtures()
    out: str | None = None
    max_failures: int = 0  # stop after this many bad cases (0: never)
    progress: bool = False
    start: int = 0  # first case index
    onnx: bool = False  # cases are mutated ONNX models (fuzz_onnx_mutations), through ONNX_STAGES


@dataclass
class FuzzReport:
    """Every case's result, the wall time, and the summary built from them."""

    config: FuzzConfig
    results: list[CaseResult]
    wall: float
    saved: dict[str, str] = field(default_factory=dict)  # site key -> reproducer path
    late_marker: list[str] = field(default_factory=list)  # marker files seen only after the last case

    @property
    def bad(self) -> list[CaseResult]:
        return [r for r in self.results if r.bad]

    @property
    def failed(self) -> bool:
        """Any escape, timeout, memory blow-up, crash, fuzzer error or marker."""
        return bool(self.bad or self.late_marker)

    @property
    def marker_hits(self) -> list[CaseResult]:
        return [r for r in self.results if r.marker]

    def sites(self) -> dict[tuple[str, str, str], list[CaseResult]]:
        """(stage, outcome, site) -> cases, for every bad stage result."""
        out: dict[tuple[str, str, str], list[CaseResult]] = defaultdict(list)
        for r in self.results:
            b = r.first_bad
            if b is not None:
                out[(b.stage, b.outcome, b.site or "(no pt2x frame)")].append(r)
        return dict(out)

    def summary(self) -> str:
        return _summary(self)


# ============================================================================ worker side


class _Ctx:
    """A case's state passed from stage to stage inside a worker."""

    def __init__(self, data: bytes, index: int, path: str, scratch: str):
        self.data = data
        self.index = index
        self.path = path  # the case as a file (the command line reads files)
        self.scratch = scratch  # a folder for what the command line writes
        self.archive = None


_BIG_ARRAY = 1 << 24
_NOTE = None  # the worker's channel, for notes about the array being touched


def _touch(arr, where: str) -> None:
    """Read every element of an array as a user would (a sum). Before a big one, tell the
    parent which array it is, so a timeout here names it."""
    import numpy as np

    a = np.asarray(arr)
    if a.size > _BIG_ARRAY and _NOTE is not None:
        _NOTE.send(event="note", text=f"touching {where}: shape {a.shape}, strides {a.strides}, dtype {a.dtype}"[:300])
    if a.dtype.kind == "c":
        a.sum()
    else:
        a.sum(dtype=np.float64)


def _stage_load(ctx: _Ctx) -> None:
    import pt2x.serde

    ctx.archive = archive = pt2x.serde.load(ctx.data)
    repr(archive)
    for m in archive.models.values():
        for kind, arrays in (("state_dict", m.state_dict), ("constants", m.constants)):
            for fqn, arr in arrays.items():
                _touch(arr, f"models[{m.name!r}].{kind}[{fqn!r}]")
    for b in archive.extra.values():
        len(b)


def _stage_validate(ctx: _Ctx) -> None:
    from pt2x.serde.compat.plan import check_target
    from pt2x.serde.validate import validate_archive

    findings = validate_archive(ctx.archive, check_crc=True)
    json.dumps([f.as_dict() for f in findings])
    findings = check_target(ctx.archive, _TARGETS[ctx.index % len(_TARGETS)])
    json.dumps([f.as_dict() for f in findings])


def _stage_onnx(ctx: _Ctx) -> None:
    from pt2x.converters import to_onnx

    for name in list(ctx.archive.models):
        to_onnx(ctx.archive, model=name).SerializeToString()


def _stage_explorer(ctx: _Ctx) -> None:
    from pt2x.explorer.program_graph import program_graphs

    json.dumps(program_graphs(ctx.data))


def _stage_tflite(ctx: _Ctx) -> None:
    from pt2x.converters import to_tflite

    for name in list(ctx.archive.models):
        to_tflite(ctx.archive, model=name)


class OutsideDataRead(Exception):
    """An ONNX model whose external data lies outside its folder was converted, not refused."""


class BadOutput(Exception):
    """A conversion reported success but wrote something that is not a TFLite flatbuffer."""


def _check_tflite(data: bytes, what: str) -> None:
    if len(data) < 8 or data[4:8] != b"TFL3":
        raise BadOutput(f"{what} returned {len(data)} bytes without the TFL3 identifier")


def _onnx_case_file(ctx: _Ctx) -> tuple[str, list[str]]:
    """The case as ``model.onnx`` in its laid-out folder, and the locations it reads from outside it."""
    from fuzz import fuzz_onnx_mutations as fom

    folder = fom.case_folder(ctx.scratch)
    path = os.path.join(folder, fom.MODEL_NAME)
    with open(path, "wb") as f:
        f.write(ctx.data)
    return path, fom.outside_locations(ctx.data, folder)


def _stage_tflite_onnx(ctx: _Ctx) -> None:
    """``to_tflite`` of the ``.onnx`` file, then of the parsed ``ModelProto`` (when it parses)."""
    from pt2x.converters import to_tflite
    from pt2x.serde.errors import Pt2Error
    from fuzz import fuzz_onnx_mutations as fom

    path, outside = _onnx_case_file(ctx)
    refused: Pt2Error | None = None
    try:
        _check_tflite(to_tflite(path), "to_tflite(path)")
        if outside:
            raise OutsideDataRead(f"to_tflite read external data at {outside} outside the model's folder")
    except Pt2Error as e:
        refused = e
    proto = fom.parse(ctx.data)
    if proto is not None:
        try:
            _check_tflite(to_tflite(proto), "to_tflite(ModelProto)")
        except Pt2Error as e:
            refused = refused or e
    if refused is not None:
        raise refused


def _stage_cli_onnx(ctx: _Ctx) -> None:
    """``pt2x convert X.onnx --to tflite -o Y`` in process (see ``_stage_cli``)."""
    from pt2x.serde.errors import Pt2Error
    from pt2x.tools import cli

    path, outside = _onnx_case_file(ctx)
    out = os.path.join(os.path.dirname(path), "out.tflite")
    if os.path.exists(out):
        os.unlink(out)
    args = cli.build_parser().parse_args(["convert", path, "--to", "tflite", "-o", out])
    with _quiet_stdio():
        rc = args.func(args)
    if rc == 0:
        with open(out, "rb") as f:
            _check_tflite(f.read(), "pt2x convert --to tflite")
        if outside:
            raise OutsideDataRead(f"pt2x convert read external data at {outside} outside the model's folder")
    elif not isinstance(rc, int):
        raise Pt2Error(f"pt2x convert returned {rc!r}")


class _quiet_stdio:
    """stdout strict UTF-8 (as a UTF-8 terminal or pipe is), stderr backslash-replacing (as
    Python's is), both discarded."""

    def __enter__(self):
        self.saved = sys.stdout, sys.stderr
        sys.stdout = io.TextIOWrapper(_Discard(), encoding="utf-8", errors="strict", write_through=True)
        sys.stderr = io.TextIOWrapper(_Discard(), encoding="utf-8", errors="backslashreplace", write_through=True)

    def __exit__(self, *exc):
        sys.stdout, sys.stderr = self.saved


def _selftest(what: str) -> None:
    if what == "selftest-sleep":
        time.sleep(3600)
    elif what == "selftest-alloc":
        bytearray(1 << 40)
    elif what == "selftest-crash":
        os.kill(os.getpid(), signal.SIGSEGV)
    elif what == "selftest-escape":
        {}["selftest"]
    elif what == "selftest-marker":
        from fuzz.fuzz_mutations import MARKER

        Path(MARKER).touch()


class RoundTripError(Exception):
    """pt2x could not read a file it wrote itself (``pt2x convert --to pt2``)."""


class _Discard(io.RawIOBase):
    """A byte sink: what the command line prints is encoded, then dropped."""

    def writable(self) -> bool:
        return True

    def write(self, b) -> int:
        return len(b)


def _cli_commands(path: str, out: str, index: int) -> list[list[str]]:
    from pt2x.serde.compat.releases import parse_target

    target = _TARGETS[index % len(_TARGETS)]
    old = _OLD_LAYOUTS[(index // len(_TARGETS)) % len(_OLD_LAYOUTS)]  # one per case, in turn
    writes = [target] + ([old] if parse_target(old) != parse_target(target) else [])  # torch==2.6 is 8.2
    return [
        ["inspect", path],
        ["inspect", "--json", path],
        ["validate", path],
        ["validate", "--json", "--target", target, path],
        *(["convert", path, "--to", "pt2", "--target-schema", t, "-o", out] for t in writes),
    ]


def _stage_cli(ctx: _Ctx) -> None:
    """``pt2x inspect / validate / convert --to pt2`` on the case, in process, with stdout strict
    UTF-8 (as a UTF-8 terminal or pipe is) and stderr backslash-replacing (as Python's is). Each
    command's own error handling is what is tested: a Pt2Error is its refusal, anything else a bug.
    A pt2 it writes must load again."""
    import pt2x.serde
    from pt2x.serde.errors import Pt2Error
    from pt2x.tools import cli

    out = os.path.join(ctx.scratch, f"cli-out-{os.getpid()}.pt2")
    parser = cli.build_parser()
    refused: Pt2Error | None = None
    saved = sys.stdout, sys.stderr
    try:
        for argv in _cli_commands(ctx.path, out, ctx.index):
            if _NOTE is not None:
                _NOTE.send(event="tick", text=f"pt2x {' '.join(argv[:-1] if argv[0] != 'convert' else argv[-4:-2])}")
            if os.path.exists(out):
                os.unlink(out)
            sys.stdout = io.TextIOWrapper(_Discard(), encoding="utf-8", errors="strict", write_through=True)
            sys.stderr = io.TextIOWrapper(_Discard(), encoding="utf-8", errors="backslashreplace", write_through=True)
            args = parser.parse_args(argv)
            try:
                rc = args.func(args)
            except Pt2Error as e:
                refused = refused or e
                continue
            if argv[0] == "convert" and rc == 0:
                try:
                    with pt2x.serde.load(out) as written:
                        for m in written.models.values():
                            for arr in list(m.state_dict.values()) + list(m.constants.values()):
                                _touch(arr, "the written pt2")
                except Pt2Error as e:
                    raise RoundTripError(f"pt2x convert --to pt2 wrote a file pt2x cannot read: {e}") from e
    finally:
        sys.stdout, sys.stderr = saved
    if refused is not None:
        raise refused


def _stage_scan(ctx: _Ctx) -> None:
    from fuzz import fuzz_scan_stages

    fuzz_scan_stages.stage_scan(ctx.scratch, ctx.path, ctx.index)


def _stage_resume(ctx: _Ctx) -> None:
    from fuzz import fuzz_scan_stages

    fuzz_scan_stages.stage_resume(ctx.scratch, ctx.index)


_STAGE_FUNCS = {"load": _stage_load, "validate": _stage_validate, "onnx": _stage_onnx, "tflite": _stage_tflite,
                "explorer": _stage_explorer, "cli": _stage_cli, "scan": _stage_scan, "resume": _stage_resume,
                "tflite-onnx": _stage_tflite_onnx, "cli-onnx": _stage_cli_onnx}
_NEEDS = {"load": "chain", "validate": "chain", "onnx": "chain", "tflite": "load", "explorer": "load", "cli": None,
          "scan": None, "resume": None, "tflite-onnx": None, "cli-onnx": None}
"""What a stage needs before it runs: ``chain`` every stage before it succeeded, ``load`` the
load stage succeeded (it uses the loaded archive), None nothing (it reads the file itself; it
runs unless an earlier stage went wrong, a refusal by pt2x being fine)."""
_INDEPENDENT = {s for s, need in _NEEDS.items() if need is None}


def _frames_site(frames: list[tuple[str, int, str]]) -> tuple[str | None, str | None]:
    """(innermost pt2x frame, innermost frame) from (file, line, func), outermost first."""
    site = None
    inner = None
    for filename, line, func in frames:
        if filename.startswith("<"):  # <string>, <frozen ...>: no file
            continue
        path = os.path.abspath(filename)
        inner = f"{_short_path(path)}:{line} ({func})"
        if path.startswith(str(_PKG) + os.sep) and not os.path.basename(path).startswith("fuzz"):
            site = f"{_short_path(path)}:{line} ({func})"
    return site, inner


def _short_path(path: str) -> str:
    p = Path(path)
    try:
        return str(p.relative_to(_PKG))
    except ValueError:
        parts = p.parts
        for anchor in ("site-packages", "lib"):
            if anchor in parts:
                return "/".join(parts[parts.index(anchor) + 1:])
        return path


def _run_stage(stage: str, ctx: _Ctx, want_tb: bool) -> tuple[dict, str | None]:
    from pt2x.serde.errors import Pt2Error

    t0 = time.perf_counter()
    res: dict = {"stage": stage, "outcome": "ok"}
    tb_text = None
    try:
        if stage in _SELFTEST:
            _selftest(stage)
        else:
            _STAGE_FUNCS[stage](ctx)
    except KeyboardInterrupt:
        raise
    except BaseException as e:  # noqa: BLE001 - classifying everything is the point
        kind = "memory" if isinstance(e, MemoryError) else "pt2error" if isinstance(e, Pt2Error) else "escape"
        res["outcome"] = "memory" if kind == "memory" else f"{kind}:{type(e).__name__}"
        res["exception"] = f"{type(e).__module__}.{type(e).__qualname__}".removeprefix("builtins.")
        try:
            res["message"] = str(e)[:400]
        except Exception:  # noqa: BLE001
            res["message"] = "<str() failed>"
        frames = [(f.filename, f.lineno, f.name) for f in traceback.extract_tb(e.__traceback__)]
        res["site"], res["frame"] = _frames_site(frames)
        if want_tb or kind != "pt2error":
            tb_text = "".join(traceback.format_exception(e))[-6000:]
        del e
    res["seconds"] = time.perf_counter() - t0
    return res, tb_text


class _Proto:
    """The worker's line-per-message channel to the parent (a copy of its original stdout)."""

    def __init__(self):
        self.f = child_channel()  # anything else written to stdout goes to the worker log

    def send(self, **msg) -> None:
        self.f.write(json.dumps(msg) + "\n")
        self.f.flush()


def _warm_up(fixtures: list[str], scratch: str, onnx_mode: bool) -> None:
    """Clean cases through every stage, so lazy imports happen before the limits start (and,
    for ``--onnx``, the base models are made)."""
    if onnx_mode:
        from fuzz import fuzz_onnx_mutations as fom

        for _, data in fom.base_models(fixtures)[:3]:
            ctx = _Ctx(data, 0, "", scratch)
            for stage in ONNX_STAGES:
                _run_stage(stage, ctx, False)
    for path in fixtures[:3]:
        ctx = _Ctx(Path(path).read_bytes(), 0, path, scratch)
        for stage in STAGES:
            res, _ = _run_stage(stage, ctx, False)
            if res["outcome"] != "ok":
                break
        if ctx.archive is not None:
            ctx.archive.close()


def worker_main() -> None:
    """Worker process: read requests (one JSON per line) and run them, reporting each step."""
    import faulthandler
    import warnings

    global _NOTE
    proto = _NOTE = _Proto()
    faulthandler.enable(file=sys.stderr, all_threads=True)
    faulthandler.register(signal.SIGUSR1, file=sys.stderr, all_threads=True)
    warnings.simplefilter("ignore")
    init = json.loads(sys.stdin.readline())
    fixtures: list[str] = init["fixtures"]
    import pt2x.converters.onnx  # noqa: F401  (imported before the memory limit)
    import pt2x.serde.compat.target  # noqa: F401
    import pt2x.serde.validate  # noqa: F401
    from fuzz import fuzz_mutations as fm
    from pt2x.tools.process_limits import limit_address_space, vm_size

    _warm_up(fixtures, os.path.dirname(init["case_file"]), bool(init.get("onnx")))
    if init.get("memory_mib"):
        limit_address_space(int(init["memory_mib"]))
    proto.send(event="ready", pid=os.getpid(), vm=vm_size())
    for line in sys.stdin:
        req = json.loads(line)
        restart = _serve(req, fixtures, fm, proto, init["case_file"])
        proto.send(event="done", restart=restart)
        if restart:
            return


def _serve(req: dict, fixtures: list[str], fm, proto: _Proto, case_file: str) -> bool:
    """Run one request; True when the worker should be replaced afterwards (after a MemoryError)."""
    sys.stderr.write(f"\n=== case {req.get('seed')}:{req.get('index')} {req.get('file') or ''}\n")
    sys.stderr.flush()
    try:
        if req.get("file"):
            data = Path(req["file"]).read_bytes()
            proto.send(event="case", fixture=None, steps=[], size=len(data), sha256=hashlib.sha256(data).hexdigest())
        else:
            if req.get("onnx"):
                from fuzz import fuzz_onnx_mutations as fom

                case = fom.make_case(req["seed"], req["index"], fixtures)
                fixture = case.fixture
            else:
                case = fm.make_case(req["seed"], req["index"], fixtures)
                fixture = _rel(case.fixture)
            data = case.data
            proto.send(event="case", fixture=fixture, steps=case.steps, size=len(data),
                       sha256=hashlib.sha256(data).hexdigest())
    except Exception as e:  # noqa: BLE001 - a fuzzer bug (MemoryError included), reported as such
        proto.send(event="result", stage="gen", outcome=f"generror:{type(e).__name__}", message=str(e)[:400],
                   traceback="".join(traceback.format_exception(e))[-6000:])
        return isinstance(e, MemoryError)
    with open(case_file, "wb") as f:  # the parent keeps it when the case goes wrong
        f.write(data)
    ctx = _Ctx(data, req.get("index") or 0, case_file, os.path.dirname(case_file))
    restart = False
    chain_ok = True  # every stage so far succeeded: the next dependent stage may run
    passed: set[str] = set()
    try:
        for stage in req["stages"]:
            need = _NEEDS.get(stage, "chain")
            if not (need is None or (need == "chain" and chain_ok) or need in passed):
                continue
            proto.send(event="start", stage=stage)
            res, tb_text = _run_stage(stage, ctx, bool(req.get("traceback")))
            proto.send(event="result", traceback=tb_text, **res)
            kind = res["outcome"].split(":", 1)[0]
            if kind == "memory":
                restart = True
            if kind not in ("ok", "pt2error"):
                break
            chain_ok = chain_ok and kind == "ok"
            if kind == "ok":
                passed.add(stage)
    finally:
        if ctx.archive is not None:
            try:
                ctx.archive.close()
            except Exception:  # noqa: BLE001 - a close that fails is found by the stages
                pass
        ctx.archive = None
    return restart


# ============================================================================ parent side


class _Worker(Supervised):
    """A worker process seen from the parent (``pt2x.tools.supervised``: pipes, log, deadline,
    deaths) and the case it is running."""

    def __init__(self, wid: int, rundir: str, logdir: str, init: dict):
        self.wid = wid
        self.case_file = os.path.join(logdir, f"worker{wid}-case.pt2")
        self.init = dict(init, case_file=self.case_file)
        argv = [sys.executable, *(["-P"] if sys.version_info >= (3, 11) else []), "-c",
                "from fuzz.fuzz import worker_main; worker_main()"]
        path = os.pathsep.join(p for p in (str(_PKG), os.environ.get("PYTHONPATH", "")) if p)  # the fuzz package
        super().__init__(argv, startup_timeout=_READY_TIMEOUT, log_path=os.path.join(logdir, f"worker{wid}.log"),
                         cwd=rundir, env={"PYTHONHASHSEED": "0", "PYTHONPATH": path}, new_session=True)
        self.job: CaseResult | None = None
        self.started = 0.0

    def start(self) -> None:
        super().start()
        self.job = None
        self.current: str | None = None
        self.note: str | None = None
        self.command: str | None = None
        self.send(self.init)

    @property
    def fd(self) -> int:
        return self.fileno()

    def assign(self, job: CaseResult, req: dict, timeout: float) -> bool:
        self.job = job
        self.current = "gen"
        self.note = self.command = None
        self.begin_task(timeout)
        self.started = time.monotonic()
        return self.send(req)

    def dump_stack_and_kill(self) -> str:
        """Ask faulthandler for the stack (SIGUSR1), then kill; return what the log got."""
        before = self.log_size()
        try:
            self.proc.send_signal(signal.SIGUSR1)
        except ProcessLookupError:
            pass
        end = time.monotonic() + 1.0
        last = before
        while time.monotonic() < end:  # wait until the dump stops growing
            time.sleep(0.05)
            size = self.log_size()
            if size > before and size == last:
                break
            last = size
        self.kill()
        return self.log_since_task()


_FH_FRAME = re.compile(r'^\s*File "([^"]+)", line (\d+) in (\S+)', re.M)


def _site_from_dump(text: str) -> tuple[str | None, str | None]:
    """Innermost pt2x frame from a faulthandler dump (the main thread's, most recent first)."""
    blocks = re.split(r"\n(?=(?:Current thread|Thread) 0x)", text)
    best = None
    for block in blocks:
        frames = [(f, int(n), fn) for f, n, fn in _FH_FRAME.findall(block)]
        if any("fuzz.py" in f for f, _, _ in frames):
            best = frames
    if not best:
        return None, None
    return _frames_site(list(reversed(best)))


def _touch_site(w: "_Worker", site: str | None, message: str | None) -> tuple[str | None, str | None]:
    """Where a worker stopped, in words: the array it was summing (outside pt2x), the command."""
    if site is None and w.note:
        return "summing an array that load returned (fuzz/fuzz.py _touch)", w.note
    if w.command:
        message = f"in {w.command}: {message}" if message else f"in {w.command}"
    return site, message


_DEATH_OUTCOME = {"oom": "memory", "crash": "crash"}
"""The fuzzer's outcome for each kind of ``supervised.Death``."""


class _Run:
    """The parent's scheduler: hands cases to workers, enforces time limits, records results."""

    def __init__(self, config: FuzzConfig, fixtures: list[str], requests: list[tuple[CaseResult, dict]],
                 want_tb: bool = False):
        self.config = config
        self.fixtures = fixtures
        self.pending = deque(requests)
        self.want_tb = want_tb
        self.results: list[CaseResult] = []
        self.rundir = tempfile.mkdtemp(prefix="pt2x-fuzz-run-")
        self.logdir = tempfile.mkdtemp(prefix="pt2x-fuzz-logs-")
        init = {"fixtures": fixtures, "memory_mib": config.memory_mib, "onnx": config.onnx}
        self.workers = [_Worker(i, self.rundir, self.logdir, init) for i in range(max(1, config.jobs))]
        self.saver = _Saver(config, fixtures) if config.out else None
        self.last_progress = time.monotonic()
        self.t0 = time.monotonic()
        self.late_marker: list[str] = []

    def run(self) -> list[CaseResult]:
        try:
            for w in self.workers:
                w.start()
            while True:
                self._assign()
                busy = [w for w in self.workers if w.job is not None or not w.ready]
                if not busy:
                    break
                now = time.monotonic()
                wait = max(0.0, min(w.deadline for w in busy) - now)
                readable, _, _ = select.select([w.fd for w in busy], [], [], min(wait, 1.0))
                for w in busy:
                    if w.fd in readable:
                        self._read(w)
                now = time.monotonic()
                for w in self.workers:
                    if w.deadline <= now and (w.job is not None or not w.ready):
                        self._expire(w)
                self._progress()
            time.sleep(0.2)  # a payload that ran in the background may still be writing
            self.late_marker = self._marker_check()
            if self.late_marker:
                sys.stderr.write(f"\n!!! pt2x fuzz: {self.late_marker} appeared in the workers' directory after the "
                                 f"last case: something in a file was EXECUTED (in the background)\n")
        finally:
            for w in self.workers:
                w.stop(grace=0)
            shutil.rmtree(self.logdir, ignore_errors=True)
            shutil.rmtree(self.rundir, ignore_errors=True)
        return self.results

    def _stopping(self) -> bool:
        mf = self.config.max_failures
        return bool(mf) and sum(r.bad for r in self.results) >= mf

    def _assign(self) -> None:
        for w in self.workers:
            if w.ready and w.job is None and self.pending and not self._stopping():
                job, req = self.pending.popleft()
                req = dict(req, stages=list(self.config.stages), traceback=self.want_tb, onnx=self.config.onnx)
                if not w.assign(job, req, self.config.timeout):
                    self._died(w)

    def _read(self, w: _Worker) -> None:
        msgs, eof = w.read()
        for msg in msgs:
            ev = msg.pop("event")
            if ev == "ready":
                w.ready = True
            elif ev == "case":
                w.job.fixture = msg["fixture"] or w.job.fixture
                w.job.steps, w.job.size, w.job.sha256 = msg["steps"], msg["size"], msg["sha256"]
            elif ev == "start":
                w.current = msg["stage"]
                w.note = w.command = None
                if w.current in _INDEPENDENT:  # its own time budget, per command (see --timeout)
                    w.deadline = time.monotonic() + self.config.timeout
            elif ev == "tick":
                w.deadline = time.monotonic() + self.config.timeout
                w.command = msg["text"]
            elif ev == "note":
                w.note = msg["text"]
            elif ev == "result":
                tb = msg.pop("traceback", None)
                if tb and w.job.traceback is None:
                    w.job.traceback = tb
                w.job.stages.append(StageResult(**msg))
            elif ev == "done":
                self._finish(w)
                if msg.get("restart"):  # after a MemoryError: a fresh process for the next case
                    w.kill()
                    w.start()
                    return
        if eof:
            self._died(w)

    def _died(self, w: _Worker) -> None:
        rc = w.reap()
        log = w.log_since_task()
        if not w.ready:
            raise RuntimeError(f"fuzz worker {w.wid} exited ({exit_text(rc)}) before it was ready:\n{log[-3000:]}")
        if w.job is None:  # died between cases: nothing to record
            w.start()
            return
        death = w.death(rc)
        outcome, what = _DEATH_OUTCOME[death.kind], death.what
        if (w.current or "gen") == "gen":
            outcome = f"generror:{outcome}"
        site, frame = _site_from_dump(log)
        site, message = _touch_site(w, site, log[-400:].strip() or None)
        w.job.stages.append(StageResult(w.current or "gen", outcome, what, message, site, frame,
                                        time.monotonic() - w.started))
        self._finish(w)
        w.start()

    def _expire(self, w: _Worker) -> None:
        if w.job is None:
            rc = w.kill()
            raise RuntimeError(f"fuzz worker {w.wid} not ready after {_READY_TIMEOUT:.0f} s ({exit_text(rc)}):\n"
                               f"{w.log_since_task()[-3000:]}")
        log = w.dump_stack_and_kill()
        site, frame = _site_from_dump(log)
        site, message = _touch_site(w, site, None)
        outcome = "timeout" if (w.current or "gen") != "gen" else "generror:timeout"
        w.job.stages.append(StageResult(w.current or "gen", outcome, f"over {self.config.timeout:g} s", message, site,
                                        frame, time.monotonic() - w.started))
        self._finish(w)
        w.start()

    def _finish(self, w: _Worker) -> None:
        job = w.job
        w.job = None
        job.seconds = time.monotonic() - w.started
        job.marker = self._marker_check()
        if job.marker:
            sys.stderr.write(f"\n!!! pt2x fuzz: case {job.label} made {job.marker} in the worker's directory: "
                             f"something in the file was EXECUTED. Replay: {job.replay_command()}\n")
        self.results.append(job)
        if self.saver and job.bad:
            self.saver.consider(job, w.case_file)

    def _marker_check(self) -> list[str]:
        names = sorted(os.listdir(self.rundir))
        for n in names:
            p = os.path.join(self.rundir, n)
            shutil.rmtree(p) if os.path.isdir(p) else os.unlink(p)
        return names

    def _progress(self) -> None:
        if not self.config.progress or time.monotonic() - self.last_progress < 10:
            return
        self.last_progress = time.monotonic()
        done = len(self.results)
        rate = done / max(1e-9, time.monotonic() - self.t0)
        sys.stderr.write(f"[fuzz] {done} cases, {sum(r.bad for r in self.results)} bad, {rate:.1f} cases/s\n")


class _Saver:
    """Keeps the smallest reproducer per (stage, outcome, site) under ``--out``."""

    def __init__(self, config: FuzzConfig, fixtures: list[str]):
        self.dir = Path(config.out)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.fixtures = fixtures
        self.config = config
        self.best: dict[str, tuple[int, Path]] = {}

    def key(self, r: CaseResult) -> str:
        b = r.first_bad
        if b is None:
            return "marker"
        return f"{b.stage} {b.outcome} {b.site or '(no pt2x frame)'}"

    def consider(self, r: CaseResult, case_file: str) -> None:
        k = self.key(r)
        if r.marker:
            k = f"marker {r.label}"  # every marker case is kept
        if k in self.best and self.best[k][0] <= r.size:
            return
        data = self._bytes(r, case_file)
        if data is None:
            return
        stem = f"s{r.seed}-i{r.index}" if r.file is None else Path(r.file).stem
        path = self.dir / f"{stem}{'.onnx' if self.config.onnx else '.pt2'}"
        if k in self.best:
            old = self.best[k][1]
            if old != path and not any(v[1] == old for kk, v in self.best.items() if kk != k):
                old.unlink(missing_ok=True)
                old.with_suffix(".json").unlink(missing_ok=True)
        path.write_bytes(data)
        path.with_suffix(".json").write_text(json.dumps(reproducer_record(r, self.config), indent=2) + "\n")
        self.best[k] = (r.size, path)

    def _bytes(self, r: CaseResult, case_file: str) -> bytes | None:
        """The case as the worker wrote it (not regenerated here: generation is bounded only in workers)."""
        if r.file:
            return Path(r.file).read_bytes()
        if r.sha256 is None:  # never generated (a generation failure): nothing to keep
            return None
        data = Path(case_file).read_bytes()
        if hashlib.sha256(data).hexdigest() != r.sha256:
            sys.stderr.write(f"[fuzz] warning: case {r.label}: the worker's copy does not match its hash\n")
            return None
        return data


def reproducer_record(r: CaseResult, config: FuzzConfig) -> dict:
    """The JSON kept next to a reproducer .pt2."""
    b = r.first_bad
    return {
        "seed": r.seed,
        "index": r.index,
        "replay": r.replay_command(),
        "fixtures": "default" if config.fixtures is None else [_rel(f) for f in config.fixtures],
        "fixture": r.fixture,
        "mutations": r.steps,
        "size": r.size,
        "sha256": r.sha256,
        "stage": b.stage if b else None,
        "outcome": b.outcome if b else "marker",
        "exception": b.exception if b else None,
        "message": b.message if b else None,
        "site": b.site if b else None,
        "frame": b.frame if b else None,
        "marker": r.marker,
        "stages": [asdict(s) for s in r.stages],
        "traceback": r.traceback,
    }


# ============================================================================ API


def fuzz(config: FuzzConfig) -> FuzzReport:
    """Generate and run cases ``config.start .. config.start + config.n - 1`` for ``config.seed``."""
    fixtures = _fixture_files(config.fixtures)
    reqs = [(CaseResult(config.seed, i, onnx=config.onnx), {"seed": config.seed, "index": i})
            for i in range(config.start, config.start + config.n)]
    t0 = time.monotonic()
    run = _Run(config, fixtures, reqs)
    results = run.run()
    results.sort(key=lambda r: r.index)
    report = FuzzReport(config, results, time.monotonic() - t0, late_marker=run.late_marker)
    if run.saver:
        report.saved = {k: str(p) for k, (_, p) in run.saver.best.items()}
    return report


def run_files(paths: list[str], *, stages: tuple[str, ...] | None = None, timeout: float = 10.0,
              memory_mib: int = 2048, traceback: bool = False) -> list[CaseResult]:
    """Run saved files (reproducers) through the stages, under the same limits: ``.onnx`` files
    (all of them or none) through ``ONNX_STAGES``, others through ``STAGES`` unless ``stages``."""
    onnx_mode = bool(paths) and all(str(p).endswith(".onnx") for p in paths)
    if stages is None:
        stages = ONNX_STAGES if onnx_mode else STAGES
    config = FuzzConfig(n=len(paths), stages=tuple(stages), timeout=timeout, memory_mib=memory_mib, onnx=onnx_mode)
    fixtures = _fixture_files(None)
    reqs = [(CaseResult(None, i, file=str(p)), {"file": os.path.abspath(p), "index": i}) for i, p in enumerate(paths)]
    run = _Run(config, fixtures, reqs, want_tb=traceback)
    results = run.run()
    results.sort(key=lambda r: r.index)
    if run.late_marker and results:  # seen after the last case: blame the run's last file too
        results[-1].marker += [f"{n} (after the last case)" for n in run.late_marker]
    return results


def replay(seed: int, index: int, *, fixtures: list[str] | None = None, stages: tuple[str, ...] = STAGES,
           timeout: float = 10.0, memory_mib: int = 2048, onnx: bool = False) -> CaseResult:
    """One generated case again, with the full traceback of a failing stage."""
    config = FuzzConfig(n=1, seed=seed, stages=tuple(stages), timeout=timeout, memory_mib=memory_mib, fixtures=fixtures,
                        onnx=onnx)
    files = _fixture_files(fixtures)
    run = _Run(config, files, [(CaseResult(seed, index), {"seed": seed, "index": index})], want_tb=True)
    [r] = run.run()
    r.marker += [f"{n} (after the case)" for n in run.late_marker]
    return r


# ============================================================================ summary


def _summary(rep: FuzzReport) -> str:
    cfg = rep.config
    lines = []
    n = len(rep.results)
    rate = n / rep.wall if rep.wall else 0.0
    lines.append(f"pt2x fuzz: seed {cfg.seed}, {n} cases, {cfg.jobs} job(s), {rep.wall:.1f} s: "
                 f"{rate:.1f} cases/s, {rate / max(1, cfg.jobs):.1f} per worker")
    stage_names = [s for s in ("gen",) + tuple(cfg.stages) if any(x.stage == s for r in rep.results for x in r.stages)]
    kinds = ("ok", "pt2error", "escape", "timeout", "memory", "crash", "generror")
    counts = {s: Counter() for s in stage_names}
    secs = defaultdict(list)
    for r in rep.results:
        for s in r.stages:
            counts[s.stage][s.kind] += 1
            if s.kind not in ("timeout", "crash"):
                secs[s.stage].append(s.seconds)
    lines.append("")
    lines.append(f"{'stage':<10}" + "".join(f"{k:>10}" for k in kinds) + f"{'mean ms':>10}{'max ms':>10}")
    for s in stage_names:
        ms = secs[s]
        mean = 1000 * sum(ms) / len(ms) if ms else 0.0
        lines.append(f"{s:<10}" + "".join(f"{counts[s][k]:>10}" for k in kinds)
                     + f"{mean:>10.1f}{1000 * max(ms, default=0):>10.1f}")
    per_case = [r.seconds for r in rep.results]
    if per_case:
        lines.append(f"per case (generation + stages + messages): mean {1000 * sum(per_case) / len(per_case):.1f} ms")
    refusals = Counter(s.outcome.split(":", 1)[1] for r in rep.results for s in r.stages if s.kind == "pt2error")
    example: dict[str, str] = {}
    for r in rep.results:
        for s in r.stages:
            if s.kind == "pt2error":
                example.setdefault(s.outcome.split(":", 1)[1], r.label)
    if refusals:
        lines.append("pt2x refusals: " + ", ".join(f"{k} {v} (e.g. {example[k]})" for k, v in refusals.most_common()))
    slow = sorted((r for r in rep.results if not r.bad), key=lambda r: -sum(s.seconds for s in r.stages))[:3]
    if slow:
        lines.append("slowest good cases: " + ", ".join(
            f"{r.label} ({' + '.join(f'{s.stage} {1000 * s.seconds:.0f}' for s in r.stages)} ms)" for r in slow))
    sites = rep.sites()
    for kind, title in (("escape", "Escapes (exceptions outside Pt2Error)"), ("timeout", "Timeouts"),
                        ("memory", "Memory"), ("crash", "Crashes"), ("generror", "Fuzzer errors")):
        mine = {k: v for k, v in sites.items() if k[1].split(":", 1)[0] == kind}
        if not mine:
            continue
        lines.append("")
        lines.append(f"{title}: {sum(len(v) for v in mine.values())} cases, {len(mine)} distinct sites")
        by_file: dict[str, list] = defaultdict(list)
        for (stage, outcome, site), cases in mine.items():
            by_file[site.split(":", 1)[0]].append((stage, outcome, site, cases))
        for f in sorted(by_file):
            lines.append(f"  {f}")
            for stage, outcome, site, cases in sorted(by_file[f], key=lambda x: -len(x[3])):
                ex = min(cases, key=lambda c: c.size)
                b = ex.first_bad
                lines.append(f"    {outcome:<28} {site}  [{stage}] x{len(cases)}")
                if b.message:
                    msg = b.message.replace("\n", " ")[:160]
                    lines.append(f"        {msg}")
                if b.frame and b.frame != site:
                    lines.append(f"        innermost frame: {b.frame}")
                lines.append(f"        e.g. {ex.replay_command()}")
                for step in ex.steps or [ex.file]:
                    lines.append(f"          {step}"[:200])
    hits = rep.marker_hits
    lines.append("")
    if rep.late_marker:
        lines.append(f"!!! MARKER: {rep.late_marker} appeared after the last case: code from a file ran in the background")
    if hits:
        lines.append(f"!!! MARKER: {len(hits)} case(s) EXECUTED code from the file:")
        for r in hits:
            lines.append(f"    {r.replay_command()}  {r.steps}")
    elif not rep.late_marker:
        lines.append("marker: never created (nothing in any file was executed)")
    if rep.saved:
        lines.append(f"reproducers: {len(rep.saved)} in {cfg.out}")
    bad = rep.bad
    lines.append(f"result: {'FAIL' if rep.failed else 'ok'} ({len(bad)} bad case(s))")
    return "\n".join(lines)


# ============================================================================ command line


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m fuzz.fuzz", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog="\n\n".join(__doc__.split("\n\n")[1:]))
    p.add_argument("--n", type=int, default=1000, help="number of cases (default 1000)")
    p.add_argument("--seed", type=int, default=None, help="seed (default: random, printed)")
    p.add_argument("--start", type=int, default=0, help="first case index (default 0)")
    p.add_argument("--jobs", type=int, default=1, help="worker processes (default 1)")
    p.add_argument("--timeout", type=float, default=10.0,
                   help="seconds per case for generation, load, validate and onnx together, and again for each "
                        "command of the cli stage (default 10)")
    p.add_argument("--memory", type=int, default=2048, metavar="MiB",
                   help="address space per worker past its size after imports, RLIMIT_AS (default 2048)")
    p.add_argument("--stages", default=None, help=f"comma-separated, from {','.join(STAGES)} (default all), or with "
                   f"--onnx from {','.join(ONNX_STAGES)} (default both)")
    p.add_argument("--onnx", action="store_true", help="cases are mutated ONNX models (fuzz_onnx_mutations.py) "
                   "converted to TFLite; a --replay FILE ending in .onnx implies it")
    p.add_argument("--fixtures", nargs="+", metavar="DIR", help="folders (or files) of .pt2 fixtures "
                   "(default: every tests/fixtures/pt2/torch-*/)")
    p.add_argument("--out", help="folder for reproducers: the smallest case per distinct site (.pt2 + .json)")
    p.add_argument("--max-failures", type=int, default=0, help="stop after this many bad cases (default: never)")
    p.add_argument("--results", metavar="PATH", help="write every case's result here, one JSON object per line")
    p.add_argument("--replay", metavar="SEED:INDEX|FILE", help="run one case (generated, or a saved .pt2) and "
                   "print each stage's outcome and traceback")
    p.add_argument("--save-case", metavar="PATH", help="with --replay SEED:INDEX: also write the case's .pt2 here")
    p.add_argument("--quiet", action="store_true", help="no progress lines")
    args = p.parse_args(argv)
    if args.replay and args.replay.endswith(".onnx"):
        args.onnx = True
    allowed = ONNX_STAGES if args.onnx else STAGES
    stages = tuple(s for s in (args.stages or ",".join(allowed)).split(",") if s)
    unknown = [s for s in stages if s not in allowed]
    if unknown or not stages:
        p.error(f"--stages: unknown {unknown}; choose from {','.join(allowed)}")
    if any(_NEEDS[s] in ("chain", "load") for s in stages) and stages[0] != "load":
        p.error("--stages: validate, onnx and tflite use the loaded archive: start with load")
    args.stage_list = stages
    return args


def _print_case(r: CaseResult) -> None:
    print(f"case {r.label}: fixture {r.fixture}, {r.size} bytes")
    for s in r.steps:
        print(f"  mutation {s}")
    for s in r.stages:
        extra = f"  {s.exception}: {s.message}" if s.exception else ""
        print(f"  {s.stage:<9} {s.outcome:<30} {1000 * s.seconds:8.1f} ms{extra[:300]}")
        if s.site:
            print(f"            site: {s.site}" + (f"   innermost: {s.frame}" if s.frame != s.site else ""))
    if r.marker:
        print(f"  !!! MARKER: {r.marker} appeared: something in the file was executed")
    if r.traceback:
        print(r.traceback)


def _replay_cli(args: argparse.Namespace) -> int:
    target = args.replay
    m = re.fullmatch(r"(-?\d+):(\d+)", target)
    if m:
        seed, index = int(m.group(1)), int(m.group(2))
        r = replay(seed, index, fixtures=_fixture_files(args.fixtures) if args.fixtures else None,
                   stages=args.stage_list, timeout=args.timeout, memory_mib=args.memory, onnx=args.onnx)
        if args.save_case:
            if args.onnx:
                from fuzz import fuzz_onnx_mutations as fm
            else:
                from fuzz import fuzz_mutations as fm

            Path(args.save_case).write_bytes(fm.make_case(seed, index, _fixture_files(args.fixtures)).data)
    else:
        [r] = run_files([target], stages=args.stage_list, timeout=args.timeout, memory_mib=args.memory, traceback=True)
    _print_case(r)
    return 1 if r.bad else 0


def main(argv: list[str] | None = None) -> int:
    args = _parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # run the clean-up (workers, temp folders)
    if args.replay:
        return _replay_cli(args)
    seed = args.seed if args.seed is not None else int.from_bytes(os.urandom(4), "little")
    config = FuzzConfig(n=args.n, seed=seed, jobs=args.jobs, timeout=args.timeout, memory_mib=args.memory,
                        stages=args.stage_list, fixtures=args.fixtures, out=args.out,
                        max_failures=args.max_failures, progress=not args.quiet, start=args.start, onnx=args.onnx)
    if config.fixtures is not None:
        config.fixtures = _fixture_files(config.fixtures)
    print(f"pt2x fuzz: seed {seed}, cases {config.start}..{config.start + config.n - 1}, "
          f"{len(_fixture_files(config.fixtures))} fixtures{' (ONNX cases)' if config.onnx else ''}, "
          f"stages {','.join(config.stages)}", flush=True)
    report = fuzz(config)
    if args.results:
        with open(args.results, "w") as f:
            for r in report.results:
                f.write(json.dumps(dict(asdict(r), bad=r.bad)) + "\n")
    print(report.summary())
    return 1 if report.failed else 0


if __name__ == "__main__":
    sys.exit(main())
