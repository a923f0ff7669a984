"""ONNX's sliding-window geometry (Conv, pools) along one spatial axis: the explicit pads
``auto_pad`` stands for, the output size (``ceil_mode`` included) and the extra end pad that
a ceil-mode output needs. Pure arithmetic on static sizes, written once from ONNX's spec:

- ``SAME_UPPER``/``SAME_LOWER``: output ``ceil(n / s)``, total pad
  ``max((out - 1) * s + (k - 1) * d + 1 - n, 0)``, the odd one at the end (UPPER) or the
  beginning (LOWER); ``VALID``: no pads; ``NOTSET``: the ``pads`` attribute.
- output ``floor`` (or ``ceil``) of ``(n + begin + end - ((k - 1) * d + 1)) / s + 1``; in ceil
  mode a last window that would start in the end padding is dropped (ONNX and torch agree).
"""

from __future__ import annotations

from dataclasses import dataclass

from ...errors import Unsupported

__all__ = ["Axis", "auto_pad", "window_axes"]

AUTO_PADS = ("NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID")


@dataclass(frozen=True)
class Axis:
    """One spatial axis of a window op. ``size`` is -1 when known only at run time."""

    size: int
    kernel: int
    stride: int
    dilation: int
    begin: int
    end: int

    @property
    def extent(self) -> int:
        """The span of one (dilated) window."""
        return (self.kernel - 1) * self.dilation + 1

    def out_size(self, ceil_mode: bool = False) -> int:
        span = self.size + self.begin + self.end - self.extent
        if span < 0:
            return 0
        if not ceil_mode:
            return span // self.stride + 1
        out = -(-span // self.stride) + 1
        if (out - 1) * self.stride >= self.size + self.begin:
            out -= 1
        return out

    def ceil_extra(self) -> int:
        """Pad past ``end`` that the ceil-mode output's last window reads (0 when it fits)."""
        needed = (self.out_size(True) - 1) * self.stride + self.extent
        return max(needed - (self.size + self.begin + self.end), 0)

    def counted(self, out: int, include_pad: bool) -> list[int]:
        """Per output position, how many window cells an average counts: those inside the
        input, or (``include_pad``) inside the input and its explicit pads, never the ceil-mode
        extension."""
        lo, hi = (-self.begin, self.size + self.end) if include_pad else (0, self.size)
        counts = []
        for o in range(out):
            first = o * self.stride - self.begin
            cells = range(first, first + self.extent, self.dilation)
            counts.append(sum(1 for c in cells if lo <= c < hi))
        return counts


def auto_pad(a: dict) -> str:
    v = a.get("auto_pad", b"NOTSET")
    v = v.decode() if isinstance(v, bytes) else v
    if v not in AUTO_PADS:
        raise Unsupported(f"auto_pad={v!r} (ONNX defines {', '.join(AUTO_PADS)})")
    return v


def window_axes(a: dict, sizes: list[int], kernel: list[int], what: str) -> list[Axis]:
    """The spatial axes of a Conv/pool node with attributes ``a`` over input spatial ``sizes``
    (-1 for dynamic); ``auto_pad`` SAME_* on a dynamic size is refused (the pads depend on it)."""
    n = len(sizes)
    strides = [int(v) for v in a.get("strides", [1] * n)]
    dil = [int(v) for v in a.get("dilations", [1] * n)]
    mode = auto_pad(a)
    pads = [int(v) for v in a.get("pads", [0] * (2 * n))] if mode == "NOTSET" else [0] * (2 * n)
    if len(pads) != 2 * n or len(strides) != n or len(dil) != n or len(kernel) != n:
        raise Unsupported(f"{what} whose pads/strides/dilations/kernel do not have one entry per spatial dim")
    axes = []
    for i in range(n):
        ax = Axis(sizes[i], int(kernel[i]), strides[i], dil[i], pads[i], pads[n + i])
        if mode.startswith("SAME"):
            if ax.size < 0:
                raise Unsupported(f"{what} with auto_pad={mode} over a spatial dim known only at run time")
            out = -(-ax.size // ax.stride)
            total = max((out - 1) * ax.stride + ax.extent - ax.size, 0)
            small, big = total // 2, total - total // 2
            side = (small, big) if mode == "SAME_UPPER" else (big, small)
            ax = Axis(ax.size, ax.kernel, ax.stride, ax.dilation, *side)
        axes.append(ax)
    return axes


def tflite_same_padding(axes: list[Axis]) -> bool:
    """Whether the axes' pads are exactly TFLite's SAME padding (``kernels/padding.h``: output
    ceil(size / stride), total pad (out - 1) * stride + extent - size, at least 0, the odd one at
    the end): for a size known when converting, or for any size at stride 1 (total extent - 1).
    False when nothing is padded (VALID is then the same)."""
    if not any(ax.begin or ax.end for ax in axes):
        return False
    for ax in axes:
        if ax.size < 0 and ax.stride != 1:
            return False
        total = ax.extent - 1 if ax.size < 0 else max((-(-ax.size // ax.stride) - 1) * ax.stride + ax.extent - ax.size, 0)
        if (ax.begin, ax.end) != (total // 2, total - total // 2):
            return False
    return True
