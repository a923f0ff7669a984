"""ONNX's own backend node tests (a stratified subset under tests/fixtures/onnx_node/, copied out
of the onnx 1.22.0 wheel) through ``to_tflite`` and LiteRT, with scripts/conformance_onnx.py's
runner: every case in worker processes (a LiteRT abort kills a worker, not the test), LiteRT with
XNNPACK as shipped and with no default delegate, the model as stored and with every input but the
first as a constant.

Right or refused: no case may be silently wrong, abort, be rejected by LiteRT, time out or leave
``to_tflite`` with anything but ``UnsupportedOpsError``/``ConversionError``; every refusal names an
op of the model; the matches do not fall below ``MATCH_FLOOR``. The cases that break this today are
listed in ``KNOWN_BAD`` and ``KNOWN_UNNAMED_REFUSALS``: a listed case that behaves otherwise fails the
test too (so the lists only shrink: remove the entry when it is fixed), and so does any case not listed.
"""

from __future__ import annotations

import os
from collections import Counter

import pytest
from paths import FIXTURES
from workshop import load_script

pytest.importorskip("ai_edge_litert", reason="LiteRT runs the converted files")
pytest.importorskip("onnx", reason="the cases are ONNX models")

CASES = os.path.join(FIXTURES, "onnx_node")
conformance = load_script("conformance_onnx")

# (case, mode, LiteRT variant) -> the class it shows today. mode: "plain" (the model as stored) or
# "const-inputs" (inputs 1.. as initializers); variant: "xnnpack" (as shipped) or "builtin" (no
# default delegate). Remove an entry when its case is fixed (the test fails until you do).
KNOWN_BAD: dict[tuple[str, str, str], str] = {}
_both = ("xnnpack", "builtin")
for _mode in ("plain", "const-inputs"):
    # the qk_matmul output of a fully masked row: NaN where -inf is stored, without the delegate only.
    # ONNX Runtime disagrees with the stored output here as well.
    for _c in ("test_attention_4d_with_past_and_present_qk_matmul_bias_3d_mask_causal_expanded",
               "test_attention_4d_with_past_and_present_qk_matmul_bias_4d_mask_causal_expanded"):
        KNOWN_BAD[(_c, _mode, "builtin")] = "wrong"
    # ReduceLogSumExp of no elements: LiteRT's builtin kernels give NaN where ONNX gives -inf (XNNPACK matches)
    KNOWN_BAD[("test_reduce_log_sum_exp_empty_set", _mode, "builtin")] = "wrong"
# Gather with negative indices computed at run time: LiteRT's GATHER refuses them at invoke
KNOWN_BAD.update({("test_gather_negative_indices", "plain", v): "rejected_at_invoke" for v in _both})

# (case, mode): refusals whose message names no op of the model. Remove an entry when it does.
KNOWN_UNNAMED_REFUSALS: set[tuple[str, str]] = set()

# matches (the model as stored, LiteRT as shipped) on the subset when this was written: raise it as fixes land
MATCH_FLOOR = 236


@pytest.fixture(scope="module")
def results():
    source = conformance.DirCases(CASES)
    names = source.names()
    assert len(names) > 200, f"the subset under {CASES} has {len(names)} cases"
    out = {}
    for const in (False, True):
        for r in conformance.run_cases(source, names, jobs=2, const_inputs=const, ort=False):
            out[(r.case, r.mode)] = r
    return out


def _observed(results):
    for (case, mode), r in sorted(results.items()):
        yield (case, mode, "xnnpack"), r.cls, r.detail, r
        yield (case, mode, "builtin"), r.cls_builtin, r.detail_builtin, r


def test_no_case_is_silently_wrong_aborts_or_escapes(results):
    new, fixed, changed = [], [], []
    for key, cls, detail, r in _observed(results):
        assert cls in conformance.CLASSES, f"{key}: class {cls!r}"
        known = KNOWN_BAD.get(key)
        if cls in ("match", "refused"):
            if known:
                fixed.append(f"{key}: now {cls} (was {known}): remove it from KNOWN_BAD")
        elif known is None:
            tb = r.extra.get("traceback", "")
            new.append(f"{key} [{r.family}]: {cls}: {detail[:400]}{chr(10) + tb[-1500:] if tb else ''}")
        elif known != cls:
            changed.append(f"{key}: now {cls} (listed as {known}): {detail[:300]}")
    assert not new, f"{len(new)} cases wrong, aborting, rejected by LiteRT or escaping:\n" + "\n".join(new)
    assert not changed, "\n".join(changed)
    assert not fixed, "\n".join(fixed)
    seen = {k for k, *_ in _observed(results)}
    assert not set(KNOWN_BAD) - seen, f"KNOWN_BAD names cases not in the subset: {sorted(set(KNOWN_BAD) - seen)}"


def test_every_refusal_names_the_op(results):
    unnamed, fixed = [], []
    for (case, mode), r in sorted(results.items()):
        listed = (case, mode) in KNOWN_UNNAMED_REFUSALS
        if r.refusal and not r.refusal["names_op"]:
            if not listed:
                unnamed.append(f"{case} ({mode}) ops {r.ops}: {r.refusal['message'][:300]}")
        elif listed:
            fixed.append(f"{case} ({mode}): now {r.cls}: remove it from KNOWN_UNNAMED_REFUSALS")
    assert not unnamed, f"{len(unnamed)} refusals name no op of the model:\n" + "\n".join(unnamed)
    assert not fixed, "\n".join(fixed)


def test_matches_do_not_fall_below_the_floor(results):
    counts = Counter(r.cls for (case, mode), r in results.items() if mode == "plain")
    assert counts["match"] >= MATCH_FLOOR, f"{counts['match']} matches, floor {MATCH_FLOOR}: {dict(counts)}"
    # every op family of the subset ran, and refusals of several kinds were exercised
    assert counts["refused"] > 50 and len({r.family for r in results.values()}) > 100
