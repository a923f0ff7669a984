"""ONNX-specific test programs and the parity harness shared by ``test_onnx_*.py``.

Flow per program: export with torch (cached) -> ``torch.export.save`` to a session temp dir
-> ``pt2x.converters.to_onnx`` on the file, in a process where ``import torch`` fails
(``torchfree.convert_torch_free``) -> ONNX Runtime -> compare with torch eager on
the example inputs and on ``second_args`` (other dynamic sizes), tolerances from
``tolerances.py``. Tiny models only: the whole ONNX suite must run in minutes on 2 cores.
"""

from __future__ import annotations

import atexit
import copy
import functools
import os
import shutil
import tempfile

import numpy as np
import torch
from torch.export import Dim

import zoo
from torchfree import convert_torch_free
from zoo import Case, _seeded

# ----------------------------------------------------------------------- modules


class CnnUpsample(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.bn = torch.nn.BatchNorm2d(8)
        self.c2 = torch.nn.Conv2d(8, 8, 3, stride=2, padding=1, groups=2)
        self.gn = torch.nn.GroupNorm(2, 8)
        self.up = torch.nn.ConvTranspose2d(8, 4, 2, stride=2)
        self.head = torch.nn.Linear(4, 5)

    def forward(self, x):
        h = torch.relu(self.bn(self.c1(x)))
        h = torch.nn.functional.max_pool2d(h, 2, ceil_mode=False)
        h = torch.nn.functional.interpolate(h, scale_factor=2, mode="nearest")
        h = torch.nn.functional.gelu(self.gn(self.c2(h)), approximate="tanh")
        h = torch.nn.functional.interpolate(h, scale_factor=2.0, mode="bilinear", align_corners=False)
        h = torch.nn.functional.silu(self.up(h))
        h = torch.nn.functional.avg_pool2d(h, 2)
        h = torch.nn.functional.adaptive_avg_pool2d(h, 1).flatten(1)
        return self.head(h)


class CnnDynamicHW(torch.nn.Module):
    """Dynamic batch, height and width (derived dims ``2*H``): resize to the input's size."""

    def __init__(self):
        super().__init__()
        self.c1 = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.c2 = torch.nn.Conv2d(8, 8, 3, stride=2, padding=1)
        self.head = torch.nn.Linear(8, 4)

    def forward(self, x):
        h1 = torch.relu(self.c1(x))
        h = torch.relu(self.c2(h1))
        h = torch.nn.functional.interpolate(h, size=x.shape[-2:], mode="bilinear", align_corners=False)
        h = h + torch.nn.functional.max_pool2d(h1, 3, 1, 1)
        return self.head(torch.nn.functional.adaptive_avg_pool2d(h, 1).flatten(1)), h.mean((2, 3))


class Convs1d3d(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = torch.nn.Conv1d(4, 6, 3, padding="same", dilation=2)
        self.t1 = torch.nn.ConvTranspose1d(6, 4, 3, stride=2, padding=1, output_padding=1)
        self.c3 = torch.nn.Conv3d(2, 3, 3, padding=1)

    def forward(self, x, v):
        a = torch.nn.functional.leaky_relu(self.t1(torch.tanh(self.c1(x))))
        b = torch.nn.functional.adaptive_avg_pool3d(torch.sigmoid(self.c3(v)), 2)
        return a, torch.nn.functional.hardswish(b)


def transformer_decoder():
    layer = torch.nn.TransformerDecoderLayer(32, 4, 64, dropout=0.0, batch_first=True, norm_first=True)
    return TransformerDecoder(torch.nn.TransformerDecoder(layer, 2))


class TransformerDecoder(torch.nn.Module):
    def __init__(self, dec):
        super().__init__()
        self.dec = dec

    def forward(self, tgt, memory):
        mask = torch.nn.Transformer.generate_square_subsequent_mask(tgt.shape[1])
        return self.dec(tgt, memory, tgt_mask=mask, tgt_is_causal=True)


class MhaPadding(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.mha = torch.nn.MultiheadAttention(16, 4, batch_first=True)

    def forward(self, x, pad):
        out, w = self.mha(x, x, x, key_padding_mask=pad, need_weights=True)
        return out, w


class Rnns(torch.nn.Module):
    def __init__(self, kind):
        super().__init__()
        cls = torch.nn.LSTM if kind == "lstm" else torch.nn.GRU
        self.rnn = cls(6, 8, num_layers=2, batch_first=True, bidirectional=True)

    def forward(self, x):
        out, h = self.rnn(x)
        return out, h


class Sdpa(torch.nn.Module):
    def forward(self, q, k, v, m):
        a = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=m)
        b = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        c = torch.nn.functional.scaled_dot_product_attention(q, k[:, :2], v[:, :2], enable_gqa=True, scale=0.3)
        return a, b, c


class IntOps(torch.nn.Module):
    def forward(self, x, idx):
        v, i = torch.topk(x, 3, dim=-1)
        s, si = torch.sort(x, dim=1, descending=True)
        am = torch.argmax(x, dim=-1)
        cs = torch.cumsum(idx, dim=1)
        g = torch.gather(x, 1, idx)
        sel = x[:, idx[0]]
        tri = torch.tril(x[:, :, None] * x[:, None, :])
        return v, i, s, si, am, cs, g, sel, tri.sum(-1), (x > 0).sum(1), torch.arange(x.shape[1]) * 2


class LowPrecisionMlp(torch.nn.Module):
    def __init__(self, dtype):
        super().__init__()
        self.fc1 = torch.nn.Linear(8, 16).to(dtype)
        self.ln = torch.nn.LayerNorm(16).to(dtype)
        self.fc2 = torch.nn.Linear(16, 4).to(dtype)

    def forward(self, x):
        return self.fc2(torch.nn.functional.gelu(self.ln(self.fc1(x)))).softmax(-1)


class Mixed(torch.nn.Module):
    """Type promotion, SymInt arithmetic, slicing and reductions under a dynamic batch."""

    def forward(self, x, n):
        b = x.shape[0]
        y = x * 2 + n  # float tensor + int64 tensor
        z = y.reshape(b, -1, 2).transpose(1, 2).contiguous().view(b * 2, -1)
        w = torch.where(z > 0, z, 0.5)
        return w.mean(-1), z.amax(0), (n // 3) % 2, torch.var(x, dim=1), x.std(), torch.clamp(x, -0.5, 0.5)


# ------------------------------------------------------------------ HF (tiny, random init)


def _hf():
    import transformers  # noqa: F401  (skip the case when missing)

    return transformers


class HfWrap(torch.nn.Module):
    def __init__(self, model, keys):
        super().__init__()
        self.model, self.keys = model, keys

    def forward(self, x, mask=None):
        out = self.model(x) if mask is None else self.model(x, attention_mask=mask)
        return tuple(getattr(out, k) for k in self.keys)


def hf_bert():
    t = _hf()
    cfg = t.BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                       intermediate_size=64, max_position_embeddings=64)
    return HfWrap(t.BertModel(cfg), ("last_hidden_state", "pooler_output"))


def hf_gpt2():
    t = _hf()
    cfg = t.GPT2Config(vocab_size=100, n_embd=32, n_layer=2, n_head=4, n_positions=64, use_cache=False)
    return HfWrap(t.GPT2LMHeadModel(cfg), ("logits",))


def hf_llama():
    t = _hf()
    cfg = t.LlamaConfig(vocab_size=100, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64, use_cache=False)
    return HfWrap(t.LlamaForCausalLM(cfg), ("logits",))


def hf_vit():
    t = _hf()
    cfg = t.ViTConfig(image_size=16, patch_size=4, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                      intermediate_size=64, num_channels=3)
    return HfWrap(t.ViTModel(cfg), ("last_hidden_state",))


def hf_t5_encoder():
    t = _hf()
    cfg = t.T5Config(vocab_size=100, d_model=32, d_kv=8, d_ff=64, num_layers=2, num_heads=4)
    return HfWrap(t.T5EncoderModel(cfg), ("last_hidden_state",))


def _ids(b, s):
    return lambda: (torch.randint(0, 100, (b, s)), torch.ones(b, s, dtype=torch.long).index_fill_(1, torch.tensor([s - 1]), 0))


def _ids_only(b, s):
    return lambda: (torch.randint(0, 100, (b, s)),)


_BATCH = Dim("batch", min=1, max=16)
_SEQ = Dim("seq", min=2, max=48)

ONNX_CASES: list[Case] = [
    Case("cnn_upsample", _seeded(CnnUpsample), lambda: (torch.randn(2, 3, 16, 16),),
         dynamic_shapes=({0: _BATCH},), second_args=lambda: (torch.randn(3, 3, 16, 16),), tags={"dynamic"}),
    Case("cnn_dynamic_hw", _seeded(CnnDynamicHW), lambda: (torch.randn(2, 3, 16, 20),),
         dynamic_shapes=({0: Dim("b", max=8), 2: 2 * Dim("H", min=8, max=64), 3: 2 * Dim("W", min=8, max=64)},),
         second_args=lambda: (torch.randn(3, 3, 40, 18),), tags={"dynamic"}),
    Case("convs_1d_3d", _seeded(Convs1d3d), lambda: (torch.randn(2, 4, 10), torch.randn(1, 2, 4, 4, 4))),
    Case("transformer_decoder", _seeded(transformer_decoder), lambda: (torch.randn(2, 5, 32), torch.randn(2, 7, 32)),
         dynamic_shapes=({0: _BATCH}, {0: _BATCH}),
         second_args=lambda: (torch.randn(3, 5, 32), torch.randn(3, 7, 32)), tags={"dynamic"}),
    Case("mha_padding", _seeded(MhaPadding),
         lambda: (torch.randn(2, 6, 16), torch.tensor([[False] * 6, [False] * 4 + [True] * 2])),
         dynamic_shapes=({0: _BATCH}, {0: _BATCH}),
         second_args=lambda: (torch.randn(3, 6, 16), torch.tensor([[False] * 6, [False] * 3 + [True] * 3, [False] * 5 + [True]])),
         tags={"dynamic"}),
    Case("lstm", _seeded(lambda: Rnns("lstm")), lambda: (torch.randn(2, 5, 6),),
         dynamic_shapes=({0: _BATCH},), second_args=lambda: (torch.randn(3, 5, 6),), tags={"dynamic"}),
    Case("gru", _seeded(lambda: Rnns("gru")), lambda: (torch.randn(2, 5, 6),),
         dynamic_shapes=({0: _BATCH},), second_args=lambda: (torch.randn(3, 5, 6),), tags={"dynamic"}),
    Case("sdpa_masks_gqa", _seeded(Sdpa),
         lambda: (torch.randn(2, 4, 5, 8), torch.randn(2, 4, 5, 8), torch.randn(2, 4, 5, 8), torch.randn(5, 5))),
    Case("int_ops", _seeded(IntOps), lambda: (torch.randn(3, 6), torch.randint(0, 6, (3, 6))),
         dynamic_shapes=({0: _BATCH}, {0: _BATCH}),
         second_args=lambda: (torch.randn(5, 6), torch.randint(0, 6, (5, 6))), tags={"dynamic"}),
    Case("fp16_mlp", _seeded(lambda: LowPrecisionMlp(torch.float16)), lambda: (torch.randn(3, 8).half(),),
         dynamic_shapes=({0: _BATCH},), second_args=lambda: (torch.randn(5, 8).half(),), tags={"dtypes"}),
    Case("bf16_mlp", _seeded(lambda: LowPrecisionMlp(torch.bfloat16)), lambda: (torch.randn(3, 8).bfloat16(),),
         dynamic_shapes=({0: _BATCH},), second_args=lambda: (torch.randn(5, 8).bfloat16(),), tags={"dtypes"}),
    Case("mixed_promotion", _seeded(Mixed), lambda: (torch.randn(3, 8), torch.arange(8)),
         dynamic_shapes=({0: _BATCH}, None), second_args=lambda: (torch.randn(6, 8), torch.arange(8)),
         tags={"dynamic"}),
    Case("hf_bert", _seeded(hf_bert), _ids(2, 8), dynamic_shapes={"x": {0: _BATCH, 1: _SEQ}, "mask": {0: _BATCH, 1: _SEQ}},
         second_args=_ids(3, 11), tags={"hf", "dynamic"}),
    Case("hf_gpt2", _seeded(hf_gpt2), _ids_only(2, 8), dynamic_shapes={"x": {0: _BATCH, 1: _SEQ}},
         second_args=_ids_only(1, 13), tags={"hf", "dynamic"}),
    Case("hf_llama", _seeded(hf_llama), _ids_only(2, 8), dynamic_shapes={"x": {0: _BATCH, 1: _SEQ}},
         second_args=_ids_only(3, 5), tags={"hf", "dynamic"}),
    Case("hf_vit", _seeded(hf_vit), lambda: (torch.randn(2, 3, 16, 16),), dynamic_shapes={"x": {0: _BATCH}},
         second_args=lambda: (torch.randn(3, 3, 16, 16),), tags={"hf", "dynamic"}),
    Case("hf_t5_encoder", _seeded(hf_t5_encoder), _ids_only(2, 8), dynamic_shapes={"x": {0: _BATCH, 1: _SEQ}},
         second_args=_ids_only(3, 6), tags={"hf", "dynamic"}),
]
_ONNX = {c.name: c for c in ONNX_CASES}


def case(name: str) -> Case:
    return _ONNX[name] if name in _ONNX else zoo.all_cases()[name]


@functools.cache
def exported(name: str, decomposed: bool = False):
    c = case(name)
    if name not in _ONNX and "mutation" not in c.tags:
        return zoo.exported(name, decomposed)
    if decomposed:
        return exported(name).run_decompositions()
    # Programs that mutate buffers are exported afresh: zoo.exported's shared program may
    # have been run by another suite (ep.module()(x)), which advances its buffers.
    return torch.export.export(c.make(), c.args(), c.kwargs(), dynamic_shapes=c.dynamic_shapes, strict=c.strict)


# ----------------------------------------------------------------------- harness

_TMP = tempfile.mkdtemp(prefix="pt2x-onnx-tests-")
atexit.register(shutil.rmtree, _TMP, True)


@functools.cache
def saved(name: str, decomposed: bool = False) -> str:
    """The program written by ``torch.export.save`` (the input pt2x converts)."""
    path = os.path.join(_TMP, f"{name}{'_dec' if decomposed else ''}.pt2")
    torch.export.save(exported(name, decomposed), path)
    return path


@functools.cache
def converted(name: str, decomposed: bool = False, opset: int | None = None) -> bytes:
    """pt2x's ONNX of the saved program, converted where ``import torch`` fails."""
    kw = {} if opset is None else {"opset": opset}
    return convert_torch_free("to_onnx", saved(name, decomposed), **kw)


def _leaves(x):
    from torch.utils._pytree import tree_flatten

    return tree_flatten(x)[0]


def eager_outputs(name: str, args, kwargs) -> list:
    c = case(name)
    torch.manual_seed(0)
    module = c.make()
    with torch.no_grad():
        out = module(*copy.deepcopy(args), **copy.deepcopy(kwargs))
    return _leaves(out)


def to_numpy(t):
    if isinstance(t, torch.Tensor):
        if t.dtype == torch.bfloat16:
            import ml_dtypes

            return t.float().numpy().astype(ml_dtypes.bfloat16)
        return t.detach().numpy()
    return np.asarray(t)


def ort_session(model_bytes: bytes, provider: str = "CPUExecutionProvider", provider_options=None):
    """A session whose bfloat16 outputs are cast to float32 (ORT's Python API cannot return
    bf16 arrays); bf16 inputs are fed as OrtValues by ``run``."""
    import onnx
    import onnxruntime as ort
    from onnx import TensorProto, helper

    m = onnx.load_from_string(model_bytes)
    for o in m.graph.output:
        if o.type.tensor_type.elem_type == TensorProto.BFLOAT16:
            new = o.name + ".f32"
            m.graph.node.append(helper.make_node("Cast", [o.name], [new], to=TensorProto.FLOAT))
            o.name = new
            o.type.tensor_type.elem_type = TensorProto.FLOAT
    so = ort.SessionOptions()
    so.log_severity_level = 3
    opts = [provider_options or {}] if provider_options is not None else None
    return ort.InferenceSession(m.SerializeToString(), so, providers=[provider], provider_options=opts)


def run(sess, inputs: list) -> list[np.ndarray]:
    import ml_dtypes
    import onnxruntime as ort
    from onnx import TensorProto

    feeds = {}
    for i, x in zip(sess.get_inputs(), inputs):
        a = to_numpy(x)
        if a.dtype == ml_dtypes.bfloat16:
            a = ort.OrtValue.ortvalue_from_numpy_with_onnx_type(a.view(np.uint16), TensorProto.BFLOAT16)
        feeds[i.name] = a
    if any(isinstance(v, ort.OrtValue) for v in feeds.values()):
        feeds = {k: v if isinstance(v, ort.OrtValue) else ort.OrtValue.ortvalue_from_numpy(v) for k, v in feeds.items()}
        return [v.numpy() for v in sess.run_with_ort_values([o.name for o in sess.get_outputs()], feeds)]
    return sess.run(None, feeds)


def input_sets(name: str):
    c = case(name)
    torch.manual_seed(1)
    sets = [("example", c.args(), c.kwargs())]
    if c.second_args is not None:
        sets.append(("second", c.second_args(), (c.second_kwargs or c.kwargs)()))
    return sets


def check_parity(name: str, decomposed: bool, sess=None, *, scale: float = 1.0) -> None:
    """ONNX Runtime vs torch eager on every input set of the case."""
    from tolerances import assert_close

    sess = sess or ort_session(converted(name, decomposed))
    for label, args, kwargs in input_sets(name):
        expected = eager_outputs(name, args, kwargs)
        tensors = [x for x in _leaves((args, kwargs)) if isinstance(x, torch.Tensor)]
        got = run(sess, tensors)
        assert len(got) >= len(expected), f"{name}: {len(got)} outputs, eager has {len(expected)}"
        for i, (e, g) in enumerate(zip(expected, got)):
            dtype = e.dtype if isinstance(e, torch.Tensor) else np.asarray(e).dtype
            assert_close(g, to_numpy(e).astype(np.float32) if str(dtype) == "torch.bfloat16" else to_numpy(e),
                         dtype, what=f"{name}{' (decomposed)' if decomposed else ''} {label} output {i}", scale=scale)
