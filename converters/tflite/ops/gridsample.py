"""ONNX GridSample (4-D: torch's grid_sample) as GATHER_ND over the NHWC input.

The grid's x/y are unnormalised in torch's own order of operations (align_corners:
((g + 1) / 2) * (size - 1); else ((g + 1) * size - 1) / 2), clipped to [0, size - 1] for
"border" padding. Bilinear: the four corners' (n, y, x) indices are GATHER_ND'ed from the
input made NHWC and summed with weights ((x0 + 1) - x, x - x0, as torch), a corner outside the
input weighing 0 for "zeros" padding (its index clamped so the gather stays in bounds). Nearest:
ROUND (half to even, as torch's nearbyint), then one gather, zeros outside for "zeros".
Coordinates are clamped to [-1, size] in float before the int32 CAST, so huge grid values cannot
overflow. A run-time input height or width is read with SHAPE. Refused: bicubic, reflection
padding, other ranks.
"""

from __future__ import annotations

import numpy as np

from ...errors import Unsupported
from ..core.emit import Emitter, attrs
from ..core.mappers import maps
from ..core.model import TensorType as T

__all__ = ["grid_sample"]



def _mode(node) -> tuple[str, str, bool]:
    a = attrs(node)
    text = {k: (v.decode() if isinstance(v, bytes) else v) for k, v in a.items()}
    mode = {"bilinear": "linear", "linear": "linear", "nearest": "nearest"}.get(text.get("mode", "linear"))
    if mode is None:
        raise Unsupported(f"GridSample mode {text.get('mode')!r} (bilinear and nearest are mapped)")
    pad = text.get("padding_mode", "zeros")
    if pad not in ("zeros", "border"):
        raise Unsupported(f"GridSample padding_mode {pad!r} (zeros and border are mapped)")
    return mode, pad, bool(int(a.get("align_corners", 0)))


class _Sampler:
    def __init__(self, em: Emitter, x: int, grid: int, h: int, w: int, pad: str, align: bool):
        self.em, self.pad, self.align = em, pad, align
        self.shape = None
        self.h, self.w = self._size(x, 2, h), self._size(x, 3, w)
        self.nhwc = self._nhwc(x)
        gx = em.tmp(T.FLOAT32, None, "gx")
        gy = em.tmp(T.FLOAT32, None, "gy")
        em.op("UNPACK", [grid], [gx, gy], ("UnpackOptions", {"num": 2, "axis": 3}))
        self.ix, self.iy = self._unnormalise(gx, self.w), self._unnormalise(gy, self.h)
        self.batch = self._batch_index(x, gx)

    def f(self, v) -> int:
        return self.em.const(np.float32(v))

    def bin(self, code: str, a: int, b: int, dtype=None) -> int:
        return self.em.binary(code, a, b, dtype=dtype)

    def _size(self, x: int, axis: int, n: int) -> tuple[int, int, int]:
        """(size, size - 1) as float32 and size - 1 as int32: constants, or from SHAPE at run time."""
        if n >= 0:
            return self.f(n), self.f(n - 1), self.em.const(np.array(n - 1, np.int32))
        if self.shape is None:
            self.shape = self.em.tmp(T.INT32, [4], "shape")
            self.em.op("SHAPE", [x], [self.shape], ("ShapeOptions", {"out_type": T.INT32}))
        d = self.em.tmp(T.INT32, [], "size")
        self.em.op("GATHER", [self.shape, self.em.const(np.array(axis, np.int32))], [d], ("GatherOptions", {"axis": 0}))
        last = self.bin("SUB", d, self.em.const(np.array(1, np.int32)))
        return self.em.cast(d, T.FLOAT32), self.em.cast(last, T.FLOAT32), last

    def _nhwc(self, x: int) -> int:
        s = self.em.shape_of(x)
        y = self.em.tmp(T.FLOAT32, None if s is None else [s[0], s[2], s[3], s[1]], "nhwc")
        self.em.op("TRANSPOSE", [x, self.em.const(np.array([0, 2, 3, 1], np.int32))], [y])
        return y

    def _unnormalise(self, g: int, size) -> int:
        n, last, _ = size
        g1 = self.bin("ADD", g, self.f(1))
        if self.align:
            c = self.bin("MUL", self.bin("MUL", g1, self.f(0.5)), last)
        else:
            c = self.bin("MUL", self.bin("SUB", self.bin("MUL", g1, n), self.f(1)), self.f(0.5))
        if self.pad == "border":
            c = self.bin("MINIMUM", self.bin("MAXIMUM", c, self.f(0)), last)
        return c

    def _batch_index(self, x: int, like: int) -> int:
        """n for every output position, [N, Ho, Wo] int32."""
        shape = self.em.tmp(T.INT32, [4], "shape")
        self.em.op("SHAPE", [x], [shape], ("ShapeOptions", {"out_type": T.INT32}))
        n = self.em.tmp(T.INT32, [], "n")
        self.em.op("GATHER", [shape, self.em.const(np.array(0, np.int32))], [n], ("GatherOptions", {"axis": 0}))
        r = self.em.tmp(T.INT32, [-1], "range")
        self.em.op("RANGE", [self.em.const(np.array(0, np.int32)), n, self.em.const(np.array(1, np.int32))], [r])
        col = self.em.tmp(T.INT32, [-1, 1, 1], "n_col")
        self.em.op("RESHAPE", [r, self.em.const(np.array([-1, 1, 1], np.int32))], [col])
        zeros = self.em.cast(self.em.unary("ZEROS_LIKE", like, hint="z"), T.INT32)
        return self.bin("ADD", col, zeros)

    def index(self, coord_f: int, size) -> tuple[int, int]:
        """An integral float coordinate -> (index clamped into [0, size-1], inside as bool)."""
        n, _, last = size
        safe = self.bin("MINIMUM", self.bin("MAXIMUM", coord_f, self.f(-1)), n)
        i = self.em.cast(safe, T.INT32)
        zero = self.em.const(np.array(0, np.int32))
        inside = self.em.binary("LOGICAL_AND", self.em.binary("GREATER_EQUAL", i, zero, dtype=T.BOOL),
                                self.em.binary("LESS_EQUAL", i, last, dtype=T.BOOL), dtype=T.BOOL)
        return self.bin("MINIMUM", self.bin("MAXIMUM", i, zero), last), inside

    def gather(self, yi: int, xi: int) -> int:
        """[N, Ho, Wo, C] values at (n, yi, xi)."""
        idx = self.em.tmp(T.INT32, None, "nyx")
        self.em.op("PACK", [self.batch, yi, xi], [idx], ("PackOptions", {"values_count": 3, "axis": 3}))
        out = self.em.tmp(T.FLOAT32, None, "corner")
        self.em.op("GATHER_ND", [self.nhwc, idx], [out])
        return out

    def weighted(self, value: int, weight: int, inside: int | None) -> int:
        if inside is not None and self.pad == "zeros":
            weight = self.bin("MUL", weight, self.em.cast(inside, T.FLOAT32))
        w4 = self.em.tmp(T.FLOAT32, None, "w")
        self.em.op("EXPAND_DIMS", [weight, self.em.const(np.array(3, np.int32))], [w4])
        return self.bin("MUL", value, w4)

    def bilinear(self) -> int:
        x0 = self.em.unary("FLOOR", self.ix)
        y0 = self.em.unary("FLOOR", self.iy)
        x1, y1 = self.bin("ADD", x0, self.f(1)), self.bin("ADD", y0, self.f(1))
        wx = [self.bin("SUB", x1, self.ix), self.bin("SUB", self.ix, x0)]
        wy = [self.bin("SUB", y1, self.iy), self.bin("SUB", self.iy, y0)]
        xs = [self.index(x0, self.w), self.index(x1, self.w)]
        ys = [self.index(y0, self.h), self.index(y1, self.h)]
        acc = None
        for j in (0, 1):
            for i in (0, 1):
                (yi, yin), (xi, xin) = ys[j], xs[i]
                inside = self.em.binary("LOGICAL_AND", yin, xin, dtype=T.BOOL)
                term = self.weighted(self.gather(yi, xi), self.bin("MUL", wy[j], wx[i]), inside)
                acc = term if acc is None else self.bin("ADD", acc, term)
        return acc

    def nearest(self) -> int:
        (yi, yin), (xi, xin) = self.index(self.em.unary("ROUND", self.iy), self.h), \
            self.index(self.em.unary("ROUND", self.ix), self.w)
        value = self.gather(yi, xi)
        if self.pad != "zeros":
            return value
        inside = self.em.tmp(T.BOOL, None, "inside4")
        self.em.op("EXPAND_DIMS", [self.em.binary("LOGICAL_AND", yin, xin, dtype=T.BOOL),
                                   self.em.const(np.array(3, np.int32))], [inside])
        out = self.em.tmp(T.FLOAT32, self.em.shape_of(value), "sampled")
        self.em.op("SELECT_V2", [inside, value, self.em.const(np.float32(0))], [out])
        return out


@maps("GridSample")
def grid_sample(em: Emitter, node) -> None:
    mode, pad, align = _mode(node)
    xs, gs = em.shape(node.input[0]), em.shape(node.input[1])
    if xs is None or len(xs) != 4 or gs is None or len(gs) != 4:
        raise Unsupported("GridSample other than 4-D (N, C, H, W)")
    h, w = xs[2], xs[3]
    x, grid = em.t(node.input[0]), em.t(node.input[1])
    if em.dtype_of(x) != T.FLOAT32:
        raise Unsupported("GridSample of a non-float input")
    s = _Sampler(em, x, grid, h, w, pad, align)
    y = s.bilinear() if mode == "linear" else s.nearest()
    em.op("TRANSPOSE", [y, em.const(np.array([0, 3, 1, 2], np.int32))], [em.out()])
