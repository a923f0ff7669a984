"""Padding: ``constant_pad_nd`` and ``pad`` (constant, reflect, replicate), each a portable kernel.

``pad`` lists (before, after) pairs from the last dim backwards, as torch's. A constant pad of any
rank is ``constant_pad_nd.out``; reflect and replicate pad the last 1, 2 or 3 dims
(``reflection_padNd.out``, ``replication_padNd.out``, as ATen picks by the pad's length). Negative
pads (crops) and ``circular`` are refused.
"""

from __future__ import annotations

from ..aten.args import bind
from ..aten.registry import lowering
from ..errors import Unsupported

_DIMS = {2: "1d", 4: "2d", 6: "3d"}  # pad length -> the kernels' suffix


def _pads(a) -> list:
    pad = list(a.pad)
    if any(not isinstance(p, int) for p in pad):
        raise Unsupported("a pad of symbolic width")
    if any(p < 0 for p in pad):
        raise Unsupported("a negative pad (a crop)")
    return pad


@lowering("pte", "aten.constant_pad_nd.default")
def constant_pad_nd(ctx, node):
    a = bind(node)
    return ctx.call("constant_pad_nd.out", {"self": a.self, "pad": _pads(a), "value": a.value},
                    [ctx.output(node)]).name


@lowering("pte", "aten.pad.default")
def pad(ctx, node):
    a = bind(node)
    pads = _pads(a)
    if a.mode == "constant":
        return ctx.call("constant_pad_nd.out", {"self": a.self, "pad": pads, "value": a.value or 0},
                        [ctx.output(node)]).name
    if a.value is not None:
        raise Unsupported(f"pad mode {a.mode!r} with a value")
    if a.mode not in ("reflect", "replicate") or len(pads) not in _DIMS:
        raise Unsupported(f"pad mode {a.mode!r} of {len(pads) // 2} dims")
    kernel = ("reflection_pad" if a.mode == "reflect" else "replication_pad") + _DIMS[len(pads)] + ".out"
    return ctx.call(kernel, {"self": a.self, "padding": pads}, [ctx.output(node)]).name
