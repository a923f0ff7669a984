"""The shared converter machinery (also used by the TFLite backend): torch's type promotion
checked against torch itself, argument binding, the registry, the program view."""

from __future__ import annotations

import itertools

import pytest
import torch

import onnx_zoo
from pt2x.converters.aten import registry
from pt2x.converters.aten.args import SymRef, TensorRef, bind
from pt2x.converters.aten.dtypes import ST, from_numpy, promote_types, result_type, to_numpy
from pt2x.converters.aten.graph import open_program

TORCH = {
    ST.BOOL: torch.bool, ST.BYTE: torch.uint8, ST.CHAR: torch.int8, ST.SHORT: torch.int16, ST.INT: torch.int32,
    ST.LONG: torch.int64, ST.HALF: torch.float16, ST.BFLOAT16: torch.bfloat16, ST.FLOAT: torch.float32,
    ST.DOUBLE: torch.float64, ST.COMPLEXHALF: torch.complex32, ST.COMPLEXFLOAT: torch.complex64, ST.COMPLEXDOUBLE: torch.complex128,
}
BACK = {v: k for k, v in TORCH.items()}


@pytest.mark.parametrize("a,b", [(a, b) for a, b in itertools.product(TORCH, TORCH)
                                 if ST.COMPLEXHALF not in (a, b)])
def test_promote_types_matches_torch(a, b):
    assert promote_types(a, b) == BACK[torch.promote_types(TORCH[a], TORCH[b])]


def _operand(kind, st):
    if kind == "dim":
        return st, torch.zeros(2, dtype=TORCH[st])
    if kind == "zero":
        return (st, 0), torch.zeros((), dtype=TORCH[st])
    v = {ST.BOOL: True, ST.LONG: 3, ST.FLOAT: 2.5, ST.COMPLEXFLOAT: 1j}[st]
    return v, v


@pytest.mark.parametrize("ka,kb", [("dim", "dim"), ("dim", "zero"), ("zero", "dim"), ("dim", "scalar"),
                                   ("zero", "scalar"), ("zero", "zero")])
def test_result_type_matches_torch(ka, kb):
    sts = [st for st in TORCH if st != ST.COMPLEXHALF]
    scalars = [ST.BOOL, ST.LONG, ST.FLOAT, ST.COMPLEXFLOAT]
    for a in (scalars if ka == "scalar" else sts):
        for b in (scalars if kb == "scalar" else sts):
            (oa, ta), (ob, tb) = _operand(ka, a), _operand(kb, b)
            try:
                want = BACK[torch.result_type(ta, tb)]
            except RuntimeError:  # combinations torch refuses (bfloat16 with complex)
                continue
            assert result_type(oa, ob) == want, (ka, a, kb, b)


def test_numpy_round_trip():
    for st in TORCH:
        if st == ST.COMPLEXHALF:  # numpy has no complex32
            continue
        assert from_numpy(to_numpy(st)) == st


def test_bind_names_defaults_and_positions():
    view, keep = open_program(onnx_zoo.saved("dynamic_reshape"))
    nodes = {n.name: n for n in view.nodes}
    s = bind(nodes["slice_2"], "self", "dim", "start", "end", "step", step=1)
    assert s.self == TensorRef("x") and s.dim == 1 and s.step == 2 and s[0] == TensorRef("x")
    r = bind(nodes["reshape"], "self", "shape")
    assert r.shape == [SymRef("mul")]
    m = bind(nodes["mul_1"], "a", "b")
    assert m[0] == SymRef("sym_size_int_5") and m.b == SymRef("add_1")
    assert bind(nodes["slice_1"], "self", "dim", "start", "end", step=1).step == 1


def test_program_view():
    view, keep = open_program(onnx_zoo.saved("buffer_mutation", True))
    assert [u.name for u in view.user_inputs] == ["x"]
    assert {w.fqn: w.kind for w in view.weights.values()} == {"steps": "buffer", "scratch": "buffer"}
    assert [m.target for m in view.mutations] == ["steps"]
    view, keep = open_program(onnx_zoo.saved("dynamic_reshape"))
    sources = view.symbol_sources()
    assert set(sources) == set(view.ranges) and all(inp == "x" for inp, _ in sources.values())
    assert view.producer["reshape"].name == "reshape"
    assert [n.name for n in view.consumers["x"]][:2] == ["sym_size_int_4", "reshape"]


def test_registry_keys_and_overrides():
    assert registry.canonical("torch.ops.aten.add.Tensor") == "aten.add.Tensor"
    assert registry.canonical("_operator.mul") == "_operator.mul"
    fn = lambda ctx, node: None  # noqa: E731
    registry.register("test-backend", "torch.ops.x.y.default", fn)
    try:
        assert registry.get("test-backend", "x.y.default") is fn
        with pytest.raises(ValueError):
            registry.register("test-backend", "x.y.default", lambda ctx, node: None)
        registry.register("test-backend", "x.y.default", fn, override=True)
        assert registry.targets("test-backend") == ["x.y.default"]
    finally:
        registry.unregister("test-backend", "x.y.default")
