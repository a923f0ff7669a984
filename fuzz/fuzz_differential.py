"""Differential fuzzing of ``to_tflite``: ONNX Runtime vs LiteRT on random models:
``python -m fuzz.fuzz_differential --n 300``.

Each case is made from ``(seed, index)`` alone (``--replay SEED:INDEX`` rebuilds it):

  single  one ONNX op from ``OPS`` (the ops pt2x's TFLite mappers cover), its dtype drawn from
          the op's ``OpSchema`` type constraint, its attributes from the values ``ATTRS`` lists
          for it (each name checked against the schema; an attribute left out takes the
          schema's default), small random shapes, operands of the op's recipe as graph inputs
          or as constants
  chain   2-6 steps of Conv / MaxPool / AveragePool / elementwise / Transpose on an NCHW float
          input, each step's sizes fitted to the shape the chain has reached

A model onnx's checker, onnx's strict shape inference or ONNX Runtime refuses is ``invalid``
and skipped. Otherwise ``to_tflite`` converts it in a worker process (scripts/
conformance_onnx.py's runner, so a LiteRT abort kills a worker, not the run), and LiteRT runs it
with XNNPACK as shipped; the outputs are compared with ONNX Runtime's (floats: ``rtol=1e-3,
atol=1e-4``; float16 ``1e-2``; integers and booleans exactly; shapes and dtypes equal).

Where they differ, onnx's reference evaluator decides: LiteRT agreeing with it and ONNX Runtime not
is ``ort_wrong`` (ONNX Runtime's bug, not a finding).

Outcomes: ``match``; ``refused`` (``UnsupportedOpsError``/``ConversionError``: fine); ``invalid``; ``ort_wrong``;
and the findings: ``wrong`` (a silent divergence), ``abort`` (a process died), ``rejected_at_allocate``,
``rejected_at_invoke`` (LiteRT refused the written file), ``error`` (any other exception out of
pt2x), ``timeout``. Exit status 1 when there is a finding.

The seed is printed; without ``--seed`` it is random, except under ``CI=true`` where it is 0.
``--out DIR`` keeps each finding as ``s{seed}-i{index}.onnx`` with its inputs (``.npz``).

    python -m fuzz.fuzz_differential --n 500 --seed 3 --jobs 2 --out fuzz-diff
    python -m fuzz.fuzz_differential --replay 3:41
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from scripts import conformance_onnx

__all__ = ["OPS", "ATTRS", "FINDINGS", "FuzzCase", "FuzzResult", "make_case", "run_fuzz", "default_seed", "main"]

runner = conformance_onnx  # the worker processes and the comparison, shared with the conformance suite

OPSET = 18  # the opset pt2x's TFLite mappers implement; an op introduced later uses its own
RTOL, ATOL = 1e-3, 1e-4
F16_TOL = 1e-2
FINDINGS = ("wrong", "abort", "rejected_at_allocate", "rejected_at_invoke", "error", "timeout")
DEFAULT_TIMEOUT = 60.0

# ---------------------------------------------------------------------------- the ops

UNARY = ["Abs", "Neg", "Exp", "Log", "Sqrt", "Reciprocal", "Relu", "Sigmoid", "Tanh", "Floor", "Ceil", "Round",
         "Sin", "Cos", "Atan", "Erf", "Sign", "Softplus", "Gelu", "HardSwish", "HardSigmoid", "LeakyRelu", "Elu",
         "IsNaN", "IsInf", "Identity", "Not", "BitwiseNot"]
BINARY = ["Add", "Sub", "Mul", "Div", "Pow", "Max", "Min", "Mod", "Equal", "Greater", "Less", "GreaterOrEqual",
          "LessOrEqual", "And", "Or", "Xor", "PRelu", "BitwiseXor", "Sum"]
REDUCE = ["ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2", "ReduceLogSum",
          "ReduceLogSumExp", "ReduceSumSquare"]
OTHER = ["ArgMax", "ArgMin", "Softmax", "LogSoftmax", "Transpose", "Flatten", "Squeeze", "Unsqueeze", "Reshape",
         "Concat", "Split", "Slice", "Tile", "Expand", "Pad", "Gather", "GatherElements", "Where", "Cast", "CumSum",
         "TopK", "Trilu", "DepthToSpace", "SpaceToDepth", "Clip", "Conv", "ConvTranspose", "MaxPool", "AveragePool",
         "GlobalAveragePool", "GlobalMaxPool", "BatchNormalization", "InstanceNormalization", "LayerNormalization",
         "Gemm", "MatMul", "Resize"]
OPS = UNARY + BINARY + REDUCE + OTHER

# op -> attribute -> the values drawn (each attribute is set with probability 1/2, else the default)
ATTRS: dict[str, dict[str, list]] = {
    "Gelu": {"approximate": ["none", "tanh"]},
    "HardSigmoid": {"alpha": [0.2, 0.5, 1.0 / 6], "beta": [0.5, 0.0, 0.25]},
    "LeakyRelu": {"alpha": [0.01, 0.2, -0.5, 1.5]},
    "Elu": {"alpha": [1.0, 0.5, 2.0]},
    "IsInf": {"detect_negative": [0, 1], "detect_positive": [0, 1]},
    "Mod": {"fmod": [0, 1]},
    "ArgMax": {"axis": [0, 1, -1], "keepdims": [0, 1], "select_last_index": [0, 1]},
    "ArgMin": {"axis": [0, 1, -1], "keepdims": [0, 1], "select_last_index": [0, 1]},
    "Softmax": {"axis": [0, 1, -1, -2]},
    "LogSoftmax": {"axis": [0, 1, -1, -2]},
    "Flatten": {"axis": [0, 1, 2, -1]},
    "Concat": {"axis": [0, 1, -1]},
    "Split": {"axis": [0, 1, -1]},
    "Gather": {"axis": [0, 1, -1]},
    "GatherElements": {"axis": [0, 1, -1]},
    "CumSum": {"exclusive": [0, 1], "reverse": [0, 1]},
    "TopK": {"axis": [0, 1, -1], "largest": [0, 1], "sorted": [1]},
    "Trilu": {"upper": [0, 1]},
    "DepthToSpace": {"mode": ["DCR", "CRD"]},
    "Pad": {"mode": ["constant", "reflect", "edge"]},
    "Conv": {"auto_pad": ["NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID"]},
    "ConvTranspose": {},
    "MaxPool": {"auto_pad": ["NOTSET", "SAME_UPPER", "VALID"], "ceil_mode": [0, 1]},
    "AveragePool": {"auto_pad": ["NOTSET", "SAME_UPPER", "VALID"], "ceil_mode": [0, 1], "count_include_pad": [0, 1]},
    "BatchNormalization": {"epsilon": [1e-5, 1e-3]},
    "InstanceNormalization": {"epsilon": [1e-5, 1e-3]},
    "LayerNormalization": {"axis": [-1, 1, -2], "epsilon": [1e-5, 1e-3]},
    "Gemm": {"transA": [0, 1], "transB": [0, 1], "alpha": [1.0, 0.5], "beta": [1.0, 2.0]},
    "Resize": {"mode": ["nearest", "linear", "cubic"],
               "coordinate_transformation_mode": ["half_pixel", "asymmetric", "align_corners", "pytorch_half_pixel"],
               "nearest_mode": ["round_prefer_floor", "round_prefer_ceil", "floor", "ceil"],
               "antialias": [0, 1], "exclude_outside": [0, 1], "cubic_coeff_a": [-0.75, -0.5],
               "keep_aspect_ratio_policy": ["stretch", "not_larger", "not_smaller"]},
    **{op: {"keepdims": [0, 1], "noop_with_empty_axes": [0, 1]} for op in REDUCE},
}

_NP = {"tensor(float)": np.float32, "tensor(float16)": np.float16, "tensor(int8)": np.int8, "tensor(uint8)": np.uint8,
       "tensor(int16)": np.int16, "tensor(int32)": np.int32, "tensor(int64)": np.int64, "tensor(bool)": np.bool_}


# ---------------------------------------------------------------------------- a case


@dataclass
class FuzzCase:
    seed: int
    index: int
    kind: str  # "single" or "chain"
    what: str  # the op, or the chain's steps
    model: bytes = b""
    inputs: list = field(default_factory=list)  # arrays, in graph-input order
    invalid: str = ""  # why the generator gave up (a model onnx refuses)


@dataclass
class FuzzResult:
    seed: int
    index: int
    kind: str
    what: str
    outcome: str
    detail: str = ""


class _Graph:
    """A model under construction: graph inputs with their arrays, constants, nodes."""

    def __init__(self, rng: random.Random, nrng: np.random.Generator):
        self.rng, self.nrng = rng, nrng
        self.inputs: list = []
        self.arrays: list[np.ndarray] = []
        self.inits: list = []
        self.nodes: list = []
        self.opset = OPSET
        self.n = 0

    def name(self, stem: str) -> str:
        self.n += 1
        return f"{stem}{self.n}"

    def tensor(self, a: np.ndarray, *, const: bool | None = None) -> str:
        """An operand: a graph input holding ``a`` (the first one always), or a constant."""
        from onnx import helper, numpy_helper

        if const is None:
            const = bool(self.inputs) and self.rng.random() < 0.5
        name = self.name("c" if const else "x")
        if const:
            self.inits.append(numpy_helper.from_array(a, name))
        else:
            self.inputs.append(helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape))
            self.arrays.append(a)
        return name

    def node(self, op: str, ins: list[str], nout: int = 1, **attrs) -> list[str]:
        from onnx import helper

        outs = [self.name("y") for _ in range(nout)]
        self.nodes.append(helper.make_node(op, ins, outs, **attrs))
        return outs

    def model(self, outputs: list[str]) -> bytes:
        """The model, its outputs typed by onnx's shape inference (a node it cannot type: ``_Invalid``)."""
        import onnx
        from onnx import helper

        g = helper.make_graph(self.nodes, "fuzz", self.inputs, [], self.inits)
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", self.opset)], ir_version=9)
        m.graph.value_info.extend(helper.make_empty_tensor_value_info(o) for o in outputs)
        try:
            inferred = onnx.shape_inference.infer_shapes(m, strict_mode=True)
        except Exception as e:  # noqa: BLE001 - onnx refusing the generated node
            raise _Invalid(f"onnx: {type(e).__name__}: {str(e)[:200]}") from None
        types = {vi.name: vi for vi in inferred.graph.value_info}
        if any(o not in types or not types[o].type.tensor_type.elem_type for o in outputs):
            raise _Invalid("onnx's shape inference gives an output no type")
        del m.graph.value_info[:]
        m.graph.output.extend(types[o] for o in outputs)
        return m.SerializeToString()


def _values(nrng: np.random.Generator, shape, dtype, *, positive=False, nonzero=False) -> np.ndarray:
    dt = np.dtype(dtype)
    if dt == np.bool_:
        return nrng.random(shape) < 0.5
    if dt.kind == "f":
        a = nrng.standard_normal(shape) * 2
        if positive:
            a = np.abs(a) + 0.1
        if nonzero:
            a = np.where(np.abs(a) < 0.1, 0.5, a)
        return a.astype(dt)
    info = np.iinfo(dt)
    lo, hi = max(info.min, -20), min(info.max, 20)
    if positive:
        lo = 1
    a = nrng.integers(lo, hi + 1, size=shape)
    if nonzero:
        a = np.where(a == 0, 1, a)
    return a.astype(dt)


def _shape(rng: random.Random, rank: int | None = None, lo: int = 1, hi: int = 5) -> list[int]:
    rank = rng.randint(1, 4) if rank is None else rank
    return [rng.randint(lo, hi) for _ in range(rank)]


def _schema(op: str):
    """The op's schema at ``OPSET``, or (an op introduced later) at the version that introduced it."""
    from onnx import defs

    try:
        return defs.get_schema(op, OPSET, "")
    except defs.SchemaError:
        first = min(s.since_version for s in defs.get_all_schemas_with_history() if s.name == op and s.domain == "")
        return defs.get_schema(op, first, "")


def _schema_dtype(rng: random.Random, op: str, param: str):
    """A numpy dtype the op's type parameter ``param`` allows, among those drawn (float32 if none)."""
    allowed = next((c.allowed_type_strs for c in _schema(op).type_constraints if c.type_param_str == param), [])
    return rng.choice([_NP[t] for t in allowed if t in _NP] or [np.float32])


def _dtype(rng: random.Random, op: str, *, floats_only=False):
    """A numpy dtype the op's first input allows (its OpSchema type constraint), among those drawn."""
    s = _schema(op)
    first = s.inputs[0].type_str if s.inputs else "T"
    allowed = next((c.allowed_type_strs for c in s.type_constraints if c.type_param_str == first), [first])
    pool = [_NP[t] for t in allowed if t in _NP and (not floats_only or t in ("tensor(float)", "tensor(float16)"))]
    if not pool:
        return None
    if np.float32 in pool and rng.random() < 0.5:
        return np.float32  # half the cases in float32, the others spread over the allowed types
    return rng.choice(pool)


def _attrs(rng: random.Random, op: str) -> dict:
    known = _schema(op).attributes
    out = {}
    for name, values in ATTRS.get(op, {}).items():
        if name not in known:
            raise KeyError(f"ATTRS[{op!r}] names {name!r}, which ONNX's {op} does not have")
        if rng.random() < 0.5:
            out[name] = rng.choice(values)
    return out


def _broadcast_pair(rng: random.Random) -> tuple[list[int], list[int]]:
    a = _shape(rng)
    b = [d if rng.random() < 0.6 else 1 for d in a[rng.randint(0, len(a) - 1):]]
    return (a, b) if rng.random() < 0.5 else (b, a)


# ---------------------------------------------------------------------------- single-op recipes


def _single(g: _Graph, op: str) -> list[str]:
    rng, nrng = g.rng, g.nrng
    s = _schema(op)
    g.opset = max(OPSET, s.since_version)
    attrs = _attrs(rng, op)
    if op in UNARY:
        dt = _dtype(rng, op)
        if dt is None:
            raise _Invalid("no drawable type")
        x = _values(nrng, _shape(rng), dt, positive=op in ("Log", "Sqrt"), nonzero=op == "Reciprocal")
        return g.node(op, [g.tensor(x, const=False)], **attrs)
    if op in BINARY:
        dt = _dtype(rng, op)
        if dt is None:
            raise _Invalid("no drawable type")
        sa, sb = _broadcast_pair(rng)
        if op == "PRelu":
            sa, sb = _shape(rng, 4), None
            sb = [sa[1], 1, 1] if rng.random() < 0.5 else [1]
        if op == "Mod" and np.dtype(dt).kind == "f":
            attrs["fmod"] = 1
        a = _values(nrng, sa, dt)
        b = _values(nrng, sb, dt if op != "Pow" else rng.choice([dt, np.float32]) if np.dtype(dt).kind == "f" else dt,
                    nonzero=op in ("Div", "Mod"), positive=op == "Pow" and np.dtype(dt).kind != "f")
        if op == "Pow":
            a = np.abs(a) + (0.5 if np.dtype(dt).kind == "f" else 0)
            a = a.astype(dt)
            b = np.minimum(b, 3).astype(b.dtype)
        names = [g.tensor(a, const=False), g.tensor(b)]
        if op == "Sum" and rng.random() < 0.5:
            names.append(g.tensor(_values(nrng, sa, dt)))
        return g.node(op, names, **attrs)
    if op in REDUCE:
        dt = _dtype(rng, op)
        x = _values(nrng, _shape(rng), dt, positive=op == "ReduceLogSum")
        if op == "ReduceProd" and x.dtype.kind in "iu":
            x = np.clip(x, -2, 2).astype(x.dtype)  # a product that overflows int32 (pt2x's int64) is out of scope
        rank = x.ndim
        ins = [g.tensor(x, const=False)]
        if rng.random() < 0.8:
            axes = sorted(rng.sample(range(-rank, 0), rng.randint(0, rank)))
            ins.append(g.tensor(np.array(axes, np.int64)))
        return g.node(op, ins, **attrs)
    return _OTHER[op](g, op, attrs)


class _Invalid(Exception):
    """The generator cannot make this case (no type to draw, sizes that do not fit)."""


def _x(g: _Graph, op: str, shape=None, *, floats=False, rank=None, lo=1, hi=5) -> np.ndarray:
    dt = _dtype(g.rng, op, floats_only=floats)
    if dt is None:
        raise _Invalid("no drawable type")
    return _values(g.nrng, shape or _shape(g.rng, rank, lo, hi), dt)


def _argmax(g, op, attrs):
    return g.node(op, [g.tensor(_x(g, op, rank=g.rng.randint(2, 4)), const=False)], **attrs)


def _softmax(g, op, attrs):
    return g.node(op, [g.tensor(_x(g, op, floats=True, rank=g.rng.randint(2, 4)), const=False)], **attrs)


def _transpose(g, op, attrs):
    x = _x(g, op)
    perm = list(range(x.ndim))
    g.rng.shuffle(perm)
    return g.node(op, [g.tensor(x, const=False)], perm=perm)


def _flatten(g, op, attrs):
    return g.node(op, [g.tensor(_x(g, op, rank=g.rng.randint(2, 4)), const=False)], **attrs)


def _squeeze(g, op, attrs):
    x = _x(g, op)
    if op == "Squeeze":
        x = x.reshape([1 if g.rng.random() < 0.5 else d for d in x.shape]) if x.size == 1 else x
        ones = [i for i, d in enumerate(x.shape) if d == 1]
        if not ones:
            x = x.reshape([*x.shape, 1])
            ones = [x.ndim - 1]
        axes = sorted(g.rng.sample(ones, g.rng.randint(1, len(ones))))
    else:
        axes = sorted(g.rng.sample(range(x.ndim + 2), g.rng.randint(1, 2)))
    return g.node(op, [g.tensor(x, const=False), g.tensor(np.array(axes, np.int64))])


def _reshape(g, op, attrs):
    x = _x(g, op)
    target = list(x.shape)
    g.rng.shuffle(target)
    if len(target) > 1 and g.rng.random() < 0.5:
        target = [target[0] * target[1], *target[2:]]
    if g.rng.random() < 0.5:
        target[g.rng.randrange(len(target))] = -1
    return g.node(op, [g.tensor(x, const=False), g.tensor(np.array(target, np.int64))])


def _concat(g, op, attrs):
    x = _x(g, op, rank=g.rng.randint(2, 4))
    axis = attrs.get("axis", g.rng.randrange(x.ndim))
    parts = [x]
    for _ in range(g.rng.randint(1, 2)):
        shape = list(x.shape)
        shape[axis] = g.rng.randint(1, 4)
        parts.append(_values(g.nrng, shape, x.dtype))
    return g.node(op, [g.tensor(parts[0], const=False), *[g.tensor(p) for p in parts[1:]]], axis=axis)


def _split(g, op, attrs):
    x = _x(g, op, rank=g.rng.randint(1, 3), lo=2, hi=6)
    axis = attrs.get("axis", 0) % x.ndim
    n = x.shape[axis]
    cut = sorted(g.rng.sample(range(1, n), g.rng.randint(1, n - 1))) if n > 1 else []
    sizes = np.diff([0, *cut, n]).astype(np.int64)
    if g.rng.random() < 0.5 or len(sizes) == 1:
        return g.node(op, [g.tensor(x, const=False), g.tensor(sizes)], nout=len(sizes), axis=axis)
    k = g.rng.randint(2, max(2, n))
    g.opset = max(g.opset, 18)
    return g.node(op, [g.tensor(x, const=False)], nout=k, axis=axis, num_outputs=k)


def _slice(g, op, attrs):
    x = _x(g, op, hi=7)
    axes = sorted(g.rng.sample(range(x.ndim), g.rng.randint(1, x.ndim)))
    starts, ends, steps = [], [], []
    for a in axes:
        n = x.shape[a]
        step = g.rng.choice([1, 1, 2, -1, -2])
        s, e = g.rng.randint(-n - 1, n + 1), g.rng.choice([g.rng.randint(-n - 1, n + 1), 2**62, -(2**62)])
        starts.append(s), ends.append(e), steps.append(step)
    ins = [g.tensor(x, const=False), g.tensor(np.array(starts, np.int64)), g.tensor(np.array(ends, np.int64)),
           g.tensor(np.array(axes, np.int64)), g.tensor(np.array(steps, np.int64))]
    return g.node(op, ins)


def _tile(g, op, attrs):
    x = _x(g, op)
    reps = np.array([g.rng.randint(1, 3) for _ in range(x.ndim)], np.int64)
    return g.node(op, [g.tensor(x, const=False), g.tensor(reps)])


def _expand(g, op, attrs):
    x = _x(g, op, shape=[g.rng.choice([1, 3]) for _ in range(g.rng.randint(1, 3))])
    target = [d if d != 1 else g.rng.randint(1, 4) for d in x.shape]
    if g.rng.random() < 0.3:
        target = [2, *target]
    return g.node(op, [g.tensor(x, const=False), g.tensor(np.array(target, np.int64))])


def _pad(g, op, attrs):
    x = _x(g, op, lo=3, hi=5)
    limit = 2 if attrs.get("mode") == "reflect" else 3
    pads = [g.rng.randint(0, limit) for _ in range(2 * x.ndim)]
    if attrs.get("mode", "constant") == "constant" and g.rng.random() < 0.3:
        pads = [p if g.rng.random() < 0.5 else -1 for p in pads]
    ins = [g.tensor(x, const=False), g.tensor(np.array(pads, np.int64))]
    if attrs.get("mode", "constant") == "constant" and g.rng.random() < 0.5:
        ins.append(g.tensor(np.array(_values(g.nrng, [], x.dtype)), const=True))
    return g.node(op, ins, **attrs)


def _gather(g, op, attrs):
    x = _x(g, op, rank=g.rng.randint(1, 3))
    axis = attrs.get("axis", 0) % x.ndim
    n = x.shape[axis]
    if op == "Gather":
        idx = g.nrng.integers(-n, n, size=_shape(g.rng, g.rng.randint(0, 2))).astype(np.int64)
    else:
        shape = list(x.shape)
        shape[axis] = g.rng.randint(1, 4)
        idx = g.nrng.integers(-n, n, size=shape).astype(np.int64)
    return g.node(op, [g.tensor(x, const=False), g.tensor(idx)], axis=axis)


def _where(g, op, attrs):
    sa, sb = _broadcast_pair(g.rng)
    cond = g.nrng.random(sa) < 0.5
    dt = _schema_dtype(g.rng, "Where", "T")
    return g.node(op, [g.tensor(cond, const=False), g.tensor(_values(g.nrng, sb, dt)), g.tensor(_values(g.nrng, sa, dt))])


def _cast(g, op, attrs):
    from onnx import helper

    x = _x(g, op)
    to = g.rng.choice([np.float32, np.float16, np.int32, np.int64, np.int8, np.uint8, np.int16, np.bool_])
    if x.dtype.kind == "f" and np.dtype(to).kind in "iu":  # out-of-range float -> int casts are undefined
        x = np.clip(x, 0 if np.dtype(to).kind == "u" else -100, 100).astype(x.dtype)
    return g.node(op, [g.tensor(x, const=False)], to=helper.np_dtype_to_tensor_dtype(np.dtype(to)))


def _cumsum(g, op, attrs):
    x = _x(g, op)
    axis = np.array(g.rng.randrange(-x.ndim, x.ndim), np.int64)
    return g.node(op, [g.tensor(x, const=False), g.tensor(axis)], **attrs)


def _topk(g, op, attrs):
    x = _x(g, op, rank=g.rng.randint(1, 3))
    x = (x + g.nrng.permutation(x.size).reshape(x.shape) * 1e-2).astype(x.dtype) if x.dtype.kind == "f" else x
    axis = attrs["axis"] = attrs.get("axis", -1) if -x.ndim <= attrs.get("axis", -1) < x.ndim else -1
    k = np.array([g.rng.randint(1, x.shape[axis])], np.int64)
    if x.dtype.kind != "f":
        x = g.nrng.permutation(x.size).reshape(x.shape).astype(x.dtype)  # ties order differently
    return g.node(op, [g.tensor(x, const=False), g.tensor(k)], nout=2, **attrs)


def _trilu(g, op, attrs):
    x = _x(g, op, rank=g.rng.randint(2, 3))
    ins = [g.tensor(x, const=False)]
    if g.rng.random() < 0.5:
        ins.append(g.tensor(np.array(g.rng.randint(-2, 2), np.int64)))
    return g.node(op, ins, **attrs)


def _depth_space(g, op, attrs):
    b = g.rng.choice([2, 3])
    if op == "DepthToSpace":
        x = _x(g, op, shape=[1, b * b * g.rng.randint(1, 2), g.rng.randint(1, 3), g.rng.randint(1, 3)])
        return g.node(op, [g.tensor(x, const=False)], blocksize=b, **attrs)
    x = _x(g, op, shape=[1, g.rng.randint(1, 3), b * g.rng.randint(1, 2), b * g.rng.randint(1, 2)])
    return g.node(op, [g.tensor(x, const=False)], blocksize=b)


def _clip(g, op, attrs):
    x = _x(g, op)
    ins = [g.tensor(x, const=False)]
    lo = _values(g.nrng, [], x.dtype)
    hi = (lo + abs(_values(g.nrng, [], x.dtype))).astype(x.dtype)
    choice = g.rng.randint(0, 3)
    if choice & 1:
        ins.append(g.tensor(np.array(lo)))
    elif choice & 2:
        ins.append("")
    if choice & 2:
        ins.append(g.tensor(np.array(hi)))
    return g.node(op, ins)


def _spatial(g: _Graph, channels: int, rank: int | None = None) -> list[int]:
    rank = rank or g.rng.choice([3, 4, 4, 4])
    return [g.rng.randint(1, 2), channels, *[g.rng.randint(4, 9) for _ in range(rank - 2)]]


def _conv_attrs(g: _Graph, attrs: dict, nsp: int, *, pool=False) -> tuple[dict, list[int]]:
    k = [g.rng.randint(1, 3) for _ in range(nsp)]
    out = dict(attrs)
    out["kernel_shape"] = k
    if g.rng.random() < 0.5:
        out["strides"] = [g.rng.randint(1, 2) for _ in range(nsp)]
    if out.get("auto_pad", "NOTSET") == "NOTSET" and g.rng.random() < 0.6:
        out["pads"] = [g.rng.randint(0, kk - 1) if pool else g.rng.randint(0, 2) for kk in k] * 2
    if not pool and g.rng.random() < 0.3:
        out["dilations"] = [g.rng.randint(1, 2) for _ in range(nsp)]
    return out, k


def _conv(g, op, attrs):
    cin = g.rng.randint(1, 4)
    group = g.rng.choice([1, 1, cin])
    x = _values(g.nrng, _spatial(g, cin), np.float32)
    nsp = x.ndim - 2
    a, k = _conv_attrs(g, attrs, nsp)
    if group > 1:
        a["group"] = group
    cout = group * g.rng.randint(1, 2)
    if op == "Conv":
        w = _values(g.nrng, [cout, cin // group, *k], np.float32)
    else:
        a.pop("auto_pad", None)
        if g.rng.random() < 0.3:
            a["output_padding"] = [0] * nsp
        w = _values(g.nrng, [cin, cout // group, *k], np.float32)
    ins = [g.tensor(x, const=False), g.tensor(w, const=True)]
    if g.rng.random() < 0.5:
        ins.append(g.tensor(_values(g.nrng, [cout], np.float32), const=True))
    return g.node(op, ins, **a)


def _pool(g, op, attrs):
    x = _values(g.nrng, _spatial(g, g.rng.randint(1, 3)), np.float32)
    a, _ = _conv_attrs(g, attrs, x.ndim - 2, pool=True)
    if op == "MaxPool" and g.rng.random() < 0.3:
        a["dilations"] = [g.rng.randint(1, 2) for _ in range(x.ndim - 2)]
    return g.node(op, [g.tensor(x, const=False)], **a)


def _global_pool(g, op, attrs):
    return g.node(op, [g.tensor(_values(g.nrng, _spatial(g, g.rng.randint(1, 3)), np.float32), const=False)])


def _norm(g, op, attrs):
    x = _values(g.nrng, _spatial(g, g.rng.randint(1, 4)), np.float32) * 3 + 1
    x = x.astype(np.float32)
    c = x.shape[1]
    if op == "BatchNormalization":
        var = np.abs(_values(g.nrng, [c], np.float32)) + 0.1
        ins = [g.tensor(x, const=False), *[g.tensor(_values(g.nrng, [c], np.float32), const=True) for _ in range(3)],
               g.tensor(var.astype(np.float32), const=True)]
        return g.node(op, ins, **attrs)
    if op == "InstanceNormalization":
        ins = [g.tensor(x, const=False), *[g.tensor(_values(g.nrng, [c], np.float32), const=True) for _ in range(2)]]
        return g.node(op, ins, **attrs)
    axis = attrs.get("axis", -1) % x.ndim
    shape = list(x.shape[axis:])
    ins = [g.tensor(x, const=False), g.tensor(_values(g.nrng, shape, np.float32), const=True)]
    if g.rng.random() < 0.5:
        ins.append(g.tensor(_values(g.nrng, shape, np.float32), const=True))
    return g.node(op, ins, **attrs)


def _gemm(g, op, attrs):
    m, k, n = g.rng.randint(1, 5), g.rng.randint(1, 5), g.rng.randint(1, 5)
    a = _values(g.nrng, [k, m] if attrs.get("transA") else [m, k], np.float32)
    b = _values(g.nrng, [n, k] if attrs.get("transB") else [k, n], np.float32)
    ins = [g.tensor(a, const=False), g.tensor(b)]
    if g.rng.random() < 0.7:
        ins.append(g.tensor(_values(g.nrng, g.rng.choice([[n], [m, n], [m, 1], [1, n], [1]]), np.float32)))
    return g.node(op, ins, **attrs)


def _matmul(g, op, attrs):
    m, k, n = g.rng.randint(1, 5), g.rng.randint(1, 5), g.rng.randint(1, 5)
    batch = [g.rng.randint(1, 3) for _ in range(g.rng.randint(0, 2))]
    a = _values(g.nrng, [*batch, m, k], np.float32)
    b = _values(g.nrng, [*(batch if g.rng.random() < 0.5 else []), k, n], np.float32)
    return g.node(op, [g.tensor(a, const=False), g.tensor(b)])


def _resize(g, op, attrs):
    x = _values(g.nrng, [1, g.rng.randint(1, 3), g.rng.randint(2, 7), g.rng.randint(2, 7)], np.float32)
    if g.rng.random() < 0.5:
        scales = np.array([1, 1, g.rng.choice([0.5, 1.5, 2.0, 3.0, 0.75]), g.rng.choice([0.5, 1.5, 2.0, 3.0])],
                          np.float32)
        ins = [g.tensor(x, const=False), "", g.tensor(scales, const=True)]
    else:
        sizes = np.array([*x.shape[:2], g.rng.randint(1, 12), g.rng.randint(1, 12)], np.int64)
        ins = [g.tensor(x, const=False), "", "", g.tensor(sizes, const=True)]
    return g.node(op, ins, **attrs)


_OTHER = {"ArgMax": _argmax, "ArgMin": _argmax, "Softmax": _softmax, "LogSoftmax": _softmax, "Transpose": _transpose,
          "Flatten": _flatten, "Squeeze": _squeeze, "Unsqueeze": _squeeze, "Reshape": _reshape, "Concat": _concat,
          "Split": _split, "Slice": _slice, "Tile": _tile, "Expand": _expand, "Pad": _pad, "Gather": _gather,
          "GatherElements": _gather, "Where": _where, "Cast": _cast, "CumSum": _cumsum, "TopK": _topk,
          "Trilu": _trilu, "DepthToSpace": _depth_space, "SpaceToDepth": _depth_space, "Clip": _clip,
          "Conv": _conv, "ConvTranspose": _conv, "MaxPool": _pool, "AveragePool": _pool,
          "GlobalAveragePool": _global_pool, "GlobalMaxPool": _global_pool, "BatchNormalization": _norm,
          "InstanceNormalization": _norm, "LayerNormalization": _norm, "Gemm": _gemm, "MatMul": _matmul,
          "Resize": _resize}


# ---------------------------------------------------------------------------- chains

CHAIN_STEPS = ("Conv", "MaxPool", "AveragePool", "Relu", "Sigmoid", "Tanh", "Abs", "Add", "Mul", "Transpose")


def _chain(g: _Graph, steps: list[str]) -> list[str]:
    rng, nrng = g.rng, g.nrng
    shape = [1, rng.randint(1, 4), rng.randint(5, 10), rng.randint(5, 10)]
    cur = g.tensor(_values(nrng, shape, np.float32), const=False)
    for step in steps:
        if step == "Conv":
            cout = rng.randint(1, 4)
            k = [min(rng.randint(1, 3), shape[2]), min(rng.randint(1, 3), shape[3])]
            pads = [rng.randint(0, kk - 1) for kk in k] * 2 if rng.random() < 0.5 else [0, 0, 0, 0]
            w = _values(nrng, [cout, shape[1], *k], np.float32) * 0.5
            (cur,) = g.node("Conv", [cur, g.tensor(w.astype(np.float32), const=True)], kernel_shape=k, pads=pads)
            shape = [shape[0], cout, shape[2] + pads[0] + pads[2] - k[0] + 1, shape[3] + pads[1] + pads[3] - k[1] + 1]
        elif step in ("MaxPool", "AveragePool"):
            k = [min(2, shape[2]), min(2, shape[3])]
            s = [rng.randint(1, 2), rng.randint(1, 2)]
            (cur,) = g.node(step, [cur], kernel_shape=k, strides=s)
            shape = [shape[0], shape[1], (shape[2] - k[0]) // s[0] + 1, (shape[3] - k[1]) // s[1] + 1]
        elif step in ("Add", "Mul"):
            b = _values(nrng, rng.choice([[1, shape[1], 1, 1], [1], shape[1:]]), np.float32)
            (cur,) = g.node(step, [cur, g.tensor(b, const=True)])
        elif step == "Transpose":
            perm = [0, 1, 2, 3]
            rng.shuffle(perm)
            (cur,) = g.node("Transpose", [cur], perm=perm)
            shape = [shape[p] for p in perm]
        else:
            (cur,) = g.node(step, [cur])
    return [cur]


# ---------------------------------------------------------------------------- making and running cases


def make_case(seed: int, index: int, ops: list[str] | None = None) -> FuzzCase:
    """The case ``(seed, index)``: a model and its inputs, the same on every run (``ops``: draw
    single-op cases from these only, and no chains)."""
    import onnx

    rng = random.Random(f"{seed}:{index}" if ops is None else f"{seed}:{index}:{','.join(ops)}")
    nrng = np.random.default_rng([seed, index])
    g = _Graph(rng, nrng)
    if ops is None and rng.random() < 0.2:
        steps = [rng.choice(CHAIN_STEPS) for _ in range(rng.randint(2, 6))]
        case = FuzzCase(seed, index, "chain", " > ".join(steps))
        try:
            outs = _chain(g, steps)
        except _Invalid as e:
            case.invalid = str(e)
            return case
    else:
        op = rng.choice(ops or OPS)
        case = FuzzCase(seed, index, "single", op)
        try:
            outs = _single(g, op)
        except _Invalid as e:
            case.invalid = str(e)
            return case
        except Exception as e:  # noqa: BLE001 - a bug of this generator: reported as such, not as pt2x's
            case.invalid = f"generator bug: {type(e).__name__}: {e}"
            case.kind = "generror"
            return case
    try:
        case.model = g.model(outs)
    except _Invalid as e:
        case.invalid = str(e)
        return case
    case.inputs = g.arrays
    try:
        m = onnx.load_from_string(case.model)
        _check(m)
        case.model = onnx.shape_inference.infer_shapes(m, check_type=True, strict_mode=True).SerializeToString()
    except Exception as e:  # noqa: BLE001 - onnx refusing the model: the case is skipped, not a finding
        case.invalid = f"onnx: {type(e).__name__}: {str(e)[:200]}"
    return case


def _check(m) -> None:
    """onnx's checker, on the model with its outputs of unknown rank (Reduce* of run-time axes, which
    ONNX allows) given a rank-less stand-in the checker accepts."""
    import onnx

    probe = onnx.ModelProto()
    probe.CopyFrom(m)
    for o in probe.graph.output:
        if not o.type.tensor_type.HasField("shape"):
            o.type.tensor_type.shape.SetInParent()  # the checker insists on the field (the probe only)
    onnx.checker.check_model(probe)


def compare(got, want) -> str | None:
    """None when LiteRT's output equals ONNX Runtime's within the fuzzer's tolerance."""
    want = np.asarray(want)
    tol = (F16_TOL, F16_TOL) if want.dtype == np.float16 else (RTOL, ATOL)
    return runner.compare(got, want, *tol)


def run_case(case: FuzzCase, worker, timeout: float = DEFAULT_TIMEOUT) -> FuzzResult:
    res = FuzzResult(case.seed, case.index, case.kind, case.what,
                     "generror" if case.kind == "generror" else "invalid", case.invalid)
    if case.invalid:
        return res
    import onnx

    names = [i.name for i in onnx.load_from_string(case.model).graph.input]
    ref = worker.call({"kind": "ort", "case": f"{case.seed}:{case.index}", "model": case.model,
                       "feeds": dict(zip(names, case.inputs))}, timeout)
    if ref["status"] in ("abort", "timeout"):
        res.detail = f"ONNX Runtime: {ref['status']}: {ref.get('message', '')[:300]}"
        return res  # ONNX Runtime's own trouble: not a finding about pt2x
    if ref["status"] != "ok":
        res.detail = "ONNX Runtime: " + ref.get("message", "")[:300]
        return res
    conv = worker.call({"kind": "convert", "case": f"{case.seed}:{case.index}", "model": case.model}, timeout)
    if conv["status"] != "ok":
        res.outcome = {"harness": "error"}.get(conv["status"], conv["status"])
        res.detail = f"{conv.get('kind', '')}: {conv.get('message', '')}"[:600]
        return res
    run = worker.call({"kind": "run", "case": f"{case.seed}:{case.index}", "tflite": conv["tflite"],
                       "inputs": case.inputs, "xnnpack": True}, timeout)
    if run["status"] != "ok":
        res.outcome = {"harness": "error"}.get(run["status"], run["status"])
        res.detail = run.get("message", "")[:600]
        return res
    got, want = run["outputs"], ref["outputs"]
    if len(got) != len(want):
        res.outcome, res.detail = "wrong", f"{len(got)} outputs, ONNX Runtime gave {len(want)}"
        return res
    for i, (a, b) in enumerate(zip(got, want)):
        why = compare(a, b)
        if why:
            res.outcome, res.detail = "wrong", f"output {i}: {why}"
            _second_opinion(res, case, got, want)
            return res
    res.outcome, res.detail = "match", ""
    return res


def _second_opinion(res: FuzzResult, case: FuzzCase, got: list, want: list) -> None:
    """LiteRT and ONNX Runtime disagree: onnx's reference evaluator decides. Where LiteRT agrees with
    it and ONNX Runtime does not (MaxPool SAME_UPPER with dilations, say), ONNX Runtime is wrong:
    ``ort_wrong``, not a finding."""
    import onnx
    from onnx.reference import ReferenceEvaluator

    try:
        m = onnx.load_from_string(case.model)
        ref = ReferenceEvaluator(m).run(None, dict(zip([i.name for i in m.graph.input], case.inputs)))
    except Exception as e:  # noqa: BLE001 - the reference cannot run it: ONNX Runtime's answer stands
        res.detail += f" (onnx's reference evaluator: {type(e).__name__})"
        return
    litert_ok = all(compare(g, r) is None for g, r in zip(got, ref))
    ort_ok = all(compare(w, r) is None for w, r in zip(want, ref))
    if litert_ok and not ort_ok:
        res.outcome = "ort_wrong"
        res.detail = "LiteRT agrees with onnx's reference evaluator, ONNX Runtime does not: " + res.detail
    else:
        res.detail += " (onnx's reference evaluator agrees with ONNX Runtime)" if ort_ok else " (and with neither)"


def run_fuzz(seed: int, n: int, *, jobs: int = 1, start: int = 0, timeout: float = DEFAULT_TIMEOUT,
             ops: list[str] | None = None, progress=None) -> list[FuzzResult]:
    """Cases ``start .. start+n-1`` of ``seed`` on ``jobs`` worker processes, in index order."""
    results: dict[int, FuzzResult] = {}

    def one(i: int, w) -> None:
        case = make_case(seed, i, ops)
        r = results[i] = run_case(case, w, timeout)
        if progress:
            progress(r, case)

    runner.run_on_workers(list(range(start, start + n)), one, jobs=jobs, prefix="pt2x-fuzz-diff-")
    return [results[i] for i in sorted(results)]


def default_seed() -> int:
    """0 under ``CI=true`` (derandomized), else a fresh random seed."""
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        return 0
    return random.SystemRandom().randrange(1 << 31)


def _save(case: FuzzCase, out: str) -> str:
    os.makedirs(out, exist_ok=True)
    stem = os.path.join(out, f"s{case.seed}-i{case.index}")
    with open(stem + ".onnx", "wb") as f:
        f.write(case.model)
    np.savez(stem + ".npz", *case.inputs)
    return stem + ".onnx"


def summary(results: list[FuzzResult], seed: int, ops: list[str] | None = None) -> str:
    counts = Counter(r.outcome for r in results)
    ops_arg = f" --ops {','.join(ops)}" if ops else ""
    lines = [f"seed {seed}: {len(results)} cases: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))]
    per_op: dict[str, Counter] = {}
    for r in results:
        per_op.setdefault(r.what if r.kind == "single" else "(chain)", Counter())[r.outcome] += 1
    for r in results:
        if r.outcome in FINDINGS:
            lines.append(f"  FINDING {r.outcome} {r.kind} {r.what}: {r.detail[:300]}"
                         f"\n      replay: python -m fuzz.fuzz_differential --replay {r.seed}:{r.index}{ops_arg}")
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--n", type=int, default=200, help="cases (default 200)")
    p.add_argument("--seed", type=int, help="default: random (0 under CI=true)")
    p.add_argument("--start", type=int, default=0, help="first case index")
    p.add_argument("--jobs", type=int, default=1)
    p.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT, help="seconds per step of a case")
    p.add_argument("--out", help="keep each finding's model and inputs here")
    p.add_argument("--ops", help="comma-separated ops to draw from (single-op cases only; other cases than "
                                 "without it); replay with the same --ops")
    p.add_argument("--replay", metavar="SEED:INDEX", help="run one case and print it")
    p.add_argument("--verbose", action="store_true")
    args = p.parse_args(argv)
    ops = args.ops.split(",") if args.ops else None
    unknown = sorted(set(ops or ()) - set(OPS))
    if unknown:
        p.error(f"--ops: no recipe for {', '.join(unknown)} (the ops: {', '.join(OPS)})")
    if args.replay:
        seed, index = (int(x) for x in args.replay.split(":"))
        case = make_case(seed, index, ops)
        print(f"case {seed}:{index} {case.kind} {case.what}")
        if case.model:
            import onnx

            print(onnx.printer.to_text(onnx.load_from_string(case.model)))
        r = run_fuzz(seed, 1, start=index, ops=ops)[0]
        print(f"{r.outcome}: {r.detail}")
        if args.out and r.outcome in FINDINGS:
            print("saved", _save(case, args.out))
        return 1 if r.outcome in FINDINGS else 0
    seed = default_seed() if args.seed is None else args.seed
    print(f"seed {seed}", flush=True)
    t0 = time.monotonic()
    lock = threading.Lock()

    def progress(r: FuzzResult, case: FuzzCase) -> None:
        with lock:
            if args.verbose:
                print(f"[{r.index}] {r.kind} {r.what}: {r.outcome} {r.detail[:160]}", flush=True)
            if args.out and r.outcome in FINDINGS:
                _save(case, args.out)

    results = run_fuzz(seed, args.n, jobs=args.jobs, start=args.start, timeout=args.timeout, ops=ops, progress=progress)
    print(summary(results, seed, ops))
    print(f"{time.monotonic() - t0:.0f} s")
    return 1 if any(r.outcome in FINDINGS for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
