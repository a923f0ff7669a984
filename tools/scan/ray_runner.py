"""The Ray runner: the artifact list in chunks, each chunk one Ray task, results streamed back
with ``ray.wait`` as tasks complete.

A task runs its chunk through a ``worker.Worker`` (a child process of the Ray worker, under
the same time and memory limits as the local pool); the child is kept by the Ray worker
process for the next task, so its start-up is paid once per Ray worker, not per artifact.
At most ``2 x`` the cluster's CPUs tasks are in flight, so the driver holds a bounded number
of results whatever the fleet's size. A task that fails as a whole (its Ray worker lost, a
node gone) records each of its artifacts as ``crashed`` with Ray's error class.

``address=None`` starts a local Ray with ``num_cpus=jobs``; an address (``auto``,
``ray://head:10001``) joins that cluster, whose nodes need pt2x installed (and fsspec with the
filesystem's package to read URLs). A Ray the caller already started is used as it is.
"""

from __future__ import annotations

from typing import Iterable, Iterator

from ...serde.errors import Pt2UsageError, extra_required
from .check import error_dict
from .discover import Artifact
from .options import ScanOptions

__all__ = ["run_ray", "chunk_size", "check_address"]

CONNECT_SECONDS = 3.0
"""How long ``check_address`` waits for a TCP connection to a cluster's address (Ray itself
retries for over a minute, printing a warning each time, when nothing listens there)."""

_WORKERS: dict = {}  # in a Ray worker process: options (JSON text) -> its child Worker
_TASK = None


def _ray():
    with extra_required("pt2x scan --ray", "ray", "ray"):
        import ray
    return ray


def _check_chunk(locations: list[str], options_json: dict) -> list[dict]:
    """The Ray task: check each location in this Ray worker's child process, in order."""
    import json

    from .worker import Worker

    key = json.dumps(options_json, sort_keys=True)
    worker = _WORKERS.get(key)
    if worker is None:
        worker = _WORKERS[key] = Worker(ScanOptions.from_json(options_json))
    return [worker.run(location) for location in locations]


def chunk_size(count: int, cpus: int) -> int:
    """Artifacts per task: about 4 tasks per CPU (so results stream and load balances), at most 32."""
    return max(1, min(32, count // max(1, 4 * cpus)))


def _host_port(address: str) -> tuple[str, int] | None:
    """(host, port) of ``host:port`` or ``ray://host:port``; None for what Ray resolves itself
    (``auto``, ``local``, a bare host without a port)."""
    rest = address.split("://", 1)[1] if "://" in address else address
    host, sep, port = rest.rstrip("/").rpartition(":")
    if not sep or not port.isdigit() or not host:
        return None
    return host.strip("[]"), int(port)


def check_address(address: str) -> None:
    """Raise ``Pt2UsageError`` (one line) unless something accepts a TCP connection at the
    cluster ``address`` within ``CONNECT_SECONDS``; checked before Ray is imported or any work."""
    import socket

    where = _host_port(address)
    if where is None:
        return
    try:
        with socket.create_connection(where, timeout=CONNECT_SECONDS):
            pass
    except OSError as e:
        reason = "timed out" if isinstance(e, socket.timeout) else (e.strerror or str(e)).lower()
        raise Pt2UsageError(f"--ray {address}: no Ray cluster reachable at {where[0]}:{where[1]} ({reason})") from None


def _connect(ray, jobs: int, address: str | None) -> bool:
    """Start or join Ray unless it is already up; True when this call started it."""
    if ray.is_initialized():
        return False
    kwargs = {"include_dashboard": False, "logging_level": "ERROR", "log_to_driver": False}
    if address:
        try:
            ray.init(address=address, **kwargs)
        except ConnectionError as e:  # no cluster there: the user's address, one line
            raise Pt2UsageError(f"--ray {address}: cannot join a Ray cluster: {e}") from None
    else:
        ray.init(num_cpus=max(1, jobs), **kwargs)
    return True


def run_ray(artifacts: list[Artifact], options: ScanOptions, jobs: int,
            address: str | None = None) -> Iterator[tuple[Artifact, dict]]:
    """Yield ``(artifact, result)`` for every artifact, checked by Ray tasks."""
    global _TASK
    ray = _ray()
    started = _connect(ray, jobs, address)
    try:
        if _TASK is None:
            _TASK = ray.remote(num_cpus=1, max_retries=0)(_check_chunk)
        cpus = max(1, int(ray.cluster_resources().get("CPU", jobs)))
        size = chunk_size(len(artifacts), cpus)
        chunks: Iterable[list[Artifact]] = (artifacts[i:i + size] for i in range(0, len(artifacts), size))
        in_flight: dict = {}
        options_json = options.to_json()
        for chunk in chunks:
            if len(in_flight) >= 2 * cpus:
                yield from _collect(ray, in_flight)
            in_flight[_TASK.remote([a.location for a in chunk], options_json)] = chunk
        while in_flight:
            yield from _collect(ray, in_flight)
    finally:
        if started:
            ray.shutdown()


def _collect(ray, in_flight: dict) -> Iterator[tuple[Artifact, dict]]:
    """Wait for one task to complete and yield its results."""
    done, _ = ray.wait(list(in_flight), num_returns=1)
    for ref in done:
        chunk = in_flight.pop(ref)
        try:
            results = ray.get(ref)
        except Exception as e:  # noqa: BLE001 - a task lost as a whole: each of its artifacts says so
            err = error_dict(e)
            err["message"] = err["message"].splitlines()[0] if err["message"] else ""
            results = [{"verdict": "crashed", "error": err, "seconds": 0.0} for _ in chunk]
        yield from zip(chunk, results)
