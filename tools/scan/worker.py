"""The check of one artifact in a child process, under a time and a memory limit.

Child side (``python -m pt2x.tools.scan.worker``): reads the options (one JSON line), imports
what the checks need and checks the example pt2x ships once (warm-up), then limits its address
space (``RLIMIT_AS``) to its size after that plus ``memory_mb``, says it is ready, and answers
one JSON line per artifact location it is sent. Running out of memory is reported as verdict
``oom`` and the child exits (its heap may be left in pieces); the parent starts another.

Parent side (``Worker``): starts the child, sends one artifact at a time, and turns what can
go wrong into that artifact's result: no answer within ``timeout`` seconds -> the child is
killed, verdict ``timeout``; the child killed by the system (SIGKILL it did not get from us:
the kernel's out-of-memory killer) -> ``oom``; any other death -> ``crashed``, with the signal
or exit status and the last line the child wrote on stderr. A replacement is started each time,
so one artifact never stops the scan. The local pool multiplexes several ``Worker``s; a Ray
task runs one sequentially (``run``).
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import time

from ..process_limits import limit_address_space
from .check import MAX_MESSAGE, converter
from .options import ScanOptions

__all__ = ["Worker", "WorkerStartError", "main"]

ONE_THREAD = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
"""A child's math libraries use one thread: the scan's parallelism is its processes, and
numpy's thread pools in every worker would compete for the same cores (Ray sets the same)."""
STARTUP_TIMEOUT = 180.0
"""Seconds a child may take to import and get ready (a loaded 2-core machine needs a few)."""


class WorkerStartError(RuntimeError):
    """A child could not start at all (a broken installation): a scan cannot go on without one."""


# ------------------------------------------------------------------------------ child side


def _import_checks(options: ScanOptions) -> None:
    """Everything the checks import lazily, imported before the memory limit is set."""
    import ml_dtypes  # noqa: F401  (bfloat16 / float8 weights)

    from ...serde import load  # noqa: F401
    from ...serde.compat import plan, releases  # noqa: F401
    from ...serde.validate import validate_archive  # noqa: F401
    from .. import summary  # noqa: F401
    from ..cli import check_input  # noqa: F401

    for name in options.convert:
        try:
            converter(name)
        except ImportError:
            pass  # a missing extra: each conversion records it as its error


def _warm_up(options: ScanOptions) -> None:
    """One check of the example pt2x ships, so first-use costs (tables built on first use,
    lazy imports) are paid before the first artifact's time limit starts."""
    from .check import check_artifact

    example = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                           "examples", "mlp_dynamic.pt2")
    if os.path.isfile(example):
        check_artifact(example, options)


def main() -> None:
    import warnings

    channel = os.fdopen(os.dup(1), "w", buffering=1, encoding="utf-8")
    os.dup2(2, 1)  # whatever else writes to stdout goes to the child's stderr
    sys.stdout = sys.stderr
    warnings.simplefilter("ignore")
    options = ScanOptions.from_json(json.loads(sys.stdin.readline()))
    _import_checks(options)
    _warm_up(options)
    from .check import OutOfMemory, check_artifact, error_dict

    if options.memory_mb:
        limit_address_space(options.memory_mb)
    channel.write('{"ready": true}\n')
    for line in sys.stdin:
        location = json.loads(line)["location"]
        t0 = time.perf_counter()
        try:
            result = check_artifact(location, options)
        except (OutOfMemory, MemoryError) as e:
            result = {"verdict": "oom", "error": error_dict(e), "seconds": round(time.perf_counter() - t0, 4)}
            channel.write(json.dumps(result) + "\n")
            return
        channel.write(json.dumps(result) + "\n")


# ------------------------------------------------------------------------------ parent side


class Worker:
    """One child process and the artifact it is checking (at most one at a time)."""

    def __init__(self, options: ScanOptions):
        self.options = options
        self.proc: subprocess.Popen | None = None
        self.location: str | None = None
        self.ready = False
        self._buf = b""
        self._sent_at = 0.0
        self._started_at = 0.0
        self._stderr = None
        self.start()

    # -- life cycle

    def start(self) -> None:
        self._stderr = tempfile.TemporaryFile()
        self.proc = subprocess.Popen([sys.executable, "-m", "pt2x.tools.scan.worker"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=self._stderr, bufsize=0,
                                     env={**os.environ, **ONE_THREAD})
        self.proc.stdin.write((json.dumps(self.options.to_json()) + "\n").encode())
        self.ready, self._buf, self.location = False, b"", None
        self._started_at = time.monotonic()

    def close(self) -> None:
        if self.proc is not None:
            try:
                self.proc.stdin.close()
            except OSError:
                pass
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
            self.proc.stdout.close()
            self.proc = None
        if self._stderr is not None:
            self._stderr.close()
            self._stderr = None

    def fileno(self) -> int:
        return self.proc.stdout.fileno()

    # -- one artifact

    @property
    def idle(self) -> bool:
        return self.ready and self.location is None

    def send(self, location: str) -> None:
        self.location = location
        self._sent_at = time.monotonic()
        try:
            self.proc.stdin.write((json.dumps({"location": location}) + "\n").encode())
        except BrokenPipeError:
            pass  # the child is dead; reading says how

    def on_readable(self) -> dict | None:
        """Read what the child wrote: its result for the current artifact, when complete."""
        chunk = os.read(self.fileno(), 1 << 16)
        if not chunk:
            return self._died()
        self._buf += chunk
        result = None
        while b"\n" in self._buf:
            line, self._buf = self._buf.split(b"\n", 1)
            message = json.loads(line)
            if message.get("ready"):
                self.ready = True
            elif self.location is not None:
                result, self.location = message, None
                if result["verdict"] == "oom":  # the child exits after reporting it
                    self._replace()
        return result

    def expire(self, now: float) -> dict | None:
        """The timeout result when the current artifact is past its time (the child is replaced)."""
        if self.location is not None and now - self._sent_at > self.options.timeout:
            self._replace()
            return {"verdict": "timeout",
                    "error": {"class": "Timeout", "message": f"no result within {self.options.timeout:g} s"},
                    "seconds": round(now - self._sent_at, 4)}
        if not self.ready and now - self._started_at > STARTUP_TIMEOUT:
            raise WorkerStartError(f"a scan worker did not start within {STARTUP_TIMEOUT:g} s: {self._stderr_tail()}")
        return None

    def next_deadline(self) -> float:
        if self.location is not None:
            return self._sent_at + self.options.timeout
        return self._started_at + STARTUP_TIMEOUT

    def run(self, location: str) -> dict:
        """Check ``location`` and wait for its result (the sequential use, as in a Ray task)."""
        while not self.ready:
            self._wait_readable()
            self.on_readable()
        self.send(location)
        while True:
            if self._wait_readable():
                result = self.on_readable()
                if result is not None:
                    return result
            result = self.expire(time.monotonic())
            if result is not None:
                return result

    def _wait_readable(self) -> bool:
        wait = max(0.0, self.next_deadline() - time.monotonic()) + 0.001
        readable, _, _ = select.select([self], [], [], wait)
        if not readable:
            self.expire(time.monotonic())  # raises when the child never started
        return bool(readable)

    # -- deaths

    def _died(self) -> dict | None:
        rc = self.proc.wait()
        location, tail, was_ready = self.location, self._stderr_tail(), self.ready
        self.close()
        if not was_ready:
            raise WorkerStartError(f"a scan worker exited ({_status(rc)}) before it was ready: {tail}")
        self.start()
        if location is None:
            return None  # died while idle (killed from outside): replaced, nothing lost
        seconds = round(time.monotonic() - self._sent_at, 4)
        if rc == -signal.SIGKILL:
            return {"verdict": "oom", "error": {"class": "Killed", "message": f"worker killed by the system ({_status(rc)}); "
                                                "usually the kernel's out-of-memory killer"}, "seconds": seconds}
        return {"verdict": "crashed", "error": {"class": "WorkerDied", "message": f"worker died ({_status(rc)}): {tail}"},
                "seconds": seconds}

    def _replace(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
        self.close()
        self.start()

    def _stderr_tail(self) -> str:
        if self._stderr is None:
            return ""
        self._stderr.seek(0, os.SEEK_END)
        size = self._stderr.tell()
        self._stderr.seek(max(0, size - 4096))
        lines = self._stderr.read().decode("utf-8", "replace").strip().splitlines()
        return (lines[-1] if lines else "no message")[:MAX_MESSAGE]


def _status(rc: int) -> str:
    if rc < 0:
        try:
            return signal.Signals(-rc).name
        except ValueError:
            return f"signal {-rc}"
    return f"exit status {rc}"


if __name__ == "__main__":
    main()
