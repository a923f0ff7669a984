"""torch's OpInfo suite as the front end's conformance test, on a CI subset: scripts/conformance_opinfo.py's
runner over ``select_entries(op_db, 60)`` (spread over the op families: namespace and OpInfo class), one
sample each, float32 and int64 (``--ci``), through ``to_onnx`` + ONNX Runtime, ``to_tflite`` + LiteRT and
``to_pte`` + ExecuTorch's runtime (where executorch is installed), each case in a worker process.

Right or refused: no case may be silently wrong or loud (a traceback out of pt2x, a file a runtime
rejects, a crash, a timeout); the refusals only shrink: a refusal not in ``opinfo_known_refused.txt``
fails the test (a listed case that now converts is fine: remove its line). Regenerate the list with
``python -m scripts.conformance_opinfo --ci --jobs 2 --write-known tests/converters/opinfo_known_refused.txt``.
"""

from __future__ import annotations

import importlib.util
import os
from collections import Counter

import pytest
from workshop import load_script

pytest.importorskip("ai_edge_litert", reason="LiteRT runs the converted files")
pytest.importorskip("onnxruntime", reason="ONNX Runtime runs the converted files")
pytest.importorskip("expecttest", reason="torch's OpInfo database imports it")

KNOWN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "opinfo_known_refused.txt")
conformance = load_script("conformance_opinfo")
HAS_EXECUTORCH = importlib.util.find_spec("executorch") is not None
COLUMNS = ("onnx", "tflite", "pte") if HAS_EXECUTORCH else ("onnx", "tflite")
MIN_CASES = 80  # cases the subset runs (not skipped by torch itself): it must not pass by running nothing
MIN_PTE_MATCHES = 10  # of them, pte matches (set below the count at the time, so a new refusal fails the list first)


def _known() -> set[str]:
    with open(KNOWN, encoding="utf-8") as f:
        return {line.strip() for line in f if line.strip() and not line.startswith("#")}


@pytest.fixture(scope="module")
def results():
    c = conformance
    names, dtypes_of = c.plan(entries=c.CI_ENTRIES, dtypes=c.CI_DTYPES)
    return c.run_cases(names, dtypes_of, samples=c.CI_SAMPLES, jobs=2, columns=COLUMNS)


def test_the_subset_runs(results):
    ran = [r for r in results if not r.skipped]
    assert len(ran) >= MIN_CASES, f"{len(ran)} cases ran: {Counter(r.skipped[:60] for r in results if r.skipped)}"
    assert len({r.family for r in ran}) >= 8, "the subset covers few op families"


def test_no_case_is_silently_wrong_or_loud(results):
    bad = [f"{r.case} [{col}] {r.cls[col]} ({r.desc[:100]}): {r.detail.get(col, '')[:1500]}"
           for r in results for col in COLUMNS if r.cls.get(col) in ("wrong", "loud")]
    assert not bad, f"{len(bad)} cases silently wrong or loud:\n" + "\n".join(bad)


def test_refusals_only_shrink(results):
    new = [line for line in conformance.refused_lines(results) if line not in _known()]
    details = {f"{r.case} {col}": r.detail.get(col, "") for r in results for col in COLUMNS}
    assert not new, (
        f"{len(new)} refusals not in {os.path.relpath(KNOWN)}: convert them, or add them to the list "
        f"(python -m scripts.conformance_opinfo --ci --jobs 2 --write-known {os.path.relpath(KNOWN)})\n"
        + "\n".join(f"{line}: {details[line][:400]}" for line in new))


@pytest.mark.skipif(not HAS_EXECUTORCH, reason="executorch is not installed (pip install executorch==1.5.1): "
                                               "the pte column runs the files in its runtime")
def test_the_pte_column_runs(results):
    """Every case the subset runs has a pte class, and some convert and match: the column is not all refusals."""
    ran = [r for r in results if not r.skipped]
    assert all("pte" in r.cls for r in ran), [r.case for r in ran if "pte" not in r.cls][:5]
    matched = sum(r.cls["pte"] == "match" for r in ran)
    assert matched >= MIN_PTE_MATCHES, f"{matched} pte matches"
