"""One artifact -> one result dict, in this process: what ``pt2x scan`` records per artifact.

The keys (stable; ``docs/scan.md`` lists them):

``verdict``     ``ok`` | ``findings`` | ``aoti-package`` | ``unreadable`` (here); the runners add
                ``crashed``, ``timeout`` and ``oom`` for a worker that died or ran out of time or
                memory (``VERDICTS``)
``kind``, ``layout``, ``archive_version``, ``models``
                from ``pt2x inspect --json`` (``tools/summary.py``); per model
                ``schema_version``, ``torch_version``, ``node_count``, ``ops``, ``weights``
``valid``, ``readable``, ``target``, ``writable``, ``findings``
                as ``pt2x validate --json`` prints them (``findings`` holds at most
                ``MAX_FINDINGS``; ``findings_total`` counts them all)
``blockers``    with a target: the codes of the findings that stop that release, with counts
``conversions`` per converter, per model: ``{"result": "ok"}``, ``{"result": "unsupported",
                "unsupported": {op: nodes}}`` or ``{"result": "error", "error": {...}}`` (a
                ``Pt2Error``, or any other exception, which is a bug in that converter: its class
                is kept, and the other conversions still run), and ``seconds``
``error``       for an unreadable artifact: ``{"class", "message", "reason"?}`` (``reason``: the
                message without the member and field path, when pt2x's error has one)
``seconds``     the whole check

Verdict ``ok`` means readable, no error finding (the target's included) and every conversion
asked for succeeded; ``findings`` means readable but one of those failed (content torch would
run, an unsafe pickle or a shape expression outside pt2x's grammar, is such a finding);
``aoti-package`` means an AOTInductor package: compiled code, not a program, never loaded. Timings aside, the
result depends only on the artifact's bytes and the options, so every runner gives the same.
"""

from __future__ import annotations

import errno
import time
from collections import Counter

from ...serde.errors import Pt2Error
from .discover import is_url, open_url
from .options import ScanOptions

__all__ = ["VERDICTS", "MAX_FINDINGS", "MAX_MESSAGE", "OutOfMemory", "check_artifact", "converter", "error_dict", "caused_by_memory"]

VERDICTS = ("ok", "findings", "aoti-package", "unreadable", "crashed", "timeout", "oom")
"""Every verdict an artifact can get; only ``ok`` counts as passing."""

MAX_FINDINGS = 50
"""Findings kept per artifact (a hostile file can have thousands; the counts stay exact)."""
MAX_MESSAGE = 500
"""Characters kept of an error message (messages quote the file's content)."""

_MODEL_KEYS = ("schema_version", "torch_version", "node_count", "ops", "weights", "constants")


def _clip(text: str) -> str:
    return text if len(text) <= MAX_MESSAGE else text[:MAX_MESSAGE] + "..."


def error_dict(e: BaseException) -> dict:
    """``{"class", "message"}``, plus ``reason`` (the message without the member and field path,
    which the summary groups errors by) for pt2x's errors that locate themselves."""
    out = {"class": type(e).__name__, "message": _clip(str(e))}
    reason = getattr(e, "reason", None)
    if isinstance(reason, str) and reason != out["message"]:
        out["reason"] = _clip(reason)
    return out


def caused_by_memory(e: BaseException) -> bool:
    """Whether ``e`` is, or was raised while handling, a ``MemoryError`` (the converters and the
    decoder wrap it in a ``Pt2Error`` naming where it happened) or an ``OSError`` ENOMEM (memory-
    mapping a file larger than the worker's limit)."""
    seen = set()
    while e is not None and id(e) not in seen:
        if isinstance(e, MemoryError) or (isinstance(e, OSError) and e.errno == errno.ENOMEM):  # ENOMEM: a map past the limit
            return True
        seen.add(id(e))
        e = e.__cause__ or e.__context__
    return False


class OutOfMemory(Exception):
    """The check ran past the worker's memory limit (the worker reports ``oom`` and is replaced)."""


def _source(location: str):
    """What ``load`` reads: a local path (memory-mapped), or the bytes of an fsspec URL."""
    if not is_url(location):
        from ..cli import check_input

        check_input(location)
        return location
    return open_url(location)


def _inspect_keys(archive) -> dict:
    from ..summary import archive_summary

    s = archive_summary(archive)
    models = {name: {k: m[k] for k in _MODEL_KEYS} for name, m in s["models"].items()}
    return {"kind": s["kind"], "layout": s["layout"], "archive_version": s["archive_version"], "models": models}


def _validate_keys(archive, options: ScanOptions) -> dict:
    from ...serde.validate import validate_archive

    findings = validate_archive(archive)
    out: dict = {"readable": True, "target": options.target}
    if options.target:
        from ...serde.compat.plan import check_target, writable_for_target
        from ...serde.compat.releases import parse_target

        version = parse_target(options.target)
        target_findings = check_target(archive, version)
        findings += target_findings
        out["writable"] = writable_for_target(archive, version)
        out["blockers"] = dict(sorted(Counter(f.code for f in target_findings if f.severity == "error").items()))
    out["valid"] = not any(f.severity == "error" for f in findings)
    out["findings"] = [f.as_dict() for f in findings[:MAX_FINDINGS]]
    out["findings_total"] = len(findings)
    return out


def converter(name: str):
    """The function doing conversion ``name`` (one of ``options.CONVERTERS``); getting it imports
    its target's package (``ImportError``, a ``MissingExtraError``, when its extra is missing)."""
    from ... import converters

    return converters.to_onnx if name == "onnx" else converters.to_tflite


def _convert_one(name: str, archive, model: str) -> dict:
    from ...converters.errors import UnsupportedOpsError

    t0 = time.perf_counter()
    try:
        converter(name)(archive, model=model)  # into memory: the model is returned, nothing written
        out: dict = {"result": "ok"}
    except UnsupportedOpsError as e:
        if caused_by_memory(e):
            raise OutOfMemory(f"{name} conversion of model {model!r}") from e
        out = {"result": "unsupported", "unsupported": {p.target: p.count for p in e.ops}}
    except Exception as e:  # noqa: BLE001 - a Pt2Error (ConversionError, MissingExtraError, "not available"),
        # or a bug in the converter (its class says so): recorded for this conversion, the others go on
        if caused_by_memory(e):
            raise OutOfMemory(f"{name} conversion of model {model!r}") from e
        out = {"result": "error", "error": error_dict(e)}
    out["seconds"] = round(time.perf_counter() - t0, 4)
    return out


def _conversions(archive, options: ScanOptions) -> dict:
    return {name: {model: _convert_one(name, archive, model) for model in archive.models} for name in options.convert}


def _verdict(result: dict) -> str:
    if result.get("kind") == "aoti-package":
        return "aoti-package"
    converted = all(c["result"] == "ok" for per in result.get("conversions", {}).values() for c in per.values())
    return "ok" if result["valid"] and converted else "findings"


def check_artifact(location: str, options: ScanOptions) -> dict:
    """Check one artifact; raises only ``OutOfMemory`` (and ``MemoryError``), which the worker
    records as ``oom``. A file pt2x refuses is ``unreadable``; any other exception is a bug in
    pt2x and recorded as ``crashed`` with its class, so one artifact never stops the scan."""
    from ...serde import load

    t0 = time.perf_counter()
    result: dict = {"verdict": None}
    try:
        with load(_source(location)) as archive:
            result.update(_inspect_keys(archive))
            result.update(_validate_keys(archive, options))
            result["conversions"] = _conversions(archive, options)
        result["verdict"] = _verdict(result)
    except OutOfMemory:
        raise
    except Pt2Error as e:
        if caused_by_memory(e):
            raise OutOfMemory("reading the artifact") from e
        result = {"verdict": "unreadable", "readable": False, "target": options.target, "error": error_dict(e)}
    except Exception as e:  # noqa: BLE001 - a bug in pt2x: recorded for this artifact, the scan goes on
        if caused_by_memory(e):
            raise OutOfMemory("checking the artifact") from e
        result = {"verdict": "crashed", "error": error_dict(e)}
    result["seconds"] = round(time.perf_counter() - t0, 4)
    return result
