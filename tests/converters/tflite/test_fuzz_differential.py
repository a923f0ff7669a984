"""fuzz/fuzz_differential.py at a fixed seed: random single-op ONNX models and
conv/pool/elementwise/transpose chains, ONNX Runtime vs ``to_tflite`` in LiteRT, in worker
processes (a LiteRT abort is a finding, not a dead test). A clean refusal is fine; a divergence,
an abort, a file LiteRT rejects or an escape from pt2x is a finding.

The findings of today are listed in ``KNOWN_FINDINGS`` (shrink-only: a listed case that no longer
finds anything fails the test until its entry is removed); any other finding fails it.
"""

from __future__ import annotations

import pytest
from workshop import load_script

pytest.importorskip("ai_edge_litert", reason="LiteRT runs the converted files")
pytest.importorskip("onnxruntime", reason="ONNX Runtime is the reference")

SEED, N = 0, 250  # fixed: the same cases on every run, CI or not

fuzz = load_script("fuzz_differential")

# (seed, index) -> the finding it shows today. Replay one with
# `python -m fuzz.fuzz_differential --replay SEED:INDEX`; remove the entry when it is fixed.
KNOWN_FINDINGS: dict[tuple[int, int], str] = {}


def test_fixed_seed_has_no_new_finding():
    results = fuzz.run_fuzz(SEED, N, jobs=2)
    assert len(results) == N
    outcomes = {(r.seed, r.index): r for r in results}
    new = [f"{k} {r.kind} {r.what}: {r.outcome}: {r.detail[:300]} (replay: --replay {k[0]}:{k[1]})"
           for k, r in outcomes.items() if r.outcome in fuzz.FINDINGS and KNOWN_FINDINGS.get(k) != r.outcome]
    gone = [f"{k}: now {outcomes[k].outcome} (listed as {v}): remove it from KNOWN_FINDINGS"
            for k, v in KNOWN_FINDINGS.items() if outcomes[k].outcome != v]
    assert not new, f"{len(new)} findings:\n" + "\n".join(new)
    assert not gone, "\n".join(gone)
    # the cases ran: most converted and matched ONNX Runtime, few were invalid or generator bugs
    counts = {o: sum(r.outcome == o for r in results) for o in ("match", "invalid", "generror")}
    assert counts["match"] > N * 0.8 and counts["generror"] == 0, counts


def test_attribute_table_matches_the_schemas():
    """Every attribute the fuzzer draws exists in the op's OpSchema, and every op it draws has a recipe."""
    for op in fuzz.OPS:
        schema = fuzz._schema(op)
        for name in fuzz.ATTRS.get(op, {}):
            assert name in schema.attributes, f"{op}: {name}"
        assert op in fuzz.UNARY + fuzz.BINARY + fuzz.REDUCE or op in fuzz._OTHER, op
