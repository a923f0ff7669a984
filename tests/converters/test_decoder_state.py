"""Decoders with a static KV cache (issue 32 item 4), and half-precision checkpoints kept so.

A program that writes its cache buffers in place (``index_put_`` at the decode position, as
ExecuTorch's and transformers' static caches do) converts with ``state="inputs"``: each buffer is
an input named after it and its new value the output ``<fqn>.mutated``; a decode loop feeds the
outputs back. ONNX keeps each buffer's saved value as the input's default; TFLite inputs have
none (the first step is fed zeros). Both match eager over several decode steps at batches 1 and 2.
bfloat16/float16 checkpoints keep their dtype in the ONNX file (a Cast when read).
"""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch

from pt2x.converters import to_onnx, to_tflite
from pt2x.serde.errors import Pt2UsageError

STEPS = 5


class Block(torch.nn.Module):
    def __init__(self, d, heads, max_len, batch):
        super().__init__()
        self.h, self.hd = heads, d // heads
        self.qkv = torch.nn.Linear(d, 3 * d)
        self.o = torch.nn.Linear(d, d)
        self.register_buffer("k_cache", torch.zeros(batch, heads, max_len, d // heads))
        self.register_buffer("v_cache", torch.zeros(batch, heads, max_len, d // heads))

    def forward(self, x, pos):
        b, t, d = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, self.h, self.hd).permute(2, 0, 3, 1, 4)
        self.k_cache[:, :, pos] = k
        self.v_cache[:, :, pos] = v
        mask = torch.arange(self.k_cache.shape[2])[None, :] <= pos[:, None]
        y = torch.nn.functional.scaled_dot_product_attention(q, self.k_cache, self.v_cache, attn_mask=mask)
        return self.o(y.transpose(1, 2).reshape(b, t, d))


class Decoder(torch.nn.Module):
    def __init__(self, batch, vocab=300, d=64, heads=4, layers=2, max_len=16):
        super().__init__()
        self.emb = torch.nn.Embedding(vocab, d)
        self.blocks = torch.nn.ModuleList(Block(d, heads, max_len, batch) for _ in range(layers))
        self.head = torch.nn.Linear(d, vocab)

    def forward(self, ids, pos):
        x = self.emb(ids)
        for blk in self.blocks:
            x = x + blk(x, pos)
        return self.head(x)


@pytest.fixture(scope="module", params=[1, 2], ids=["batch1", "batch2"])
def decoder(request, tmp_path_factory):
    batch = request.param
    torch.manual_seed(0)
    model = Decoder(batch).eval()
    ep = torch.export.export(model, (torch.zeros(batch, 1, dtype=torch.long), torch.tensor([0])))
    path = tmp_path_factory.mktemp("decoder") / "decoder.pt2"
    torch.export.save(ep, path)
    eager = Decoder(batch).eval()
    eager.load_state_dict(model.state_dict())
    g = torch.Generator().manual_seed(1)
    steps = [(torch.randint(0, 300, (batch, 1), generator=g), torch.tensor([s])) for s in range(STEPS)]
    with torch.no_grad():
        refs = [eager(ids, pos).numpy() for ids, pos in steps]
    return str(path), steps, refs


def _cache_names(names):
    return [n for n in names if n.endswith("_cache")]


def test_onnx_carries_the_cache_as_inputs_and_outputs(decoder, tmp_path):
    path, steps, refs = decoder
    dst = tmp_path / "d.onnx"
    to_onnx(path, dst, state="inputs")
    m = onnx.load(str(dst))
    inputs = [i.name for i in m.graph.input]
    assert _cache_names(inputs) == ["blocks.0.k_cache", "blocks.0.v_cache", "blocks.1.k_cache", "blocks.1.v_cache"]
    assert set(_cache_names(inputs)) <= {t.name for t in m.graph.initializer}  # the default: the saved zeros
    s = ort.InferenceSession(str(dst), providers=["CPUExecutionProvider"])
    names = [o.name for o in s.get_outputs()]
    state = {}
    for (ids, pos), ref in zip(steps, refs):
        outs = s.run(None, {"ids": ids.numpy(), "pos": pos.numpy(), **state})
        np.testing.assert_allclose(outs[0], ref, rtol=1e-5, atol=1e-5)
        state = {n[:-len(".mutated")]: v for n, v in zip(names, outs) if n.endswith(".mutated")}
    assert len(state) == 4


def test_onnx_default_state_mode_starts_each_call_from_the_saved_cache(decoder, tmp_path):
    path, steps, refs = decoder
    m = to_onnx(path)
    assert not _cache_names(i.name for i in m.graph.input)
    assert sum(o.name.endswith(".mutated") for o in m.graph.output) == 4
    s = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    (ids, pos), ref = steps[0], refs[0]
    np.testing.assert_allclose(s.run(None, {"ids": ids.numpy(), "pos": pos.numpy()})[0], ref, rtol=1e-5, atol=1e-5)


def test_tflite_carries_the_cache_as_inputs_and_outputs(decoder):
    from ai_edge_litert.interpreter import Interpreter

    path, steps, refs = decoder
    runner = Interpreter(model_content=to_tflite(path, state="inputs")).get_signature_runner()
    ins = runner.get_input_details()
    assert sorted(_cache_names(ins)) == ["blocks.0.k_cache", "blocks.0.v_cache", "blocks.1.k_cache", "blocks.1.v_cache"]
    state = {k: np.zeros(v["shape"], v["dtype"]) for k, v in ins.items() if k.endswith("_cache")}
    for (ids, pos), ref in zip(steps, refs):
        outs = runner(ids=ids.numpy(), pos=pos.numpy(), **state)
        got = next(v for k, v in outs.items() if not k.endswith(".mutated"))
        np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5)
        state = {k[:-len(".mutated")]: v for k, v in outs.items() if k.endswith(".mutated")}


def test_an_unknown_state_mode_is_a_usage_error(decoder):
    with pytest.raises(Pt2UsageError, match="state="):
        to_onnx(decoder[0], state="carried")


class Lifted(torch.nn.Module):
    """A tensor constant written in place (as transformers' StaticCache is lifted by export)."""

    def __init__(self):
        super().__init__()
        self.counter = torch.zeros(3)

    def forward(self, x):
        self.counter.add_(x)
        return x * 2


def test_a_tensor_constant_written_in_place_is_an_output_not_dropped(tmp_path):
    ep = torch.export.export(Lifted(), (torch.ones(3),))
    path = tmp_path / "lifted.pt2"
    torch.export.save(ep, path)
    m = to_onnx(path)
    mutated = [o.name for o in m.graph.output if o.name.endswith(".mutated")]
    assert mutated == ["counter.mutated"]
    s = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    out, counter = s.run(None, {s.get_inputs()[0].name: np.full(3, 2, np.float32)})
    np.testing.assert_array_equal(counter, np.full(3, 2, np.float32))


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bf16", "fp16"])
def test_half_precision_weights_keep_their_dtype(dtype, tmp_path):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.GELU(), torch.nn.Linear(512, 64)).to(dtype).eval()

    class Float(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.m = model

        def forward(self, x):
            return self.m(x.to(dtype)).float()

    x = torch.randn(3, 256)
    ep = torch.export.export(Float(), (x,), dynamic_shapes=({0: torch.export.Dim("b")},))
    path = tmp_path / "half.pt2"
    torch.export.save(ep, path)
    dst = tmp_path / "half.onnx"
    to_onnx(path, dst)
    weights = sum(p.numel() * p.element_size() for p in model.parameters())
    assert dst.stat().st_size < 1.1 * weights  # not widened to float32 in the file
    big = [t for t in onnx.load(str(dst)).graph.initializer if len(t.dims) == 2]
    want = onnx.TensorProto.BFLOAT16 if dtype == torch.bfloat16 else onnx.TensorProto.FLOAT16
    assert big and all(t.data_type == want for t in big)
    with torch.no_grad():
        ref = Float()(x).numpy()
    s = ort.InferenceSession(str(dst), providers=["CPUExecutionProvider"])
    got = s.run(None, {s.get_inputs()[0].name: x.numpy()})[0]
    np.testing.assert_allclose(got, ref, rtol=2e-2, atol=2e-2)


def _hf_static_cache_decoder():
    import transformers
    from transformers.integrations.executorch import TorchExportableModuleWithStaticCache

    cfg = transformers.LlamaConfig(vocab_size=1000, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                   num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(cfg).eval()
    model.generation_config = transformers.GenerationConfig(
        use_cache=True, cache_implementation="static", max_length=32,
        cache_config={"batch_size": 1, "max_cache_len": 32})
    return TorchExportableModuleWithStaticCache(model, batch_size=1, max_cache_len=32)


def test_transformers_static_cache_decodes_over_several_steps(tmp_path):
    """transformers' own export wrapper: torch.export lifts its StaticCache tensors as constants
    written by index_copy_ and copy_; carried as inputs, both targets follow eager step by step."""
    from ai_edge_litert.interpreter import Interpreter

    ep = torch.export.export(_hf_static_cache_decoder(), (), {"input_ids": torch.tensor([[5]]),
                                                             "cache_position": torch.tensor([0])}, strict=False)
    path = tmp_path / "hf_static.pt2"
    torch.export.save(ep, path)
    eager = _hf_static_cache_decoder()
    dst = tmp_path / "hf_static.onnx"
    to_onnx(path, dst, state="inputs")
    s = ort.InferenceSession(str(dst), providers=["CPUExecutionProvider"])
    names = [o.name for o in s.get_outputs()]
    runner = Interpreter(model_content=to_tflite(path, state="inputs")).get_signature_runner()
    t_state = {k: np.zeros(v["shape"], v["dtype"]) for k, v in runner.get_input_details().items()
               if k not in ("input_ids", "cache_position")}
    assert len(t_state) == 6  # two cache lengths and four caches
    o_state = {}
    for step, token in enumerate([5, 17, 99, 3, 250]):
        ids, pos = torch.tensor([[token]]), torch.tensor([step])
        with torch.no_grad():
            ref = eager(input_ids=ids, cache_position=pos).numpy()
        outs = s.run(None, {"input_ids": ids.numpy(), "cache_position": pos.numpy(), **o_state})
        np.testing.assert_allclose(outs[0], ref, rtol=1e-5, atol=1e-5)
        o_state = {n[:-len(".mutated")]: v for n, v in zip(names, outs) if n.endswith(".mutated")}
        t_outs = runner(input_ids=ids.numpy(), cache_position=pos.numpy(), **t_state)
        got = next(v for k, v in t_outs.items() if not k.endswith(".mutated"))
        np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5)
        t_state = {k[:-len(".mutated")]: v for k, v in t_outs.items() if k.endswith(".mutated")}
