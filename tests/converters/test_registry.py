"""The registry against torch: every registered target names a real operator, and each
lowering's ``bind(node, "self", "other", alpha=1)`` calls agree with that operator's schema.

Lowerings restate argument names and defaults because torch leaves out arguments equal to
their defaults. These tests read each lowering's source (``ast``: its ``bind`` calls and
those of the module-level helpers it calls) and compare them with
``torch.ops.<ns>.<op>.<overload>._schema.arguments`` (name, position, ``default_value``);
targets without a torch schema (``_operator.*``, ``math.*``, ``torch.sym_*``, higher-order
operators) are compared with ``signatures.EXTRA_SIGNATURES`` (names and positions).

A ``bind`` call reached by several targets (``view``/``reshape``, the dropouts, a helper
shared by the upsampling overloads) may name an argument that only some of them have: a
name is accepted for a target when that target has it at that position (with that
default), or does not have it at all while another target reaching the same call does. A default restated for an argument the schema makes required is
accepted: torch always writes required arguments, so it never applies.
"""

from __future__ import annotations

import ast
import functools
import inspect
import math
import operator
import re
import sys
from collections import defaultdict

import pytest

from pt2x.converters.aten import registry, signatures
from pt2x.converters.onnx.converter import _load_lowerings

torch = pytest.importorskip("torch")

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
    """lowering function -> its targets (backend "onnx")."""
    _load_lowerings()
    out = defaultdict(list)
    for t in registry.targets("onnx"):
        out[registry.get("onnx", t)].append(t)
    return dict(out)


def test_every_registered_target_is_well_formed():
    bad = [t for fn_targets in _lowerings().values() for t in fn_targets if registry.parse_target(t) is None]
    assert bad == []


def test_every_registered_target_names_a_real_operator():
    missing = []
    for targets in _lowerings().values():
        for t in targets:
            try:
                _resolve(t)
            except (AttributeError, RuntimeError):
                missing.append(t)
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


_NO_DEFAULT = object()


def _schema(target: str) -> list[tuple[str, object]] | None:
    """(name, default or ``_NO_DEFAULT``) per argument in order; ``None`` when unknown."""
    if target in NOT_IN_THIS_TORCH:
        return None
    op = _resolve(target)
    if hasattr(op, "_schema") and registry.parse_target(target).form == "overload":
        return [(a.name, a.default_value if a.has_default_value() else _NO_DEFAULT) for a in op._schema.arguments]
    sig = signatures.signature(target)
    # EXTRA_SIGNATURES record that a default exists, not its value: ... stands for "some default"
    return None if sig is None else [(p.name, ... if p.has_default else _NO_DEFAULT) for p in sig.params]


def _position_problems(target, order, schemas) -> list[str]:
    names = [n for n, _ in schemas[target]]
    out = []
    for i, name in enumerate(order):
        if name is None or i < len(names) and names[i] == name:
            continue
        others = [t for t, s in schemas.items() if t != target and i < len(s) and s[i][0] == name]
        if name in names or not others:
            out.append(f"positional {i} is {name!r}, schema has {names[i] if i < len(names) else None!r}")
    return out


def _default_problems(target, defaults, schemas) -> list[str]:
    args = dict(schemas[target])
    out = []
    for name, value in defaults.items():
        if name not in args:
            if not any(name in dict(s) for t, s in schemas.items() if t != target):
                out.append(f"{name}= is no argument of this or any other target of the lowering")
            continue
        default = args[name]
        if default is _NO_DEFAULT or default is ...:
            continue
        if value is _UNEVALUATED or not _same_default(default, value):
            out.append(f"{name}={value!r}, schema default {default!r}")
    return out


_UNEVALUATED = object()


def _same_default(default, value) -> bool:
    """``value`` (as the lowering states it) means the schema's ``default``. A number stands for
    a list of copies of it (torch's rule for ``int[2] stride=1``); bools are not numbers."""
    if isinstance(default, list) and not isinstance(value, list) and default:
        return all(_same_default(d, value) for d in default)
    return default == value and isinstance(default, bool) == isinstance(value, bool)


def _literal(node: ast.AST):
    try:
        return ast.literal_eval(node)
    except ValueError:
        return _UNEVALUATED


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
        schemas = {t: s for t in dict.fromkeys(targets) if (s := _schema(t)) is not None}
        order = [a.value if isinstance(a, ast.Constant) else None for a in call.args[1:]]
        defaults = {k.arg: _literal(k.value) for k in call.keywords if k.arg is not None}
        for t in schemas:
            for p in _position_problems(t, order, schemas) + _default_problems(t, defaults, schemas):
                out.append(f"{t} ({module.rsplit('.', 1)[-1]}, bind at line {call.lineno}): {p}")
    return sorted(out)


_SHARED_DEFAULT = ("one bind call serves both overloads; the default stated is the sibling's and means the same "
                   "here")
KNOWN_MISMATCHES: dict[str, str] = {
    # "target (module): problem" -> why it stays (a fix would need per-overload defaults in one call)
    "aten.conv1d.padding (ops_nn): padding=0, schema default 'valid'": _SHARED_DEFAULT + " (conv1d.default: [0])",
    "aten.conv2d.padding (ops_nn): padding=0, schema default 'valid'": _SHARED_DEFAULT + " (conv2d.default: [0, 0])",
    "aten.conv3d.padding (ops_nn): padding=0, schema default 'valid'": _SHARED_DEFAULT + " (conv3d.default)",
    "aten.pad.default (ops_shape): value=0, schema default None":
        _SHARED_DEFAULT + " (constant_pad_nd: value=0; aten.pad's None pads with 0)",
}


def test_bind_calls_match_the_schemas():
    found = {re.sub(r", bind at line \d+", "", m): m for m in _mismatches()}
    unexpected = [m for k, m in found.items() if k not in KNOWN_MISMATCHES]
    assert unexpected == [], "\n".join(unexpected)
    stale = [k for k in KNOWN_MISMATCHES if k not in found]
    assert stale == [], "known mismatches no longer found: remove them"


def test_the_bind_check_catches_a_wrong_default_and_a_wrong_name(monkeypatch):
    """The check really checks: a lowering with ``alpha=2`` or a misspelt argument fails it."""
    import types

    src = ("from pt2x.converters.aten.args import bind\n"
           "def lower(ctx, node):\n"
           "    return bind(node, 'self', 'other', alpha=2, alfa=1)\n")
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
    assert "aten.add.Tensor (pt2x_test_fake_lowering, bind at line 3): alpha=2, schema default 1" in found
    assert any("alfa= is no argument" in m for m in found)


_getsource = inspect.getsource
