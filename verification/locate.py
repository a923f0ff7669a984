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

import numpy as np

from ..converters.aten.graph import ProgramView, input_names, output_names
from .compare import Tolerance, compare, tolerance
from .report import Divergence

__all__ = ["Origin", "program_origins", "onnx_origins", "quantization_steps", "first_divergence"]

Origin = tuple  # (aten node, aten target, module path)
ORIGIN_KEYS = ("pt2x.aten_node", "pt2x.aten_target", "pt2x.module_path")


def _module_path(node) -> str | None:
    stack = dict(node.metadata or {}).get("nn_module_stack")
    if not stack:
        return None
    parts = stack.rsplit(";", 1)[-1].split(",", 2)
    return parts[1] if len(parts) == 3 else None


def program_origins(view: ProgramView) -> dict[str, Origin]:
    """Each top-level value name -> the ATen node making it."""
    out = {}
    for n in view.nodes:
        for name in output_names(n):
            out[name] = (n.name, str(n.target), _module_path(n))
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


def _comparable(got: np.ndarray, want: np.ndarray) -> bool:
    if not (got.shape == want.shape or got.size == want.size == 1):
        return False
    return want.dtype.kind in "biufc" or want.dtype.name == "bfloat16"



MAX_CHAIN = 12
"""The most converted nodes listed as the places a divergence may arise."""


def _chain(order, at: int, known: set[str]) -> list[str]:
    """The node at ``at`` and the nodes before it that feed it through values the reference does
    not have (a lowering's inner values, a file's renamed values): where the divergence arises."""
    producer = {}
    for i, (_, _, _, outs) in enumerate(order[: at + 1]):
        for o in outs:
            producer[o] = i
    picked, todo = set(), [at]
    while todo and len(picked) < MAX_CHAIN:
        i = todo.pop()
        if i in picked:
            continue
        picked.add(i)
        todo += [producer[x] for x in order[i][2] if x in producer and x not in known]
    return [f"{order[i][0]} ({order[i][1]}) -> {', '.join(order[i][3])}" for i in sorted(picked)]


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


def first_divergence(order, got_values: list[dict], want_values: list[dict], runtime: str,
                     stamps: dict[str, Origin], program: dict[str, Origin],
                     steps: dict[str, float | None] | None = None) -> tuple[Divergence | None, int]:
    """``order``: (node, op type, input names, output names) in execution order; ``got_values`` /
    ``want_values``: per input set, name -> array. The first divergence over the input sets, and
    how many values were compared."""
    compared = 0

    def tol_of(w):
        return tolerance(w.dtype.name, runtime)

    for got, want in zip(got_values, want_values):
        good: set[str] = set()  # values found equal so far: where the search for the cause stops
        seen: set[str] = set()
        for at, (node, op, _, outs) in enumerate(order):
            for name in outs:
                if name not in got:
                    continue
                g = np.asarray(got[name])
                if name not in want:
                    if _channels_last_twin(name, g, want, tol_of):
                        good.add(name)
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
                compared += 1
                if not diff.ok:
                    origin = stamps.get(name) or program.get(name) or (None, None, None)
                    return Divergence(origin[0], origin[1], origin[2], node, op, name, diff.max_abs, diff.max_rel,
                                      tol_text, compared, diff.note, _chain(order, at, good)), compared
                good.add(name)
    return None, compared
