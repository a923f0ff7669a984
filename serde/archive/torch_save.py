"""The records of a ``torch.save`` zip of tensors, torch-free: what ``legacy_layout`` puts in
``data/weights/<model>.pt`` and ``serialized_state_dict.pt``.

In order, as torch writes them (``torch/serialization.py``): ``archive/data.pkl`` (the pickle,
``codec.pickle_writer``), with torch >= 2.8 ``archive/.format_version`` (``1``) and
``archive/.storage_alignment`` (``64``), ``archive/byteorder`` (``little``), each storage's
bytes as ``archive/data/<key>`` in sorted key order, ``archive/version`` (``3\\n``), and last
``archive/.data/serialization_id``, a hash of the records before it (``package``'s). The zip
around the records (aligned, stored) is ``zip_writer``'s.
"""

from __future__ import annotations

from typing import Iterator

from ..codec.pickle_writer import Bytes, StoredTensor, tensor_pickle
from .package import with_serialization_id

__all__ = ["torch_save_records"]


def _records(entries: dict[str, StoredTensor], torch_2_8: bool) -> Iterator[tuple[str, Bytes]]:
    data, storages = tensor_pickle(entries)
    yield "archive/data.pkl", data
    if torch_2_8:
        yield "archive/.format_version", b"1"
        yield "archive/.storage_alignment", b"64"
    yield "archive/byteorder", b"little"
    for key in sorted(storages):
        yield f"archive/data/{key}", storages[key].storage
    yield "archive/version", b"3\n"


def torch_save_records(entries: dict[str, StoredTensor], *, torch_2_8: bool = True) -> list[tuple[str, Bytes]]:
    """The records, in order, of what ``torch.save(entries_as_tensors, buffer)`` writes (as torch 2.8+
    or as 2.6-2.7 write them)."""
    return list(with_serialization_id(_records(entries, torch_2_8), "archive/.data/serialization_id"))
