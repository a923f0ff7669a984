"""What the float passes over the written operators read of constants and layers: float32
values, activation-free operators, per-channel constants, a layer's output channels and bias,
and the constants the writer stores in one shared buffer. ``fuse_activations``, ``fold_affine``
and ``passes.transposes_into_adj_y`` share these.
"""

from __future__ import annotations

import hashlib

import numpy as np

from .model import Op, Subgraph, TensorType

__all__ = ["channel_constant", "constant_bias", "is_float32", "out_channels", "shared_buffers", "unfused"]


def is_float32(sub: Subgraph, idx: int) -> bool:
    """Tensor ``idx`` (an operator slot; -1 is none) is float32 and unquantized."""
    t = sub.tensors[idx]
    return idx >= 0 and t.dtype == TensorType.FLOAT32 and t.quant is None


def unfused(op: Op) -> bool:
    """An operator with options whose fused activation is none."""
    return op.options is not None and op.options[1].get("fused_activation_function", 0) == 0


def channel_constant(sub: Subgraph, idx: int, channels: int, rank: int) -> np.ndarray | None:
    """A float32 constant of one value per output channel, or a scalar (leading 1s allowed, up to
    the output's ``rank``, so the ADD broadcasts to the output's own shape), as ``[channels]``."""
    t = sub.tensors[idx]
    if t.data is None or t.dtype != TensorType.FLOAT32 or t.quant is not None:
        return None
    d = t.data
    if d.ndim > rank or any(s != 1 for s in d.shape[:-1]):
        return None
    if d.size == 1:  # a scalar: the same for every channel
        return np.full(channels, d.reshape(()), np.float32)
    return np.ascontiguousarray(d.reshape(channels), np.float32) if d.shape[-1] == channels else None


def out_channels(sub: Subgraph, op: Op) -> int | None:
    """M of a conv's OHWI / depthwise [1, kh, kw, M] / fully connected [M, K] constant weight."""
    w = sub.tensors[op.inputs[1]]
    if w.data is None or w.dtype != TensorType.FLOAT32 or w.quant is not None:
        return None
    return int(w.data.shape[-1] if op.code == "DEPTHWISE_CONV_2D" else w.data.shape[0])


def constant_bias(sub: Subgraph, op: Op, channels: int) -> np.ndarray | None:
    """The op's float32 bias (zeros where it has none); None where it is computed at run time."""
    b = op.inputs[2] if len(op.inputs) > 2 else -1
    if b < 0:
        return np.zeros(channels, np.float32)
    t = sub.tensors[b]
    if t.data is None or t.quant is not None or t.dtype != TensorType.FLOAT32 or t.data.size != channels:
        return None
    return t.data.reshape(channels)


def shared_buffers(sub: Subgraph) -> set[int]:
    """The constants whose bytes another constant of the subgraph holds too: the writer stores
    such tensors in one buffer, which a fold of one of them would split in two. Compared by a
    sample of their elements first, then by a digest of the whole bytes (one tensor at a time:
    the weights are never held together)."""
    groups: dict[tuple, list[int]] = {}
    for i, t in enumerate(sub.tensors):
        if t.data is not None and t.data.size >= 64:
            groups.setdefault((t.data.dtype.str, t.data.shape), []).append(i)
    out: set[int] = set()
    for members in groups.values():
        for same_sample in _grouped(members if len(members) > 1 else (), lambda i: _sample(sub.tensors[i].data)):
            for same in _grouped(same_sample, lambda i: _digest(sub.tensors[i].data)):
                out.update(same)
    return out


def _grouped(members, key) -> list[list[int]]:
    """The groups of two or more ``members`` with equal ``key``."""
    by: dict[bytes, list[int]] = {}
    for i in members:
        by.setdefault(key(i), []).append(i)
    return [same for same in by.values() if len(same) > 1]


def _sample(data) -> bytes:
    arr = data if isinstance(data, np.ndarray) else np.asarray(data)
    return arr.flat[np.linspace(0, arr.size - 1, 64).astype(np.int64)].tobytes()


def _digest(data) -> bytes:
    arr = np.ascontiguousarray(data if isinstance(data, np.ndarray) else np.asarray(data))
    return hashlib.sha256(arr.reshape(-1).view(np.uint8)).digest()
