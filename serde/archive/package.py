"""Schema programs + tensor payloads -> archive members in torch's PT2 layout (torch-free).

The torch side (``serde.torch.serialize``) hands over, per model, the schema ``ExportedProgram``
(or its JSON text), its weights and constants as ``Payload`` entries carrying raw
storage bytes (or a callable producing them, so a failing tensor surfaces while the
archive is written and the atomic writer keeps the old file), and the pickled sample
inputs. This module decides member names, order, storage-group dedup and the configs,
following what ``torch.export.save`` writes:

    <root>/data/weights/weight_<i>                  one per storage group (full storage)
    <root>/data/weights/<model>_weights_config.json PayloadConfig, FQN -> PayloadMeta
    <root>/data/constants/tensor_<i>, custom_obj_<i>, opaque_obj_<i>
    <root>/data/constants/<model>_constants_config.json
    <root>/models/<model>.json                      the schema program
    <root>/data/sample_inputs/<model>.pt            torch.save of the example inputs
    <root>/extra/<name>                             user extra files
    <root>/archive_format  ("pt2")   <root>/archive_version ("0")
    <root>/.data/version ("6\\n")    <root>/byteorder ("little")
    <root>/.data/serialization_id   40 decimal digits, a hash of every member before it

Indices of ``weight_``/``tensor_``/``custom_obj_`` files continue across models, as
torch's writer counts already-written members. Within a model, pickled tensors are
numbered first, then raw storage groups in first-seen order; entries whose
``storage_key`` is equal share one file (tied or aliasing tensors are stored once).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Callable, Hashable, Iterable, Iterator, Union

from ...schema import definitions as d
from ..codec import json_codec

__all__ = ["Payload", "ModelPayload", "archive_members", "serialization_id", "with_serialization_id"]

Bytes = Union[bytes, bytearray, memoryview]
Data = Union[Bytes, Callable[[], Bytes]]

ARCHIVE_FORMAT = b"pt2"
ARCHIVE_VERSION = b"0"
DATA_VERSION = b"6\n"
WEIGHTS_DIR = "data/weights/"
CONSTANTS_DIR = "data/constants/"

# kind -> file-name prefix under its directory (raw/pickle tensors share a prefix)
_PREFIX_WEIGHTS = {"raw": "weight_", "pickle": "weight_"}
_PREFIX_CONSTANTS = {"raw": "tensor_", "pickle": "tensor_", "custom_obj": "custom_obj_", "opaque_obj": "opaque_obj_"}
_KIND_ORDER = {"pickle": 0, "raw": 1, "custom_obj": 2, "opaque_obj": 2}


@dataclass
class Payload:
    """One state-dict or constants entry.

    ``kind``: ``raw`` (``data`` is the tensor's full untyped-storage bytes, shared by
    every entry with the same ``storage_key``), ``pickle`` (``data`` is a torch.save
    of a tensor subclass), ``custom_obj`` (a torchbind object's pickle) or
    ``opaque_obj`` (a plain pickle).
    """

    fqn: str
    data: Data
    tensor_meta: d.TensorMeta | None
    is_param: bool = False
    kind: str = "raw"
    storage_key: Hashable = None


@dataclass
class ModelPayload:
    program: d.ExportedProgram | bytes  # schema object, or its JSON text (e.g. downgraded)
    weights: list[Payload] = field(default_factory=list)
    constants: list[Payload] = field(default_factory=list)
    sample_inputs: bytes = b""


def _materialize(data: Data):
    return data() if callable(data) else data


class _Counters:
    def __init__(self):
        self.next: dict[str, int] = {}

    def take(self, prefix: str) -> int:
        i = self.next.get(prefix, 0)
        self.next[prefix] = i + 1
        return i


def _payload_members(
    entries: list[Payload], directory: str, prefixes: dict[str, str], counters: _Counters
) -> tuple[list[tuple[str, Data]], dict[str, d.PayloadMeta]]:
    """Files to write for one model's weights or constants, and the config entries."""
    for e in entries:
        if e.kind not in prefixes:
            raise ValueError(f"{e.fqn}: payload kind {e.kind!r} not allowed under {directory}")
    files: list[tuple[str, Data]] = []
    config: dict[str, d.PayloadMeta] = {}
    ordered = sorted(entries, key=lambda e: _KIND_ORDER[e.kind])  # stable: keeps FQN order
    groups: dict[Hashable, str] = {}
    for e in ordered:
        if e.kind == "raw":
            path = groups.get(e.storage_key)
            if path is None:
                path = f"{prefixes['raw']}{counters.take(prefixes['raw'])}"
                groups[e.storage_key] = path
                files.append((directory + path, e.data))
            use_pickle = False
        else:
            prefix = prefixes[e.kind]
            path = f"{prefix}{counters.take(prefix)}"
            files.append((directory + path, e.data))
            use_pickle = True
        config[e.fqn] = d.PayloadMeta(path_name=path, is_param=e.is_param, use_pickle=use_pickle, tensor_meta=e.tensor_meta)
    # Config entries follow torch's insertion order: pickled, raw groups, custom objects;
    # a group's entries are inserted together, in FQN order within the group.
    by_path: dict[str, list[str]] = {}
    for fqn, meta in config.items():
        by_path.setdefault(meta.path_name, []).append(fqn)
    ordered_config: dict[str, d.PayloadMeta] = {}
    for name, _ in files:
        for fqn in by_path[name[len(directory):]]:
            ordered_config[fqn] = config[fqn]
    return files, ordered_config


def _config_json(config: dict[str, d.PayloadMeta]) -> bytes:
    return json_codec.dumps(d.PayloadConfig(config=config)).encode("utf-8")


def _program_json(program) -> bytes:
    if isinstance(program, (bytes, bytearray)):
        return bytes(program)
    if isinstance(program, dict):
        return json.dumps(program).encode("utf-8")
    return json_codec.dumps(program).encode("utf-8")


def _members(models: dict[str, ModelPayload], extra_files: dict[str, str | bytes] | None) -> Iterator[tuple[str, Data]]:
    counters = _Counters()
    for name, m in models.items():
        files, wconf = _payload_members(m.weights, WEIGHTS_DIR, _PREFIX_WEIGHTS, counters)
        yield from files
        yield f"{WEIGHTS_DIR}{name}_weights_config.json", _config_json(wconf)
        files, cconf = _payload_members(m.constants, CONSTANTS_DIR, _PREFIX_CONSTANTS, counters)
        yield from files
        yield f"{CONSTANTS_DIR}{name}_constants_config.json", _config_json(cconf)
        yield f"models/{name}.json", _program_json(m.program)
        yield f"data/sample_inputs/{name}.pt", m.sample_inputs
    for fname, content in (extra_files or {}).items():
        yield f"extra/{fname}", content.encode("utf-8") if isinstance(content, str) else bytes(content)
    yield "archive_format", ARCHIVE_FORMAT
    yield "archive_version", ARCHIVE_VERSION
    yield ".data/version", DATA_VERSION
    yield "byteorder", b"little"


def serialization_id(digest: bytes) -> bytes:
    """40 decimal digits (the shape torch writes) from a content digest."""
    return b"%040d" % (int.from_bytes(digest, "big") % 10**40)


def archive_members(
    models: dict[str, ModelPayload],
    extra_files: dict[str, str | bytes] | None = None,
    *,
    root: str = "archive",
) -> Iterator[tuple[str, bytes | bytearray | memoryview]]:
    """Members (full names under ``root``) in torch's order, produced lazily.

    Payload callables run as their member is reached; ``.data/serialization_id``
    hashes every member name and body before it, so equal content gives equal ids.
    """
    if not models and not extra_files:
        raise ValueError("nothing to save: no models and no extra files")
    for name, data in with_serialization_id(_members(models, extra_files), ".data/serialization_id"):
        yield f"{root}/{name}", data


def with_serialization_id(members: Iterable[tuple[str, Data]], id_member: str) -> Iterator[tuple[str, Bytes]]:
    """``members`` as they are reached (callables run then), and last ``id_member``: the
    ``serialization_id`` of every member name and body before it, as named here."""
    h = hashlib.sha256()
    for name, data in members:
        data = _materialize(data)
        h.update(name.encode("utf-8"))
        h.update(len(data).to_bytes(8, "little"))
        h.update(data)
        yield name, data
    yield id_member, serialization_id(h.digest())
