"""The rearranging lowerings of converters/onnx/ops_arrange.py (and ``unfold`` of ops_windows.py),
each pinned by a program torch exports at test time (with a dynamic first dim where the case
has one, then run at other sizes too), converted to ONNX (run in ONNX Runtime) and to TFLite
(run in LiteRT), compared with eager: static and run-time sizes, 0-d, empty, int and bool."""

from __future__ import annotations

import onnxruntime as ort
import pytest
import torch

from pt2x.converters import to_onnx, to_tflite
from pt2x.converters.errors import UnsupportedOpsError
from tolerances import TFLITE_SCALE, assert_close

pytest.importorskip("ai_edge_litert", reason="LiteRT runs the converted files")
import tflite_zoo  # noqa: E402  (imports ai_edge_litert lazily, after the skip)
from op_parity import Fn as _Fn, run_litert as _run_litert  # noqa: E402

AUTO = torch.export.Dim.AUTO


def check(fn, args, tmp_path, *, dynamic=(), others=(), tflite_refuses: str = ""):
    """``fn(*args)`` exported (dim 0 of the args at positions ``dynamic`` symbolic), converted to
    ONNX and TFLite, run on ``args`` and on each of ``others`` (argument tuples of other sizes),
    compared with eager (or, with ``tflite_refuses``, to_tflite refuses it with that message)."""
    shapes = tuple({0: AUTO} if i in dynamic else None for i in range(len(args)))
    ep = torch.export.export(_Fn(fn), tuple(args), dynamic_shapes=(shapes,) if dynamic else None)
    path = str(tmp_path / "case.pt2")
    torch.export.save(ep, path)
    sess = ort.InferenceSession(to_onnx(path).SerializeToString(), providers=["CPUExecutionProvider"])
    if tflite_refuses:
        with pytest.raises(UnsupportedOpsError, match=tflite_refuses):
            to_tflite(path)
    it = None if tflite_refuses else tflite_zoo.interpreter(to_tflite(path))
    for case in (tuple(args), *others):
        want = fn(*[a.clone() for a in case]).numpy()
        feeds = [a.numpy() for a in case]
        got = sess.run(None, dict(zip([i.name for i in sess.get_inputs()], feeds)))[0]
        assert got.dtype == want.dtype, f"onnx: dtype {got.dtype}, eager {want.dtype}"
        assert_close(got, want, want.dtype, what="onnx")
        if it is None:
            continue
        got = _run_litert(it, feeds)[0]
        assert got.dtype == want.dtype, f"tflite: dtype {got.dtype}, eager {want.dtype}"
        assert_close(got, want, want.dtype, what="tflite", scale=TFLITE_SCALE["float32"])


def _t(shape, dtype=torch.float32, seed=0):
    g = torch.Generator().manual_seed(seed)
    if dtype == torch.bool:
        return torch.rand(shape, generator=g) > 0.5
    if dtype == torch.int64:
        return torch.randint(-9, 9, shape, generator=g)
    return torch.randn(shape, generator=g)


DTYPES = [torch.float32, torch.int64, torch.bool]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("offset", [0, 2, -1])
def test_linalg_diagonal_of_a_dynamic_dim(dtype, offset, tmp_path):
    check(lambda x: torch.linalg.diagonal(x, offset=offset), [_t((5, 4), dtype)], tmp_path, dynamic=[0],
          others=[(_t((2, 4), dtype, 1),), (_t((7, 4), dtype, 2),)])


def test_linalg_diagonal_of_other_dims(tmp_path):
    check(lambda x: torch.linalg.diagonal(x, offset=-1, dim1=2, dim2=0), [_t((4, 3, 5))], tmp_path, dynamic=[0],
          others=[(_t((6, 3, 5), seed=1),)])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("offset, dim1, dim2", [(0, -2, -1), (2, -2, -1), (-1, 0, 2), (1, 2, 0)])
def test_diag_embed(dtype, offset, dim1, dim2, tmp_path):
    check(lambda x: torch.diag_embed(x, offset, dim1, dim2), [_t((3, 4), dtype)], tmp_path, dynamic=[0],
          others=[(_t((5, 4), dtype, 1),)])


def test_diag_embed_of_a_dynamic_last_dim(tmp_path):
    check(lambda x: torch.diag_embed(x, -2), [_t((4,))], tmp_path, dynamic=[0], others=[(_t((7,), seed=1),)])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape, offset", [((), 0), ((), 1), ((2, 3), -2), ((0,), 1)])
def test_diagflat(dtype, shape, offset, tmp_path):
    check(lambda x: torch.diagflat(x, offset), [_t(shape, dtype)], tmp_path)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("k, dims", [(1, [0, 1]), (2, [0, 1]), (-5, [0, 1]), (3, [2, 0]), (4, [1, 2])])
def test_rot90(dtype, k, dims, tmp_path):
    check(lambda x: torch.rot90(x, k, dims), [_t((4, 3, 2), dtype)], tmp_path, dynamic=[0],
          others=[(_t((6, 3, 2), dtype, 1),)])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", [torch.fft.fftshift, torch.fft.ifftshift])
def test_fftshift_of_dynamic_and_static_dims(dtype, op, tmp_path):
    check(lambda x: op(x), [_t((5, 4), dtype)], tmp_path, dynamic=[0],
          others=[(_t((6, 4), dtype, 1),), (_t((1, 4), dtype, 2),)])


def test_fftshift_of_one_dim_and_of_a_dim_named_twice(tmp_path):
    check(lambda x: torch.fft.ifftshift(x, dim=(-1,)), [_t((3, 7))], tmp_path)
    check(lambda x: torch.fft.fftshift(x, dim=(0, -2)), [_t((5, 2))], tmp_path, dynamic=[0],
          others=[(_t((7, 2), seed=1),)])


def test_diagflat_of_a_dynamic_count(tmp_path):
    check(lambda x: torch.diagflat(x, -1), [_t((3, 2))], tmp_path, dynamic=[0], others=[(_t((5, 2), seed=1),)])


def test_put_without_accumulate(tmp_path):
    # TFLite's SCATTER_ND sums what it scatters: only "add" is exact there
    check(lambda x, i, s: torch.put(x, i, s), [_t((2, 3)), torch.tensor([1, -1]), _t((2,), seed=1)], tmp_path,
          tflite_refuses="ScatterND with reduction='none'")


@pytest.mark.parametrize("dtype", DTYPES)
def test_channel_shuffle(dtype, tmp_path):
    check(lambda x: torch.nn.functional.channel_shuffle(x, 3), [_t((2, 6, 2, 2), dtype)], tmp_path, dynamic=[0],
          others=[(_t((3, 6, 2, 2), dtype, 1),)])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape, r", [((2, 2, 4, 6), 2), ((3, 1, 6, 3), 3), ((1, 0, 2, 2), 1)])
def test_pixel_unshuffle(dtype, shape, r, tmp_path):
    check(lambda x: torch.nn.functional.pixel_unshuffle(x, r), [_t(shape, dtype)], tmp_path,
          dynamic=[0] if shape[0] > 1 else [])


@pytest.mark.parametrize("dtype", DTYPES)
def test_block_diag_of_dynamic_blocks(dtype, tmp_path):
    check(lambda a, b, c: torch.block_diag(a, b, c), [_t((2, 3), dtype), _t((3,), dtype, 1), _t((), dtype, 2)],
          tmp_path, dynamic=[0, 1], others=[(_t((4, 3), dtype), _t((1,), dtype, 1), _t((), dtype, 2))])


def test_block_diag_with_empty_blocks(tmp_path):
    check(lambda a, b, c: torch.block_diag(a, b, c), [_t((2, 0)), _t((0,)), _t((3, 2))], tmp_path)


@pytest.mark.parametrize("dtype", DTYPES)
def test_cartesian_prod(dtype, tmp_path):
    check(lambda a, b, c: torch.cartesian_prod(a, b, c), [_t((2,), dtype), _t((3,), dtype, 1), _t((2,), dtype, 2)],
          tmp_path, dynamic=[0, 1], others=[(_t((4,), dtype), _t((1,), dtype, 1), _t((2,), dtype, 2))])
    check(lambda a: torch.cartesian_prod(a), [_t((3,), dtype)], tmp_path)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("dim, chunks, shapes", [(-1, 5, [(1, 2, 3), (1, 2, 7)]), (1, 2, [(3, 3, 2), (3, 4, 1)]),
                                                 (0, 3, [(4, 2), (3, 1)])])
def test_chunk_cat(dtype, dim, chunks, shapes, tmp_path):
    check(lambda a, b: torch._chunk_cat([a, b], dim, chunks), [_t(shapes[0], dtype), _t(shapes[1], dtype, 1)], tmp_path)


def test_chunk_cat_of_a_dynamic_leading_dim(tmp_path):
    check(lambda a, b: torch._chunk_cat([a, b], 1, 2), [_t((3, 3)), _t((3, 5), seed=1)], tmp_path, dynamic=[0, 1],
          others=[(_t((5, 3)), _t((5, 5), seed=1))])


@pytest.mark.parametrize("dtype", DTYPES)
def test_kron(dtype, tmp_path):
    check(torch.kron, [_t((3, 2), dtype), _t((2, 3), dtype, 1)], tmp_path)  # (torch specialises kron's sizes)


def test_kron_of_other_ranks_and_dtypes(tmp_path):
    check(torch.kron, [_t((2,), torch.int64), _t((2, 3), seed=1)], tmp_path)
    check(torch.kron, [_t(()), _t((), seed=1)], tmp_path)


@pytest.mark.parametrize("dtype", DTYPES)
def test_take(dtype, tmp_path):
    idx = torch.tensor([[0, -1], [5, -12]])
    check(torch.take, [_t((4, 3), dtype), idx], tmp_path)
    check(torch.take, [_t((), dtype), torch.tensor(-1)], tmp_path)


@pytest.mark.parametrize("dtype", DTYPES)
def test_put_accumulate(dtype, tmp_path):
    idx = torch.tensor([0, -1, 0, 4])
    check(lambda x, i, s: torch.put(x, i, s, accumulate=True), [_t((2, 3), dtype), idx, _t((4,), dtype, 1)], tmp_path)
    check(lambda x, i, s: torch.put(x, i, s, accumulate=True),
          [_t((), dtype), torch.tensor(0), _t((), dtype, 1)], tmp_path)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("r, repl", [(1, False), (1, True), (0, False)])
def test_combinations(dtype, r, repl, tmp_path):
    # (r >= 2: torch.export fails on the data-dependent sizes of torch's own lowering; torch
    # specialises the length, so no other sizes)
    check(lambda x: torch.combinations(x, r, repl), [_t((4,), dtype)], tmp_path, dynamic=[0] if r else [])


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64])
@pytest.mark.parametrize("shape, n", [((), 2), ((3,), None), ((2, 3), 4)])
def test_linalg_vander(dtype, shape, n, tmp_path):
    x = torch.randint(-3, 4, shape).to(dtype)
    check(lambda v: torch.linalg.vander(v, N=n), [x], tmp_path)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", [torch.Tensor.unfold, torch.unfold_copy])
def test_unfold_of_a_dynamic_dim_and_a_0d_tensor(dtype, op, tmp_path):
    check(lambda x: op(x, 0, 3, 2), [_t((6, 2), dtype)], tmp_path, dynamic=[0],
          others=[(_t((9, 2), dtype, 1),), (_t((4, 2), dtype, 2),)])
    check(lambda x: op(x, 0, 1, 1), [_t((), dtype)], tmp_path)


# ------------------------------------------ diag, diagonal, diagonal_scatter of any size


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape, k", [((5,), 0), ((5,), -2), ((5, 5), 0), ((6, 4), 2), ((4, 6), -1)])
def test_diag_of_a_dynamic_size(dtype, shape, k, tmp_path):
    others = [(_t((shape[0] + 2, *shape[1:]), dtype, 1),)]
    check(lambda x: torch.diag(x, k), [_t(shape, dtype)], tmp_path, dynamic=[0], others=others)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", [torch.diagonal, torch.diagonal_copy])
@pytest.mark.parametrize("offset, d1, d2", [(0, 0, 1), (2, 0, 1), (-1, 1, 0), (1, 2, 0)])
def test_diagonal_of_a_dynamic_dim(dtype, op, offset, d1, d2, tmp_path):
    check(lambda x: op(x, offset, d1, d2), [_t((5, 4, 3), dtype)], tmp_path, dynamic=[0],
          others=[(_t((2, 4, 3), dtype, 1),), (_t((8, 4, 3), dtype, 2),)])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("offset", [0, 2, -3])
def test_diagonal_scatter_of_a_dynamic_dim(dtype, offset, tmp_path):
    def fn(x, s):
        return torch.diagonal_scatter(x, s, offset)

    n = lambda rows: len(torch.zeros(rows, 5).diagonal(offset))  # noqa: E731
    others = [(_t((9, 5), dtype), _t((n(9),), dtype, 1))] if offset >= 0 else []  # (the same length)
    check(fn, [_t((6, 5), dtype), _t((n(6),), dtype, 1)], tmp_path, dynamic=[0], others=others)


@pytest.mark.parametrize("dtype", DTYPES)
def test_diagonal_scatter_of_other_dims(dtype, tmp_path):
    # (offset -1 from dim 2 (5) into dim 0: 4 elements whether dim 0 is 4 or 7)
    check(lambda x, s: torch.diagonal_scatter(x, s, -1, 2, 0), [_t((4, 3, 5), dtype), _t((3, 4), dtype, 1)],
          tmp_path, dynamic=[0], others=[(_t((7, 3, 5), dtype), _t((3, 4), dtype, 1))])
