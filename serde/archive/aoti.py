"""AOTInductor packages: what ``torch._inductor.aoti_compile_and_package`` writes, described, never loaded.

Such a package is the same PT2 zip layout as ``torch.export.save``'s, but holds compiled code
instead of a program: per model, under ``<root>/data/aotinductor/<model>/``, a shared library
(``*.wrapper.so``), its C++ sources (``*.wrapper.cpp``, ``*.kernel.cpp``), and metadata JSON
(``*_metadata.json``: ``AOTI_DEVICE_KEY``, ``AOTI_PLATFORM``, ``AOTI_MACHINE``, ``AOTI_CPU_ISA``,
``AOTI_COMPUTE_CAPABILITY``), optionally constants and kernel binaries beside them (facts from
torch 2.13's ``torch/_inductor/package/package.py`` and a package it wrote). There is no
``models/<name>.json``: nothing pt2x could check or convert. pt2x reads the member names and
the metadata JSON (bounded, through the strict JSON codec) and nothing else.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..codec.json_codec import parse_json
from ..errors import Pt2FormatError
from .zip_reader import ZipReader

__all__ = ["AOTI_DIR", "AotiModel", "read_aoti_models", "is_aoti_package"]

AOTI_DIR = "data/aotinductor/"
_METADATA_KEYS = {
    "AOTI_DEVICE_KEY": "device",
    "AOTI_PLATFORM": "platform",
    "AOTI_MACHINE": "machine",
    "AOTI_CPU_ISA": "cpu_isa",
    "AOTI_COMPUTE_CAPABILITY": "compute_capability",
}
"""The metadata torch records for a compiled model -> pt2x's name for it."""
_MAX_VALUE = 100  # characters kept of a metadata value (the file's own text)
_MAX_METADATA_BYTES = 1 << 16


@dataclass
class AotiModel:
    """One compiled model of an AOTInductor package: its members and what its metadata says."""

    name: str
    files: dict[str, int] = field(default_factory=dict)  # member -> uncompressed size
    metadata: dict[str, str] = field(default_factory=dict)  # device, platform, machine, cpu_isa, ...
    metadata_errors: list[str] = field(default_factory=list)

    def as_dict(self) -> dict:
        return {"name": self.name, **self.metadata, "files": dict(self.files), "metadata_errors": list(self.metadata_errors)}


def is_aoti_package(rels: list[str]) -> bool:
    """Whether member names (relative to the root folder) hold AOTInductor compiled models."""
    return any(r.startswith(AOTI_DIR) and len(r) > len(AOTI_DIR) for r in rels)


def read_aoti_models(zr: ZipReader, prefix: str, rels: list[str]) -> dict[str, AotiModel]:
    """``model name -> AotiModel`` for every ``data/aotinductor/<model>/`` folder."""
    models: dict[str, AotiModel] = {}
    for rel in rels:
        if not rel.startswith(AOTI_DIR) or rel.endswith("/"):
            continue
        name, _, rest = rel[len(AOTI_DIR):].partition("/")
        model = models.setdefault(name, AotiModel(name))
        model.files[prefix + rel] = zr.size(prefix + rel)
        if rest.endswith("_metadata.json"):
            _read_metadata(zr, prefix + rel, model)
    return models


def _read_metadata(zr: ZipReader, member: str, model: AotiModel) -> None:
    if zr.size(member) > _MAX_METADATA_BYTES:
        model.metadata_errors.append(f"{member}: larger than {_MAX_METADATA_BYTES} bytes, not read")
        return
    try:
        doc = parse_json(zr.read(member), member=member)
    except Pt2FormatError as e:
        model.metadata_errors.append(str(e))
        return
    if not isinstance(doc, dict):
        model.metadata_errors.append(f"{member}: not a JSON object")
        return
    for key, name in _METADATA_KEYS.items():
        value = doc.get(key)
        if isinstance(value, str) and name not in model.metadata:
            model.metadata[name] = value[:_MAX_VALUE]
