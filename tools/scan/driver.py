"""``pt2x scan`` as a function: discover, skip what a former run did, check on a runner,
stream each record to the output and the summary."""

from __future__ import annotations

from typing import Callable

from ..terminal import json_safe_text, json_safe_value
from .discover import discover
from .options import ScanOptions
from .progress import Progress, wanted
from .report import Summary
from .results import ResultsFile

__all__ = ["scan"]


def scan(paths: list[str], options: ScanOptions, *, jobs: int = 1, ray: bool = False, address: str | None = None,
         out: str | None = None, resume: bool = False, progress: bool | None = None,
         on_record: Callable[[dict], None] | None = None) -> Summary:
    """Check every artifact ``paths`` name; returns the summary (of the former run's records too,
    with ``resume``). ``ray`` runs on Ray (``address``: a cluster; none: a local Ray with
    ``jobs`` CPUs), else on ``jobs`` local processes."""
    artifacts = discover(paths)
    summary = Summary(options.target, options.convert)
    results = ResultsFile(out, resume=resume) if out else None
    done: set[str] = set()
    try:
        if results is not None:
            for record in results.previous():
                if record["path"] not in done:
                    done.add(record["path"])
                    summary.add(record)
        todo = [a for a in artifacts if json_safe_text(a.location) not in done]  # as the records hold it
        bar = Progress(len(artifacts), enabled=wanted() if progress is None else progress,
                       done=len(artifacts) - len(todo))
        if ray:
            from .ray_runner import run_ray

            stream = run_ray(todo, options, jobs, address)
        else:
            from .pool import run_pool

            stream = run_pool(todo, options, jobs)
        try:
            for artifact, result in stream:
                # as the output file holds it (a message quoting non-UTF-8 text), whatever the runner
                record = json_safe_value({"path": artifact.location, "size": artifact.size, **result})
                if results is not None:
                    results.write(record)
                summary.add(record)
                bar.update(record)
                if on_record is not None:
                    on_record(record)
        finally:
            stream.close()
            bar.close()
    finally:
        if results is not None:
            results.close()
    return summary
