"""TFLite models run in LiteRT in a child process, so that a kernel that aborts the process
(SIGABRT) fails its own case instead of killing pytest.

``run_in_child(cases)``: ``cases`` is a list of ``(tflite_bytes, [input arrays])``; the result
is one entry per case, in order: the list of output arrays, or a string saying why there are
none (``"abort: ..."`` for a child that died, ``"error: ..."`` for an exception LiteRT raised).
Many models share one child; after an abort a new child goes on with the next case.
``xnnpack``: LiteRT's default delegates (XNNPACK) on, else its builtin kernels only.
"""

from __future__ import annotations

import base64
import os
import pickle
import subprocess
import sys
import tempfile

import numpy as np

__all__ = ["assert_each_matches", "run_in_child"]


def run_in_child(cases: list[tuple[bytes, list[np.ndarray]]], *, xnnpack: bool = False, timeout: float = 120) -> list:
    results: list = []
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "cases.pkl")
        with open(path, "wb") as f:
            pickle.dump(cases, f)
        while len(results) < len(cases):
            start = len(results)
            proc = subprocess.run([sys.executable, __file__, path, str(start), str(int(xnnpack))], capture_output=True, timeout=timeout)
            for line in proc.stdout.splitlines():
                results.append(pickle.loads(base64.b64decode(line)))
            if proc.returncode != 0 and len(results) < len(cases):
                tail = proc.stderr.decode(errors="replace").strip().splitlines()[-1:] or [""]
                results.append(f"abort: exit {proc.returncode} {tail[0][:200]}")
    return results


def assert_each_matches(model: bytes, inputs: list[np.ndarray], want: list[np.ndarray], *, xnnpack: bool,
                        tol: float) -> None:
    """The one-input, one-output model run on each input (in a child) gives ``want``'s entry
    within ``tol`` (relative and absolute)."""
    got = run_in_child([(model, [x]) for x in inputs], xnnpack=xnnpack)
    for g, w in zip(got, want):
        assert not isinstance(g, str), g
        np.testing.assert_allclose(g[0], w, rtol=tol, atol=tol)


def _run(model: bytes, inputs: list[np.ndarray], xnnpack: bool) -> list[np.ndarray]:
    from ai_edge_litert.interpreter import Interpreter, OpResolverType

    kind = OpResolverType.AUTO if xnnpack else OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES
    it = Interpreter(model_content=model, num_threads=1, experimental_op_resolver_type=kind)
    details = it.get_input_details()
    for dt, x in zip(details, inputs):
        it.resize_tensor_input(dt["index"], list(x.shape), strict=True)
    it.allocate_tensors()
    for dt, x in zip(details, inputs):
        it.set_tensor(dt["index"], np.array(x, dtype=dt["dtype"], order="C"))
    it.invoke()
    return [np.array(it.get_tensor(dt["index"])) for dt in it.get_output_details()]


def _child(path: str, start: int, xnnpack: bool) -> None:
    with open(path, "rb") as f:
        cases = pickle.load(f)
    for model, inputs in cases[start:]:
        try:
            result = _run(model, inputs, xnnpack)
        except Exception as e:  # LiteRT's own refusal (allocate/invoke): the case's result
            result = f"error: {type(e).__name__}: {str(e).strip()[:300]}"
        sys.stdout.write(base64.b64encode(pickle.dumps(result)).decode() + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    _child(sys.argv[1], int(sys.argv[2]), sys.argv[3] == "1")
