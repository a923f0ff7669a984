"""Cross-release: every .pt2 fixture written by torch 2.5.1 ... 2.15.0 converts to a .pte where
``import torch`` fails, and ExecuTorch's runtime reproduces the eager outputs torch stored beside
it; a program with a dynamic batch also at its smallest and largest batch, against torch eager of
the loaded program. A fixture the target refuses must be listed in ``REFUSED`` with the reason's
words, so a refusal is a decision, never a quiet skip."""

from __future__ import annotations

import glob
import os

import numpy as np
import pytest

pytest.importorskip("executorch", reason="executorch is not installed (pip install executorch==1.5.1): "
                                         "the .pte files are checked by running them in its runtime")

import torch  # noqa: E402

import pte_zoo  # noqa: E402
from paths import PT2_FIXTURES  # noqa: E402
from tolerances import assert_close  # noqa: E402

from pt2x.converters.errors import ConversionError  # noqa: E402
from pt2x.serde.torch.api import load_exported_program  # noqa: E402

CASES = sorted(glob.glob(os.path.join(PT2_FIXTURES, "torch-*", "*.pt2")))

# case -> words of the refusal every release's file gets
REFUSED: dict[str, str] = {
}
# case -> the stored inputs that are constants of the program (a kwarg torch baked in at export)
CONSTANT_INPUTS = {"dict_inputs": {2}}


def _id(path: str) -> str:
    return os.path.relpath(path, PT2_FIXTURES)[:-4]


def _inputs(ref, bf16: set[int], constants: set[int]) -> list[torch.Tensor]:
    ins = sorted((k for k in ref.files if k.startswith("in_")), key=lambda k: int(k[3:]))
    return [torch.from_numpy(ref[k]).to(torch.bfloat16) if i in bf16 else torch.from_numpy(ref[k])
            for i, k in enumerate(ins) if i not in constants]


def _np(t: torch.Tensor) -> np.ndarray:
    return (t.float() if t.dtype == torch.bfloat16 else t).numpy()


@pytest.mark.parametrize("path", CASES, ids=[_id(p) for p in CASES])
def test_fixture_converts_and_matches_stored_outputs(path):
    case = os.path.basename(path)[:-4]
    if case in REFUSED:
        with pytest.raises(ConversionError, match=REFUSED[case]):
            pte_zoo.convert_torch_free("to_pte", path)
        return
    data = pte_zoo.convert_torch_free("to_pte", path)
    ref = np.load(path[:-4] + ".npz")
    bf16 = {0} if case == "bf16_linear" else set()  # torch stored its bfloat16 input as float32
    got = pte_zoo.run(data, _inputs(ref, bf16, CONSTANT_INPUTS.get(case, set())))
    outs = sorted((k for k in ref.files if k.startswith("out_")), key=lambda k: int(k[4:]))
    assert len(got) == len(outs), f"{_id(path)}: {len(got)} outputs, torch stored {len(outs)}"
    for k, g in zip(outs, got):
        # bf16_linear's float32 output is a cast of a bfloat16 linear: held to bfloat16's tolerance
        dtype = "bfloat16" if g.dtype == torch.bfloat16 or bf16 else ref[k].dtype
        assert_close(_np(g), ref[k], dtype, what=f"{_id(path)} {k}")


DYNAMIC = [p for p in CASES if os.path.basename(p) == "mlp_dynamic.pt2"]


@pytest.mark.parametrize("path", DYNAMIC, ids=[_id(p) for p in DYNAMIC])
def test_dynamic_batch_fixture_at_its_bounds(path):
    """``Dim("batch", min=1, max=64)``: the .pte planned at 64 runs batch 1 and 64."""
    data = pte_zoo.convert_torch_free("to_pte", path)
    m = load_exported_program(path).module()  # pt2x's bridge: torch 2.13 reads no schema 7.x file itself
    torch.manual_seed(0)
    for batch in (1, 64):
        x = torch.randn(batch, 8)
        (got,) = pte_zoo.run(data, [x])
        with torch.no_grad():
            want = m(x)
        assert_close(got.numpy(), want.numpy(), "float32", what=f"{_id(path)} batch {batch}")


CONDS = [p for p in CASES if os.path.basename(p) == "cond.pt2"]


@pytest.mark.parametrize("path", CONDS, ids=[_id(p) for p in CONDS])
def test_cond_fixture_takes_each_branch(path):
    """``torch.cond(x.sum() > 0, sin, cos + 1)``: inputs that take each branch, in turn on one loaded
    method, against torch eager of the loaded program."""
    from executorch.runtime import Runtime

    data = pte_zoo.convert_torch_free("to_pte", path)
    m = load_exported_program(path).module()
    method = Runtime.get().load_program(data).load_method("forward")
    torch.manual_seed(0)
    for x in (torch.rand(4), -torch.rand(4), torch.rand(4)):
        (got,) = method.execute([x])
        with torch.no_grad():
            want = m(x)
        assert_close(got.numpy(), want.numpy(), "float32", what=f"{_id(path)} sum {float(x.sum()):+.2f}")
