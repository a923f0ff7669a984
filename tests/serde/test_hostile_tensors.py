"""Hostile tensor metadata and pickles: load fails closed, with pt2x's own error naming the
member and the tensor, and no file can make pt2x allocate or work far beyond its own size.

Files are the committed fixtures (tests/fixtures/pt2/torch-*/mlp_dynamic.pt2) edited with
zipfile: for torch 2.6 / 2.8 the pickled state dict is rewritten opcode by opcode (no torch
needed), for torch 2.13 the ``model_weights_config.json``. The classes are the ones a
fuzzing run over ~29,000 mutated archives found: sizes/strides/offsets that overflow or
are negative, stride-0 views claiming 2**40 elements over a few bytes, expanded views with
torch's neg/conj bits, and pickles whose memo references multiply the unpickler's work.
"""

from __future__ import annotations

import io
import json
import os
import pickle
import struct
import zipfile

import numpy as np
import pytest

import pt2x.serde as serde
from pt2x.serde import limits
from pt2x.serde.errors import LimitExceededError, Pt2Error, TensorDataError

from paths import FIXTURES
from torchfree import run_torch_free

MLP = {v: os.path.join(FIXTURES, "pt2", f"torch-{v}", "mlp_dynamic.pt2") for v in ("2.6.0", "2.8.0", "2.13.0")}
LEGACY = ("2.6.0", "2.8.0")
WEIGHTS_MEMBER = {"2.6.0": "serialized_state_dict.pt", "2.8.0": "mlp_dynamic/data/weights/model.pt"}
CONFIG = "mlp_dynamic/data/weights/model_weights_config.json"
TIMEOUT = 60  # seconds for a subprocess that loads and touches: generous; an amplified file never ends

# ------------------------------------------------------------------ archive editing


def _rezip(data: bytes, edits: dict[str, bytes]) -> bytes:
    """``data`` (a zip) with the members named in ``edits`` replaced, order kept."""
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(data)) as src, zipfile.ZipFile(out, "w") as dst:
        for info in src.infolist():
            dst.writestr(info.filename, edits.get(info.filename, src.read(info.filename)))
    return out.getvalue()


def _read(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


# ------------------------------------------------------------------ pickles, opcode by opcode (torch-free)


def _int(v: int) -> bytes:
    raw = v.to_bytes(max(1, (v.bit_length() + 8) // 8), "little", signed=True)
    return (b"\x8a" + bytes([len(raw)]) if len(raw) < 256 else b"\x8b" + struct.pack("<i", len(raw))) + raw


def _str(s: str) -> bytes:
    b = s.encode()
    return b"X" + struct.pack("<I", len(b)) + b


def _glob(mod: str, name: str) -> bytes:
    return b"c" + f"{mod}\n{name}\n".encode()


def _tup(*items: bytes) -> bytes:
    return b"(" + b"".join(items) + b"t"


def _call(fn: bytes, *args: bytes) -> bytes:
    return fn + _tup(*args) + b"R"


def _tensor(key: str, numel: int, size, stride, offset: int = 0, stype: str = "FloatStorage", **flags) -> bytes:
    """Opcodes for ``torch._utils._rebuild_tensor_v2`` as torch.save writes it (metadata: neg/conj)."""
    pid = _tup(_str("storage"), _glob("torch", stype), _str(key), _str("cpu"), _int(numel)) + b"Q"
    args = [pid, _int(offset), _tup(*map(_int, size)), _tup(*map(_int, stride)), b"\x89",
            _call(_glob("collections", "OrderedDict"))]
    if flags:
        args.append(b"}(" + b"".join(_str(k) + (b"\x88" if v else b"\x89") for k, v in flags.items()) + b"u")
    return _call(_glob("torch._utils", "_rebuild_tensor_v2"), *args)


def _state_dict(entries: dict[str, bytes]) -> bytes:
    return b"\x80\x02}(" + b"".join(_str(k) + v for k, v in entries.items()) + b"u."


# mlp_dynamic's four tensors as torch wrote them (storage key, numel, size, stride)
_MLP_TENSORS = {
    "fc1.weight": ("0", 128, (16, 8), (8, 1)),
    "fc1.bias": ("1", 16, (16,), (1,)),
    "fc2.weight": ("2", 64, (4, 16), (16, 1)),
    "fc2.bias": ("3", 4, (4,), (1,)),
}


def legacy_file(release: str, fc1_weight: bytes | None = None, pkl: bytes | None = None) -> bytes:
    """mlp_dynamic of a pickled-weights release with its state-dict pickle rewritten:
    ``fc1.weight`` replaced by ``fc1_weight`` opcodes, or the whole pickle by ``pkl``."""
    if pkl is None:
        entries = {k: _tensor(*v) for k, v in _MLP_TENSORS.items()}
        if fc1_weight is not None:
            entries["fc1.weight"] = fc1_weight
        pkl = _state_dict(entries)
    outer = _read(MLP[release])
    with zipfile.ZipFile(io.BytesIO(outer)) as z:
        inner = z.read(WEIGHTS_MEMBER[release])
    return _rezip(outer, {WEIGHTS_MEMBER[release]: _rezip(inner, {"archive/data.pkl": pkl})})


def raw_file(edit=None, weight_0: bytes | None = None) -> bytes:
    """mlp_dynamic of torch 2.13 with ``edit(meta)`` applied to fc1.weight's payload entry
    (and its storage member replaced by ``weight_0``)."""
    data = _read(MLP["2.13.0"])
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        cfg = json.loads(z.read(CONFIG))
    if edit is not None:
        edit(cfg["config"]["fc1.weight"]["tensor_meta"])
    edits = {CONFIG: json.dumps(cfg).encode()}
    if weight_0 is not None:
        edits["mlp_dynamic/data/weights/weight_0"] = weight_0
    return _rezip(data, edits)


def _meta(sizes, strides, offset=0):
    def edit(tm):
        tm["sizes"] = [{"as_int": s} for s in sizes]
        tm["strides"] = [{"as_int": s} for s in strides]
        tm["storage_offset"] = {"as_int": offset}

    return edit


def _load_error(data: bytes, exc=Pt2Error) -> Pt2Error:
    with pytest.raises(exc) as info:
        with serde.load(data) as archive:
            for model in archive.models.values():
                for arr in model.state_dict.values():
                    np.asarray(arr).sum()  # touched, as the fuzzer did: must not be reached
    return info.value


def _root_array(a: np.ndarray) -> np.ndarray:
    """The ndarray at the bottom of ``a``'s ``.base`` chain (through as_strided's holder):
    the memory it really views."""
    while True:
        b = a.base
        b = b if isinstance(b, np.ndarray) else getattr(b, "base", None)  # as_strided's DummyArray
        if not isinstance(b, np.ndarray):
            return a
        a = b


def _bytes_spanned(a: np.ndarray) -> int:
    """Bytes between the lowest and highest address ``a`` reads."""
    low, high = (np.lib.array_utils.byte_bounds if hasattr(np.lib, "array_utils") else np.byte_bounds)(a)
    return high - low


def _fc1(data: bytes) -> np.ndarray:
    return serde.load(data).model().state_dict["fc1.weight"]


def _stored(release: str) -> np.ndarray:
    """fc1.weight's storage (128 floats) in the unedited fixture."""
    return np.ascontiguousarray(_fc1(_read(MLP[release]))).reshape(-1)


# ------------------------------------------------------------------ the unedited files still read

@pytest.mark.parametrize("release", LEGACY)
def test_rewritten_pickle_reads_like_the_original(release):
    """The opcode writer above reproduces torch's state dict: same arrays as the fixture."""
    ours = serde.load(legacy_file(release)).model().state_dict
    theirs = serde.load(MLP[release]).model().state_dict
    assert ours.keys() == theirs.keys()
    for k in theirs:
        assert ours[k].strides == theirs[k].strides
        np.testing.assert_array_equal(ours[k], theirs[k])


# ------------------------------------------------------------------ sizes, strides, offsets

def _id(value) -> str:
    """Test ids that stay short (repr of a 5000-digit int raises)."""
    if isinstance(value, tuple):
        return "(" + ",".join(_id(v) for v in value) + ")"
    if isinstance(value, int) and abs(value) > 1 << 64:
        return f"{'-' if value < 0 else ''}2**{value.bit_length()}"
    return value.__name__ if isinstance(value, type) else str(value)


OVERFLOWING = [
    # (sizes, strides, offset, error, words in the message)
    ((1,), (1 << 70,), 0, TensorDataError, "stride"),  # was OverflowError from as_strided
    ((0,), (1 << 63,), 0, TensorDataError, "stride"),  # empty, but numpy still needs the byte stride
    ((2,), (1 << 62,), 0, TensorDataError, "past storage"),
    ((1 << 62,), (1,), 0, TensorDataError, "out of range"),
    ((10**5000,), (1,), 0, TensorDataError, "out of range"),  # repr of this int raises ValueError
    ((1,), (1,), 1 << 64, TensorDataError, "out of range"),
    ((0, (1 << 62) - 1, 3), (1, 1, 1), 0, LimitExceededError, "MAX_TENSOR_ELEMENTS"),  # was ValueError
    ((1 << 31, 1 << 31), (0, 0), 0, LimitExceededError, "MAX_TENSOR_ELEMENTS"),
    ((16, 8), (8, 1), 1, TensorDataError, "past storage"),
]


@pytest.mark.parametrize("release", LEGACY)
@pytest.mark.parametrize("sizes, strides, offset, exc, words", OVERFLOWING, ids=_id)
def test_pickle_overflowing_sizes_strides_offsets(release, sizes, strides, offset, exc, words):
    e = _load_error(legacy_file(release, _tensor("0", 128, sizes, strides, offset)), exc)
    assert words in str(e)
    assert e.member == WEIGHTS_MEMBER[release] and "fc1.weight" in e.path


@pytest.mark.parametrize("release", LEGACY)
@pytest.mark.parametrize("sizes, strides, offset", [((-1,), (1,), 0), ((16, 8), (-8, 1), 0), ((4,), (1,), -1),
                                                     ((-(10**5000),), (1,), 0)], ids=_id)
def test_pickle_negative_sizes(release, sizes, strides, offset):
    e = _load_error(legacy_file(release, _tensor("0", 128, sizes, strides, offset)), TensorDataError)
    assert "negative" in str(e) and e.member == WEIGHTS_MEMBER[release] and "fc1.weight" in e.path


@pytest.mark.parametrize("sizes, strides, offset, exc, words", OVERFLOWING[:4] + OVERFLOWING[5:], ids=_id)
def test_raw_overflowing_sizes_strides_offsets(sizes, strides, offset, exc, words):
    e = _load_error(raw_file(_meta(sizes, strides, offset)), exc)
    assert words in str(e)
    assert e.member.endswith(("weight_0", "model_weights_config.json")) and "fc1.weight" in e.path


@pytest.mark.parametrize("sizes, strides, offset", [((-1,), (1,), 0), ((16, 8), (-8, 1), 0), ((4,), (1,), -1)],
                         ids=_id)
def test_raw_negative_sizes(sizes, strides, offset):
    e = _load_error(raw_file(_meta(sizes, strides, offset)), TensorDataError)
    assert "negative" in str(e) and "fc1.weight" in e.path


# ------------------------------------------------------------------ stride 0: views, never materialised


@pytest.mark.parametrize("release", LEGACY)
def test_pickle_stride0_2_40_view_refused(release):
    e = _load_error(legacy_file(release, _tensor("0", 128, (1 << 20, 1 << 20), (0, 0))), LimitExceededError)
    assert "MAX_AMPLIFIED_BYTES" in str(e)
    assert e.member == WEIGHTS_MEMBER[release] and e.path == "archive/data.pkl['fc1.weight']"


def test_raw_stride0_2_40_view_refused():
    e = _load_error(raw_file(_meta((1 << 20, 1 << 20), (0, 0))), LimitExceededError)
    assert "MAX_AMPLIFIED_BYTES" in str(e)
    assert e.member == "mlp_dynamic/data/weights/weight_0" and e.path == "config['fc1.weight']"


def test_raw_empty_storage_is_checked_before_allocating():
    """A storage with no bytes (torch's fake tensors) is rebuilt as zeros: never past the
    element limit (was MemoryError) nor as a stride-0 view past the budget."""
    e = _load_error(raw_file(_meta((1 << 21, 1 << 21), (1 << 21, 1)), weight_0=b""), LimitExceededError)
    assert "MAX_TENSOR_ELEMENTS" in str(e) and "fc1.weight" in e.path
    e = _load_error(raw_file(_meta((1 << 20, 1 << 20), (0, 0)), weight_0=b""), LimitExceededError)
    assert "MAX_AMPLIFIED_BYTES" in str(e) and "fc1.weight" in e.path
    zeros = _fc1(raw_file(weight_0=b""))  # the real fake-tensor case still reads
    assert zeros.shape == (16, 8) and not zeros.any()


@pytest.mark.parametrize("release", ["2.6.0", "2.8.0", "2.13.0"])
def test_expanded_view_within_budget_stays_a_view(release):
    """A 2 MiB expansion of one stored float is kept, as a stride-0 view of the storage."""
    if release in LEGACY:
        arr = _fc1(legacy_file(release, _tensor("0", 128, (512, 1024), (0, 0), offset=5)))
    else:
        arr = _fc1(raw_file(_meta((512, 1024), (0, 0), 5)))
    storage = _stored(release)
    assert arr.shape == (512, 1024) and arr.strides == (0, 0) and _bytes_spanned(arr) == 4
    assert _root_array(arr).nbytes <= 512  # the storage (or its span), not 2 MiB
    assert arr[0, 0] == storage[5] and arr[511, 1023] == storage[5]


def test_stride0_touch_is_bounded_torch_free(tmp_path):
    """Loading and touching every array of each hostile file, torch unimportable and with a
    timeout: the 2**40 views are refused at once, the one within budget is summed quickly."""
    files = {
        "p26": legacy_file("2.6.0", _tensor("0", 128, (1 << 20, 1 << 20), (0, 0))),
        "p28": legacy_file("2.8.0", _tensor("0", 128, (1 << 20, 1 << 20), (0, 0))),
        "neg": legacy_file("2.8.0", _tensor("0", 128, (1 << 14, 1 << 14), (0, 0), neg=True)),
        "raw": raw_file(_meta((1 << 20, 1 << 20), (0, 0))),
        "fake": raw_file(_meta((1 << 21, 1 << 21), (1 << 21, 1)), weight_0=b""),
        "ok": raw_file(_meta((512, 1024), (0, 0))),
    }
    for name, data in files.items():
        (tmp_path / f"{name}.pt2").write_bytes(data)
    proc = run_torch_free(f"""
        import numpy as np, pt2x.serde as serde
        from pt2x.serde.errors import Pt2Error
        for name in {list(files)!r}:
            try:
                with serde.load({str(tmp_path)!r} + f"/{{name}}.pt2") as a:
                    total = sum(float(np.asarray(v).sum()) for v in a.model().state_dict.values())
                print(name, "loaded", total == total)
            except Pt2Error as e:
                print(name, type(e).__name__, e.member)
    """, timeout=TIMEOUT)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[:5] == ["p26 LimitExceededError serialized_state_dict.pt",
                         "p28 LimitExceededError mlp_dynamic/data/weights/model.pt",
                         "neg LimitExceededError mlp_dynamic/data/weights/model.pt",
                         "raw LimitExceededError mlp_dynamic/data/weights/weight_0",
                         "fake LimitExceededError mlp_dynamic/data/weights/model_weights_config.json"]
    assert lines[5] == "ok loaded True"


def test_amplification_budget_is_per_member():
    """Many expansions, each small, add up against one budget for the member."""
    per_view = 1 << 24  # elements of a stride-0 view of one float: 64 MiB apiece
    n = limits.MAX_AMPLIFIED_BYTES // (per_view * 4) + 1
    entries = {k: _tensor(*v) for k, v in _MLP_TENSORS.items()}
    entries.update({f"x{i}": _tensor("3", 4, (per_view,), (0,)) for i in range(n)})
    e = _load_error(legacy_file("2.8.0", pkl=_state_dict(entries)), LimitExceededError)
    assert "MAX_AMPLIFIED_BYTES" in str(e) and e.path == f"archive/data.pkl['x{n - 1}']"
    del entries[f"x{n - 1}"]
    assert len(serde.load(legacy_file("2.8.0", pkl=_state_dict(entries))).model().state_dict) == 4 + n - 1


# ------------------------------------------------------------------ neg / conj bits


@pytest.mark.parametrize("release", LEGACY)
def test_neg_expanded_view_is_not_materialised(release):
    """torch's neg bit on an expanded view: the sign is applied to the one stored element
    the view reads, not to the 1M-element view (which was allocated whole)."""
    storage = _stored(release)
    arr = _fc1(legacy_file(release, _tensor("0", 128, (1024, 1024), (0, 0), offset=7, neg=True)))
    assert arr.shape == (1024, 1024) and arr.strides == (0, 0) and _bytes_spanned(arr) == 4
    assert _root_array(arr).nbytes == 4  # the negated copy is of the one element read
    assert arr[3, 9] == -storage[7] and not arr.flags.writeable
    # past the budget: refused, whichever bit
    for flags in ({"neg": True}, {"conj": True}, {"neg": True, "conj": True}):
        big = _tensor("0", 64, (1 << 14, 1 << 14), (0, 0), stype="ComplexFloatStorage", **flags)
        e = _load_error(legacy_file(release, big), LimitExceededError)
        assert "MAX_AMPLIFIED_BYTES" in str(e) and "fc1.weight" in e.path


def test_neg_conj_values_match_torch_semantics():
    """conj and neg on complex storage, strided: values as torch resolves them."""
    stored = _stored("2.8.0").view(np.complex64)
    arr = _fc1(legacy_file("2.8.0", _tensor("0", 64, (8, 4), (1, 8), offset=2, stype="ComplexFloatStorage",
                                            neg=True, conj=True)))
    want = -np.conj(np.lib.stride_tricks.as_strided(stored[2:], (8, 4), (8, 64)))
    np.testing.assert_array_equal(arr, want)
    assert arr.strides == (8, 64)


def test_neg_on_bool_is_a_tensor_error():
    e = _load_error(legacy_file("2.8.0", _tensor("0", 512, (4,), (1,), stype="BoolStorage", neg=True)), TensorDataError)
    assert e.member == WEIGHTS_MEMBER["2.8.0"] and "fc1.weight" in e.path


# ------------------------------------------------------------------ the unpickler's own work


def _shared_tuples(levels: int, width: int) -> bytes:
    """Opcodes leaving t_levels on the stack, where t_0 = (1,) * width and
    t_k = (t_{k-1},) * width through memo references: a few bytes per level, width**levels leaves."""
    out = b"(" + b"K\x01" * width + b"tq\x00"
    for k in range(1, levels + 1):
        out += b"0(" + (b"h" + bytes([k - 1])) * width + b"tq" + bytes([k])
    return out


def _memo_bomb_key(levels: int = 12, width: int = 64) -> bytes:
    """A dict keyed by t_12: ~1.6 KB whose one SETITEM hashes 64**12 elements."""
    return b"\x80\x02}" + _shared_tuples(levels, width) + b"K\x01s."


@pytest.mark.parametrize("pkl, words", [
    (_memo_bomb_key(), "MAX_PICKLE_WORK_PER_BYTE"),  # a hash that never ends
    (b"\x80\x02N" + b"r\xff\xff\xff\x7f" + b"0}.", "memo index"),  # LONG_BINPUT 2**31-1: a 16 GiB memo array
    # one 64 KiB bytes value copied by bytearray() 10,000 times through memo references
    (b"\x80\x03B" + struct.pack("<I", 1 << 16) + b"\0" * (1 << 16) + b"q\x000"
     + (_glob("builtins", "bytearray") + b"h\x00\x85R0") * 10_000 + b"}.", "MAX_PICKLE_WORK_PER_BYTE"),
    # 2 MB of EMPTY_LIST: each byte keeps a ~72-byte list alive on the stack (~150 MB)
    (b"\x80\x02" + b"]" * 2_000_000 + b"}.", "MAX_PICKLE_STACK"),
    # empty lists memoized and popped: the memo keeps every one of them alive
    (b"\x80\x04" + b"]\x940" * 2_100_000 + b"}.", "MAX_PICKLE_MEMO"),
], ids=["hash", "memo", "copy", "stack-size", "memo-size"])
def test_pickle_work_is_bounded(pkl, words):
    """Refused by the opcode scan, before the unpickler runs a single opcode (torch-free, timed out)."""
    e = _load_error(legacy_file("2.8.0", pkl=pkl), LimitExceededError)
    assert words in str(e) and e.member == WEIGHTS_MEMBER["2.8.0"] and e.path == "archive/data.pkl"


def test_pickle_work_torch_free(tmp_path):
    path = tmp_path / "bomb.pt2"
    path.write_bytes(legacy_file("2.8.0", pkl=_memo_bomb_key(levels=30)))
    proc = run_torch_free(f"""
        import pt2x.serde as serde
        from pt2x.serde.errors import LimitExceededError
        try:
            serde.load({str(path)!r})
        except LimitExceededError as e:
            print("refused:", e.member, e.path)
    """, timeout=TIMEOUT)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "refused: mlp_dynamic/data/weights/model.pt archive/data.pkl"


def test_shared_values_in_a_tree_convert_once():
    """load_pickle's tree walk converts a memo-shared value once: t_30 (64**30 leaves by
    repetition, a few KB of pickle) comes back as the same shared tuples, quickly."""
    from pt2x.serde.codec.pickle_reader import load_pickle

    levels, width = 30, 4
    pkl = b"\x80\x02" + _shared_tuples(levels, width) + b"."
    tree = load_pickle({"archive/data.pkl": pkl}.__getitem__, "archive/data.pkl")
    for _ in range(levels):
        assert len(tree) == width and all(t is tree[0] for t in tree)
        tree = tree[0]
    assert tree == (1,) * width


def _tree(pkl: bytes, storages: dict[str, bytes] | None = None):
    from pt2x.serde.codec.pickle_reader import load_pickle

    members = {"archive/data.pkl": pkl, **{f"archive/data/{k}": v for k, v in (storages or {}).items()}}
    return load_pickle(members.__getitem__, "archive/data.pkl", where="outer/model.pt")


def test_tree_builtins_as_protocol_2_names_them():
    """torch.save's protocol 2 names builtins ``__builtin__.set`` etc.: read as the values."""
    values = ({1, 2}, frozenset({"a"}), 1 + 2j, bytearray(b"ab"), [b"\x00\xff"])
    pkl = pickle.dumps(values, protocol=2)
    assert b"__builtin__" in pkl
    assert _tree(pkl) == values


@pytest.mark.parametrize("wrap", [lambda t: _call(_glob("__builtin__", "set"), b"](" + t + b"e"),
                                  lambda t: b"}" + t + b"K\x01s"], ids=["set", "dict-key"])
def test_tree_tensors_where_arrays_cannot_go(wrap):
    """A tensor in a set or as a dict key (numpy arrays are not hashable): a TensorDataError,
    not a TypeError."""
    pkl = b"\x80\x02" + wrap(_tensor("0", 4, (4,), (1,))) + b"."
    with pytest.raises(TensorDataError, match="not supported") as info:
        _tree(pkl, {"0": np.arange(4, dtype=np.float32).tobytes()})
    assert info.value.member == "outer/model.pt"
