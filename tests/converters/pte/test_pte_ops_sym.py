"""Shape-symbol arithmetic on the pte target (``symbols.py``, ``ops_sym.py``): tensor dims that are
expressions of the batch (``4*s77``, ``s77 + 1``) planned at their largest value and computed at
run time, and ``_operator`` SymInt nodes as the runtime's integer prim ops; each program exported
with a dynamic batch, converted where ``import torch`` fails, run at several batches against eager."""

from __future__ import annotations

import pytest

from pt2x.converters.errors import Unsupported
from pt2x.converters.pte.symbols import upper_bound
from pt2x.serde.codec.symbolic import parse

pytest.importorskip("executorch", reason="executorch is not installed (pip install executorch==1.5.1): "
                                         "the .pte files are checked by running them in its runtime")

import torch  # noqa: E402

from pte_parity import check  # noqa: E402


def _x(b):
    return torch.randn(b, 4, 2, generator=torch.Generator().manual_seed(b))


def test_product_of_the_batch_in_a_view(tmp_path):
    """``x.shape[0] * 4`` (``_operator.mul``), a [4*s77, 2] tensor, and back."""
    def f(x):
        flat = torch.relu(x.reshape(x.shape[0] * 4, 2))
        return flat * 2, flat.reshape(-1, 8)

    check(f, _x(2), tmp_path=tmp_path, dynamic=True, runs=[(_x(1),), (_x(5),)])


def test_sum_and_difference_of_the_batch(tmp_path):
    """A cat that makes ``s77 + 1`` rows, a view by ``x.shape[0] + 1`` (``_operator.add``), a slice
    to ``s77 - 1`` rows, and ``_operator.sub``."""
    def f(x):
        y = torch.cat([x, x[:1]]).reshape(x.shape[0] + 1, 8)
        z = x[1:].reshape(x.shape[0] - 1, 8)
        return y.sum(1), z * 3

    check(f, _x(3), tmp_path=tmp_path, dynamic=True, runs=[(_x(2),), (_x(6),)])


def test_only_growing_expressions_are_planned():
    bounds = {"s0": 8, "s1": 3}
    assert upper_bound(parse("Mul(Integer(16), Symbol('s0', positive=True, integer=True))"), bounds, "t") == 128
    assert upper_bound(parse("s0*s1 + s0 - 1"), bounds, "t") == 31
    for text in ("s0 - s1", "FloorDiv(s0, 2)", "Max(s0, s1)", "-2*s0 + 20"):
        with pytest.raises(Unsupported, match="largest value is not planned"):
            upper_bound(parse(text), bounds, "t")
