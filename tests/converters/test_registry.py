"""The registry against torch and the signature table: every registered target names a real
operator, and each lowering's ``bind(node, "self", "other")`` calls agree with the table.

``bind`` fills every argument a node leaves out with torch's default from the generated
signature table (``converters/aten/signatures.py``; the table itself is checked against torch
by ``scripts/gen_signature_table.py --check``), so lowerings state no defaults. What the
table cannot answer is in the lowerings' source, which these tests read (``ast``: each
lowering's ``bind`` calls and those of the module-level helpers it calls): the positional names
(``order``) must be the schema's, and a default a lowering still states must be needed by one of
the targets reaching that call (one that lacks the argument, has no table entry, or whose
default is a torch object); a default that the table fills, or that torch always writes
(a required argument), for every target is an error.

A ``bind`` call reached by several targets (``view``/``reshape``, the dropouts, a helper
shared by the upsampling overloads) may name an argument that only some of them have: a
positional name is accepted for a target when that target has it at that position, or does not
have it at all while another target reaching the same call does.
"""

from __future__ import annotations

import ast
import functools
import inspect
import math
import operator
import sys
from collections import defaultdict

import pytest

from pt2x.converters.aten import registry, signatures
from pt2x.converters.onnx.converter import _load_lowerings
from pt2x.converters.pte.converter import _load_lowerings as _load_pte_lowerings

torch = pytest.importorskip("torch")
# ops_quantized's operators: quantized_decomposed (torch.ao) and torchao register on import
import torch.ao.quantization.fx._decomposed  # noqa: E402,F401
pytest.importorskip("torchao.quantization.quant_primitives", reason="torchao's operators (the test extra)")

NOT_IN_THIS_TORCH = {
    # target -> why it stays registered although torch 2.13 has no such overload
    "aten._adaptive_avg_pool1d.default": "kept for files from other torch builds; shares adaptive pooling",
    "aten._to_dim_order_copy.default": "ExecuTorch-style copy spelled under aten by some exporters",
    "aten.circular_pad1d.default": "circular padding op of other torch releases (2.13 decomposes it)",
    "aten.circular_pad2d.default": "circular padding op of other torch releases (2.13 decomposes it)",
    "aten.circular_pad3d.default": "circular padding op of other torch releases (2.13 decomposes it)",
    "aten.clone_.default": "no such overload in any torch release known to pt2x; harmless alias of clone",
    "aten.empty.default": "no such overload in torch 2.13 (it writes empty.memory_format); harmless",
}


def _resolve(target: str):
    """The Python object torch resolves ``target`` to (``AttributeError`` when there is none)."""
    t = registry.parse_target(target)
    if t.form == "overload":
        return getattr(getattr(getattr(torch.ops, t.namespace), t.op), t.overload)
    if t.form == "higher_order":
        return getattr(torch.ops.higher_order, t.op)
    return getattr({"operator": operator, "math": math, "sym": torch}[t.form], t.op)


@functools.lru_cache(maxsize=None)
def _lowerings() -> dict:
    """lowering function -> its targets (backends "onnx" and "pte", the two that lower ATen)."""
    _load_lowerings()
    _load_pte_lowerings()
    out = defaultdict(list)
    for backend in ("onnx", "pte"):
        for t in registry.targets(backend):
            out[registry.get(backend, t)].append(t)
    return dict(out)


def test_every_registered_target_is_well_formed():
    bad = [t for fn_targets in _lowerings().values() for t in fn_targets if registry.parse_target(t) is None]
    assert bad == []


def test_every_registered_target_names_a_real_operator():
    missing = set()  # a target two backends lower (onnx and pte) counts once
    for targets in _lowerings().values():
        for t in targets:
            try:
                _resolve(t)
            except (AttributeError, RuntimeError):
                missing.add(t)
    assert sorted(missing) == sorted(NOT_IN_THIS_TORCH)


def test_registry_refuses_malformed_targets():
    for bad in ("add", "aten.add", "aten..Tensor", "aten.add.Tensor.x", "torch.ops.aten.add", "math.floor.default",
                "torch.add", "aten.add.Tensor ", "1aten.add.Tensor", "higher_order.cond.default"):
        with pytest.raises(ValueError, match="not an operator target"):
            registry.register("test-backend", bad, lambda ctx, node: None)
    assert registry.targets("test-backend") == []


def test_inplace_is_recognised_once():
    assert registry.is_inplace("aten.add_.Tensor") and registry.is_inplace("torch.ops.aten.relu_.default")
    for t in ("aten.add.Tensor", "aten.__iand__.Tensor", "aten._foo_.default", "my_lib.op_.default",
              "_operator.and_", "not a target"):
        assert not registry.is_inplace(t), t


# ------------------------------------------------------------- bind calls against schemas


@functools.lru_cache(maxsize=None)
def _module_ast(module: str) -> ast.Module:
    return ast.parse(inspect.getsource(sys.modules[module]))


def _definition(fn) -> tuple[ast.Module, ast.AST]:
    """The module's AST and the ``def``/``lambda`` of ``fn`` in it."""
    tree = _module_ast(fn.__module__)
    line, name = fn.__code__.co_firstlineno, fn.__code__.co_name
    for n in ast.walk(tree):
        if isinstance(n, ast.FunctionDef) and n.name == name or isinstance(n, ast.Lambda) and name == "<lambda>":
            if min([n.lineno] + [d.lineno for d in getattr(n, "decorator_list", [])]) == line:
                return tree, n
    raise LookupError(f"no definition of {fn.__module__}.{fn.__qualname__} at line {line}")


def _bind_calls(fn) -> list[ast.Call]:
    """Every ``bind(...)`` call in ``fn`` and in the module-level functions it calls."""
    tree, root = _definition(fn)
    defs = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    seen, calls, todo = set(), [], [root]
    while todo:
        n = todo.pop()
        if id(n) in seen:
            continue
        seen.add(id(n))
        for c in ast.walk(n):
            if isinstance(c, ast.Call) and isinstance(c.func, ast.Name):
                if c.func.id == "bind":
                    calls.append(c)
                elif c.func.id in defs:
                    todo.append(defs[c.func.id])
    return calls


def _position_problems(target, order, names_of) -> list[str]:
    names = names_of[target]
    out = []
    for i, name in enumerate(order):
        if name is None or i < len(names) and names[i] == name:
            continue
        others = [t for t, s in names_of.items() if t != target and i < len(s) and s[i] == name]
        if name in names or not others:
            out.append(f"positional {i} is {name!r}, schema has {names[i] if i < len(names) else None!r}")
    return out


def _needs(sig, name: str) -> bool:
    """Whether a default stated for ``name`` can apply to a target with signature ``sig`` (None:
    not in the table): the target lacks the argument or the table does not fill it in."""
    if sig is None:
        return True
    param = sig.param(name)
    return param is None or param.default is signatures.OBJECT_DEFAULT


def _default_problems(defaults, sigs) -> list[str]:
    out = []
    known = [s for s in sigs.values() if s is not None]
    for name in defaults:
        if len(known) == len(sigs) and not any(s.param(name) for s in known):
            out.append(f"{name}= is no argument of any target of the lowering")
        elif not any(_needs(s, name) for s in sigs.values()):
            out.append(f"{name}= is never used: torch writes it or the signature table fills it in for every "
                       f"target reaching this call")
    return out


def _call_sites() -> dict:
    """(module, bind call) -> every target whose lowering reaches that call."""
    sites = defaultdict(list)
    for fn, targets in _lowerings().items():
        for call in _bind_calls(fn):
            sites[(fn.__module__, call)].extend(targets)
    return sites


def _mismatches() -> list[str]:
    out = []
    for (module, call), targets in _call_sites().items():
        sigs = {t: signatures.signature(t) for t in dict.fromkeys(targets)}
        names_of = {t: [p.name for p in s.params] for t, s in sigs.items() if s is not None}
        order = [a.value if isinstance(a, ast.Constant) else None for a in call.args[1:]]
        where = f"({module.rsplit('.', 1)[-1]}, bind at line {call.lineno})"
        for t in names_of:
            out += [f"{t} {where}: {p}" for p in _position_problems(t, order, names_of)]
        defaults = [k.arg for k in call.keywords if k.arg is not None]
        out += [f"{', '.join(sigs)} {where}: {p}" for p in _default_problems(defaults, sigs)]
    return sorted(out)


def test_bind_calls_match_the_signatures():
    found = _mismatches()
    assert found == [], "\n".join(found)


def test_the_bind_check_catches_a_restated_default_and_a_wrong_name(monkeypatch):
    """The check really checks: a lowering restating ``alpha=1`` (the table's default), or one
    naming a misspelt argument or a wrong position, fails it."""
    import types

    src = ("from pt2x.converters.aten.args import bind\n"
           "def lower(ctx, node):\n"
           "    return bind(node, 'self', 'alpha', alpha=1, alfa=1)\n")
    mod = types.ModuleType("pt2x_test_fake_lowering")
    exec(compile(src, "<fake>", "exec"), mod.__dict__)
    monkeypatch.setitem(sys.modules, mod.__name__, mod)
    monkeypatch.setattr(inspect, "getsource", lambda m: src if m is mod else _getsource(m))
    mod.lower.__module__ = mod.__name__
    _module_ast.cache_clear()
    monkeypatch.setitem(globals(), "_lowerings", lambda: {mod.lower: ["aten.add.Tensor"]})
    try:
        found = _mismatches()
    finally:
        _module_ast.cache_clear()
    where = "aten.add.Tensor (pt2x_test_fake_lowering, bind at line 3)"
    assert f"{where}: positional 1 is 'alpha', schema has 'other'" in found
    assert f"{where}: alfa= is no argument of any target of the lowering" in found
    assert any(m.startswith(f"{where}: alpha= is never used") for m in found)


def test_bind_fills_the_tables_defaults():
    """A node that leaves out defaulted arguments reads torch's values; its own values win."""
    from pt2x.converters.aten.args import bind
    from pt2x.schema import definitions as d

    def named(name, **arg):
        return d.NamedArgument(name=name, arg=d.Argument(**arg), kind=d.ArgumentKind.POSITIONAL)

    node = d.Node(target="torch.ops.aten.max_pool2d.default",
                  inputs=[named("self", as_tensor=d.TensorArgument(name="x")),
                          named("kernel_size", as_ints=[2, 2]), named("ceil_mode", as_bool=True)],
                  outputs=[], metadata={})
    a = bind(node)
    assert (a.stride, a.padding, a.dilation, a.ceil_mode) == ([], [0, 0], [1, 1], True)
    a.padding.append(9)  # each bind gets its own copy of a list default
    assert bind(node).padding == [0, 0]
    contiguous = d.Node(target="torch.ops.aten.contiguous.default",
                        inputs=[named("self", as_tensor=d.TensorArgument(name="x"))], outputs=[], metadata={})
    assert "memory_format" not in bind(contiguous)  # a torch object: not filled in


def test_signature_defaults_are_parsed_as_data_only():
    line = "Tensor self, int[] padding=[0, 0], str mode='a, b', *, MemoryFormat memory_format=<object> -> Tensor"
    sig = signatures.parse_line("t", line)
    assert [p.name for p in sig.params] == ["self", "padding", "mode", "memory_format"]
    assert sig.defaults == {"padding": [0, 0], "mode": "a, b"}
    assert sig.param("memory_format").default is signatures.OBJECT_DEFAULT
    for bad in ("Tensor self, int a=__import__('os') -> Tensor", "Tensor self, int a={1: 2} -> Tensor",
                "Tensor self, int a=[1, -> Tensor", "Tensor self, int a=(1, 2) -> Tensor"):
        with pytest.raises(ValueError, match="t: "):
            signatures.parse_line("t", bad)


_getsource = inspect.getsource
