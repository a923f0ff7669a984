"""schema.dtypes, the one ScalarType table: complete, consistent with numpy and torch, and
ml_dtypes imported only for files that hold its types."""

from __future__ import annotations

import glob
import os
import subprocess
import sys

import numpy as np
import pytest

from paths import PT2_FIXTURES
from pt2x.schema import dtypes
from pt2x.schema.definitions import ScalarType


def test_every_scalar_type_has_one_row():
    assert {r.scalar_type for r in dtypes.ROWS} == set(ScalarType) - {ScalarType.UNKNOWN}
    assert len(dtypes.ROWS) == len(ScalarType) - 1
    for column in ("torch_name", "numpy_name", "storage_class"):
        values = [getattr(r, column) for r in dtypes.ROWS if getattr(r, column) is not None]
        assert len(values) == len(set(values)), column
    assert all(r.category in dtypes.CATEGORIES for r in dtypes.ROWS)
    with pytest.raises(ValueError):
        dtypes.row(ScalarType.UNKNOWN)
    assert dtypes.numpy_dtype(ScalarType.UNKNOWN) is None


@pytest.mark.parametrize("r", dtypes.ROWS, ids=lambda r: r.scalar_type.name)
def test_numpy_round_trip(r):
    assert dtypes.row(r.scalar_type) is r
    assert dtypes.by_torch_name(r.torch_name) is r
    if r.storage_class:
        assert dtypes.by_storage_class(r.storage_class) is r
    np_dtype = dtypes.numpy_dtype(r.scalar_type)
    if r.numpy_name is None:
        assert np_dtype is None
        return
    assert np_dtype.name == r.numpy_name
    assert np_dtype.itemsize == r.itemsize
    assert dtypes.by_numpy_name(r.numpy_name) is r
    assert dtypes.from_numpy(np_dtype) == r.scalar_type
    assert (np_dtype.type.__module__ != "numpy") == r.ml_dtypes


def test_numpy_categories():
    for r in dtypes.ROWS:
        np_dtype = dtypes.numpy_dtype(r.scalar_type)
        if np_dtype is None or r.ml_dtypes:
            continue
        assert np_dtype.kind in {"bool": "b", "int": "iu", "float": "f", "complex": "c"}[r.category], r


def test_from_numpy_refuses_foreign_byte_order_and_types():
    assert dtypes.from_numpy(np.dtype(">f4")) is None
    assert dtypes.from_numpy(np.dtype("U3")) is None
    assert dtypes.from_numpy(np.dtype("<f4")) == ScalarType.FLOAT


def test_torch_only_dtypes_are_not_rows():
    names = {r.torch_name for r in dtypes.ROWS}
    assert not names & dtypes.TORCH_ONLY_DTYPES
    assert set(dtypes.TORCH_ONLY_STORAGE_CLASSES.values()) <= dtypes.TORCH_ONLY_DTYPES


def test_matches_torch():
    torch = pytest.importorskip("torch")
    import warnings

    for r in dtypes.ROWS:
        t = getattr(torch, r.torch_name)
        assert isinstance(t, torch.dtype), r
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # complex32 is "experimental"
            assert torch.empty((), dtype=t).element_size() == r.itemsize, r
        category = "complex" if t.is_complex else "float" if t.is_floating_point else "bool" if t == torch.bool else "int"
        assert category == r.category, r
        if r.storage_class:
            assert getattr(torch, r.storage_class).dtype == t, r
    for name in dtypes.TORCH_ONLY_DTYPES:
        if hasattr(torch, name):
            assert isinstance(getattr(torch, name), torch.dtype), name
    for cls, name in dtypes.TORCH_ONLY_STORAGE_CLASSES.items():
        assert getattr(torch, cls).dtype == getattr(torch, name)


# ---------------------------------------------------------------- ml_dtypes only when needed

_LOAD = """
import sys
import pt2x.serde
from pt2x.tools.summary import archive_summary
with pt2x.serde.load(sys.argv[1]) as a:
    archive_summary(a)
    for m in a.models.values():
        for arr in m.state_dict.values():
            arr.sum() if arr.dtype.kind != "V" else None
print("ml_dtypes" in sys.modules)
"""


def _imports_ml_dtypes(path: str) -> bool:
    out = subprocess.run([sys.executable, "-c", _LOAD, path], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip() == "True"


def _fixtures(name: str) -> list[str]:
    found = sorted(glob.glob(os.path.join(PT2_FIXTURES, "torch-*", name)))
    assert found, name
    return found


@pytest.mark.parametrize("path", _fixtures("mlp_dynamic.pt2"), ids=lambda p: os.path.basename(os.path.dirname(p)))
def test_fp32_file_does_not_import_ml_dtypes(path):
    assert not _imports_ml_dtypes(path)


@pytest.mark.parametrize("path", _fixtures("bf16_linear.pt2"), ids=lambda p: os.path.basename(os.path.dirname(p)))
def test_bf16_file_imports_ml_dtypes(path):
    assert _imports_ml_dtypes(path)
