"""ExecuTorch programs run in a child process, so that a kernel that aborts the process (SIGABRT:
a failed ``ET_CHECK`` in a portable kernel) fails its own case instead of killing pytest.

``run_in_child(cases)``: ``cases`` is a list of ``(pte_bytes, [input tensors])``; the result is one
entry per case, in order: the list of output tensors, or a string saying why there are none
(``"abort: ..."`` for a child that died, ``"error: ..."`` for an error the runtime raised). Many
programs share one child (importing executorch's runtime takes seconds); after an abort a new
child goes on with the next case.
"""

from __future__ import annotations

import base64
import os
import pickle
import subprocess
import sys
import tempfile

__all__ = ["run_in_child"]


def run_in_child(cases: list[tuple[bytes, list]], *, timeout: float = 300) -> list:
    results: list = []
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "cases.pkl")
        with open(path, "wb") as f:
            pickle.dump(cases, f)
        while len(results) < len(cases):
            proc = subprocess.run([sys.executable, __file__, path, str(len(results))], capture_output=True,
                                  timeout=timeout)
            for line in proc.stdout.splitlines():
                if line.startswith(b"case "):
                    results.append(pickle.loads(base64.b64decode(line[5:])))
            if proc.returncode != 0 and len(results) < len(cases):
                tail = proc.stderr.decode(errors="replace").strip().splitlines()[-1:] or [""]
                results.append(f"abort: exit {proc.returncode} {tail[0][:300]}")
    return results


def _child(path: str, start: int) -> None:
    from executorch.runtime import Runtime

    with open(path, "rb") as f:
        cases = pickle.load(f)
    runtime = Runtime.get()
    for data, inputs in cases[start:]:
        try:
            program = runtime.load_program(data)  # reads ``data`` in place: it stays referenced
            result = [t.clone() for t in program.load_method("forward").execute(list(inputs))]
        except Exception as e:  # the runtime's own refusal (load or run): the case's result
            result = f"error: {type(e).__name__}: {str(e).strip()[:300]}"
        sys.stdout.write("case " + base64.b64encode(pickle.dumps(result)).decode() + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    _child(sys.argv[1], int(sys.argv[2]))
