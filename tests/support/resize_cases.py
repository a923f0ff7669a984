"""``F.interpolate`` / ``upsample_*`` programs for the Resize tests of both targets, exported by
torch at test time (all cases in one program: one input per shape, one output per case) with a
dynamic batch, run at two batch sizes against torch eager's outputs: non-integer scales (0.5x
of 63, 1.5x, 0.35x, 2.7x), downscales to length 1 in H, in W and in both, every mode (area:
adaptive average pooling over windows that overlap), align_corners both ways, antialias, the
``.vec`` and ``.default`` overloads, 1-D and 3-D variants."""

from __future__ import annotations

import functools
import os
import tempfile

import torch
import torch.nn.functional as F

aten = torch.ops.aten
BATCHES = (2, 5)


def _interp(**kw):
    return lambda x: F.interpolate(x, **kw)


# name -> (function of x, input shape at batch 1)
CASES = {
    "bilinear_0.5_of_63": (_interp(scale_factor=0.5, mode="bilinear"), (3, 63, 63)),
    "bilinear_1.5": (_interp(scale_factor=1.5, mode="bilinear"), (2, 11, 9)),
    "bilinear_0.35": (_interp(scale_factor=0.35, mode="bilinear"), (2, 63, 40)),
    "bilinear_2.7": (_interp(scale_factor=2.7, mode="bilinear"), (2, 7, 9)),
    "bilinear_2x": (_interp(scale_factor=2, mode="bilinear"), (2, 7, 9)),
    "bilinear_hw_0.35_2.7": (_interp(scale_factor=(0.35, 2.7), mode="bilinear"), (2, 40, 7)),
    "bilinear_align_0.35": (_interp(scale_factor=0.35, mode="bilinear", align_corners=True), (2, 63, 40)),
    "bilinear_align_2.7": (_interp(scale_factor=2.7, mode="bilinear", align_corners=True), (2, 7, 9)),
    "bilinear_to_1_h": (_interp(size=(1, 9), mode="bilinear"), (2, 8, 9)),
    "bilinear_to_1_w": (_interp(size=(6, 1), mode="bilinear"), (2, 8, 9)),
    "bilinear_to_1_both": (_interp(size=(1, 1), mode="bilinear"), (2, 8, 9)),
    "bilinear_scale_to_1": (_interp(scale_factor=0.2, mode="bilinear"), (2, 9, 7)),
    "bilinear_align_to_1": (_interp(size=(1, 5), mode="bilinear", align_corners=True), (2, 8, 9)),
    "nearest_0.5_of_63": (_interp(scale_factor=0.5, mode="nearest"), (3, 63, 63)),
    "nearest_1.5": (_interp(scale_factor=1.5, mode="nearest"), (2, 11, 9)),
    "nearest_0.35": (_interp(scale_factor=0.35, mode="nearest"), (2, 63, 40)),
    "nearest_2.7": (_interp(scale_factor=2.7, mode="nearest"), (2, 7, 9)),
    "nearest_3x": (_interp(scale_factor=3, mode="nearest"), (2, 7, 9)),
    "nearest_to_1": (_interp(size=(1, 1), mode="nearest"), (2, 8, 9)),
    "nearest_exact_0.35": (_interp(scale_factor=0.35, mode="nearest-exact"), (2, 63, 40)),
    "nearest_exact_1.5": (_interp(scale_factor=1.5, mode="nearest-exact"), (2, 11, 9)),
    "nearest_exact_2.7": (_interp(scale_factor=2.7, mode="nearest-exact"), (2, 7, 9)),
    "nearest_exact_2x": (_interp(scale_factor=2, mode="nearest-exact"), (2, 7, 9)),
    "nearest_exact_to_1": (_interp(size=(1, 3), mode="nearest-exact"), (2, 8, 9)),
    "bicubic_0.35": (_interp(scale_factor=0.35, mode="bicubic"), (2, 63, 40)),
    "bicubic_2.7": (_interp(scale_factor=2.7, mode="bicubic"), (2, 7, 9)),
    "bicubic_align_0.35": (_interp(scale_factor=0.35, mode="bicubic", align_corners=True), (2, 63, 40)),
    "bicubic_align_2.7": (_interp(scale_factor=2.7, mode="bicubic", align_corners=True), (2, 7, 9)),
    "bicubic_to_1_h": (_interp(size=(1, 9), mode="bicubic"), (2, 8, 9)),
    "bicubic_to_1_both": (_interp(size=(1, 1), mode="bicubic"), (2, 8, 9)),
    "bilinear_aa_0.35": (_interp(scale_factor=0.35, mode="bilinear", antialias=True), (2, 63, 40)),
    "bilinear_aa_1.5": (_interp(scale_factor=1.5, mode="bilinear", antialias=True), (2, 11, 9)),
    "bilinear_aa_to_1": (_interp(size=(1, 4), mode="bilinear", antialias=True), (2, 8, 9)),
    "bicubic_aa_0.35": (_interp(scale_factor=0.35, mode="bicubic", antialias=True), (2, 63, 40)),
    "bicubic_aa_2.7": (_interp(scale_factor=2.7, mode="bicubic", antialias=True), (2, 7, 9)),
    "linear1d_0.35": (_interp(scale_factor=0.35, mode="linear"), (2, 40)),
    "linear1d_align_2.7": (_interp(scale_factor=2.7, mode="linear", align_corners=True), (2, 9)),
    "nearest1d_1.5": (_interp(scale_factor=1.5, mode="nearest"), (2, 11)),
    "trilinear_0.35_2.7": (_interp(scale_factor=(0.35, 2.7, 1.5), mode="trilinear"), (2, 20, 4, 5)),
    "nearest3d_1.5": (_interp(scale_factor=1.5, mode="nearest"), (2, 5, 4, 3)),
    "nearest_exact3d_0.35": (_interp(scale_factor=0.35, mode="nearest-exact"), (2, 20, 9, 11)),
    "area_0.35": (_interp(scale_factor=0.35, mode="area"), (2, 63, 40)),
    "area_to_7x5": (_interp(size=(7, 5), mode="area"), (2, 10, 12)),
    "area1d_0.35": (_interp(scale_factor=0.35, mode="area"), (2, 40)),
    # the .default overloads: an output size and, optionally, the scales the kernel uses
    "default_bilinear_scales": (lambda x: aten.upsample_bilinear2d.default(x, [22, 14], False, 0.35, 0.35), (2, 63, 40)),
    "default_bilinear_sizes": (lambda x: aten.upsample_bilinear2d.default(x, [22, 1], False), (2, 63, 40)),
    "default_nearest_scales": (lambda x: aten.upsample_nearest2d.default(x, [22, 14], 0.35, 0.35), (2, 63, 40)),
    "default_nearest_exact_h": (lambda x: aten._upsample_nearest_exact2d.default(x, [22, 14], 0.35, None), (2, 63, 40)),
    "default_bicubic_scales": (lambda x: aten.upsample_bicubic2d.default(x, [18, 24], False, 2.7, 2.7), (2, 7, 9)),
    "default_bilinear_aa_scales": (lambda x: aten._upsample_bilinear2d_aa.default(x, [22, 14], False, 0.35, 0.35),
                                   (2, 63, 40)),
}
# The .pt2 -> ONNX path refuses these, naming the reason
REFUSED = {
    "bilinear_aa_align": (_interp(scale_factor=0.35, mode="bilinear", antialias=True, align_corners=True), (2, 63, 40)),
}

_TMP = tempfile.mkdtemp(prefix="pt2x-resize-")
SHAPES = sorted({shape for _, shape in CASES.values()}, key=lambda s: (len(s), s))


class _Fn(torch.nn.Module):
    """One input per shape, one output per case (one export for all of them)."""

    def __init__(self, table):
        super().__init__()
        self.table = table

    def forward(self, *xs):
        return tuple(fn(xs[SHAPES.index(shape)]) for fn, shape in self.table.values())


def _inputs(batch: int, shapes, seed: int = 0) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(seed + batch)
    return [torch.randn(batch, *s, generator=g) * 3 + 1 for s in shapes]  # far from zero mean


@functools.cache
def saved() -> str:
    """The .pt2 of every case: one input per shape, the batch dimension dynamic and shared."""
    batch = torch.export.Dim("batch", min=1, max=64)
    ep = torch.export.export(_Fn(CASES), tuple(_inputs(BATCHES[0], SHAPES)),
                             dynamic_shapes=(tuple({0: batch} for _ in SHAPES),))  # forward(*xs)
    path = os.path.join(_TMP, "resizes.pt2")
    torch.export.save(ep, path)
    return path


@functools.cache
def runs() -> list[tuple[list, list]]:
    """[(inputs as numpy, eager outputs as numpy, one per case)] at each batch size."""
    out = []
    for b in BATCHES:
        xs = _inputs(b, SHAPES)
        with torch.no_grad():
            ys = _Fn(CASES)(*xs)
        out.append(([x.numpy() for x in xs], [y.numpy() for y in ys]))
    return out


def saved_refused(name: str) -> str:
    fn, shape = REFUSED[name]
    ep = torch.export.export(_Fn({name: (fn, shape)}), tuple(_inputs(1, SHAPES)))
    path = os.path.join(_TMP, f"{name}.pt2")
    torch.export.save(ep, path)
    return path
