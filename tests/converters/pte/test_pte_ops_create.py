"""New tensors on the pte target (``ops_create.py``): full/zeros/ones and their ``_like``/``new_``
forms in float32, int64 and bool, scalar_tensor (-inf), arange (integer, float steps, a symbolic
end), and shapes that follow a dynamic batch; each exported at test time, converted where ``import
torch`` fails and run in ExecuTorch's runtime against eager (dtype, shape and values)."""

from __future__ import annotations

import pytest

pytest.importorskip("executorch", reason="executorch is not installed (pip install executorch==1.5.1): "
                                         "the .pte files are checked by running them in its runtime")

import torch  # noqa: E402

from pte_parity import check, check_refused  # noqa: E402


def _x(b=2):
    return torch.randn(b, 3, generator=torch.Generator().manual_seed(b))


def test_full_zeros_ones_of_each_dtype(tmp_path):
    def f(x):
        return (torch.full((2, 3), 1.5) + x, torch.zeros(4, dtype=torch.int64), torch.ones(2, 2, dtype=torch.bool),
                torch.full((3,), 7, dtype=torch.int64), torch.full((), True))

    check(f, _x(), tmp_path=tmp_path)


def test_like_and_new_forms_follow_a_dynamic_batch(tmp_path):
    def f(x):
        return (torch.full_like(x, -2.0) * x, torch.zeros_like(x, dtype=torch.int64), torch.ones_like(x) + x,
                x.new_zeros((x.shape[0], 2)), x.new_ones((4,), dtype=torch.bool), x.new_full((x.shape[0],), 3.0))

    check(f, _x(2), tmp_path=tmp_path, dynamic=True, runs=[(_x(1),), (_x(5),)])


def test_scalar_tensor(tmp_path):
    check(lambda x: (torch.ops.aten.scalar_tensor.default(float("-inf")) + x,
                     torch.ops.aten.scalar_tensor.default(3, dtype=torch.int64)), _x(), tmp_path=tmp_path)


def test_arange_integer_and_float(tmp_path):
    def f(x):
        return (torch.arange(6), torch.arange(2, 11, 3), torch.arange(0.0, 1.0, 0.1) * x[0, 0],
                torch.arange(-1.5, 2.0, 0.5, dtype=torch.float32), torch.arange(5, 0, -2))

    check(f, _x(), tmp_path=tmp_path)


def test_arange_to_a_symbolic_end(tmp_path):
    """``arange(x.shape[0])``: a dynamic output sized by the batch at run time."""
    check(lambda x: (torch.arange(x.shape[0]), torch.arange(x.shape[0]) * 2.0 + x[:, 0]), _x(3), tmp_path=tmp_path,
          dynamic=True, runs=[(_x(1),), (_x(6),)])


def test_a_new_tensor_on_another_device_is_refused(tmp_path):
    check_refused(lambda x: x + torch.zeros(3, device="meta").to("cpu"), _x(), tmp_path=tmp_path, match="device")
