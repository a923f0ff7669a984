"""``load()``: a .pt2 file -> models with schema programs and numpy weights, without torch.

Reads the layouts torch has written:
  * PT2 archive, torch >= 2.10: ``<root>/models/<m>.json``, raw weights and constants with
    ``*_config.json`` payload configs (``payload.py``);
  * PT2 archive, torch 2.8-2.9: the same but weights/constants as one torch.save pickle each
    (``data/weights/<m>.pt``), read by the data-only ``pickle_reader``;
  * flat zip, torch 2.6-2.7: ``serialized_exported_program.json`` and pickled
    ``serialized_state_dict.pt`` / ``serialized_constants.pt``.
Nothing in the file runs: sample inputs, pickled payloads, custom objects and native
code (AOTInductor, ExecuTorch) are listed in ``.pickled`` / ``.unloaded`` with the reason.
An AOTInductor package (compiled models only, no ``models/<name>.json``) loads as layout
``aoti-package``: no models, its compiled models described in ``.aoti_models`` (``aoti.py``).
Members pt2x does not recognise are kept in ``.unrecognized`` — reported, never dropped.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import BinaryIO

import numpy as np

from ...schema import definitions as d
from ...schema.version import READ_MAJOR, SCHEMA_VERSION
from ..errors import ArchiveError, Pt2FormatError, SchemaVersionError, UnsafeContentError
from ..codec.json_codec import DecodeReport, decode, parse_json_pairs, to_plain
from .aoti import AotiModel, is_aoti_package, read_aoti_models
from .payload import NotLoaded, lazy_reason, read_payloads
from .zip_reader import ZipReader, open_buffer

__all__ = ["load", "Pt2Archive", "Pt2Model", "NotLoaded", "AOTI_PACKAGE", "aoti_refusal"]

AOTI_PACKAGE = "aoti-package"

FLAT_PROGRAM = "serialized_exported_program.json"
_MODEL_JSON = re.compile(r"models/([^/]+)\.json")
_BOOKKEEPING = {"archive_format", "archive_version", "byteorder", "version", ".data/version", ".data/serialization_id"}
_NATIVE_DIRS = {
    "data/aotinductor/": "AOTInductor compiled code",
    "data/executorch/": "ExecuTorch program",
    "data/mtia": "MTIA binaries",
    "xl_model_weights/": "external weights for AOTInductor",
}


@dataclass
class Pt2Model:
    """One exported program of an archive: schema objects plus its weights as numpy arrays."""

    name: str
    program: d.ExportedProgram
    json_member: str
    state_dict: dict[str, np.ndarray]
    constants: dict[str, np.ndarray]
    pickled: list[NotLoaded] = field(default_factory=list)
    weights_config: d.PayloadConfig | None = None
    constants_config: d.PayloadConfig | None = None
    tensor_members: dict[str, str] = field(default_factory=dict)  # FQN -> member holding its bytes
    unknown_fields: list[str] = field(default_factory=list)  # schema fields kept but not understood

    @property
    def schema_version(self) -> tuple[int, int]:
        v = self.program.schema_version
        return (v.major, v.minor)


class Pt2Archive:
    """A loaded .pt2 file. Arrays are views over a read-only memory map: keep the archive
    alive (or use it as a context manager) while you use them."""

    def __init__(self, source: str, layout: str, root: str, zr: ZipReader, keepalive: object):
        self.source = source
        self.layout = layout  # "pt2" | "pt2-pickled-weights" | "flat" | "aoti-package"
        self.root = root
        self.zip = zr
        self.models: dict[str, Pt2Model] = {}
        self.extra: dict[str, bytes] = {}
        self.unloaded: list[NotLoaded] = []
        self.unrecognized: list[str] = []
        self.archive_version: str | None = None
        self.aoti_models: dict[str, AotiModel] = {}  # AOTInductor compiled models (described, never loaded)
        self._keepalive = keepalive

    @property
    def members(self) -> list[str]:
        return self.zip.names

    def model(self, name: str | None = None) -> Pt2Model:
        """The named model, or the only one (or "model") when ``name`` is None."""
        from ..errors import Pt2UsageError

        if self.layout == AOTI_PACKAGE:
            raise UnsafeContentError(aoti_refusal(self), member=f"{self.root}/data/aotinductor/")
        if name is None:
            if len(self.models) == 1:
                return next(iter(self.models.values()))
            name = "model"
        try:
            return self.models[name]
        except KeyError:
            raise Pt2UsageError(f"no model {name!r} in {self.source}; it has {sorted(self.models)}") from None

    @property
    def schema_version(self) -> tuple[int, int] | None:
        return next(iter(self.models.values())).schema_version if self.models else None

    @property
    def torch_version(self) -> str | None:
        return next(iter(self.models.values())).program.torch_version if self.models else None

    def close(self) -> None:
        """Release the memory map. Arrays taken from the archive must not be used afterwards."""
        mm, self._keepalive = self._keepalive, None
        if mm is not None:
            for item in self.unloaded + [p for m in self.models.values() for p in m.pickled]:
                item.settle()  # a pending description reads the bytes about to be unmapped
            try:
                mm.close()
            except BufferError:
                pass  # arrays still view it: the map is freed when they are

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self) -> str:
        return f"<Pt2Archive {self.source!r} layout={self.layout} models={sorted(self.models)}>"


def load(src: str | os.PathLike | BinaryIO | bytes) -> Pt2Archive:
    """Read a .pt2 file (path, binary file or bytes) safely and without torch."""
    buf, label, keepalive = open_buffer(src)
    zr = ZipReader(buf, source=label)
    names = zr.names
    if FLAT_PROGRAM in names:
        archive = Pt2Archive(label, "flat", "", zr, keepalive)
        _load_flat(archive)
        return archive
    root = _single_root(names, label)
    archive = Pt2Archive(label, "pt2", root, zr, keepalive)
    _load_pt2(archive)
    return archive


def aoti_refusal(archive: Pt2Archive) -> str:
    """Why an AOTInductor package cannot be checked or converted, in one sentence."""
    what = ", ".join(f"{m.name!r} ({m.metadata.get('platform', '?')} {m.metadata.get('machine', '?')}, "
                     f"device {m.metadata.get('device', '?')})" for m in archive.aoti_models.values())
    return (f"an AOTInductor package: compiled code for {what or 'no model'}, not an exported program; "
            "pt2x never loads or runs it. torch.export.save(exported_program, path) writes a file pt2x "
            "can check and convert")


def _single_root(names: list[str], label: str) -> str:
    if not names:
        raise ArchiveError("empty archive: no members", member=label)
    roots = {n.split("/", 1)[0] for n in names}
    for n in names:
        if "/" not in n:
            raise ArchiveError("member outside the archive's single root folder", member=n)
    if len(roots) != 1:
        raise ArchiveError(f"members under {len(roots)} root folders {sorted(roots)[:5]}; a .pt2 has one", member=label)
    return roots.pop()


def _program(zr: ZipReader, member: str, report: DecodeReport) -> d.ExportedProgram:
    """Decode a model's JSON after checking its schema version is one pt2x reads (7.x is upgraded)."""
    data = parse_json_pairs(zr.view(member), member=member)
    top = dict(data) if type(data) is tuple else {}
    version = dict(top["schema_version"]) if type(top.get("schema_version")) is tuple else {}
    major, minor = version.get("major"), version.get("minor")
    torch_version = _clip(top.get("torch_version", "unknown"))
    if type(major) is int and major != READ_MAJOR:
        if major == READ_MAJOR - 1:
            from ..codec.upgrade import upgrade_to_current

            data = upgrade_to_current(to_plain(data, member=member), member=member)
        else:
            raise SchemaVersionError(
                f"file uses schema {major}.{_clip(minor)} (written by torch {torch_version}); pt2x reads {READ_MAJOR}.x and writes "
                f"{SCHEMA_VERSION[0]}.{SCHEMA_VERSION[1]}",
                member=member,
                path="schema_version",
            )
    return decode(d.ExportedProgram, data, member=member, report=report)


def _clip(value: object, limit: int = 40) -> str:
    """A value from the file for a message: ``str`` of it, at most ``limit`` characters."""
    text = str(value) if isinstance(value, (str, int)) and not isinstance(value, bool) else repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _pickled(zr: ZipReader, member: str) -> dict[str, np.ndarray]:
    """Tensors of a torch.save zip stored as ``member`` (older layouts), read data-only."""
    from ..codec.pickle_reader import find_data_pkl, read_tensor_pickle

    inner = ZipReader(zr.view(member), label=member)

    def open_member(name: str) -> memoryview:
        if name not in inner:
            raise KeyError(name)
        return inner.view(name)

    try:
        pkl = find_data_pkl(inner.names)
    except Pt2FormatError as e:
        raise type(e)(e.reason, member=member) from None
    return read_tensor_pickle(open_member, pkl, where=member)


def _sample_inputs(zr: ZipReader, member: str) -> NotLoaded:
    # described (its pickle scanned) on first use of ``.reason``, not on every load
    return NotLoaded(member, "sample_inputs", lazy_reason("pickled sample inputs, not loaded: ", zr, member))


def _load_pt2(archive: Pt2Archive) -> None:
    zr, root = archive.zip, archive.root
    prefix = root + "/"
    accounted: set[str] = set()
    rels = [n[len(prefix):] for n in zr.names]
    byteorder = prefix + "byteorder"
    if byteorder in zr and zr.read(byteorder).strip() not in (b"little", b""):
        raise ArchiveError(f"byteorder {zr.read(byteorder)!r}: only little-endian archives are read", member=byteorder)
    if prefix + "archive_version" in zr:
        archive.archive_version = zr.read(prefix + "archive_version").decode("ascii", "replace").strip()
    model_names = [m.group(1) for r in rels if (m := _MODEL_JSON.fullmatch(r))]
    if not model_names and is_aoti_package(rels):
        archive.layout = AOTI_PACKAGE
        archive.aoti_models = read_aoti_models(zr, prefix, rels)
    elif not model_names:
        raise ArchiveError("no models/<name>.json in the archive", member=prefix + "models/")
    for name in model_names:
        archive.models[name] = _load_pt2_model(archive, name, accounted)
    for rel in rels:
        member = prefix + rel
        if rel in _BOOKKEEPING or rel.startswith(".data/") or member in accounted or rel.endswith("/"):
            continue
        if rel.startswith("extra/"):
            archive.extra[rel[len("extra/"):]] = zr.read(member)
            continue
        native = next((why for folder, why in _NATIVE_DIRS.items() if rel.startswith(folder)), None)
        if native:
            archive.unloaded.append(NotLoaded(member, "native_code", f"{native}: listed, never loaded"))
        elif rel.startswith("data/sample_inputs/"):
            archive.unloaded.append(_sample_inputs(zr, member))
        else:
            archive.unrecognized.append(member)


def _load_pt2_model(archive: Pt2Archive, name: str, accounted: set[str]) -> Pt2Model:
    zr, prefix = archive.zip, archive.root + "/"
    report = DecodeReport()
    json_member = f"{prefix}models/{name}.json"
    accounted.add(json_member)
    program = _program(zr, json_member, report)
    model = Pt2Model(name, program, json_member, {}, {})
    for kind, folder in (("weights", "data/weights/"), ("constants", "data/constants/")):
        config_member = f"{prefix}{folder}{name}_{kind}_config.json"
        pickle_member = f"{prefix}{folder}{name}.pt"
        config = None
        if config_member in zr:
            arrays, config, skipped, members = read_payloads(zr, prefix, folder, f"{name}_{kind}_config.json", report)
            accounted.add(config_member)
            accounted.update(members.values())
            model.pickled.extend(skipped)
            model.tensor_members.update(members)
        elif pickle_member in zr:
            archive.layout = "pt2-pickled-weights"
            arrays = _pickled(zr, pickle_member)
            accounted.add(pickle_member)
            model.tensor_members.update({fqn: pickle_member for fqn in arrays})
        else:
            arrays = {}
        if kind == "weights":
            model.state_dict, model.weights_config = arrays, config
        else:
            model.constants, model.constants_config = arrays, config
    sample = f"{prefix}data/sample_inputs/{name}.pt"
    if sample in zr:
        accounted.add(sample)
        model.pickled.append(_sample_inputs(zr, sample))
    model.unknown_fields = report.unknown_fields
    return model


def _load_flat(archive: Pt2Archive) -> None:
    zr = archive.zip
    report = DecodeReport()
    program = _program(zr, FLAT_PROGRAM, report)
    model = Pt2Model("model", program, FLAT_PROGRAM, {}, {})
    for member, attr in (("serialized_state_dict.pt", "state_dict"), ("serialized_constants.pt", "constants")):
        if member in zr:
            arrays = _pickled(zr, member)
            setattr(model, attr, arrays)
            model.tensor_members.update({fqn: member for fqn in arrays})
    if "serialized_example_inputs.pt" in zr:
        model.pickled.append(_sample_inputs(zr, "serialized_example_inputs.pt"))
    model.unknown_fields = report.unknown_fields
    archive.models["model"] = model
    known = {FLAT_PROGRAM, "serialized_state_dict.pt", "serialized_constants.pt", "serialized_example_inputs.pt", "version"}
    archive.archive_version = zr.read("version").decode("ascii", "replace").strip() if "version" in zr else None
    archive.unrecognized = [n for n in zr.names if n not in known]
