"""The archive layouts torch 2.6-2.9 read, written from a loaded archive (torch-free).

Why: torch 2.8 reads weights and constants only as one ``torch.save`` pickle per model
(2.9 reads that and raw storage files), and torch 2.6-2.7 only the flat zip; pt2x's own
archives (like torch >= 2.10's) keep raw storage files with payload configs. This module
turns a loaded archive plus its program JSON rewritten for the target (``serde.compat.plan``
decides and downgrades) into the members of one of these layouts (facts from
``torch/export/pt2_archive/_package.py`` of 2.8 and ``torch/export/__init__.py`` of 2.6):

* ``pt2-pickled-weights`` (written for torch 2.8; 2.9 reads it too), under the source's root
  folder: ``models/<m>.json``, ``data/weights/<m>.pt``, ``data/constants/<m>.pt``,
  ``data/sample_inputs/<m>.pt`` per model, then ``extra/<name>``, ``archive_format``,
  ``archive_version``, ``.data/version``, ``byteorder``, ``.data/serialization_id``.
* ``flat`` (torch 2.6-2.7), one model, no root folder: ``serialized_exported_program.json``,
  ``serialized_state_dict.pt``, ``serialized_constants.pt``, ``serialized_example_inputs.pt``,
  ``version`` (the target's schema: ``"8.2"`` for torch 2.6, ``"8.7"`` for 2.7),
  ``extra_files/<name>``.

Weights are written as ``torch.save`` files (``torch_save``; the pickle is
``codec.pickle_writer``'s) from the raw storages (one storage per storage file, so tied
weights stay tied), each storage's location from its device, which must be one torch parses
(``codec.devices``); a source that already holds pickles keeps their bytes. ``legacy_findings`` lists what such a layout cannot hold (blockers).
"""

from __future__ import annotations

from typing import Iterator

from ...schema import dtypes
from ..codec.devices import device_problem, location
from ..codec.pickle_writer import StoredTensor
from ..errors import Pt2Error
from ..findings import Finding
from .package import ARCHIVE_FORMAT, ARCHIVE_VERSION, DATA_VERSION, with_serialization_id
from .torch_save import torch_save_records
from .zip_writer import to_bytes

__all__ = ["PICKLED", "FLAT", "legacy_findings", "legacy_members"]

PICKLED = "pt2-pickled-weights"
FLAT = "flat"
_KINDS = (("weights", "data/weights/"), ("constants", "data/constants/"))
_FLAT_PICKLES = {"weights": "serialized_state_dict.pt", "constants": "serialized_constants.pt"}


# ----------------------------------------------------------------------- blockers


def legacy_findings(archive, layout: str, label: str) -> list[Finding]:
    """Blockers for writing ``archive`` in ``layout`` for torch ``label``: content that layout cannot hold."""
    out: list[Finding] = []
    where = f"torch {label}'s layout"
    if layout == FLAT and len(archive.models) != 1:
        out.append(Finding("error", "target-archive-layout",
                           f"{len(archive.models)} models {sorted(archive.models)}; {where} (flat zip) holds one"))
    for item in archive.unloaded:
        if item.kind == "native_code":
            out.append(Finding("error", "target-archive-layout", f"{item.reason}; not carried into {where}", item.member))
    for member in archive.unrecognized:
        out.append(Finding("error", "target-archive-layout", f"member pt2x does not recognise has no place in {where}", member))
    if layout == FLAT:
        for name, body in archive.extra.items():
            try:
                body.decode("utf-8")
            except UnicodeDecodeError:
                out.append(Finding("error", "target-extra-file", f"extra file {name!r} is not UTF-8 text; torch {label} decodes it"))
    for model in archive.models.values():
        out.extend(_model_findings(archive, model, label))
    return out


def _model_findings(archive, model, label: str) -> list[Finding]:
    out = []
    for kind, _folder in _KINDS:
        config = getattr(model, f"{kind}_config")
        if config is None:
            continue
        member = _config_member(archive, model.name, kind)
        storage_dtype: dict[str, object] = {}
        for fqn, meta in config.config.items():
            path = f"config[{fqn!r}]"
            if meta.use_pickle:
                out.append(Finding("error", "target-pickled-payload",
                                   f"{fqn} is a pickled object ({meta.path_name}); pt2x writes only plain tensors "
                                   f"into torch {label}'s weight pickles", member, path))
                continue
            tm = meta.tensor_meta
            row = dtypes.row(tm.dtype) if tm is not None else None
            if storage_dtype.setdefault(meta.path_name, tm.dtype) != tm.dtype:
                out.append(Finding("error", "target-storage-dtypes",
                                   f"{fqn} views storage {meta.path_name} as another dtype than an earlier tensor; "
                                   "torch.save keeps one dtype per storage", member, path))
                continue
            problem = device_problem(tm.device.type, tm.device.index) if tm is not None else None
            if problem is not None:
                out.append(Finding("error", "target-device", f"{fqn}: {problem}; torch {label} cannot load the "
                                   "weight pickle it would be written into", member, path + ".tensor_meta.device"))
            elif row is None or row.storage_class is None:
                out.append(Finding("error", "target-dtype", f"{fqn}: dtype {row.torch_name if row else '?'} has no legacy "
                                   f"storage class to pickle it with", member, path))
            elif any(v.type != "as_int" for v in (*tm.sizes, *tm.strides, tm.storage_offset)):
                out.append(Finding("error", "target-symbolic-tensor", f"{fqn}: symbolic sizes in a stored tensor", member, path))
            elif len(archive.zip.view(_storage_member(archive, kind, meta.path_name))) == 0 and _numel(tm) > 0:
                out.append(Finding("error", "target-fake-tensor", f"{fqn}: no stored bytes (a fake tensor)", member, path))
    sample = _sample_member(archive, model.name)
    if sample is None:
        out.append(Finding("error", "target-sample-inputs",
                           f"no sample inputs; torch {label}'s reader requires the member", model.json_member))
    else:
        from ..codec.pickle_reader import read_torch_save

        try:
            read_torch_save(archive.zip.read(sample), where=sample, tree=True)
        except Pt2Error as e:
            out.append(Finding("error", "target-sample-inputs", f"sample inputs not carried: {e.reason}", sample))
    return out


def _numel(tm) -> int:
    n = 1
    for v in tm.sizes:
        n *= v.value
    return n


# ------------------------------------------------------------------------ members


def _prefix(archive) -> str:
    return f"{archive.root}/" if archive.root else ""


def _config_member(archive, model: str, kind: str) -> str:
    return f"{_prefix(archive)}data/{kind}/{model}_{kind}_config.json"


def _storage_member(archive, kind: str, path_name: str) -> str:
    return f"{_prefix(archive)}data/{kind}/{path_name}"


def _sample_member(archive, model: str) -> str | None:
    names = (f"{_prefix(archive)}data/sample_inputs/{model}.pt", "serialized_example_inputs.pt")
    return next((n for n in names if n in archive.zip), None)


def _location(device) -> str:
    return location(device.type, device.index)


def stored_tensors(archive, model, kind: str) -> dict[str, StoredTensor]:
    """A raw-layout model's weights or constants as ``StoredTensor``s (storage files are storage keys)."""
    config = getattr(model, f"{kind}_config")
    out: dict[str, StoredTensor] = {}
    for fqn, meta in config.config.items():
        tm = meta.tensor_meta
        out[fqn] = StoredTensor(
            storage_key=meta.path_name,
            storage=archive.zip.view(_storage_member(archive, kind, meta.path_name)),
            dtype=dtypes.row(tm.dtype).torch_name,
            sizes=tuple(v.value for v in tm.sizes),
            strides=tuple(v.value for v in tm.strides),
            storage_offset=tm.storage_offset.value,
            requires_grad=bool(tm.requires_grad),
            is_param=bool(meta.is_param),
            location=_location(tm.device),
        )
    return out


def _pickle_member(archive, model, kind: str, alignment_records: bool) -> bytes:
    """The model's ``torch.save`` of its weights or constants: written from raw storages, else the
    source's own pickle kept byte for byte (an empty dict when it has none)."""
    if getattr(model, f"{kind}_config") is not None:
        return to_bytes(torch_save_records(stored_tensors(archive, model, kind), torch_2_8=alignment_records))
    for member in (f"{_prefix(archive)}data/{kind}/{model.name}.pt", _FLAT_PICKLES[kind]):
        if member in archive.zip:
            return archive.zip.read(member)
    return to_bytes(torch_save_records({}, torch_2_8=alignment_records))


def _pickled_members(archive, documents: dict[str, bytes]) -> Iterator[tuple[str, bytes]]:
    for name, model in archive.models.items():
        yield f"models/{name}.json", documents[model.json_member]
        for kind, folder in _KINDS:
            yield f"{folder}{name}.pt", _pickle_member(archive, model, kind, True)
        yield f"data/sample_inputs/{name}.pt", archive.zip.read(_sample_member(archive, name))
    for fname, body in archive.extra.items():
        yield f"extra/{fname}", body
    yield "archive_format", ARCHIVE_FORMAT
    yield "archive_version", ARCHIVE_VERSION
    yield ".data/version", DATA_VERSION
    yield "byteorder", b"little"


def _flat_members(archive, documents: dict[str, bytes], version: tuple[int, int]) -> Iterator[tuple[str, bytes]]:
    (model,) = archive.models.values()
    yield "serialized_exported_program.json", documents[model.json_member]
    for kind, _folder in _KINDS:
        yield _FLAT_PICKLES[kind], _pickle_member(archive, model, kind, False)
    yield "serialized_example_inputs.pt", archive.zip.read(_sample_member(archive, model.name))
    yield "version", f"{version[0]}.{version[1]}".encode("ascii")
    for fname, body in archive.extra.items():
        yield f"extra_files/{fname}", body


def legacy_members(archive, layout: str, documents: dict[str, bytes], version: tuple[int, int]) -> list[tuple[str, bytes]]:
    """Full member names and bodies of ``archive`` in ``layout``, with program JSON from ``documents``
    (source member -> rewritten bytes). Call only when ``legacy_findings`` found no blocker."""
    if layout == FLAT:
        return list(_flat_members(archive, documents, version))
    root = archive.root or "archive"
    members = ((f"{root}/{name}", body) for name, body in _pickled_members(archive, documents))
    return list(with_serialization_id(members, f"{root}/.data/serialization_id"))
