"""Static shapes for the tensors mappers created without one, before writing.

LiteRT's kernels compute every shape at run time, but the XNNPACK delegate decides what it
takes from the shapes in the file: a tensor with no rank (or a 0 dim) keeps its op, and every
op after it, out of XNNPACK (a CONV_2D behind an unshaped PAD ran on the builtin kernel).
Each rule gives the output's rank and what dims are known (-1: known only at run time, written
as 1 with ``shape_signature`` -1). ``builtins.BUILTINS`` says which rule a builtin takes (the
shared kinds here, or one of its own registered with ``_rule_for``); builtins without one keep
their outputs unshaped.
"""

from __future__ import annotations

import numpy as np

from .builtins import BUILTINS, broadcast
from .model import Op, Subgraph

__all__ = ["infer_shapes"]

_RULES: dict = {}  # builtin -> rule(sub, op, operand tensors, input 0's shape, options)


def _rule_for(*codes: str):
    def register(fn):
        for c in codes:
            assert BUILTINS[c].shape == "own", c  # the table names every builtin with a rule here
            _RULES[c] = fn
        return fn

    return register


def _same(sub, op, t, x, opts):
    return x


def _broadcast_rule(sub, op, t, x, opts):
    return broadcast(*[s.shape for s in t])


def _reduce(sub, op, t, x, opts):
    axes = _const(sub, op.inputs[1])
    if x is None or axes is None:
        return None
    axes = {int(a) % len(x) for a in axes.reshape(-1)} if x else set()
    if opts.get("keep_dims"):
        return [1 if i in axes else d for i, d in enumerate(x)]
    return [d for i, d in enumerate(x) if i not in axes]


_KINDS = {"same": _same, "broadcast": _broadcast_rule, "reduce": _reduce}


def _window(n: int, k: int, s: int, d: int, same: bool) -> int:
    if n < 0:
        return -1
    if same:
        return -(-n // s)
    return (n - (k - 1) * d - 1) // s + 1


def _const(sub: Subgraph, i: int):
    return None if i < 0 else sub.tensors[i].data


@_rule_for("TRANSPOSE")
def _transpose(sub, op, t, x, opts):
    perm = _const(sub, op.inputs[1])
    return None if x is None or perm is None else [x[int(p)] for p in perm]


@_rule_for("PAD", "PADV2", "MIRROR_PAD")
def _pad(sub, op, t, x, opts):
    pads = _const(sub, op.inputs[1])
    if x is None or pads is None:
        return None if x is None else [-1] * len(x)
    return [d + int(a) + int(b) if d >= 0 else -1 for d, (a, b) in zip(x, pads.reshape(-1, 2))]


@_rule_for("CONV_2D", "DEPTHWISE_CONV_2D", "MAX_POOL_2D", "AVERAGE_POOL_2D")
def _windowed(sub, op, t, x, opts):
    c = op.code
    if x is None or len(x) != 4:
        return None
    same = opts.get("padding", 1) == 0
    if c in ("CONV_2D", "DEPTHWISE_CONV_2D"):
        f = t[1].shape
        kh, kw, out_c = f[1], f[2], (f[0] if c == "CONV_2D" else f[3])
    else:
        kh, kw, out_c = opts["filter_height"], opts["filter_width"], x[3]
    dh, dw = opts.get("dilation_h_factor", 1), opts.get("dilation_w_factor", 1)
    return [x[0], _window(x[1], kh, opts["stride_h"], dh, same), _window(x[2], kw, opts["stride_w"], dw, same), out_c]


@_rule_for("TRANSPOSE_CONV")
def _transpose_conv(sub, op, t, x, opts):
    return [-1, -1, -1, t[1].shape[0]]


@_rule_for("RESIZE_BILINEAR", "RESIZE_NEAREST_NEIGHBOR")
def _resize(sub, op, t, x, opts):
    size = _const(sub, op.inputs[1])
    if x is None:
        return None
    return [x[0], *(int(v) for v in size), x[3]] if size is not None else [x[0], -1, -1, x[3]]


@_rule_for("RESHAPE")
def _reshape(sub, op, t, x, opts):
    target = _const(sub, op.inputs[1])
    if target is not None:
        dims = [int(v) for v in target.reshape(-1)]
        if -1 in dims and x is not None and all(d >= 0 for d in x):
            known = int(np.prod([d for d in dims if d != -1])) or 1
            dims[dims.index(-1)] = int(np.prod(x)) // known
        return dims
    s = t[1].shape
    return [-1] * s[0] if s is not None and len(s) == 1 and s[0] >= 0 else None


@_rule_for("EXPAND_DIMS")
def _expand_dims(sub, op, t, x, opts):
    axis = _const(sub, op.inputs[1])
    if x is None or axis is None:
        return None
    a = int(axis.reshape(-1)[0])
    a = a + len(x) + 1 if a < 0 else a
    return x[:a] + [1] + x[a:]


@_rule_for("SQUEEZE")
def _squeeze(sub, op, t, x, opts):
    dims = opts.get("squeeze_dims", [])
    return None if x is None or not dims else [d for i, d in enumerate(x) if i not in dims]


@_rule_for("FULLY_CONNECTED")
def _fully_connected(sub, op, t, x, opts):
    return None if x is None else x[:-1] + [t[1].shape[0]]


@_rule_for("BATCH_MATMUL")
def _batch_matmul(sub, op, t, x, opts):
    a, b = x, t[1].shape
    if a is None or b is None:
        return None
    m = a[-1] if opts.get("adj_x") else a[-2]
    n = b[-2] if opts.get("adj_y") else b[-1]
    batch = broadcast(a[:-2], b[:-2])
    return None if batch is None else batch + [m, n]


@_rule_for("CONCATENATION")
def _concatenation(sub, op, t, x, opts):
    shapes = [s.shape for s in t]
    if any(s is None for s in shapes):
        return None
    axis = opts["axis"] % len(shapes[0])
    out = list(shapes[0])
    out[axis] = -1 if any(s[axis] < 0 for s in shapes) else sum(s[axis] for s in shapes)
    return [(-1 if any(s[i] != out[i] for s in shapes) else out[i]) if i != axis else out[i] for i in range(len(out))]


@_rule_for("GATHER")
def _gather(sub, op, t, x, opts):
    idx = t[1].shape
    if x is None or idx is None:
        return None
    axis = opts.get("axis", 0) % len(x)
    return x[:axis] + list(idx) + x[axis + 1:]


@_rule_for("STRIDED_SLICE")
def _strided_slice(sub, op, t, x, opts):
    return None if x is None or opts.get("shrink_axis_mask") or opts.get("new_axis_mask") else [-1] * len(x)


@_rule_for("SHAPE")
def _shape(sub, op, t, x, opts):
    return None if x is None else [len(x)]


def _rule(sub: Subgraph, op: Op):
    """The output 0's shape, or None when unknown (the builtin's rule: ``builtins.BUILTINS``)."""
    b = BUILTINS.get(op.code)
    if b is None or b.shape is None:
        return None
    fn = _RULES[op.code] if b.shape == "own" else _KINDS[b.shape]
    t = [sub.tensors[i] if i >= 0 else None for i in op.inputs]
    x = t[0].shape if t and t[0] is not None else None
    return fn(sub, op, t, x, op.options[1] if op.options else {})


def infer_shapes(sub: Subgraph) -> None:
    """Fill the shape of every op output that has none (in op order, so inputs come first)."""
    for op in sub.ops:
        if not op.outputs or op.outputs[0] < 0:
            continue
        out = sub.tensors[op.outputs[0]]
        if out.shape is not None:
            continue
        try:
            shape = _rule(sub, op)
        except (KeyError, IndexError, TypeError, ValueError, ZeroDivisionError):
            shape = None  # a rule meeting a form it does not know: the tensor stays unshaped
        if shape is not None:
            out.shape = [int(d) for d in shape]
