"""The TFLite (LiteRT) target: ONNX (pt2x's own, built in memory, or any ONNX file) ->
TFLite builtins, written as a TFL3 flatbuffer with the ``flatbuffers`` package.

Modules, in the order a conversion uses them: ``external_data`` (weights beside an ONNX file,
checked, then read), ``onnx_check`` (an ONNX model from outside pt2x checked before it is read),
``normalise`` (its opset brought to the mappers' by onnx's version converter, onnx's strict
shape inference and checker), ``prepare`` (the ONNX model, shape-inferred (torch's shapes
filling what inference leaves unknown) and folded, each folded node's work bounded by
``fold_cost``; ``expand_sinking`` folds what a constant broadcast over the batch feeds),
``emit`` (the mapping state and the node loop; every operator through ``int_compute``, the
rule that keeps 8/16-bit integers out of LiteRT's quantized kernels), ``mappers`` (the ONNX op -> mapper table, each mapper behind ``op_attributes``' declared attributes)
filled by ``ops_elementwise``, ``ops_linalg``, ``ops_einsum``, ``ops_shape`` (and the shape helpers),
``ops_slice`` (Slice, Concat, Split), ``ops_pad`` (Pad, Tile, Expand), ``ops_generate``, ``ops_index``,
``ops_gridsample``, ``ops_reduce``, ``ops_nn`` (convolutions; ``depthwise_split`` for depthwise kernels
over 25 taps) and ``ops_pool``, both on ``window``
(the pads, auto_pad and ceil_mode geometry), ``ops_activation``, ``ops_aliases`` (CastLike,
Dropout, Mean), ``ops_loss``, ``ops_cumprod``, ``ops_crop``, ``ops_affine_grid``, ``ops_compress``,
``ops_eye_like``, ``ops_bitshift``, ``ops_resize`` (on
``resize_weights``, the interpolation matrices), ``ops_blocks``, ``ops_attention`` (Attention,
FlexAttention), ``ops_linear_attention``, ``ops_rotary``, ``ops_causal_conv``, ``ops_bitwise``
(BitwiseAnd/Or), ``ops_signal`` (windows, DFT), ``ops_scan`` (Scan unrolled), ``ops_quantize`` (Quantize/DequantizeLinear, DynamicQuantizeLinear), the QDQ pass
(``qdq_pass``: ``qdq_plan`` finds the DequantizeLinear -> op -> QuantizeLinear patterns that
``qdq_conv``, ``qdq_elementwise`` and ``qdq_movement`` emit as LiteRT's int8 kernels, registered in
``qdq_registry``, with ``qdq_params``' parameters; ``prepare`` calls ``qdq_weights`` so transposed
int8 weights stay int8 through folding), ``ops_rnn``
(unrolled over a static length) and ``ops_rnn_while`` (a WHILE over a dynamic one), both on
``rnn_cells`` (the LSTM/GRU cell math), and ``ops_control`` (IF/WHILE subgraphs), ``builtins`` (the one table of builtins
the next two read), ``layout`` (the NCHW -> NHWC pass), the float passes over the written operators
(``dedupe``, ``fuse_activations`` with ``fold_affine``, ``fuse_matmul``, ``reduce_squeeze``, reading constants through
``layer_constants``; ``fuse_gelu`` runs on the ONNX graph before mapping), ``shapes``
(static shapes for XNNPACK), ``weight_storage`` (the weight-only options: float16 or int8
weights, ``to_tflite(weights=)``), ``op_versions`` (the operator versions LiteRT gives int8 and
stored-weight operators, for both of those), ``model`` (the TFLite model as plain data), ``writer``
(serialisation) with ``schema_generated`` (flatc's output for ``tflite_subset.fbs``), and
``converter`` (``to_tflite``). docs/tflite.md says what is supported and why the rest is not.
"""

from .converter import to_tflite

__all__ = ["to_tflite"]
