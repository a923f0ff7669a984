"""The buffers-after layout (``writer.write_file``, ``write(buffers_after=True)``): the constants
after the flatbuffer, addressed by ``Buffer.offset``/``size``, as LiteRT reads files past 2 GiB.

Programs exported by torch at test time, converted in-process, written both ways and run in
ai-edge-litert (``model_path=`` and ``model_content=``) against torch eager; the file's layout
read back with pt2x's schema module. No test writes a file near 2 GiB: the size that picks the
layout is checked on ``buffers_after_needed`` with a small limit."""

from __future__ import annotations

import os

import numpy as np
import pytest
import torch

import tflite_zoo
from pt2x.converters import to_tflite
from pt2x.converters.tflite import schema_generated as fb
from pt2x.converters.tflite import writer
from pt2x.converters.tflite.converter import convert_prepared
from pt2x.converters.tflite.prepare import load_onnx, prepare
from pt2x.converters.tflite.quant.qdq_pass import describe_tflite
from tolerances import TFLITE_SCALE, assert_close


class Tied(torch.nn.Module):
    """An embedding and an LM head sharing one matrix (as GPT-2's)."""

    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(50, 16)
        self.mid = torch.nn.Linear(16, 16)
        self.head = torch.nn.Linear(16, 50, bias=False)
        self.head.weight = self.emb.weight

    def forward(self, ids):
        return self.head(torch.tanh(self.mid(self.emb(ids))))


class Mlp(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(12, 24)
        self.b = torch.nn.Linear(24, 7)

    def forward(self, x):
        return self.b(torch.relu(self.a(x)))


def _saved(module, args, tmp_path) -> str:
    torch.manual_seed(0)
    m = module().eval()
    path = str(tmp_path / "m.pt2")
    torch.export.save(torch.export.export(m, args), path)
    return path


def _program(path: str):
    return convert_prepared(prepare(load_onnx(path, "model")))


def _eager(module, args) -> np.ndarray:
    torch.manual_seed(0)
    with torch.no_grad():
        return module().eval()(*args).numpy()


def _run(feeds, **source) -> list[np.ndarray]:
    from ai_edge_litert.interpreter import Interpreter

    return tflite_zoo.run(Interpreter(num_threads=1, **source), feeds)


def _close(got: np.ndarray, want: np.ndarray, what: str) -> None:
    assert_close(got, want, "float32", what=what, scale=TFLITE_SCALE["float32"])


def _tensor_bytes(data: bytes) -> dict[str, bytes]:
    """Each constant tensor's bytes by name, wherever its buffer keeps them."""
    m = fb.Model.GetRootAs(data, 0)
    g = m.Subgraphs(0)
    out = {}
    for i in range(g.TensorsLength()):
        t = g.Tensors(i)
        buf = m.Buffers(t.Buffer())
        if buf.Offset() > 1:
            out[t.Name().decode()] = data[buf.Offset():buf.Offset() + buf.Size()]
        elif not buf.DataIsNone():
            out[t.Name().decode()] = buf.DataAsNumpy().tobytes()
    return out


def _after_buffers(data: bytes) -> list[tuple[int, int]]:
    m = fb.Model.GetRootAs(data, 0)
    return [(m.Buffers(i).Offset(), m.Buffers(i).Size()) for i in range(m.BuffersLength()) if m.Buffers(i).Offset()]


def test_a_program_written_after_runs_as_the_inline_file_and_as_eager(tmp_path):
    x = torch.randn(3, 12)
    p = _program(_saved(Mlp, (x,), tmp_path))
    inline = writer.write(p)
    dst = tmp_path / "after.tflite"
    flat = writer.write_file(p, dst, buffers_after=True)
    data = dst.read_bytes()
    assert data == writer.write(p, buffers_after=True) and data != inline
    want = _eager(Mlp, (x,))
    got_inline = _run([x.numpy()], model_content=inline)
    for got in (_run([x.numpy()], model_path=str(dst)), _run([x.numpy()], model_content=data)):
        np.testing.assert_array_equal(got[0], got_inline[0])
        _close(got[0], want, "buffers after")
    # the file: the flatbuffer (returned), zeros to the next boundary, then the constants, packed
    assert data[:len(flat)] == flat and data[4:8] == b"TFL3"
    spans = sorted(_after_buffers(data))
    assert spans and all(o % writer.AFTER_ALIGNMENT == 0 for o, _ in spans)
    assert spans[0][0] == -(-len(flat) // writer.AFTER_ALIGNMENT) * writer.AFTER_ALIGNMENT
    assert not data[len(flat):spans[0][0]].strip(b"\0")
    for (o, n), (o2, _) in zip(spans, spans[1:]):
        assert o2 == -(-(o + n) // writer.AFTER_ALIGNMENT) * writer.AFTER_ALIGNMENT
    assert len(data) == spans[-1][0] + spans[-1][1]
    assert _tensor_bytes(data) == _tensor_bytes(inline)


def test_the_metadata_stays_inside_and_marks_the_layout(tmp_path):
    p = _program(_saved(Mlp, (torch.randn(2, 12),), tmp_path))
    flat = writer.write_file(p, tmp_path / "a.tflite", buffers_after=True)
    m = fb.Model.GetRootAs(flat, 0)
    meta = {m.Metadata(i).Name().decode(): m.Buffers(m.Metadata(i).Buffer()) for i in range(m.MetadataLength())}
    assert meta["buffer_location"].DataAsNumpy().tobytes() == b"outside flatbuffers"
    assert meta["pt2x"].Offset() == 0 and meta["pt2x"].DataAsNumpy().tobytes() == p.metadata["pt2x"]
    assert describe_tflite(flat) == []  # the flatbuffer alone answers what reads the metadata
    assert "buffer_location" not in _metadata_names(writer.write(p))


def _metadata_names(data: bytes) -> set[str]:
    m = fb.Model.GetRootAs(data, 0)
    return {m.Metadata(i).Name().decode() for i in range(m.MetadataLength())}


def test_tied_weights_share_one_buffer_after_the_flatbuffer(tmp_path):
    ids = torch.tensor([[1, 7, 49, 0]])
    p = _program(_saved(Tied, (ids,), tmp_path))
    dst = tmp_path / "tied.tflite"
    writer.write_file(p, dst, buffers_after=True)
    data = dst.read_bytes()
    m = fb.Model.GetRootAs(data, 0)
    g = m.Subgraphs(0)
    matrix = 50 * 16 * 4
    readers = [g.Tensors(i).Buffer() for i in range(g.TensorsLength()) if m.Buffers(g.Tensors(i).Buffer()).Size() == matrix]
    assert len(readers) == 2 and len(set(readers)) == 1  # GATHER's table and FULLY_CONNECTED's weights
    inline = writer.write(p)
    assert _tensor_bytes(data) == _tensor_bytes(inline)
    spans = sorted(_after_buffers(data))
    assert len(data) == spans[-1][0] + spans[-1][1]  # the second copy was taken back
    got = _run([ids.numpy()], model_path=str(dst))[0]
    np.testing.assert_array_equal(got, _run([ids.numpy()], model_content=inline)[0])
    _close(got, _eager(Tied, (ids,)), "tied weights")


def test_a_transposed_view_of_a_memory_mapped_file_is_written_in_c_order(tmp_path):
    x = torch.randn(2, 12)
    p = _program(_saved(Mlp, (x,), tmp_path))
    inline = writer.write(p)
    g = p.subgraphs[0]
    t = max((t for t in g.tensors if t.data is not None and t.data.ndim == 2), key=lambda t: t.data.size)
    np.save(tmp_path / "w.npy", np.ascontiguousarray(t.data.T))  # stored transposed, as an archive may
    t.data = np.load(tmp_path / "w.npy", mmap_mode="r").T  # the same values, a non-contiguous view
    assert not t.data.flags.c_contiguous and isinstance(t.data.base, np.memmap)
    assert writer.write(p) == inline
    dst = tmp_path / "view.tflite"
    writer.write_file(p, dst, buffers_after=True)
    data = dst.read_bytes()
    assert _tensor_bytes(data) == _tensor_bytes(inline)
    np.testing.assert_array_equal(_run([x.numpy()], model_path=str(dst))[0], _run([x.numpy()], model_content=inline)[0])


@pytest.mark.parametrize("shape, order, limit", [((7, 5, 3), "C", 40), ((7, 5, 3), "F", 40), ((2, 4), "F", 1),
                                                 ((3, 1, 9), "C", 10), ((), "C", 1), ((0, 4), "C", 1)])
def test_slices_of_a_constant_are_its_bytes_in_c_order(shape, order, limit):
    a = np.asarray(np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape), order=order)
    parts = list(writer._slices(a, limit))
    assert b"".join(np.ascontiguousarray(q).tobytes() for q in parts) == a.tobytes()
    row = a.itemsize * (a.shape[-1] if a.ndim else 1)
    assert all(q.nbytes <= max(limit, row) for q in parts)


def test_the_layout_is_picked_by_the_constants_size(tmp_path):
    p = _program(_saved(Mlp, (torch.randn(2, 12),), tmp_path))
    size = writer.constant_bytes(p)
    assert size == sum(t.data.nbytes for t in p.subgraphs[0].tensors if t.data is not None)
    assert writer.buffers_after_needed(p, limit=size - 1)
    assert not writer.buffers_after_needed(p, limit=size)
    assert not writer.buffers_after_needed(p)  # the default limit: just under 2 GiB
    assert writer.write(p) == writer.write(p, buffers_after=False)


def test_to_tflite_writes_the_file_it_returns(tmp_path):
    x = torch.randn(2, 12)
    src = _saved(Mlp, (x,), tmp_path)
    dst = tmp_path / "out.tflite"
    data = to_tflite(src, dst)
    assert dst.read_bytes() == data == to_tflite(src)
    assert not [f for f in os.listdir(tmp_path) if f.startswith(".pt2x-")]  # no temporary left


def test_inline_file_when_the_builder_outgrows_its_room(tmp_path, monkeypatch):
    """The inline layout is built in a room sized by estimate (``_inline_size``); when the builder
    outgrows it (PT2E's per-channel scales once did: a MobileNetV2's file was corrupt), it builds
    again in a larger room: the file is ``write``'s, byte for byte, and loads in LiteRT."""
    from ai_edge_litert.interpreter import Interpreter

    p = _program(_saved(Mlp, (torch.randn(3, 12),), tmp_path))
    want = bytes(writer.write(p, buffers_after=False))
    monkeypatch.setattr(writer, "_inline_size", lambda prog: writer.constant_bytes(prog) + 64)  # far too small
    dst = tmp_path / "m.tflite"
    writer.write_file(p, dst, buffers_after=False)
    assert dst.read_bytes() == want
    Interpreter(model_path=str(dst)).allocate_tensors()
