"""The progress bar: on a terminal only; none when stderr is piped or under ``CI=true``."""

from __future__ import annotations

import os
import sys
import time

__all__ = ["Progress", "wanted"]

_WIDTH = 30


def wanted(stream=None) -> bool:
    stream = stream or sys.stderr
    ci = os.environ.get("CI", "").lower() not in ("", "0", "false", "no")
    return not ci and hasattr(stream, "isatty") and stream.isatty()


class Progress:
    """``update`` once per artifact; redraws at most 10 times a second; ``close`` ends the line."""

    def __init__(self, total: int, *, enabled: bool, stream=None, done: int = 0):
        self.total, self.done, self.enabled = total, done, enabled
        self.stream = stream or sys.stderr
        self.failing = 0
        self._start = time.monotonic()
        self._first = done
        self._drawn = 0.0
        self._drawn_at = -1  # the count last drawn

    def update(self, record: dict) -> None:
        self.done += 1
        self.failing += record.get("verdict") != "ok"
        if self.enabled and (time.monotonic() - self._drawn > 0.1 or self.done == self.total):
            self._draw()

    def _draw(self) -> None:
        self._drawn, self._drawn_at = time.monotonic(), self.done
        frac = self.done / self.total if self.total else 1.0
        bar = "#" * int(frac * _WIDTH)
        rate = (self.done - self._first) / max(1e-9, self._drawn - self._start)
        self.stream.write(f"\r[{bar:<{_WIDTH}}] {self.done}/{self.total}  {self.failing} not ok  {rate:.1f}/s ")
        self.stream.flush()

    def close(self) -> None:
        if self.enabled:
            if self._drawn_at != self.done:
                self._draw()
            self.stream.write("\n")
            self.stream.flush()
