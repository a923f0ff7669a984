"""Padding, rolls and triangles on the pte target (``ops_pad.py``, ``ops_shape.py``): constant pads of
one to three dims (swin's window padding), reflect and replicate of 1-D and 2-D, roll by several
shifts, flip, tril, triu (of infinities: kept, never computed with); with a dynamic batch; each
exported at test time, converted where ``import torch`` fails and run in ExecuTorch's runtime
against eager."""

from __future__ import annotations

import pytest

pytest.importorskip("executorch", reason="executorch is not installed (pip install executorch==1.5.1): "
                                         "the .pte files are checked by running them in its runtime")

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from pte_parity import check, check_refused  # noqa: E402


def _x(b=2):
    return torch.randn(b, 3, 5, 4, generator=torch.Generator().manual_seed(b))


def test_constant_pads(tmp_path):
    def f(x):
        return F.pad(x, (0, 0, 0, 2, 0, 1)), F.pad(x, (1, 2), value=-1.5), torch.constant_pad_nd(x, [2, 1, 1, 0], 3.0)

    check(f, _x(), tmp_path=tmp_path, dynamic=True, runs=[(_x(1),), (_x(4),)])


def test_reflect_and_replicate(tmp_path):
    def f(x):
        return (F.pad(x, (1, 2, 2, 1), mode="reflect"), F.pad(x, (2, 0, 0, 3), mode="replicate"),
                F.pad(x[0], (1, 1), mode="reflect"), F.pad(x[0], (0, 2), mode="replicate"))

    check(f, _x(), tmp_path=tmp_path)


def test_roll_flip_tril_and_triu(tmp_path):
    def f(x):
        return (torch.roll(x, (-3, 2), (1, 2)), x.roll(1, -1), x.roll(7, 0), x.flip(1, 3), x.tril(), torch.tril(x, -1),
                x.triu(), torch.triu(x, 2), torch.triu(x.masked_fill(x > 1, float("inf")), -1), torch.triu(x > 0, 1),
                torch.full((x.shape[0], 4), float("-inf")).triu(1))

    check(f, _x(), tmp_path=tmp_path, dynamic=True, runs=[(_x(3),)])


def test_circular_and_cropping_pads_are_refused(tmp_path):
    check_refused(lambda x: F.pad(x, (1, 1, 1, 1), mode="circular"), _x(), tmp_path=tmp_path, match="circular")
    check_refused(lambda x: F.pad(x, (-1, 1)), _x(), tmp_path=tmp_path, match="negative pad")


def test_roll_of_the_flattened_tensor_is_refused(tmp_path):
    """1.5.1's roll.out fails at run time without a dim per shift."""
    check_refused(lambda x: torch.roll(x, 5), _x(), tmp_path=tmp_path, match="no dims")
