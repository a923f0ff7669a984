"""Operators the model sweep (scripts/sweep_models.py) found refused although torch.onnx
converts them, now converted: each exported by torch at test time with a dynamic batch, saved,
converted torch-free to ONNX (ONNX Runtime) and to TFLite (LiteRT, XNNPACK), and compared with
torch eager at two batch sizes; what stays inexpressible is refused by name.

* ``repeat_interleave.self_int`` (ConViT, GCViT): along a static or the dynamic axis, negative
  dim, ``dim=None``, ``output_size``.
* ``batch_norm`` in training mode without running statistics (NFNet's weight standardisation
  in eval mode): of weights (folded) and of a run-time input (mean/variance normalisation).
* ``col2im`` (``F.fold``, VOLO) with a dynamic batch.
* bicubic ``F.interpolate`` (CrossViT), align_corners both ways, up and down.
* ``meshgrid`` (DINOv3's rotary grid in timm's ``vit_*_dinov3``): static and run-time lengths,
  ``ij`` and ``xy``, a 0-d input.
* ``Tensor.unfold`` (HaloNet's halo windows): overlapping, gapped, along the last axis; along the
  dynamic batch it is refused.
"""

from __future__ import annotations

import functools
import os
import tempfile

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import tflite_zoo
from pt2x.converters.errors import UnsupportedOpsError
from tolerances import MODEL_SCALE, TFLITE_SCALE, assert_close
from torchfree import convert_torch_free

BATCHES = (1, 3)


class RepeatInterleave(torch.nn.Module):
    def __init__(self, repeats, dim, output_size=None):
        super().__init__()
        self.repeats, self.dim, self.output_size = repeats, dim, output_size

    def forward(self, x):
        y = x.repeat_interleave(self.repeats, dim=self.dim, output_size=self.output_size)
        return y * 1.5 if self.dim is not None else y.reshape(x.shape[0], -1) * 1.5


class WeightStandardisedConv(torch.nn.Module):
    """timm's ScaledStdConv2d (NFNet) in eval mode: the weights normalised by batch norm."""

    def __init__(self):
        super().__init__()
        g = torch.Generator().manual_seed(0)
        self.weight = torch.nn.Parameter(torch.randn(8, 3, 3, 3, generator=g) * 0.3 + 0.1)
        self.gain = torch.nn.Parameter(torch.rand(8, 1, 1, 1, generator=g) + 0.5)

    def forward(self, x):
        w = F.batch_norm(self.weight.reshape(1, 8, -1), None, None, weight=(self.gain * 0.2).view(-1),
                         training=True, momentum=0.0, eps=1e-6).reshape_as(self.weight)
        return F.conv2d(x, w, padding=1)


class BatchStatsOfInput(torch.nn.Module):
    """batch norm in training mode without running statistics, of the input itself."""

    def forward(self, x):
        return F.batch_norm(x, None, None, training=True, momentum=0.1, eps=1e-5)


class TrainingBatchNorm(torch.nn.Module):
    """batch norm in training mode with running statistics: it updates them."""

    def __init__(self):
        super().__init__()
        self.register_buffer("mean", torch.zeros(3))
        self.register_buffer("var", torch.ones(3))

    def forward(self, x):
        return F.batch_norm(x, self.mean, self.var, training=True)


class Fold(torch.nn.Module):
    """F.fold (col2im) of overlapping 3x3 patches, stride 2, padding 1, as VOLO's outlooker."""

    def forward(self, x):
        return F.fold(x * 2.0, output_size=(8, 8), kernel_size=3, padding=1, stride=2)


class Bicubic(torch.nn.Module):
    def __init__(self, size, align_corners):
        super().__init__()
        self.size, self.align_corners = size, align_corners

    def forward(self, x):
        return F.interpolate(x, size=self.size, mode="bicubic", align_corners=self.align_corners)


class RopeGrid(torch.nn.Module):
    """DINOv3's rotary position grid (timm's vit_*_dinov3): patch coordinates by ``meshgrid``."""

    def forward(self, x):
        h, w = x.shape[-2:]
        ys = (torch.arange(h, dtype=torch.float32) + 0.5) / h
        xs = (torch.arange(w, dtype=torch.float32) + 0.5) / w
        coords = torch.stack(torch.meshgrid(ys, xs, indexing="ij"), dim=-1).flatten(0, 1)  # (h*w, 2)
        return x.flatten(2).transpose(1, 2) * torch.cos(coords * 3.0).sum(-1, keepdim=True)


class MeshgridOfRunTimeLengths(torch.nn.Module):
    """``meshgrid`` of three vectors, one as long as the dynamic batch, one 0-d; ij or xy."""

    def __init__(self, indexing):
        super().__init__()
        self.indexing = indexing

    def forward(self, x):
        grids = torch.meshgrid(x[:, 0], x[0, :3], torch.tensor(0.25), indexing=self.indexing)
        return torch.stack(grids, 0) * 1.5 + x.mean()


class Unfold(torch.nn.Module):
    """``Tensor.unfold`` twice, as HaloNet's halo blocks (timm's halonet_*) cut overlapping windows."""

    def __init__(self, size, step):
        super().__init__()
        self.size, self.step = size, step

    def forward(self, x):
        return F.pad(x, (2, 2, 2, 2)).unfold(2, self.size, self.step).unfold(3, self.size, self.step) * 1.5


class UnfoldLastAxis(torch.nn.Module):
    def forward(self, x):
        return x.unfold(-1, 3, 1) * 1.5


def _input(b: int, shape: tuple) -> torch.Tensor:
    return torch.randn(b, *shape, generator=torch.Generator().manual_seed(10 + b))


CASES = {
    "repeat_interleave_dim1": (lambda: RepeatInterleave(3, 1), (4, 5)),
    "repeat_interleave_dim_neg1": (lambda: RepeatInterleave(2, -1), (2, 3, 4)),
    "repeat_interleave_batch_dim": (lambda: RepeatInterleave(2, 0), (3, 2)),
    "repeat_interleave_none": (lambda: RepeatInterleave(2, None), (2, 3)),
    "repeat_interleave_output_size": (lambda: RepeatInterleave(4, 1, output_size=8), (2, 3)),
    "repeat_interleave_once": (lambda: RepeatInterleave(1, 2), (2, 3)),
    "weight_standardisation": (WeightStandardisedConv, (3, 6, 6)),
    "batch_stats_of_input": (BatchStatsOfInput, (3, 5, 4)),
    "fold_dynamic_batch": (Fold, (2 * 9, 16)),
    "bicubic_up": (lambda: Bicubic((11, 9), False), (2, 6, 5)),
    "bicubic_down_align": (lambda: Bicubic((5, 7), True), (2, 9, 12)),
    "bicubic_up_align": (lambda: Bicubic((13, 4), True), (2, 6, 3)),
    "meshgrid_rope_grid": (RopeGrid, (4, 3, 5)),
    "meshgrid_ij_run_time": (lambda: MeshgridOfRunTimeLengths("ij"), (5,)),
    "meshgrid_xy_run_time": (lambda: MeshgridOfRunTimeLengths("xy"), (5,)),
    "unfold_halo_windows": (lambda: Unfold(6, 4), (3, 8, 8)),
    "unfold_step_over_size": (lambda: Unfold(2, 3), (2, 7, 9)),
    "unfold_last_axis": (UnfoldLastAxis, (4, 6)),
}


def _saved(module: torch.nn.Module, shape: tuple) -> str:
    batch = torch.export.Dim("batch", min=1, max=8)
    ep = torch.export.export(module, (_input(2, shape),), dynamic_shapes=({0: batch},), strict=False)
    path = os.path.join(tempfile.mkdtemp(prefix="pt2x-sweep-gaps-"), "m.pt2")
    torch.export.save(ep, path)
    return path


@functools.cache
def _case(name: str) -> tuple[str, torch.nn.Module, tuple]:
    build, shape = CASES[name]
    module = build().eval()
    return _saved(module, shape), module, shape


def _eager(module, x) -> np.ndarray:
    with torch.no_grad():
        return module(x).numpy()


@pytest.mark.parametrize("name", list(CASES))
def test_onnx_matches_eager(name):
    import onnxruntime as ort

    path, module, shape = _case(name)
    sess = ort.InferenceSession(convert_torch_free("to_onnx", path), providers=["CPUExecutionProvider"])
    for b in BATCHES:
        x = _input(b, shape)
        (got,) = sess.run(None, {sess.get_inputs()[0].name: x.numpy()})
        assert_close(got, _eager(module, x), "float32", what=f"{name} batch {b}", scale=MODEL_SCALE["float32"])


@pytest.mark.parametrize("name", list(CASES))
def test_tflite_matches_eager(name):
    path, module, shape = _case(name)
    it = tflite_zoo.interpreter(convert_torch_free("to_tflite", path))
    for b in BATCHES:
        x = _input(b, shape)
        (got,) = tflite_zoo.run(it, [x.numpy()])
        assert_close(got, _eager(module, x), "float32", what=f"{name} batch {b}",
                     scale=MODEL_SCALE["float32"] * TFLITE_SCALE["float32"])


def test_training_batch_norm_with_running_statistics_is_refused():
    path = _saved(TrainingBatchNorm().eval(), (3, 4))
    with pytest.raises(UnsupportedOpsError, match="running_mean/running_var"):
        convert_torch_free("to_onnx", path)


def test_unfold_along_the_dynamic_batch_matches_eager():
    """Once refused (the window table needed a static length); now the windows are gathered by
    indices computed at run time, checked at every batch size."""
    import onnxruntime as ort

    class M(torch.nn.Module):
        def forward(self, x):
            return x.unfold(0, 1, 1)

    module = M()
    path = _saved(module, (3,))
    sess = ort.InferenceSession(convert_torch_free("to_onnx", path), providers=["CPUExecutionProvider"])
    it = tflite_zoo.interpreter(convert_torch_free("to_tflite", path))
    for b in BATCHES:
        x = _input(b, (3,))
        (got,) = sess.run(None, {sess.get_inputs()[0].name: x.numpy()})
        assert_close(got, _eager(module, x), "float32", what=f"onnx batch {b}")
        (got,) = tflite_zoo.run(it, [x.numpy()])
        assert_close(got, _eager(module, x), "float32", what=f"tflite batch {b}", scale=TFLITE_SCALE["float32"])


def test_repeat_interleave_output_size_of_a_run_time_length_is_refused():
    """torch checks ``output_size`` against the result as it runs; along the dynamic batch the
    converter cannot, so it refuses naming it (a static one is checked: repeat_interleave_output_size)."""

    class M(torch.nn.Module):
        def forward(self, x):
            return x.repeat_interleave(2, dim=0, output_size=x.shape[0] * 2)

    path = _saved(M(), (3,))
    with pytest.raises(UnsupportedOpsError, match="output_size"):
        convert_torch_free("to_onnx", path)
