"""The single-op writes a static KV cache makes into a buffer (transformers' ``StaticCache``:
``index_copy_`` along the sequence, ``k[:, :, pos] = v``, and the accumulating ``index_put_``,
``index_add_``), as exported (in-place ops on the buffer) and decomposed (functional ops with a
buffer mutation): ONNX Runtime and LiteRT match eager on the result and on the written buffer."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import onnx_zoo
import tflite_zoo
from pt2x.converters import to_onnx, to_tflite


class CacheWrite(torch.nn.Module):
    def __init__(self, mode):
        super().__init__()
        self.mode = mode
        self.register_buffer("k", torch.zeros(1, 2, 6, 4))

    def forward(self, v, pos):
        if self.mode == "index_copy_":
            self.k.index_copy_(2, pos, v)
        elif self.mode == "setitem":
            self.k[:, :, pos] = v
        elif self.mode == "index_put_accumulate":
            self.k.index_put_((torch.zeros_like(pos), torch.zeros_like(pos), pos), v[0, 0], accumulate=True)
        else:
            self.k.index_add_(2, pos, v)
        return self.k * 2.0


@pytest.mark.parametrize("target", ["onnx", "tflite"])
@pytest.mark.parametrize("decomposed", [False, True], ids=["exported", "decomposed"])
@pytest.mark.parametrize("mode", ["index_copy_", "setitem", "index_put_accumulate", "index_add_"])
def test_cache_write_matches_eager(tmp_path, mode, decomposed, target):
    v, pos = torch.randn(1, 2, 1, 4), torch.tensor([3])
    ep = torch.export.export(CacheWrite(mode), (v, pos))
    if decomposed:
        ep = ep.run_decompositions()
    path = str(tmp_path / f"{mode}.pt2")
    torch.export.save(ep, path)
    eager = CacheWrite(mode)
    want = eager(v, pos).numpy()
    if target == "onnx":
        m = to_onnx(path)
        names = [o.name for o in m.graph.output]
        got = onnx_zoo.run(onnx_zoo.ort_session(m.SerializeToString()), [v, pos])
    else:
        it = tflite_zoo.interpreter(to_tflite(path))
        names = [d["name"] for d in it.get_output_details()]
        got = tflite_zoo.run(it, [v.numpy(), pos.numpy()])
    assert len(got) == 2, names
    by_shape = sorted(got, key=lambda g: float(np.abs(g).sum()))  # the buffer, then twice it
    np.testing.assert_allclose(by_shape[0], eager.k.numpy(), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(by_shape[1], want, rtol=1e-6, atol=1e-6)
