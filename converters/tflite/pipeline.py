"""The TFLite target's passes, in the order they run, each with why it stands there.

Two halves. ``ONNX_PASSES`` rewrite the ONNX model the target reads (``prepare.prepare`` runs
them); the mappers then turn each ONNX node into builtins (``converter.convert_prepared``, which
first fuses GELU's ONNX pattern, ``fuse_gelu``, and installs the int8 plan, ``qdq_pass``);
``SUBGRAPH_PASSES`` rewrite each TFLite subgraph before the writer. Prose elsewhere points here
instead of retelling the order. A pass is ``(name, function, why)``: the ONNX ones take the
``OnnxStep`` they share (the model, its ``Prepared``, the folding budget); the subgraph ones
take the ``Subgraph``, whether it is the main one, and ``nhwc_io``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import onnx
from onnx import shape_inference

from ..onnx.graph_tools import prune_unused
from .core.model import Subgraph
from .core.shapes import infer_shapes
from .onnx_in.constant_folding import FoldBudget, apply_torch_shapes, constants, evaluate, expands_a_constant, fold
from .onnx_in.sink_expands import sink_expands
from .onnx_in.transpose_into_weights import transpose_into_weights
from .passes.drop_squeezing_reshapes import drop_squeezing_reshapes
from .passes.fold_affine import fold_affine
from .passes.fold_biases import fold_biases
from .passes.fuse_activations import fuse_activations
from .passes.hoist_input_only import hoist_input_only
from .passes.merge_and_prune import merge_and_prune
from .passes.optimize_layout import optimize_layout
from .passes.transposes_into_adj_y import transposes_into_adj_y

__all__ = ["Pass", "OnnxStep", "ONNX_PASSES", "SUBGRAPH_PASSES", "run_onnx_passes", "run_subgraph_passes"]


@dataclass(frozen=True)
class Pass:
    name: str
    run: Callable
    why: str


@dataclass
class OnnxStep:
    """What the ONNX passes share: the model (replaced by passes that return a new one), the
    ``Prepared`` it came with, and the folding budget (work and bytes, for the whole model)."""

    model: onnx.ModelProto
    prepared: object
    budget: object = None


# ---------------------------------------------------------------- the ONNX half

def _infer(step: OnnxStep) -> None:
    if step.prepared.source != "onnx":  # an outside model was inferred strictly by normalise
        step.model = shape_inference.infer_shapes(step.model, data_prop=True)


def _fold(step: OnnxStep) -> None:
    if step.budget is None:
        step.budget = FoldBudget(constants(step.model.graph))
    step.model = fold(step.model, step.budget, step.prepared.lazy)


def _torch_shapes(step: OnnxStep) -> None:
    if step.prepared.shapes and expands_a_constant(step.model.graph):
        step.model = apply_torch_shapes(step.model, step.prepared.shapes)


def _sink(step: OnnxStep) -> None:
    m = step.model
    if sink_expands(m, lambda node, inputs: evaluate(node, inputs, m.opset_import), step.budget):
        step.model = fold(m, step.budget, step.prepared.lazy)


def _prune(step: OnnxStep) -> None:
    prune_unused(step.model)


def _infer_again(step: OnnxStep) -> None:
    step.model = shape_inference.infer_shapes(step.model, data_prop=True)


ONNX_PASSES: tuple[Pass, ...] = (
    Pass("shape inference", _infer,
         "pt2x's own model: every value typed and shaped before anything reads shapes (an outside model "
         "was inferred strictly by normalise)"),
    Pass("quantized weights transposed", lambda step: transpose_into_weights(step.model),
         "a Transpose of a DequantizeLinear'd weight moves into the int8 weight, before folding could "
         "turn the weight into float"),
    Pass("constant folding", _fold,
         "every node of constant inputs evaluated once (static shape arithmetic never reaches TFLite), "
         "within the work and bytes budget"),
    Pass("torch's shapes", _torch_shapes,
         "only where an Expand of a constant is left: expand sinking needs the batch dims that a Reshape "
         "to -1 hid from ONNX inference"),
    Pass("expand sinking (and folding again)", _sink,
         "a constant broadcast by a run-time shape is evaluated once on the constant; what it uncovers folds"),
    Pass("prune", _prune, "what folding left unread goes"),
    Pass("shape inference again", _infer_again, "the mappers read every value's type and shape"),
)


def run_onnx_passes(step: OnnxStep) -> onnx.ModelProto:
    for p in ONNX_PASSES:
        p.run(step)
    return step.model


# ---------------------------------------------------------------- the subgraph half

SUBGRAPH_PASSES: tuple[Pass, ...] = (
    Pass("layout", lambda sub, main, nhwc_io: optimize_layout(sub, nhwc_io=nhwc_io and main),
         "NHWC regions and cancelled transposes first: every later pass sees the final operators (a bounded "
         "fixed point inside)"),
    Pass("merge duplicates, drop dead", lambda sub, main, nhwc_io: merge_and_prune(sub),
         "operators layout left identical become one; nothing unread reaches the folds"),
    Pass("shapes", lambda sub, main, nhwc_io: infer_shapes(sub), "the folds below read the shapes"),
    Pass("fold biases", lambda sub, main, nhwc_io: fold_biases(sub),
         "a layer's ADD of a constant becomes its bias"),
    Pass("fold affine", lambda sub, main, nhwc_io: fold_affine(sub),
         "after the biases (a layer's bias ADD sits between it and a scale): scales and LayerNorm affines "
         "go into the layers' weights"),
    Pass("fuse activations", lambda sub, main, nhwc_io: fuse_activations(sub),
         "after the folds, so the activation follows the layer directly"),
    Pass("transposes into adj_y", lambda sub, main, nhwc_io: transposes_into_adj_y(sub),
         "a TRANSPOSE of the last two dims before BATCH_MATMUL becomes its adj_y"),
    Pass("drop squeezing reshapes", lambda sub, main, nhwc_io: drop_squeezing_reshapes(sub),
         "a keep_dims reduction read only by a RESHAPE dropping those axes becomes one reduction"),
    Pass("hoist input-only ops", lambda sub, main, nhwc_io: hoist_input_only(sub),
         "non-float work on the inputs and constants alone (masks, positions) runs first, so it does not "
         "cut XNNPACK's partition in two"),
    Pass("shapes again", lambda sub, main, nhwc_io: infer_shapes(sub), "the writer records every shape"),
)


def run_subgraph_passes(subgraphs: list[Subgraph], *, nhwc_io: bool = False) -> None:
    """Each subgraph through ``SUBGRAPH_PASSES`` (the main one, first, takes ``nhwc_io``)."""
    for sub in subgraphs:
        for p in SUBGRAPH_PASSES:
            p.run(sub, sub is subgraphs[0], nhwc_io)
