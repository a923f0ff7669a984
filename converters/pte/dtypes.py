"""The tensor dtypes the pte target writes, and which of them each portable kernel takes.

``ET_SCALAR_TYPE``: the export schema's ``ScalarType`` -> ExecuTorch's (``scalar_type.fbs``: the
c10 numbering, ``FLOAT = 6``, ``BFLOAT16 = 15``); item sizes come from the one dtype table,
``schema.dtypes``. A dtype not in it (complex, float8, unsigned 16-64) is refused.

``KERNEL_DTYPES``: for each portable kernel pt2x calls, the dtypes its tensors may have, checked
at every ``KernelCall`` (``check_call``). A kernel not listed takes float32 only. The groups are
what the kernels were run with in executorch 1.5.1's runtime and matched torch eager by the tests
(``tests/converters/pte/test_pte_dtypes.py``: every parity program in float16, bfloat16 and
float64; the integer and bool cases): a dtype that is not listed is refused at conversion, never
left to fail at run time (a portable kernel checks its dtypes when it runs, not when it loads).
"""

from __future__ import annotations

from ...schema import definitions as d
from ...schema.dtypes import row
from ..errors import Unsupported

__all__ = ["ET_SCALAR_TYPE", "itemsize", "et_scalar_type", "schema_dtype", "check_call", "KERNEL_DTYPES"]

_S = d.ScalarType
ET_SCALAR_TYPE = {
    _S.BYTE: 0, _S.CHAR: 1, _S.SHORT: 2, _S.INT: 3, _S.LONG: 4, _S.HALF: 5, _S.FLOAT: 6, _S.DOUBLE: 7,
    _S.BOOL: 11, _S.BFLOAT16: 15,
}


def et_scalar_type(dtype, what: str) -> int:
    if dtype not in ET_SCALAR_TYPE:
        name = row(dtype).torch_name if isinstance(dtype, d.ScalarType) and dtype != _S.UNKNOWN else dtype
        raise Unsupported(f"{what} is {name}: the pte target writes {', '.join(_names(ET_SCALAR_TYPE))} tensors")
    return ET_SCALAR_TYPE[dtype]


def itemsize(dtype) -> int:
    return row(dtype).itemsize


_BY_ET = {v: k for k, v in ET_SCALAR_TYPE.items()}


def schema_dtype(scalar_type: int):
    """The export schema's dtype of an ExecuTorch ``ScalarType`` pt2x writes (a ``TensorValue``'s)."""
    return _BY_ET[scalar_type]


F32 = frozenset({_S.FLOAT})
HALF_SINGLE = frozenset({_S.FLOAT, _S.HALF, _S.BFLOAT16})
FLOATS = frozenset({_S.FLOAT, _S.HALF, _S.BFLOAT16, _S.DOUBLE})
INTS = frozenset({_S.BYTE, _S.CHAR, _S.SHORT, _S.INT, _S.LONG})
REAL = FLOATS | INTS
ALL = REAL | {_S.BOOL}
INDICES = frozenset({_S.LONG, _S.INT})
BOOL = frozenset({_S.BOOL})
F32_LONG_BOOL = frozenset({_S.FLOAT, _S.LONG, _S.BOOL})  # what the model zoo's masks and positions use

# kernel -> (the dtypes of its tensors, {argument: its own dtypes} where one differs)
KERNEL_DTYPES: dict[str, tuple[frozenset, dict[str, frozenset]]] = {
    # float64 is computed in float32 by these (1.5.1: a layer norm 4e-7 off torch's float64)
    **{k: (HALF_SINGLE, {}) for k in ("native_layer_norm.out", "_adaptive_avg_pool2d.out", "_log_softmax.out")},
    # matrix products and the nn kernels: float tensors
    **{k: (FLOATS, {}) for k in (
        "addmm.out", "mm.out", "bmm.out", "convolution.out",
        "_native_batch_norm_legit_no_training.out", "_softmax.out", "gelu.out",
        "avg_pool2d.out", "leaky_relu.out", "sigmoid.out", "tanh.out", "exp.out",
        "log.out", "sqrt.out", "rsqrt.out", "erf.out", "sin.out", "cos.out", "mean.out", "round.out")},
    "max_pool2d_with_indices.out": (FLOATS, {"indices": frozenset({_S.LONG})}),
    # elementwise arithmetic: real tensors (a division's out is a float)
    **{k: (REAL, {}) for k in ("add.out", "add.Scalar_out", "sub.out", "sub.Scalar_out", "mul.out",
                                "mul.Scalar_out", "div.out", "div.Scalar_out", "relu.out", "abs.out", "neg.out",
                                "hardtanh.out", "clamp.out", "sum.IntList_out")},
    # comparisons: real inputs, a bool (or any) out
    **{k: (REAL, {"out": ALL}) for k in ("gt.Scalar_out", "gt.Tensor_out", "lt.Scalar_out", "lt.Tensor_out",
                                          "ge.Scalar_out", "ge.Tensor_out", "le.Scalar_out", "le.Tensor_out",
                                          "eq.Scalar_out", "eq.Tensor_out", "ne.Scalar_out", "ne.Tensor_out")},
    # data movement: any dtype, the same in and out
    **{k: (ALL, {}) for k in ("permute_copy.out", "transpose_copy.int_out", "view_copy.out", "clone.out",
                               "cat.out", "slice_copy.Tensor_out", "select_copy.int_out", "expand_copy.out",
                               "split_with_sizes_copy.out", "sym_size.int", "copy_")},
    # data movement the dtype tests have not run beyond float32, int64 and bool
    **{k: (F32_LONG_BOOL, {}) for k in ("flip.out", "roll.out", "constant_pad_nd.out", "tril.out")},
    # casts: any dtype to any dtype
    "dim_order_ops::_to_dim_order_copy.out": (ALL, {}),
    "embedding.out": (ALL, {"indices": INDICES}),
    # new tensors, selections and logic: float32, int64 and bool (test_pte_dtypes' masks and positions)
    **{k: (F32_LONG_BOOL, {}) for k in ("full.out", "scalar_tensor.out")},
    "arange.start_out": (frozenset({_S.FLOAT, _S.LONG}), {}),
    "where.self_out": (F32_LONG_BOOL, {"condition": BOOL}),
    "masked_fill.Scalar_out": (F32_LONG_BOOL, {"mask": BOOL}),
    **{k: (F32_LONG_BOOL, {"out": BOOL}) for k in ("logical_not.out", "logical_and.out", "logical_or.out",
                                                   "logical_xor.out", "any.out", "any.dims_out", "any.all_out")},
    # indexing: float32, int64 and bool tensors read at int64 (or int32) positions
    "index.Tensor_out": (F32_LONG_BOOL, {"indices": INDICES}),
    "index_select.out": (F32_LONG_BOOL, {"index": INDICES}),
    "gather.out": (F32_LONG_BOOL, {"index": frozenset({_S.LONG})}),
    **{k: (F32_LONG_BOOL, {}) for k in ("slice_scatter.out", "select_scatter.out", "copy.out", "fill.Scalar_out",
                                        "fill.Tensor_out")},
    "index_put.out": (F32_LONG_BOOL, {"indices": INDICES}),
    # integer arithmetic the zoo's position tables use; scans into int64 (of an integer or bool input).
    # 1.5.1's remainder gives int64 the sign of the dividend (C's %, not torch's floor modulo: -7 % 4 is
    # -3, torch's 1), so it takes float32 only
    **{k: (frozenset({_S.FLOAT, _S.LONG}), {}) for k in ("fmod.Scalar_out", "fmod.Tensor_out")},
    "cumsum.out": (F32_LONG_BOOL, {"out": frozenset({_S.FLOAT, _S.LONG})}),
    **{k: (F32, {"out": frozenset({_S.LONG})}) for k in ("argmax.out", "argmin.out")},
    **{k: (frozenset({_S.LONG, _S.BOOL}), {}) for k in (
        "bitwise_not.out", "bitwise_and.Tensor_out", "bitwise_or.Tensor_out", "bitwise_xor.Tensor_out",
        "bitwise_and.Scalar_out", "bitwise_or.Scalar_out", "bitwise_xor.Scalar_out")},
}


def check_call(key: str, name_of, tensors) -> None:
    """Refuse a ``KernelCall`` of ``key`` whose tensors (``(argument name, TensorValue)`` pairs)
    have a dtype the kernel is not known to take."""
    default, per_arg = KERNEL_DTYPES.get(key, (F32, {}))
    for arg, t in tensors:
        allowed = per_arg.get(arg, default)
        dtype = _BY_ET.get(t.scalar_type)
        if dtype not in allowed:
            name = row(dtype).torch_name if dtype is not None else str(t.scalar_type)
            raise Unsupported(f"ExecuTorch's portable {key} is not known to take {name} tensors "
                              f"(argument {arg!r}, {name_of(t)!r}; it takes {', '.join(_names(allowed))})")


def _names(dtypes) -> list[str]:
    return sorted(row(t).torch_name for t in dtypes)
