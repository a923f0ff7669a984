"""The shape family's aliases and lowerings (the ``*_copy`` views, ``unsafe_split``/``unsafe_chunk``,
``fliplr``/``flipud``/``ravel``/``movedim``, ``atleast_Nd``, the ``stack``s, ``matrix_H``, ``real``/
``conj_physical``/``isreal``, ``zero_``, ``resize_``, ``sum_to_size``, ``broadcast_tensors``,
``h/v/dsplit``, ``tensor_split``, ``take_along_dim``, ``chunk`` of a dynamic dim), each a program torch
exports at test time, converted to ONNX (run in ONNX Runtime) and to TFLite (run in LiteRT), compared
with eager; 0-d, empty, integer and boolean inputs where the op takes them."""

from __future__ import annotations

import pytest
import torch

from pt2x.converters import to_onnx
from pt2x.converters.errors import UnsupportedOpsError

pytest.importorskip("ai_edge_litert", reason="LiteRT runs the converted files")
from op_parity import check_both, saved as _saved  # noqa: E402


def _x(*shape, dtype=torch.float32):
    g = torch.Generator().manual_seed(sum(shape) + len(shape))
    if dtype == torch.bool:
        return torch.rand(shape, generator=g) > 0.5
    return (torch.randn(shape, generator=g) * 10).to(dtype)


DTYPES = [torch.float32, torch.int64, torch.bool]

CASES = {
    # renamed *_copy views and unsafe splits
    "view_copy": (lambda x: torch.view_copy(x, [5, -1]), [(5, 4)]),
    "t_copy": (torch.t_copy, [(2, 3)]),
    "t_copy_0d": (torch.t_copy, [()]),
    "transpose_copy": (lambda x: torch.transpose_copy(x, -1, -2), [(1, 2, 3)]),
    "transpose_0d": (lambda x: torch.transpose(x, 0, 0), [()]),
    "unbind_copy": (lambda x: torch.unbind_copy(x, 1), [(3, 2)]),
    "unbind_copy_empty": (lambda x: torch.unbind_copy(x, 0), [(2, 0, 3)]),
    "squeeze_copy": (torch.squeeze_copy, [(5, 1, 4, 1)]),
    "squeeze_copy_dim": (lambda x: torch.squeeze_copy(x, 1), [(5, 1, 4)]),
    "narrow_copy": (lambda x: torch.narrow_copy(x, 1, 1, 2), [(3, 4)]),
    "unsafe_split": (lambda x: torch.unsafe_split(x, 2, 1), [(3, 5)]),
    "unsafe_chunk": (lambda x: torch.unsafe_chunk(x, 2, 1), [(3, 5)]),
    "matrix_H": (lambda x: x.H, [(3, 4)]),
    # rewrites
    "fliplr": (torch.fliplr, [(3, 4)]),
    "flipud": (torch.flipud, [(3, 4, 2)]),
    "ravel": (torch.ravel, [(2, 3, 4)]),
    "ravel_0d": (torch.ravel, [()]),
    "movedim": (lambda x: torch.movedim(x, [0, -1], [2, 0]), [(2, 3, 4, 5)]),
    "movedim_int": (lambda x: torch.movedim(x, 1, -1), [(2, 3, 4)]),
    "hsplit": (lambda x: torch.hsplit(x, [1, 3]), [(2, 5)]),
    "hsplit_1d": (lambda x: torch.hsplit(x, 2), [(6,)]),
    "vsplit": (lambda x: torch.vsplit(x, 3), [(6, 2)]),
    "dsplit": (lambda x: torch.dsplit(x, [1, 2, 3]), [(2, 2, 5)]),
    # lowerings
    "atleast_1d_0d": (torch.atleast_1d, [()]),
    "atleast_2d_1d": (torch.atleast_2d, [(4,)]),
    "atleast_3d_1d": (torch.atleast_3d, [(4,)]),
    "atleast_3d_2d": (torch.atleast_3d, [(2, 3)]),
    "atleast_3d_4d": (torch.atleast_3d, [(1, 2, 3, 4)]),
    "hstack_1d": (lambda a, b: torch.hstack([a, b]), [(3,), (2,)]),
    "hstack_2d": (lambda a, b: torch.hstack([a, b]), [(2, 3), (2, 1)]),
    "vstack": (lambda a, b: torch.vstack([a, b]), [(3,), (2, 3)]),
    "dstack": (lambda a, b: torch.dstack([a, b]), [(3,), (1, 3)]),
    "column_stack": (lambda a, b, c: torch.column_stack([a, b, c]), [(), (1,), (1, 2)]),
    "real": (torch.real, [(2, 0, 3)]),
    "conj_physical": (torch.conj_physical, [(3, 4)]),
    "isreal": (torch.isreal, [(3, 4)]),
    "isreal_empty": (torch.isreal, [(1, 0, 3)]),
    "zero_": (lambda x: x.clone().zero_(), [(3, 4)]),
    "zero__0d": (lambda x: x.clone().zero_(), [()]),
    "resize_same_numel": (lambda x: x.clone().resize_(6, 2), [(3, 4)]),
    "resize_fewer": (lambda x: x.clone().resize_(2, 5), [(3, 4)]),
    "resize_as_": (lambda x, y: x.clone().resize_as_(y), [(2, 3), (3, 2)]),
    "sum_to_size": (lambda x: x.sum_to_size(1, 4), [(2, 3, 4)]),
    "sum_to_size_0d": (lambda x: x.sum_to_size([]), [()]),
    "broadcast_tensors": (lambda a, b, c: torch.broadcast_tensors(a, b, c), [(3,), (1, 2, 1), (5, 1, 1)]),
    "tensor_split_sections": (lambda x: torch.tensor_split(x, 3, 1), [(2, 7)]),
    "take_along_dim": (lambda x, i: torch.take_along_dim(x, i.abs() % 4, 1), [(3, 4), (1, 2)]),
    "take_along_dim_none": (lambda x, i: torch.take_along_dim(x, i.abs() % 12), [(3, 4), (2, 2)]),
    "take_along_dim_negative": (lambda x, i: torch.take_along_dim(x, i.abs() % 4 - 4, 0), [(4, 3), (2, 3)]),
}
"""name -> (function, input shapes); the dtypes of DTYPES (indices are int64)."""


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("name", sorted(CASES))
def test_shape_op(name, dtype, tmp_path):
    fn, shapes = CASES[name]
    if name.startswith("take_along_dim"):
        args = [_x(*shapes[0], dtype=dtype), _x(*shapes[1], dtype=torch.int64)]
    else:
        args = [_x(*s, dtype=dtype) for s in shapes]
    check_both(fn, *args, tmp_path=tmp_path)


@pytest.mark.parametrize("name,fn,shapes,other", [
    ("chunk", lambda x: torch.chunk(x, 2), [(5, 3)], [(7, 3)]),
    ("unsafe_chunk", lambda x: torch.unsafe_chunk(x, 2), [(7, 2)], [(2, 2)]),
    ("vsplit", lambda x: torch.vsplit(x, 2), [(6, 2)], [(10, 2)]),
    ("tensor_split", lambda x: torch.tensor_split(x, 3), [(7, 2)], [(8, 2)]),
    ("broadcast_tensors", lambda a, b: torch.broadcast_tensors(a, b), [(4, 3), (1, 3)], [(6, 3), (1, 3)]),
    ("sum_to_size", lambda x: x.sum_to_size(1, 3), [(4, 3)], [(2, 3)]),
])
def test_a_dynamic_first_dim(name, fn, shapes, other, tmp_path):
    """The first dim symbolic: run at the traced size and another."""
    args = [_x(*s) for s in shapes]
    check_both(fn, *args, tmp_path=tmp_path, dynamic=True, runs=[[_x(*s) for s in other]])


def test_resize_to_more_elements_is_refused(tmp_path):
    path = _saved(lambda x: x.clone().resize_(5, 5), [_x(3, 4)], tmp_path, False)
    with pytest.raises(UnsupportedOpsError, match="uninitialised"):
        to_onnx(path)


def test_resize_of_a_transposed_view_is_refused(tmp_path):
    # resize_ reads the storage in order, not the transposed view's elements
    path = _saved(lambda x: x.clone().t().resize_(2, 6), [_x(3, 4)], tmp_path, False)
    with pytest.raises(UnsupportedOpsError, match="shares memory|contiguous"):
        to_onnx(path)


def test_chunk_of_a_dynamic_dim_into_pieces_some_sizes_give_fewer_of_is_refused(tmp_path):
    # 3 chunks of 7 rows are 3 pieces, of 4 rows 2 (ceil(4 / 3) = 2): the program's 3 outputs would not hold
    path = _saved(lambda x: torch.chunk(x, 3), [_x(7, 2)], tmp_path, True)
    with pytest.raises(UnsupportedOpsError, match="fewer pieces"):
        to_onnx(path)


@pytest.mark.parametrize("name,fn", [
    ("unsafe_split", lambda x: (x.unsafe_split(2)[0].add_(1), x)[1] * 1),
    ("atleast_3d", lambda x: (torch.atleast_3d(x).add_(1), x)[1] * 1),
    ("atleast_2d, input written", lambda x: (lambda y: (x.add_(1), y * 1)[1])(torch.atleast_2d(x))),
    ("broadcast_tensors", lambda x: (torch.broadcast_tensors(x, x)[0].add_(1), x)[1] * 1),
    ("sum_to_size to the same shape", lambda x: (x.sum_to_size(4, 4).add_(1), x)[1] * 1),
])
def test_a_write_through_a_view_torch_does_not_declare_is_refused(name, fn, tmp_path):
    # torch's schemas of these ops declare no aliasing, yet eager returns views (or self): the write
    # would not reach the other value
    path = _saved(lambda x: fn(x.clone()), [_x(4, 4)], tmp_path, False)
    with pytest.raises(UnsupportedOpsError, match="writes into memory"):
        to_onnx(path)


@pytest.mark.parametrize("name,fn", [
    ("of a view", lambda x: (x[0:2].resize_(4, 2), x)[1] * 1),
    ("with a view read after", lambda x: (lambda y: (x.resize_(2, 8), y * 1)[1])(x[0])),
])
def test_resize_of_memory_another_value_shares_is_refused(name, fn, tmp_path):
    # resize_ keeps the storage: the view-mutation pass would carry the new shape into the other value
    path = _saved(lambda x: fn(x.clone()), [_x(4, 4)], tmp_path, False)
    with pytest.raises(UnsupportedOpsError, match="shares memory"):
        to_onnx(path)
