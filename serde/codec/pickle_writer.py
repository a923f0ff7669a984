"""Writes the pickle of a ``torch.save`` archive of tensors (``data.pkl``), torch-free.

Why: torch 2.6-2.8 read an exported program's weights and constants only as ``torch.save``
archives (``serialized_state_dict.pt``, ``data/weights/<model>.pt``; 2.9 is the first to read
raw storage files, ``serde.compat.releases.RAW_WEIGHTS_SINCE``). pt2x writes them
itself so that files for those releases can be made without torch, from the raw storages
a newer archive holds.

What is written follows what ``torch.save`` writes for a ``{name: tensor}`` dict (facts from
``torch/serialization.py`` and ``torch/_tensor.py``; checked against its bytes in the tests):
protocol 2, a dict whose values are ``torch._utils._rebuild_tensor_v2(storage, offset, size,
stride, requires_grad, collections.OrderedDict())``, wrapped in
``torch._utils._rebuild_parameter(t, requires_grad, OrderedDict())`` for parameters. Each
storage is a persistent id ``('storage', torch.<Legacy>Storage, key, location, numel)``; keys
are ``"0"``, ``"1"``... in first-use order. Memoization is the ``pickle`` module's: each
string, tuple, global and built object gets a ``BINPUT``, and a repeat (the same key, the
same tied tensor) a ``BINGET``. The records around the pickle (each storage's bytes under
its key, the bookkeeping members, the serialization id) are ``serde.archive.torch_save``'s.

The only globals the stream names are the tensor-rebuild functions, the legacy storage
classes and ``collections.OrderedDict``: what torch's ``weights_only`` unpickler allows.
Output is deterministic: equal entries give equal bytes.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Hashable, Union

from ...schema import dtypes
from ..errors import Pt2UsageError

__all__ = ["StoredTensor", "ALLOWED_GLOBALS", "tensor_pickle", "storage_class"]

Bytes = Union[bytes, bytearray, memoryview]

REBUILD_TENSOR = ("torch._utils", "_rebuild_tensor_v2")
REBUILD_PARAMETER = ("torch._utils", "_rebuild_parameter")
ORDERED_DICT = ("collections", "OrderedDict")
ALLOWED_GLOBALS = frozenset(
    {REBUILD_TENSOR, REBUILD_PARAMETER, ORDERED_DICT}
    | {("torch", r.storage_class) for r in dtypes.ROWS if r.storage_class}
)
"""Every (module, name) this writer may reference: all are in torch's weights_only allowlist."""

_BATCH = 1000  # the pickle module's SETITEMS batch size


@dataclass(frozen=True)
class StoredTensor:
    """One tensor to pickle: a strided view of a storage shared by every entry with its ``storage_key``."""

    storage_key: Hashable
    storage: Bytes  # the whole storage, as bytes
    dtype: str  # torch dtype name: "float32"
    sizes: tuple[int, ...]
    strides: tuple[int, ...]
    storage_offset: int = 0
    requires_grad: bool = False
    is_param: bool = False
    location: str = "cpu"

    def same_object(self) -> tuple:
        """Entries equal here are one tensor object in torch (tied weights): pickled once, then a BINGET."""
        return (self.storage_key, self.dtype, self.sizes, self.strides, self.storage_offset,
                self.requires_grad, self.is_param, self.location)


def storage_class(dtype: str, *, name: str = "") -> str:
    """The legacy typed storage class torch.save names for ``dtype`` (``FloatStorage``)."""
    row = dtypes.by_torch_name(dtype)
    if row is None or row.storage_class is None:
        raise Pt2UsageError(f"{name}: dtype {dtype} has no legacy storage class; pt2x's torch.save writer cannot pickle it")
    return row.storage_class


# ------------------------------------------------------------------ opcode emitter


class _Stream:
    """Protocol-2 opcodes with the pickle module's memo rules (values memoized by identity key)."""

    def __init__(self):
        self.out = bytearray(b"\x80\x02")
        self.memo: dict[Hashable, int] = {}

    def put(self, key: Hashable) -> None:
        i = len(self.memo)
        self.memo[key] = i
        self.out += b"q" + bytes([i]) if i < 256 else b"r" + struct.pack("<I", i)

    def get(self, key: Hashable) -> bool:
        i = self.memo.get(key)
        if i is None:
            return False
        self.out += b"h" + bytes([i]) if i < 256 else b"j" + struct.pack("<I", i)
        return True

    def string(self, s: str) -> None:
        if self.get(("str", s)):
            return
        raw = s.encode("utf-8", "surrogatepass")
        self.out += b"X" + struct.pack("<I", len(raw)) + raw
        self.put(("str", s))

    def integer(self, n: int) -> None:
        if 0 <= n < 0x100:
            self.out += b"K" + bytes([n])
        elif 0 <= n < 0x10000:
            self.out += b"M" + struct.pack("<H", n)
        elif -(2**31) <= n < 2**31:
            self.out += b"J" + struct.pack("<i", n)
        else:
            raw = n.to_bytes((n.bit_length() + 8) // 8, "little", signed=True)
            self.out += (b"\x8a" + bytes([len(raw)]) if len(raw) < 256 else b"\x8b" + struct.pack("<i", len(raw))) + raw

    def boolean(self, b: bool) -> None:
        self.out += b"\x88" if b else b"\x89"

    def glob(self, ref: tuple[str, str]) -> None:
        if ref not in ALLOWED_GLOBALS:
            raise AssertionError(f"pickle_writer may not reference {ref}")
        if self.get(("global", ref)):
            return
        self.out += b"c" + f"{ref[0]}\n{ref[1]}\n".encode("ascii")
        self.put(("global", ref))

    def int_tuple(self, values: tuple[int, ...], key: Hashable) -> None:
        """A tuple of ints, memoized under ``key`` (a fresh object per use: ``key`` is unique)."""
        if not values:
            self.out += b")"
            return
        if len(values) > 3:
            self.out += b"("
        for v in values:
            self.integer(v)
        self.out += b"t" if len(values) > 3 else b"\x85\x86\x87"[len(values) - 1: len(values)]
        self.put(key)

    def empty_ordered_dict(self, key: Hashable) -> None:
        self.glob(ORDERED_DICT)
        self.out += b")R"
        self.put(key)


# ------------------------------------------------------------------------ pickle


class _TensorPickler:
    def __init__(self):
        self.s = _Stream()
        self.keys: dict[Hashable, str] = {}  # storage_key -> "0", "1", ...
        self.storages: dict[str, StoredTensor] = {}
        self._fresh = 0

    def fresh(self) -> tuple:
        self._fresh += 1
        return ("obj", self._fresh)

    def storage(self, t: StoredTensor, name: str) -> None:
        s = self.s
        key = self.keys.setdefault(t.storage_key, str(len(self.keys)))
        first = self.storages.setdefault(key, t)
        if first.dtype != t.dtype or len(first.storage) != len(t.storage):
            raise Pt2UsageError(f"{name}: storage {t.storage_key!r} already pickled as {len(first.storage)} bytes of "
                                f"{first.dtype}; torch.save keeps one dtype per storage")
        itemsize = dtypes.by_torch_name(t.dtype).itemsize
        if len(t.storage) % itemsize:
            raise Pt2UsageError(f"{name}: storage of {len(t.storage)} bytes is not a whole number of {t.dtype} elements")
        s.out += b"("
        s.string("storage")
        s.glob(("torch", storage_class(t.dtype, name=name)))
        s.string(key)
        s.string(t.location)
        s.integer(len(t.storage) // itemsize)
        s.out += b"t"
        s.put(self.fresh())
        s.out += b"Q"  # BINPERSID

    def tensor(self, t: StoredTensor, name: str, requires_grad: bool, key: Hashable) -> None:
        s = self.s
        s.glob(REBUILD_TENSOR)
        s.out += b"("
        self.storage(t, name)
        s.integer(t.storage_offset)
        s.int_tuple(t.sizes, self.fresh())
        s.int_tuple(t.strides, self.fresh())
        s.boolean(requires_grad)
        s.empty_ordered_dict(self.fresh())
        s.out += b"t"  # the arguments tuple, memoized like every tuple
        s.put(self.fresh())
        s.out += b"R"
        s.put(key)

    def value(self, t: StoredTensor, name: str) -> None:
        s = self.s
        if s.get(("tensor", t.same_object())):
            return
        if len(t.sizes) != len(t.strides):
            raise Pt2UsageError(f"{name}: {len(t.sizes)} sizes but {len(t.strides)} strides")
        if t.is_param:
            s.glob(REBUILD_PARAMETER)
            self.tensor(t, name, False, self.fresh())
            s.boolean(t.requires_grad)
            s.empty_ordered_dict(self.fresh())
            s.out += b"\x87"  # TUPLE3
            s.put(self.fresh())
            s.out += b"R"
            s.put(("tensor", t.same_object()))
        else:
            self.tensor(t, name, t.requires_grad, ("tensor", t.same_object()))

    def dict(self, entries: dict[str, StoredTensor]) -> bytes:
        s = self.s
        s.out += b"}"
        s.put(self.fresh())
        items = list(entries.items())
        for start in range(0, len(items), _BATCH):
            batch = items[start:start + _BATCH]
            if len(batch) > 1:
                s.out += b"("
            for name, t in batch:
                s.string(name)
                self.value(t, name)
            s.out += b"u" if len(batch) > 1 else b"s"
        s.out += b"."
        return bytes(s.out)


def tensor_pickle(entries: dict[str, StoredTensor]) -> tuple[bytes, dict[str, StoredTensor]]:
    """(the ``data.pkl`` stream for ``entries``, storage key -> the entry whose storage it records)."""
    p = _TensorPickler()
    data = p.dict(entries)
    return data, p.storages
