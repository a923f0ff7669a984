"""A supervised child process: the one pattern behind the fleet scan's workers and the fuzzer's.

A child that checks untrusted files runs under a time limit (kept by its parent) and a memory
limit (its own ``RLIMIT_AS``: ``process_limits``), talks to its parent in JSON lines, and may die
in ways the parent must name. Used by ``tools/scan/worker.py`` (``pt2x scan``) and by the
fuzzer (``fuzz/fuzz.py``); each keeps only its own protocol.

Child side: ``child_channel()`` before anything prints (the parent's messages go to a copy of
stdout; whatever else writes to stdout lands in the log), the imports and warm-up, then
``process_limits.limit_address_space(budget)``, then "ready".

Parent side: ``Supervised`` starts the child (one math-library thread, stderr into a log file),
sends and reads JSON lines without blocking, keeps one deadline (the start-up's, then each
task's), kills it, says why it died (``death``: out of memory when the system killed it or its
log shows an allocation failure, else a crash by signal or an exit status) and starts another
(``restart``).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from typing import TextIO

__all__ = ["ONE_THREAD", "Death", "Supervised", "child_channel", "exit_text"]

ONE_THREAD = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
"""A child's math libraries use one thread: the parallelism is the processes, and numpy's thread
pools in every child would compete for the same cores (Ray sets the same)."""

_ALLOCATION_FAILURES = ("MemoryError", "bad_alloc", "Cannot allocate memory")
"""What a child's log shows when it died of an allocation its memory limit refused."""
_LOG_TAIL_BYTES = 200_000
"""The most of a child's log read back for one task (a traceback, a faulthandler dump)."""
_STOP_GRACE = 5.0
"""Seconds a child may take to exit once its input is closed, before it is killed."""


def child_channel() -> TextIO:
    """In the child: the line-buffered channel to the parent (a copy of stdout); stdout itself
    (``print``, a library's output) goes to stderr, the parent's log, from now on."""
    channel = os.fdopen(os.dup(1), "w", buffering=1, encoding="utf-8")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return channel


def exit_text(rc: int) -> str:
    """``SIGSEGV``, ``signal 99`` or ``exit status 1`` for a ``Popen.returncode``."""
    if rc < 0:
        try:
            return signal.Signals(-rc).name
        except ValueError:
            return f"signal {-rc}"
    return f"exit status {rc}"


@dataclass(frozen=True)
class Death:
    """Why a child died on its own: ``kind`` "oom" or "crash", ``what`` in words."""

    kind: str
    what: str


def _death(rc: int, log: str) -> Death:
    if rc == -signal.SIGKILL:  # not from its parent (which kills it only when it expires)
        return Death("oom", f"{exit_text(rc)}: killed by the system, usually the kernel's out-of-memory killer")
    if any(s in log for s in _ALLOCATION_FAILURES):
        return Death("oom", f"{exit_text(rc)} after an allocation failure")
    return Death("crash", exit_text(rc))


class Supervised:
    """One child process: ``argv`` run with its stdin and stdout as JSON-line pipes and its stderr
    appended to ``log_path`` (a temporary file when None). ``new_session``: the child leads its own
    process group, killed as a whole (a payload that forks dies with it)."""

    def __init__(self, argv: list[str], *, startup_timeout: float, log_path: str | None = None,
                 cwd: str | None = None, env: dict | None = None, new_session: bool = False):
        self.argv = argv
        self.startup_timeout = startup_timeout
        self.log_path = log_path
        self.cwd = cwd
        self.env = {**os.environ, **ONE_THREAD, **(env or {})}
        self.new_session = new_session
        self.proc: subprocess.Popen | None = None
        self.log = None
        self.ready = False
        self.deadline = 0.0
        self.started_at = 0.0
        self._buf = b""
        self._mark = 0

    # -- life cycle

    def start(self) -> None:
        """Start the child; it has ``startup_timeout`` seconds to say it is ready."""
        self._close_log()
        self.log = open(self.log_path, "ab") if self.log_path else tempfile.TemporaryFile()
        self.proc = subprocess.Popen(self.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log,
                                     cwd=self.cwd, env=self.env, start_new_session=self.new_session)
        os.set_blocking(self.proc.stdout.fileno(), False)
        self.ready, self._buf, self._mark = False, b"", 0
        self.started_at = time.monotonic()
        self.deadline = self.started_at + self.startup_timeout

    def kill(self) -> int:
        """Kill the child (its process group with ``new_session``) and close its pipes; its exit
        status. The log stays readable (``death``, ``log_since_task``) until the next start."""
        if self.proc.poll() is None:
            try:
                if self.new_session:
                    os.killpg(self.proc.pid, signal.SIGKILL)
                else:
                    self.proc.kill()
            except ProcessLookupError:
                pass
        rc = self.proc.wait()
        self._release()
        return rc

    def reap(self) -> int:
        """The child closed its output (it is dying on its own): its exit status, once it has
        exited (killed if it lingers past ``_STOP_GRACE`` seconds), its pipes closed. Killing at
        once could hide how it died behind our own SIGKILL."""
        try:
            self.proc.wait(timeout=_STOP_GRACE)
        except subprocess.TimeoutExpired:
            pass
        return self.kill()

    def stop(self, grace: float = _STOP_GRACE) -> None:
        """End the child gently (its input closed: it exits after its current task), killed
        after ``grace`` seconds, and close its log; nothing when none runs."""
        if self.proc is None:
            return
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        try:
            self.proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            pass
        self.kill()
        self.proc = None
        self._close_log()

    def restart(self) -> None:
        self.kill()
        self.start()

    def _release(self) -> None:
        for f in (self.proc.stdin, self.proc.stdout):
            try:
                f.close()
            except (OSError, ValueError):
                pass

    def _close_log(self) -> None:
        if self.log is not None:
            self.log.close()
            self.log = None

    # -- messages

    def fileno(self) -> int:
        """The child's stdout, for ``select``."""
        return self.proc.stdout.fileno()

    def send(self, message: dict) -> bool:
        """Write one JSON line to the child; False when it is dead (reading then says how)."""
        try:
            self.proc.stdin.write((json.dumps(message) + "\n").encode())
            self.proc.stdin.flush()
            return True
        except (BrokenPipeError, OSError, ValueError):
            return False

    def read(self) -> tuple[list[dict], bool]:
        """The complete messages the child wrote so far, and whether its stdout closed (it died)."""
        eof = False
        while True:
            try:
                chunk = os.read(self.fileno(), 1 << 16)
            except BlockingIOError:
                break
            if not chunk:
                eof = True
                break
            self._buf += chunk
        *lines, self._buf = self._buf.split(b"\n")
        return [json.loads(line) for line in lines if line.strip()], eof

    # -- time

    def begin_task(self, seconds: float) -> None:
        """A task starts now with ``seconds`` to finish; the log read back is the task's from here."""
        self.deadline = time.monotonic() + seconds
        self.log.flush()
        self._mark = self.log_size()

    def expired(self, now: float) -> bool:
        return now > self.deadline

    # -- deaths and logs

    def death(self, rc: int) -> Death:
        """Why the child died on its own with exit status ``rc`` (from ``reap``)."""
        return _death(rc, self.log_since_task())

    def log_since_task(self) -> str:
        """What the child wrote to its log since the current task began (at most the last 200 kB)."""
        try:
            if self.log_path:
                with open(self.log_path, "rb") as f:
                    f.seek(self._mark)
                    data = f.read()
            else:
                self.log.seek(self._mark)
                data = self.log.read()
                self.log.seek(0, os.SEEK_END)
        except (OSError, ValueError):
            return ""
        return data[-_LOG_TAIL_BYTES:].decode("utf-8", "replace")

    def last_log_line(self, limit: int) -> str:
        """The child's last line on its log, cut to ``limit`` characters ("no message" when none)."""
        lines = self.log_since_task().strip().splitlines()
        return (lines[-1] if lines else "no message")[:limit]

    def log_size(self) -> int:
        """The log's size in bytes now."""
        try:
            return os.fstat(self.log.fileno()).st_size
        except (OSError, ValueError):
            return 0
