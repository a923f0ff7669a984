"""No function of the package or its scripts takes a parameter it never reads.

An unread parameter is dead weight every caller still computes and passes (``_finish(em, node,
y, rank)`` that never looked at ``node``). Checked over the source with ``ast``: a parameter
counts as read when its name appears anywhere in the function (nested functions and lambdas
included). Not checked: ``self``/``cls``, names starting with ``_``, ``*args``/``**kwargs`` names
likewise, stubs (a body of a docstring, ``pass``, ``...`` or ``raise``), dunder methods, decorated
functions (registered lowerings, mappers, int8 patterns: ``(ctx, node)``, ``(em, node)``,
``(em, p)``), and callbacks: a function whose name its module also uses as a value (a rule table
such as ``op_versions``' or ``shapes``', a dispatch dict, an argument) has the signature its caller
fixes. ``ALLOWED`` lists the few others, each with why.
"""

from __future__ import annotations

import ast
import os

from paths import REPO

SKIPPED_DIRS = {".venv", "tests", "build", "dist", "bench-out", "pt2x.egg-info", "docs", "schema", "examples",
                ".git"}
GENERATED = {"schema_generated.py", "_signature_table.py"}

# "path:function(parameter)" -> why it stays
ALLOWED = {
    "fuzz/fuzz_mutations.py:_is_meta(p)": "a predicate of the (p, k, v) family its callers pass around",
    "fuzz/fuzz_mutations.py:_is_meta(k)": "a predicate of the (p, k, v) family its callers pass around",
    "scripts/conformance_opinfo.py:_describe(tensor_pos)": "being reworked with the OpInfo runner (issue 33)",
    "explorer/main.py:convert(settings)": "Model Explorer's Adapter.convert signature, called by its server",
    "explorer/main.py:get_config_editors(provider_id)": "Model Explorer's NodeDataProvider signature",
    "explorer/main.py:run(graph)": "Model Explorer's NodeDataProvider.run signature, called by its server",
    "explorer/main.py:run(provider_id)": "Model Explorer's NodeDataProvider.run signature, called by its server",
}


def _files():
    for top, dirs, files in os.walk(REPO):
        rel_top = os.path.relpath(top, REPO)
        if rel_top == ".":
            dirs[:] = [d for d in dirs if d not in SKIPPED_DIRS]
        dirs[:] = [d for d in dirs if not d.startswith(".") and d != "__pycache__"]
        for f in files:
            if f.endswith(".py") and f not in GENERATED:
                yield os.path.join(top, f)


def _params(fn) -> list[str]:
    a = fn.args
    names = [p.arg for p in a.posonlyargs + a.args + a.kwonlyargs]
    return names + [p.arg for p in (a.vararg, a.kwarg) if p is not None]


def _is_stub(fn) -> bool:
    body = [s for s in fn.body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]
    return all(isinstance(s, (ast.Pass, ast.Raise)) for s in body)


def _used_as_values(tree) -> set[str]:
    """Names the module reads other than as the function of a call (callbacks, table entries)."""
    called = {id(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)}
    out = set()
    for n in ast.walk(tree):
        if id(n) in called:
            continue
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load):
            out.add(n.id)
        elif isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Load):
            out.add(n.attr)
    return out


def unused_parameters() -> list[str]:
    found = []
    for path in _files():
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read(), path)
        rel = os.path.relpath(path, REPO).replace(os.sep, "/")
        callbacks = _used_as_values(tree)
        for fn in ast.walk(tree):
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) or fn.decorator_list or _is_stub(fn):
                continue
            if (fn.name.startswith("__") and fn.name.endswith("__")) or fn.name in callbacks:
                continue
            read = {n.id for n in ast.walk(fn) if isinstance(n, ast.Name)}
            for p in _params(fn):
                if p not in ("self", "cls") and not p.startswith("_") and p not in read:
                    found.append(f"{rel}:{fn.name}({p})")
    return found


def test_no_function_takes_a_parameter_it_never_reads():
    assert any(p.endswith(os.path.join("converters", "tflite", "core", "model.py")) for p in _files())  # it reads the package
    found = unused_parameters()
    unexpected = sorted(set(found) - set(ALLOWED))
    assert not unexpected, "parameters never read (remove them and update the callers):\n" + "\n".join(unexpected)


def test_the_allow_list_names_only_what_is_there():
    stale = sorted(set(ALLOWED) - set(unused_parameters()))
    assert not stale, "ALLOWED names parameters that are read now, or gone: drop them:\n" + "\n".join(stale)


def test_the_check_sees_an_unread_parameter():
    tree = ast.parse("def f(a, b):\n    return a\n\ndef g(x):\n    return 0\n\nRULES = {'g': g}\n")
    fn = tree.body[0]
    read = {n.id for n in ast.walk(fn) if isinstance(n, ast.Name)}
    assert [p for p in _params(fn) if p not in read] == ["b"]
    assert "g" in _used_as_values(tree) and "f" not in _used_as_values(tree)  # g is a table's callback
