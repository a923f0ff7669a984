"""Hostile and malformed archives: each ends in pt2x's own error, naming member and field,
and nothing in the file runs. Archives are real torch.export.save output, then edited."""

from __future__ import annotations

import io
import json
import os
import pickle
import struct
import warnings
import zipfile
import zlib

import pytest
import torch

import pt2x.serde as serde
from pt2x.serde import limits
from pt2x.serde.errors import (
    ArchiveError,
    LimitExceededError,
    Pt2Error,
    Pt2FormatError,
    SchemaError,
    SchemaVersionError,
    TensorDataError,
)
import zoo
from paths import PT2_FIXTURES

ROOT = "archive"


@pytest.fixture(scope="module")
def mlp_bytes() -> bytes:
    buf = io.BytesIO()
    torch.export.save(zoo.exported("mlp_dynamic"), buf)
    return buf.getvalue()


def _members(data: bytes) -> list[tuple[str, bytes]]:
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        return [(i.filename, z.read(i.filename)) for i in z.infolist()]


def _zip(members, compress=zipfile.ZIP_STORED) -> bytes:
    buf = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # duplicate names, on purpose
        with zipfile.ZipFile(buf, "w", compress) as z:
            for name, data in members:
                z.writestr(name, data)
    return buf.getvalue()


def _root(data: bytes) -> str:
    return _members(data)[0][0].split("/", 1)[0]


def _edit(data: bytes, rel: str, fn) -> bytes:
    """Replace member ``<root>/rel`` with ``fn(old_bytes)``."""
    root = _root(data)
    return _zip([(n, fn(b) if n == f"{root}/{rel}" else b) for n, b in _members(data)])


def _edit_json(data: bytes, rel: str, fn) -> bytes:
    def change(raw):
        obj = json.loads(raw)
        fn(obj)
        return json.dumps(obj).encode()

    return _edit(data, rel, change)


def _load_error(data: bytes, exc=Pt2FormatError) -> Pt2FormatError:
    with pytest.raises(exc) as info:
        serde.load(data)
    return info.value


# ------------------------------------------------------------------ the container


def test_not_a_zip():
    e = _load_error(b"this is not a zip file at all" * 10, ArchiveError)
    assert "zip" in str(e)


def test_truncated(mlp_bytes):
    _load_error(mlp_bytes[: len(mlp_bytes) // 2], ArchiveError)


def test_member_outside_root(mlp_bytes):
    e = _load_error(_zip(_members(mlp_bytes) + [("evil.txt", b"x")]), ArchiveError)
    assert e.member == "evil.txt" and "single root" in str(e)


def test_two_roots(mlp_bytes):
    e = _load_error(_zip(_members(mlp_bytes) + [("other/x", b"x")]), ArchiveError)
    assert "root folders" in str(e)


@pytest.mark.parametrize("name", ["{root}/../evil", "/etc/passwd", "{root}/a\\..\\b", "{root}//x", "C:/x"])
def test_bad_member_names(mlp_bytes, name):
    e = _load_error(_zip(_members(mlp_bytes) + [(name.format(root=_root(mlp_bytes)), b"x")]), ArchiveError)
    assert "member name" in str(e)


def test_duplicate_member(mlp_bytes):
    members = _members(mlp_bytes)
    json_member = next(n for n, _ in members if n.endswith("models/model.json"))
    e = _load_error(_zip(members + [(json_member, b"{}")]), ArchiveError)
    assert e.member == json_member and "duplicate" in str(e)


def _patch_central(data: bytes, name: str, offset: int, fmt: str, value) -> bytes:
    """Patch one field of ``name``'s central-directory entry (offset within the entry)."""
    raw = bytearray(data)
    pos = raw.find(b"PK\x01\x02" + b"")
    while pos != -1:
        n_len = struct.unpack_from("<H", raw, pos + 28)[0]
        if raw[pos + 46 : pos + 46 + n_len].decode() == name:
            struct.pack_into(fmt, raw, pos + offset, value)
            return bytes(raw)
        pos = raw.find(b"PK\x01\x02", pos + 4)
    raise AssertionError(name)


def test_encrypted_member(mlp_bytes):
    name = next(n for n, _ in _members(mlp_bytes) if n.endswith("weight_0"))
    e = _load_error(_patch_central(mlp_bytes, name, 8, "<H", 0x1), ArchiveError)
    assert e.member == name and "encrypted" in str(e)


def test_declared_size_past_file(mlp_bytes):
    name = next(n for n, _ in _members(mlp_bytes) if n.endswith("weight_0"))
    patched = _patch_central(mlp_bytes, name, 20, "<I", 0x7FFFFFF0)  # compressed size
    patched = _patch_central(patched, name, 24, "<I", 0x7FFFFFF0)  # uncompressed size
    e = _load_error(patched, ArchiveError)
    assert e.member == name and "past" in str(e)


def test_zip_bomb(mlp_bytes):
    root = _root(mlp_bytes)
    bomb = b" " * (limits.MAX_COMPRESSION_RATIO * 2000)
    members = [(n, bomb if n.endswith("models/model.json") else b) for n, b in _members(mlp_bytes)]
    e = _load_error(_zip(members, zipfile.ZIP_DEFLATED), LimitExceededError)
    assert "compression ratio" in str(e)


def test_deflated_member_is_read(mlp_bytes):
    """Compression itself is fine (within the ratio): members are inflated, bounded."""
    archive = serde.load(_zip(_members(mlp_bytes), zipfile.ZIP_DEFLATED))
    assert archive.models["model"].state_dict["fc1.weight"].shape == (16, 8)


# ----------------------------------------------------------------- payload configs


def _weights_config(fn):
    def edit(cfg):
        fn(cfg["config"]["fc1.weight"])

    return edit


@pytest.mark.parametrize("path_name", ["../weight_0", "sub/weight_0", "/abs", "", ".."])
def test_path_name_not_plain(mlp_bytes, path_name):
    data = _edit_json(mlp_bytes, "data/weights/model_weights_config.json", _weights_config(lambda m: m.update(path_name=path_name)))
    e = _load_error(data, ArchiveError)
    assert e.member.endswith("model_weights_config.json") and e.path == "config['fc1.weight'].path_name"


def test_payload_missing(mlp_bytes):
    data = _edit_json(mlp_bytes, "data/weights/model_weights_config.json", _weights_config(lambda m: m.update(path_name="weight_99")))
    e = _load_error(data, ArchiveError)
    assert "missing" in str(e) and e.member.endswith("weight_99")


def test_extent_past_bytes(mlp_bytes):
    def grow(m):
        m["tensor_meta"]["sizes"][0] = {"as_int": 17}

    e = _load_error(_edit_json(mlp_bytes, "data/weights/model_weights_config.json", _weights_config(grow)), TensorDataError)
    assert "extent" in str(e) and e.member.endswith("weight_0") and "fc1.weight" in e.path


def test_storage_offset_past_bytes(mlp_bytes):
    def shift(m):
        m["tensor_meta"]["storage_offset"] = {"as_int": 1}

    _load_error(_edit_json(mlp_bytes, "data/weights/model_weights_config.json", _weights_config(shift)), TensorDataError)


def test_bytes_not_multiple_of_itemsize(mlp_bytes):
    e = _load_error(_edit(mlp_bytes, "data/weights/weight_0", lambda b: b[:-1]), TensorDataError)
    assert "multiple" in str(e)


@pytest.mark.parametrize("size", [-1, 2**63, 2**70])
def test_negative_or_overflowing_size(mlp_bytes, size):
    def bad(m):
        m["tensor_meta"]["sizes"][0] = {"as_int": size}

    e = _load_error(_edit_json(mlp_bytes, "data/weights/model_weights_config.json", _weights_config(bad)), TensorDataError)
    assert "out of range" in str(e)


def test_unknown_dtype(mlp_bytes):
    def bad(m):
        m["tensor_meta"]["dtype"] = 99

    e = _load_error(_edit_json(mlp_bytes, "data/weights/model_weights_config.json", _weights_config(bad)), SchemaError)
    assert e.path == "config['fc1.weight'].tensor_meta.dtype" and "99" in str(e)


def test_symbolic_weight_size(mlp_bytes):
    def bad(m):
        m["tensor_meta"]["sizes"][0] = {"as_expr": {"expr_str": "s0", "hint": None}}

    _load_error(_edit_json(mlp_bytes, "data/weights/model_weights_config.json", _weights_config(bad)), TensorDataError)


# --------------------------------------------------------------------------- JSON


def test_json_too_deep(mlp_bytes):
    e = _load_error(_edit(mlp_bytes, "models/model.json", lambda b: b"[" * 100_000 + b"]" * 100_000), LimitExceededError)
    assert e.member.endswith("models/model.json")


def test_schema_nesting_past_limit(mlp_bytes):
    """Deep but parseable JSON: nested string-to-argument maps past MAX_JSON_DEPTH."""

    def nest(obj):
        arg = {"as_int": 1}
        for _ in range(limits.MAX_JSON_DEPTH + 5):
            arg = {"as_string_to_argument": {"k": arg}}
        obj["graph_module"]["graph"]["nodes"][0]["inputs"][0]["arg"] = arg

    e = _load_error(_edit_json(mlp_bytes, "models/model.json", nest), Pt2FormatError)
    assert "nest" in str(e) and e.member.endswith("models/model.json")


def test_duplicate_json_keys(mlp_bytes):
    e = _load_error(_edit(mlp_bytes, "models/model.json", lambda b: b'{"a": 1, "a": 2}'), SchemaError)
    assert "duplicate JSON key 'a'" in str(e)


def test_not_utf8(mlp_bytes):
    e = _load_error(_edit(mlp_bytes, "models/model.json", lambda b: b'{"x": "\xff"}'), SchemaError)
    assert "UTF-8" in str(e)


def test_union_with_two_keys(mlp_bytes):
    def bad(obj):
        obj["graph_module"]["graph"]["nodes"][0]["inputs"][0]["arg"] = {"as_int": 1, "as_float": 2.0}

    e = _load_error(_edit_json(mlp_bytes, "models/model.json", bad), SchemaError)
    assert e.path == "graph_module.graph.nodes[0].inputs[0].arg" and "exactly one key" in str(e)


def test_unknown_union_member(mlp_bytes):
    def bad(obj):
        obj["graph_module"]["graph"]["nodes"][0]["inputs"][0]["arg"] = {"as_pickle": "gASV"}

    e = _load_error(_edit_json(mlp_bytes, "models/model.json", bad), SchemaError)
    assert "as_pickle" in str(e) and e.path == "graph_module.graph.nodes[0].inputs[0].arg"


def test_wrong_field_type(mlp_bytes):
    def bad(obj):
        obj["graph_module"]["graph"]["tensor_values"]["x"]["sizes"][1] = {"as_int": True}

    e = _load_error(_edit_json(mlp_bytes, "models/model.json", bad), SchemaError)
    assert e.path == "graph_module.graph.tensor_values['x'].sizes[1].as_int" and "expected int" in str(e)


def test_missing_required_field(mlp_bytes):
    e = _load_error(_edit_json(mlp_bytes, "models/model.json", lambda o: o["graph_module"].pop("signature")), SchemaError)
    assert "signature" in str(e) and e.path == "graph_module"


def test_newer_major_refused(mlp_bytes):
    def bump(obj):
        obj["schema_version"] = {"major": 9, "minor": 0}

    e = _load_error(_edit_json(mlp_bytes, "models/model.json", bump), SchemaVersionError)
    assert "9.0" in str(e) and "8." in str(e)


def test_unknown_fields_are_kept_and_reported(mlp_bytes):
    """A newer minor's field: kept on the object, reported, and written back by the encoder."""
    from pt2x.serde.codec import json_codec

    def add(obj):
        obj["graph_module"]["graph"]["nodes"][0]["future_field"] = {"deep": [1, 2]}
        obj["shiny_new_thing"] = "x"

    model = serde.load(_edit_json(mlp_bytes, "models/model.json", add)).models["model"]
    assert sorted(model.unknown_fields) == ["ExportedProgram.shiny_new_thing", "Node.future_field"]
    encoded = json_codec.encode(model.program)
    assert encoded["shiny_new_thing"] == "x"
    assert encoded["graph_module"]["graph"]["nodes"][0]["future_field"] == {"deep": [1, 2]}


# ------------------------------------------------------------- code never runs


class _Boom:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def test_native_payloads_are_listed_not_loaded(mlp_bytes):
    root = _root(mlp_bytes)
    data = _zip(_members(mlp_bytes) + [(f"{root}/data/aotinductor/model/model.so", b"\x7fELF...")])
    archive = serde.load(data)
    (entry,) = archive.unloaded
    assert entry.kind == "native_code" and entry.member.endswith("model.so")


def test_pickled_sample_inputs_never_run(mlp_bytes, tmp_path):
    marker = tmp_path / "MARKER"
    payload = pickle.dumps(_Boom(marker))
    data = _edit(mlp_bytes, "data/sample_inputs/model.pt", lambda b: payload)
    archive = serde.load(data)
    (entry,) = [p for p in archive.models["model"].pickled if p.kind == "sample_inputs"]
    assert "outside pt2x's allowlist: posix.system" in entry.reason  # named, never called
    assert not marker.exists()


def test_use_pickle_weight_never_runs(mlp_bytes, tmp_path):
    marker = tmp_path / "MARKER"
    data = _edit_json(mlp_bytes, "data/weights/model_weights_config.json", _weights_config(lambda m: m.update(use_pickle=True)))
    data = _edit(data, "data/weights/weight_0", lambda b: pickle.dumps(_Boom(marker)))
    model = serde.load(data).models["model"]
    assert [(p.fqn, p.kind) for p in model.pickled if p.fqn] == [("fc1.weight", "pickled_tensor")]
    assert "fc1.weight" not in model.state_dict
    assert not marker.exists()


def test_every_error_is_in_the_family(mlp_bytes):
    """Random corruption anywhere: only pt2x errors escape (or the file still loads)."""
    import random

    from pt2x.serde.validate import validate_archive

    rng = random.Random(0)
    for i in range(1500):
        raw = bytearray(mlp_bytes)
        if i % 10 == 0:
            raw = raw[: rng.randrange(len(raw))]
        for _ in range(rng.randint(1, 8)):
            if raw:
                raw[rng.randrange(len(raw))] = rng.randrange(256)
        try:
            validate_archive(serde.load(bytes(raw)))
        except Pt2Error:
            pass


def _legacy_with_state_dict_pickle(payload: bytes) -> bytes:
    """A torch 2.6 flat archive whose serialized_state_dict.pt carries ``payload`` as data.pkl."""
    path = os.path.join(PT2_FIXTURES, "torch-2.6.0", "mlp_dynamic.pt2")
    outer = _members(open(path, "rb").read())
    inner = dict(outer)["serialized_state_dict.pt"]
    inner = _zip([(n, payload if n.endswith("data.pkl") else b) for n, b in _members(inner)])
    return _zip([(n, inner if n == "serialized_state_dict.pt" else b) for n, b in outer])


def test_legacy_pickle_global_refused_by_name(tmp_path):
    from pt2x.serde.errors import UnsafeContentError

    marker = tmp_path / "MARKER"
    e = _load_error(_legacy_with_state_dict_pickle(pickle.dumps(_Boom(marker))), UnsafeContentError)
    assert "system" in str(e) and "serialized_state_dict.pt" in str(e)
    assert not marker.exists()


def test_legacy_pickle_eval_refused(tmp_path):
    from pt2x.serde.errors import UnsafeContentError

    class Eval:
        def __reduce__(self):
            return (eval, ("__import__('os').system('touch %s')" % (tmp_path / "MARKER"),))

    e = _load_error(_legacy_with_state_dict_pickle(pickle.dumps(Eval())), UnsafeContentError)
    assert "eval" in str(e)
    assert not (tmp_path / "MARKER").exists()
