"""What the OpInfo conformance run's pte column found (scripts/conformance_opinfo.py --targets pte),
each a small program torch exports at test time, converted where ``import torch`` fails, run in
ExecuTorch's runtime at the sizes given and compared with torch eager."""

from __future__ import annotations

import pytest

pytest.importorskip("executorch", reason="executorch is not installed (pip install executorch==1.5.1): "
                                         "the .pte files are checked by running them in its runtime")

import torch  # noqa: E402
from torch.export import Dim  # noqa: E402

import pte_zoo  # noqa: E402
from pte_child import run_in_child  # noqa: E402
from tolerances import assert_close  # noqa: E402


class Fn(torch.nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, *xs):
        return self.fn(*xs)


def _check(tmp_path, fn, input_sets: list[tuple], dynamic=None, max_dims=None) -> None:
    """``fn`` exported at the first input set, converted torch-free, run at every set."""
    path = str(tmp_path / "case.pt2")
    ep = torch.export.export(Fn(fn), input_sets[0], dynamic_shapes=dynamic)
    torch.export.save(ep, path)
    bounds = {str(s): max_dims for s in ep.range_constraints} if max_dims else None
    data = pte_zoo.convert_torch_free("to_pte", path, max_dims=bounds)
    for inputs in input_sets:
        (got,) = pte_zoo.run(data, inputs)
        want = fn(*inputs)
        assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, got.shape, want.dtype, want.shape)
        assert_close(got.numpy(), want.numpy(), str(want.dtype).replace("torch.", ""),
                     what=f"{[tuple(x.shape) for x in inputs]}")


def _randn(*shapes):
    return tuple(torch.randn(*s) for s in shapes)


# nn.functional.linear[float32#1]: the weight an input whose out-features dim torch left dynamic; the
# transposed weight was planned static at the bound, and the runtime refused to resize it (error 0x12)
@pytest.mark.parametrize("shapes, dynamic", [
    ([(2, 3), (4, 3), (4,)], ({0: Dim.AUTO}, {0: Dim.AUTO}, {0: Dim.AUTO})),  # all dynamic, 2-D
    ([(0, 3), (4, 3), (4,)], (None, {0: Dim.AUTO}, {0: Dim.AUTO})),  # OpInfo's sample: no rows
    ([(2, 2, 3), (4, 3), (4,)], (None, {0: Dim.AUTO}, {0: Dim.AUTO})),  # 3-D static input, dynamic weight
    ([(2, 2, 3), (4, 3)], ({0: Dim.AUTO}, {0: Dim.AUTO})),  # both dynamic, no bias
    ([(2, 2, 3), (4, 3)], ({2: Dim.AUTO}, {1: Dim.AUTO})),  # the reduced dim dynamic
], ids=["2d", "no_rows", "3d_static_input", "3d_no_bias", "3d_dynamic_k"])
def test_linear_of_a_weight_of_dynamic_shape(tmp_path, shapes, dynamic):
    torch.manual_seed(0)
    first = _randn(*shapes)
    grown = tuple(torch.randn(*[s * 2 if d and i in d else s for i, s in enumerate(x.shape)])
                  for x, d in zip(first, dynamic))
    _check(tmp_path, torch.nn.functional.linear, [first, grown], dynamic=(dynamic,), max_dims=8)


# sum[float32#1], sum[int64#1]: a 0-d input summed over its dim (0 or -1): 1.5.1's sum.IntList_out read
# that dim's size and aborted the runtime (SIGABRT), so these run in a child process
SUMS_OF_0D = {f"{dtype}-dim{dim}-keepdim{keepdim}": (dtype, dim, keepdim)
              for dtype in ("float32", "int64") for dim, keepdim in ((0, False), (-1, True), ((0,), False))}


def _run_in_one_child(cases: dict, tmp_path_factory) -> dict:
    """``cases``: name -> (fn, 0-d input). Each case's (eager output, the runtime's outputs or why
    none), the programs converted torch-free and run in one child process."""
    converted, wants = [], []
    for name, (fn, x) in cases.items():
        path = str(tmp_path_factory.mktemp("zero_d") / f"{name}.pt2")
        torch.export.save(torch.export.export(Fn(fn), (x,)), path)
        converted.append((pte_zoo.convert_torch_free("to_pte", path), [x]))
        wants.append(fn(x))
    return dict(zip(cases, zip(wants, run_in_child(converted))))


def _assert_equal(want, got) -> None:
    assert not isinstance(got, str), got
    (out,) = got
    assert out.dtype == want.dtype and out.shape == want.shape, (out.dtype, out.shape, want.dtype, want.shape)
    assert torch.equal(out, want), (out, want)


@pytest.fixture(scope="module")
def sums_of_0d(tmp_path_factory):
    cases = {name: (lambda t, dim=dim, keepdim=keepdim: torch.sum(t, dim, keepdim=keepdim),
                    torch.tensor(2.5).to(getattr(torch, dtype)))
             for name, (dtype, dim, keepdim) in SUMS_OF_0D.items()}
    return _run_in_one_child(cases, tmp_path_factory)


@pytest.mark.parametrize("name", sorted(SUMS_OF_0D))
def test_sum_of_a_0d_tensor_over_its_dim(sums_of_0d, name):
    _assert_equal(*sums_of_0d[name])


# after the model-zoo lowerings: cumsum[float32#2]/[int64#2] (a 0-d input: 1.5.1's cumsum.out refuses its
# dim 0, error 0x12) and norm[float32#19] (linalg_vector_norm of a 0-d input: its sum aborted the
# runtime, SIGABRT), run in one child process; conv2d of an unbatched (C, H, W) input is refused
ZERO_D = {
    "cumsum-float32": (lambda t: torch.cumsum(t, 0), torch.tensor(1.5)),
    "cumsum-int64": (lambda t: torch.cumsum(t, 0), torch.tensor(3)),
    "norm-2": (lambda t: torch.linalg.vector_norm(t), torch.tensor(-1.5)),
    "norm-1-dim0": (lambda t: torch.linalg.vector_norm(t, 1, dim=0), torch.tensor(-2.5)),
}


@pytest.fixture(scope="module")
def zero_d(tmp_path_factory):
    return _run_in_one_child(ZERO_D, tmp_path_factory)


@pytest.mark.parametrize("name", sorted(ZERO_D))
def test_scans_and_norms_of_a_0d_tensor(zero_d, name):
    _assert_equal(*zero_d[name])


def test_unbatched_conv2d_is_refused(tmp_path):
    from pt2x.converters.errors import UnsupportedOpsError

    path = str(tmp_path / "conv.pt2")
    args = (torch.randn(3, 4, 4), torch.randn(3, 3, 3, 3))
    torch.export.save(torch.export.export(Fn(lambda x, w: torch.nn.functional.conv2d(x, w)), args), path)
    with pytest.raises(UnsupportedOpsError, match=r"an unbatched convolution input \(rank 3, weight rank 4\)"):
        pte_zoo.convert_torch_free("to_pte", path)
