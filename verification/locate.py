"""``--locate``: the first value, in execution order, where the converted file leaves its reference.

The converted run keeps every intermediate (ONNX: each node output made a graph output in memory;
LiteRT: ``experimental_preserve_all_tensors``), named as in the file. The reference keeps its own
(torch eager: each ATen node's value; pt2x's ONNX: each tensor), named after the program's values,
which is how pt2x names the ONNX and TFLite tensors that hold them. A converted value whose name and
shape the reference has is compared under the tolerance of its dtype; the first that differs is
named with its origin: the ATen node, its target and its module path (the converted node's origin
stamp when it has one, else the program's node of that name: a file another tool wrote is matched
by value names alone).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..converters.aten.graph import ProgramView, input_names, output_names
from ..converters.aten.module_stack import module_path
from .compare import Tolerance, compare, tolerance
from .report import Divergence, ValueDifference

__all__ = ["Origin", "ValueCheck", "program_origins", "onnx_origins", "onnx_node_origins", "quantization_steps", "value_checks",
           "first_divergence", "value_differences"]

Origin = tuple  # (aten node, aten target, module path)
ORIGIN_KEYS = ("pt2x.aten_node", "pt2x.aten_target", "pt2x.module_path")


def program_origins(view: ProgramView) -> dict[str, Origin]:
    """Each top-level value name -> the ATen node making it."""
    out = {}
    for n in view.nodes:
        for name in output_names(n):
            out[name] = (n.name, str(n.target), module_path(n))
    return out


def quantization_steps(view: ProgramView) -> dict[str, float | None]:
    """In a quantized program, how intermediates are compared: a dequantized activation within one
    quantization step (value -> its scale); a float value computed from dequantized activations
    before the next quantize is not compared (value -> None): a rounding tie resolved the other way
    upstream moves it by more than float tolerance, and the next quantize takes it back to within a
    step. Quantized (integer) values are compared in steps by ``compare``'s table."""
    steps: dict[str, float | None] = {}
    for n in view.nodes:
        target, outs = str(n.target), output_names(n)
        if ".quantize_per_tensor." in target:
            continue
        if ".dequantize_per_tensor." in target:
            scale = next((na.arg for na in n.inputs if na.name == "scale"), None)
            step = float(scale.value) if scale is not None and scale.type == "as_float" else None
            steps.update({o: step for o in outs})
        elif any(i in steps for i in input_names(n)):
            steps.update({o: None for o in outs})
    return steps


def onnx_origins(proto) -> dict[str, Origin]:
    """Each ONNX tensor name -> the origin stamp of the node making it (stamped nodes only)."""
    out = {}
    for node in proto.graph.node:
        stamp = {p.key: p.value for p in node.metadata_props if p.key in ORIGIN_KEYS}
        if "pt2x.aten_node" in stamp:
            origin = tuple(stamp.get(k) for k in ORIGIN_KEYS)
            for o in node.output:
                out.setdefault(o, origin)
    return out


def onnx_node_origins(proto) -> dict[str, str]:
    """Each main-graph ONNX node (its name, ``#i`` when it has none, as ``--locate`` names it) -> the
    ATen node its origin stamp names (stamped nodes only)."""
    out = {}
    for i, node in enumerate(proto.graph.node):
        aten = next((p.value for p in node.metadata_props if p.key == ORIGIN_KEYS[0]), None)
        if aten is not None:
            out[node.name or f"#{i}"] = aten
    return out


def _comparable(got: np.ndarray, want: np.ndarray) -> bool:
    if not (got.shape == want.shape or got.size == want.size == 1):
        return False
    return want.dtype.kind in "biufc" or want.dtype.name == "bfloat16"



MAX_CHAIN = 12
"""The most converted nodes listed as the places a divergence may arise."""


def _chain_at(order, at: int, known: set[str], limit: int | None = None) -> list[int]:
    """The node at ``at`` and the nodes before it that feed it through values the reference does
    not have (a lowering's inner values, a file's renamed values), as indexes into ``order``: where
    a divergence there arises."""
    producer = {}
    for i, (_, _, _, outs) in enumerate(order[: at + 1]):
        for o in outs:
            producer[o] = i
    picked, todo = set(), [at]
    while todo and (limit is None or len(picked) < limit):
        i = todo.pop()
        if i in picked:
            continue
        picked.add(i)
        todo += [producer[x] for x in order[i][2] if x in producer and x not in known]
    return sorted(picked)


def _chain(order, at: int, known: set[str]) -> list[str]:
    return [f"{order[i][0]} ({order[i][1]}) -> {', '.join(order[i][3])}" for i in _chain_at(order, at, known, MAX_CHAIN)]


def _channels_last_twin(name: str, g: np.ndarray, want: dict, tol_of) -> bool:
    """``name`` (``value/…``, a tensor the TFLite layout pass made) holds ``value`` channels-last and
    equals it. Used only to confirm: a pairing by name prefix is not sure enough to blame."""
    base = name.split("/", 1)[0]
    w = want.get(base)
    if base == name or w is None or g.ndim != 4 or np.ndim(w) != 4:
        return False
    w = np.transpose(np.asarray(w), (0, 2, 3, 1))
    if g.shape != w.shape or not _comparable(g, w):
        return False
    return compare(g, w.astype(np.float32) if w.dtype.name == "bfloat16" else w, tol_of(w)).ok


def _representations_differ(g: np.ndarray, w: np.ndarray) -> bool:
    """uint8 against int8 (a runtime's int8 twin of a uint8 tensor, zero point moved by 128)."""
    return g.dtype != w.dtype and g.dtype.itemsize == w.dtype.itemsize == 1 and g.dtype.kind in "iu" and w.dtype.kind in "iu"


def _steps_allowed(g: np.ndarray, w: np.ndarray) -> float:
    """One step, and the float32 rounding of two dequantized values (each ``(q - zp) * scale``
    rounded to float32: off by up to 2^-24 of its magnitude, which counted in steps is up to
    2^-24 x |q - zp|: 125 and 126 steps of 0.0123457 are 1.0000074 steps apart)."""
    both = np.abs(np.concatenate([g.reshape(-1), w.reshape(-1)]).astype(np.float64))
    both = both[np.isfinite(both)]
    magnitude = float(both.max()) if both.size else 0.0
    return 1.0 + 1e-6 + 2.0**-22 * magnitude


def _difference(g: np.ndarray, w: np.ndarray, tol: Tolerance, step: float | None):
    """The comparison of one value, and its tolerance in words."""
    if step:
        gs, ws = g.astype(np.float64) / step, w.astype(np.float64) / step
        diff = compare(gs, ws, Tolerance(0.0, _steps_allowed(gs, ws) if gs.shape == ws.shape else 1.0, "steps"))
        return diff, Tolerance(0.0, step, "steps").text()
    diff = compare(g.astype(np.float32) if g.dtype.name == "bfloat16" else g,
                   w.astype(np.float32) if w.dtype.name == "bfloat16" else w, tol)
    return diff, diff.tolerance or tol.text()


@dataclass(frozen=True)
class ValueCheck:
    """One converted value compared with the reference's value of the same name (one input set)."""

    tensor: str  # the value's name, in the file and in the reference
    at: int  # index in the execution order of the converted node that wrote it
    ok: bool
    max_abs: float
    max_rel: float
    ratio: float  # the worst element's difference over what its tolerance allows (past it above 1)
    tolerance: str
    note: str = ""  # a shape that differs, in words
    counted: bool = True  # False: a channels-last twin of a reference value, found equal (not paired)


def value_checks(order, got: dict, want: dict, runtime: str, steps: dict[str, float | None] | None = None) -> list[ValueCheck]:
    """Every value of one input set that the converted run (``got``) and the reference (``want``)
    both hold, by name and shape, in the converted file's execution order (``order``: node, op
    type, input names, output names). A value is paired by its name only: a tensor a rewrite
    changed (a BatchNorm folded into its convolution writes the BatchNorm's value) carries the name
    of the value it now holds, never of the one it replaced."""

    def tol_of(w):
        return tolerance(w.dtype.name, runtime)

    checks: list[ValueCheck] = []
    seen: set[str] = set()
    for at, (_, _, _, outs) in enumerate(order):
        for name in outs:
            if name not in got:
                continue
            g = np.asarray(got[name])
            if name not in want:
                if _channels_last_twin(name, g, want, tol_of):
                    checks.append(ValueCheck(name, at, True, 0.0, 0.0, 0.0, "", counted=False))
                continue
            if name in seen:
                continue
            seen.add(name)
            w = np.asarray(want[name])
            if g.ndim == 4 and w.ndim == 4 and g.shape != w.shape and g.shape == w.transpose(0, 2, 3, 1).shape:
                g = g.transpose(0, 3, 1, 2)  # the value, channels-last (a TFLite graph output of nhwc_io)
            if not (w.dtype.kind in "biufc" or w.dtype.name == "bfloat16") or _representations_differ(g, w):
                continue
            if steps and name in steps and steps[name] is None:
                continue
            diff, tol_text = _difference(g, w, tol_of(w), (steps or {}).get(name))  # a shape that differs too
            checks.append(ValueCheck(name, at, diff.ok, diff.max_abs, diff.max_rel, diff.ratio, tol_text, diff.note))
    return checks


def first_divergence(order, got_values: list[dict], want_values: list[dict], runtime: str,
                     stamps: dict[str, Origin], program: dict[str, Origin],
                     steps: dict[str, float | None] | None = None) -> tuple[Divergence | None, int]:
    """``order``: (node, op type, input names, output names) in execution order; ``got_values`` /
    ``want_values``: per input set, name -> array. The first divergence over the input sets, and
    how many values were compared."""
    compared = 0
    for got, want in zip(got_values, want_values):
        good: set[str] = set()  # values found equal so far: where the search for the cause stops
        for c in value_checks(order, got, want, runtime, steps):
            compared += c.counted
            if not c.ok:
                node, op = order[c.at][0], order[c.at][1]
                origin = stamps.get(c.tensor) or program.get(c.tensor) or (None, None, None)
                return Divergence(origin[0], origin[1], origin[2], node, op, c.tensor, c.max_abs, c.max_rel,
                                  c.tolerance, compared, c.note, _chain(order, c.at, good)), compared
            good.add(c.tensor)
    return None, compared


def value_differences(order, got_values: list[dict], want_values: list[dict], runtime: str,
                      stamps: dict[str, Origin], program: dict[str, Origin],
                      steps: dict[str, float | None] | None = None) -> list[ValueDifference]:
    """Every paired value, at its worst over the input sets (by ``ratio``), in execution order: the
    per-node picture ``pt2x verify --node-data`` draws. ``computed_by``: the converted nodes that
    made it from values already paired (those a divergence in it may come from)."""
    worst: dict[str, ValueDifference] = {}
    for got, want in zip(got_values, want_values):
        good: set[str] = set()
        for c in value_checks(order, got, want, runtime, steps):
            if c.counted and (c.tensor not in worst or c.ratio > worst[c.tensor].ratio):
                origin = stamps.get(c.tensor) or program.get(c.tensor) or (None, None, None)
                worst[c.tensor] = ValueDifference(c.tensor, origin[0], order[c.at][0], order[c.at][1],
                                                  [order[i][0] for i in _chain_at(order, c.at, good)], c.ok,
                                                  c.max_abs, c.max_rel, c.ratio, c.tolerance, c.note)
            good.add(c.tensor)
    at = {node: i for i, (node, _, _, _) in enumerate(order)}
    return sorted(worst.values(), key=lambda v: at.get(v.converted_node, -1))
