"""One operator program against eager on the pte target: ``check(fn, *args, tmp_path=...)`` exports
``fn(*args)`` with torch (``op_parity.Fn``), saves it, converts it with ``to_pte`` where ``import
torch`` fails, runs it in ExecuTorch's runtime and compares every output with eager (dtype and
shape equal, values under ``tolerances.assert_close``: ``op_parity.assert_outputs``). Shared by the
pte operator tests (``tests/converters/pte/test_pte_ops_*.py``).

``dynamic``: dim 0 of every argument of rank >= 1 left to torch (``Dim.AUTO``); ExecuTorch plans a
dynamic tensor at its upper bound, so each symbol torch leaves unbounded is given ``max_dim``
(``to_pte(max_dims=)``). ``runs``: other argument tuples (other sizes of that dim) run on the same
file."""

from __future__ import annotations

import os

import pytest
import torch

from op_parity import Fn, assert_outputs, eager
from pte_zoo import run
from torchfree import convert_torch_free

__all__ = ["export", "check", "check_refused"]

_UNBOUNDED = 2**62


def export(fn, args, dynamic: bool = False) -> torch.export.ExportedProgram:
    shapes = (tuple({0: torch.export.Dim.AUTO} if a.dim() else {} for a in args),) if dynamic else None
    return torch.export.export(Fn(fn), tuple(args), dynamic_shapes=shapes)


def _upper(r) -> int:
    """A range constraint's upper bound, ``_UNBOUNDED`` for torch's ``int_oo``."""
    try:
        return int(r.upper)
    except (TypeError, ValueError, OverflowError, AttributeError):
        return _UNBOUNDED


def _converted(fn, args, tmp_path, dynamic: bool, max_dim: int, name: str) -> bytes:
    ep = export(fn, args, dynamic)
    path = os.path.join(str(tmp_path), f"{name}.pt2")
    torch.export.save(ep, path)
    bounds = {str(s): max_dim for s, r in ep.range_constraints.items() if _upper(r) >= _UNBOUNDED}
    return convert_torch_free("to_pte", path, **({"max_dims": bounds} if bounds else {}))


def check(fn, *args, tmp_path, dynamic: bool = False, runs=(), max_dim: int = 16, scale: float = 1.0,
          name: str = "case") -> bytes:
    """``fn(*args)``, and ``fn`` of each tuple of ``runs``, through ``to_pte`` and ExecuTorch's runtime
    equals eager; returns the .pte."""
    data = _converted(fn, args, tmp_path, dynamic, max_dim, name)
    for xs in (args, *runs):
        want = eager(fn, xs)
        got = [t.numpy() for t in run(data, [a.clone() for a in xs])]
        assert_outputs(got, want, f"pte {tuple(tuple(a.shape) for a in xs)}", scale)
    return data


def check_refused(fn, *args, tmp_path, match: str, dynamic: bool = False) -> None:
    """``to_pte`` refuses ``fn(*args)`` with an ``UnsupportedOpsError`` whose report matches ``match``."""
    from pt2x.converters.errors import UnsupportedOpsError

    with pytest.raises(UnsupportedOpsError, match=match):
        _converted(fn, args, tmp_path, dynamic, 16, "refused")
