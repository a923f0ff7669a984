"""Per-channel scales and shifts folded into the weights of the layers next to them: a float
pass between the bias folding and the activation fusion of ``fuse_activations.py``.

- **Scale after a layer.** A MUL of a CONV_2D, DEPTHWISE_CONV_2D or FULLY_CONNECTED output by a
  constant s that holds one finite, non-zero value per output channel or one for all (ConvNeXt's
  and CaiT's layer scale, a BatchNorm after a linear layer) becomes the layer's weights and
  bias times s: ``x·(W·s) + b·s`` instead of ``(x·W + b)·s``. One value for all also crosses
  the RESHAPE after a fully connected layer that splits heads (attention's √scale on q and k,
  written as torch's math path: ``q·√s @ (k·√s)ᵀ``), and the SPLIT of a fused q/k/v projection
  along its last axis (GPT-2's ``c_attn``: only that part's rows of W and b are scaled).
- **Scale and shift before fully connected layers.** ``u = x·γ + β`` (a MUL and/or an ADD of
  finite constants along the last axis: a LayerNorm's weight and bias) read only by
  FULLY_CONNECTED layers of constant weights W [N, C] becomes each layer's weights
  ``W·diag(γ)`` and bias ``b + W·β``: ``x·(W·diag(γ))ᵀ + (b + W·β)`` instead of ``(x·γ + β)·Wᵀ + b``
  (GPT-2's and ViT's pre-norm attention and MLP, ConvNeXt's pointwise MLP).

The same products summed in another order: equal up to float32 rounding, the reassociation
the bias folding of ``fuse_activations.py`` makes. The new constants are computed once when
converting (in float64, then rounded), and a fold whose constants are not all finite is not
made. Only float32, unquantized values whose intermediate tensors are read by nothing else and
are not subgraph outputs; the ops folded away carry no fused activation.

A tensor named after a program value that a fold makes hold other numbers (the layer's output
and the RESHAPE/SPLIT values after it, scaled; the RESHAPE before fully connected layers, now of
the value before the affine) is renamed (``/folded_scale``, ``/before_affine``): ``pt2x verify
--locate`` pairs tensors with the program's values by name, and must not pair these.
"""

from __future__ import annotations

import numpy as np

from ...onnx.lazy_initializers import Deferred
from ..core.layer_constants import channel_constant, constant_bias, is_float32, out_channels, shared_buffers, unfused
from ..core.model import Op, Subgraph, Tensor, TensorType

__all__ = ["fold_affine"]

_LAYERS = frozenset({"CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED"})


def fold_affine(sub: Subgraph) -> None:
    scales_into_layers(sub)
    affine_into_fully_connected(sub)


def _weights(sub: Subgraph, op: Op, shared: set[int]) -> tuple[np.ndarray, np.ndarray] | None:
    """The layer's constant float32 weights and bias (zeros where it has none), where nothing
    else reads the weights or shares their buffer: a fold never copies them (GPT-2's LM head
    has the token embedding's bytes; a second copy would be the model's largest tensor again)."""
    m = out_channels(sub, op)
    if m is None or sub.uses.count(op.inputs[1]) != 1 or op.inputs[1] in shared:
        return None
    b = constant_bias(sub, op, m)
    return None if b is None else (sub.tensors[op.inputs[1]].data, b)


def _set_weights(sub: Subgraph, op: Op, w: np.ndarray, b: np.ndarray) -> None:
    """The layer's weights and bias become w and b: in place where nothing else reads them (so
    the old values do not stay in the file; always so for the weights), else as new tensors. A
    layer without a bias keeps none (b is then its zeros, scaled)."""
    had_bias = len(op.inputs) > 2 and op.inputs[2] >= 0
    wi = _replaced(sub, op, 1, w, "/folded")
    bi = _replaced(sub, op, 2, b, "/folded_bias") if had_bias or np.any(b != 0) else -1
    sub.rewire(op, inputs=[op.inputs[0], wi, bi] + op.inputs[3:])


def _replaced(sub: Subgraph, op: Op, slot: int, data: np.ndarray, suffix: str) -> int:
    idx = op.inputs[slot] if slot < len(op.inputs) else -1
    if idx >= 0 and idx not in sub.outputs and sub.uses.count(idx) == 1:
        sub.tensors[idx].data = data
        sub.tensors[idx].shape = list(data.shape)
        return idx
    name = sub.tensors[op.inputs[1]].name + suffix
    return sub.add(Tensor(name, TensorType.FLOAT32, list(data.shape), data))


def _finite32(a: np.ndarray) -> np.ndarray | None:
    with np.errstate(over="ignore", invalid="ignore"):
        out = a.astype(np.float32)
    return out if np.all(np.isfinite(out)) else None


_DEFER_BYTES = 1 << 22  # a folded weight this large is checked now and computed again when written
_BLOCK_ELEMENTS = 1 << 21  # rows of a large weight folded at a time


def _row_blocks(w, scale64: np.ndarray):
    """(float64 rows of w, the scale for them) a block at a time; ``scale64`` broadcasts against
    w along axis 0 or the last axis. A deferred ``w`` (an earlier fold) is computed once here."""
    src = w if isinstance(w, np.ndarray) else np.asarray(w)
    rows = max(1, _BLOCK_ELEMENTS // max(1, int(np.prod(src.shape[1:], dtype=np.int64))))
    per_row = scale64.ndim == src.ndim and scale64.shape[0] > 1
    for i in range(0, src.shape[0], rows):
        yield i, src[i:i + rows].astype(np.float64), scale64[i:i + rows] if per_row else scale64


def _scaled32(w, scale64: np.ndarray):
    """float32(w * scale64), or None where a value is not finite. A large result is not kept:
    it is checked block by block now, and a ``Deferred`` computes it again, block by block,
    when the file is written (a weight's fold never holds more than the weight itself)."""
    if w.nbytes < _DEFER_BYTES:
        return _finite32(np.asarray(w).astype(np.float64) * scale64)
    for _, rows, s in _row_blocks(w, scale64):
        if _finite32(rows * s) is None:
            return None
    return Deferred(w.shape, np.float32, lambda: _scaled_rows(w, scale64))


def _scaled_rows(w, scale64: np.ndarray) -> np.ndarray:
    """float32(w * scale64) filled in a block of rows at a time (the result and one block)."""
    out = np.empty(w.shape, np.float32)
    for i, rows, s in _row_blocks(w, scale64):
        out[i:i + len(rows)] = (rows * s).astype(np.float32)
    return out


def _matvec64(w, v64: np.ndarray) -> np.ndarray:
    """w @ v in float64 (a block of rows at a time when w is large)."""
    if w.nbytes < _DEFER_BYTES:
        return np.asarray(w).astype(np.float64) @ v64
    return np.concatenate([rows @ v64 for _, rows, _ in _row_blocks(w, v64)])


def _private(sub: Subgraph, idx: int) -> bool:
    return is_float32(sub, idx) and idx not in sub.outputs and sub.uses.count(idx) == 1


def _scaled_layer(sub: Subgraph, y: int) -> tuple[Op, Op, slice | None] | None:
    """(the layer, the op making y, the layer's output channels y holds: None for all) where y
    is the output of an unfused layer, a RESHAPE of a fully connected layer's output (the split
    into heads of attention's q and k), or one part of a SPLIT along the last axis of it (GPT-2's
    fused q/k/v projection), then maybe that RESHAPE: one output each, every intermediate read by
    nothing else."""
    op = sub.uses.producer.get(y)
    if not _private(sub, y) or op is None:
        return None
    maker, part = op, None
    if op.code == "RESHAPE" and _private(sub, op.inputs[0]):
        op = sub.uses.producer.get(op.inputs[0])
        if op is None or op.code not in ("FULLY_CONNECTED", "SPLIT"):
            return None
    if op.code == "SPLIT":
        found = _split_part(sub, op, y if maker is op else maker.inputs[0])
        if found is None:
            return None
        op, part = found
    if op.code not in _LAYERS or not unfused(op) or len(op.outputs) != 1 or (maker is not op and op.code != "FULLY_CONNECTED"):
        return None
    return op, maker, part


def _split_part(sub: Subgraph, split: Op, u: int) -> tuple[Op, slice] | None:
    """(the FULLY_CONNECTED, the channels of SPLIT output u) for a SPLIT into equal parts along
    the last axis of a fully connected layer's output, or of a RESHAPE of it that keeps that axis."""
    axis, x = sub.tensors[split.inputs[0]].data, split.inputs[1]
    shape = sub.tensors[x].shape
    if axis is None or axis.size != 1 or not shape or int(axis.reshape(())) % len(shape) != len(shape) - 1 \
            or not _private(sub, x):
        return None
    fc = sub.uses.producer.get(x)
    if fc is not None and fc.code == "RESHAPE":
        src = sub.tensors[fc.inputs[0]].shape
        if not _private(sub, fc.inputs[0]) or not src or src[-1] != shape[-1]:
            return None
        fc = sub.uses.producer.get(fc.inputs[0])
    n, k = shape[-1], len(split.outputs)
    if fc is None or fc.code != "FULLY_CONNECTED" or n <= 0 or n % k:
        return None
    i = split.outputs.index(u)
    return fc, slice(i * n // k, (i + 1) * n // k)


def scales_into_layers(sub: Subgraph) -> None:
    shared = shared_buffers(sub)
    for mul in list(sub.ops):
        if mul.code != "MUL" or len(mul.inputs) != 2 or not unfused(mul) or not is_float32(sub, mul.outputs[0]):
            continue
        for k in (0, 1):
            y, c = mul.inputs[k], mul.inputs[1 - k]
            found = _scaled_layer(sub, y)
            wb = _weights(sub, found[0], shared) if found is not None else None
            if wb is None:
                continue
            layer, maker, part = found
            rank = len(sub.tensors[y].shape or [])
            if maker is not layer and sub.tensors[c].data is not None and sub.tensors[c].data.size != 1:
                continue  # only one scale for all crosses a RESHAPE or SPLIT
            s = channel_constant(sub, c, wb[1].size if part is None else part.stop - part.start, rank) if rank else None
            if s is None or not np.all(np.isfinite(s)) or np.any(s == 0):
                continue
            if part is not None:
                s = np.concatenate([np.ones(part.start, np.float32), s, np.ones(wb[1].size - part.stop, np.float32)])
            w, b = wb
            s64 = s.astype(np.float64)
            axis_shape = [1] * (w.ndim - 1) + [-1] if layer.code == "DEPTHWISE_CONV_2D" else [-1] + [1] * (w.ndim - 1)
            new_w, new_b = _scaled32(w, s64.reshape(axis_shape)), _finite32(b * s64)
            if new_w is None or new_b is None:
                continue
            _set_weights(sub, layer, new_w, new_b)
            _rename_scaled(sub, layer, maker)
            out = mul.outputs[0]
            sub.remove_op(mul)
            sub.rewire(maker, outputs=[out if o == y else o for o in maker.outputs])
            break


def _renamed(sub: Subgraph, idx: int, suffix: str) -> None:
    """Tensor ``idx`` no longer holds the program value it is named after."""
    t = sub.tensors[idx]
    if not t.name.endswith(suffix):
        t.name += suffix


def _rename_scaled(sub: Subgraph, layer: Op, maker: Op) -> None:
    """The layer's output and each value from it to ``maker``'s input now hold scaled numbers."""
    op = maker
    while op is not layer:
        x = op.inputs[1] if op.code == "SPLIT" else op.inputs[0]  # SPLIT: (axis, value)
        _renamed(sub, x, "/folded_scale")
        op = sub.uses.producer[x]


def _affine_step(sub: Subgraph, op: Op | None, channels: int) -> tuple[int, str, np.ndarray] | None:
    """(the other input, "MUL" or "ADD", the constant as [channels]) of an unfused MUL/ADD of a
    value computed at run time, of ``channels`` along its last axis, by a finite float32
    constant along that axis (or a scalar); None otherwise."""
    if op is None or op.code not in ("MUL", "ADD") or len(op.inputs) != 2 or not unfused(op) \
            or not is_float32(sub, op.outputs[0]):
        return None
    for k in (0, 1):
        x, c = op.inputs[k], op.inputs[1 - k]
        shape = sub.tensors[x].shape or []
        if sub.tensors[x].data is not None or not is_float32(sub, x) or not shape or shape[-1] != channels:
            continue
        v = channel_constant(sub, c, channels, len(shape))
        if v is not None and np.all(np.isfinite(v)):
            return x, op.code, v.astype(np.float64)
    return None


def _fc_readers(sub: Subgraph, u: int, shared: set[int]) -> list[Op] | None:
    """The readers of u, in op order, when each is a FULLY_CONNECTED reading it as its input,
    with constant float32 weights [N, C] of one C; None otherwise."""
    readers = sub.uses.readers.get(u, [])
    if not readers or u in sub.outputs or not is_float32(sub, u):
        return None
    for r in readers:
        if r.code != "FULLY_CONNECTED" or r.inputs[0] != u or u in r.inputs[1:] or _weights(sub, r, shared) is None \
                or sub.tensors[r.inputs[1]].data.ndim != 2:
            return None
    if len({sub.tensors[r.inputs[1]].data.shape[1] for r in readers}) != 1:
        return None
    return sorted(readers, key=sub.position)


def _through_reshape(sub: Subgraph, u: int) -> tuple[Op | None, int]:
    """(the RESHAPE, its output) where u's one reader is a RESHAPE that keeps the last axis and
    only merges or splits the ones before it (GPT-2's ``x.view(-1, C)`` before its linear
    layers), so that a constant along the last axis can cross it; else (None, u)."""
    readers = sub.uses.readers.get(u, [])
    if len(readers) != 1 or readers[0].code != "RESHAPE" or readers[0].inputs[0] != u or u in sub.outputs:
        return None, u
    op = readers[0]
    a, b = sub.tensors[u].shape, sub.tensors[op.outputs[0]].shape
    if not a or not b or a[-1] != b[-1] or a[-1] < 0 or len(op.outputs) != 1:
        return None, u
    return op, op.outputs[0]


def affine_into_fully_connected(sub: Subgraph) -> None:
    shared = shared_buffers(sub)
    for last in list(sub.ops):
        if last.code not in ("MUL", "ADD") or len(last.outputs) != 1:
            continue
        reshape, read = _through_reshape(sub, last.outputs[0])
        readers = _fc_readers(sub, read, shared)
        if readers is None:
            continue
        channels = int(sub.tensors[readers[0].inputs[1]].data.shape[1])
        step = _affine_step(sub, last, channels)
        if step is None:
            continue
        x, code, v = step
        gamma, beta = (v, np.zeros(channels)) if code == "MUL" else (np.ones(channels), v)
        steps = [last]
        first = sub.uses.producer.get(x) if _private(sub, x) else None
        second = _affine_step(sub, first, channels)
        if second is not None and second[1] != code:
            x, code2, v2 = second
            if code2 == "MUL":  # y = (x·γ) + β
                gamma = v2
            else:  # y = (x + β)·γ
                beta = v2 * gamma
            steps.append(first)
        if not _fold_into(sub, readers, x if reshape is None else read, gamma, beta, shared):
            continue
        if reshape is not None:
            sub.rewire(reshape, inputs=[x] + reshape.inputs[1:])
            _renamed(sub, read, "/before_affine")
        for op in steps:
            sub.remove_op(op)


def _fold_into(sub: Subgraph, readers: list[Op], x: int, gamma: np.ndarray, beta: np.ndarray,
               shared: set[int]) -> bool:
    """Each fully connected layer reads x with W·diag(γ) and b + W·β; False (nothing changed)
    where a new constant is not finite."""
    new = []
    for fc in readers:
        w, b = _weights(sub, fc, shared)
        nw, nb = _scaled32(w, gamma[None, :]), _finite32(b + _matvec64(w, beta))
        if nw is None or nb is None:
            return False
        new.append((fc, nw, nb))
    for fc, nw, nb in new:
        _set_weights(sub, fc, nw, nb)
        sub.rewire(fc, inputs=[x] + fc.inputs[1:])
    return True
