"""The local runner: ``jobs`` worker processes, each checking one artifact at a time.

Artifacts are handed out as workers become free and results are yielded as they complete
(in completion order), so nothing is held past the one artifact per worker in flight. Each
worker's time and memory limits, and what a death means, are ``worker.Worker``'s.
"""

from __future__ import annotations

import select
import time
from typing import Iterable, Iterator

from .discover import Artifact
from .options import ScanOptions
from .worker import Worker

__all__ = ["run_pool"]


def run_pool(artifacts: Iterable[Artifact], options: ScanOptions, jobs: int) -> Iterator[tuple[Artifact, dict]]:
    """Yield ``(artifact, result)`` for every artifact, checked by ``jobs`` local workers."""
    todo = iter(artifacts)
    first = next(todo, None)
    if first is None:
        return
    upcoming: Artifact | None = first  # the next artifact to hand out; None once all are out
    if hasattr(artifacts, "__len__"):
        jobs = min(jobs, len(artifacts))  # no idle workers to start
    workers = [Worker(options) for _ in range(max(1, jobs))]
    current: dict[Worker, Artifact] = {}
    try:
        while True:
            for w in workers:
                if w.idle and upcoming is not None:
                    current[w] = upcoming
                    w.send(upcoming.location)
                    upcoming = next(todo, None)
            if not current and upcoming is None:
                return
            wait = max(0.0, min(w.next_deadline() for w in workers if w in current or not w.ready) - time.monotonic())
            readable, _, _ = select.select(workers, [], [], wait + 0.001)
            for w in readable:
                result = w.on_readable()
                if result is not None:
                    yield current.pop(w), result
            now = time.monotonic()
            for w in workers:
                result = w.expire(now)
                if result is not None:
                    yield current.pop(w), result
    finally:
        for w in workers:
            w.close()
