"""What a scan checks and the limits each artifact runs under: one value every runner passes on."""

from __future__ import annotations

from dataclasses import asdict, dataclass

__all__ = ["CONVERTERS", "ScanOptions"]

CONVERTERS = ("onnx", "tflite")
"""The conversions ``--convert`` can ask for, each done into memory (nothing is written)."""


@dataclass(frozen=True)
class ScanOptions:
    target: str | None = None  # a release that must read each artifact: "torch==2.10", "8.15"
    convert: tuple[str, ...] = ()  # subset of CONVERTERS, in the order given
    timeout: float = 60.0  # seconds per artifact, after the worker has started
    memory_mb: int = 2048  # address space a worker may add past its size after imports (RLIMIT_AS)

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, d: dict) -> "ScanOptions":
        return cls(target=d.get("target"), convert=tuple(d.get("convert") or ()),
                   timeout=float(d["timeout"]), memory_mb=int(d["memory_mb"]))
