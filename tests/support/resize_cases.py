"""``F.interpolate`` / ``upsample_*`` programs for the Resize tests of both targets: exported by
torch at test time with a dynamic batch, each with its inputs at two batch sizes and torch
eager's outputs. Non-integer scales (0.5x of 63, 1.5x, 0.35x, 2.7x), downscales to length 1
in H, in W and in both, every mode, align_corners both ways, antialias, the ``.vec`` and
``.default`` overloads, 1-D and 3-D variants."""

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


class _Fn(torch.nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, x):
        return self.fn(x)


def _table(name):
    return CASES[name] if name in CASES else REFUSED[name]


@functools.cache
def saved(name: str) -> str:
    """The .pt2 of a case, its batch dimension dynamic."""
    fn, shape = _table(name)
    x = torch.randn(BATCHES[0], *shape)
    ep = torch.export.export(_Fn(fn), (x,), dynamic_shapes=({0: torch.export.Dim("batch", min=1, max=64)},))
    path = os.path.join(_TMP, f"{name}.pt2")
    torch.export.save(ep, path)
    return path


def inputs_and_expected(name: str) -> list[tuple]:
    """[(input, eager output)] at each batch size (the inputs far from zero mean)."""
    fn, shape = _table(name)
    g = torch.Generator().manual_seed(0)
    out = []
    for b in BATCHES:
        x = torch.randn(b, *shape, generator=g) * 3 + 1
        with torch.no_grad():
            out.append((x.numpy(), fn(x).numpy()))
    return out
