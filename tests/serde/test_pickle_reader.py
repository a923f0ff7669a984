"""pt2x.serde.codec.pickle_reader against torch.save output, real fixtures, and hostile pickles."""

from __future__ import annotations

import glob
import io
import os
import pickle
import zipfile
from collections import OrderedDict

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from pt2x.schema import dtypes  # noqa: E402
from pt2x.serde import limits
from pt2x.serde.codec import pickle_reader  # noqa: E402
from pt2x.serde.errors import (  # noqa: E402
    LimitExceededError,
    Pt2FormatError,
    TensorDataError,
    UnsafeContentError,
)
from pt2x.serde.codec.pickle_reader import (
    describe_pickle,
    find_data_pkl,
    load_pickle,
    pickle_globals,
    read_tensor_pickle,
    read_torch_save,
)

from paths import FIXTURES  # noqa: E402
from torchfree import run_torch_free  # noqa: E402

# --------------------------------------------------------------------------- helpers


def saved(obj) -> bytes:
    buf = io.BytesIO()
    torch.save(obj, buf)
    return buf.getvalue()


def torch_bytes(t) -> bytes:
    return t.detach().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b""


def assert_same(arr: np.ndarray, t) -> None:
    """Bit-for-bit: dtype, shape, strides (in elements), values."""
    assert str(t.dtype) == f"torch.{_torch_name(arr.dtype)}"
    assert arr.shape == tuple(t.shape)
    assert tuple(s // arr.itemsize for s in arr.strides) == tuple(t.stride())
    assert np.ascontiguousarray(arr).tobytes() == torch_bytes(t.resolve_conj().resolve_neg())


def _torch_name(dt: np.dtype) -> str:
    st = dtypes.from_numpy(dt)
    if st is None:
        raise AssertionError(dt)
    return dtypes.row(st).torch_name


def make_zip(pkl: bytes, storages: dict[str, bytes] | None = None, byteorder: str | None = "little",
             root: str = "archive") -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr(f"{root}/data.pkl", pkl)
        if byteorder is not None:
            z.writestr(f"{root}/byteorder", byteorder)
        for k, v in (storages or {}).items():
            z.writestr(f"{root}/data/{k}", v)
        z.writestr(f"{root}/version", "3\n")
    return buf.getvalue()


class _Storage:
    """Placeholder pickled as a persistent id, the way torch.save pickles storages."""

    def __init__(self, key, stype, numel, location="cpu"):
        self.pid = ("storage", stype, key, location, numel)


class _Reduce:
    """Pickles as ``func(*args)`` with torch's real globals (pickle writes their names)."""

    def __init__(self, func, *args):
        self.func, self.args = func, args

    def __reduce__(self):
        return self.func, self.args


class _Pickler(pickle.Pickler):
    def persistent_id(self, obj):
        return obj.pid if isinstance(obj, _Storage) else None


def craft(obj, protocol=2) -> bytes:
    buf = io.BytesIO()
    _Pickler(buf, protocol=protocol).dump(obj)
    return buf.getvalue()


def tensor_pkl(size, stride, offset=0, numel=4, stype=None, key="0", dtype=None):
    st = _Storage(key, stype or torch.FloatStorage, numel)
    if dtype is None:
        t = _Reduce(torch._utils._rebuild_tensor_v2, st, offset, size, stride, False, OrderedDict())
    else:
        t = _Reduce(torch._utils._rebuild_tensor_v3, st, offset, size, stride, False, OrderedDict(), dtype)
    return craft({"t": t})


# --------------------------------------------------------------------------- torch.save round trips

DTYPES = [torch.float32, torch.float16, torch.bfloat16, torch.float64, torch.int8, torch.uint8,
          torch.int16, torch.int32, torch.int64, torch.bool, torch.complex64, torch.complex128,
          torch.float8_e4m3fn, torch.float8_e5m2, torch.float8_e4m3fnuz, torch.float8_e5m2fnuz,
          torch.uint16, torch.uint32, torch.uint64]


def _sample(dtype, shape):
    g = torch.Generator().manual_seed(0)
    if dtype == torch.bool:
        return torch.rand(shape, generator=g) > 0.5
    if dtype.is_floating_point or dtype.is_complex:
        base = torch.randn(shape, generator=g, dtype=torch.complex64 if dtype.is_complex else torch.float32)
        return base.to(dtype)
    if dtype in (torch.uint16, torch.uint32, torch.uint64):
        return torch.randint(0, 200, shape, generator=g, dtype=torch.int64).to(dtype)
    return torch.randint(-100 if dtype != torch.uint8 else 0, 100, shape, generator=g, dtype=torch.int64).to(dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_dtypes_bit_exact(dtype):
    sd = {"x": _sample(dtype, (3, 5)), "s": _sample(dtype, ()), "e": _sample(dtype, (0, 4))}
    got = read_torch_save(saved(sd))
    assert got.keys() == sd.keys()
    for k in sd:
        assert_same(got[k], sd[k])
        assert not got[k].flags.writeable


def test_layouts_shared_strided_parameter():
    w = torch.randn(6, 4)
    base = torch.arange(24, dtype=torch.float32)
    sd = OrderedDict(
        weight=torch.nn.Parameter(w),
        tied=w,  # same tensor twice
        transposed=torch.randn(4, 6).t(),  # non-contiguous
        window=base[5:17].view(3, 4),  # storage_offset 5
        strided=base[::3],  # stride 3, same storage as window
        permuted=torch.randn(2, 3, 4).permute(2, 0, 1),
        expanded=torch.randn(1, 4).expand(5, 4),  # stride 0
        empty=torch.empty(0),
        conj=torch.randn(3, dtype=torch.complex64).conj(),
        neg=torch.randn(3, dtype=torch.complex64)._neg_view(),
        buf_param=torch.nn.Parameter(torch.ones(2), requires_grad=False),
    )
    got = read_torch_save(saved(sd))
    assert list(got) == list(sd)
    for k, t in sd.items():
        assert_same(got[k], t)
    assert np.shares_memory(got["weight"], got["tied"])
    assert np.shares_memory(got["window"], got["strided"])
    assert got["transposed"].strides == (4, 24)
    assert got["expanded"].strides == (0, 4)
    # a tensor kept with python attributes goes through _rebuild_from_type_v2
    t = torch.randn(3)
    t.note = "x"
    p = torch.nn.Parameter(torch.randn(2))
    p.note = "y"
    got2 = read_torch_save(saved({"t": t, "p": p}))
    assert_same(got2["t"], t)
    assert_same(got2["p"], p.detach())
    assert "torch._tensor._rebuild_from_type_v2" in pickle_globals(
        zipfile.ZipFile(io.BytesIO(saved({"t": t}))).read("archive/data.pkl"))


def test_writable_copies_keep_sharing():
    w = torch.randn(2, 3)
    raw = saved({"a": w, "b": w[1]})
    ro = read_torch_save(raw)
    with pytest.raises(ValueError):
        ro["a"][0, 0] = 1
    rw = read_torch_save(raw, writable=True)
    rw["a"][1, 2] = 42.0
    assert rw["b"][2] == 42.0  # one buffer
    assert ro["a"][1, 2] == w[1, 2].item()  # the original bytes are untouched


def test_open_member_api_and_tree():
    sd = {"k": torch.randn(2, 2)}
    inputs = ((torch.randn(3), 4, "s", None, [1.5, True]), {"y": torch.arange(3), "d": torch.float16})
    z = zipfile.ZipFile(io.BytesIO(saved(inputs)))
    pkl = find_data_pkl(z.namelist())
    tree = load_pickle(z.read, pkl, where="outer/model.pt")
    (a, b, c, d, e), kw = tree
    assert_same(a, inputs[0][0])
    assert (b, c, d, e) == (4, "s", None, [1.5, True])
    assert_same(kw["y"], inputs[1]["y"])
    assert kw["d"] == pickle_reader.TorchDtype("float16")
    z2 = zipfile.ZipFile(io.BytesIO(saved(sd)))
    got = read_tensor_pickle(z2.read, find_data_pkl(z2.namelist()), where="w.pt")
    assert_same(got["k"], sd["k"])
    with pytest.raises(TensorDataError, match="expected a dict"):
        read_tensor_pickle(z.read, pkl)
    # a different root folder name, as old torch versions wrote (the file's stem)
    raw = make_zip(zipfile.ZipFile(io.BytesIO(saved(sd))).read("archive/data.pkl"),
                   {"0": zipfile.ZipFile(io.BytesIO(saved(sd))).read("archive/data/0")}, root="model")
    assert_same(read_torch_save(raw)["k"], sd["k"])


def test_big_endian_is_converted():
    sd = {"f": torch.randn(2, 3), "h": torch.randn(4).half(), "c": torch.randn(2, dtype=torch.complex64),
          "i": torch.arange(5), "b": torch.randn(3).bfloat16(), "u8": torch.arange(4, dtype=torch.uint8)}
    z = zipfile.ZipFile(io.BytesIO(saved(sd)))
    pkl = z.read("archive/data.pkl")
    order = ["f", "h", "c", "i", "b", "u8"]
    storages = {}
    for key, name in enumerate(order):
        t = sd[name]
        a = t.view(torch.int16).numpy() if t.dtype == torch.bfloat16 else t.numpy()
        if a.dtype.kind == "c":
            a = a.view(a.real.dtype)
        storages[str(key)] = a.byteswap().tobytes()
    got = read_torch_save(make_zip(pkl, storages, byteorder="big"))
    for k in sd:
        assert_same(got[k], sd[k])
        assert got[k].dtype.byteorder in ("=", "|")
    with pytest.raises(TensorDataError, match="byteorder"):
        read_torch_save(make_zip(pkl, storages, byteorder="middle"))


# --------------------------------------------------------------------------- fixtures

FIXTURE_FILES = sorted(glob.glob(os.path.join(FIXTURES, "pt2", "torch-2.6.0", "*.pt2"))
                       + glob.glob(os.path.join(FIXTURES, "pt2", "torch-2.8.0", "*.pt2")))


@pytest.mark.parametrize("path", FIXTURE_FILES, ids=lambda p: "/".join(p.split(os.sep)[-2:]))
def test_fixtures_match_torch_load(path):
    outer = zipfile.ZipFile(path)
    members = [n for n in outer.namelist() if n.endswith(".pt")]
    assert members
    for name in members:
        raw = outer.read(name)
        ref = torch.load(io.BytesIO(raw), weights_only=True)
        if "sample_inputs" in name or "example_inputs" in name:
            tree = read_torch_save(raw, where=name, tree=True)
            flat_ref, _ = torch.utils._pytree.tree_flatten(ref)
            flat, _ = torch.utils._pytree.tree_flatten(tree)  # numpy arrays are leaves
            assert len(flat) == len(flat_ref)
            for a, t in zip(flat, flat_ref):
                if isinstance(t, torch.Tensor):
                    assert_same(a, t)
                else:
                    assert a == t
            # and against the npz the fixtures were made with
            npz = np.load(path[:-4] + ".npz")
            ins = sorted((k for k in npz.files if k.startswith("in_")), key=lambda k: int(k[3:]))
            assert len(ins) == len(flat)
            for k, a in zip(ins, flat):
                np.testing.assert_array_equal(npz[k], np.asarray(a).astype(npz[k].dtype))
            assert describe_pickle(zipfile.ZipFile(io.BytesIO(raw)).read(
                find_data_pkl(zipfile.ZipFile(io.BytesIO(raw)).namelist()))).startswith("pickle referencing ")
            continue
        got = read_torch_save(raw, where=name)
        assert got.keys() == ref.keys()
        for k in ref:
            assert_same(got[k], ref[k])


def test_fixture_tied_weights_share_memory():
    for v in ("2.6.0", "2.8.0"):
        outer = zipfile.ZipFile(os.path.join(FIXTURES, "pt2", f"torch-{v}", "tied_weights.pt2"))
        name = [n for n in outer.namelist() if n.endswith(("serialized_state_dict.pt", "weights/model.pt"))][0]
        got = read_torch_save(outer.read(name))
        assert np.shares_memory(got["emb.weight"], got["head.weight"])


def test_torch_free():
    path = os.path.join(FIXTURES, "pt2", "torch-2.8.0", "tied_weights.pt2")
    proc = run_torch_free(f"""
        import zipfile
        from pt2x.serde.codec.pickle_reader import read_torch_save
        z = zipfile.ZipFile({path!r})
        sd = read_torch_save(z.read('tied_weights/data/weights/model.pt'))
        print(sorted(sd), sd['emb.weight'].shape)
    """)
    assert proc.returncode == 0, proc.stderr
    assert "['emb.weight', 'head.weight'] (20, 8)" in proc.stdout


# --------------------------------------------------------------------------- hostile input


class _Evil:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return os.system, (f"touch {self.marker}",)


def test_reduce_os_system_refused_and_nothing_ran(tmp_path):
    marker = tmp_path / "pwned"
    for proto in (2, 4):  # GLOBAL and STACK_GLOBAL
        pkl = pickle.dumps({"w": _Evil(marker)}, protocol=proto)
        with pytest.raises(UnsafeContentError, match=r"refused global '(posix|os|nt)\.system'") as ei:
            read_torch_save(make_zip(pkl), where="outer/model.pt")
        assert ei.value.member == "outer/model.pt" and ei.value.path == "archive/data.pkl"
        assert "system" in describe_pickle(pkl)
    assert not marker.exists()
    # the real unpickler would have run it: the payload is live
    pickle.loads(pickle.dumps(_Evil(marker)))
    assert marker.exists()


@pytest.mark.parametrize("glob_name", [
    "builtins eval", "builtins exec", "builtins getattr", "torch load", "torch.serialization load",
    "torch._utils _rebuild_qtensor", "torch._utils _rebuild_device_tensor_from_numpy", "numpy.core.multiarray _reconstruct",
    "copyreg _reconstructor", "collections defaultdict", "subprocess Popen", "torch Tensor", "torch nn",
])
def test_refused_globals(glob_name):
    mod, name = glob_name.split()
    pkl = b"\x80\x02c" + f"{mod}\n{name}\n".encode() + b")R."
    if glob_name == "torch Tensor":  # allowlisted only as a type marker; calling it is refused
        with pytest.raises(TensorDataError, match="not callable"):
            read_torch_save(make_zip(pkl))
        return
    with pytest.raises(UnsafeContentError, match=f"refused global '{mod}.{name}' at offset 2"):
        read_torch_save(make_zip(pkl))
    # STACK_GLOBAL path (caught by find_class, no offset)
    sg = b"\x80\x04\x8c" + bytes([len(mod)]) + mod.encode() + b"\x8c" + bytes([len(name)]) + name.encode() + b"\x93)R."
    with pytest.raises(UnsafeContentError, match=f"refused global '{mod}.{name}'"):
        read_torch_save(make_zip(sg))
    assert f"{mod}.{name}" in describe_pickle(sg)


@pytest.mark.parametrize("pkl, exc, msg", [
    (b"\x80\x02\x82\x01.", UnsafeContentError, "extension-registry"),  # EXT1
    # BUILD on an allowlisted builder (would set function attributes on a real function)
    (b"\x80\x02ccollections\nOrderedDict\n}X\x0c\x00\x00\x00__defaults__)sb.", UnsafeContentError, "BUILD"),
    # NEWOBJ on a storage marker (not a type)
    (b"\x80\x02ctorch\nFloatStorage\n)\x81.", TensorDataError, "malformed"),
    # calling the Tensor type marker
    (b"\x80\x02ctorch\nTensor\n)R.", TensorDataError, "malformed"),
    (b"\x80\x02}q\x00(X\x01\x00\x00\x00a", TensorDataError, "malformed"),  # truncated
    (b"not a pickle at all", TensorDataError, "malformed"),
    (b"\x80\x02]q\x00.", TensorDataError, "expected a dict"),
    (b"\x80\x02}X\x01\x00\x00\x00aK\x01s.", TensorDataError, "not a str -> tensor"),
])
def test_malformed_or_refused(pkl, exc, msg):
    with pytest.raises(exc, match=msg):
        read_torch_save(make_zip(pkl))


def test_codecs_encode_only_latin1():
    ok = pickle.dumps({"b": [b"\x00\xff"]}, protocol=2)
    assert "_codecs.encode" in pickle_globals(ok)
    assert read_torch_save(make_zip(ok), tree=True) == {"b": [b"\x00\xff"]}
    bad = b"\x80\x02c_codecs\nencode\nX\x01\x00\x00\x00xX\x0b\x00\x00\x00rot13_codec\x86R."
    with pytest.raises(UnsafeContentError, match="encoding"):
        read_torch_save(make_zip(bad), tree=True)


def test_storage_errors():
    four = np.arange(4, dtype=np.float32).tobytes()
    # missing storage member
    with pytest.raises(TensorDataError, match="missing member 'archive/data/0'"):
        read_torch_save(make_zip(tensor_pkl((4,), (1,))))
    # extent past the storage
    with pytest.raises(TensorDataError, match="past storage"):
        read_torch_save(make_zip(tensor_pkl((2, 2), (2, 2)), {"0": four}))
    with pytest.raises(TensorDataError, match="past storage"):
        read_torch_save(make_zip(tensor_pkl((4,), (1,), offset=1), {"0": four}))
    # byte count disagreeing with numel
    with pytest.raises(TensorDataError, match="expected numel 4"):
        read_torch_save(make_zip(tensor_pkl((3,), (1,)), {"0": four[:12]}))
    with pytest.raises(TensorDataError, match="not a multiple"):
        read_torch_save(make_zip(tensor_pkl((1,), (1,), numel=3, stype=torch.UntypedStorage, dtype=torch.float32),
                                 {"0": b"abc"}))
    # negative sizes / strides / offset
    for size, stride, off in [((-1,), (1,), 0), ((2,), (-1,), 0), ((1,), (1,), -1)]:
        with pytest.raises(TensorDataError, match="negative"):
            read_torch_save(make_zip(tensor_pkl(size, stride, offset=off), {"0": four}))
    # huge sizes: stride 0 over a tiny storage, or a huge stride
    with pytest.raises(LimitExceededError, match="MAX_TENSOR_ELEMENTS"):
        read_torch_save(make_zip(tensor_pkl((1 << 30, 1 << 30), (0, 0)), {"0": four}))
    with pytest.raises(TensorDataError, match="past storage"):
        read_torch_save(make_zip(tensor_pkl((2,), (1 << 62,)), {"0": four}))
    with pytest.raises(LimitExceededError, match="MAX_TENSOR_RANK"):
        read_torch_save(make_zip(tensor_pkl((1,) * 65, (1,) * 65), {"0": four}))
    with pytest.raises(TensorDataError, match="differ in rank"):
        read_torch_save(make_zip(tensor_pkl((2, 2), (1,)), {"0": four}))
    # path traversal in a storage key
    with pytest.raises(TensorDataError, match="bad storage key"):
        read_torch_save(make_zip(tensor_pkl((4,), (1,), key="../../etc/passwd"), {"0": four}))
    # a persistent id that is not a storage, or a storage type that is not one
    with pytest.raises(TensorDataError, match="persistent id"):
        read_torch_save(make_zip(b"\x80\x02X\x03\x00\x00\x00abcQ."))
    with pytest.raises(UnsafeContentError, match="storage type"):
        read_torch_save(make_zip(craft(_Storage("0", torch.float32, 4)), {"0": four}), tree=True)
    # an unsupported dtype is refused clearly
    with pytest.raises(TensorDataError, match="complex32"):
        read_torch_save(make_zip(tensor_pkl((1,), (1,), numel=4, stype=torch.UntypedStorage, dtype=torch.complex32),
                                 {"0": b"abcd"}))
    # the good case of the same crafted shape reads
    got = read_torch_save(make_zip(tensor_pkl((2, 2), (1, 2)), {"0": four}))
    np.testing.assert_array_equal(got["t"], np.arange(4, dtype=np.float32).reshape(2, 2).T)


def test_limits(monkeypatch):
    pkl = saved({"a": torch.ones(2)})
    monkeypatch.setattr(limits, "MAX_PICKLE_OPS", 10)
    with pytest.raises(LimitExceededError, match="MAX_PICKLE_OPS"):
        read_torch_save(pkl)
    monkeypatch.undo()
    nested = b"\x80\x02" + b"]" * 100_000 + b"a" * 99_999 + b"."  # lists 100k deep
    with pytest.raises(LimitExceededError, match="MAX_PICKLE_DEPTH"):
        read_torch_save(make_zip(nested), tree=True)
    cyc: list = []
    cyc.append(cyc)
    with pytest.raises(LimitExceededError):
        read_torch_save(make_zip(pickle.dumps(cyc, protocol=2)), tree=True)


def test_errors_are_pt2_errors_for_garbage():
    rng = np.random.default_rng(0)
    good = zipfile.ZipFile(io.BytesIO(saved({"a": torch.randn(3, 2), "b": torch.arange(4)}))).read("archive/data.pkl")
    for _ in range(300):
        b = bytearray(good)
        for _ in range(rng.integers(1, 4)):
            b[rng.integers(0, len(b))] = rng.integers(0, 256)
        try:
            read_torch_save(make_zip(bytes(b), {"0": b"\0" * 24, "1": b"\0" * 32}), tree=True)
        except Pt2FormatError:
            pass


def test_describe_pickle():
    z = zipfile.ZipFile(io.BytesIO(saved({"a": torch.ones(2, dtype=torch.float8_e4m3fn)})))
    text = describe_pickle(z.read("archive/data.pkl"))
    assert "torch._utils._rebuild_tensor_v3" in text and "torch.storage.UntypedStorage" in text
    assert "outside" not in text
    assert describe_pickle(b"\x80\x02K\x01.") == "pickle referencing no globals"
    assert describe_pickle(b"garbage").startswith("unreadable pickle")
    assert "outside pt2x's allowlist: posix.system" in describe_pickle(b"\x80\x02cposix\nsystem\n.")
