"""A one-line progress display for ``pt2x convert`` and ``pt2x verify`` on a terminal.

Nothing is drawn for the first ``DELAY`` seconds, so quick runs print nothing; then the line
shows the phase and the time taken, and, while weights are written, the bytes done out of the
total. It is drawn on stderr only when stderr is a terminal and ``CI`` is not set (the scan's
rule, ``scan.progress.wanted``), at most ``RATE`` times a second, from a daemon thread, and the
line is cleared when the work ends.
"""

from __future__ import annotations

import sys
import threading
import time

from .scan.progress import wanted

__all__ = ["ConversionProgress", "DELAY"]

DELAY = 2.0  # seconds before anything is drawn
RATE = 4  # redraws a second


def _size(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1000 or unit == "GB":
            return f"{n:.1f} {unit}" if unit != "B" else f"{int(n)} B"
        n /= 1000
    return f"{n:.1f} GB"


class ConversionProgress:
    """``with ConversionProgress("converting m.pt2") as p:`` ... ``p.bytes(done, total)`` as a
    converter writes weights (the ``progress=`` callback of ``to_onnx``/``to_tflite``)."""

    def __init__(self, what: str, *, enabled: bool | None = None, stream=None):
        self.stream = stream or sys.stderr
        self.enabled = wanted(self.stream) if enabled is None else enabled
        self.what = what
        self.done = self.total = 0
        self._start = time.monotonic()
        self._stop = threading.Event()
        self._drawn = False
        self._thread = threading.Thread(target=self._run, daemon=True) if self.enabled else None

    def bytes(self, done: int, total: int) -> None:
        self.done, self.total = done, total

    def line(self) -> str:
        elapsed = time.monotonic() - self._start
        text = f"{self.what}  {elapsed:.0f} s"
        if self.total:
            text += f"  writing weights {100 * self.done / self.total:.0f}% ({_size(self.done)} of {_size(self.total)})"
        return text

    def _run(self) -> None:
        if self._stop.wait(DELAY):
            return
        while not self._stop.is_set():
            self.stream.write("\r\x1b[K" + self.line())
            self.stream.flush()
            self._drawn = True
            self._stop.wait(1 / RATE)

    def __enter__(self) -> "ConversionProgress":
        if self._thread is not None:
            self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            if self._drawn:
                self.stream.write("\r\x1b[K")
                self.stream.flush()
