"""Weights stream (issue 32): a weight goes from the archive's memory map to the output once.

ONNX: one file below protobuf's 2 GiB, written with each initializer's bytes streamed; external
data (aligned for mmap) past it or on request; the returned model points at the bytes written.
An ONNX file with external data is memory-mapped for --to tflite. A decoder of a few hundred MB
converts torch-free within the memory bound, and matches eager at batches 1 and 2.
"""

from __future__ import annotations

import io
import os
import sys
import time

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch

from pt2x.converters import to_onnx, to_tflite
from pt2x.converters.errors import ConversionError
from pt2x.converters.onnx.converter import save
from pt2x.converters.onnx.lazy_initializers import array_of, is_lazy
from pt2x.converters.onnx.writer import ALIGN, ALIGN_LARGE, ALIGN_LARGE_FROM

from workshop import load_script
from torchfree import run_cli_torch_free


class Net(torch.nn.Module):
    """An embedding and two linears (weights of 64 KiB and more, one past 1 MiB)."""

    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(1000, 300)
        self.a = torch.nn.Linear(300, 400)
        self.b = torch.nn.Linear(400, 50)

    def forward(self, ids):
        return self.b(torch.relu(self.a(self.emb(ids))))


@pytest.fixture(scope="module")
def net(tmp_path_factory):
    torch.manual_seed(0)
    m = Net().eval()
    ids = torch.randint(0, 1000, (2, 7))
    ep = torch.export.export(m, (ids,), dynamic_shapes=({0: torch.export.Dim("b"), 1: torch.export.Dim("s")},))
    path = tmp_path_factory.mktemp("net") / "net.pt2"
    torch.export.save(ep, path)
    return str(path), m, ids


def _run_onnx(path_or_bytes, ids):
    s = ort.InferenceSession(path_or_bytes, providers=["CPUExecutionProvider"])
    return s.run(None, {s.get_inputs()[0].name: ids.numpy()})[0]


def _values(m: onnx.ModelProto, folder=None) -> dict:
    if folder is not None:
        m2 = onnx.ModelProto()
        m2.CopyFrom(m)
        onnx.load_external_data_for_model(m2, folder)
        m = m2
    return {t.name: onnx.numpy_helper.to_array(t) for t in m.graph.initializer}


def test_single_file_is_streamed_and_the_returned_model_points_at_it(net, tmp_path):
    path, m, ids = net
    dst = tmp_path / "net.onnx"
    written = to_onnx(path, dst)
    assert not (tmp_path / "net.onnx.data").exists()
    ref = m(ids).detach().numpy()
    np.testing.assert_allclose(_run_onnx(str(dst), ids), ref, rtol=1e-5, atol=1e-5)
    onnx.checker.check_model(str(dst))
    # the same initializers as the in-memory conversion, value for value
    in_memory = _values(to_onnx(path))
    on_disk = _values(onnx.load(str(dst)))
    assert on_disk.keys() == in_memory.keys()
    for k in in_memory:
        np.testing.assert_array_equal(on_disk[k], in_memory[k])
    # the returned model is weightless and its large initializers point at their bytes in the file
    large = [t for t in written.graph.initializer if t.data_location == onnx.TensorProto.EXTERNAL]
    assert large and all({e.key: e.value for e in t.external_data}["location"] == "net.onnx" for t in large)
    assert written.ByteSize() < 100_000
    back = _values(written, str(tmp_path))
    for k in in_memory:
        np.testing.assert_array_equal(back[k], in_memory[k])


def test_external_data_is_aligned_for_memory_mapping(net, tmp_path):
    path, m, ids = net
    dst = tmp_path / "ext.onnx"
    written = to_onnx(path, dst, external_data=True)
    data = tmp_path / "ext.onnx.data"
    assert data.exists() and dst.stat().st_size < 50_000
    for t in onnx.load(str(dst), load_external_data=False).graph.initializer:
        if t.data_location != onnx.TensorProto.EXTERNAL:
            continue
        fields = {e.key: e.value for e in t.external_data}
        offset, length = int(fields["offset"]), int(fields["length"])
        assert fields["location"] == "ext.onnx.data"
        assert offset % (ALIGN_LARGE if length >= ALIGN_LARGE_FROM else ALIGN) == 0
    assert any(int({e.key: e.value for e in t.external_data}["length"]) >= ALIGN_LARGE_FROM
               for t in written.graph.initializer if t.data_location == onnx.TensorProto.EXTERNAL)
    onnx.checker.check_model(str(dst))
    np.testing.assert_allclose(_run_onnx(str(dst), ids), m(ids).detach().numpy(), rtol=1e-5, atol=1e-5)


def test_external_data_is_chosen_past_the_threshold_and_refused_when_forbidden(net, tmp_path):
    path, m, ids = net
    mem = to_onnx(path)
    assert save(mem, str(tmp_path / "a.onnx"), external_threshold=1 << 20) == "external data"
    assert save(mem, str(tmp_path / "b.onnx")) == "single file"
    assert all(t.raw_data or t.data_location != onnx.TensorProto.EXTERNAL for t in mem.graph.initializer)  # kept
    with pytest.raises(ConversionError, match="external data"):
        save(mem, str(tmp_path / "c.onnx"), external=False, external_threshold=1 << 20)
    np.testing.assert_allclose(_run_onnx(str(tmp_path / "a.onnx"), ids), m(ids).detach().numpy(), rtol=1e-5, atol=1e-5)


def test_onnx_with_external_data_is_memory_mapped_for_tflite(net, tmp_path):
    from ai_edge_litert.interpreter import Interpreter

    from pt2x.converters.tflite.prepare import load_onnx

    path, m, ids = net
    dst = tmp_path / "ext.onnx"
    to_onnx(path, dst, external_data=True, opset=18)
    p = load_onnx(str(dst))
    big = [t for t in p.model.graph.initializer if t.data_location == onnx.TensorProto.EXTERNAL]
    assert big and all(is_lazy(t) for t in big)
    assert all(isinstance(array_of(t).base, np.ndarray) or array_of(t).base is not None for t in big)  # views
    data = to_tflite(str(dst))
    it = Interpreter(model_content=data)
    d = it.get_input_details()[0]
    for b in (1, 2):
        x = ids[:b]
        it.resize_tensor_input(d["index"], list(x.shape))
        it.allocate_tensors()
        it.set_tensor(d["index"], x.numpy().astype(d["dtype"]))
        it.invoke()
        got = it.get_tensor(it.get_output_details()[0]["index"])
        np.testing.assert_allclose(got, m(x).detach().numpy(), rtol=1e-5, atol=1e-5)


def test_cli_external_data_option(net, tmp_path):
    path, _, _ = net
    r = run_cli_torch_free("convert", path, "--to", "onnx", "-o", str(tmp_path / "m.onnx"), "--external-data")
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "m.onnx.data").stat().st_size > 1_000_000
    r = run_cli_torch_free("convert", path, "--to", "tflite", "-o", str(tmp_path / "m.tflite"), "--external-data")
    assert r.returncode == 2 and "--external-data applies only to --to onnx" in r.stderr


def test_progress_line_shows_the_bytes_written():
    from pt2x.tools import conversion_progress as cp

    out = io.StringIO()
    old = cp.DELAY
    cp.DELAY = 0.0
    try:
        with cp.ConversionProgress("converting m.pt2", enabled=True, stream=out) as p:
            p.bytes(1_500_000_000, 3_000_000_000)
            time.sleep(0.6)
    finally:
        cp.DELAY = old
    text = out.getvalue()
    assert "converting m.pt2" in text and "writing weights 50% (1.5 GB of 3.0 GB)" in text
    assert text.endswith("\r\x1b[K")  # the line is cleared at the end
    quiet = io.StringIO()
    with cp.ConversionProgress("x", stream=quiet) as p:  # not a terminal: nothing drawn
        p.bytes(1, 2)
    assert quiet.getvalue() == ""


# ------------------------------------------------------------------ a decoder, measured

_TORCH_FREE_CLI = "import sys\nsys.modules['torch'] = None\nfrom pt2x.tools.cli import main\nsys.exit(main(sys.argv[1:]))\n"


@pytest.fixture(scope="module")
def decoder(tmp_path_factory):
    """transformers' Llama, random init, float32, dynamic batch and sequence: about 280 MB."""
    import transformers

    cfg = transformers.LlamaConfig(vocab_size=32000, hidden_size=768, intermediate_size=2048, num_hidden_layers=4,
                                   num_attention_heads=12, num_key_value_heads=4, max_position_embeddings=256,
                                   tie_word_embeddings=False)
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(cfg).eval()

    class Logits(torch.nn.Module):
        def __init__(self, m):
            super().__init__()
            self.m = m

        def forward(self, ids):
            return self.m(input_ids=ids, use_cache=False).logits

    wrapped = Logits(model).eval()
    ids = torch.randint(0, 32000, (2, 8))
    ep = torch.export.export(wrapped, (ids,), dynamic_shapes=({0: torch.export.Dim("batch", max=16),
                                                               1: torch.export.Dim("seq", max=128)},))
    path = tmp_path_factory.mktemp("decoder") / "decoder.pt2"
    torch.export.save(ep, path)
    weights = sum(p.numel() * p.element_size() for p in model.parameters())
    with torch.no_grad():
        ref = wrapped(ids).numpy()
    return str(path), weights, ids.numpy(), ref


def _measured(*argv) -> tuple[int, float, float, str]:
    """(exit, peak anonymous bytes, peak RSS bytes, the error) of the torch-free CLI, watched as
    the LLM benchmark watches a conversion (``benchmarks/bench_llm.py``'s ``measure``)."""
    bench = load_script("bench_llm")
    r = bench.measure([sys.executable, "-c", _TORCH_FREE_CLI, *argv], timeout=600)
    return r["exit"], r["peak_anon_mb"] * bench.MB, r["peak_rss_mb"] * 2**20, r["error"] or ""


@pytest.mark.parametrize("to", ["onnx", "tflite"])
def test_decoder_converts_torch_free_within_the_memory_bound(decoder, to, tmp_path):
    path, weights, ids, ref = decoder
    assert weights > 250e6
    dst = str(tmp_path / f"decoder.{to}")
    code, anon, rss, err = _measured("convert", path, "--to", to, "-o", dst)
    assert code == 0, err
    # the bound: anonymous memory at most 0.25x the weights + 1 GiB, RSS (mapped input
    # pages included) at most 1.5x + 1 GiB. Tighter, to catch one more copy of the weights: both
    # writers stream each weight from the archive's map (TFLite's flatbuffer is built with the
    # constants' room reserved, not filled).
    assert rss <= 1.5 * weights + 2**30, (rss, weights)
    assert anon <= 0.25 * weights + 2**30, (anon, weights)
    assert anon <= 0.25 * weights + 400e6, (anon, weights)
    written = sum(os.path.getsize(p) for p in (dst, dst + ".data") if os.path.exists(p))
    assert written <= 1.01 * weights + 4e6, (written, weights)  # each weight written once
    if to == "onnx":
        for b in (1, 2):
            np.testing.assert_allclose(_run_onnx(dst, torch.from_numpy(ids[:b])), ref[:b], rtol=1e-4, atol=1e-4)
    else:
        from ai_edge_litert.interpreter import Interpreter

        it = Interpreter(model_path=dst)
        d = it.get_input_details()[0]
        for b in (1, 2):
            it.resize_tensor_input(d["index"], [b, ids.shape[1]])
            it.allocate_tensors()
            it.set_tensor(d["index"], ids[:b].astype(d["dtype"]))
            it.invoke()
            got = it.get_tensor(it.get_output_details()[0]["index"])
            np.testing.assert_allclose(got, ref[:b], rtol=1e-4, atol=1e-4)
