"""Write ``converters/aten/_signature_table.py``: torch's schema of every ATen target a converter lowers.

``converters/aten/signatures.py`` reads the table (torch-free) so that ``precheck`` can compare every
node with the signature of its target. This script is the torch side: it asks torch for
``torch.ops.aten.<op>.<overload>._schema`` of each registered target and writes one signature
line per target, in ``signatures.py``'s spelling, torch's default values included. Run ``python -m scripts.gen_signature_table``
with torch installed after adding lowerings; ``--check`` only reports staleness (a test runs it).

Besides ``aten``, the operator libraries of ``SCHEMA_NAMESPACES`` are tabled: PT2E quantization's
``quantized_decomposed`` (registered by torch's ``torch.ao.quantization.fx._decomposed``) and
``torchao`` (registered when torchao is imported; the test extra pins it). The script imports both
registrations and stops when torchao is missing, so a regeneration never drops their lines.
"""

from __future__ import annotations

import argparse
import ast
import os
import sys

import pt2x.converters.aten

TABLE_PATH = os.path.join(os.path.dirname(os.path.abspath(pt2x.converters.aten.__file__)), "_signature_table.py")
"""Where the table lives."""


SCHEMA_NAMESPACES = ("aten", "quantized_decomposed", "torchao")
"""Operator libraries whose lowered targets get a signature line."""


def _register_quantization_ops() -> None:
    """Register ``quantized_decomposed`` and ``torchao`` operators with torch (their schemas)."""
    import torch.ao.quantization.fx._decomposed  # noqa: F401  (registration side effect)

    try:
        import torchao.quantization.quant_primitives  # noqa: F401  (registration side effect)
    except ImportError as e:
        raise SystemExit(f"gen_signature_table needs torchao (pip install -e '.[test]'): {e}") from None


def _spell(t) -> str:
    """A torch JIT type in ``signatures.py``'s spelling."""
    import torch

    if isinstance(t, torch.OptionalType):
        return _spell(t.getElementType()) + "?"
    if isinstance(t, torch.ListType):
        return _spell(t.getElementType()) + "[]"
    if isinstance(t, torch.NumberType):
        return "Scalar"
    if isinstance(t, torch.TensorType):
        return "Tensor"
    if isinstance(t, (torch.IntType, torch.SymIntType)):
        return "int"
    if isinstance(t, torch.FloatType):
        return "float"
    if isinstance(t, (torch.BoolType, torch.SymBoolType)):
        return "bool"
    if isinstance(t, torch.StringType):
        return "str"
    return str(t).replace(" ", "")


_OBJECT_TYPES = ("MemoryFormat", "Layout", "ScalarType", "Device")
"""Type spellings whose (non-None) defaults are torch objects: written ``<object>``, not filled in."""


def _default(a) -> str:
    """``a``'s default as ``signatures.py`` reads it: a Python literal (torch has already expanded
    ``int[2] padding=0`` to ``[0, 0]``), or ``<object>`` for a torch object."""
    value = a.default_value
    if value is not None and _spell(a.real_type).rstrip("?") in _OBJECT_TYPES:
        return "<object>"
    text = repr(value)
    items = value if isinstance(value, list) else [value]
    if not all(isinstance(v, (int, float, bool, str, type(None))) for v in items) or ast.literal_eval(text) != value:
        raise ValueError(f"{a.name}={text}: not literal data (add its type to _OBJECT_TYPES or spell it here)")
    return text


def _line(schema) -> str:
    args, kw = [], False
    for a in schema.arguments:
        if a.kwarg_only and not kw:
            args.append("*")
            kw = True
        args.append(f"{_spell(a.real_type)} {a.name}" + (f"={_default(a)}" if a.has_default_value() else ""))
    rets = ", ".join(_spell(r.real_type) for r in schema.returns) or "()"
    return f"{', '.join(args)} -> {rets}"


def _schema(target: str):
    """torch's schema of ``<namespace>.<op>.<overload>``, or None when this torch has no such overload."""
    import torch

    namespace, name, overload = target.split(".")
    try:
        return getattr(getattr(getattr(torch.ops, namespace), name), overload)._schema
    except (AttributeError, RuntimeError):  # an overload this torch release does not have
        return None


def _same_but_mutability(base, inplace) -> bool:
    """``inplace`` (``relu_(Tensor(a!) self) -> Tensor(a!)``) is ``base`` (``relu(Tensor self) -> Tensor``)
    writing its result into ``self``: same arguments (names, types, defaults, keyword-only), the
    first one mutated and returned, and ``base`` itself mutates and aliases nothing (a view op's
    ``t_`` changes metadata, not data)."""
    ba, ia = base.arguments, inplace.arguments
    if not ba or len(ba) != len(ia) or len(base.returns) != 1 or len(inplace.returns) != 1:
        return False
    if any(a.alias_info is not None for a in ba) or base.returns[0].alias_info is not None:
        return False
    for b, i in zip(ba, ia):
        if (b.name, str(b.real_type), b.kwarg_only, b.has_default_value()) != (
                i.name, str(i.real_type), i.kwarg_only, i.has_default_value()):
            return False
        if b.has_default_value() and repr(b.default_value) != repr(i.default_value):
            return False
    self_alias, ret_alias = ia[0].alias_info, inplace.returns[0].alias_info
    return (self_alias is not None and self_alias.is_write and ret_alias is not None and ret_alias.is_write
            and all(a.alias_info is None for a in ia[1:]))


def inplace_variants(targets) -> dict[str, str]:
    """``aten.X_.ov -> aten.X.ov`` for each ``aten.X.ov`` of ``targets`` whose in-place overload this
    torch has with the same schema apart from mutability (the registry derives their lowerings)."""
    out = {}
    for t in sorted(set(targets)):
        _, name, overload = t.split(".") if t.startswith("aten.") else ("", "", "")
        if not name or name.endswith("_") or name.startswith("_"):
            continue
        base, inplace = _schema(t), _schema(f"aten.{name}_.{overload}")
        if base is not None and inplace is not None and _same_but_mutability(base, inplace):
            out[f"aten.{name}_.{overload}"] = t
    return out


def view_targets(targets) -> list[str]:
    """The ATen targets of ``targets`` whose result may alias an argument (``Tensor(a)`` returns:
    views, ``contiguous``, ``to``): an in-place write to their result writes to the argument."""
    out = []
    for t in sorted(set(targets)):
        s = _schema(t) if t.startswith("aten.") else None
        if s is not None and any(r.alias_info is not None and not r.alias_info.is_write for r in s.returns):
            out.append(t)
    return out


def generate(targets) -> dict[str, str]:
    """Signature lines from torch's schemas for each target of ``targets`` in ``SCHEMA_NAMESPACES``."""
    out = {}
    for t in sorted(set(targets)):
        if t.split(".")[0] not in SCHEMA_NAMESPACES or t.count(".") != 2:
            continue
        s = _schema(t)
        if s is not None:
            out[t] = _line(s)
    return out


def render(table: dict[str, str], torch_version: str, inplace: dict[str, str] | None = None,
           views: list[str] = ()) -> str:
    lines = [
        f'"""Generated by ``python -m scripts.gen_signature_table`` from torch {torch_version}: do not edit.',
        "",
        "Signature lines of every ATen/quantization target a converter lowers (see ``signatures.py``), the in-place",
        "overloads the registry derives from an out-of-place lowering (``INPLACE_OF``: same schema apart",
        "from mutability), and the lowered targets whose result may alias an argument (``ALIASING``).",
        '"""',
        "",
        "TABLE = {",
    ]
    lines += [f"    {k!r}: {v!r}," for k, v in sorted(table.items())]
    lines.append("}")
    lines += ["", "INPLACE_OF = {"]
    lines += [f"    {k!r}: {v!r}," for k, v in sorted((inplace or {}).items())]
    lines += ["}", "", "ALIASING = frozenset({"]
    lines += [f"    {k!r}," for k in sorted(views)]
    lines.append("})")
    return "\n".join(lines) + "\n"


def lowered_targets() -> list[str]:
    """Every target registered by the converters shipped with pt2x, and the aliases the registry
    derives lowerings for (``converters/aten/aliases.py``; not the derived in-place ones)."""
    from pt2x.converters.aten import aliases, registry
    from pt2x.converters.onnx.converter import _load_lowerings

    _load_lowerings()
    return sorted({t for backend in list(registry._TABLES) for t in registry.targets(backend)} | set(aliases.targets()))


def build(targets) -> tuple[dict[str, str], dict[str, str], list[str]]:
    """The table, the derived in-place overloads and the aliasing targets for ``targets``."""
    inplace = {k: v for k, v in inplace_variants(targets).items() if k not in set(targets)}
    every = sorted(set(targets) | set(inplace))
    return generate(every), inplace, view_targets(every)


def main(argv: list[str] | None = None) -> int:
    """Regenerate ``_signature_table.py`` (``--check``: exit 1 when it is stale)."""
    ap = argparse.ArgumentParser(prog="gen_signature_table", description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="only report whether the table is current (exit 1 if stale)")
    args = ap.parse_args(argv)
    import torch

    _register_quantization_ops()

    table, inplace, views = build(lowered_targets())
    text = render(table, torch.__version__.split("+")[0], inplace, views)
    current = ""
    if os.path.exists(TABLE_PATH):
        with open(TABLE_PATH, encoding="utf-8") as f:
            current = f.read()
    if args.check:
        if current != text:
            print(f"{TABLE_PATH} is stale: run python -m scripts.gen_signature_table", file=sys.stderr)
            return 1
        return 0
    with open(TABLE_PATH, "w", encoding="utf-8") as f:
        f.write(text)
    print(f"wrote {TABLE_PATH}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
