"""The check of one artifact in a child process, under a time and a memory limit.

Child side (``python -m pt2x.tools.scan.worker``): reads the options (one JSON line), imports
what the checks need and checks the example pt2x ships once (warm-up), then limits its address
space (``RLIMIT_AS``) to its size after that plus ``memory_mb``, says it is ready, and answers
one JSON line per artifact location it is sent. Running out of memory is reported as verdict
``oom`` and the child exits (its heap may be left in pieces); the parent starts another.

Parent side (``Worker``, on ``tools/supervised.py``'s child process): starts the child, sends
one artifact at a time, and turns what can go wrong into that artifact's result: no answer
within ``timeout`` seconds -> the child is killed, verdict ``timeout``; the child killed by the
system (SIGKILL it did not get from us: the kernel's out-of-memory killer) or dead after an
allocation failure -> ``oom``; any other death -> ``crashed``, with the signal or exit status
and the last line the child wrote on stderr. A replacement is started each time, so one
artifact never stops the scan. The local pool multiplexes several ``Worker``s; a Ray task runs
one sequentially (``run``).
"""

from __future__ import annotations

import json
import os
import select
import sys
import time

from ..process_limits import limit_address_space
from ..supervised import Supervised, child_channel, exit_text
from .check import MAX_MESSAGE, converter
from .options import ScanOptions

__all__ = ["Worker", "WorkerStartError", "main"]

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

    channel = child_channel()
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
        self.child = Supervised([sys.executable, "-m", "pt2x.tools.scan.worker"], startup_timeout=STARTUP_TIMEOUT)
        self.location: str | None = None
        self._sent_at = 0.0
        self.start()

    # -- life cycle

    def start(self) -> None:
        self.child.start()
        self.child.send(self.options.to_json())
        self.location = None

    def close(self) -> None:
        self.child.stop()

    @property
    def proc(self):
        return self.child.proc

    @property
    def ready(self) -> bool:
        return self.child.ready

    def fileno(self) -> int:
        return self.child.fileno()

    # -- one artifact

    @property
    def idle(self) -> bool:
        return self.ready and self.location is None

    def send(self, location: str) -> None:
        self.location = location
        self._sent_at = time.monotonic()
        self.child.begin_task(self.options.timeout)
        self.child.send({"location": location})  # False when the child is dead; reading says how

    def on_readable(self) -> dict | None:
        """Read what the child wrote: its result for the current artifact, when complete."""
        messages, eof = self.child.read()
        result = None
        for message in messages:
            if message.get("ready"):
                self.child.ready = True
            elif self.location is not None:
                result, self.location = message, None
                if result["verdict"] == "oom":  # the child exits after reporting it
                    self._replace()
                    return result
        if eof:
            died = self._died()
            result = result if result is not None else died
        return result

    def expire(self, now: float) -> dict | None:
        """The timeout result when the current artifact is past its time (the child is replaced)."""
        if not self.child.expired(now):
            return None
        if self.location is not None:
            self._replace()
            return {"verdict": "timeout",
                    "error": {"class": "Timeout", "message": f"no result within {self.options.timeout:g} s"},
                    "seconds": round(now - self._sent_at, 4)}
        if not self.ready:
            raise WorkerStartError(f"a scan worker did not start within {STARTUP_TIMEOUT:g} s: "
                                   f"{self.child.last_log_line(MAX_MESSAGE)}")
        return None

    def next_deadline(self) -> float:
        return self.child.deadline

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
        rc = self.child.reap()
        location, was_ready = self.location, self.ready
        death, tail = self.child.death(rc), self.child.last_log_line(MAX_MESSAGE)
        if not was_ready:
            raise WorkerStartError(f"a scan worker exited ({exit_text(rc)}) before it was ready: {tail}")
        self.start()
        if location is None:
            return None  # died while idle (killed from outside): replaced, nothing lost
        seconds = round(time.monotonic() - self._sent_at, 4)
        if death.kind == "oom":
            return {"verdict": "oom", "error": {"class": "Killed", "message": f"worker died ({death.what})"},
                    "seconds": seconds}
        return {"verdict": "crashed", "error": {"class": "WorkerDied", "message": f"worker died ({death.what}): {tail}"},
                "seconds": seconds}

    def _replace(self) -> None:
        self.child.kill()
        self.start()


if __name__ == "__main__":
    main()
