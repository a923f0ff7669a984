"""The inputs a verification runs on: the archive's sample inputs, inputs drawn from the program's
signature, or the user's ``.npz``; each an ``InputSet`` of flat values in the program's input order.

* ``slots(view)``: every user input of the program: name, kind (``tensor`` or ``constant``),
  dtype (numpy's name) and dims (ints, or symbolic expressions over the shape symbols).
* ``sample_inputs(model, slots)``: the archive's pickled sample inputs, read through pt2x's
  data-only unpickler (nothing in the file runs); None when the archive has none. Sample inputs
  that do not fit the signature are a ``VerificationError``.
* ``draw_inputs(view, slots, seed)``: two sets: the sizes the program was exported with (each
  symbol's hint) and, when the program has dynamic dims, other sizes drawn inside every range
  constraint. Floats are standard normal; integers that index a tensor (embedding, gather,
  index_select, index) stay inside the indexed dim; other integers lie in [0, 8); booleans are
  fair coins. The seed is the caller's (printed in the report).
* ``read_npz(path, slots)``: the user's inputs, one array per tensor input, by name or
  ``arr_0, arr_1, ...`` in order; a missing, extra, mistyped or misshapen array is refused naming it.
  The member names, then each member's ``.npy`` header (dtype, shape, the bytes it declares
  against the member's size) are checked before any data is inflated or allocated.

Drawn and read sets are bounded by ``limits.MAX_INPUT_BYTES`` before they are allocated.
"""

from __future__ import annotations

import zipfile
import zlib
from dataclasses import dataclass

import numpy as np

from ..converters.aten.graph import ProgramView
from ..schema import definitions as d
from ..schema import dtypes as dtype_table
from ..serde.codec.symbolic import Symbol
from ..serde.errors import Pt2Error
from .errors import VerificationError
from .limits import MAX_INPUT_BYTES, MAX_NPY_HEADER_BYTES

__all__ = ["Slot", "InputSet", "slots", "sample_inputs", "draw_inputs", "read_npz", "checked_array", "check_ranges",
           "DEFAULT_SEED"]

DEFAULT_SEED = 0
_INT_HIGH = 8  # integers that index nothing are drawn in [0, _INT_HIGH)
_SECOND_SIZE_STEP = (1, 5)  # the second set's symbols: hint + a step drawn in this range, clamped


@dataclass(frozen=True)
class Slot:
    name: str
    kind: str  # "tensor" | "constant" (a value baked into the program)
    dtype: str = ""  # numpy dtype name (``bfloat16`` from ml_dtypes)
    dims: tuple = ()  # int or Expr per axis
    value: object = None  # the constant


@dataclass(frozen=True)
class InputSet:
    label: str  # "sample", "drawn (export sizes)", "drawn (other sizes)", "file"
    values: tuple  # one per slot

    @property
    def tensors(self) -> list[np.ndarray]:
        return [v for v in self.values if isinstance(v, np.ndarray)]

    def shapes(self) -> list[list[int]]:
        return [list(v.shape) for v in self.tensors]


def _numpy_dtype(st) -> str:
    row = dtype_table.row(st)
    if row.numpy_name is None:
        raise VerificationError(f"dtype {row.torch_name} has no numpy type: pt2x cannot make inputs of it")
    return row.numpy_name


def _np(name: str) -> np.dtype:
    if name == "bfloat16":
        import ml_dtypes

        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(name)


def slots(view: ProgramView) -> list[Slot]:
    out = []
    for u in view.user_inputs:
        if u.kind == "tensor":
            info = view.tensor(u.name)
            out.append(Slot(u.name, "tensor", _numpy_dtype(info.dtype), info.shape))
        elif u.kind == "constant":
            out.append(Slot(u.name, "constant", value=u.value))
        else:
            raise VerificationError(f"input {u.name!r} is a {u.kind.replace('_', ' ')}: pt2x verifies programs "
                                    "whose inputs are tensors and constants")
    return out


# ------------------------------------------------------------------ the archive's sample inputs

def _leaves(tree) -> list:
    if isinstance(tree, (tuple, list)):
        return [x for item in tree for x in _leaves(item)]
    if isinstance(tree, dict):
        return [x for item in tree.values() for x in _leaves(item)]
    return [tree]


def sample_inputs(model, archive, slot_list: list[Slot]) -> InputSet | None:
    """The archive's sample inputs for ``model`` (a ``Pt2Model``), or None when it has none."""
    from ..serde.codec.pickle_reader import read_torch_save

    members = [p.member for p in model.pickled if p.kind == "sample_inputs"]
    if not members:
        return None
    data = archive.zip.read(members[0])
    if not data:  # written empty (--drop-sample-inputs)
        return None
    tree = read_torch_save(data, where=members[0], tree=True)
    leaves = _leaves(tree)
    if len(leaves) != len(slot_list):
        raise VerificationError(f"{members[0]}: {len(leaves)} sample values, the program has {len(slot_list)} inputs")
    values = []
    for slot, leaf in zip(slot_list, leaves):
        if slot.kind == "constant":
            values.append(slot.value)
            continue
        values.append(checked_array(np.asarray(leaf), slot, f"{members[0]}: sample input {slot.name!r}"))
    return InputSet("sample", tuple(values))


# ----------------------------------------------------------------------------- drawn inputs

def _hints(view: ProgramView) -> dict[str, int]:
    """Each shape symbol's hint (its size at export), from the program's tensor metadata."""
    found: dict[str, int] = {}
    for name, meta in view.graph.tensor_values.items():
        for s, dim in zip(meta.sizes, view.tensor(name).shape):
            if isinstance(dim, Symbol) and s.type == "as_expr" and s.value.hint is not None:
                hint = s.value.hint
                if hint.type == "as_int":
                    found.setdefault(dim.name, hint.value)
    return found


def _bounds(view: ProgramView, symbol: str) -> tuple[int, int]:
    lo, hi = view.ranges.get(symbol, (None, None))
    lo = 1 if lo is None else max(int(lo), 0)
    hi = lo + 64 if hi is None or hi > lo + 64 else int(hi)  # an unbounded dim is drawn near its minimum
    return lo, hi


def _symbol_values(view: ProgramView, second: bool, rng: np.random.Generator) -> dict[str, int]:
    symbols = sorted(view.ranges)
    hints = _hints(view)
    values = {}
    for s in symbols:
        lo, hi = _bounds(view, s)
        base = hints.get(s, min(max(lo, 2), hi))
        if second:
            base = base + int(rng.integers(*_SECOND_SIZE_STEP))
            if base > hi:
                base = max(lo, hints.get(s, lo) - 1)
        values[s] = int(min(max(base, lo), hi))
    return values


def _shape(slot: Slot, env: dict[str, int]) -> list[int]:
    out = []
    for i, dim in enumerate(slot.dims):
        if isinstance(dim, int):
            out.append(dim)
            continue
        try:
            out.append(int(dim.evaluate(env)))
        except (Pt2Error, KeyError, TypeError, ValueError, ArithmeticError) as e:
            raise VerificationError(f"input {slot.name!r} dim {i} ({dim}): cannot compute a size ({e}); "
                                    "give the inputs with --inputs") from None
    return out


def _named(node: d.Node) -> dict[str, d.Argument]:
    return {na.name: na.arg for na in node.inputs}


def _tensor_name(arg: d.Argument | None) -> str | None:
    return arg.value.name if arg is not None and arg.type == "as_tensor" else None


def _int_arg(arg: d.Argument | None, default: int = 0) -> int:
    return arg.value if arg is not None and arg.type == "as_int" else default


def _indexed_size(view: ProgramView, node: d.Node, name: str) -> int | None:
    """The size of the dim ``name`` indexes when ``node`` uses it as indices, else None."""
    target, args = str(node.target), _named(node)

    def dim_of(tensor: str | None, axis: int):
        if tensor is None:
            return None
        shape = view.tensor(tensor).shape
        size = shape[axis] if -len(shape) <= axis < len(shape) else None
        return size if isinstance(size, int) else None

    if ".embedding." in target and _tensor_name(args.get("indices")) == name:
        return dim_of(_tensor_name(args.get("weight")), 0)
    if (".index_select." in target or ".gather." in target) and _tensor_name(args.get("index")) == name:
        return dim_of(_tensor_name(args.get("self")), _int_arg(args.get("dim")))
    if ".index." in target and (a := args.get("indices")) is not None and a.type == "as_optional_tensors":
        for axis, t in enumerate(a.value):
            if t.type == "as_tensor" and t.value.name == name:
                return dim_of(_tensor_name(args.get("self")), axis)
    return None


def _int_high(view: ProgramView, name: str) -> int:
    sizes = [s for n in view.consumers.get(name, []) if (s := _indexed_size(view, n, name)) is not None]
    return max(1, min(sizes)) if sizes else _INT_HIGH


def _draw(view: ProgramView, slot: Slot, shape: list[int], rng: np.random.Generator) -> np.ndarray:
    dtype = _np(slot.dtype)
    if dtype.kind == "b":
        return rng.random(shape) < 0.5
    if dtype.kind in "iu":
        return rng.integers(0, _int_high(view, slot.name), size=shape).astype(dtype)
    if dtype.kind == "c":
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)
    return rng.standard_normal(shape).astype(np.float32).astype(dtype)


def draw_inputs(view: ProgramView, slot_list: list[Slot], seed: int) -> list[InputSet]:
    rng = np.random.default_rng(seed)
    sets = []
    labels = ["drawn (export sizes)"] + (["drawn (other sizes)"] if view.ranges else [])
    seen = set()
    for i, label in enumerate(labels):
        env = _symbol_values(view, second=i == 1, rng=rng)
        shapes = {s.name: _shape(s, env) for s in slot_list if s.kind == "tensor"}
        _check_bytes([(s, shapes[s.name]) for s in slot_list if s.kind == "tensor"], f"inputs {label}")
        values = tuple(_draw(view, s, shapes[s.name], rng) if s.kind == "tensor" else s.value for s in slot_list)
        key = tuple(tuple(v.shape) for v in values if isinstance(v, np.ndarray))
        if key not in seen:
            seen.add(key)
            sets.append(InputSet(label, values))
    return sets


# ---------------------------------------------------------------------------- the user's file

def _size_bytes(shape, dtype: np.dtype) -> int:
    n = dtype.itemsize
    for d in shape:
        n *= int(d)
    return n


def _check_bytes(pairs: list[tuple[Slot, list[int]]], what: str) -> None:
    """The arrays of one input set, (slot, shape) each, fit ``MAX_INPUT_BYTES`` together (and
    no size is negative): checked before they are allocated."""
    total = 0
    for slot, shape in pairs:
        if any(d < 0 for d in shape):
            raise VerificationError(f"{what}: input {slot.name!r} shape {shape} has a negative size")
        total += _size_bytes(shape, _np(slot.dtype))
        if total > MAX_INPUT_BYTES:
            raise VerificationError(f"{what}: input {slot.name!r} shape {shape} ({slot.dtype}) takes the set past "
                                    f"{MAX_INPUT_BYTES} bytes (verification's limit); give smaller inputs with --inputs")


def check_header(dtype: np.dtype, shape: tuple, slot: Slot, what: str) -> None:
    """An array of ``dtype`` and ``shape`` fits ``slot`` (checked before the array is made)."""
    if (dtype.kind not in "biufc" and dtype.name != "bfloat16") or dtype != _np(slot.dtype):
        raise VerificationError(f"{what}: dtype {dtype}, the program takes {slot.dtype}")
    if len(shape) != len(slot.dims):
        raise VerificationError(f"{what}: shape {list(shape)}, the program takes rank {len(slot.dims)} "
                                f"({[str(x) for x in slot.dims]})")
    for axis, (n, dim) in enumerate(zip(shape, slot.dims)):
        if isinstance(dim, int) and n != dim:
            raise VerificationError(f"{what}: shape {list(shape)}, the program takes {dim} at dim {axis} "
                                    f"({[str(x) for x in slot.dims]})")


def checked_array(arr: np.ndarray, slot: Slot, what: str) -> np.ndarray:
    check_header(arr.dtype, arr.shape, slot, what)
    return np.array(arr, order="C")  # np.ascontiguousarray would make a 0-d array 1-d


def check_ranges(view: ProgramView, slot_list: list[Slot], values: list, what: str) -> None:
    """Every bare symbol takes one size across the inputs, inside its range constraint."""
    seen: dict[str, tuple[int, str]] = {}
    for slot, v in zip(slot_list, values):
        if slot.kind != "tensor":
            continue
        for axis, (n, dim) in enumerate(zip(v.shape, slot.dims)):
            if not isinstance(dim, Symbol):
                continue
            lo, hi = view.ranges.get(dim.name, (None, None))
            if (lo is not None and n < lo) or (hi is not None and n > hi):
                raise VerificationError(f"{what}: input {slot.name!r} dim {axis} is {n}, outside the range of "
                                        f"{dim.name} [{lo}, {hi}]")
            if dim.name in seen and seen[dim.name][0] != n:
                raise VerificationError(f"{what}: input {slot.name!r} dim {axis} is {n}, but {dim.name} is "
                                        f"{seen[dim.name][0]} in input {seen[dim.name][1]!r}")
            seen.setdefault(dim.name, (n, slot.name))


def _members(path: str, z: zipfile.ZipFile, tensors: list[Slot]) -> list[zipfile.ZipInfo]:
    """The member of each tensor input, by name or ``arr_i`` in order, matched on the names
    alone (nothing read yet)."""
    infos = {i.filename[:-4] if i.filename.endswith(".npy") else i.filename: i for i in z.infolist()}
    names = [s.name for s in tensors]
    if len(infos) == len(z.infolist()) and set(infos) == set(names):
        return [infos[n] for n in names]
    if len(infos) == len(z.infolist()) and set(infos) == {f"arr_{i}" for i in range(len(tensors))}:
        return [infos[f"arr_{i}"] for i in range(len(tensors))]
    shown = sorted(infos)[:20] + (["..."] if len(infos) > 20 else [])
    raise VerificationError(f"{path}: arrays {shown}; the program's tensor inputs are {names} "
                            f"(name them so, or save them in order as arr_0..arr_{len(tensors) - 1})")


def _header(fp, where: str) -> tuple[np.dtype, tuple, bool, int]:
    """(dtype, shape, fortran order, header bytes) of the ``.npy`` stream ``fp``."""
    fmt = np.lib.format
    try:
        version = fmt.read_magic(fp)
        if version not in ((1, 0), (2, 0), (3, 0)):
            raise ValueError(f"format version {version}")
        read = fmt.read_array_header_1_0 if version == (1, 0) else fmt.read_array_header_2_0
        shape, fortran, dtype = read(fp, max_header_size=MAX_NPY_HEADER_BYTES)
    except (OSError, ValueError, EOFError, TypeError, SyntaxError, zipfile.BadZipFile, zlib.error) as e:
        raise VerificationError(f"{where}: field 'header': not a readable .npz of arrays "
                                f"({type(e).__name__}: {e})") from None
    if dtype.hasobject:
        raise VerificationError(f"{where}: field 'descr': dtype {dtype} holds Python objects: not a readable .npz "
                                "of arrays (pickles are not read)")
    return dtype, tuple(shape), bool(fortran), fp.tell()


def _member_array(path: str, z: zipfile.ZipFile, info: zipfile.ZipInfo, slot: Slot, budget: list[int]) -> np.ndarray:
    """One member's array: its header checked against ``slot``, its declared bytes against the
    member's size and what is left of the set's ``budget``, before the data is inflated."""
    where = f"{path}: member {info.filename!r}"
    with z.open(info) as fp:
        dtype, shape, fortran, offset = _header(fp, where)
        check_header(dtype, shape, slot, f"{where} field 'shape'/'descr'")
        nbytes = _size_bytes(shape, dtype)
        if nbytes > budget[0]:
            raise VerificationError(f"{where}: field 'shape' {list(shape)} declares {nbytes} bytes, past the "
                                    f"{MAX_INPUT_BYTES} bytes of one input set (verification's limit)")
        if info.file_size != offset + nbytes:
            raise VerificationError(f"{where}: field 'shape' {list(shape)} declares {nbytes} bytes of data; the "
                                    f"member holds {info.file_size - offset}")
        budget[0] -= nbytes
        data = fp.read(nbytes)
    if len(data) != nbytes:
        raise VerificationError(f"{where}: {len(data)} bytes of data, its header declares {nbytes}")
    return np.frombuffer(data, dtype).reshape(shape, order="F" if fortran else "C")


def read_npz(path: str, view: ProgramView, slot_list: list[Slot]) -> InputSet:
    tensors = [s for s in slot_list if s.kind == "tensor"]
    budget = [MAX_INPUT_BYTES]
    try:
        with zipfile.ZipFile(path) as z:
            ordered = [_member_array(path, z, info, s, budget) for info, s in zip(_members(path, z, tensors), tensors)]
    except (OSError, ValueError, EOFError, zipfile.BadZipFile, zlib.error, KeyError, NotImplementedError,
            RuntimeError) as e:
        raise VerificationError(f"{path}: not a readable .npz of arrays ({type(e).__name__}: {e})") from None
    it = iter(checked_array(a, s, f"{path}: input {s.name!r}") for a, s in zip(ordered, tensors))
    values = [next(it) if s.kind == "tensor" else s.value for s in slot_list]
    check_ranges(view, slot_list, values, path)
    return InputSet("file", tuple(values))
