"""Weights and constants of the PT2 layout (torch >= 2.10): payload configs + raw storage members.

``data/weights/<model>_weights_config.json`` maps each FQN to a ``PayloadMeta``: the
member holding its storage bytes (``path_name``, shared by tensors on one storage) and
the tensor's metadata. Raw members become strided views; pickled ones (``use_pickle``:
tensor subclasses), custom objects and opaque objects are listed as not loaded.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import numpy as np

from ...schema import definitions as d
from ..errors import ArchiveError, Pt2FormatError, TensorDataError
from ..codec.json_codec import DecodeReport, loads
from ..codec.tensor_view import ViewBudget
from .tensor_data import fake_zeros, numpy_dtype, strided_view
from .zip_reader import ZipReader

__all__ = ["NotLoaded", "read_payloads", "describe_member", "lazy_reason", "member_globals", "pickle_bytes"]

_PLAIN_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.\-]{0,254}")


class NotLoaded:
    """A member pt2x saw but did not load, and why (pickles run code under torch; native code never runs).

    Immutable, compared and hashed by (member, kind, reason, fqn). ``reason`` may be given as
    a function of no arguments: it is called once, on first use, so a load does not scan a
    pickled member (nor import the pickle scanner) that nobody asks about. ``Pt2Archive.close``
    settles every pending reason while the archive's bytes are still mapped."""

    __slots__ = ("member", "kind", "fqn", "_reason")

    member: str
    kind: str  # sample_inputs | pickled_tensor | custom_object | opaque_object | native_code | pickle
    fqn: str | None

    def __init__(self, member: str, kind: str, reason: str | Callable[[], str], fqn: str | None = None):
        set_ = object.__setattr__
        set_(self, "member", member)
        set_(self, "kind", kind)
        set_(self, "fqn", fqn)
        set_(self, "_reason", reason)

    @property
    def reason(self) -> str:
        r = self._reason
        if not isinstance(r, str):
            r = r()
            object.__setattr__(self, "_reason", r)
        return r

    def settle(self) -> None:
        """Compute a pending reason now (before the bytes it describes go away)."""
        self.reason  # noqa: B018

    def __setattr__(self, name, value):
        raise AttributeError(f"NotLoaded is immutable: cannot set {name!r}")

    def __delattr__(self, name):
        raise AttributeError(f"NotLoaded is immutable: cannot delete {name!r}")

    def _key(self) -> tuple:
        return (self.member, self.kind, self.reason, self.fqn)

    def __eq__(self, other):
        if type(other) is not NotLoaded:
            return NotImplemented
        return self._key() == other._key()

    def __hash__(self):
        return hash(self._key())

    def __repr__(self) -> str:
        return f"NotLoaded(member={self.member!r}, kind={self.kind!r}, reason={self.reason!r}, fqn={self.fqn!r})"

    def __reduce__(self):
        return (NotLoaded, self._key())

    def as_dict(self) -> dict:
        return {"member": self.member, "kind": self.kind, "fqn": self.fqn, "reason": self.reason}


def describe_member(zr: ZipReader, member: str) -> str:
    """What a pickled member would import if torch loaded it (opcodes scanned, never run)."""
    from ..codec.pickle_reader import describe_globals

    try:
        return describe_globals(member_globals(zr, member))
    except Pt2FormatError as e:
        return f"unreadable ({e.reason})"


def lazy_reason(prefix: str, zr: ZipReader, member: str) -> Callable[[], str]:
    """A ``NotLoaded`` reason: ``prefix`` + ``describe_member``, computed on first use."""
    return lambda: prefix + describe_member(zr, member)


def member_globals(zr: ZipReader, member: str) -> list[str]:
    """The globals every pickle of ``member`` references (``pickle_globals(every_pickle=True)``
    over ``pickle_bytes``), scanned once per archive: loading describes the member and the
    code-bearing check reads it again. Raises ``Pt2FormatError`` when unreadable."""
    from ..codec.pickle_reader import pickle_globals

    if member not in zr.pickle_scans:
        try:
            zr.pickle_scans[member] = pickle_globals(pickle_bytes(zr, member), every_pickle=True)
        except Pt2FormatError as e:
            zr.pickle_scans[member] = e
    result = zr.pickle_scans[member]
    if isinstance(result, Pt2FormatError):
        raise result
    return list(result)


def pickle_bytes(zr: ZipReader, member: str) -> memoryview:
    """The pickle torch would unpickle for ``member``: its ``data.pkl`` when the member is a
    ``torch.save`` zip, else the member's bytes. Raises ``Pt2FormatError`` when unreadable."""
    from ..codec.pickle_reader import find_data_pkl

    data = zr.view(member)
    if bytes(data[:4]) == b"PK\x03\x04":
        inner = ZipReader(data, label=member)
        data = inner.view(find_data_pkl(inner.names))
    return data


def _concrete(values: list[d.SymInt], *, what: str, member: str, path: str) -> list[int]:
    out = []
    for v in values:
        if v.type != "as_int":
            raise TensorDataError(f"{what} is symbolic ({v.value.expr_str!r}); stored tensors need concrete sizes", member=member, path=path)
        out.append(v.value)
    return out


def read_payloads(
    zr: ZipReader, prefix: str, folder: str, config_name: str, report: DecodeReport
) -> tuple[dict[str, np.ndarray], d.PayloadConfig, list[NotLoaded], dict[str, str]]:
    """Arrays for every raw tensor of one config; returns (arrays, config, not_loaded, fqn -> member)."""
    config_member = prefix + folder + config_name
    config = loads(d.PayloadConfig, zr.view(config_member), member=config_member, report=report)
    arrays: dict[str, np.ndarray] = {}
    skipped: list[NotLoaded] = []
    members: dict[str, str] = {}
    budget = ViewBudget()
    for fqn, meta in config.config.items():
        path = f"config[{fqn!r}]"
        if not _PLAIN_NAME.fullmatch(meta.path_name) or meta.path_name in (".", ".."):
            raise ArchiveError(f"path_name {meta.path_name!r} is not a plain member name", member=config_member, path=path + ".path_name")
        member = prefix + folder + meta.path_name
        members[fqn] = member
        if member not in zr:
            raise ArchiveError(f"payload for {fqn!r} is missing", member=member, path=None)
        if meta.use_pickle:
            kind = "pickled_tensor"
            if meta.path_name.startswith("custom_obj_"):
                kind = "custom_object"
            elif meta.path_name.startswith("opaque_obj_"):
                kind = "opaque_object"
            skipped.append(NotLoaded(member, kind, lazy_reason(f"pickled {kind.replace('_', ' ')}, not loaded: ", zr, member), fqn))
            continue
        tm = meta.tensor_meta
        if tm is None:
            raise ArchiveError(f"raw payload for {fqn!r} has no tensor_meta", member=config_member, path=path + ".tensor_meta")
        dtype = numpy_dtype(tm.dtype, member=config_member, path=path + ".tensor_meta.dtype")
        sizes = _concrete(tm.sizes, what="size", member=config_member, path=path + ".tensor_meta.sizes")
        strides = _concrete(tm.strides, what="stride", member=config_member, path=path + ".tensor_meta.strides")
        (offset,) = _concrete([tm.storage_offset], what="storage_offset", member=config_member, path=path + ".tensor_meta.storage_offset")
        data = zr.view(member)
        if len(data) == 0 and 0 not in sizes:
            # torch writes no bytes for fake/meta tensors and rebuilds zeros; so do we (validate warns).
            arrays[fqn] = fake_zeros(dtype, sizes, strides, offset, member=config_member, path=path, budget=budget)
            continue
        arrays[fqn] = strided_view(data, dtype, sizes, strides, offset, member=member, path=path, budget=budget)
    return arrays, config, skipped, members
