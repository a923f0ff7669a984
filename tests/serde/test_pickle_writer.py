"""pt2x's torch.save writer (serde/codec/pickle_writer.py, serde/archive/torch_save.py): read back equal, only allowed globals,
deterministic, the same data.pkl bytes torch.save writes, and loadable by torch.load(weights_only=True)."""

from __future__ import annotations

import io
import pickletools
import zipfile

import numpy as np
import pytest

from pt2x.serde.archive.zip_writer import to_bytes
from pt2x.serde.codec.pickle_reader import read_torch_save
from pt2x.serde.archive.torch_save import torch_save_records
from pt2x.serde.codec.pickle_writer import ALLOWED_GLOBALS, StoredTensor, tensor_pickle
from pt2x.serde.errors import Pt2UsageError
from torchfree import run_torch_free

# What torch's weights_only unpickler allows for tensor rebuilding (torch/_weights_only_unpickler.py):
# the rebuild functions, OrderedDict and the legacy typed storage classes.
WEIGHTS_ONLY_REBUILD = {("torch._utils", "_rebuild_tensor_v2"), ("torch._utils", "_rebuild_parameter"),
                        ("collections", "OrderedDict")}


def stored(arr: np.ndarray, key, *, dtype=None, sizes=None, strides=None, offset=0, param=False, grad=False) -> StoredTensor:
    """A StoredTensor over ``arr``'s bytes (the whole storage), viewed as given (default: all of it, contiguous)."""
    flat = np.ascontiguousarray(arr).reshape(-1)
    sizes = tuple(arr.shape) if sizes is None else sizes
    if strides is None:
        strides, acc = [], 1
        for n in reversed(sizes):
            strides.insert(0, acc)
            acc *= n
    return StoredTensor(key, flat.tobytes(), dtype or arr.dtype.name, tuple(sizes), tuple(strides), offset, grad, param)


def entries() -> dict[str, StoredTensor]:
    rng = np.random.default_rng(0)
    w = rng.standard_normal((4, 6)).astype(np.float32)
    shared = np.arange(12, dtype=np.int64)
    return {
        "fc.weight": stored(w, "w", param=True, grad=True),
        "fc.weight_t": stored(w, "w", sizes=(6, 4), strides=(1, 6)),  # a transposed view of the same storage
        "head.weight": stored(w, "w", param=True, grad=True),  # tied: the same tensor as fc.weight
        "steps": stored(np.array(3, dtype=np.int64), "s"),  # 0-dim
        "odd": stored(shared, "shared", sizes=(2, 3), strides=(1, 4), offset=1),  # strided, offset
        "flags": stored(np.array([True, False, True]), "b"),
        "half": stored(rng.standard_normal(5).astype(np.float16), "h"),
        "cplx": stored((rng.standard_normal(3) + 1j).astype(np.complex64), "c"),
        "empty": stored(np.zeros((0, 3), dtype=np.float32), "e"),
    }


def write(e: dict[str, StoredTensor], *, torch_2_8=True) -> bytes:
    return to_bytes(torch_save_records(e, torch_2_8=torch_2_8))


def globals_of(data: bytes) -> set[tuple[str, str]]:
    out = set()
    for op, arg, _pos in pickletools.genops(data):
        if op.name in ("GLOBAL", "INST"):
            out.add(tuple(arg.split(" ", 1)))
        assert op.name not in ("STACK_GLOBAL", "EXT1", "EXT2", "EXT4", "NEWOBJ", "BUILD", "OBJ"), op.name
    return out


def expected_view(t: StoredTensor) -> np.ndarray:
    base = np.frombuffer(t.storage, dtype=np.dtype(t.dtype))
    item = base.itemsize
    return np.lib.stride_tricks.as_strided(base[t.storage_offset:], t.sizes, tuple(s * item for s in t.strides))


@pytest.mark.parametrize("torch_2_8", [True, False])
def test_written_members_read_back_bit_equal(torch_2_8):
    e = entries()
    got = read_torch_save(write(e, torch_2_8=torch_2_8))
    assert list(got) == list(e)
    for name, t in e.items():
        want = expected_view(t)
        assert got[name].dtype == want.dtype and got[name].shape == want.shape, name
        assert got[name].strides == want.strides and got[name].tobytes() == want.tobytes(), name
    # one storage per key: tied and viewed tensors are views of one buffer, as torch rebuilds them
    assert np.shares_memory(got["fc.weight"], got["head.weight"]) and np.shares_memory(got["fc.weight"], got["fc.weight_t"])
    with zipfile.ZipFile(io.BytesIO(write(e, torch_2_8=torch_2_8))) as z:
        names = z.namelist()
    assert len([n for n in names if n.startswith("archive/data/")]) == 7  # w, s, shared, b, h, c, e
    assert ("archive/.format_version" in names) == torch_2_8 and names[-1] == "archive/.data/serialization_id"


def test_pickle_names_only_weights_only_globals():
    data, _ = tensor_pickle(entries())
    seen = globals_of(data)
    storages = {g for g in seen if g[0] == "torch"}
    assert seen - storages == WEIGHTS_ONLY_REBUILD
    assert storages == {("torch", s) for s in ("FloatStorage", "LongStorage", "BoolStorage", "HalfStorage", "ComplexFloatStorage")}
    assert seen <= ALLOWED_GLOBALS
    assert all(name.endswith("Storage") for mod, name in ALLOWED_GLOBALS if mod == "torch")


def test_deterministic_and_tied_memoized():
    a, b = write(entries()), write(entries())
    assert a == b
    data, storages = tensor_pickle(entries())
    ops = [op.name for op, _, _ in pickletools.genops(data)]
    assert ops.count("BINPERSID") == 8  # one per distinct tensor: head.weight is a BINGET of fc.weight
    assert sorted(storages) == ["0", "1", "2", "3", "4", "5", "6"]


def test_many_entries_use_long_memo_indices():
    e = {f"t{i}": stored(np.full(2, i, dtype=np.float32), i) for i in range(1200)}
    data, _ = tensor_pickle(e)
    ops = {op.name for op, _, _ in pickletools.genops(data)}
    assert {"LONG_BINPUT", "SETITEMS"} <= ops
    got = read_torch_save(write(e))
    assert len(got) == 1200 and got["t1199"].tolist() == [1199.0, 1199.0]


def test_unpicklable_dtype_is_refused_naming_the_tensor():
    t = StoredTensor("k", bytes(4), "uint16", (2,), (1,))
    with pytest.raises(Pt2UsageError, match="bad.*uint16"):
        tensor_pickle({"bad": t})


def test_one_storage_viewed_as_two_dtypes_is_refused():
    f = StoredTensor("k", bytes(8), "float32", (2,), (1,))
    i = StoredTensor("k", bytes(8), "int32", (2,), (1,))
    with pytest.raises(Pt2UsageError, match="ints.*one dtype per storage"):
        tensor_pickle({"floats": f, "ints": i})


def test_writer_is_torch_free():
    r = run_torch_free(
        """
        import numpy as np
        from pt2x.serde.archive.zip_writer import to_bytes
        from pt2x.serde.codec.pickle_reader import read_torch_save
        from pt2x.serde.archive.torch_save import torch_save_records
        from pt2x.serde.codec.pickle_writer import StoredTensor
        t = StoredTensor("k", np.arange(6, dtype=np.float32).tobytes(), "float32", (2, 3), (3, 1), 0, True, True)
        got = read_torch_save(to_bytes(torch_save_records({"w": t, "tied": t})))
        assert got["w"].tolist() == [[0, 1, 2], [3, 4, 5]] and np.shares_memory(got["w"], got["tied"])
        print("ok")
        """
    )
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr


# --------------------------------------------------------------- against real torch


def _from_torch(torch, sd: dict) -> dict[str, StoredTensor]:
    keys: dict[int, object] = {}
    out = {}
    for name, t in sd.items():
        storage = t.untyped_storage()
        key = keys.setdefault(storage.data_ptr(), f"s{len(keys)}")
        out[name] = StoredTensor(
            key, bytes(storage), str(t.dtype).removeprefix("torch."), tuple(t.shape), tuple(t.stride()),
            t.storage_offset(), t.requires_grad, isinstance(t, torch.nn.Parameter),
        )
    return out


def _torch_state_dict(torch):
    torch.manual_seed(0)
    lin = torch.nn.Linear(4, 3)
    base = torch.randn(5, 6)
    return {
        "lin.weight": lin.weight,
        "lin.bias": lin.bias,
        "tied": lin.weight,
        "frozen": torch.nn.Parameter(torch.randn(2), requires_grad=False),
        "view": base[1:, ::2],
        "base": base,
        "count": torch.tensor(7),
        "bf16": torch.randn(3, dtype=torch.bfloat16),
        "mask": torch.tensor([True, False]),
        "big": torch.arange(70000, dtype=torch.int32)[65540:],  # offset past BININT2
    }


def test_data_pkl_is_what_torch_save_writes():
    torch = pytest.importorskip("torch")
    sd = _torch_state_dict(torch)
    buf = io.BytesIO()
    torch.save(sd, buf)
    with zipfile.ZipFile(io.BytesIO(buf.getvalue())) as z:
        ref = z.read("archive/data.pkl")
    mine, _ = tensor_pickle(_from_torch(torch, sd))
    assert mine == ref


def test_torch_loads_it_with_weights_only():
    torch = pytest.importorskip("torch")
    sd = _torch_state_dict(torch)
    got = torch.load(io.BytesIO(write(_from_torch(torch, sd))), weights_only=True)
    assert list(got) == list(sd)
    for name, t in sd.items():
        g = got[name]
        assert type(g) is type(t) and g.dtype == t.dtype and g.requires_grad == t.requires_grad, name
        assert g.shape == t.shape and g.stride() == t.stride() and g.storage_offset() == t.storage_offset(), name
        assert torch.equal(g.detach(), t.detach()), name
    assert got["tied"] is got["lin.weight"]
    assert got["view"].untyped_storage().data_ptr() == got["base"].untyped_storage().data_ptr()
