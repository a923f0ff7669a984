"""ONNX ``Scan`` (opset 9+) unrolled over a static scan length: each step maps the body's nodes
again into the enclosing subgraph, its state inputs bound to the previous step's state outputs
and its scan inputs to that step's slice (GATHER along the scan axis, from the end for a
reverse direction); the scan outputs are stacked with PACK along their axis (in reverse order
for a reverse direction); both then reshaped to their static ONNX shape. Outer values the body reads are the enclosing graph's tensors. A
scan length that is not static or is over ``MAX_UNROLLED_STEPS`` is refused; so are a body node
TFLite cannot take (named), a body holding a Scan or Loop, and steps x body nodes over
``limits.MAX_NODES_PER_LOWERING``."""

from __future__ import annotations

import numpy as np

from ...errors import Unsupported
from ...limits import MAX_NODES_PER_LOWERING
from ...onnx.graph_tools import free_vars, walk_nodes
from ..core.emit import Emitter, attrs
from ..core.mappers import maps

MAX_UNROLLED_STEPS = 1024


def _list(a: dict, key: str, n: int) -> list[int]:
    v = [int(x) for x in a.get(key, [0] * n)]
    if len(v) != n:
        raise Unsupported(f"Scan {key} of {len(v)} values for {n}")
    return v


def _length(em: Emitter, names: list[str], axes: list[int]) -> int:
    lengths = set()
    for name, axis in zip(names, axes):
        shape = em.shape(name)
        if shape is None:
            raise Unsupported(f"Scan input {name!r} of unknown rank")
        lengths.add(shape[axis % len(shape)])
    if len(lengths) != 1 or not 0 < (n := lengths.pop()) <= MAX_UNROLLED_STEPS:
        raise Unsupported(f"Scan over scan lengths {sorted(lengths) or '?'} (one static length, 1..{MAX_UNROLLED_STEPS} "
                          "unrolled)")
    return n


def _check_size(body, steps: int) -> None:
    """Unrolling copies the body once per step: no nested Scan/Loop (their copies would multiply)
    and at most ``MAX_NODES_PER_LOWERING`` body nodes in all."""
    nodes = list(walk_nodes(body))
    nested = sorted({n.op_type for n in nodes if n.op_type in ("Scan", "Loop")})
    if nested:
        raise Unsupported(f"Scan whose body holds {'/'.join(nested)} (nested unrolling is not mapped)")
    if steps * len(nodes) > MAX_NODES_PER_LOWERING:
        raise Unsupported(f"Scan of {steps} steps over a body of {len(nodes)} nodes: over MAX_NODES_PER_LOWERING "
                          f"({MAX_NODES_PER_LOWERING}) unrolled")


def _slice(em: Emitter, name: str, axis: int, t: int) -> int:
    x = em.t(name)
    y = em.tmp(em.dtype_of(x), None, "scan_slice")
    em.op("GATHER", [x, em.const(np.array(t, np.int32))], [y], ("GatherOptions", {"axis": axis % em.rank(name)}))
    return y


def _step(em: Emitter, body, t: int, bindings: list[tuple[str, int]], outer: list[str]) -> list[int]:
    """The body mapped once into ``em``'s subgraph; its outputs' tensors."""
    child = Emitter(body, em.sub, parent=em)
    child.fresh_name = lambda hint: em.fresh_name(f"{hint}@{t}")  # tensor names unique across steps
    for name in outer:
        child.bind(name, em.t(name))
    for name, idx in bindings:
        child.bind(name, idx)
    problems: list[str] = []
    child.map_nodes(lambda n, e: problems.append(f"{n.op_type} ({n.name}): {e.reason}"))
    if problems:
        raise Unsupported("its body holds ops TFLite cannot take: " + "; ".join(problems[:3]))
    return [child.t(o.name) for o in body.output]


def _element_rank(vi, axis: int) -> int:
    """The rank of a body's scan output (needed for an axis other than 0)."""
    t = vi.type.tensor_type
    if t.HasField("shape"):
        return len(t.shape.dim)
    if axis != 0:
        raise Unsupported(f"Scan output axis {axis} of a body output {vi.name!r} of unknown rank")
    return 0


def _as_declared(em: Emitter, name: str, x: int) -> int:
    """A final state or scan output in its static ONNX shape (without it, onnx 1.22's
    test_scan9_scalar's 0-d state came out [1])."""
    shape = em.shape(name)
    if shape is None or any(d < 0 for d in shape):
        return x
    y = em.tmp(em.dtype_of(x), shape, "state")
    em.op("RESHAPE", [x, em.const(np.asarray(shape, np.int32))], [y])
    return y


@maps("Scan")
def scan(em: Emitter, node) -> None:
    a = attrs(node)
    body, k = a["body"], int(a["num_scan_inputs"])
    states_in, xs = list(node.input[: len(node.input) - k]), list(node.input[len(node.input) - k:])
    if len(states_in) != len(body.input) - k or not all(states_in + xs):
        raise Unsupported("Scan whose inputs do not match its body's (the opset-8 form with sequence_lens and a batch "
                          "axis is not mapped)")
    n_out = len(body.output) - len(states_in)
    in_axes, in_dirs = _list(a, "scan_input_axes", k), _list(a, "scan_input_directions", k)
    out_axes, out_dirs = _list(a, "scan_output_axes", n_out), _list(a, "scan_output_directions", n_out)
    steps = _length(em, xs, in_axes)
    _check_size(body, steps)
    outer = [n for n in free_vars(body) if em.const_value(n) is None]
    states = [em.t(s) for s in states_in]
    ys: list[list[int]] = []
    for t in range(steps):
        slices = [_slice(em, x, ax, steps - 1 - t if d else t) for x, ax, d in zip(xs, in_axes, in_dirs)]
        names = [i.name for i in body.input]
        outs = _step(em, body, t, list(zip(names, states + slices)), outer)
        states, ys = outs[: len(states)], ys + [outs[len(states):]]
    for name, s in zip(node.output, states):
        if name:
            em.bind(name, _as_declared(em, name, s))
    for j, name in enumerate(node.output[len(states):]):
        if not name:
            continue
        parts = [y[j] for y in ys][:: -1 if out_dirs[j] else 1]
        rank = _element_rank(body.output[len(states) + j], out_axes[j]) + 1
        packed = em.tmp(em.dtype_of(parts[0]), None, "scan_output")
        em.op("PACK", parts, [packed], ("PackOptions", {"values_count": len(parts), "axis": out_axes[j] % rank}))
        em.bind(name, _as_declared(em, name, packed))
