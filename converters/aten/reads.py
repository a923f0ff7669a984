"""Every argument of a node is read by its lowering or refused.

A lowering reads the arguments it binds (``args.bind``); an argument it never asks for would
otherwise be converted as if it held its default (``softplus(x, beta=2)`` as ``beta=1``: a
silently wrong model). ``call(fn, ctx, node)`` runs one lowering while ``args.reading`` logs
what it asked of the node's arguments, then refuses the node (``Unsupported``, reported
naming the ATen node, the argument and its value) when an argument given a value other than
its default was never asked for. Nothing to declare: a lowering that reads an argument has
declared it; one that honours an argument without reading its value says so with
``Bound.declare``.

The default of an argument is torch's (the signature table), else the one the lowering gave
``bind``; None is the default of every optional argument (``Tensor? weight``, ``int? compute_mode``:
absent). Arguments that change no value of any tensor (``VALUE_NEUTRAL``: where a tensor
lives, how it is copied, its strides) count as read everywhere. A target the table does not
know (a custom operator) whose lowering binds nothing reads its node its own way: not checked.
"""

from __future__ import annotations

from ...schema import definitions as d
from ..errors import Unsupported
from ..guard import safe_text
from .args import Bound, ReadLog, SymRef, TensorRef, decode, input_name, reading
from .failures import lowering_name
from .registry import canonical
from .signatures import NO_DEFAULT, OBJECT_DEFAULT, signature

__all__ = ["VALUE_NEUTRAL", "call", "unread_arguments"]

VALUE_NEUTRAL = frozenset({"device", "pin_memory", "non_blocking", "memory_format", "copy",
                           "cudnn_enabled", "cudnn_enable", "benchmark", "deterministic", "allow_tf32",
                           "scale_grad_by_freq", "sparse"})
"""Arguments no value of the forward pass depends on: a converted model has one device, copies
nothing asynchronously, has no strides (``layout`` counts too while it is strided or left out),
picks no kernel (cuDNN, benchmark, deterministic, TF32: pt2x computes in float32), and computes no gradient
(``embedding``'s ``scale_grad_by_freq``, ``sparse``)."""

_MAX_VALUE_CHARS = 80


def call(fn, ctx, node: d.Node):
    """``fn(ctx, node)``, refused when it leaves an argument unread (see the module docstring)."""
    with reading() as log:
        result = fn(ctx, node)
    unread = unread_arguments(node, log)
    if unread:
        name, value = unread[0]
        raise Unsupported(f"argument {name}={_text(value)} is not supported: the {ctx.backend} lowering "
                          f"{lowering_name(fn)} does not read it")
    return result


def unread_arguments(node: d.Node, log: ReadLog) -> list[tuple[str, object]]:
    """(name, value) of each argument ``node`` gives a non-default value that ``log`` never read."""
    sig = signature(canonical(node.target))
    bounds = log.of(node)
    if sig is None and not bounds:
        return []
    read = log.read(node)
    order = tuple(p.name for p in sig.params) if sig is not None else ()
    out = []
    for i, na in enumerate(node.inputs):
        if i in read:
            continue
        name = input_name(na, i, order)
        value = decode(na.arg)
        if _neutral(name, na.arg) or (value is None and _optional(name, sig)) \
                or _is_default(value, _default(name, sig, bounds)):
            continue
        out.append((name, value))
    return out


def _optional(name: str, sig) -> bool:
    """Whether ``name`` is an optional argument (``Tensor? weight``): None is its absence."""
    p = sig.param(name) if sig is not None else None
    return p is not None and p.type.endswith("?")


def _default(name: str, sig, bounds: list[Bound]):
    if sig is not None:
        p = sig.param(name)
        if p is not None and p.has_default:
            return p.default
    for b in bounds:
        v = b.default_of(name)
        if v is not NO_DEFAULT:
            return v
    return NO_DEFAULT


def _is_default(value, default) -> bool:
    if default is NO_DEFAULT or default is OBJECT_DEFAULT:
        return False
    if isinstance(value, bool) != isinstance(default, bool) and default is not None:
        return False  # True is not the default 1
    try:
        return bool(value == default)
    except Exception:  # a value that does not compare: not the default
        return False


def _neutral(name: str, arg: d.Argument) -> bool:
    if name in VALUE_NEUTRAL:
        return True
    return name == "layout" and (arg.type == "as_none" or (arg.type == "as_layout" and arg.value == d.Layout.Strided))


def _text(value) -> str:
    if isinstance(value, (TensorRef, SymRef)):
        return f"<{value.name}>"
    if isinstance(value, list):
        return "[" + ", ".join(_text(v) for v in value) + "]"
    return safe_text(repr(value), _MAX_VALUE_CHARS)
