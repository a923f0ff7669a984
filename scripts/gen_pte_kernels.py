"""The ExecuTorch kernels pt2x may call: a table generated from the executorch wheel's facts.

Which operators the portable kernel library implements is ExecuTorch's
``kernels/portable/functions.yaml`` (``- op: add.out``, ``- func: <schema>`` for its own ops);
their schemas are ATen's, as torch registers them (``torch._C._get_schema``: the out variants
torchgen generates included). The
primitive operators the runtime registers beside them (``aten::sym_size.int``) are listed in
``PRIM_OPS`` with ATen's schemas, and its ``executorch_prim`` ones pt2x calls in
``EXECUTORCH_PRIM_OPS`` with the schemas exir registers for them. Writes ``converters/pte/_kernel_table.py`` (committed)::

    python -m scripts.gen_pte_kernels [--check]

Needs executorch 1.5.1 and torch installed. ``--check`` exits 1 when the committed
table differs from what the installed wheels say now.
"""

from __future__ import annotations

import argparse
import ast
import os
import re
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
TARGET = os.path.join(os.path.dirname(_HERE), "converters", "pte", "_kernel_table.py")
# registered by the runtime itself (runtime/kernel/prim_ops), not by functions.yaml; ATen schemas
PRIM_OPS = ("sym_size.int",)
# the runtime's executorch_prim operators pt2x calls: symbolic int arithmetic and the comparisons a
# cond's SymBool predicate is made of, schemas as exir registers them with torch
# (executorch/exir/passes/executorch_prim_ops_registry.py)
EXECUTORCH_PRIM_OPS = ("add.Scalar", "mul.Scalar", "sub.Scalar", "eq.Scalar", "gt.Scalar", "lt.Scalar", "ge.Scalar",
                       "le.Scalar")

_ARG = re.compile(r"^(?P<type>[A-Za-z_]+(?:\([a-z]!?\))?(?:\[\d*\])?\??)\s+(?P<name>\w+)(?:=(?P<default>.+))?$")


def _split_args(text: str) -> list[str]:
    out, depth, cur = [], 0, ""
    for ch in text:
        if ch == "," and depth == 0:
            out.append(cur.strip())
            cur = ""
            continue
        depth += ch in "[("
        depth -= ch in "])"
        cur += ch
    if cur.strip():
        out.append(cur.strip())
    return out


def _default(type_: str, text: str | None):
    """The default as a Python value; ``int[2] padding=0`` is ``[0, 0]``."""
    if text is None:
        return "NO_DEFAULT"
    m = re.search(r"\[(\d+)\]", type_)
    lit = {"True": True, "False": False, "None": None}.get(text)
    if text in ("True", "False", "None"):
        value = lit
    else:
        value = ast.literal_eval(text)
    if m and isinstance(value, (int, float)) and not isinstance(value, bool):
        value = [value] * int(m.group(1))
    return value


def parse_schema(schema: str) -> tuple[str, tuple]:
    """``add.out(Tensor self, ...) -> ...`` as (``add.out``, ((name, type, default, keyword, out), ...))."""
    head, rest = schema.split("(", 1)
    args_text = rest[: rest.rindex(")", 0, rest.index("->"))]
    args, keyword = [], False
    for a in _split_args(args_text):
        if a == "*":
            keyword = True
            continue
        m = _ARG.match(a)
        if m is None:
            raise SystemExit(f"cannot parse argument {a!r} of {head}")
        type_ = m.group("type")
        args.append((m.group("name"), type_, _default(type_, m.group("default")), keyword, "!" in type_))
    return head.strip(), tuple(args)


def _aten_schema(name: str, namespace: str = "aten") -> tuple:
    """``name`` (``add.out``) with ATen's schema as registered in torch (out variants torchgen
    generates, ``autogen:`` in native_functions.yaml, included)."""
    import torch

    op, overload = name.split(".", 1) if "." in name else (name, "")
    schema = torch._C._get_schema(f"{namespace}::{op}", overload)
    args = []
    for a in schema.arguments:
        out = a.alias_info is not None and a.alias_info.is_write
        default = "NO_DEFAULT" if not a.has_default_value() else _plain(a.default_value)
        args.append((a.name, str(a.type) + ("!" if out else ""), default, a.kwarg_only, out))
    return tuple(args)


def _plain(v):
    """A schema default as a plain Python value (a ``torch.dtype`` or layout has none here)."""
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    return repr(v)


def _portable_entries() -> tuple[str, list[str]]:
    import executorch
    import yaml

    root = os.path.dirname(list(executorch.__path__)[0] + "/")
    path = os.path.join(root, "kernels", "portable", "functions.yaml")
    with open(path) as f:
        entries = yaml.safe_load(f)
    from executorch.version import __version__

    return __version__, [e.get("op") or e["func"] for e in entries]


def generate() -> str:
    version, entries = _portable_entries()
    kernels = {}
    for e in entries:
        if "(" in e:  # ExecuTorch's own schema (custom_ops.yaml style)
            name, args = parse_schema(e)
        else:
            name, args = e, _aten_schema(e)
        kernels[name] = args
    prims = {}
    for name in PRIM_OPS:
        prims[name] = _aten_schema(name)
    import executorch.exir.passes.executorch_prim_ops_registry  # noqa: F401  (registers executorch_prim)

    et_prims = {name: _aten_schema(name, "executorch_prim") for name in EXECUTORCH_PRIM_OPS}
    lines = [f"# Generated by scripts/gen_pte_kernels.py from executorch {version}'s kernels/portable/functions.yaml",
             "# (which operators) and ATen's schemas as torch registers them: do not edit.",
             '"""ExecuTorch kernels: ``name.overload`` -> arguments ``(name, type, default, keyword_only, is_out)``."""',
             "",
             "NO_DEFAULT = 'NO_DEFAULT'",
             f"EXECUTORCH_VERSION = {version!r}",
             "",
             "# the portable kernel library",
             "PORTABLE = {"]
    for name in sorted(kernels):
        lines.append(f"    {name!r}: {_fmt(kernels[name])},")
    lines += ["}", "", "# primitive operators the runtime registers (aten namespace)", "PRIM = {"]
    for name in sorted(prims):
        lines.append(f"    {name!r}: {_fmt(prims[name])},")
    lines += ["}", "", "# the runtime's executorch_prim operators (symbolic int arithmetic and comparisons)", "EXECUTORCH_PRIM = {"]
    for name in sorted(et_prims):
        lines.append(f"    {name!r}: {_fmt(et_prims[name])},")
    lines += ["}", ""]
    return "\n".join(lines)


def _fmt(args) -> str:
    parts = []
    for name, type_, default, keyword, out in args:
        d = "NO_DEFAULT" if default == "NO_DEFAULT" else repr(default)
        parts.append(f"({name!r}, {type_!r}, {d}, {keyword}, {out})")
    return "(" + ", ".join(parts) + ("," if len(parts) == 1 else "") + ")"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--check", action="store_true", help="exit 1 if the committed table is stale")
    args = p.parse_args(argv)
    text = generate()
    if args.check:
        with open(TARGET) as f:
            same = f.read() == text
        print("up to date" if same else f"{TARGET} is stale: run python -m scripts.gen_pte_kernels")
        return 0 if same else 1
    with open(TARGET, "w") as f:
        f.write(text)
    print(f"wrote {TARGET}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
