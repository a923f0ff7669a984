"""Data-only reader for the tensor pickles written by ``torch.save``.

Older .pt2 layouts keep weights as ``torch.save`` archives: a zip with ``<root>/data.pkl``
(the pickle), ``<root>/data/<key>`` (raw storage bytes), ``<root>/byteorder`` and
``<root>/version``. torch 2.6-2.7 store them as ``serialized_state_dict.pt`` /
``serialized_constants.pt`` members of the outer zip, torch 2.8 as
``<name>/data/weights/model.pt`` and ``<name>/data/constants/model.pt``.

Why this is safe (no code from the file ever runs):

* Nothing is imported and no real torch/collections callable is reachable. ``find_class``
  is the one gate every global goes through (GLOBAL, STACK_GLOBAL, INST, EXT codes); it maps
  an explicit allowlist of ``(module, name)`` pairs to this module's own inert objects:
  ``_Builder`` wrappers around pure functions that only validate arguments and return
  records, storage/dtype/type *markers* (instances, not classes, so NEWOBJ/NEWOBJ_EX on them
  fail). Everything else raises ``UnsafeContentError("refused global 'os.system'")``.
* Before the C unpickler sees a byte, ``pickletools.genops`` scans the stream (no
  execution) and ``_Scan`` emulates the unpickler's stack with weights: opcodes are counted
  against ``MAX_PICKLE_OPS``, GLOBAL/INST names are checked against the allowlist (so
  refusals carry a byte offset), EXT1/2/4 are refused, memo indices may not run past the
  opcode count, and the hashing and copying the unpickler and builders will do (dict keys,
  set items, builder arguments, memo references counted every time) is bounded by
  ``MAX_PICKLE_WORK_PER_BYTE``; the values held at once on the stack and in the memo are
  bounded by ``MAX_PICKLE_STACK`` and ``MAX_PICKLE_MEMO``. So work and memory stay bounded.
* BUILD (``__setstate__``), APPEND(S) and SETITEM(S) only ever reach plain containers or this
  module's slot-only records, whose ``__setstate__`` refuses; builders are not functions, so
  BUILD cannot rewrite their ``__defaults__``.
* ``persistent_load`` returns a storage record after validating the id
  ``('storage', storage_type, key, location, numel)``; the key must be a plain name.
* Arrays are made only after unpickling, from the records: each tensor's sizes, strides and
  offset pass ``tensor_view.check_view`` (the check the raw layout of torch >= 2.10 uses)
  with exact integers before numpy sees them, then become ``as_strided`` views of the
  storage bytes. Tensors sharing a storage key are views of one buffer; an expanded view
  stays a view, and what views claim beyond their storage (and copies made for the neg/conj
  bits, of only the span a view reads) is bounded per member by ``MAX_AMPLIFIED_BYTES``.
  Any failure names the member and the tensor (``archive/data.pkl['fc1.weight']``).
"""

from __future__ import annotations

import io
import pickle
import pickletools
import re
import zipfile
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

from ...schema import dtypes
from .. import limits
from ..errors import LimitExceededError, Pt2Error, Pt2FormatError, TensorDataError, UnsafeContentError
from .tensor_view import ViewBudget, brief_repr, check_view

__all__ = [
    "TorchDtype",
    "TorchDevice",
    "read_tensor_pickle",
    "load_pickle",
    "read_torch_save",
    "find_data_pkl",
    "pickle_globals",
    "describe_pickle",
    "describe_globals",
]

# ---------------------------------------------------------------------------------------
# dtypes

def _np_dtype(name: str) -> np.dtype:
    """The numpy dtype of a pickled torch dtype name (``float32``), from ``schema.dtypes``."""
    r = dtypes.by_torch_name(name)
    np_dtype = None if r is None else dtypes.numpy_dtype(r.scalar_type)
    if np_dtype is None:
        raise TensorDataError(f"tensor dtype {name} has no numpy equivalent; not supported")
    return np_dtype


def _readable(name: str) -> bool:
    """Whether arrays of the torch dtype ``name`` can be made (it has a numpy type)."""
    r = dtypes.by_torch_name(name)
    return r is not None and r.numpy_name is not None


def _storage_dtypes() -> dict[str, str]:
    """Legacy typed storage class (``GLOBAL 'torch FloatStorage'``) -> element dtype name."""
    out = {r.storage_class: r.torch_name for r in dtypes.ROWS if r.storage_class}
    out.update(dtypes.TORCH_ONLY_STORAGE_CLASSES)
    return out


# ---------------------------------------------------------------------------------------
# inert records the unpickler may produce


class _Inert:
    """Base of every object the unpickler can hand to pickle opcodes: no state can be set."""

    __slots__ = ()

    def __setstate__(self, state):  # BUILD
        raise UnsafeContentError(f"refused BUILD on {type(self).__name__}")


class TorchDtype(_Inert):
    """A ``torch.<dtype>`` named by the pickle (appears in sample-input trees as a value)."""

    __slots__ = ("name",)

    def __init__(self, name: str):
        object.__setattr__(self, "name", name)

    def __repr__(self):
        return f"torch.{self.name}"

    def __eq__(self, other):
        return isinstance(other, TorchDtype) and other.name == self.name

    def __hash__(self):
        return hash(("TorchDtype", self.name))


class TorchDevice(_Inert):
    """A ``torch.device(...)`` value in a pickled tree."""

    __slots__ = ("spec",)

    def __init__(self, spec: str):
        object.__setattr__(self, "spec", spec)

    def __repr__(self):
        return f"torch.device({self.spec!r})"

    def __eq__(self, other):
        return isinstance(other, TorchDevice) and other.spec == self.spec

    def __hash__(self):
        return hash(("TorchDevice", self.spec))


class _StorageType(_Inert):
    __slots__ = ("name", "dtype")  # dtype None: UntypedStorage (bytes)

    def __init__(self, name, dtype):
        self.name, self.dtype = name, dtype


class _TypeMarker(_Inert):
    __slots__ = ("name",)

    def __init__(self, name):
        self.name = name


class _Storage(_Inert):
    __slots__ = ("key", "stype", "location", "numel")

    def __init__(self, key, stype, location, numel):
        self.key, self.stype, self.location, self.numel = key, stype, location, numel


class _TensorRec(_Inert):
    __slots__ = ("storage", "offset", "size", "stride", "dtype", "metadata")

    def __init__(self, storage, offset, size, stride, dtype, metadata):
        self.storage, self.offset, self.size, self.stride = storage, offset, size, stride
        self.dtype, self.metadata = dtype, metadata


class _Builder(_Inert):
    """A callable standing for an allowlisted global; calls only ``fn`` (pt2x's own)."""

    __slots__ = ("fn", "qualname")

    def __init__(self, fn, qualname):
        self.fn, self.qualname = fn, qualname

    def __call__(self, *args):
        return self.fn(*args)

    def __repr__(self):
        return f"<pt2x builder for {self.qualname}>"


# ---------------------------------------------------------------------------------------
# builder functions (pure: validate and return records or plain data)


def _is_int(x) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _int_tuple(x, what) -> tuple[int, ...]:
    if not isinstance(x, (tuple, list)):
        raise TensorDataError(f"{what} must be a tuple of ints, got {brief_repr(x)}")
    if len(x) > limits.MAX_TENSOR_RANK:  # before looking at the items: x may be huge
        raise LimitExceededError(f"tensor rank {len(x)} exceeds MAX_TENSOR_RANK={limits.MAX_TENSOR_RANK}")
    if not all(_is_int(v) for v in x):
        raise TensorDataError(f"{what} must be a tuple of ints, got {brief_repr(x)}")
    return tuple(x)


def _tensor(storage, offset, size, stride, requires_grad, hooks, dtype, metadata) -> _TensorRec:
    if not isinstance(storage, _Storage):
        raise TensorDataError(f"tensor storage must be a persistent storage reference, got {type(storage).__name__}")
    if not _is_int(offset):
        raise TensorDataError(f"storage_offset must be an int, got {brief_repr(offset)}")
    size = _int_tuple(size, "size")
    stride = _int_tuple(stride, "stride")
    if not isinstance(requires_grad, bool):
        raise TensorDataError(f"requires_grad must be a bool, got {brief_repr(requires_grad)}")
    if hooks is not None and not isinstance(hooks, dict):
        raise TensorDataError("backward_hooks must be a dict")
    if metadata is not None and not isinstance(metadata, dict):
        raise TensorDataError("tensor metadata must be a dict")
    if dtype is None:
        dtype = storage.stype.dtype or "uint8"  # UntypedStorage under v2: bytes, as torch
    return _TensorRec(storage, offset, size, stride, dtype, metadata or None)


def _rebuild_tensor_v2(storage, offset, size, stride, requires_grad, hooks, metadata=None):
    return _tensor(storage, offset, size, stride, requires_grad, hooks, None, metadata)


def _rebuild_tensor_v3(storage, offset, size, stride, requires_grad, hooks, dtype, metadata=None):
    if not isinstance(dtype, TorchDtype):
        raise TensorDataError(f"_rebuild_tensor_v3 dtype must be a torch dtype, got {brief_repr(dtype)}")
    return _tensor(storage, offset, size, stride, requires_grad, hooks, dtype.name, metadata)


def _rebuild_parameter(data, requires_grad, hooks, state=None):
    if not isinstance(data, _TensorRec):
        raise TensorDataError("_rebuild_parameter data must be a tensor")
    if not isinstance(requires_grad, bool):
        raise TensorDataError("_rebuild_parameter requires_grad must be a bool")
    return data  # a Parameter is its data here; python attributes (state) are dropped


def _rebuild_from_type_v2(func, new_type, args, state):
    if not (isinstance(func, _Builder) and func.fn in _TENSOR_BUILDERS):
        raise UnsafeContentError(f"_rebuild_from_type_v2 with non-tensor function {brief_repr(func)}")
    if not (isinstance(new_type, _TypeMarker) and new_type.name in _TENSOR_TYPES):
        raise UnsafeContentError(f"_rebuild_from_type_v2 to refused type {brief_repr(new_type)}")
    if not isinstance(args, tuple) or len(args) > 8:
        raise TensorDataError("_rebuild_from_type_v2 args must be a tuple of a tensor builder's arguments")
    return func(*args)  # state (python attributes on the tensor) is dropped


def _ordered_dict(items=()):
    out = {}
    for k, v in list(items.items() if isinstance(items, dict) else items):
        out[k] = v
    return out


def _size(dims=()):
    return _int_tuple(tuple(dims), "torch.Size")


def _device(spec, index=None):
    if not isinstance(spec, str) or (index is not None and not _is_int(index)):
        raise TensorDataError(f"bad torch.device arguments {brief_repr(spec)}, {brief_repr(index)}")
    return TorchDevice(spec if index is None else f"{spec}:{index}")


def _codecs_encode(text, encoding="utf-8"):
    # protocol 2 pickles bytes as _codecs.encode(str, 'latin1')
    if not isinstance(text, str) or encoding not in ("latin1", "latin-1"):
        raise UnsafeContentError(f"refused _codecs.encode with encoding {brief_repr(encoding)}")
    return text.encode("latin-1")


def _set(items=()):
    return set(list(items))


def _frozenset(items=()):
    return frozenset(list(items))


def _complex(re_=0.0, im=0.0):
    if not all(isinstance(x, (int, float)) for x in (re_, im)):
        raise TensorDataError("complex() needs numbers")
    return complex(re_, im)


def _bytearray(data=b""):
    if not isinstance(data, (bytes, bytearray)):
        raise TensorDataError("bytearray() needs bytes")
    return bytearray(data)


_TENSOR_BUILDERS = (_rebuild_tensor_v2, _rebuild_tensor_v3, _rebuild_parameter)
_TENSOR_TYPES = ("torch.Tensor", "torch.nn.parameter.Parameter", "torch.nn.parameter.Buffer")


def _make_allowlist() -> dict[tuple[str, str], Any]:
    table: dict[tuple[str, str], Any] = {}
    for mod, name, fn in [
        ("torch._utils", "_rebuild_tensor_v2", _rebuild_tensor_v2),
        ("torch._utils", "_rebuild_tensor_v3", _rebuild_tensor_v3),
        ("torch._utils", "_rebuild_parameter", _rebuild_parameter),
        ("torch._utils", "_rebuild_parameter_with_state", _rebuild_parameter),
        ("torch._tensor", "_rebuild_from_type_v2", _rebuild_from_type_v2),
        ("collections", "OrderedDict", _ordered_dict),
        ("torch", "Size", _size),
        ("torch", "device", _device),
        ("_codecs", "encode", _codecs_encode),
        ("builtins", "set", _set),
        ("builtins", "frozenset", _frozenset),
        ("builtins", "complex", _complex),
        ("builtins", "bytearray", _bytearray),
        # protocol 2 (torch.save's default) writes builtins under their Python 2 name
        ("__builtin__", "set", _set),
        ("__builtin__", "frozenset", _frozenset),
        ("__builtin__", "complex", _complex),
        ("__builtin__", "bytearray", _bytearray),
    ]:
        table[(mod, name)] = _Builder(fn, f"{mod}.{name}")
    for sname, dname in _storage_dtypes().items():
        table[("torch", sname)] = _StorageType(sname, dname)
    for mod in ("torch", "torch.storage"):
        table[(mod, "UntypedStorage")] = _StorageType("UntypedStorage", None)
    for dname in (*(r.torch_name for r in dtypes.ROWS), *dtypes.TORCH_ONLY_DTYPES):
        table[("torch", dname)] = TorchDtype(dname)
    for qual in _TENSOR_TYPES:
        mod, _, name = qual.rpartition(".")
        table[(mod, name)] = _TypeMarker(qual)
    return table


_ALLOWED = _make_allowlist()

# ---------------------------------------------------------------------------------------
# the unpickler

_KEY_RE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.\-]{0,200}")


class _Unpickler(pickle.Unpickler):
    def __init__(self, data, where, inner):
        super().__init__(io.BytesIO(data), fix_imports=False, encoding="utf-8", errors="strict")
        self._where, self._inner = where, inner

    def find_class(self, module, name):
        obj = _ALLOWED.get((module, name))
        if obj is None:
            raise UnsafeContentError(f"refused global '{module}.{name}'", member=self._where, path=self._inner)
        return obj

    def persistent_load(self, pid):
        if not (isinstance(pid, tuple) and len(pid) == 5 and pid[0] == "storage"):
            raise TensorDataError(f"unsupported persistent id {brief_repr(pid)}", member=self._where, path=self._inner)
        _, stype, key, location, numel = pid
        if not isinstance(stype, _StorageType):
            raise UnsafeContentError(f"persistent id storage type is not a storage class: {brief_repr(stype)}",
                                     member=self._where, path=self._inner)
        if not (isinstance(key, str) and _KEY_RE.fullmatch(key) and key not in (".", "..")):
            raise TensorDataError(f"bad storage key {brief_repr(key)}", member=self._where, path=self._inner)
        if not isinstance(location, str) or not _is_int(numel) or numel < 0:
            raise TensorDataError(f"bad storage location/numel in {brief_repr(pid)}", member=self._where, path=self._inner)
        if stype.dtype is not None and not _readable(stype.dtype):
            raise TensorDataError(f"storage type {stype.name} ({stype.dtype}) not supported",
                                  member=self._where, path=self._inner)
        return _Storage(key, stype, location, numel)


class _Cell:
    """A value on the emulated unpickler stack: ``w`` bounds the elements a hash or copy of
    it visits (containers grow in place, so memo references see later appends)."""

    __slots__ = ("w",)

    def __init__(self, w: int):
        self.w = w


_ONE = _Cell(1)  # shared by immutable scalars; containers (which grow) get their own cells


class _Scan:
    """Walks a pickle's opcodes (``pickletools.genops``: nothing is built or called) and
    emulates the unpickler's stack with ``_Cell`` weights, refusing before the real
    unpickler runs: unknown globals and extension codes, more than ``MAX_PICKLE_OPS``
    opcodes, memo indices past the opcode count (the C unpickler sizes its memo array by
    the largest index: ``LONG_BINPUT 2**31`` alone asks for 32 GiB), and more hashing or
    copying than ``MAX_PICKLE_WORK_PER_BYTE`` per byte (dict keys, set items, builder
    arguments: a few KB of memo references can stand for a tuple whose hash never ends).
    """

    def __init__(self, data: bytes, where, inner):
        self.where, self.inner = where, inner
        self.stack: list[_Cell] = []
        self.marks: list[int] = []
        self.memo: dict[int, _Cell] = {}
        self.budget = limits.MAX_PICKLE_WORK_PER_BYTE * max(len(data), 1024)
        self.cap = self.budget + 1  # weights saturate here: past it, any use is refused anyway
        self.work = 0
        self.pos = 0
        self.n_ops = 0

    def run(self, data: bytes) -> None:
        """Scan the whole stream; raises a pt2x error at the first refusal."""
        handlers, max_ops = _SCAN_HANDLERS, limits.MAX_PICKLE_OPS
        n = 0
        for op, arg, pos in pickletools.genops(data):
            n += 1
            self.pos, self.n_ops = pos, n
            if n > max_ops:
                raise self.fail(f"pickle has more than MAX_PICKLE_OPS={max_ops} opcodes", LimitExceededError)
            handler = handlers.get(op.name)
            if handler is None:
                raise self.fail(f"unsupported pickle opcode {op.name}", UnsafeContentError)
            handler(self, arg)
            if len(self.stack) > limits.MAX_PICKLE_STACK:
                raise self.fail(f"pickle keeps more than MAX_PICKLE_STACK={limits.MAX_PICKLE_STACK} values on its "
                                "stack", LimitExceededError)

    def fail(self, msg, exc=TensorDataError):
        return exc(f"{msg} at offset {self.pos}", member=self.where, path=self.inner)

    # stack primitives. Mark fences are not enforced: a stream that pops below a MARK is
    # refused by the unpickler itself, and on any stream it accepts the emulation is exact.

    def pop_mark(self) -> list[_Cell]:
        if not self.marks:
            raise self.fail("malformed pickle: no MARK")
        at = self.marks.pop()
        items = self.stack[at:]
        del self.stack[at:]
        return items

    def push(self, w: int) -> None:
        self.stack.append(_Cell(w if w < self.cap else self.cap))

    def charge(self, w: int, what: str) -> None:
        self.work += w
        if self.work > self.budget:
            raise self.fail(f"{what} makes the unpickler hash or copy more than MAX_PICKLE_WORK_PER_BYTE="
                            f"{limits.MAX_PICKLE_WORK_PER_BYTE} elements per byte of the pickle", LimitExceededError)

    def grow(self, w: int) -> None:
        """The container on top of the stack now holds ``w`` more (shared cells are replaced)."""
        target = self.stack[-1]
        if target is _ONE:
            target = self.stack[-1] = _Cell(1)
        target.w = min(target.w + w, self.cap)

    # opcode effects (one per family)

    def leaf(self, arg) -> None:  # None, bools, floats: weight 1
        self.stack.append(_ONE)

    def container(self, arg) -> None:  # EMPTY_LIST/DICT/SET: a cell of its own, it grows
        self.stack.append(_Cell(1))

    def leaf_int(self, arg) -> None:  # an int's hash reads all its digits
        if type(arg) is int and arg.bit_length() >= 64:
            self.stack.append(_Cell(1 + (arg.bit_length() >> 6)))
        else:
            self.stack.append(_ONE)

    def leaf_str(self, arg) -> None:  # str/bytes: copied whole when a builder takes them
        self.push(1 + len(arg))

    def global_(self, arg) -> None:
        mod, _, qual = arg.partition(" ")
        if (mod, qual) not in _ALLOWED:
            raise self.fail(f"refused global '{mod}.{qual}'", UnsafeContentError)
        self.stack.append(_ONE)

    def mark(self, arg) -> None:
        self.marks.append(len(self.stack))

    def tuple_n(self, n: int) -> None:
        pop = self.stack.pop
        w = 1
        for _ in range(n):
            w += pop().w
        self.push(w)

    def from_mark(self, kind: str) -> None:  # TUPLE, LIST, DICT, FROZENSET
        items = self.pop_mark()
        w = 0
        for c in items:
            w += c.w
        if kind == "DICT":
            self.charge(sum([c.w for c in items[::2]]), "DICT keys")
        elif kind == "FROZENSET":
            self.charge(w, "FROZENSET items")
        self.push(1 + w)

    def add_to(self, kind: str) -> None:  # APPEND(S), SETITEM(S), ADDITEMS: the container stays
        if kind.endswith("S"):
            items = self.pop_mark()
        else:
            pop = self.stack.pop
            items = [pop()] if kind == "APPEND" else [pop(), pop()][::-1]
        w = sum([c.w for c in items])
        if kind.startswith("SETITEM"):
            self.charge(sum([c.w for c in items[::2]]), f"{kind} keys")
        elif kind == "ADDITEMS":
            self.charge(w, "ADDITEMS items")
        self.grow(w)

    def reduce(self, arg) -> None:  # callable, args -> result: the arguments are copied
        pop = self.stack.pop
        w = pop().w
        pop()
        self.charge(w, "REDUCE arguments")
        self.push(1 + w)

    def call(self, kind: str) -> None:  # NEWOBJ(_EX), OBJ, INST, BUILD: like REDUCE
        if kind in ("OBJ", "INST"):
            args = self.pop_mark()
        else:
            pop = self.stack.pop
            args = [pop()] if kind != "NEWOBJ_EX" else [pop(), pop()]
        w = sum([c.w for c in args])
        self.charge(w, f"{kind} arguments")
        if kind == "BUILD":
            self.grow(w)
            return
        if kind not in ("OBJ", "INST"):
            self.stack.pop()  # the class
        self.push(1 + w)

    def inst(self, arg) -> None:  # INST names its class inline, then calls it like OBJ
        mod, _, qual = arg.partition(" ")
        if (mod, qual) not in _ALLOWED:
            raise self.fail(f"refused global '{mod}.{qual}'", UnsafeContentError)
        self.call("INST")

    def get(self, arg) -> None:
        cell = self.memo.get(arg)
        if cell is None:
            raise self.fail(f"malformed pickle: memo key {brief_repr(arg)} undefined")
        self.stack.append(cell)

    def put(self, arg) -> None:
        if arg is None:  # MEMOIZE
            arg = len(self.memo)
        elif type(arg) is not int or not 0 <= arg <= self.n_ops:
            raise self.fail(f"memo index {brief_repr(arg)} past the {self.n_ops} opcodes read so far",
                            LimitExceededError)
        self.memo[arg] = self.stack[-1]
        if len(self.memo) > limits.MAX_PICKLE_MEMO:
            raise self.fail(f"pickle memoizes more than MAX_PICKLE_MEMO={limits.MAX_PICKLE_MEMO} values",
                            LimitExceededError)

    def dup(self, arg) -> None:
        self.stack.append(self.stack[-1])

    def pop_op(self, arg) -> None:
        if self.marks and self.marks[-1] == len(self.stack):
            self.marks.pop()  # POP of a MARK
        else:
            self.stack.pop()

    def replace(self, n_popped: int) -> None:  # STACK_GLOBAL, BINPERSID: pop n, push an opaque value
        for _ in range(n_popped):
            self.stack.pop()
        self.stack.append(_ONE)

    def refuse_ext(self, arg) -> None:
        raise self.fail(f"refused extension-registry code {arg}", UnsafeContentError)


def _scan_handlers() -> dict[str, Callable[[_Scan, Any], None]]:
    """Opcode name -> its effect on the emulated stack. An opcode not here is refused."""
    table: dict[str, Callable[[_Scan, Any], None]] = {}
    for name in "NONE NEWTRUE NEWFALSE FLOAT BINFLOAT EMPTY_TUPLE NEXT_BUFFER".split():
        table[name] = _Scan.leaf
    for name in "EMPTY_LIST EMPTY_DICT EMPTY_SET".split():
        table[name] = _Scan.container
    for name in "INT BININT BININT1 BININT2 LONG LONG1 LONG4".split():
        table[name] = _Scan.leaf_int
    for name in ("PERSID STRING BINSTRING SHORT_BINSTRING BINBYTES SHORT_BINBYTES BINBYTES8 BYTEARRAY8 "
                 "UNICODE BINUNICODE SHORT_BINUNICODE BINUNICODE8").split():
        table[name] = _Scan.leaf_str
    table["GLOBAL"] = _Scan.global_
    table["MARK"] = _Scan.mark
    for n in (1, 2, 3):
        table[f"TUPLE{n}"] = lambda s, arg, n=n: s.tuple_n(n)
    for name in ("TUPLE", "LIST", "DICT", "FROZENSET"):
        table[name] = lambda s, arg, name=name: s.from_mark(name)
    for name in ("APPEND", "APPENDS", "SETITEM", "SETITEMS", "ADDITEMS"):
        table[name] = lambda s, arg, name=name: s.add_to(name)
    table["REDUCE"] = _Scan.reduce
    for name in ("NEWOBJ", "NEWOBJ_EX", "BUILD", "OBJ"):
        table[name] = lambda s, arg, name=name: s.call(name)
    table["INST"] = _Scan.inst
    for name in ("GET", "BINGET", "LONG_BINGET"):
        table[name] = _Scan.get
    for name in ("PUT", "BINPUT", "LONG_BINPUT", "MEMOIZE"):
        table[name] = _Scan.put
    table["DUP"] = _Scan.dup
    table["POP"] = _Scan.pop_op
    table["POP_MARK"] = lambda s, arg: s.pop_mark()
    table["STACK_GLOBAL"] = lambda s, arg: s.replace(2)
    table["BINPERSID"] = lambda s, arg: s.replace(1)
    table["STOP"] = lambda s, arg: s.stack.pop()
    for name in ("PROTO", "FRAME", "READONLY_BUFFER"):
        table[name] = lambda s, arg: None
    for name in ("EXT1", "EXT2", "EXT4"):
        table[name] = _Scan.refuse_ext
    return table


_SCAN_HANDLERS = _scan_handlers()


def _prescan(data: bytes, where, inner) -> None:
    """Check a pickle without executing anything (see ``_Scan``)."""
    try:
        _Scan(data, where, inner).run(data)
    except Pt2Error:
        raise
    except Exception as e:  # malformed stream
        raise TensorDataError(f"malformed pickle: {e}", member=where, path=inner) from None


def _unpickle(data, where, inner):
    data = bytes(data)
    _prescan(data, where, inner)
    try:
        return _Unpickler(data, where, inner).load()
    except Pt2FormatError as e:
        if e.member is None and e.path is None:
            raise type(e)(e.reason, member=where, path=inner) from None
        raise
    except Exception as e:  # TypeError from a bad call, UnpicklingError, ...
        raise TensorDataError(f"malformed tensor pickle: {type(e).__name__}: {e}", member=where, path=inner) from None


# ---------------------------------------------------------------------------------------
# materializing records into arrays


class _Materializer:
    """Turns the records of one unpickled ``torch.save`` zip into numpy arrays.

    Each tensor's sizes, strides and offset pass ``tensor_view.check_view`` against its
    storage's byte count before numpy sees them (the same check as the raw layout of
    torch >= 2.10), with one ``ViewBudget`` for the whole member: an expanded view stays a
    strided view of the storage, and what it claims beyond the storage counts against
    ``MAX_AMPLIFIED_BYTES``. Torch's neg/conj bits are applied to a copy of only the
    storage span the view reads (charged to the same budget), then strided like the view,
    so a stride-0 view is never materialised whole.
    """

    def __init__(self, open_member, root, where, writable):
        self.open_member, self.root, self.where, self.writable = open_member, root, where, writable
        self._raw: dict[str, Any] = {}
        self._bases: dict[tuple[str, str], np.ndarray] = {}
        self._done: dict[int, tuple[Any, Any]] = {}  # id -> (value, converted), for shared values
        self.budget = ViewBudget()
        self.big_endian = self._byteorder() == "big"

    def _read(self, name):
        full = f"{self.root}{name}"
        try:
            return self.open_member(full)
        except (KeyError, FileNotFoundError) as e:
            raise TensorDataError(f"missing member {full!r}", member=self.where) from e

    def _byteorder(self):
        try:
            raw = self.open_member(f"{self.root}byteorder")
        except (KeyError, FileNotFoundError):
            return "little"  # torch writes it since 1.13; older files are little-endian
        order = bytes(raw[:16]).decode("ascii", "replace").strip()
        if order not in ("little", "big"):
            raise TensorDataError(f"unknown byteorder {brief_repr(order)}", member=self.where, path=f"{self.root}byteorder")
        return order

    def _raw_bytes(self, st: _Storage):
        """The storage's bytes (read once per key), checked against its declared numel."""
        buf = self._raw.get(st.key)
        if buf is None:
            buf = self._read(f"data/{st.key}")
            if self.writable:
                buf = bytearray(buf)
            elif not isinstance(buf, memoryview):
                buf = memoryview(buf)
            self._raw[st.key] = buf
        nbytes = len(buf) if not isinstance(buf, memoryview) else buf.nbytes
        item = dtypes.by_torch_name(st.stype.dtype).itemsize if st.stype.dtype else 1
        if nbytes != st.numel * item:
            raise TensorDataError(
                f"storage {st.key!r}: {nbytes} bytes, expected numel {brief_repr(st.numel)} x {item}",
                member=self.where, path=f"{self.root}data/{st.key}")
        return buf

    def _base(self, st: _Storage, dt: np.dtype) -> np.ndarray:
        """The whole storage as a flat array of ``dt`` (native byte order), once per (key, dtype)."""
        key = (st.key, dt.str + repr(dt))
        base = self._bases.get(key)
        if base is None:
            base = np.frombuffer(self._raw[st.key], dtype=dt)
            if self.big_endian and dt.itemsize > 1:
                unit = dt.itemsize // 2 if dt.kind == "c" else dt.itemsize
                base = base.view(np.dtype(f"u{unit}")).byteswap().view(dt)  # a fresh copy
                if not self.writable:
                    base.flags.writeable = False
            self._bases[key] = base
        return base

    def tensor(self, rec: _TensorRec, label: str) -> np.ndarray:
        """The array for one record; any failure is a pt2x error naming the member and ``label``."""
        try:
            return self._tensor(rec, label)
        except Pt2FormatError as e:
            if e.member is None and e.path is None:
                raise type(e)(e.reason, member=self.where, path=label) from None
            raise
        except Pt2Error:
            raise
        except Exception as e:  # numpy/ml_dtypes refusing something the checks let through
            raise TensorDataError(f"cannot read tensor: {type(e).__name__}: {e}", member=self.where, path=label) from None

    def _tensor(self, rec: _TensorRec, label: str) -> np.ndarray:
        where, path = self.where, label
        dt = _np_dtype(rec.dtype)
        neg, conj = _flags(rec.metadata, where, path)
        buf = self._raw_bytes(rec.storage)
        nbytes = len(buf) if not isinstance(buf, memoryview) else buf.nbytes
        if nbytes % dt.itemsize:
            raise TensorDataError(f"storage {rec.storage.key!r}: {nbytes} bytes is not a multiple of {dt} item size "
                                  f"{dt.itemsize}", member=where, path=f"{self.root}data/{rec.storage.key}")
        size, stride, offset = rec.size, rec.stride, rec.offset
        numel = check_view(size, stride, offset, nbytes // dt.itemsize, dt.itemsize,
                           member=where, path=path, budget=self.budget)
        # numpy from here on, over sizes/strides/offset that are known to fit
        base = self._base(rec.storage, dt)
        end = offset + sum((n - 1) * s for n, s in zip(size, stride)) + 1 if numel else offset
        span = base[offset:end]
        if neg or (conj and dt.kind == "c"):
            self.budget.charge(span.nbytes, "copy to apply the neg/conj bit", member=where, path=path)
            span = np.negative(span) if neg else span
            span = np.conj(span) if conj and dt.kind == "c" else span
            if not self.writable:
                span.flags.writeable = False
        # as_strided goes through __array_interface__, which loses ml_dtypes' types:
        # stride a same-size opaque view, then view it back as the real dtype.
        return np.lib.stride_tricks.as_strided(
            span.view(np.dtype(f"V{dt.itemsize}")), shape=size, strides=tuple(s * dt.itemsize for s in stride),
            writeable=self.writable and span.flags.writeable,
        ).view(dt)

    def tree(self, obj, label="", depth=0):
        """Records in a value tree -> arrays; shared values are converted once (and stay shared)."""
        if depth > limits.MAX_PICKLE_DEPTH:
            raise LimitExceededError(f"pickled value nested deeper than MAX_PICKLE_DEPTH={limits.MAX_PICKLE_DEPTH}",
                                     member=self.where, path=label or None)
        if isinstance(obj, (_TensorRec, tuple, list, dict, set, frozenset)):
            done = self._done.get(id(obj))
            if done is None:
                done = self._done[id(obj)] = (obj, self._convert(obj, label, depth))  # obj kept: ids stay unique
            return done[1]
        if isinstance(obj, (_Storage, _Builder, _StorageType, _TypeMarker)):
            raise TensorDataError(f"unsupported pickled value {type(obj).__name__}", member=self.where, path=label or None)
        return obj  # None, bool, int, float, complex, str, bytes, bytearray, TorchDtype, TorchDevice

    def _convert(self, obj, label, depth):
        if isinstance(obj, _TensorRec):
            return self.tensor(obj, label)
        if isinstance(obj, tuple):
            return tuple(self.tree(v, f"{label}[{i}]", depth + 1) for i, v in enumerate(obj))
        if isinstance(obj, list):
            return [self.tree(v, f"{label}[{i}]", depth + 1) for i, v in enumerate(obj)]
        if isinstance(obj, dict):
            if any(isinstance(k, (_TensorRec, _Storage, _Builder, _StorageType, _TypeMarker)) for k in obj):
                raise TensorDataError("tensors as dict keys are not supported", member=self.where, path=label or None)
            return {k: self.tree(v, f"{label}[{brief_repr(k)}]", depth + 1) for k, v in obj.items()}
        items = [self.tree(v, label, depth + 1) for v in obj]  # set, frozenset
        if any(isinstance(v, np.ndarray) for v in items):
            raise TensorDataError("sets of tensors are not supported (arrays are not hashable)",
                                  member=self.where, path=label or None)
        return type(obj)(items)


def _flags(metadata, where, path) -> tuple[bool, bool]:
    """(neg, conj) from a tensor's pickled metadata dict; other keys are refused."""
    if not metadata:
        return False, False
    unknown = set(metadata) - {"conj", "neg"}
    if unknown:
        raise TensorDataError(f"unsupported tensor metadata {brief_repr(sorted(map(str, unknown)))}", member=where, path=path)
    return bool(metadata.get("neg")), bool(metadata.get("conj"))


# ---------------------------------------------------------------------------------------
# public API


def _root_of(member: str) -> str:
    if not member.endswith("data.pkl"):
        raise TensorDataError(f"{member!r} is not a torch.save data.pkl")
    return member[: -len("data.pkl")]


def load_pickle(open_member: Callable[[str], bytes | memoryview], member: str, *,
                where: str | None = None, writable: bool = False) -> Any:
    """Read any ``torch.save`` pickle tree (e.g. sample inputs) without running it.

    ``open_member(name)`` returns the bytes of a member of the torch.save zip (raising
    KeyError/FileNotFoundError when absent); ``member`` is the pickle's name in it, e.g.
    ``'archive/data.pkl'``: storages are read from ``'archive/data/<key>'``. ``where`` names
    the outer archive member for error messages. Tensors become numpy arrays (read-only
    views of the storage bytes unless ``writable``); tuples/lists/dicts/scalars stay.
    """
    root = _root_of(member)
    try:
        data = open_member(member)
    except (KeyError, FileNotFoundError) as e:
        raise TensorDataError(f"missing member {member!r}", member=where) from e
    obj = _unpickle(data, where, member)
    return _Materializer(open_member, root, where, writable).tree(obj)


def read_tensor_pickle(open_member: Callable[[str], bytes | memoryview], member: str, *,
                       where: str | None = None, writable: bool = False) -> dict[str, np.ndarray]:
    """Read a ``torch.save``'d state dict ``{name: tensor}`` into ``{name: np.ndarray}``.

    Same arguments as ``load_pickle``. Arrays carry torch's shape and strides
    (``strides == stride_in_elements * itemsize``); tensors that share a storage are views
    of one buffer. Anything but a dict of str -> tensor is a ``TensorDataError``.
    """
    root = _root_of(member)
    try:
        data = open_member(member)
    except (KeyError, FileNotFoundError) as e:
        raise TensorDataError(f"missing member {member!r}", member=where) from e
    obj = _unpickle(data, where, member)
    if not isinstance(obj, dict):
        raise TensorDataError(f"expected a dict of tensors, got {type(obj).__name__}", member=where, path=member)
    mat = _Materializer(open_member, root, where, writable)
    out = {}
    for k, v in obj.items():
        if not isinstance(k, str) or not isinstance(v, _TensorRec):
            raise TensorDataError(f"entry {brief_repr(k)} is not a str -> tensor pair", member=where, path=member)
        out[k] = mat.tensor(v, f"{member}[{k!r}]")
    return out


def find_data_pkl(names: Iterable[str]) -> str:
    """The ``<root>/data.pkl`` member among a torch.save zip's ``names``."""
    found = [n for n in names if n.endswith("/data.pkl") and n.count("/") == 1]
    if len(found) != 1:
        raise TensorDataError(f"expected one '<root>/data.pkl' in a torch.save archive, found {len(found)}")
    return found[0]


def read_torch_save(data: bytes | memoryview, *, where: str | None = None, writable: bool = False,
                    tree: bool = False) -> Any:
    """Open a whole ``torch.save`` zip held in memory and read it (state dict by default,
    any tree with ``tree=True``). Convenience for callers without their own zip reader."""
    try:
        zf = zipfile.ZipFile(io.BytesIO(data))
        infos = {i.filename: i for i in zf.infolist()}
    except Exception as e:  # BadZipFile, struct.error, ValueError, ... from a hostile directory
        raise TensorDataError(f"not a torch.save zip: {type(e).__name__}: {e}", member=where) from None

    def open_member(name):
        info = infos[name]
        if info.file_size > limits.MAX_UNCOMPRESSED_MEMBER or (
            info.compress_type != zipfile.ZIP_STORED
            and info.file_size > max(info.compress_size, 1) * limits.MAX_COMPRESSION_RATIO
        ):
            raise LimitExceededError(f"member {name!r} inflates past the limits", member=where)
        try:
            return zf.read(info)
        except Exception as e:  # BadZipFile, zlib.error, EOFError, NotImplementedError, RuntimeError, ...
            raise TensorDataError(f"cannot read {name!r}: {type(e).__name__}: {e}", member=where) from None

    pkl = find_data_pkl(infos)
    fn = load_pickle if tree else read_tensor_pickle
    return fn(open_member, pkl, where=where, writable=writable)


def pickle_globals(data: bytes | memoryview, *, every_pickle: bool = False) -> list[str]:
    """``module.name`` of every global a pickle references, in first-use order, found by
    scanning opcodes (nothing is executed). STACK_GLOBAL names are recovered from the
    string opcodes and memo that precede it. Raises ``TensorDataError`` on a bad stream.

    ``every_pickle``: read pickles one after another to the end of ``data``, as torch's
    legacy (non-zip) ``torch.load`` does; bytes after a STOP that are not a pickle are then
    a bad stream, so whatever a loader would unpickle there is never left unscanned."""
    seen: dict[str, None] = {}
    stream = io.BytesIO(bytes(data))
    size = len(stream.getbuffer())
    ops = 0
    try:
        while True:
            ops = _scan_globals(stream, seen, ops)
            if not every_pickle or stream.tell() >= size:
                break
    except Pt2Error:
        raise
    except Exception as e:
        raise TensorDataError(f"malformed pickle at byte {stream.tell()}: {e}") from None
    return list(seen)


_STRING_OPS = frozenset({"SHORT_BINUNICODE", "BINUNICODE", "BINUNICODE8", "UNICODE", "STRING", "BINSTRING",
                         "SHORT_BINSTRING"})
_MEMO_GETS = frozenset({"BINGET", "LONG_BINGET", "GET"})
_MEMO_PUTS = frozenset({"BINPUT", "LONG_BINPUT", "PUT", "MEMOIZE"})
_GLOBAL_OPS = frozenset({"GLOBAL", "INST", "STACK_GLOBAL", "EXT1", "EXT2", "EXT4"})


def _scan_globals(stream: io.BytesIO, seen: dict[str, None], ops: int) -> int:
    """One pickle of ``stream`` (up to its STOP): its globals added to ``seen``; the opcode count.

    Only the last two pushed strings matter (STACK_GLOBAL's module and name), so they are
    kept in two variables; any other opcode pushes an unknown."""
    prev = last = None  # the two most recent pushes, when they were strings (else None)
    memo: dict[Any, Any] = {}
    max_ops = limits.MAX_PICKLE_OPS
    for op, arg, _pos in pickletools.genops(stream):
        ops += 1
        if ops > max_ops:
            raise LimitExceededError("pickle has more than MAX_PICKLE_OPS opcodes")
        name = op.name
        if name in _STRING_OPS:
            prev, last = last, arg
        elif name in _MEMO_GETS:
            prev, last = last, memo.get(arg)
        elif name in _MEMO_PUTS:
            memo[len(memo) if name == "MEMOIZE" else arg] = last
        elif name in _GLOBAL_OPS:
            if name == "STACK_GLOBAL":
                ok = isinstance(prev, str) and isinstance(last, str)
                seen[f"{prev}.{last}" if ok else "<dynamic>"] = None
            elif name in ("GLOBAL", "INST"):
                seen[arg.replace(" ", ".", 1)] = None
            else:
                seen[f"<extension code {arg}>"] = None
            prev, last = last, None
        else:
            prev, last = last, None
    return ops


def describe_globals(names: list[str]) -> str:
    """One line naming what a pickle would import if loaded (its globals, from ``pickle_globals``)."""
    if not names:
        return "pickle referencing no globals"
    refused = [n for n in names if tuple(n.rsplit(".", 1)) not in _ALLOWED]
    text = "pickle referencing " + ", ".join(names)
    if refused:
        text += f"; outside pt2x's allowlist: {', '.join(refused)}"
    return text


def describe_pickle(data: bytes | memoryview) -> str:
    """One line naming what a pickle would import if loaded, for "not loaded" reports."""
    try:
        return describe_globals(pickle_globals(data))
    except Pt2Error as e:
        return f"unreadable pickle ({e.reason})"
