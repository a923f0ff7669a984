"""Static shapes for the tensors mappers created without one, before writing.

LiteRT's kernels compute every shape at run time, but the XNNPACK delegate decides what it
takes from the shapes in the file: a tensor with no rank (or a 0 dim) keeps its op, and every
op after it, out of XNNPACK (a CONV_2D behind an unshaped PAD ran on the builtin kernel).
Each rule gives the output's rank and what dims are known (-1: known only at run time, written
as 1 with ``shape_signature`` -1). Ops without a rule keep their outputs unshaped.
"""

from __future__ import annotations

import numpy as np

from .model import Op, Subgraph

__all__ = ["infer_shapes"]

_SAME_AS_INPUT = {
    "RELU", "RELU6", "LOGISTIC", "TANH", "EXP", "LOG", "SQRT", "RSQRT", "ABS", "NEG", "FLOOR", "CEIL", "ROUND",
    "SIN", "COS", "SIGN", "LOGICAL_NOT", "HARD_SWISH", "GELU", "LEAKY_RELU", "ELU", "CAST", "SOFTMAX",
    "LOG_SOFTMAX", "BITCAST", "CUMSUM", "ZEROS_LIKE", "PRELU",
}
_BROADCAST = {
    "ADD", "SUB", "MUL", "DIV", "POW", "MAXIMUM", "MINIMUM", "FLOOR_DIV", "FLOOR_MOD", "EQUAL", "NOT_EQUAL",
    "LESS", "LESS_EQUAL", "GREATER", "GREATER_EQUAL", "LOGICAL_AND", "LOGICAL_OR", "SELECT_V2", "ATAN2",
    "SQUARED_DIFFERENCE",
}
_REDUCE = {"MEAN", "SUM", "REDUCE_MAX", "REDUCE_MIN", "REDUCE_PROD", "REDUCE_ANY", "REDUCE_ALL"}


def _broadcast(shapes):
    """numpy broadcasting with -1 for run-time dims (a -1 against a known dim > 1 is that dim)."""
    if any(s is None for s in shapes):
        return None
    n = max(len(s) for s in shapes)
    out = [1] * n
    for s in shapes:
        for i, d in enumerate([1] * (n - len(s)) + list(s)):
            if out[i] == 1 or (out[i] == -1 and d > 1):
                out[i] = d
    return out


def _window(n: int, k: int, s: int, d: int, same: bool) -> int:
    if n < 0:
        return -1
    if same:
        return -(-n // s)
    return (n - (k - 1) * d - 1) // s + 1


def _const(sub: Subgraph, i: int):
    return None if i < 0 else sub.tensors[i].data


def _rule(sub: Subgraph, op: Op):
    """The output 0's shape, or None when unknown."""
    t = [sub.tensors[i] if i >= 0 else None for i in op.inputs]
    x = t[0].shape if t and t[0] is not None else None
    opts = op.options[1] if op.options else {}
    c = op.code
    if c in _SAME_AS_INPUT:
        return x
    if c in _BROADCAST:
        return _broadcast([s.shape for s in t])
    if c == "TRANSPOSE":
        perm = _const(sub, op.inputs[1])
        return None if x is None or perm is None else [x[int(p)] for p in perm]
    if c in ("PAD", "PADV2", "MIRROR_PAD"):
        pads = _const(sub, op.inputs[1])
        if x is None or pads is None:
            return None if x is None else [-1] * len(x)
        return [d + int(a) + int(b) if d >= 0 else -1 for d, (a, b) in zip(x, pads.reshape(-1, 2))]
    if c in ("CONV_2D", "DEPTHWISE_CONV_2D", "MAX_POOL_2D", "AVERAGE_POOL_2D"):
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
    if c == "TRANSPOSE_CONV":
        return [-1, -1, -1, t[1].shape[0]]
    if c in ("RESIZE_BILINEAR", "RESIZE_NEAREST_NEIGHBOR"):
        size = _const(sub, op.inputs[1])
        if x is None:
            return None
        return [x[0], *(int(v) for v in size), x[3]] if size is not None else [x[0], -1, -1, x[3]]
    if c == "RESHAPE":
        target = _const(sub, op.inputs[1])
        if target is not None:
            dims = [int(v) for v in target.reshape(-1)]
            if -1 in dims and x is not None and all(d >= 0 for d in x):
                known = int(np.prod([d for d in dims if d != -1])) or 1
                dims[dims.index(-1)] = int(np.prod(x)) // known
            return dims
        s = t[1].shape
        return [-1] * s[0] if s is not None and len(s) == 1 and s[0] >= 0 else None
    if c == "EXPAND_DIMS":
        axis = _const(sub, op.inputs[1])
        if x is None or axis is None:
            return None
        a = int(axis.reshape(-1)[0])
        a = a + len(x) + 1 if a < 0 else a
        return x[:a] + [1] + x[a:]
    if c == "SQUEEZE":
        dims = opts.get("squeeze_dims", [])
        return None if x is None or not dims else [d for i, d in enumerate(x) if i not in dims]
    if c == "FULLY_CONNECTED":
        return None if x is None else x[:-1] + [t[1].shape[0]]
    if c == "BATCH_MATMUL":
        a, b = x, t[1].shape
        if a is None or b is None:
            return None
        m = a[-1] if opts.get("adj_x") else a[-2]
        n = b[-2] if opts.get("adj_y") else b[-1]
        batch = _broadcast([a[:-2], b[:-2]])
        return None if batch is None else batch + [m, n]
    if c in _REDUCE:
        axes = _const(sub, op.inputs[1])
        if x is None or axes is None:
            return None
        axes = {int(a) % len(x) for a in axes.reshape(-1)} if x else set()
        if opts.get("keep_dims"):
            return [1 if i in axes else d for i, d in enumerate(x)]
        return [d for i, d in enumerate(x) if i not in axes]
    if c == "CONCATENATION":
        shapes = [s.shape for s in t]
        if any(s is None for s in shapes):
            return None
        axis = opts["axis"] % len(shapes[0])
        out = list(shapes[0])
        out[axis] = -1 if any(s[axis] < 0 for s in shapes) else sum(s[axis] for s in shapes)
        return [(-1 if any(s[i] != out[i] for s in shapes) else out[i]) if i != axis else out[i] for i in range(len(out))]
    if c == "GATHER":
        idx = t[1].shape
        if x is None or idx is None:
            return None
        axis = opts.get("axis", 0) % len(x)
        return x[:axis] + list(idx) + x[axis + 1:]
    if c == "STRIDED_SLICE":
        return None if x is None or opts.get("shrink_axis_mask") or opts.get("new_axis_mask") else [-1] * len(x)
    if c == "SHAPE":
        return None if x is None else [len(x)]
    return None


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
