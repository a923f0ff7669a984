"""The lowering registry: backend -> target -> function.

Keys are targets as ``Node.target`` spells them, without the ``torch.ops.`` prefix. The
spellings torch's serializer writes, and the only ones ``register`` accepts (``TARGET_FORMS``):

* ``<namespace>.<op>.<overload>``: an operator overload, ``torch.ops.<namespace>.<op>.<overload>``
  (``aten.add.Tensor``, ``prims.convert_element_type.default``, ``my_lib.my_op.default``);
* ``higher_order.<op>``: a higher-order operator (``higher_order.cond``);
* ``_operator.<fn>``, ``math.<fn>``, ``torch.sym_<fn>``: SymInt arithmetic on Python's
  ``operator``/``math`` functions and torch's ``sym_*`` functions.

An in-place ATen overload (``aten.add_.Tensor``: the op name ends in one ``_``) is
recognised by ``is_inplace`` and nowhere else; the driver (``lower.py``) rebinds the
mutated input after its lowering ran. In-place overloads are not written twice: ``get``
derives ``aten.X_.ov``'s lowering from ``aten.X.ov``'s (``derived_inplace``) when torch's
schemas of the two are the same apart from mutability, which ``scripts/gen_signature_table.py``
checks against torch and records in ``_signature_table.INPLACE_OF`` (nothing is decided at run
time). The derived lowering sees the node with the out-of-place target; it must produce the
node's output dtype (the in-place one: ``self``'s). An explicit registration wins.

Each backend decides the signature of its lowerings (ONNX: ``fn(ctx, node)``; see the
backend's README section). Register your own for a custom operator::

    from pt2x.converters.aten.registry import lowering

    @lowering("onnx", "my_lib.my_op.default")
    def _(ctx, node):
        ...

A backend imports its own op modules before it looks anything up, and user
registrations made before or after that win over nothing silently: registering a target
twice raises unless ``override=True``.
"""

from __future__ import annotations

import dataclasses
import functools
import re
from typing import Callable, NamedTuple

__all__ = ["TargetName", "TARGET_FORMS", "canonical", "parse_target", "is_inplace", "inplace_base", "lowering",
           "register", "unregister", "get", "targets", "derived_targets", "add_deriver"]

_TABLES: dict[str, dict[str, Callable]] = {}

_IDENT = r"[A-Za-z_][A-Za-z0-9_]*"
# namespaces that name Python modules (two-part targets), not operator libraries
_PYTHON_NAMESPACES = ("higher_order", "_operator", "math", "torch", "builtins")

TARGET_FORMS: dict[str, re.Pattern] = {
    "overload": re.compile(rf"(?!(?:{'|'.join(_PYTHON_NAMESPACES)})\.)({_IDENT})\.({_IDENT})\.({_IDENT})"),
    "higher_order": re.compile(rf"(higher_order)\.({_IDENT})"),
    "operator": re.compile(rf"(_operator)\.({_IDENT})"),
    "math": re.compile(rf"(math)\.({_IDENT})"),
    "sym": re.compile(r"(torch)\.(sym_[A-Za-z0-9_]+)"),
}
"""Each form a target may take (``TargetName.form``) and its pattern (canonical spelling)."""


class TargetName(NamedTuple):
    """A parsed target: ``form`` (a ``TARGET_FORMS`` key), ``namespace``, ``op`` and, for an
    operator overload, ``overload`` (else "")."""

    form: str
    namespace: str
    op: str
    overload: str = ""


def canonical(target: str) -> str:
    """``torch.ops.aten.add.Tensor`` -> ``aten.add.Tensor``; other spellings unchanged."""
    return target[len("torch.ops."):] if target.startswith("torch.ops.") else target


def parse_target(target: str) -> TargetName | None:
    """The form and parts of ``target`` (``torch.ops.`` prefix allowed), None when it takes none."""
    key = canonical(target)
    for form, pattern in TARGET_FORMS.items():
        m = pattern.fullmatch(key)
        if m:
            return TargetName(form, *m.groups())
    return None


@functools.lru_cache(maxsize=4096)  # asked twice per node lowered; a target's answer never changes
def is_inplace(target: str) -> bool:
    """Whether ``target`` is an in-place ATen overload (``aten.add_.Tensor``; not
    ``aten.__iand__.Tensor`` or ``aten._foo_.default``)."""
    t = parse_target(target)
    return (t is not None and t.form == "overload" and t.namespace == "aten" and t.op.endswith("_")
            and not t.op.startswith("_"))


def inplace_base(target: str) -> str | None:
    """``aten.X.ov`` when ``target`` is an in-place ``aten.X_.ov`` whose lowering is derived
    from it (torch's schemas agree apart from mutability: ``_signature_table.INPLACE_OF``)."""
    from ._signature_table import INPLACE_OF

    return INPLACE_OF.get(canonical(target))


def register(backend: str, target: str, fn: Callable, *, override: bool = False) -> Callable:
    """Register ``fn`` as ``backend``'s lowering of ``target``; refuses a target spelled in none
    of ``TARGET_FORMS`` (``ValueError``) and a second registration unless ``override``."""
    if parse_target(target) is None:
        raise ValueError(
            f"{backend}: {target!r} is not an operator target: expected <namespace>.<op>.<overload> "
            f"(aten.add.Tensor, my_lib.my_op.default), higher_order.<op>, _operator.<fn>, math.<fn> "
            f"or torch.sym_<fn>, optionally after torch.ops.")
    table = _TABLES.setdefault(backend, {})
    key = canonical(target)
    if key in table and not override and table[key] is not fn:
        raise ValueError(f"{backend}: {key} already has a lowering ({table[key].__module__}."
                         f"{table[key].__qualname__}); pass override=True to replace it")
    table[key] = fn
    return fn


def lowering(backend: str, *targets: str, override: bool = False) -> Callable[[Callable], Callable]:
    """Decorator: register the function as the lowering of each of ``targets``."""

    def deco(fn: Callable) -> Callable:
        for t in targets:
            register(backend, t, fn, override=override)
        return fn

    return deco


def unregister(backend: str, target: str) -> None:
    _TABLES.get(backend, {}).pop(canonical(target), None)


def get(backend: str, target: str) -> Callable | None:
    """``backend``'s lowering of ``target``: the registered one, else one derived from the
    out-of-place lowering of an in-place overload (``inplace_base``), else the lowering of the
    operator an alias is (``aliases.py``), else None."""
    table = _TABLES.get(backend, {})
    key = canonical(target)
    fn = table.get(key)
    if fn is not None:
        return fn
    base = inplace_base(key)
    if base is not None:
        fn = table.get(base) or _derive(base, table)
        return None if fn is None else _derived(backend, key, base, fn)
    return _derive(key, table)


def _derive(key: str, table: dict) -> Callable | None:
    for derive in _DERIVERS:
        fn = derive(key, table)
        if fn is not None:
            return fn
    return None


_DERIVERS: list[Callable[[str, dict], Callable | None]] = []


def add_deriver(derive: Callable[[str, dict], Callable | None]) -> None:
    """``derive(target, backend's table)`` -> a lowering of ``target`` made from the table's, or
    None: asked by ``get`` after the registered and in-place lowerings (``aliases.py`` adds one)."""
    if derive not in _DERIVERS:
        _DERIVERS.append(derive)


_DERIVED: dict[tuple[str, str, Callable], Callable] = {}


def _derived(backend: str, target: str, base: str, fn: Callable) -> Callable:
    """The lowering of in-place ``target``: ``fn`` run on the node re-targeted at ``base``
    (lowerings that read ``node.target`` see the out-of-place name they were written for)."""
    key = (backend, target, fn)
    if key not in _DERIVED:
        def lower(ctx, node, *rest):
            return fn(ctx, dataclasses.replace(node, target=base), *rest)

        lower.__name__ = lower.__qualname__ = f"{getattr(fn, '__name__', 'lowering')}[{target}]"
        lower.derived_from = (base, fn)
        _DERIVED[key] = lower
    return _DERIVED[key]


def targets(backend: str) -> list[str]:
    """The targets registered for ``backend`` (not the derived in-place ones: ``derived_targets``)."""
    return sorted(_TABLES.get(backend, {}))


def derived_targets(backend: str) -> dict[str, str]:
    """In-place target -> the out-of-place target whose lowering ``get`` derives for it."""
    from ._signature_table import INPLACE_OF

    table = _TABLES.get(backend, {})
    return {k: v for k, v in sorted(INPLACE_OF.items()) if k not in table and v in table}
