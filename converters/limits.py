"""Limits the converters put on what a program can make them do, each with its reason.

The loader's limits (``pt2x.serde.limits``) bound what reading a file costs; these bound
what converting it costs, where sizes come from the program rather than from bytes in
the file: a ``tensor_values`` shape, an argument of ``eye`` or ``as_strided``, a weight
stored as a stride-0 view. Tensor ranks use the loader's ``MAX_TENSOR_RANK``.
"""

MAX_CONSTANT_BYTES = 1 << 30
"""Bytes of constants (initializers, folded weights, index tables) one conversion may
materialise on top of ``WEIGHT_BYTES_FACTOR`` times the bytes its weights occupy in the
archive. Real programs need a few KB of constants besides their weights (ones for a norm
without affine weights, an ``as_strided`` index of an activation). Without the bound, a
file of a few KB could claim an ``eye`` of 10**6 x 10**6, or a weight expanded by a
stride-0 view over one stored element, and make the converter allocate terabytes."""

WEIGHT_BYTES_FACTOR = 8
"""How many times its weights' stored bytes a conversion may materialise in constants.
Each weight becomes one initializer (1x); a folded transpose or reshape adds a copy
until the original is pruned (2x); compute types widen bfloat16/float16 to float32 (2x
that copy) and an int8 buffer cast to float64 is 8x. Weights tied between an embedding
and an output layer are read both ways; 8 covers all of these together."""

MAX_NODES_PER_LOWERING = 100_000
"""ONNX nodes one program node may become. Lowerings emit a handful, an LSTM stack about
ten per layer (its layer count is bounded by the weights listed in the file); a count
taken from an argument (``diff``'s ``n``) must not make the converter emit nodes
without end."""

MAX_MESSAGE_CHARS = 500
"""Characters of an underlying exception's message kept when a failure inside a lowering
is reported as a ``ConversionError`` (numpy and protobuf messages can quote whole
arrays)."""

MAX_ONNX_NODES = 250_000
"""Nodes an ONNX model from outside pt2x may hold, every subgraph counted. The largest real
exports (LLMs unrolled per layer) hold tens of thousands. Each node costs the TFLite target
a mapper call, a few tensors and their flatbuffer tables, about 0.1-0.25 ms (a 20,000-node
chain converts in 2-5 s on a 2-core machine), so the bound also bounds the conversion's time
(about a minute at worst) for a file of a few MB."""

MAX_ONNX_DIM = 2**31 - 1
"""The largest dim an ONNX model may state (value infos, initializers): TFLite stores shapes
as int32, and a larger dim could never be allocated by its runtime anyway."""

MAX_ONNX_SUBGRAPH_DEPTH = 16
"""How deep ``If``/``Loop``/``Scan`` bodies may nest in an ONNX model (the loader's
``MAX_SUBGRAPH_DEPTH`` for a program): each level is a recursion of the converter's own."""

MAX_LAYOUT_WORK = 5_000_000
"""Op visits the TFLite layout pass (``converters/tflite/passes/optimize_layout.py``) may spend. Each rewrite
(a transpose sunk one op down, a pair cancelled) rescans the subgraph, so a transpose sinking
down a chain of n elementwise ops costs n^2 (a 5,000-op chain: minutes). Real models need a
few hundred thousand (BERT: ~1,500 ops, ~100 rewrites); past the bound the pass stops where
it is, which leaves transposes in place: the model stays exact, only slower."""

MAX_RESIZE_MATRIX = 1 << 24
"""Elements (output length x input length) of the interpolation matrix the TFLite target
computes for one axis of a Resize at static sizes (``converters/tflite/ops/resize_weights.py``;
a FULLY_CONNECTED's weights, 4 bytes each, or the indices of a GATHER). A 4K frame halved is
3840 x 1920 = 7.4e6; without the bound a Resize of a few bytes could ask for 2**31 x 2**31.
Over it the Resize is refused, naming the axis."""

MAX_RESIZE_LENGTH = 1 << 16
"""Output length of one axis of such a Resize: its matrix is computed one output index per
Python step (a 2**16-long axis: about a second)."""

MAX_FOLD_WORK = 200_000_000
"""Element operations (``converters/tflite/onnx_in/fold_cost.py``'s estimate, made before evaluating)
one ONNX node folded by the TFLite target's ``constant_folding.fold`` may cost: about a second of numpy.
Folding runs onnx's reference evaluator, which computes pooling, convolution and sampling as
Python loops; the output size alone does not bound the work (a MaxPool with a 1000x1000 kernel
over a folded 2000x2000 constant is 10**12 compares, hours). Real models fold shape arithmetic
and weight transposes, casts and dequantisations, a few element operations per weight. A node
over the bound stays a run-time op, which computes the same values."""


MAX_FOLD_TOTAL_WORK = 10 * MAX_FOLD_WORK
"""Element operations (the same estimate) all the nodes folded in one ONNX model may cost
together, on top of ``FOLD_WORK_PER_WEIGHT`` per initializer element: about ten seconds. Each
node within ``MAX_FOLD_WORK`` is not enough: a 40 KB file of a thousand pools over one folded
constant, each just within it, would fold for many minutes. Real models fold a few operations
per weight (transposes, casts, dequantisation) and shape arithmetic (a BERT-base export: 3 nodes,
1.3 million). Past the bound the remaining nodes stay run-time ops."""

FOLD_WORK_PER_WEIGHT = 16
"""Element operations folding may spend per initializer element beyond ``MAX_FOLD_TOTAL_WORK``:
a weight transposed, cast and dequantised costs a few."""

MAX_FOLDED_BYTES = 1 << 26
"""Bytes of constants the TFLite target's folding of an ONNX model (``constant_folding.fold``) may make on
top of ``WEIGHT_BYTES_FACTOR`` times its initializers' bytes: the weights' factor is shared with
the .pt2 path's budget, the allowance is smaller than ``MAX_CONSTANT_BYTES`` because folding is
never needed for a right answer (a node left unfolded is a run-time op computing the same
values). Real models fold shape arithmetic (bytes) and weight transforms (counted in the factor);
without the bound, 2.6 KB of ``ConstantOfShape`` nodes folded 1 GiB and peaked at 7 GB."""


def constant_budget(weight_bytes: int, allowance: int = MAX_CONSTANT_BYTES) -> int:
    """Bytes of constants one conversion may materialise: ``allowance`` (``MAX_CONSTANT_BYTES``
    for the .pt2 -> ONNX lowering, ``MAX_FOLDED_BYTES`` for the TFLite target's folding) on top
    of ``WEIGHT_BYTES_FACTOR`` times the bytes of its weights (the ONNX model's initializers)."""
    return allowance + WEIGHT_BYTES_FACTOR * weight_bytes
