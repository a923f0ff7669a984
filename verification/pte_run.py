"""A ``.pte`` run for ``verify``: ExecuTorch's runtime (``executorch.runtime``) in a child process
(``executorch_child``), on the reference's input sets.

* The file is read first (``converters/pte/reader.py``: a malformed file is refused before any
  runtime sees it), and so is the ``.ptd`` its external weights are read from (``data``, else the
  one beside it): a missing file, key or layout is named here, since the runtime ends its process
  on each without an exception.
* The runtime runs in a child, as LiteRT does, so that a kernel or a load that ends the process
  fails the verification (exit 2, with the runtime's last message) instead of the caller.
* ``.pte`` files name no value: inputs and outputs are matched by order.
* With ``locate``, the child runs a debug copy of the file (``converters/pte/debug_outputs.py``):
  the file's own instructions and weights, with every value the program names (and the reference
  has) made an extra output and the arena planned again so none is overwritten; the values come
  back named after the program's, and ``order`` lists each instruction with the operator the file
  calls. A file that is not pt2x's conversion of the program cannot be named: the run is the
  plain one and a note says why.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import tempfile

import numpy as np

from ..serde.errors import MissingExtraError, Pt2Error
from .errors import VerificationError
from .runners import RunResult, child_meta

__all__ = ["run_pte", "data_file", "EXECUTORCH_TIMEOUT_S", "RUNTIME"]

EXECUTORCH_TIMEOUT_S = 600.0
"""Seconds the ExecuTorch child may take for all input sets."""

RUNTIME = "ExecuTorch (executorch.runtime)"


def data_file(label: str, summary: dict, data: str | None) -> str | None:
    """The ``.ptd`` the program ``summary`` (``read_pte``'s) reads its external tensors from:
    ``data``, else the one beside ``label``; None when it reads none. A missing file, key or layout
    is a ``VerificationError`` naming it."""
    from ..converters.pte.ptd import ptd_path
    from ..converters.pte.ptd_reader import check_data, read_ptd, reads_data

    if not reads_data(summary):
        return None
    where = data or (ptd_path(label) if label != "<bytes>" else None)
    try:
        ptd = read_ptd(where) if where and os.path.isfile(where) else None
    except Pt2Error as e:
        raise VerificationError(f"{where}: not a readable .ptd ({e})") from None
    missing = check_data(summary, ptd, where if ptd else f"none given (--data), and no {where or 'file'} beside it")
    if missing:
        raise VerificationError(f"{label}: {missing[0].message}" + (f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""))
    return where


def _summary(source, label: str) -> tuple[dict, bytes]:
    """The file's summary (checked) and its flatbuffer."""
    from ..converters.pte.reader import read_pte

    try:
        summary = read_pte(source, name=label)
    except Pt2Error as e:
        raise VerificationError(f"{label}: not a readable .pte ({e})") from None
    if isinstance(source, (bytes, bytearray)):
        return summary, bytes(source)
    header = summary["extended_header"]
    with open(source, "rb") as f:
        return summary, f.read(header["program_size"] if header else summary["size"])


def run_pte(source, label: str, sets, *, src=None, model: str = "model", names=(), locate: bool = False,
            data: str | None = None) -> RunResult:
    """``source`` (a ``.pte`` path or its bytes) run on each input set's tensors. With ``locate``,
    ``src``/``model`` name the program and ``names`` the values the reference has."""
    if importlib.util.find_spec("executorch") is None:  # the child would only say ModuleNotFoundError
        raise MissingExtraError("pt2x verify of a .pte file", "executorch", "verify-pte")
    summary, flatbuffer = _summary(source, label)
    data = data_file(label, summary, data)
    plan = summary["execution_plans"][0]
    n_in, n_out = len(plan["inputs"]), len(plan["outputs"])
    if sets and n_in != len(sets[0].tensors):
        raise VerificationError(f"{label}: its {n_in} inputs match the program's {len(sets[0].tensors)} tensor inputs "
                                "neither by name (a .pte names none) nor by order")
    with tempfile.TemporaryDirectory(prefix="pt2x-verify-") as d:
        model_path = os.path.join(d, "model.pte")
        named, note = _named(src, model, flatbuffer, set(names)) if locate else (None, "")
        if named is not None:
            from ..converters.pte.debug_outputs import with_outputs

            with_outputs(source, model_path, named)
        elif isinstance(source, (bytes, bytearray)):
            with open(model_path, "wb") as f:
                f.write(source)
        else:
            os.symlink(os.path.abspath(source), model_path)
        outs = _run_child(d, [s.tensors for s in sets], data, label)
    result = RunResult([f"input {i}" for i in range(n_in)], [f"output {j}" for j in range(n_out)],
                       [o[:n_out] for o in outs])
    if named is not None:
        result.values = [dict(zip((v.name for v in named.outputs + named.extra), o)) for o in outs]
        result.order = named.order
    if note:
        result.notes.append(f"--locate compared no intermediate value: {note}")
    return result


def _named(src, model: str, flatbuffer: bytes, names: set):
    from ..converters.aten.graph import open_program
    from ..converters.pte.debug_outputs import name_values

    view, keep = open_program(src, model)
    try:
        named, why = name_values(view, flatbuffer, names)
    finally:
        del keep
    return named, why


def _run_child(d: str, input_sets: list[list[np.ndarray]], data: str | None, label: str) -> list[list[np.ndarray]]:
    for i, feeds in enumerate(input_sets):
        np.savez(os.path.join(d, f"in{i}.npz"), *feeds)
    argv = [sys.executable, "-m", "pt2x.verification.executorch_child", d, str(len(input_sets))]
    if data:
        argv.append(os.path.abspath(data))
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    try:
        proc = subprocess.run(argv, capture_output=True, timeout=EXECUTORCH_TIMEOUT_S, env=env)
    except subprocess.TimeoutExpired:
        raise VerificationError(f"{label}: ExecuTorch took longer than {EXECUTORCH_TIMEOUT_S:g} s") from None
    meta = child_meta(d, proc, "ExecuTorch", label)
    outs = []
    for i in range(len(input_sets)):
        with np.load(os.path.join(d, f"out{i}.npz"), allow_pickle=False) as z:
            outs.append([z[f"o{j}"] for j in range(meta["outputs"])])
    return outs
