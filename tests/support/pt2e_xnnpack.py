"""A PT2E quantizer that annotates as executorch's ``XNNPACKQuantizer`` does with
``get_symmetric_quantization_config(is_per_channel=True)`` (static, not QAT), written against
torchao's Quantizer API (torchao 0.18 no longer ships XNNPACKQuantizer; it moved to executorch).

What it annotates (executorch ``backends/xnnpack/quantizer/xnnpack_quantizer_utils.py``: its
static-op annotators and ``propagate_annotation``), on the ATen graph ``prepare_pt2e`` hands it
(conv + batch norm already folded by prepare_pt2e):
- conv1d/2d, linear: activation input int8 per-tensor affine, weight int8 per-channel symmetric
  (-127..127, axis 0), bias float (the config's bias spec is a float placeholder); the output
  quantized after a ReLU that is the op's only user (conv_relu / linear_relu), else the op's own;
- add, mul (Tensor overloads): each tensor input and the output (after a sole-user ReLU) int8;
- cat: the first input's spec shared by the other inputs and the output;
- adaptive_avg_pool2d, max_pool2d: input int8, output sharing the input's quantization;
- the observer-sharing ops (hardtanh, mean, permute, squeeze, view and slice; here also the
  ATen spellings export produces for the same moves: reshape, flatten, transpose, unsqueeze): when
  their input is quantized, input and output share its quantization.
Not annotated (stay float, as with XNNPACKQuantizer): matmul/bmm of two activations, softmax,
layer norm, GELU, sigmoid.
"""

from __future__ import annotations

import torch
from torch.fx import GraphModule, Node
from torchao.quantization.pt2e.observer import HistogramObserver, PerChannelMinMaxObserver
from torchao.quantization.pt2e.quantizer import (
    QuantizationAnnotation,
    QuantizationSpec,
    Quantizer,
    SharedQuantizationSpec,
)
from torchao.quantization.pt2e.quantizer.quantizer import Q_ANNOTATION_KEY

aten = torch.ops.aten
_EPS = 2**-12  # executorch's observers' eps

ACTIVATION = QuantizationSpec(
    dtype=torch.int8, quant_min=-128, quant_max=127, qscheme=torch.per_tensor_affine,
    is_dynamic=False, observer_or_fake_quant_ctr=HistogramObserver.with_args(eps=_EPS))
WEIGHT = QuantizationSpec(
    dtype=torch.int8, quant_min=-127, quant_max=127, qscheme=torch.per_channel_symmetric, ch_axis=0,
    is_dynamic=False, observer_or_fake_quant_ctr=PerChannelMinMaxObserver.with_args(eps=_EPS))

WEIGHTED = {aten.conv1d.default, aten.conv2d.default, aten.linear.default}
BINARY = {aten.add.Tensor, aten.add_.Tensor, aten.mul.Tensor, aten.mul_.Tensor}
RELU = {aten.relu.default, aten.relu_.default}
POOLS = {aten.adaptive_avg_pool2d.default, aten.max_pool2d.default}
CAT = {aten.cat.default, aten.concat.default}
SHARING = {
    aten.hardtanh.default, aten.hardtanh_.default, aten.mean.default, aten.mean.dim,
    aten.permute.default, aten.squeeze.dim, aten.squeeze.dims, aten.view.default,
    aten.slice.Tensor, aten.reshape.default, aten.flatten.using_ints, aten.transpose.int,
    aten.unsqueeze.default,
}


def _annotated(node: Node) -> bool:
    return Q_ANNOTATION_KEY in node.meta


def _mark(node: Node, inputs: dict, output=None) -> None:
    node.meta[Q_ANNOTATION_KEY] = QuantizationAnnotation(
        input_qspec_map=inputs, output_qspec=output, _annotated=True)


def _sole_relu(node: Node) -> Node | None:
    users = list(node.users)
    return users[0] if len(users) == 1 and users[0].target in RELU and not _annotated(users[0]) else None


def _finish(node: Node, inputs: dict) -> None:
    """Inputs on ``node``; the output after its sole-user ReLU (that ReLU annotated) or its own."""
    relu = _sole_relu(node)
    _mark(node, inputs, None if relu else ACTIVATION)
    if relu is not None:
        _mark(relu, {}, ACTIVATION)


def _weighted(node: Node) -> None:
    x, w = node.args[0], node.args[1]
    _finish(node, {x: ACTIVATION, w: WEIGHT})  # bias (args[2]) stays float


def _binary(node: Node) -> None:
    inputs = {a: ACTIVATION for a in node.args[:2] if isinstance(a, Node) and a.meta["val"].is_floating_point()}
    if inputs:
        _finish(node, inputs)


def _cat(node: Node) -> None:
    tensors = [t for t in node.args[0] if isinstance(t, Node)]
    if not tensors:
        return
    first = tensors[0]
    shared = SharedQuantizationSpec((first, node))
    _mark(node, {first: ACTIVATION, **{t: shared for t in tensors[1:]}}, shared)


def _pool(node: Node) -> None:
    x = node.args[0]
    _mark(node, {x: ACTIVATION}, SharedQuantizationSpec((x, node)))


def _propagate(node: Node) -> None:
    """executorch's ``propagate_annotation``: a sharing op after a quantized output shares it."""
    prev = node.args[0]
    if not isinstance(prev, Node) or not _annotated(prev) or prev.meta[Q_ANNOTATION_KEY].output_qspec is None:
        return
    shared = SharedQuantizationSpec(prev)
    _mark(node, {prev: shared}, shared)


ANNOTATORS = [(WEIGHTED, _weighted), (BINARY, _binary), (CAT, _cat), (POOLS, _pool)]


class XnnpackStyleQuantizer(Quantizer):
    """Annotates the patterns above; no per-module or per-type configs."""

    def annotate(self, model: GraphModule) -> GraphModule:
        nodes = [n for n in model.graph.nodes if n.op == "call_function"]
        for targets, annotate in ANNOTATORS:  # executorch's order: linear, conv, pools, add, mul, cat
            for node in nodes:
                if node.target in targets and not _annotated(node):
                    annotate(node)
        for node in nodes:
            if node.target in SHARING and not _annotated(node):
                _propagate(node)
        return model

    def validate(self, model: GraphModule) -> None:
        pass
