"""Weight-only options (``to_tflite``/``to_onnx`` ``weights="fp16"|"int8"``, ``pt2x convert --weights``):
programs torch exports and saves here, converted where ``import torch`` fails, run in LiteRT
(XNNPACK on and off) and ONNX Runtime at two batch sizes.

The reference is torch eager of the same module with its weights replaced by what the file
stores: ``w.half().float()`` for fp16, ``s * q`` for int8 (``s = max|w| / 127`` per output channel,
computed here independently of pt2x). Storing weights is then the only change, so:

* fp16 everywhere, and int8 where the weights are read through DEQUANTIZE (LiteRT's depthwise conv,
  batch matmul and transposed conv; every ONNX operator) match that reference to float32 rounding
  (``RTOL``/``ATOL`` relative to the output's magnitude);
* int8 through LiteRT's hybrid kernels (CONV_2D, FULLY_CONNECTED) also rounds the activations to
  int8 with a step of at most ``max|x| / 127``, so each output is within ``max|x| / 254 * sum|w^|``
  over its receptive field (plus float32 rounding) of the reference: the bound is computed per
  output channel from the layer's own input and weights.
"""

from __future__ import annotations

import functools
import json
import os

import numpy as np
import onnx
import pytest
import torch
import torch.nn as nn

from pt2x.converters.weight_quant import MIN_ELEMENTS
from tflite_zoo import interpreter, run
from torchfree import convert_torch_free, run_cli_torch_free

@functools.cache
def _converted(fn: str, path: str, weights: str | None = None) -> bytes:
    return convert_torch_free(fn, path, weights=weights)


RTOL = 1e-5  # float32 rounding, relative to the output's largest magnitude
BATCHES = (1, 3)


class Layers(nn.Module):
    """One layer per route, each on its own input and output, so each output's bound is the
    layer's own: conv and linear (hybrid in LiteRT), depthwise, transposed conv, batched matmul
    (DEQUANTIZE in LiteRT), and a conv too small to quantize (stays float32)."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(16, 32, 3, padding=1)  # 4,608 weights
        self.fc = nn.Linear(64, 48)  # 3,072
        self.dw = nn.Conv2d(128, 128, 3, groups=128)  # 1,152
        self.ct = nn.ConvTranspose2d(128, 16, 2, stride=2)  # 8,192
        self.w3 = nn.Parameter(torch.randn(4, 64, 48) / 8)  # 12,288
        self.small = nn.Conv2d(16, 4, 3)  # 576: below MIN_ELEMENTS

    def forward(self, x, v, d, z):
        return self.conv(x), self.fc(v), self.dw(d), self.ct(d), z @ self.w3, self.small(x)


# output index -> (the module's weight attribute, its output-channel axis in torch's layout)
WEIGHTS = {0: ("conv.weight", 0), 1: ("fc.weight", 0), 2: ("dw.weight", 0), 3: ("ct.weight", 1), 4: ("w3", 2)}
HYBRID = {0: "conv", 1: "fc"}
STORED_ELEMENTS = 4608 + 3072 + 1152 + 8192 + 12288  # the weights of WEIGHTS' layers
STORED_CHANNELS = 32 + 48 + 128 + 16 + 48  # their output channels (one int8 scale each)  # outputs LiteRT computes in its hybrid kernels (int8 activations)


def _inputs(batch: int, seed: int) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(batch, 16, 8, 8, generator=g), torch.randn(batch, 64, generator=g),
            torch.randn(batch, 128, 6, 6, generator=g), torch.randn(batch, 4, 5, 64, generator=g)]


@pytest.fixture(scope="module")
def layers(tmp_path_factory):
    torch.manual_seed(0)
    m = Layers().eval()
    with torch.no_grad():
        m.conv.weight[3] = 0  # an all-zero output channel: scale 1, weights 0 exactly
    b = torch.export.Dim("b", min=1, max=8)
    ep = torch.export.export(m, tuple(_inputs(2, 0)), dynamic_shapes=tuple({0: b} for _ in range(4)))
    path = str(tmp_path_factory.mktemp("weights") / "layers.pt2")
    torch.export.save(ep, path)
    return m, path


def _fp16(w: torch.Tensor, axis: int) -> torch.Tensor:
    return w.half().float()


def _int8(w: torch.Tensor, axis: int) -> torch.Tensor:
    """``s * q``, computed here as pt2x's docs state it (not with pt2x's code)."""
    dims = [k for k in range(w.dim()) if k != axis]
    peak = w.detach().double().abs().amax(dim=dims, keepdim=True)
    s = (peak / 127).float().double()
    s = torch.where(peak == 0, torch.ones_like(s), s)
    return (torch.clamp(torch.round(w.double() / s), -127, 127) * s).float()


def _reference(m: Layers, option: str, inputs) -> list[np.ndarray]:
    store = _fp16 if option == "fp16" else _int8
    ref = Layers().eval()
    ref.load_state_dict(m.state_dict())
    with torch.no_grad():
        for name, axis in WEIGHTS.values():
            p = ref.get_parameter(name)
            p.copy_(store(p, axis))
        return [o.numpy() for o in ref(*inputs)]


def _hybrid_bound(m: Layers, out: int, inputs, stored_weight: torch.Tensor) -> np.ndarray:
    """Per output channel (broadcastable to the output): the activation rounding bound
    ``max|x| / 254 * sum|w^|`` of the hybrid layer, per batch row (LiteRT's input scale is per
    row for FULLY_CONNECTED, per tensor or per batch for CONV_2D: per tensor is the largest)."""
    x = inputs[0] if out == 0 else inputs[1]
    half_step = float(x.abs().max()) / 254
    sums = stored_weight.detach().abs().flatten(1).sum(1).numpy()  # over the receptive field, per output channel
    return half_step * (sums[None, :, None, None] if out == 0 else sums[None, :])


def _run_litert(model: bytes, inputs, xnnpack: bool) -> list[np.ndarray]:
    return run(interpreter(model, xnnpack=xnnpack), [x.numpy() for x in inputs])


def _run_ort(model: bytes, inputs) -> list[np.ndarray]:
    import onnxruntime as ort

    sess = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
    return sess.run(None, {i.name: x.numpy() for i, x in zip(sess.get_inputs(), inputs)})


def _check(got: list[np.ndarray], want: list[np.ndarray], bounds: dict, what: str) -> None:
    assert len(got) == len(want), what
    for k, (g, w) in enumerate(zip(got, want)):
        assert g.shape == w.shape, f"{what} output {k}"
        tol = RTOL * float(np.abs(w).max()) + bounds.get(k, 0)
        err = np.abs(g - w)
        assert (err <= tol).all(), f"{what} output {k}: {float(err.max()):.3g} off (bound {np.max(tol):.3g})"


@pytest.mark.parametrize("option", ["fp16", "int8"])
@pytest.mark.parametrize("xnnpack", [True, False], ids=["xnnpack", "builtin"])
def test_tflite_matches_eager_with_stored_weights(layers, option, xnnpack):
    m, path = layers
    model = _converted("to_tflite", path, option)
    for batch in BATCHES:
        inputs = _inputs(batch, batch)
        bounds = {}
        if option == "int8":
            for out, layer in HYBRID.items():
                name, axis = WEIGHTS[out]
                bounds[out] = _hybrid_bound(m, out, inputs, _int8(m.get_parameter(name), axis))
        _check(_run_litert(model, inputs, xnnpack), _reference(m, option, inputs), bounds,
               f"{option} LiteRT xnnpack={xnnpack} batch {batch}")


@pytest.mark.parametrize("option", ["fp16", "int8"])
def test_onnx_matches_eager_with_stored_weights(layers, option):
    m, path = layers
    model = _converted("to_onnx", path, option)
    for batch in BATCHES:
        inputs = _inputs(batch, batch)
        _check(_run_ort(model, inputs), _reference(m, option, inputs), {}, f"{option} ONNX Runtime batch {batch}")


def _tensors(model: bytes) -> tuple[list[dict], list[dict]]:
    it = interpreter(model, xnnpack=False)
    return it.get_tensor_details(), it._get_ops_details()


def test_tflite_files_hold_the_stored_weights(layers):
    m, path = layers
    plain = _converted("to_tflite", path)
    half = _converted("to_tflite", path, "fp16")
    q8 = _converted("to_tflite", path, "int8")
    assert len(plain) - len(half) >= 0.98 * 2 * STORED_ELEMENTS  # 2 bytes saved per weight
    # 3 bytes per weight, less a float32 scale and an int64 zero point per channel and ~1 kB of tables
    assert len(plain) - len(q8) >= 3 * STORED_ELEMENTS - 12 * STORED_CHANNELS - 1024
    # fp16: every large constant is float16, read by a DEQUANTIZE; the small conv's stays float32
    tensors, ops = _tensors(half)
    big = [t for t in tensors if int(np.prod(t["shape"])) >= MIN_ELEMENTS and t["dtype"] == np.float16]
    assert len(big) == 5
    dq_inputs = {int(o["inputs"][0]) for o in ops if o["op_name"] == "DEQUANTIZE"}
    assert {t["index"] for t in big} == dq_inputs
    # int8: the conv and linear weights feed CONV_2D/FULLY_CONNECTED as int8 (hybrid); the others a DEQUANTIZE
    tensors, ops = _tensors(q8)
    by_index = {t["index"]: t for t in tensors}
    weight_of = {o["op_name"]: by_index[int(o["inputs"][1])] for o in ops if len(o["inputs"]) > 1}
    assert weight_of["FULLY_CONNECTED"]["dtype"] == np.int8
    conv_weights = [by_index[int(o["inputs"][1])] for o in ops if o["op_name"] == "CONV_2D"]
    assert sorted(str(t["dtype"].__name__) for t in conv_weights) == ["float32", "int8"]  # the small conv stays float
    dequantized = [by_index[int(o["inputs"][0])] for o in ops if o["op_name"] == "DEQUANTIZE"]
    assert len(dequantized) == 3 and all(t["dtype"] == np.int8 for t in dequantized)
    # the quantization parameters: per channel, zero point 0, scale max|w| / 127 (1 for the all-zero channel)
    conv = next(t for t in conv_weights if t["dtype"] == np.int8)
    qp = conv["quantization_parameters"]
    w = m.conv.weight.detach().numpy()
    want = np.abs(w).reshape(32, -1).max(1) / 127
    want[3] = 1.0
    assert qp["quantized_dimension"] == 0 and (qp["zero_points"] == 0).all()
    np.testing.assert_allclose(qp["scales"], want.astype(np.float32), rtol=1e-7)
    # operator versions as TFLite's op_version rules give them for these tensor types
    assert {("DEQUANTIZE", 3)} <= _opcodes(half)
    assert {("CONV_2D", 1), ("CONV_2D", 5), ("FULLY_CONNECTED", 12), ("DEQUANTIZE", 5)} <= _opcodes(q8)
    meta = _pt2x_metadata(q8)
    assert meta["weights"]["stored"] == {"CONV_2D hybrid": 1, "FULLY_CONNECTED hybrid": 1,
                                         "DEPTHWISE_CONV_2D dequantize": 1, "TRANSPOSE_CONV dequantize": 1,
                                         "BATCH_MATMUL dequantize": 1}


def _opcodes(model: bytes) -> set[tuple[str, int]]:
    from pt2x.converters.tflite import schema_generated as fb

    names = {v: k for k, v in vars(fb.BuiltinOperator).items() if not k.startswith("_")}
    root = fb.Model.GetRootAs(model, 0)
    return {(names[root.OperatorCodes(k).BuiltinCode()], root.OperatorCodes(k).Version())
            for k in range(root.OperatorCodesLength())}


def _pt2x_metadata(model: bytes) -> dict:
    from pt2x.converters.tflite import schema_generated as fb

    root = fb.Model.GetRootAs(model, 0)
    for k in range(root.MetadataLength()):
        entry = root.Metadata(k)
        if entry.Name() == b"pt2x":
            return json.loads(root.Buffers(entry.Buffer()).DataAsNumpy().tobytes())
    raise AssertionError("no pt2x metadata")


def test_xnnpack_partitions_unchanged(layers):
    """XNNPACK takes the hybrid CONV_2D/FULLY_CONNECTED and folds the static DEQUANTIZEs: the
    files delegate in as many partitions as the float file."""
    _, path = layers

    def partitions(model):
        it = interpreter(model)
        run(it, [x.numpy() for x in _inputs(1, 0)])
        return [o["op_name"] for o in it._get_ops_details()].count("DELEGATE")

    plain = partitions(_converted("to_tflite", path))
    assert plain >= 1
    for option in ("fp16", "int8"):
        assert partitions(_converted("to_tflite", path, option)) == plain, option


def test_onnx_file_holds_int8_initializers(layers):
    _, path = layers
    plain = _converted("to_onnx", path)
    q8 = onnx.load_from_string(_converted("to_onnx", path, "int8"))
    half = onnx.load_from_string(_converted("to_onnx", path, "fp16"))
    assert len(plain) - len(q8.SerializeToString()) >= 3 * STORED_ELEMENTS - 5 * STORED_CHANNELS - 1024
    assert len(plain) - len(half.SerializeToString()) >= 0.98 * 2 * STORED_ELEMENTS
    int8 = [t for t in q8.graph.initializer if t.data_type == onnx.TensorProto.INT8 and len(t.dims) > 1]
    assert len(int8) == 5
    axes = {n.output[0]: n.attribute[0].i for n in q8.graph.node if n.op_type == "DequantizeLinear"}
    assert sorted(axes.values()) == [0, 0, 0, 1, 2], axes  # Conv (conv, dw), Gemm: 0; ConvTranspose: 1; MatMul: 2
    meta = {p.key: p.value for p in q8.metadata_props}
    assert json.loads(meta["pt2x.weights"])["stored"] == {"Conv int8": 2, "Gemm int8": 1, "ConvTranspose int8": 1,
                                                          "MatMul int8": 1}
    assert sum(t.data_type == onnx.TensorProto.FLOAT16 for t in half.graph.initializer) == 5
    assert [n.op_type for n in half.graph.node].count("Cast") >= 5


def _one_linear(tmp_path, weight: torch.Tensor) -> str:
    m = nn.Linear(weight.shape[1], weight.shape[0], bias=False).eval()
    with torch.no_grad():
        m.weight.copy_(weight)
    ep = torch.export.export(m, (torch.randn(2, weight.shape[1]),),
                             dynamic_shapes=({0: torch.export.Dim("b", min=1, max=8)},))
    path = str(tmp_path / "linear.pt2")
    torch.export.save(ep, path)
    return path


@pytest.mark.parametrize("value,option,reason", [
    (float("inf"), "int8", "non-finite"),
    (1e5, "fp16", "float16's range"),
    (1e-43, "int8", "below what a float32 scale resolves"),
])
def test_weight_that_cannot_be_stored_stays_float(tmp_path, value, option, reason):
    w = torch.randn(32, 64)
    w[5] = 0
    w[5, 7] = value
    path = _one_linear(tmp_path, w)
    model = _converted("to_tflite", path, option)
    tensors, _ = _tensors(model)
    weight = [t for t in tensors if list(t["shape"]) == [32, 64]]
    assert [t["dtype"] for t in weight] == [np.float32]
    kept = _pt2x_metadata(model)["weights"]["kept_float"]
    assert len(kept) == 1 and reason in kept[0]
    if np.isfinite(value):
        x = np.random.default_rng(0).standard_normal((3, 64)).astype(np.float32)
        got = run(interpreter(model), [x])[0]
        np.testing.assert_allclose(got, x @ w.numpy().T, rtol=1e-5, atol=1e-5 * float(np.abs(x @ w.numpy().T).max()))
    onnx_model = onnx.load_from_string(_converted("to_onnx", path, option))
    assert [t.data_type for t in onnx_model.graph.initializer if list(t.dims) == [32, 64]] == [onnx.TensorProto.FLOAT]
    meta = {p.key: p.value for p in onnx_model.metadata_props}
    assert reason in json.loads(meta["pt2x.weights"])["kept_float"][0]


def test_program_without_weights_converts_unchanged(tmp_path):
    class Affine(nn.Module):
        def forward(self, x):
            return x * 2 + 1

    ep = torch.export.export(Affine(), (torch.randn(2, 8),))
    path = str(tmp_path / "affine.pt2")
    torch.export.save(ep, path)
    x = np.arange(16, dtype=np.float32).reshape(2, 8)
    for option in ("fp16", "int8"):
        model = _converted("to_tflite", path, option)
        np.testing.assert_array_equal(run(interpreter(model), [x])[0], x * 2 + 1)
        assert _pt2x_metadata(model)["weights"] == {"option": option, "stored": {}, "kept_float": []}
        got = _run_ort(_converted("to_onnx", path, option), [torch.from_numpy(x)])[0]
        np.testing.assert_array_equal(got, x * 2 + 1)


def test_bad_option_is_a_usage_error(layers):
    from pt2x.serde.errors import Pt2UsageError

    _, path = layers
    for fn in ("to_tflite", "to_onnx"):
        with pytest.raises(Pt2UsageError, match="weights='int4': expected one of fp16, int8"):
            convert_torch_free(fn, path, weights="int4")


def test_cli_weights(layers, tmp_path):
    _, path = layers
    out = str(tmp_path / "m.tflite")
    done = run_cli_torch_free("convert", path, "--to", "tflite", "--weights", "int8", "-o", out)
    assert done.returncode == 0, done.stderr
    assert _pt2x_metadata(open(out, "rb").read())["weights"]["option"] == "int8"
    assert ("weights int8: BATCH_MATMUL dequantize 1, CONV_2D hybrid 1, DEPTHWISE_CONV_2D dequantize 1, "
            "FULLY_CONNECTED hybrid 1, TRANSPOSE_CONV dequantize 1; kept float32: 0") in done.stdout
    done = run_cli_torch_free("convert", path, "--to", "onnx", "--weights", "fp16", "-o", str(tmp_path / "m.onnx"))
    assert done.returncode == 0 and "weights fp16: float16 5; kept float32: 0" in done.stdout, done.stderr
    done = run_cli_torch_free("convert", path, "--to", "pt2", "--target-schema", "8.15", "--weights", "fp16",
                              "-o", str(tmp_path / "m.pt2"))
    assert done.returncode == 2 and "--weights applies only to --to onnx or tflite" in done.stderr
    assert not os.path.exists(tmp_path / "m.pt2")


class TiedEmbedding(nn.Module):
    """One table read twice: by an embedding lookup (GATHER: through DEQUANTIZE) and as the
    weights of the output projection (FULLY_CONNECTED: hybrid), rows as its output channels."""

    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(300, 64)

    def forward(self, ids):
        return nn.functional.linear(torch.tanh(self.emb(ids)), self.emb.weight)


def test_tied_embedding_read_by_gather_and_linear(tmp_path):
    torch.manual_seed(0)
    m = TiedEmbedding().eval()
    ep = torch.export.export(m, (torch.randint(0, 300, (2, 7)),),
                             dynamic_shapes=({0: torch.export.Dim("b", min=1, max=8)},))
    path = str(tmp_path / "tied.pt2")
    torch.export.save(ep, path)
    ids = torch.randint(0, 300, (3, 7), generator=torch.Generator().manual_seed(1))
    stored = _int8(m.emb.weight.detach(), 0)
    with torch.no_grad():
        hidden = torch.tanh(nn.functional.embedding(ids, stored))
        want = nn.functional.linear(hidden, stored).numpy()
    model = _converted("to_tflite", path, "int8")
    assert _pt2x_metadata(model)["weights"]["stored"] == {"GATHER dequantize": 1, "FULLY_CONNECTED hybrid": 1}
    bound = float(hidden.abs().max()) / 254 * stored.abs().sum(1).numpy()
    for xnnpack in (True, False):
        _check(_run_litert(model, [ids], xnnpack), [want], {0: bound}, f"tied int8 xnnpack={xnnpack}")
    _check(_run_ort(_converted("to_onnx", path, "int8"), [ids]), [want], {}, "tied int8 ONNX Runtime")


class ResizeThenLinear(nn.Module):
    """A bicubic resize LiteRT's builtins do not compute as torch does: pt2x writes it as one
    FULLY_CONNECTED per axis with a constant interpolation matrix ([64, 40]: 2,560 entries)."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(64, 64)

    def forward(self, x):
        return self.fc(nn.functional.interpolate(x, size=(64, 64), mode="bicubic", align_corners=False))


def test_only_the_programs_weights_are_stored(tmp_path):
    """The interpolation matrices pt2x builds stay float32; the Linear's weights are int8."""
    torch.manual_seed(0)
    m = ResizeThenLinear().eval()
    x = torch.randn(2, 3, 40, 40)
    path = str(tmp_path / "resize.pt2")
    torch.export.save(torch.export.export(m, (x,)), path)
    model = _converted("to_tflite", path, "int8")
    tensors, ops = _tensors(model)
    by_index = {t["index"]: t for t in tensors}
    fc_weights = sorted(by_index[int(o["inputs"][1])]["dtype"].__name__ for o in ops if o["op_name"] == "FULLY_CONNECTED")
    assert fc_weights == ["float32", "float32", "int8"]
    assert _pt2x_metadata(model)["weights"]["stored"] == {"FULLY_CONNECTED hybrid": 1}
    stored = _int8(m.fc.weight.detach(), 0)
    with torch.no_grad():
        resized = nn.functional.interpolate(x, size=(64, 64), mode="bicubic", align_corners=False)
        want = nn.functional.linear(resized, stored, m.fc.bias).numpy()
    bound = float(resized.abs().max()) / 254 * stored.abs().sum(1).numpy()
    for xnnpack in (True, False):
        _check(_run_litert(model, [x], xnnpack), [want], {0: bound}, f"resize + linear int8 xnnpack={xnnpack}")
