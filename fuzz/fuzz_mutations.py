"""Structure-aware mutations of ``.pt2`` archives, for ``fuzz/fuzz.py``.

A case is made from a committed fixture and ``random.Random(f"{seed}:{index}")`` only, so
``make_case(seed, index, fixtures)`` gives the same bytes every time (``--replay``).

The fixture is opened into a tree the mutations edit: the outer zip's members, parsed
JSON members (edited as Python values and written back by ``encode_json``, which can also
write what ``json.dumps`` cannot: duplicate keys, 5000-digit integers, raw text), and the
``torch.save`` zips nested inside older layouts (their ``data.pkl`` and storage files).
Byte-level mutations of the finished file (header fields, flips, truncation) run last.

Some mutations carry a payload that creates ``MARKER`` in the current directory if
anything in the file is ever executed (pickle ``os.system`` / ``eval`` calls, shape
expressions that call ``__import__``). The fuzzer runs its workers in an empty directory
and fails the run if ``MARKER`` ever appears there.
"""

from __future__ import annotations

import copy
import io
import json
import os
import pickle
import pickletools
import random
import re
import struct
import warnings
import zipfile
from dataclasses import dataclass, field
from typing import Any, Callable

__all__ = ["MARKER", "GeneratedCase", "make_case", "encode_json", "build_zip", "marker_pickles", "MARKER_EXPRESSIONS"]

MARKER = "PT2X_FUZZ_MARKER"
"""File name (relative to the worker's working directory) that executed payloads create."""

_DATE = (1980, 1, 1, 0, 0, 0)
_ALIGN = 64  # torch aligns stored member data to 64 bytes; rebuilt archives keep that
_MAX_STACK = 4  # mutations applied to one case at most
_MAX_LOCATIONS = 300_000  # JSON locations considered per mutation (stacked "long" mutations grow trees)


# ---------------------------------------------------------------------------- payloads

_CMD = f"touch {MARKER}"
_PY_TOUCH = f"__import__('pathlib').Path('{MARKER}').touch()"

MARKER_EXPRESSIONS = [
    f"({_PY_TOUCH}, s0)[1]",
    f"({_PY_TOUCH}, s77)[1]",
    f"__import__('os').system('{_CMD}')",
    f"exec(\"open('{MARKER}', 'w').close()\")",
    f"eval(\"{_PY_TOUCH}\")",
    f"Symbol('s77', positive=__import__('os').system('{_CMD}'), integer=True)",
    f"s77 + (lambda: {_PY_TOUCH} or 0)()",
    f"FloorDiv(s0, {_PY_TOUCH} or 1)",
    f"getattr(__import__('os'), 'system')('{_CMD}')",
    f"[c for c in ().__class__.__base__.__subclasses__() if c.__name__ == 'Popen'][0](['touch', '{MARKER}']).wait()",
]
"""Shape expressions that create MARKER if a reader ``eval``s / ``sympify``s them."""


def _p_str(s: str) -> bytes:
    b = s.encode("utf-8", "surrogatepass")
    return b"X" + struct.pack("<I", len(b)) + b


def _p_global(module: str, name: str) -> bytes:
    return b"c" + module.encode() + b"\n" + name.encode() + b"\n"


def _p_int(v: int) -> bytes:
    if 0 <= v < 256:
        return b"K" + bytes([v])
    if 0 <= v < 65536:
        return b"M" + struct.pack("<H", v)
    if -(2**31) <= v < 2**31:
        return b"J" + struct.pack("<i", v)
    raw = pickle.encode_long(v)
    if len(raw) < 256:
        return b"\x8a" + bytes([len(raw)]) + raw
    return b"\x8b" + struct.pack("<i", len(raw)) + raw


def _call(module: str, name: str, arg: str) -> bytes:
    """GLOBAL module name; MARK arg TUPLE; REDUCE (no STOP)."""
    return _p_global(module, name) + b"(" + _p_str(arg) + b"tR"


class _Reduce:
    """Pickled by ``pickle.dumps`` as ``os.system(CMD)`` via ``__reduce__`` (never called here)."""

    def __reduce__(self):
        return (os.system, (_CMD,))


def marker_pickles() -> list[tuple[str, bytes]]:
    """(description, pickle bytes) that create MARKER when unpickled by a real unpickler."""
    out = [
        ("GLOBAL os system REDUCE", b"\x80\x02" + _call("os", "system", _CMD) + b"."),
        ("GLOBAL posix system REDUCE", b"\x80\x02" + _call("posix", "system", _CMD) + b"."),
        ("GLOBAL builtins eval REDUCE", b"\x80\x02" + _call("builtins", "eval", _PY_TOUCH) + b"."),
        ("GLOBAL __builtin__ exec REDUCE", _call("__builtin__", "exec", _PY_TOUCH) + b"."),
        ("INST os system", b"(" + _p_str(_CMD) + b"ios\nsystem\n."),
        ("OBJ posix system", b"(" + _p_global("posix", "system") + _p_str(_CMD) + b"o."),
        ("GLOBAL subprocess call REDUCE",
         _p_global("subprocess", "call") + b"((" + _p_str("touch") + _p_str(MARKER) + b"ltR."),
    ]
    for proto in (2, 4, 5):
        out.append((f"__reduce__ os.system (protocol {proto})", pickle.dumps(_Reduce(), protocol=proto)))
    return out


# ---------------------------------------------------------------------------- JSON text


class Raw(str):
    """JSON text written as is (NaN, 1e400, a 5000-digit integer, deep nesting)."""


class Dup(list):
    """A JSON object given as (key, value) pairs, so a key may appear twice."""


def encode_json(v: Any) -> str:
    """JSON text for ``v``; ``Raw`` is written verbatim and ``Dup`` as an object with its pairs."""
    if isinstance(v, Raw):
        return str(v)
    if isinstance(v, Dup):
        return "{" + ", ".join(f"{json.dumps(str(k))}: {encode_json(x)}" for k, x in v) + "}"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{json.dumps(str(k))}: {encode_json(x)}" for k, x in v.items()) + "}"
    if isinstance(v, list):
        return "[" + ", ".join(encode_json(x) for x in v) + "]"
    if isinstance(v, int) and not isinstance(v, bool) and abs(v) > _HUGE_INT:
        return Raw(_int_text(v))
    return json.dumps(v)


_HUGE_INT = 10**4000  # json.dumps refuses integers past sys.get_int_max_str_digits() (4300)


def _int_text(v: int) -> str:
    # str(int) refuses past sys.get_int_max_str_digits(); write the digits piecewise
    s = "-" if v < 0 else ""
    v = abs(v)
    chunks = []
    while v:
        v, r = divmod(v, 10**1000)
        chunks.append(r)
    return s + str(chunks[-1]) + "".join(f"{c:01000d}" for c in reversed(chunks[:-1]))


# ---------------------------------------------------------------------------- archive tree


class Member:
    """One zip member: its bytes, or a parsed JSON value, or a nested zip (list of Members)."""

    def __init__(self, name: str, data: bytes, compress: int = zipfile.ZIP_STORED):
        self.name = name
        self.compress = compress
        self._data = data
        self._tree: Any = _UNSET
        self._inner: list[Member] | None = None

    def data(self) -> bytes:
        if self._tree is not _UNSET:
            return encode_json(self._tree).encode("utf-8", "surrogatepass")
        if self._inner is not None:
            return build_zip(self._inner)
        return self._data

    def set_data(self, data: bytes) -> None:
        self._data, self._tree, self._inner = data, _UNSET, None

    def json(self) -> Any:
        """The parsed JSON value to edit in place, or _UNSET if the bytes are not JSON."""
        if self._tree is _UNSET and self._inner is None:
            try:
                tree = json.loads(self._data)
            except (ValueError, RecursionError):
                return _UNSET
            if _depth(tree) > _MAX_EDIT_DEPTH:  # encode_json recurses: leave such text as bytes
                return _UNSET
            self._tree = tree
        return self._tree

    def set_json(self, value: Any) -> None:
        self._tree, self._inner = value, None

    def inner(self) -> list[Member] | None:
        """The members of a nested zip (torch.save), or None."""
        if self._inner is None and self._tree is _UNSET and self._data[:4] == b"PK\x03\x04":
            try:
                self._inner = read_zip(self._data)
            except (zipfile.BadZipFile, ValueError, EOFError, NotImplementedError, OSError):
                return None
        return self._inner

    def copy(self) -> "Member":
        m = Member(self.name, self.data(), self.compress)
        return m


_UNSET = object()
_MAX_EDIT_DEPTH = 150  # JSON nested deeper than this is not parsed for editing (deep values are Raw text)


def _depth(tree: Any) -> int:
    deepest, stack = 0, [(tree, 1)]
    while stack:
        v, d = stack.pop()
        deepest = max(deepest, d)
        if isinstance(v, dict):
            stack.extend((x, d + 1) for x in v.values())
        elif isinstance(v, list):
            stack.extend((x, d + 1) for x in v)
    return deepest


def read_zip(data: bytes) -> list[Member]:
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        return [Member(i.filename, z.read(i), i.compress_type) for i in z.infolist()]


def build_zip(members: list[Member], *, align: bool = True, zip64: bool = False, comment: bytes = b"") -> bytes:
    """Zip ``members`` in order, deterministically (fixed dates), stored data aligned like torch."""
    buf = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # duplicate names are written on purpose
        with zipfile.ZipFile(buf, "w", allowZip64=True) as z:
            for m in members:
                zi = zipfile.ZipInfo(m.name, date_time=_DATE)
                zi.compress_type = m.compress
                zi.external_attr = 0o644 << 16
                data = m.data()
                if align and m.compress == zipfile.ZIP_STORED and not zip64:
                    start = buf.tell() + 30 + len(_encoded_name(m.name)) + 4
                    zi.extra = b"FB" + struct.pack("<H", (-start) % _ALIGN) + b"Z" * ((-start) % _ALIGN)
                if zip64:
                    with z.open(zi, "w", force_zip64=True) as w:
                        w.write(data)
                else:
                    z.writestr(zi, data)
            z.comment = comment
    return buf.getvalue()


def _encoded_name(name: str) -> bytes:
    try:
        return name.encode("ascii")
    except UnicodeEncodeError:
        return name.encode("utf-8")


@dataclass
class Case:
    """A case being built: the fixture's members, and byte edits to the finished file."""

    fixture: str
    members: list[Member]
    file_ops: list[Callable[[bytes], bytes]] = field(default_factory=list)
    steps: list[str] = field(default_factory=list)
    align: bool = True
    zip64: bool = False
    comment: bytes = b""

    def build(self) -> bytes:
        data = build_zip(self.members, align=self.align, zip64=self.zip64, comment=self.comment)
        for op in self.file_ops:
            data = op(data)
        return data

    def root(self) -> str:
        """The archive's root folder with its slash ("" for the flat torch 2.6 layout)."""
        firsts = {m.name.split("/", 1)[0] for m in self.members}
        if len(firsts) == 1 and all("/" in m.name for m in self.members):
            return firsts.pop() + "/"
        return ""

    def json_members(self) -> list[Member]:
        return [m for m in self.members if m.name.endswith(".json") and m.json() is not _UNSET]

    def nested(self) -> list[Member]:
        return [m for m in self.members if m.inner() is not None]


@dataclass
class GeneratedCase:
    """What ``make_case`` returns: the archive bytes and how they were made."""

    seed: int
    index: int
    fixture: str
    steps: list[str]
    data: bytes


_FIXTURE_CACHE: dict[str, bytes] = {}
_FIXTURE_LIST: list[str] = []  # the fixtures of the case being made (crossover donors)


def _fixture_bytes(path: str) -> bytes:
    if path not in _FIXTURE_CACHE:
        with open(path, "rb") as f:
            _FIXTURE_CACHE[path] = f.read()
    return _FIXTURE_CACHE[path]


def make_case(seed: int, index: int, fixtures: list[str]) -> GeneratedCase:
    """The mutated archive for (seed, index): deterministic, from ``fixtures`` (sorted paths)."""
    rng = random.Random(f"pt2x-fuzz:{seed}:{index}")
    _FIXTURE_LIST[:] = fixtures
    fixture = rng.choice(fixtures)
    count = rng.choices([1, 2, 3, 4], weights=[55, 25, 12, 8])[0]
    for attempt in range(20):
        case = Case(fixture, read_zip(_fixture_bytes(fixture)))
        applied = 0
        tries = 0
        while applied < min(count, _MAX_STACK) and tries < 50:
            tries += 1
            name, fn = _pick(rng, _MUTATIONS)
            try:
                desc = fn(rng, case)
            except Exception:  # a mutation that does not fit what earlier ones left: skip it
                if os.environ.get("PT2X_FUZZ_DEBUG"):
                    raise
                desc = None
            if desc:
                case.steps.append(f"{name}: {desc}")
                applied += 1
        try:
            data = case.build()
        except (ValueError, OverflowError, struct.error, UnicodeError, zipfile.LargeZipFile) as e:
            rng = random.Random(f"pt2x-fuzz:{seed}:{index}:retry{attempt}")
            last = e
            continue
        return GeneratedCase(seed, index, fixture, case.steps, data)
    raise RuntimeError(f"case {seed}:{index}: could not build a mutated archive ({last!r})")


def _pick(rng: random.Random, table):
    names = [t[0] for t in table]
    weights = [t[1] for t in table]
    i = rng.choices(range(len(table)), weights=weights)[0]
    return names[i], table[i][2]


def _short(v: Any, n: int = 60) -> str:
    if isinstance(v, Raw):
        s = str(v)
        return (s[:n] + f"...({len(s)} chars)") if len(s) > n else s
    if isinstance(v, int) and not isinstance(v, bool) and v.bit_length() > 4000:
        return f"<integer of ~{int(v.bit_length() * 0.30103) + 1} digits>"
    s = repr(v)
    return (s[:n] + f"...({len(s)} chars)") if len(s) > n else s


# ---------------------------------------------------------------------------- JSON locations


def _locations(tree: Any, skip_metadata: bool) -> list[tuple[Any, Any, str]]:
    """Every (parent, key, path) in a JSON tree (the first _MAX_LOCATIONS); metadata
    subtrees left out when asked."""
    out: list[tuple[Any, Any, str]] = []
    stack = [(tree, "")]
    while stack and len(out) < _MAX_LOCATIONS:
        node, path = stack.pop()
        if isinstance(node, (Raw, Dup)):
            continue
        if isinstance(node, dict):
            for k, v in node.items():
                if skip_metadata and k == "metadata":
                    continue
                p = f"{path}.{k}" if path else str(k)
                out.append((node, k, p))
                stack.append((v, p))
        elif isinstance(node, list):
            for i, v in enumerate(node):
                p = f"{path}[{i}]"
                out.append((node, i, p))
                stack.append((v, p))
    out.reverse()
    return out


def _pick_json(rng: random.Random, case: Case, want=None):
    """(member, tree, [(parent, key, path)...]) for a random JSON member, filtered by ``want``."""
    members = case.json_members()
    if not members:
        return None
    main = [m for m in members if not m.name.endswith("_config.json")]
    pool = main if main and rng.random() < 0.8 else members
    m = rng.choice(pool)
    tree = m.json()
    locs = _locations(tree, skip_metadata=rng.random() < 0.9)
    if want is not None:
        locs = [loc for loc in locs if want(loc[0], loc[1], loc[0][loc[1]])]
    if not locs:
        return None
    return m, tree, locs


def _pick_location(rng: random.Random, case: Case, want=None):
    """``_pick_json``'s (member, tree, locations) and one location drawn from them, or None."""
    got = _pick_json(rng, case, want)
    if not got:
        return None
    m, tree, locs = got
    return m, tree, locs, rng.choice(locs)


def _member_label(m: Member) -> str:
    return m.name


_ODD_STRINGS = [
    "", " ", "\x00", "a\x00b", "../../etc/passwd", "/etc/passwd", "..\\x", "weight_0/../weight_1", ".",
    "\ud800", "\udfff\ud800", "é" * 3, "\u202e", "s0", "s77", "x" * 300, "model", "data.pkl",
    "torch.ops.aten.linear.default", "Infinity", "NaN", "-Infinity", "int_oo", "-int_oo", "1e309",
]

_NUMBERS: list[Any] = [
    0, -1, 1, 2, 63, 64, 65, -(2**31), 2**31, 2**32, 2**53 + 1, 2**62, 2**63 - 1, 2**63, -(2**63), -(2**63) - 1,
    2**64, 10**18, 10**30, 10**300, 0.5, -0.0, 1e308, float("nan"), float("inf"), float("-inf"),
    Raw("1e400"), Raw("-1e400"), Raw("NaN"), Raw("Infinity"), Raw("-Infinity"), Raw("1" + "0" * 5000),
    Raw("-" + "9" * 5000), Raw("0." + "0" * 5000 + "1"), Raw("1E-400"), 10**4301,
]

_TYPED: list[Any] = [0, -1, 1.5, "x", "", True, False, None, [], {}, [1], {"a": 1}, [[]], {"": None}]


def _json_type_swap(rng, case):
    got = _pick_location(rng, case)
    if not got:
        return None
    m, _, locs, (parent, key, path) = got
    old = parent[key]
    new = copy.deepcopy(rng.choice([v for v in _TYPED if type(v) is not type(old)]))
    parent[key] = new
    return f"{m.name}: {path}: {_short(old, 30)} -> {_short(new)}"


def _json_number(rng, case):
    ints = rng.random() < 0.8
    got = _pick_location(rng, case, (lambda p, k, v: isinstance(v, int) and not isinstance(v, bool)) if ints else None)
    if not got:
        return None
    m, _, locs, (parent, key, path) = got
    old = parent[key]
    choices = list(_NUMBERS)
    if isinstance(old, int) and not isinstance(old, bool):
        choices += [old + 1, old - 1, -old, old * 1000, old * 2**40]
    new = rng.choice(choices)
    parent[key] = new
    return f"{m.name}: {path}: {_short(old, 30)} -> {_short(new)}"


def _json_delete(rng, case):
    got = _pick_location(rng, case)
    if not got:
        return None
    m, _, locs, (parent, key, path) = got
    if isinstance(parent, list) and rng.random() < 0.3:
        del parent[key:]
        return f"{m.name}: {path}: list truncated"
    del parent[key]
    return f"{m.name}: {path}: deleted"


def _json_duplicate(rng, case):
    got = _pick_location(rng, case)
    if not got:
        return None
    m, tree, locs, (parent, key, path) = got
    if isinstance(parent, list):
        parent.insert(key, copy.deepcopy(parent[key]))
        return f"{m.name}: {path}: list element duplicated"
    other = copy.deepcopy(rng.choice([parent[key], rng.choice(_TYPED), rng.choice(_NUMBERS)]))
    pairs = Dup(list(parent.items()))
    pairs.append((key, other) if rng.random() < 0.5 else pairs[0])
    if rng.random() < 0.5:
        pairs.insert(0, pairs.pop())
    _replace(tree, parent, pairs, m)
    return f"{m.name}: {path}: key {key!r} duplicated (second value {_short(other, 30)})"


def _replace(tree, old, new, m: Member) -> None:
    """Put ``new`` where the container ``old`` sits in ``tree`` (identity match)."""
    if tree is old:
        m.set_json(new)
        return
    stack = [tree]
    while stack:
        node = stack.pop()
        items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
        for k, v in list(items):
            if v is old:
                node[k] = new
                return
            if isinstance(v, (dict, list)) and not isinstance(v, (Dup, Raw)):
                stack.append(v)


_UNION_KEYS = [
    "as_none", "as_tensor", "as_tensors", "as_int", "as_ints", "as_float", "as_floats", "as_string", "as_strings",
    "as_sym_int", "as_sym_ints", "as_scalar_type", "as_memory_format", "as_layout", "as_device", "as_bool",
    "as_bools", "as_sym_bool", "as_sym_bools", "as_graph", "as_optional_tensors", "as_custom_obj", "as_operator",
    "as_sym_float", "as_sym_floats", "as_optional_tensor", "as_complex", "as_int_lists", "as_string_to_argument",
    "as_expr", "user_input", "parameter", "buffer", "tensor_constant", "custom_obj", "token", "constant_input",
    "user_output", "loss_output", "buffer_mutation", "gradient_to_parameter", "gradient_to_user_input",
    "user_input_mutation", "parameter_mutation", "as_name", "as_constant", "as_sym_float", "unknown_member",
]


def _single_key(p, k, v) -> bool:
    return isinstance(v, dict) and not isinstance(v, Dup) and len(v) == 1


def _json_union_swap(rng, case):
    got = _pick_location(rng, case, _single_key)
    if not got:
        return None
    m, tree, locs, (parent, key, path) = got
    seen = sorted({next(iter(loc[0][loc[1]])) for loc in locs})
    union = parent[key]
    (old_key, value), = union.items()
    r = rng.random()
    if r < 0.6:
        new_key = rng.choice(seen + _UNION_KEYS)
        parent[key] = {new_key: value}
        return f"{m.name}: {path}: union member {old_key!r} -> {new_key!r} (same value)"
    if r < 0.8:
        donor = rng.choice(locs)
        donor_val = donor[0][donor[1]]
        parent[key] = copy.deepcopy(donor_val)
        return f"{m.name}: {path}: union replaced by the one at {donor[2]}"
    if r < 0.9:
        new_key = rng.choice(seen + _UNION_KEYS)
        parent[key] = {old_key: value, new_key: copy.deepcopy(value)}
        return f"{m.name}: {path}: union given a second member {new_key!r}"
    parent[key] = {}
    return f"{m.name}: {path}: union emptied"


_ODD_TARGETS = [
    "", "torch.ops.aten.nonexistent.default", "builtins.eval", "os.system", "torch.ops.aten.linear",
    "torch.ops.aten.linear.default.extra", "torch.ops.higher_order.cond", "torch.ops.higher_order.while_loop",
    "torch.ops.higher_order.map_impl", "_operator.getitem", "_operator.add", "torch.ops.aten.view.default",
    "torch.ops.aten.expand.default", "torch.ops.aten.full.default", "torch.ops.aten.reshape.default",
    "torch.ops.aten.cat.default", "torch.ops.aten.slice.Tensor", "torch.ops.aten.index.Tensor",
    "torch.ops.aten.zeros.default", "torch.ops.aten.arange.start_step", "torch.ops.aten.sym_size.int",
    "torch.ops.aten.scaled_dot_product_attention.default", "torch.ops.aten.split_with_sizes.default",
    "torch.ops.aten.conv2d.default", "torch.ops.aten.max_pool2d.default", "torch.ops.aten.softmax.int",
    "torch.ops.aten.pad.default", "torch.ops.aten.upsample_nearest2d.vec", "torch.ops.aten.lstm.input",
    "math.floor", "torch.sym_int", "torch.ops.aten._to_copy.default", "\ud800", "torch.ops.custom.op.default",
]


def _is_node(p, k, v) -> bool:
    return isinstance(v, dict) and "target" in v and "inputs" in v and not isinstance(v, Dup)


def _json_node_target(rng, case):
    got = _pick_location(rng, case, _is_node)
    if not got:
        return None
    m, _, locs, (parent, key, path) = got
    targets = sorted({loc[0][loc[1]].get("target") for loc in locs if isinstance(loc[0][loc[1]].get("target"), str)})
    node = parent[key]
    old = node.get("target")
    new = rng.choice(targets) if targets and rng.random() < 0.6 else rng.choice(_ODD_TARGETS)
    node["target"] = new
    return f"{m.name}: {path}.target: {_short(old)} -> {_short(new)}"


def _json_swap_subtrees(rng, case):
    """Replace a value with another value found under the same key elsewhere in the file
    (another node's inputs, another tensor's sizes, another spec)."""
    got = _pick_location(rng, case, lambda p, k, v: isinstance(k, str))
    if not got:
        return None
    m, _, locs, (parent, key, path) = got
    same = [loc for loc in locs if loc[1] == key and loc[2] != path]
    if not same:
        return None
    donor = rng.choice(same)
    parent[key] = copy.deepcopy(donor[0][donor[1]])
    return f"{m.name}: {path}: value taken from {donor[2]}"


_REF_KEYS = ("name", "parameter_name", "buffer_name", "tensor_constant_name", "path_name", "fqn")


def _json_rename_ref(rng, case):
    """Point a value reference (``name`` fields, tensor_values keys) at another name."""
    got = _pick_location(rng, case, lambda p, k, v: isinstance(v, str) and k in _REF_KEYS)
    if not got:
        return None
    m, _, locs, (parent, key, path) = got
    names = sorted({loc[0][loc[1]] for loc in locs})
    old = parent[key]
    new = rng.choice(names + _ODD_STRINGS) if rng.random() < 0.7 else rng.choice(_ODD_STRINGS)
    parent[key] = new
    return f"{m.name}: {path}: {_short(old)} -> {_short(new)}"


def _json_rename_key(rng, case):
    """Rename a dict key: tensor_values / range_constraints / config entries become unreachable or clash."""
    got = _pick_location(rng, case, lambda p, k, v: isinstance(k, str) and isinstance(p, dict) and not isinstance(p, Dup))
    if not got:
        return None
    m, tree, locs, (parent, key, path) = got
    others = [k for k in parent if k != key]
    if others and rng.random() < 0.4:
        new = rng.choice(others + _ODD_STRINGS)
    else:
        new = rng.choice(_ODD_STRINGS + [key.upper(), key + "_", key[:-1]])
    if new in parent and new != key:
        pairs = Dup([(new if k == key else k, v) for k, v in parent.items()])
        _replace(tree, parent, pairs, m)
        return f"{m.name}: {path}: key renamed to existing {new!r} (duplicate)"
    items = [(new if k == key else k, v) for k, v in parent.items()]
    parent.clear()
    parent.update(items)
    return f"{m.name}: {path}: key renamed to {_short(new)}"


def _json_deep(rng, case):
    got = _pick_location(rng, case)
    if not got:
        return None
    m, _, locs, (parent, key, path) = got
    depth = rng.choice([50, 150, 199, 200, 201, 202, 500, 1000, 3000, 20000])
    kind = rng.random()
    if kind < 0.4:
        text = "[" * depth + "1" + "]" * depth
    elif kind < 0.7:
        text = '{"a": ' * depth + "1" + "}" * depth
    else:
        text = '{"as_tensors": [' * depth + "1" + "]}" * depth
    parent[key] = Raw(text)
    return f"{m.name}: {path}: nested {depth} deep"


def _json_long(rng, case):
    got = _pick_location(rng, case)
    if not got:
        return None
    m, _, locs, (parent, key, path) = got
    n = rng.choice([1000, 10**4, 10**5, 10**6])
    r = rng.random()
    if r < 0.5:
        old = parent[key]
        base = old if isinstance(old, str) and old else "A"
        new: Any = (base * (n // len(base) + 1))[:n]
        what = f"string of {n} chars"
    elif r < 0.8:
        item = rng.choice([1, {"as_int": 1}, {"as_tensor": {"name": "x"}}])
        new = [copy.deepcopy(item) for _ in range(min(n, 10**5))]
        what = f"list of {len(new)} elements"
    else:
        new = {f"k{i}": i for i in range(min(n, 10**5))}
        what = f"object with {len(new)} keys"
    parent[key] = new
    return f"{m.name}: {path}: {what}"


def _json_surrogate(rng, case):
    got = _pick_location(rng, case, lambda p, k, v: isinstance(v, str) or isinstance(k, str))
    if not got:
        return None
    m, tree, locs, (parent, key, path) = got
    bad = rng.choice(["\ud800", "\udfff", "\ud800\ud800", "x\udc80y"])
    if isinstance(parent[key], str) and rng.random() < 0.7:
        old = parent[key]
        i = rng.randint(0, len(old))
        parent[key] = old[:i] + bad + old[i:]
        return f"{m.name}: {path}: lone surrogate {bad!r} inserted"
    if isinstance(key, str) and isinstance(parent, dict) and not isinstance(parent, Dup):
        items = [(k + bad if k == key else k, v) for k, v in parent.items()]
        parent.clear()
        parent.update(items)
        return f"{m.name}: {path}: lone surrogate {bad!r} appended to the key"
    return None


def _is_expr(p, k, v) -> bool:
    return k == "expr_str" and isinstance(v, str)


_EXPRS = [
    "2**2**2**2**2**2**2", "9**9**9**9", "Pow(2, 10**100)", "s0**(10**10)", "FloorDiv(s0, 0)", "Mod(s77, 0)", "1/0",
    "s77/0", "(" * 10000 + "s77" + ")" * 10000, "-" * 100000 + "1", "Symbol('" + "s" * 100000 + "')",
    "Max(" + ", ".join(["s77"] * 10000) + ")", "1" * 5000, "1e400", "nan", "oo", "-oo", "zoo", "I", "E", "pi",
    "Rational(1, 0)", "Integer('" + "1" * 5000 + "')", "s77 + " * 5000 + "1", "ｓ７７", "s77\x00", "s\ud800",
    "Symbol('s77', positive=True, integer=True)**Symbol('s77', positive=True, integer=True)", "", " ",
    "Symbol()", "Symbol('s77', positive=True, integer=True", "Symbol('s77', foo=True)", "Symbol(s77)",
    "CeilToInt(IntTrueDiv(s0, 0))", "Piecewise((1, s0 > 2), (0, True))", "Min(s0)", "Max()", "s0 if s0 else 1",
    "s0.__class__", "().__class__.__bases__[0].__subclasses__()", "Symbol('s77', positive=True, integer=True) * 2**64",
    "TruncToInt(1e400)", "PythonMod(s0, -0)", "ModularIndexing(s0, 0, 0)", "s0 << 1000000", "s0 >> -1",
    "Symbol('s77', positive=True, integer=True) // 0", "(s0 * 10**300) * 10**300 * 10**300",
    "2**10**10", "factorial(10**6)", "OpaqueUnaryFn_exp(1000)", "Abs(-s0)", "Float('1e400')", "Float('nan')",
]


def _json_expr(rng, case):
    got = _pick_location(rng, case, _is_expr)
    if not got:
        return None
    m, _, locs, (parent, key, path) = got
    old = parent[key]
    new = rng.choice(_EXPRS)
    if rng.random() < 0.2:
        new = old.replace("True", rng.choice(["False", "1", "None", "__import__('os')"]))
    parent[key] = new
    return f"{m.name}: {path}: {_short(old, 30)} -> {_short(new)}"


def _json_range(rng, case):
    """range_constraints: bounds swapped, huge, negative, inverted; keys replaced by code."""
    got = _pick_location(rng, case, lambda p, k, v: k in ("min_val", "max_val", "hint", "storage_offset"))
    if not got:
        return None
    m, _, locs, (parent, key, path) = got
    old = parent[key]
    new = rng.choice([None, 0, -1, 2**63, -(2**63), 10**300, Raw("1" + "0" * 5000), "int_oo", "-int_oo",
                      1.5, float("inf"), {"as_int": -1}, {"as_int": 2**64}, {"as_expr": {"expr_str": "s0"}}])
    parent[key] = new
    return f"{m.name}: {path}: {_short(old, 30)} -> {_short(new)}"


def _json_tensor_meta(rng, case):
    """sizes/strides/storage_offset/dtype/layout of one tensor meta set to awkward values."""
    got = _pick_location(rng, case, lambda p, k, v: k in ("sizes", "strides") and isinstance(v, list))
    if not got:
        return None
    m, _, locs, (parent, key, path) = got
    old = parent[key]
    r = rng.random()
    if r < 0.3 and old:
        i = rng.randrange(len(old))
        val = rng.choice([0, -1, 2**31, 2**32, 2**40, 2**62, 2**63 - 1, 2**63, 2**64, 10**20, -(2**63)])
        old[i] = {"as_int": val}
        return f"{m.name}: {path}[{i}]: as_int {val}"
    if r < 0.5:
        parent[key] = [{"as_int": 1} for _ in range(rng.choice([0, 5, 64, 65, 200, 10000]))]
        return f"{m.name}: {path}: rank {len(parent[key])}"
    if r < 0.7:
        parent[key] = [{"as_int": 0 if key == "strides" else 2**20} for _ in old]
        return f"{m.name}: {path}: all {'zero strides' if key == 'strides' else 'sizes 2**20'}"
    if r < 0.85 and old:
        i = rng.randrange(len(old))
        old[i] = {"as_expr": {"expr_str": rng.choice(_EXPRS + MARKER_EXPRESSIONS), "hint": {"as_int": 3}}}
        return f"{m.name}: {path}[{i}]: symbolic {_short(old[i]['as_expr']['expr_str'])}"
    parent[key] = list(reversed(old))
    return f"{m.name}: {path}: reversed"


_ENUM_KEYS = ("dtype", "layout", "kind", "as_scalar_type", "as_layout", "as_memory_format", "type", "index", "major",
              "minor")
_ENUM_VALUES = [*range(-1, 34), 99, 2**31, 2**63, "FLOAT", "cpu", "cuda", "meta", "", None, 1.0, True]


def _json_enum(rng, case):
    got = _pick_location(rng, case, lambda p, k, v: k in _ENUM_KEYS and not isinstance(v, (dict, list)))
    if not got:
        return None
    m, _, locs, (parent, key, path) = got
    old = parent[key]
    new = rng.choice(_ENUM_VALUES)
    parent[key] = new
    return f"{m.name}: {path}: {_short(old)} -> {_short(new)}"


def _json_nested_string(rng, case):
    """in_spec / out_spec hold JSON inside a string: mutate that inner JSON."""
    got = _pick_location(rng, case, lambda p, k, v: isinstance(v, str) and v[:1] in "[{" and len(v) > 1)
    if not got:
        return None
    m, _, locs, (parent, key, path) = got
    try:
        inner = json.loads(parent[key])
    except ValueError:
        return None
    wrapper = Member("inner.json", b"")
    wrapper.set_json(inner)
    sub = Case(case.fixture, [wrapper])
    name, fn = _pick(rng, [t for t in _JSON_OPS if t[0] not in ("nested-json", "json-bytes")])
    desc = fn(rng, sub)
    if not desc or wrapper.json() is _UNSET:
        return None
    parent[key] = encode_json(wrapper.json())
    return f"{m.name}: {path}: inner JSON {name}: {desc.split(': ', 1)[1]}"


def _json_version(rng, case):
    got = _pick_location(rng, case, lambda p, k, v: k == "schema_version")
    if not got:
        return None
    m, _, locs, (parent, key, path) = got
    new = rng.choice([{"major": 9, "minor": 0}, {"major": 7, "minor": 0}, {"major": 8, "minor": 99}, {"major": 8},
                      {"major": -1, "minor": -1}, {"major": 2**64, "minor": 0}, "8.20", None, {}])
    parent[key] = new
    return f"{m.name}: {path}: -> {_short(new)}"


def _json_invalid_bytes(rng, case):
    """The JSON member's bytes (not the value) damaged: invalid UTF-8, BOM, truncated, trailing junk."""
    members = case.json_members()
    if not members:
        return None
    m = rng.choice(members)
    data = m.data()
    r = rng.random()
    if r < 0.25:
        i = rng.randrange(len(data))
        m.set_data(data[:i] + rng.choice([b"\xff", b"\xc0\x80", b"\xed\xa0\x80", b"\x80"]) + data[i:])
        return f"{m.name}: invalid UTF-8 at byte {i}"
    if r < 0.4:
        m.set_data(rng.choice([b"\xef\xbb\xbf", b"\xff\xfe", b" \n"]) + data)
        return f"{m.name}: prefix bytes"
    if r < 0.6:
        n = rng.randrange(len(data))
        m.set_data(data[:n])
        return f"{m.name}: JSON text truncated to {n} bytes"
    if r < 0.8:
        m.set_data(data + rng.choice([b"x", b"{}", b"\x00", b"\n\n", b" " * 10]))
        return f"{m.name}: trailing bytes"
    m.set_data(data.decode("utf-8", "surrogatepass").encode("utf-16"))
    return f"{m.name}: re-encoded as UTF-16"


_NEW_KEYS = ["new_field", "unknown", "x", "", "\ud800", "__class__", "as_tensor", "name", "target", "sizes",
             "schema_version", "metadata", "config", "graph", "nodes", "use_pickle"]


def _json_add_field(rng, case):
    """An unknown field added to a struct (a newer schema minor's field, as pt2x keeps and reports them)."""
    got = _pick_location(rng, case, lambda p, k, v: isinstance(v, dict) and not isinstance(v, Dup) and len(v) != 1)
    if not got:
        return None
    m, _, locs, (parent, key, path) = got
    struct_ = parent[key]
    name = rng.choice(_NEW_KEYS + [f"field_{rng.randrange(100)}"])
    value = copy.deepcopy(rng.choice(_TYPED + _NUMBERS + [Raw("[" * 150 + "]" * 150), "s" * 10**5, "\ud800",
                                                          {"as_tensor": {"name": "x"}}, [{"as_int": 1}] * 3]))
    struct_[name] = value
    return f"{m.name}: {path}: field {name!r} = {_short(value, 30)}"


_JSON_OPS = [
    ("add-field", 5, _json_add_field),
    ("type-swap", 10, _json_type_swap),
    ("number", 12, _json_number),
    ("delete", 8, _json_delete),
    ("duplicate", 5, _json_duplicate),
    ("union-swap", 8, _json_union_swap),
    ("node-target", 6, _json_node_target),
    ("swap-subtree", 6, _json_swap_subtrees),
    ("rename-ref", 6, _json_rename_ref),
    ("rename-key", 5, _json_rename_key),
    ("deep", 3, _json_deep),
    ("long", 2, _json_long),
    ("surrogate", 3, _json_surrogate),
    ("expr", 6, _json_expr),
    ("range", 4, _json_range),
    ("tensor-meta", 8, _json_tensor_meta),
    ("enum", 5, _json_enum),
    ("nested-json", 2, _json_nested_string),
    ("version", 1, _json_version),
    ("json-bytes", 3, _json_invalid_bytes),
]


# ---------------------------------------------------------------------------- zip level


_ODD_NAMES = ["../evil", "/abs/path", "a\\b", "with\x00nul", "é", "", "/", "x/../../y", "models/", "./models/model.json"]


def _root(case: Case) -> str:
    return case.root()


def _zip_rename(rng, case):
    members = case.members
    m = rng.choice(members)
    old = m.name
    root = old.split("/", 1)[0] + "/" if "/" in old else ""
    r = rng.random()
    if r < 0.3:
        new = rng.choice([x.name for x in members])
    elif r < 0.5:
        new = root + rng.choice(_ODD_NAMES)
    elif r < 0.65:
        new = rng.choice(_ODD_NAMES) + old
    elif r < 0.8:
        new = "other/" + old.split("/", 1)[-1]
    elif r < 0.9:
        new = old.upper()
    else:
        new = old + rng.choice(["/", "_", ".bak", " "])
    m.name = new
    return f"{_short(old)} -> {_short(new)}"


def _zip_duplicate(rng, case):
    m = rng.choice(case.members)
    dup = m.copy()
    if rng.random() < 0.5:
        other = rng.choice(case.members)
        dup = Member(m.name, other.data(), other.compress)
        what = f"copy of {m.name!r} holding {other.name!r}'s bytes"
    else:
        what = f"copy of {m.name!r}"
    case.members.insert(rng.randint(0, len(case.members)), dup)
    return what


def _zip_truncate(rng, case):
    m = rng.choice(case.members)
    data = m.data()
    if not data:
        return None
    n = rng.choice([0, 1, len(data) // 2, len(data) - 1, rng.randrange(len(data))])
    m.set_data(data[:n])
    return f"{m.name}: data truncated {len(data)} -> {n} bytes"


def _zip_drop(rng, case):
    if len(case.members) < 2:
        return None
    m = case.members.pop(rng.randrange(len(case.members)))
    return f"dropped {m.name}"


def _zip_recompress(rng, case):
    method = rng.choice([zipfile.ZIP_DEFLATED, zipfile.ZIP_DEFLATED, zipfile.ZIP_BZIP2, zipfile.ZIP_LZMA])
    if rng.random() < 0.3:
        for m in case.members:
            m.compress = method
        return f"every member compressed with method {method}"
    m = rng.choice(case.members)
    m.compress = method
    return f"{m.name}: compressed with method {method}"


_BOMBS: dict[int, bytes] = {}


def _zip_bomb(rng, case):
    """A deflated member that inflates far past its size (zeros or a repeated JSON prefix)."""
    m = rng.choice(case.members)
    size = rng.choice([10**6, 20 * 10**6, 60 * 10**6])
    m.set_data(b"\x00" * size if rng.random() < 0.5 else (b"[" * size))
    m.compress = zipfile.ZIP_DEFLATED
    return f"{m.name}: {size} bytes deflated (ratio ~1000:1)"


def _zip_add(rng, case):
    name = _root(case) + rng.choice([
        "extra/x", "data/weights/weight_999", "models/other.json", "models/", "data/aotinductor/model/x.so",
        "data/executorch/x.pte", "data/constants/model.pt", "data/weights/model.pt", "archive_format",
        "models/model.json", "data/sample_inputs/model.pt", ".data/version", "byteorder", "../../escape",
    ])
    data = rng.choice([b"", b"{}", b"\x00" * 64, b"pt2", b"big", b'{"graph_module": {}}', marker_pickles()[0][1]])
    case.members.insert(rng.randint(0, len(case.members)), Member(name, data))
    return f"added {name!r} ({len(data)} bytes)"


def _zip_shuffle(rng, case):
    rng.shuffle(case.members)
    return "members reordered"


def _zip_layout(rng, case):
    r = rng.random()
    if r < 0.4:
        case.align = False
        return "stored data not aligned"
    if r < 0.7:
        case.zip64 = True
        return "zip64 headers on every member"
    case.comment = rng.choice([b"x" * 100, b"PK\x05\x06" + b"\x00" * 18, b"PK\x03\x04" * 10])
    return f"archive comment {case.comment[:8]!r}..."


def _zip_nested(rng, case):
    """A zip-level mutation inside a nested torch.save zip (older layouts' weight pickles)."""
    nested = case.nested()
    if not nested:
        return None
    outer = rng.choice(nested)
    sub = Case(case.fixture, outer.inner())
    name, fn = _pick(rng, [t for t in _ZIP_OPS if t[0] not in ("nested", "layout", "bomb")])
    desc = fn(rng, sub)
    if not desc:
        return None
    return f"inside {outer.name}: {name}: {desc}"


def _zip_crossover(rng, case):
    """A member replaced by the member of the same role from another fixture (same torch release or
    another): a graph with someone else's weights, configs or version files."""
    others = [f for f in _FIXTURE_LIST if f != case.fixture]
    if not others:
        return None
    other = rng.choice(others)
    donor = read_zip(_fixture_bytes(other))
    def role(name: str) -> str:
        return name.split("/", 1)[1] if "/" in name else name
    by_role = {role(m.name): m for m in donor}
    mine = [m for m in case.members if role(m.name) in by_role]
    important = [m for m in mine if m.name.endswith((".json", ".pt")) or "/data/" in "/" + m.name]
    if not mine:
        return None
    m = rng.choice(important if important and rng.random() < 0.85 else mine)
    d = by_role[role(m.name)]
    m.set_data(d.data())
    m.compress = d.compress
    return f"{m.name}: taken from {os.path.basename(os.path.dirname(other))}/{os.path.basename(other)}"


_TEXTS = [b"", b"big", b"little", b"\xff\xfe", b"-1", b"99", b"1.0", b"18446744073709551616", b"0" * 5000, b"3\n\x00",
          b"pt2", b"pt2\n", b"1\n", b"\x00" * 8, b"2.15.0", b"8.20"]


def _zip_text_member(rng, case):
    """A small bookkeeping member (version, byteorder, archive_format, ...) given other text."""
    small = [m for m in case.members if len(m.data()) <= 64 and not m.name.endswith(".json")]
    if not small:
        return None
    m = rng.choice(small)
    new = rng.choice(_TEXTS)
    m.set_data(new)
    return f"{m.name}: {_short(new, 30)}"


_ZIP_OPS = [
    ("text-member", 3, _zip_text_member),
    ("crossover", 5, _zip_crossover),
    ("rename", 6, _zip_rename),
    ("duplicate", 5, _zip_duplicate),
    ("truncate", 5, _zip_truncate),
    ("drop", 6, _zip_drop),
    ("recompress", 5, _zip_recompress),
    ("bomb", 1, _zip_bomb),
    ("add", 4, _zip_add),
    ("shuffle", 2, _zip_shuffle),
    ("layout", 3, _zip_layout),
    ("nested", 6, _zip_nested),
]


# ---------------------------------------------------------------------------- weights and pickles


def _weight_members(case: Case) -> list[tuple[str, Member]]:
    """(label, member) for raw tensor bytes: PT2 weight files and nested ``data/<key>`` storages."""
    out = []
    for m in case.members:
        if ("/data/weights/" in m.name or "/data/constants/" in m.name) and not m.name.endswith((".json", ".pt")):
            out.append((m.name, m))
        inner = m.inner()
        if inner:
            for i in inner:
                if re.search(r"/data/[^/]+$", i.name):
                    out.append((f"{m.name}!{i.name}", i))
    return out


def _weight_bytes(rng, case):
    ws = _weight_members(case)
    if not ws:
        return None
    label, m = rng.choice(ws)
    data = m.data()
    r = rng.random()
    if r < 0.3:
        n = rng.choice([0, 1, max(0, len(data) - 1), len(data) // 2, max(0, len(data) - 4)])
        m.set_data(data[:n])
        return f"{label}: truncated {len(data)} -> {n}"
    if r < 0.55:
        extra = rng.choice([1, 3, 4, 8, len(data), 1 << 16])
        m.set_data(data + bytes(extra))
        return f"{label}: extended by {extra} bytes"
    if r < 0.8 and data:
        out = bytearray(data)
        for _ in range(rng.randint(1, 8)):
            out[rng.randrange(len(out))] ^= 1 << rng.randrange(8)
        m.set_data(bytes(out))
        return f"{label}: bits flipped"
    fill = rng.choice([b"\xff", b"\x7f\x80\x00\x00"[::-1], b"\x00\x00\xc0\x7f"])
    m.set_data((fill * (len(data) // len(fill) + 1))[: len(data)])
    return f"{label}: filled with {fill!r} (NaN / inf patterns)"


def _pickles(case: Case) -> list[tuple[str, Member]]:
    out = []
    for m in case.members:
        inner = m.inner()
        if inner:
            for i in inner:
                if i.name.endswith(".pkl"):
                    out.append((f"{m.name}!{i.name}", i))
    return out


def _ops(data: bytes) -> list[tuple[Any, Any, int, int]]:
    """(opcode, arg, pos, length) of each pickle opcode, as far as the stream parses."""
    out = []
    try:
        for op, arg, pos in pickletools.genops(data):
            out.append([op, arg, pos, 0])
    except Exception:  # a damaged stream (earlier mutation): keep the prefix that parsed
        pass
    for i, o in enumerate(out):
        o[3] = (out[i + 1][2] if i + 1 < len(out) else len(data)) - o[2]
    return [tuple(o) for o in out]


_GLOBALS = [
    ("os", "system"), ("posix", "system"), ("builtins", "eval"), ("torch._utils", "_rebuild_parameter"),
    ("torch", "FloatStorage"), ("torch", "BFloat16Storage"), ("torch", "Float8_e4m3fnStorage"),
    ("collections", "OrderedDict"), ("torch._utils", "_rebuild_tensor_v2"), ("torch", "Tensor"),
    ("__builtin__", "getattr"), ("torch.nn.modules.linear", "Linear"), ("numpy.core.multiarray", "_reconstruct"),
    ("copyreg", "_reconstructor"), ("torch", "LongStorage"), ("torch", "ComplexFloatStorage"), ("torch", "QInt8Storage"),
    ("torch._utils", "_rebuild_qtensor"), ("torch._utils", "_rebuild_sparse_tensor"), ("torch", "device"),
    ("torch._tensor", "_rebuild_from_type_v2"), ("torch.serialization", "_get_layout"), ("torch", "strided"),
    ("torch", "sparse_coo"), ("torch", "bfloat16"), ("torch", "UntypedStorage"),
    ("torch._utils", "_rebuild_wrapper_subclass"),
]


def _pickle_edit(rng, case):
    ps = _pickles(case)
    if not ps:
        return None
    label, m = rng.choice(ps)
    data = m.data()
    ops = _ops(data)
    if not ops:
        return None
    r = rng.random()
    ints = [o for o in ops if o[0].name in ("BININT", "BININT1", "BININT2", "LONG1", "INT", "LONG")]
    strs = [o for o in ops if o[0].name in ("BINUNICODE", "SHORT_BINUNICODE", "BINSTRING", "SHORT_BINSTRING", "UNICODE")]
    globs = [o for o in ops if o[0].name in ("GLOBAL", "INST")]
    if r < 0.35 and ints:
        op, arg, pos, n = rng.choice(ints)
        new = rng.choice([0, -1, 1, 2**31 - 1, 2**31, 2**32, 2**62, 2**63, -(2**63), 2**64, 10**30, 10**5000,
                          arg + 1, arg - 1, arg * 4096])
        m.set_data(data[:pos] + _p_int(new) + data[pos + n:])
        return f"{label}: {op.name} {arg} at byte {pos} -> {_short(new, 30)}"
    if r < 0.55 and strs:
        op, arg, pos, n = rng.choice(strs)
        new = rng.choice([s for (_, s, _, _) in strs if isinstance(s, str)] + ["../0", "999", "", "0" * 1000, "/etc/passwd",
                                                                             "cuda", "meta", "data/0", "\ud800", "0\x00", "FloatStorage"])
        m.set_data(data[:pos] + _p_str(new) + data[pos + n:])
        return f"{label}: string {_short(arg, 30)} at byte {pos} -> {_short(new, 30)}"
    if r < 0.7 and globs:
        op, arg, pos, n = rng.choice(globs)
        mod, name = rng.choice(_GLOBALS)
        m.set_data(data[:pos] + _p_global(mod, name) + data[pos + n:])
        return f"{label}: global {arg!r} at byte {pos} -> {mod}.{name}"
    if r < 0.8:
        op, arg, pos, n = rng.choice(ops)
        m.set_data(data[:pos] + data[pos + n:])
        return f"{label}: opcode {op.name} at byte {pos} deleted"
    if r < 0.88:
        op, arg, pos, n = rng.choice(ops)
        m.set_data(data[:pos] + data[pos:pos + n] * rng.choice([2, 3, 1000]) + data[pos + n:])
        return f"{label}: opcode {op.name} at byte {pos} repeated"
    if r < 0.95:
        n = rng.randrange(len(data))
        m.set_data(data[:n])
        return f"{label}: pickle truncated to {n} bytes"
    pos = rng.randrange(len(data))
    b = bytes([rng.randrange(256)])
    m.set_data(data[:pos] + b + data[pos:])
    return f"{label}: opcode byte {b!r} inserted at {pos}"


def _int_tuples(ops) -> list[list[tuple]]:
    """Tuples made only of integer opcodes (the size and stride tuples of tensor rebuilds), in
    stream order; each a list of the integer opcodes (opcode, arg, pos, length)."""
    out, run, after_mark = [], [], False
    fixed = {"TUPLE1": 1, "TUPLE2": 2, "TUPLE3": 3}
    for o in ops:
        name = o[0].name
        if name in ("BININT", "BININT1", "BININT2", "LONG1", "INT", "LONG"):
            run.append(o)
            continue
        if name in fixed and len(run) >= fixed[name]:
            out.append(run[-fixed[name]:])
        elif name == "TUPLE" and after_mark and run:
            out.append(run)
        after_mark = name == "MARK"
        run = []
    return out


def _splice_ints(data: bytes, edits: list[tuple[tuple, int]]) -> bytes:
    """Replace integer opcodes (from ``_ops``) with new values, last position first."""
    for (op, arg, pos, n), value in sorted(edits, key=lambda e: -e[0][2]):
        data = data[:pos] + _p_int(value) + data[pos + n:]
    return data


_HUGE_DIMS = [2**20, 2**31, 2**32, 2**40, 2**41, 2**62, 2**63 - 1, 10**30]


def _pickle_view(rng, case):
    """A pickled tensor rebuilt as a broadcast (stride-0) view of enormous logical size, or with
    negative / overflowing strides and offsets: size and stride tuples edited together."""
    ps = _pickles(case)
    if not ps:
        return None
    label, m = rng.choice(ps)
    data = m.data()
    ops = _ops(data)
    tuples = _int_tuples(ops)
    pairs = [(a, b) for a, b in zip(tuples, tuples[1:]) if len(a) == len(b) and a]
    if not pairs:
        return None
    sizes, strides = rng.choice(pairs)
    r = rng.random()
    if r < 0.5:
        i = rng.randrange(len(sizes))
        big = rng.choice(_HUGE_DIMS)
        m.set_data(_splice_ints(data, [(sizes[i], big), (strides[i], 0)]))
        return f"{label}: dim {i} of a tensor: size {big}, stride 0"
    if r < 0.7:
        big = rng.choice([2**10, 2**14, 2**20, 2**32])
        m.set_data(_splice_ints(data, [(o, big) for o in sizes] + [(o, 0) for o in strides]))
        return f"{label}: a tensor's sizes all {big}, strides all 0"
    if r < 0.85:
        i = rng.randrange(len(strides))
        v = rng.choice([-1, -(2**31), -(2**63), 2**63, 2**62])
        m.set_data(_splice_ints(data, [(strides[i], v)]))
        return f"{label}: stride {i} of a tensor -> {v}"
    i = rng.randrange(len(sizes))
    v = rng.choice([-1, -(2**63), 0, 2**63])
    m.set_data(_splice_ints(data, [(sizes[i], v)]))
    return f"{label}: size {i} of a tensor -> {v}"


def _is_meta(p, k, v) -> bool:
    return isinstance(v, dict) and isinstance(v.get("sizes"), list) and isinstance(v.get("strides"), list)


def _json_view(rng, case):
    """A tensor meta (payload config or tensor_values) made a stride-0 view of enormous size,
    or given negative / overflowing strides or offsets."""
    cfg_first = rng.random() < 0.6
    members = case.json_members()
    if cfg_first:
        members = [m for m in members if m.name.endswith("_config.json")] or members
    locs = []
    for m in members:
        locs += [(m, loc) for loc in _locations(m.json(), skip_metadata=True) if _is_meta(*loc[:2], loc[0][loc[1]])]
    if not locs:
        return None
    m, (parent, key, path) = rng.choice(locs)
    meta = parent[key]
    sizes, strides = meta["sizes"], meta["strides"]
    rank = min(len(sizes), len(strides))
    r = rng.random()
    if r < 0.5 and rank:
        i = rng.randrange(rank)
        big = rng.choice(_HUGE_DIMS)
        sizes[i], strides[i] = {"as_int": big}, {"as_int": 0}
        return f"{m.name}: {path}: dim {i} size {big}, stride 0"
    if r < 0.7:
        big = rng.choice([2**10, 2**14, 2**20, 2**32])
        n = rank or rng.choice([2, 3, 4])
        meta["sizes"] = [{"as_int": big} for _ in range(n)]
        meta["strides"] = [{"as_int": 0} for _ in range(n)]
        return f"{m.name}: {path}: sizes {n} x {big}, strides 0"
    if r < 0.85 and rank:
        i = rng.randrange(rank)
        v = rng.choice([-1, -(2**31), -(2**63), 2**63, 2**62])
        strides[i] = {"as_int": v}
        return f"{m.name}: {path}: stride {i} -> {v}"
    v = rng.choice([-1, 2**31, 2**62, 2**63, -(2**63)])
    meta["storage_offset"] = {"as_int": v}
    return f"{m.name}: {path}: storage_offset -> {v}"


def _laughs(depth: int, fan: int, container: bytes = b"l") -> bytes:
    """Opcodes leaving one value on the stack: ``depth`` levels each holding ``fan`` references to
    the level below (fan**depth leaves through shared references; a few hundred bytes)."""
    out = _p_str("lol") + b"q\x00" + b"0"
    for k in range(1, depth + 1):
        body = b"(" + (b"h" + bytes([k - 1])) * fan + container + b"q" + bytes([k])
        out += body + (b"0" if k < depth else b"")
    return out


def _pickle_bomb(rng, case):
    """A data.pkl replaced by (or given a state-dict entry holding) a pickle that is small but
    expensive: shared-reference fan-out, nesting deeper than Python's recursion, a huge memo index."""
    ps = _pickles(case)
    if not ps:
        return None
    label, m = rng.choice(ps)
    r = rng.random()
    if r < 0.5:
        depth = rng.choice([20, 30, 40, 60])
        fan = rng.choice([2, 3, 10])
        kind = rng.choice([b"l", b"t"])
        value = _laughs(depth, fan, kind)
        what = f"{'list' if kind == b'l' else 'tuple'} fan-out {fan}**{depth} through shared references"
    elif r < 0.75:
        n = rng.choice([2000, 10**5, 10**6])
        value = b"]" * n + b"a" * (n - 1)
        what = f"lists nested {n} deep"
    elif r < 0.9:
        value = b"]r" + struct.pack("<I", rng.choice([2**31 - 1, 2**32 - 1, 10**8]))
        what = "memo index past 10**8 (LONG_BINPUT)"
    else:
        n = rng.choice([10**5, 10**6])
        value = b"]" + b"2" * n + b"(" + b"l"  # DUP n times, then a list of them all
        what = f"a list of {n} DUP references"
    if rng.random() < 0.5:
        m.set_data(b"\x80\x02}" + _p_str("weight") + value + b"s.")
        return f"{label}: state dict entry holding {what}"
    m.set_data(b"\x80\x02" + value + b".")
    return f"{label}: pickle is {what}"


_WEIGHT_OPS = [
    ("weight-bytes", 5, _weight_bytes),
    ("pickle-edit", 8, _pickle_edit),
    ("pickle-view", 4, _pickle_view),
    ("json-view", 4, _json_view),
    ("pickle-bomb", 2, _pickle_bomb),
]


# ---------------------------------------------------------------------------- marker payloads


def _marker_pickle(rng, case):
    """A data.pkl (or a whole torch.save member) replaced by, or extended with, a code-running pickle."""
    desc, payload = rng.choice(marker_pickles())
    ps = _pickles(case)
    r = rng.random()
    if ps and r < 0.45:
        label, m = rng.choice(ps)
        m.set_data(payload)
        return f"{label}: replaced by pickle {desc}"
    if ps and r < 0.7:
        label, m = rng.choice(ps)
        data = m.data()
        if not data.endswith(b"."):
            return None
        body = _call("os", "system", _CMD) if rng.random() < 0.5 else _call("builtins", "exec", _PY_TOUCH)
        m.set_data(data[:-1] + body + b"0.")  # ... payload POP STOP: the state dict still comes back
        return f"{label}: os.system / exec REDUCE spliced in before STOP"
    return _marker_config(rng, case, payload, desc)


def _torch_save_zip(root: str, pkl: bytes) -> bytes:
    return build_zip([Member(f"{root}/data.pkl", pkl), Member(f"{root}/byteorder", b"little"),
                      Member(f"{root}/version", b"3\n")])


def _marker_config(rng, case, payload: bytes, desc: str):
    """PT2 raw-weights layout: a config entry switched to use_pickle and pointed at a payload member."""
    cfgs = [m for m in case.json_members() if m.name.endswith("_config.json")]
    entries = []
    for m in cfgs:
        tree = m.json()
        if isinstance(tree, dict) and isinstance(tree.get("config"), dict):
            entries += [(m, k) for k, v in tree["config"].items() if isinstance(v, dict)]
    if not entries:
        # no weights to hijack: add a pickled member where older layouts keep weights
        root = _root(case)
        name = rng.choice([f"{root}data/weights/model.pt", f"{root}data/constants/model.pt", "serialized_state_dict.pt"])
        case.members.append(Member(name, _torch_save_zip("archive", payload)))
        return f"added {name} holding pickle {desc}"
    m, key = rng.choice(entries)
    entry = m.json()["config"][key]
    entry["use_pickle"] = True
    path_name = entry.get("path_name") if isinstance(entry.get("path_name"), str) else "weight_0"
    folder = m.name.rsplit("/", 1)[0]
    target = f"{folder}/{path_name}"
    raw = payload if rng.random() < 0.5 else _torch_save_zip("archive", payload)
    for x in case.members:
        if x.name == target:
            x.set_data(raw)
            break
    else:
        case.members.append(Member(target, raw))
    return f"{m.name}: config[{key!r}] use_pickle=true, {target} holds pickle {desc}"


def _marker_expr(rng, case):
    """Shape expressions, range-constraint symbols, guards and targets replaced by Python code."""
    members = [m for m in case.json_members() if not m.name.endswith("_config.json")]
    if not members:
        return None
    m = rng.choice(members)
    tree = m.json()
    code = rng.choice(MARKER_EXPRESSIONS)
    locs = _locations(tree, skip_metadata=True)
    r = rng.random()
    exprs = [loc for loc in locs if _is_expr(*loc[:2], loc[0][loc[1]])]
    if r < 0.45 and exprs:
        parent, key, path = rng.choice(exprs)
        parent[key] = code
        return f"{m.name}: {path}: {_short(code)}"
    sizes = [loc for loc in locs if loc[1] == "sizes" and isinstance(loc[0][loc[1]], list) and loc[0][loc[1]]]
    if r < 0.7 and sizes:
        parent, key, path = rng.choice(sizes)
        parent[key][0] = {"as_expr": {"expr_str": code, "hint": {"as_int": 2}}}
        return f"{m.name}: {path}[0]: as_expr {_short(code)}"
    ranges = [loc for loc in locs if loc[1] == "range_constraints" and isinstance(loc[0][loc[1]], dict)]
    if r < 0.85 and ranges:
        parent, key, path = rng.choice(ranges)
        parent[key][code] = {"min_val": 1, "max_val": 64}
        return f"{m.name}: {path}: symbol {_short(code)}"
    guards = [loc for loc in locs if loc[1] == "guards_code" and isinstance(loc[0][loc[1]], list)]
    if guards:
        parent, key, path = rng.choice(guards)
        parent[key].append(_PY_TOUCH)
        return f"{m.name}: {path}: guard {_short(_PY_TOUCH)}"
    return None


def _marker_member(rng, case):
    """Native-code and pickle members where a careless reader would load them."""
    root = _root(case)
    desc, payload = rng.choice(marker_pickles())
    name = rng.choice([
        f"{root}data/sample_inputs/model.pt", f"{root}data/aotinductor/model/model.so",
        f"{root}data/custom_objects/model/obj_0", f"{root}data/executorch/model.pte", "serialized_example_inputs.pt",
    ])
    body = _torch_save_zip("archive", payload) if name.endswith(".pt") else payload
    for x in case.members:
        if x.name == name:
            x.set_data(body)
            return f"{name}: replaced by pickle {desc}"
    case.members.append(Member(name, body))
    return f"added {name} holding pickle {desc}"


_MARKER_OPS = [
    ("marker-pickle", 4, _marker_pickle),
    ("marker-expr", 3, _marker_expr),
    ("marker-member", 1, _marker_member),
]


# ---------------------------------------------------------------------------- bytes of the file


def _parse_cd(data: bytes):
    """(eocd offset, [central directory entry offsets]) of a zip, or None."""
    e = data.rfind(b"PK\x05\x06")
    if e < 0 or e + 22 > len(data):
        return None
    count, size, off = struct.unpack_from("<HII", data, e + 10)
    entries, p = [], off
    for _ in range(count):
        if p + 46 > len(data) or data[p:p + 4] != b"PK\x01\x02":
            break
        entries.append(p)
        n, x, c = struct.unpack_from("<HHH", data, p + 28)
        p += 46 + n + x + c
    return e, entries


_CD_FIELDS = {"flags": (8, "H"), "method": (10, "H"), "crc": (16, "I"), "csize": (20, "I"), "usize": (24, "I"),
              "namelen": (28, "H"), "extralen": (30, "H"), "commentlen": (32, "H"), "disk": (34, "H"), "lho": (42, "I")}
_LH_FIELDS = {"flags": (6, "H"), "method": (8, "H"), "crc": (14, "I"), "csize": (18, "I"), "usize": (22, "I"),
              "namelen": (26, "H"), "extralen": (28, "H")}
_EOCD_FIELDS = {"disk": (4, "H"), "cd_disk": (6, "H"), "entries_disk": (8, "H"), "entries": (10, "H"),
                "cd_size": (12, "I"), "cd_offset": (16, "I"), "comment_len": (20, "H")}


def _header_value(rng, old: int, fmt: str) -> int:
    top = 0xFFFF if fmt == "H" else 0xFFFFFFFF
    return rng.choice([0, 1, top, top - 1, (old + 1) & top, (old - 1) & top, (old * 2) & top, old ^ 1, old ^ 8,
                       old | 1, old | 0x40, 12, 14, 99, rng.randrange(top + 1)])


def _patch(data: bytes, off: int, fmt: str, value: int) -> bytes:
    b = bytearray(data)
    struct.pack_into("<" + fmt, b, off, value)
    return bytes(b)


def _header_field(rng, case):
    """A central-directory, local-header or end-of-directory field of the finished zip set to a lie."""
    where = rng.choice(["cd", "cd", "lh", "eocd"])
    k = rng.random()
    table = {"cd": _CD_FIELDS, "lh": _LH_FIELDS, "eocd": _EOCD_FIELDS}[where]
    field_name = rng.choice(sorted(table))
    seed = rng.getrandbits(32)

    def op(data: bytes, where=where, field_name=field_name, k=k, seed=seed) -> bytes:
        parsed = _parse_cd(data)
        if not parsed:
            return data
        eocd, entries = parsed
        r = random.Random(seed)
        rel, fmt = table[field_name]
        if where == "eocd":
            base = eocd
        elif not entries:
            return data
        else:
            cd = entries[int(k * len(entries))]
            base = cd if where == "cd" else struct.unpack_from("<I", data, cd + 42)[0]
        if base + rel + struct.calcsize(fmt) > len(data):
            return data
        old = struct.unpack_from("<" + fmt, data, base + rel)[0]
        return _patch(data, base + rel, fmt, _header_value(r, old, fmt))

    case.file_ops.append(op)
    return f"{where} header field {field_name} of entry #{k:.2f} patched (rng {seed})"


def _flip_bytes(rng, case):
    n = rng.choice([1, 1, 2, 4, 16, 64])
    seed = rng.getrandbits(32)

    def op(data: bytes, n=n, seed=seed) -> bytes:
        r = random.Random(seed)
        b = bytearray(data)
        for _ in range(n):
            b[r.randrange(len(b))] ^= 1 << r.randrange(8)
        return bytes(b)

    case.file_ops.append(op)
    return f"{n} bit(s) flipped anywhere (rng {seed})"


def _truncate_file(rng, case):
    frac = rng.random()
    case.file_ops.append(lambda data, frac=frac: data[: int(len(data) * frac)])
    return f"file truncated to {frac:.3f} of its length"


def _frame_file(rng, case):
    junk = rng.choice([b"\x00" * 100, b"PK\x03\x04", b"MZ" + b"\x00" * 62, b"#!/bin/sh\n"])
    if rng.random() < 0.5:
        case.file_ops.append(lambda data, junk=junk: junk + data)
        return f"{len(junk)} bytes prepended"
    case.file_ops.append(lambda data, junk=junk: data + junk)
    return f"{len(junk)} bytes appended"


_BYTE_OPS = [
    ("header-field", 6, _header_field),
    ("flip", 4, _flip_bytes),
    ("truncate-file", 1, _truncate_file),
    ("frame", 1, _frame_file),
]


def _family(ops):
    def fn(rng, case):
        name, op = _pick(rng, ops)
        desc = op(rng, case)
        return f"{name}: {desc}" if desc else None

    return fn


_MUTATIONS = [
    ("json", 50, _family(_JSON_OPS)),
    ("zip", 15, _family(_ZIP_OPS)),
    ("tensor", 15, _family(_WEIGHT_OPS)),
    ("marker", 8, _family(_MARKER_OPS)),
    ("bytes", 8, _family(_BYTE_OPS)),
]
