"""The aliases the front end writes once (``converters/aten/aliases.py``), checked with torch:
a renamed overload takes the arguments of the overload it is (same names, types, keyword-only
and defaults; the base may add keyword arguments with defaults), and every alias, with its
in-place overload, reaches a lowering."""

from __future__ import annotations

import pytest
import torch

from pt2x.converters.aten import aliases, registry
from pt2x.converters.onnx.converter import _load_lowerings


def _schema(target: str):
    ns, op, overload = target.split(".")
    return getattr(getattr(getattr(torch.ops, ns), op), overload)._schema


@pytest.mark.parametrize("alias,base", sorted(aliases.RENAMES.items()))
def test_a_rename_takes_its_bases_arguments(alias, base):
    a, b = _schema(alias), _schema(base)
    by_name = {x.name: x for x in b.arguments}
    for x in a.arguments:
        y = by_name.get(x.name)
        assert y is not None, f"{base} has no argument {x.name}"
        assert (str(x.real_type), x.kwarg_only) == (str(y.real_type), y.kwarg_only), (alias, x.name)
        assert repr(x.default_value) == repr(y.default_value), (alias, x.name)
    extra = [y for y in b.arguments if y.name not in {x.name for x in a.arguments}]
    assert all(y.has_default_value() for y in extra), (base, [y.name for y in extra])
    assert len(a.returns) == len(b.returns) == 1


@pytest.mark.parametrize("alias", aliases.targets())
def test_every_alias_reaches_a_lowering(alias):
    _load_lowerings()
    assert registry.get("onnx", alias) is not None
    assert alias not in registry.targets("onnx")  # derived, not registered
