"""Attention and batched products on the pte target (``ops_attention.py``, ``ops_matmul.py``):
scaled_dot_product_attention with a float mask, a bool mask (a row hidden whole gives 0, as torch's
safe softmax), is_causal (square and not), grouped-query heads, a scale, a dynamic batch; matmul of
4-D by 4-D, broadcasting batch dims, and by a 2-D matrix; each exported at test time, converted
where ``import torch`` fails and run in ExecuTorch's runtime against eager."""

from __future__ import annotations

import pytest

pytest.importorskip("executorch", reason="executorch is not installed (pip install executorch==1.5.1): "
                                         "the .pte files are checked by running them in its runtime")

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from pte_parity import check, check_refused  # noqa: E402


def _qkv(b=2, heads=4, kv_heads=4, rows=5, cols=5, seed=0):
    g = torch.Generator().manual_seed(seed + b)
    return (torch.randn(b, heads, rows, 8, generator=g), torch.randn(b, kv_heads, cols, 8, generator=g),
            torch.randn(b, kv_heads, cols, 6, generator=g))


def test_masks_and_causal_with_a_dynamic_batch(tmp_path):
    def f(q, k, v, bias, keep):
        return (F.scaled_dot_product_attention(q, k, v, attn_mask=bias),
                F.scaled_dot_product_attention(q, k, v, attn_mask=keep),
                F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=0.4))

    def args(b):
        g = torch.Generator().manual_seed(10 + b)
        keep = torch.rand(b, 1, 5, 5, generator=g) > 0.4
        keep[0, 0, 1] = False  # a row hidden whole: 0, as torch
        return (*_qkv(b), torch.randn(b, 1, 5, 5, generator=g), keep)

    check(f, *args(2), tmp_path=tmp_path, dynamic=True, runs=[args(1), args(3)])


def test_causal_of_fewer_queries_than_keys_and_grouped_heads(tmp_path):
    def f(q, k, v):
        return (F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True),
                F.scaled_dot_product_attention(q, k, v, enable_gqa=True))

    check(f, *_qkv(heads=4, kv_heads=2, rows=3, cols=6), tmp_path=tmp_path)


def test_batched_matmul_shapes(tmp_path):
    def f(x, y, w):
        return x @ y, x @ y[:1], x[0] @ y, x @ w, torch.matmul(x[:, 0], w), x.transpose(-1, -2) @ x

    g = torch.Generator().manual_seed(0)
    x, y, w = torch.randn(2, 3, 4, 5, generator=g), torch.randn(2, 3, 5, 6, generator=g), torch.randn(5, 2, generator=g)
    check(f, x, y, w, tmp_path=tmp_path)


def test_batched_matmul_with_a_dynamic_batch(tmp_path):
    def args(b):
        g = torch.Generator().manual_seed(b)
        return torch.randn(b, 3, 4, 5, generator=g), torch.randn(b, 3, 5, 2, generator=g)

    check(lambda x, y: (x @ y, x @ y[0, 0]), *args(2), tmp_path=tmp_path, dynamic=True, runs=[args(1), args(4)])


def test_attention_with_dropout_and_matmul_of_a_vector_are_refused(tmp_path):
    q, k, v = _qkv()
    check_refused(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, dropout_p=0.5), q, k, v,
                  tmp_path=tmp_path, match="dropout")
    check_refused(lambda x, y: x @ y, q, torch.randn(8), tmp_path=tmp_path, match="1-D operand")
