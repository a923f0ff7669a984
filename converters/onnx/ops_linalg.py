"""Small linear-algebra lowerings: cross products, diag, bilinear (and its decomposition, _trilinear),
products (dot, mv, inner, outer, tensordot, multi_dot, the add* forms, matrix_power), trace,
norms (linalg_norm, matrix_norm, renorm), determinants of matrices up to 3x3, trapezoid and gradient.

Built from Gather/Mul/Sub/Where/MatMul/ReduceSum, which the TFLite target maps. Integer products
are exact (``Mul`` + ``ReduceSum`` in the integer type, wrapping as torch's do), never a float
MatMul; float products use MatMul, except with an operand of no elements (LiteRT cannot prepare
that MatMul; Mul + ReduceSum gives the zeros).
"""

from __future__ import annotations

import numpy as np

from ..aten import dtypes
from ..aten.args import bind
from ..aten.dtypes import ST
from ..aten.registry import lowering
from ..errors import Unsupported
from .shapes import axes_const


def _io(ctx):
    out = ctx.out_info().dtype
    cst = ctx.compute_type(out)
    return out, (ST.INT if cst == ST.BOOL else cst)


@lowering("onnx", "aten.cross.default", "aten.linalg_cross.default")
def cross(ctx, node):
    """``a[i+1] b[i+2] - a[i+2] b[i+1]`` along ``dim`` (of size 3), the operands broadcast.
    ``cross`` without ``dim`` takes the first dim of size 3, as torch (``linalg_cross``: -1)."""
    a = bind(node, "self", "other")
    out_info = ctx.out_info()
    rank = out_info.rank
    if a.dim is None:
        dim = next((i for i, s in enumerate(out_info.shape) if s == 3), None)
        if dim is None:
            raise Unsupported("cross without dim and no dim of size 3 known")
    else:
        dim = a.dim % max(rank, 1)
    if out_info.shape[dim] != 3:
        raise Unsupported(f"cross along dim {dim} of size {out_info.shape[dim]} (3 is needed)")
    out, cst = _io(ctx)
    x1, x2 = _rotations(ctx, a.self, dim, rank, cst)
    y1, y2 = _rotations(ctx, a.other, dim, rank, cst)
    r = ctx.op("Sub", ctx.op("Mul", x1, y2), ctx.op("Mul", x2, y1))
    return ctx.cast(r, cst, out)


def _rotations(ctx, ref, dim: int, rank: int, cst):
    """``ref``'s components (1, 2, 0) and (2, 0, 1) along the output's ``dim`` (the operand's
    own axis there: broadcasting aligns trailing dims)."""
    shape = ctx.info(ref).shape
    axis = dim - (rank - len(shape))
    if axis < 0 or shape[axis] != 3:
        raise Unsupported(f"cross of an operand without size 3 along dim {dim}")
    x = ctx.t(ref, cst)
    return [ctx.op("Gather", x, ctx.const(np.array(p, np.int64), ST.LONG), axis=axis) for p in ([1, 2, 0], [2, 0, 1])]


@lowering("onnx", "aten.bilinear.default")
def bilinear(ctx, node):
    """``y[..., o] = x1[..., i] W[o, i, j] x2[..., j] + b[o]``: x1 (flattened to [n, i]) times W
    laid out [i, o*j], reshaped [n, o, j], times x2 [n, 1, j], summed over j."""
    a = bind(node, "input1", "input2", "weight", "bias")
    wshape = ctx.info(a.weight).shape
    if not all(isinstance(s, int) for s in wshape):
        raise Unsupported("bilinear with a weight of dynamic shape")
    o, i, j = wshape
    out, cst = _io(ctx)
    x1 = ctx.op("Reshape", ctx.t(a.input1, cst), ctx.ints([-1, i]))
    x2 = ctx.op("Reshape", ctx.t(a.input2, cst), ctx.ints([-1, 1, j]))
    w = ctx.op("Reshape", ctx.op("Transpose", ctx.t(a.weight, cst), perm=[1, 0, 2]), ctx.ints([i, o * j]))
    t = ctx.op("Reshape", ctx.op("MatMul", x1, w), ctx.ints([-1, o, j]))
    y = ctx.op("ReduceSum", ctx.op("Mul", t, x2), axes_const(ctx, [2]), keepdims=0)
    if a.bias is not None:
        y = ctx.op("Add", y, ctx.t(a.bias, cst))
    lead = ctx.shape(ctx.t(a.input1), 0, -1)
    y = ctx.op("Reshape", y, ctx.op("Concat", lead, ctx.ints([o]), axis=0))
    return ctx.cast(y, cst, out)


@lowering("onnx", "aten._trilinear.default")
def trilinear(ctx, node):
    """``sum over sumdim of i1 * i2 * i3``, each unsqueezed at its ``expand`` dims (what
    ``bilinear`` decomposes into)."""
    a = bind(node, "i1", "i2", "i3", "expand1", "expand2", "expand3", "sumdim")
    a.declare("unroll_dim")  # which dim torch's kernel loops over: the same sum
    out, cst = _io(ctx)
    terms = []
    for x, dims in ((a.i1, a.expand1), (a.i2, a.expand2), (a.i3, a.expand3)):
        t = ctx.t(x, cst)
        terms.append(ctx.op("Unsqueeze", t, axes_const(ctx, sorted(dims))) if dims else t)
    r = ctx.op("Mul", ctx.op("Mul", terms[0], terms[1]), terms[2])
    if a.sumdim:
        r = ctx.op("ReduceSum", r, axes_const(ctx, sorted(a.sumdim)), keepdims=0)
    return ctx.cast(r, cst, out)


# ------------------------------------------------------------------ products


def _has_empty(ctx, *refs) -> bool:
    return any(s == 0 for r in refs for s in ctx.info(r).shape if isinstance(s, int))


def _exact(ctx, cst, *refs) -> bool:
    """Whether a product goes by Mul + ReduceSum: integers (exact), or an operand with no elements."""
    return not dtypes.is_floating(cst) or _has_empty(ctx, *refs)


def _matmul(ctx, x, y, rx: int, ry: int, exact: bool):
    """numpy's matmul of ONNX values ``x`` (rank ``rx``) and ``y`` (rank ``ry``): MatMul, or with
    ``exact`` the products broadcast over ``[..., n, k, m]`` summed over k. Returns (value, rank)."""
    rank = max(rx, ry, 2) - (rx == 1) - (ry == 1)
    if not exact:
        return ctx.op("MatMul", x, y), rank
    if rx == 1:
        x = ctx.op("Unsqueeze", x, axes_const(ctx, [0]))
    if ry == 1:
        y = ctx.op("Unsqueeze", y, axes_const(ctx, [1]))
    p = ctx.op("Mul", ctx.op("Unsqueeze", x, axes_const(ctx, [-1])), ctx.op("Unsqueeze", y, axes_const(ctx, [-3])))
    r = ctx.op("ReduceSum", p, axes_const(ctx, [-2]), keepdims=0)
    squeeze = ([-2] if rx == 1 else []) + ([-1] if ry == 1 else [])
    return (ctx.op("Squeeze", r, axes_const(ctx, squeeze)) if squeeze else r), rank


def _dot_sum(ctx, x, y, axes):
    """``sum(x * y)`` over ``axes`` of the broadcast product."""
    return ctx.op("ReduceSum", ctx.op("Mul", x, y), axes_const(ctx, axes), keepdims=0)


def _scaled(ctx, x, factor, cst):
    return x if factor == 1 else ctx.op("Mul", x, ctx.const(factor, cst))


def _static_scalar(value, what: str):
    if not isinstance(value, (int, float)):
        raise Unsupported(f"{what} computed at run time")
    return value


def _add_scaled(ctx, a, prod, cst, out):
    """``beta * self + alpha * prod`` (``beta = 0``: self ignored, NaN included, as torch)."""
    beta, alpha = _static_scalar(a.beta, "beta"), _static_scalar(a.alpha, "alpha")
    r = _scaled(ctx, prod, alpha, cst)
    if beta == 0:
        a.declare("self")
        return ctx.cast(r, cst, out)
    return ctx.cast(ctx.op("Add", _scaled(ctx, ctx.t(a.self, cst), beta, cst), r), cst, out)


def _no_bool(ctx, op: str):
    out, cst = _io(ctx)
    if out == ST.BOOL:
        raise Unsupported(f"{op} of booleans")
    return out, cst


@lowering("onnx", "aten.trace.default")
def trace(ctx, node):
    """Sum of a matrix's main diagonal (integers summed in int64, the output's dtype)."""
    a = bind(node, "self")
    if ctx.rank(a.self) != 2:
        raise Unsupported("trace of a tensor that is not 2-d")
    out, cst = _no_bool(ctx, "trace")
    x = ctx.t(a.self, cst)
    n, m = ctx.info(a.self).shape
    if isinstance(n, int) and isinstance(m, int):
        ctx.reserve_array([n, m], 1, "trace mask")
        mask = ctx.const(np.eye(n, m, dtype=bool), ST.BOOL)
    else:
        mask = ctx.cast(ctx.op("EyeLike", x), cst, ST.BOOL)
    r = ctx.op("ReduceSum", ctx.op("Where", mask, x, ctx.const(0, cst)), axes_const(ctx, [0, 1]), keepdims=0)
    return ctx.cast(r, cst, out)


@lowering("onnx", "aten.dot.default", "aten.vdot.default")
def dot(ctx, node):
    """``sum(x * y)`` of two vectors (vdot conjugates x: real tensors only here)."""
    a = bind(node, "self", "tensor")  # vdot names the second "other"
    if ctx.rank(a[0]) != 1 or ctx.rank(a[1]) != 1:
        raise Unsupported("dot of tensors that are not 1-d")
    out, cst = _no_bool(ctx, "dot")
    return ctx.cast(_dot_sum(ctx, ctx.t(a[0], cst), ctx.t(a[1], cst), [0]), cst, out)


@lowering("onnx", "aten.linalg_vecdot.default")
def vecdot(ctx, node):
    """``sum(x * y, dim)`` of the broadcast operands (real tensors: no conjugate)."""
    a = bind(node, "x", "y")
    rank = max(ctx.rank(a.x), ctx.rank(a.y))
    if rank == 0:
        raise Unsupported("vecdot of 0-d tensors")
    out, cst = _no_bool(ctx, "vecdot")
    return ctx.cast(_dot_sum(ctx, ctx.t(a.x, cst), ctx.t(a.y, cst), [a.dim % rank]), cst, out)


@lowering("onnx", "aten.inner.default")
def inner(ctx, node):
    """``sum(x[..., i, :] * y[..., j, :])`` over the last dim, shape ``x[:-1] + y[:-1]``; a 0-d
    operand multiplies."""
    a = bind(node, "self", "other")
    out, cst = _no_bool(ctx, "inner")
    rx, ry = ctx.rank(a.self), ctx.rank(a.other)
    x, y = ctx.t(a.self, cst), ctx.t(a.other, cst)
    if rx == 0 or ry == 0:
        return ctx.cast(ctx.op("Mul", x, y), cst, out)
    if ry <= 2 and not _exact(ctx, cst, a.self, a.other):
        return ctx.cast(ctx.op("MatMul", x, y if ry == 1 else ctx.op("Transpose", y, perm=[1, 0])), cst, out)
    if ry > 1:
        x = ctx.op("Unsqueeze", x, axes_const(ctx, list(range(rx - 1, rx + ry - 2))))
    return ctx.cast(_dot_sum(ctx, x, y, [-1]), cst, out)


@lowering("onnx", "aten.outer.default")
def outer(ctx, node):
    """``x[i] * y[j]`` of two vectors (booleans: their and)."""
    a = bind(node, "self", "vec2")
    if ctx.rank(a.self) != 1 or ctx.rank(a.vec2) != 1:
        raise Unsupported("outer of tensors that are not 1-d")
    out, cst = _io(ctx)
    r = ctx.op("Mul", ctx.op("Unsqueeze", ctx.t(a.self, cst), axes_const(ctx, [1])),
               ctx.op("Unsqueeze", ctx.t(a.vec2, cst), axes_const(ctx, [0])))
    return ctx.cast(r, cst, out)


@lowering("onnx", "aten.mv.default")
def mv(ctx, node):
    """Matrix [n, m] times vector [m]."""
    a = bind(node, "self", "vec")
    out, cst = _no_bool(ctx, "mv")
    r, _ = _matmul(ctx, ctx.t(a.self, cst), ctx.t(a.vec, cst), 2, 1, _exact(ctx, cst, a.self, a.vec))
    return ctx.cast(r, cst, out)


@lowering("onnx", "aten.addmv.default")
def addmv(ctx, node):
    """``beta * self + alpha * (mat @ vec)``."""
    a = bind(node, "self", "mat", "vec")
    out, cst = _no_bool(ctx, "addmv")
    if a.alpha == 0:
        raise Unsupported("addmv with alpha=0 (torch's BLAS skips the product: NaN in it would not show)")
    r, _ = _matmul(ctx, ctx.t(a.mat, cst), ctx.t(a.vec, cst), 2, 1, _exact(ctx, cst, a.mat, a.vec))
    return _add_scaled(ctx, a, r, cst, out)


@lowering("onnx", "aten.addbmm.default")
def addbmm(ctx, node):
    """``beta * self + alpha * sum_b(batch1[b] @ batch2[b])``."""
    a = bind(node, "self", "batch1", "batch2")
    out, cst = _no_bool(ctx, "addbmm")
    if a.alpha == 0:
        raise Unsupported("addbmm with alpha=0 (torch's BLAS skips the product: NaN in it would not show)")
    if ctx.rank(a.batch1) != 3 or ctx.rank(a.batch2) != 3:
        raise Unsupported("addbmm of batches that are not 3-d")
    p, _ = _matmul(ctx, ctx.t(a.batch1, cst), ctx.t(a.batch2, cst), 3, 3, _exact(ctx, cst, a.batch1, a.batch2))
    return _add_scaled(ctx, a, ctx.op("ReduceSum", p, axes_const(ctx, [0]), keepdims=0), cst, out)


@lowering("onnx", "aten.addr.default")
def addr(ctx, node):
    """``beta * self + alpha * outer(vec1, vec2)``; booleans: ``(beta and self) or (alpha and outer)``."""
    a = bind(node, "self", "vec1", "vec2")
    out, cst = _io(ctx)
    beta, alpha = _static_scalar(a.beta, "beta"), _static_scalar(a.alpha, "alpha")
    if ctx.rank(a.vec1) != 1 or ctx.rank(a.vec2) != 1:
        raise Unsupported("addr of tensors that are not 1-d")
    prod = ctx.op("Mul", ctx.op("Unsqueeze", ctx.t(a.vec1, cst), axes_const(ctx, [1])),
                  ctx.op("Unsqueeze", ctx.t(a.vec2, cst), axes_const(ctx, [0])))
    if out != ST.BOOL:
        return _add_scaled(ctx, a, prod, cst, out)
    r = ctx.cast(prod, cst, ST.BOOL)
    if not alpha:
        r = ctx.op("And", r, ctx.const(False, ST.BOOL))
    if not beta:
        a.declare("self")
        return r
    return ctx.op("Or", ctx.t(a.self, ST.BOOL), r)


@lowering("onnx", "aten.tensordot.default")
def tensordot(ctx, node):
    """Contracts ``self``'s ``dims_self`` with ``other``'s ``dims_other`` pairwise: the free dims
    of self, then those of other."""
    a = bind(node, "self", "other", "dims_self", "dims_other")
    out, cst = _no_bool(ctx, "tensordot")
    sa, sb = ctx.info(a.self).shape, ctx.info(a.other).shape
    ra, rb = len(sa), len(sb)
    ds, do = [d % max(ra, 1) for d in a.dims_self], [d % max(rb, 1) for d in a.dims_other]
    if len(ds) != len(do) or len(set(ds)) != len(ds) or len(set(do)) != len(do):
        raise Unsupported(f"tensordot over dims {a.dims_self} and {a.dims_other}")
    x, y = ctx.t(a.self, cst), ctx.t(a.other, cst)
    sa, sb = list(sa), list(sb)
    for i, j in zip(ds, do):  # a pair with a size 1 on one side: the other side is summed first (torch)
        if sa[i] != sb[j] and sb[j] == 1:
            x, sa[i] = ctx.op("ReduceSum", x, axes_const(ctx, [i]), keepdims=1), 1
        elif sa[i] != sb[j] and sa[i] == 1:
            y, sb[j] = ctx.op("ReduceSum", y, axes_const(ctx, [j]), keepdims=1), 1
        elif sa[i] != sb[j]:
            raise Unsupported("tensordot of contracted dims whose sizes differ (or are not known equal)")
    fa, fb = [i for i in range(ra) if i not in ds], [i for i in range(rb) if i not in do]
    x = x if fa + ds == list(range(ra)) else ctx.op("Transpose", x, perm=fa + ds)
    y_perm = (do + fb) if all(isinstance(s, int) for s in (*sa, *sb)) and not _exact(ctx, cst, a.self, a.other) \
        else None
    if y_perm is not None:  # static floats: one MatMul of [free_a, k] by [k, free_b]
        k, m, n = (int(np.prod([s[i] for i in d], dtype=np.int64)) for s, d in ((sa, ds), (sa, fa), (sb, fb)))
        y = y if y_perm == list(range(rb)) else ctx.op("Transpose", y, perm=y_perm)
        r = ctx.op("MatMul", ctx.op("Reshape", x, ctx.ints([m, k])), ctx.op("Reshape", y, ctx.ints([k, n])))
        return ctx.cast(ctx.op("Reshape", r, ctx.ints([sa[i] for i in fa] + [sb[i] for i in fb])), cst, out)
    if fb:  # x: [free_a, 1 x len(free_b), k...], y: [free_b, k...] (broadcast)
        x = ctx.op("Unsqueeze", x, axes_const(ctx, range(len(fa), len(fa) + len(fb))))
    y = y if fb + do == list(range(rb)) else ctx.op("Transpose", y, perm=fb + do)
    r = ctx.op("Mul", x, y)
    if ds:
        first = len(fa) + len(fb)
        r = ctx.op("ReduceSum", r, axes_const(ctx, range(first, first + len(ds))), keepdims=0)
    return ctx.cast(r, cst, out)


@lowering("onnx", "aten.linalg_multi_dot.default")
def multi_dot(ctx, node):
    """Matrix products left to right; a 1-d first operand is a row, a 1-d last one a column."""
    ts = bind(node, "tensors").tensors
    ranks = [ctx.rank(t) for t in ts]
    if len(ts) < 2 or any(r != 2 for r in ranks[1:-1]) or ranks[0] not in (1, 2) or ranks[-1] not in (1, 2):
        raise Unsupported(f"multi_dot of tensors of ranks {ranks}")
    out, cst = _no_bool(ctx, "multi_dot")
    exact = _exact(ctx, cst, *ts)
    r, rank = ctx.t(ts[0], cst), ranks[0]
    for t, rt in zip(ts[1:], ranks[1:]):
        r, rank = _matmul(ctx, r, ctx.t(t, cst), rank, rt, exact)
    return ctx.cast(r, cst, out)


@lowering("onnx", "aten.linalg_matrix_power.default")
def matrix_power(ctx, node):
    """``A @ ... @ A`` (n times, by repeated squaring) for a static ``n >= 0``; n = 0: the identity."""
    a = bind(node, "self", "n")
    n = a.n
    if not isinstance(n, int) or n < 0:
        raise Unsupported(f"matrix_power with n={n!r} (a static n >= 0; negative ones need the inverse)")
    out, cst = _no_bool(ctx, "matrix_power")
    shape = ctx.info(a.self).shape
    if len(shape) < 2:
        raise Unsupported("matrix_power of a tensor that is not a (batch of) matrix")
    x = ctx.t(a.self, cst)
    if n == 0:
        k = shape[-1]
        if not isinstance(k, int):
            raise Unsupported("matrix_power with n=0 of a dynamic matrix size")
        ctx.reserve_array([k, k], 8, "identity")
        return ctx.cast(ctx.op("Expand", ctx.const(np.eye(k), cst), ctx.shape_of(a.self)), cst, out)
    if n == 1:
        return ctx.cast(ctx.op("Identity", x), cst, out)
    exact, rank = _exact(ctx, cst, a.self), len(shape)
    result, z = None, None
    while n:
        z = x if z is None else _matmul(ctx, z, z, rank, rank, exact)[0]
        if n & 1:
            result = z if result is None else _matmul(ctx, result, z, rank, rank, exact)[0]
        n >>= 1
    return ctx.cast(result, cst, out)


# ------------------------------------------------------------------ determinants


def _det(ctx, ref, what: str):
    """det of a (batch of) static n x n matrix, n <= 3, by cofactors; returns (value, cst)."""
    shape = ctx.info(ref).shape
    rank = len(shape)
    if rank < 2 or not all(isinstance(s, int) for s in shape[-2:]) or shape[-1] != shape[-2] or shape[-1] > 3:
        raise Unsupported(f"{what} of matrices of shape {list(shape[-2:])} (static, up to 3x3: pt2x expands cofactors)")
    cst = ctx.compute_type(ctx.dtype(ref))
    if not dtypes.is_floating(cst):
        raise Unsupported(f"{what} of {ctx.dtype(ref).name}")
    x, n = ctx.t(ref, cst), shape[-1]
    if n == 0:  # the empty product: 1 per matrix
        return ctx.op("Add", ctx.op("ReduceSum", x, axes_const(ctx, [-2, -1]), keepdims=0), ctx.const(1, cst)), cst
    rows = [ctx.op("Gather", x, ctx.const(np.array(i, np.int64), ST.LONG), axis=rank - 2) for i in range(n)]
    e = [[ctx.op("Gather", r, ctx.const(np.array(j, np.int64), ST.LONG), axis=rank - 2) for j in range(n)]
         for r in rows]

    def minor(i, j, k, m):
        return ctx.op("Sub", ctx.op("Mul", e[i][j], e[k][m]), ctx.op("Mul", e[i][m], e[k][j]))

    if n == 1:
        return e[0][0], cst
    if n == 2:
        return minor(0, 0, 1, 1), cst
    t0 = ctx.op("Mul", e[0][0], minor(1, 1, 2, 2))
    t1 = ctx.op("Mul", e[0][1], minor(1, 0, 2, 2))
    t2 = ctx.op("Mul", e[0][2], minor(1, 0, 2, 1))
    return ctx.op("Add", ctx.op("Sub", t0, t1), t2), cst


@lowering("onnx", "aten.linalg_det.default", "aten.det.default")
def det(ctx, node):
    """The determinant (matrices up to 3x3; 1 for 0x0)."""
    d, cst = _det(ctx, bind(node, "A")[0], "det")
    return ctx.cast(d, cst, ctx.out_info().dtype)


@lowering("onnx", "aten.logdet.default")
def logdet(ctx, node):
    """``log(det)``: NaN for a negative determinant, -inf for 0 (matrices up to 3x3)."""
    d, cst = _det(ctx, bind(node, "self").self, "logdet")
    return ctx.cast(ctx.op("Log", d), cst, ctx.out_info().dtype)


@lowering("onnx", "aten.linalg_slogdet.default")
def slogdet(ctx, node):
    """``(sign(det), log|det|)`` (matrices up to 3x3)."""
    d, cst = _det(ctx, bind(node, "A").A, "slogdet")
    return [ctx.cast(ctx.op("Sign", d), cst, ctx.out_info(0).dtype),
            ctx.cast(ctx.op("Log", ctx.op("Abs", d)), cst, ctx.out_info(1).dtype)]


def _no_elements(ctx, ref, what: str, needs: str = "singular values: no SVD in pt2x"):
    shape = ctx.info(ref).shape
    if len(shape) < 2 or 0 not in shape[-2:]:
        raise Unsupported(f"{what} of a matrix that has elements (it needs {needs})")


@lowering("onnx", "aten.linalg_matrix_rank.atol_rtol_tensor", "aten.linalg_matrix_rank.atol_rtol_float")
def matrix_rank(ctx, node):
    """Rank 0 for (batches of) matrices with no rows or no columns; others are refused (SVD)."""
    a = bind(node, "input")  # .atol_rtol_float names it "self"
    a.declare("atol", "rtol", "hermitian")  # tolerances of singular values: there are none
    _no_elements(ctx, a[0], "matrix_rank")
    z = ctx.op("ReduceSum", ctx.t(a[0]), axes_const(ctx, [-2, -1]), keepdims=0)
    return ctx.cast(z, ctx.dtype(a[0]), ctx.out_info().dtype)


@lowering("onnx", "aten.linalg_pinv.atol_rtol_tensor", "aten.linalg_pinv.atol_rtol_float")
def pinv(ctx, node):
    """The pseudo-inverse of matrices with no rows or no columns: the empty [..., n, m]; others are
    refused (SVD)."""
    a = bind(node, "self")
    a.declare("atol", "rtol", "hermitian")  # tolerances of singular values: there are none
    _no_elements(ctx, a.self, "pinv")
    rank = ctx.rank(a.self)
    return ctx.op("Transpose", ctx.t(a.self), perm=list(range(rank - 2)) + [rank - 1, rank - 2])


@lowering("onnx", "aten.linalg_qr.default")
def qr(ctx, node):
    """QR of matrices with no rows or no columns (k = min(m, n) = 0): Q [..., m, 0] and R [..., 0, n]
    (mode 'r': Q is an empty [0]); others are refused (no QR in pt2x)."""
    a = bind(node, "A", "mode")
    _no_elements(ctx, a.A, "qr", "a QR decomposition: none in pt2x")
    m = ctx.info(a.A).shape[-2]
    if a.mode not in ("reduced", "r") and not (a.mode == "complete" and m == 0):
        raise Unsupported(f"qr in mode {a.mode!r} of a matrix with no elements")
    x = ctx.t(a.A)
    r = ctx.op("Slice", x, ctx.ints([0]), ctx.ints([0]), ctx.ints([-2]))
    q = ctx.const(np.zeros(0), ctx.dtype(a.A)) if a.mode == "r" else \
        ctx.op("Slice", x, ctx.ints([0]), ctx.ints([0]), ctx.ints([-1]))
    return [q, r]
