"""ONNX ``LinearAttention`` (opset 27) unrolled over a static sequence length, following onnx's
reference step by step, in float32: per step t the state S [B, Hkv, dk, dv] decays by
exp(decay_t) (``gated``, ``gated_delta``), the value is corrected to beta_t (v_t - k_t S)
(``delta``, ``gated_delta``), S += k_t^T v_t (BATCH_MATMUL), and o_t = scale q_t S with query
head h reading key/value head h // (Hq / Hkv). 3-D [B, T, H*D] inputs; decay per head or per key
dim; beta per head or one; an optional past state (else zeros); outputs the [B, T, Hq*dv] output
and the present state. Refused: a sequence length that is not static or over
``MAX_UNROLLED_STEPS``, an update_rule/input combination the reference rejects."""

from __future__ import annotations

import math

import numpy as np

from ...errors import Unsupported
from ..core.emit import Emitter, attrs
from ..core.mappers import maps
from ..core.model import TensorType as T

MAX_UNROLLED_STEPS = 1024  # each step is ~10 builtins
_RULES = {"linear": (False, False), "gated": (True, False), "delta": (False, True), "gated_delta": (True, True)}


def _reshape(em: Emitter, x: int, shape: list[int]) -> int:
    y = em.tmp(em.dtype_of(x), None, "reshaped")
    em.op("RESHAPE", [x, em.const(np.asarray(shape, np.int32))], [y])
    return y


def _transpose(em: Emitter, x: int, perm: list[int]) -> int:
    y = em.tmp(em.dtype_of(x), None, "transposed")
    em.op("TRANSPOSE", [x, em.const(np.asarray(perm, np.int32))], [y])
    return y


def _matmul(em: Emitter, a: int, b: int, adj_x: bool = False) -> int:
    y = em.tmp(T.FLOAT32, None, "product")
    em.op("BATCH_MATMUL", [a, b], [y], ("BatchMatMulOptions", {"adj_x": adj_x, "adj_y": False}))
    return y


def _step(em: Emitter, x: int, t: int, axis: int = 2) -> int:
    """x[.., t:t+1, ..] along ``axis`` of a 4-D tensor (rank kept)."""
    begin, end = [0, 0, 0, 0], [0, 0, 0, 0]
    begin[axis], end[axis] = t, t + 1
    mask = 15 & ~(1 << axis)
    y = em.tmp(em.dtype_of(x), None, "step")
    em.op("STRIDED_SLICE", [x, em.const(np.asarray(begin, np.int32)), em.const(np.asarray(end, np.int32)),
                            em.const(np.ones(4, np.int32))], [y],
          ("StridedSliceOptions", {"begin_mask": mask, "end_mask": mask}))
    return y


def _heads(em: Emitter, name: str, heads: int, steps: int) -> tuple[int, int]:
    """[B, T, H*D] -> ([B, H, T, D], D)."""
    shape = em.shape(name)
    if len(shape) != 3 or shape[2] < 0 or shape[2] % heads:
        raise Unsupported(f"LinearAttention input {name!r} of shape {shape} (3-D, hidden size static and divisible "
                          f"by {heads} heads)")
    d = shape[2] // heads
    return _transpose(em, _reshape(em, em.t(name), [-1, steps, heads, d]), [0, 2, 1, 3]), d


def _per_head(em: Emitter, name: str, steps: int, sizes: dict[int, int], what: str, perm: list[int]) -> int:
    """decay/beta [B, T, n] as [B, h, ., .] by ``perm`` of [B, T, h, d], n = h * d for one of ``sizes``."""
    last = (em.shape(name) or [-1])[-1]
    if em.rank(name) != 3 or last not in sizes:
        raise Unsupported(f"LinearAttention {what} whose last dim {last} is none of {sorted(sizes)}")
    return _transpose(em, _reshape(em, em.t(name), [-1, steps, last // sizes[last], sizes[last]]), perm)


@maps("LinearAttention")
def linear_attention(em: Emitter, node) -> None:
    a = attrs(node)
    ins = list(node.input) + [""] * (6 - len(node.input))
    rule = a.get("update_rule", b"gated_delta")
    rule = rule.decode() if isinstance(rule, bytes) else rule
    if rule not in _RULES:
        raise Unsupported(f"LinearAttention update_rule={rule!r}")
    gating, delta = _RULES[rule]
    if gating != bool(ins[4]) or delta != bool(ins[5]):
        raise Unsupported(f"LinearAttention update_rule={rule!r} with decay {'given' if ins[4] else 'absent'} and beta "
                          f"{'given' if ins[5] else 'absent'}")
    hq, hkv = int(a.get("q_num_heads", 0)), int(a.get("kv_num_heads", 0))
    steps = (em.shape(ins[0]) or [-1, -1])[1]
    if hq <= 0 or hkv <= 0 or hq % hkv:
        raise Unsupported(f"LinearAttention q_num_heads={hq}, kv_num_heads={hkv}")
    if not 0 < steps <= MAX_UNROLLED_STEPS:
        raise Unsupported(f"LinearAttention over a sequence length {steps} (static, 1..{MAX_UNROLLED_STEPS} unrolled)")
    q, dk = _heads(em, ins[0], hq, steps)
    k, _ = _heads(em, ins[1], hkv, steps)
    v, dv = _heads(em, ins[2], hkv, steps)
    scale = float(a.get("scale", 0.0)) or 1.0 / math.sqrt(dk)
    q = em.binary("MUL", q, em.const(np.float32(scale)))
    decay = em.unary("EXP", _per_head(em, ins[4], steps, {hkv: 1, hkv * dk: dk}, "decay", [0, 2, 3, 1])) \
        if gating else None  # [B, Hkv, dk|1, T]
    beta = _per_head(em, ins[5], steps, {hkv: 1, 1: 1}, "beta", [0, 2, 1, 3]) if delta else None  # [B, h, T, 1]
    state = em.t(ins[3]) if ins[3] else None
    outs = []
    for t in range(steps):
        state = _update(em, state, _step(em, k, t), _step(em, v, t),
                        _step(em, decay, t, 3) if gating else None, _step(em, beta, t) if delta else None)
        outs.append(_read(em, _step(em, q, t), state, hq, hkv, dk, dv))
    y = outs[0] if steps == 1 else em.tmp(T.FLOAT32, None, "outputs")
    if steps > 1:
        em.op("CONCATENATION", outs, [y], ("ConcatenationOptions", {"axis": 2}))
    em.bind(node.output[0], _reshape(em, _transpose(em, y, [0, 2, 1, 3]), [-1, steps, hq * dv]))
    if len(node.output) > 1 and node.output[1]:
        em.bind(node.output[1], state)


def _update(em: Emitter, state: int | None, k_t: int, v_t: int, g_t: int | None, beta_t: int | None) -> int:
    """One step's state: decayed, then k_t^T (corrected v_t) added. None is the zero state."""
    if state is not None and g_t is not None:
        state = em.binary("MUL", state, g_t)
    if beta_t is not None:
        if state is not None:
            v_t = em.binary("SUB", v_t, _matmul(em, k_t, state))
        v_t = em.binary("MUL", v_t, beta_t)
    write = _matmul(em, k_t, v_t, adj_x=True)  # [B, Hkv, dk, 1] x [B, Hkv, 1, dv]
    return write if state is None else em.binary("ADD", state, write)


def _read(em: Emitter, q_t: int, state: int, hq: int, hkv: int, dk: int, dv: int) -> int:
    """scale q_t S as [B, Hq, 1, dv] (q_t already scaled); query heads grouped over key/value heads."""
    if hq == hkv:
        return _matmul(em, q_t, state)
    grouped = _matmul(em, _reshape(em, q_t, [-1, hkv, hq // hkv, dk]), state)
    return _reshape(em, grouped, [-1, hq, 1, dv])
