"""ONNX Einsum decomposed into TRANSPOSE, RESHAPE, EXPAND_DIMS, BATCH_MATMUL, MUL and SUM.

The operands are contracted left to right, two at a time. For a pair, a letter in one operand
only that nothing later needs is summed out first; then the letters are batch (both operands,
needed later), contracted (both, not needed later), left (first only) and right (second only).
With contracted letters the pair is one BATCH_MATMUL of [batch..., left, contracted] by
[batch..., contracted, right] (groups of several letters merged by RESHAPE, split back after);
without any it is a broadcasting MUL (outer and elementwise products). A repeated letter in one
operand (a diagonal or trace) multiplies by an identity mask over the two axes and sums one.
A letter with sizes that disagree, a diagonal over a dynamic dim, a contraction of integers
and a RESHAPE that would need two run-time dims in one group are refused naming the equation.
"""

from __future__ import annotations

import string
from dataclasses import dataclass

import numpy as np

from ...errors import Unsupported
from ..core.emit import Emitter, attrs
from ..core.mappers import maps
from ..core.model import TensorType as T

__all__ = ["einsum"]

_LETTERS = set(string.ascii_letters)


@dataclass
class _Operand:
    t: int  # tensor index
    letters: list[str]


def parse(equation: str, ranks: list[int]) -> tuple[list[list[str]], list[str]]:
    """The letters of every operand and of the output; '...' becomes fresh letters aligned right."""
    eq = equation.replace(" ", "")
    lhs, arrow, rhs = eq.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(ranks):
        raise Unsupported(f"Einsum {equation!r} names {len(terms)} operands, the node has {len(ranks)}")
    n_ell = max((r - (len(t) - 3) for t, r in zip(terms, ranks) if "..." in t), default=0)
    ell = [chr(0x100 + k) for k in range(n_ell)]  # not a letter an equation can hold

    def expand(term: str, rank: int | None) -> list[str]:
        head, dots, tail = term.partition("...")
        if any(c not in _LETTERS for c in head + tail) or "." in tail:
            raise Unsupported(f"Einsum {equation!r}: cannot read term {term!r}")
        if not dots:
            if rank is not None and len(head) != rank:
                raise Unsupported(f"Einsum {equation!r}: term {term!r} does not match its operand's rank {rank}")
            return list(head)
        k = n_ell if rank is None else rank - len(head) - len(tail)
        return list(head) + ell[n_ell - k:] + list(tail)

    ins = [expand(t, r) for t, r in zip(terms, ranks)]
    if arrow:
        out = expand(rhs, None)
    else:  # implicit mode: the ellipsis, then the letters seen once, in alphabetical order
        seen = [c for term in ins for c in term]
        out = [c for c in ell] + sorted(c for c in set(seen) if c not in ell and seen.count(c) == 1)
    if any(c not in {x for term in ins for x in term} for c in out) or len(set(out)) != len(out):
        raise Unsupported(f"Einsum {equation!r}: an output letter is not in an input or is repeated")
    return ins, out


class _Builder:
    def __init__(self, em: Emitter, equation: str, dims: dict[str, int]):
        self.em, self.equation, self.dims = em, equation, dims

    def refuse(self, why: str):
        raise Unsupported(f"Einsum {self.equation!r}: {why}")

    def shape(self, letters) -> list[int]:
        return [self.dims[c] for c in letters]

    def transpose(self, x: _Operand, order: list[str]) -> _Operand:
        if order == x.letters:
            return x
        perm = [x.letters.index(c) for c in order]
        y = self.em.tmp(self.em.dtype_of(x.t), self.shape(order), "einsum_t")
        self.em.op("TRANSPOSE", [x.t, self.em.const(np.asarray(perm, np.int32))], [y])
        return _Operand(y, list(order))

    def sum_out(self, x: _Operand, keep: set[str]) -> _Operand:
        axes = [i for i, c in enumerate(x.letters) if c not in keep]
        if not axes:
            return x
        letters = [c for c in x.letters if c in keep]
        y = self.em.tmp(self.em.dtype_of(x.t), self.shape(letters), "einsum_sum")
        self.em.op("SUM", [x.t, self.em.const(np.asarray(axes, np.int32))], [y], ("ReducerOptions", {"keep_dims": False}))
        return _Operand(y, letters)

    def diagonals(self, x: _Operand) -> _Operand:
        """Each letter repeated within one operand: times an identity mask, then summed over one axis."""
        while len(set(x.letters)) != len(x.letters):
            c = next(c for c in x.letters if x.letters.count(c) > 1)
            p = x.letters.index(c)
            q = x.letters.index(c, p + 1)
            n = self.dims[c]
            if n < 0:
                self.refuse(f"the diagonal over {c!r} has a dynamic size")
            shape = [1] * len(x.letters)
            shape[p] = shape[q] = n
            dtype = {T.FLOAT32: np.float32, T.INT32: np.int32}.get(self.em.dtype_of(x.t))
            if dtype is None:
                self.refuse("a diagonal of a value that is neither float nor int")
            mask = self.em.const(np.eye(n, dtype=dtype).reshape(shape))
            masked = self.em.binary("MUL", x.t, mask)
            letters = x.letters[:q] + ["\0"] + x.letters[q + 1:]  # the summed axis: a placeholder letter
            x = self.sum_out(_Operand(masked, letters), set(x.letters))
        return x

    def reshape(self, x: _Operand, groups: list[list[str]]) -> int:
        """``x`` (letters in group order) as one dim per group: a constant target, -1 for at most one
        group with a run-time size, else the run-time sizes of single-letter groups from SHAPE."""
        target = [int(np.prod(self.shape(g))) if all(d >= 0 for d in self.shape(g)) else -1 for g in groups]
        if [len(g) for g in groups] == [1] * len(x.letters) and len(groups) == len(x.letters):
            return x.t
        y = self.em.tmp(self.em.dtype_of(x.t), target, "einsum_r")
        if target.count(-1) <= 1:
            self.em.op("RESHAPE", [x.t, self.em.const(np.asarray(target, np.int32))], [y])
            return y
        self.refuse("merging or splitting axes with more than one run-time size")

    def reshape_from(self, x: int, letters: list[str], sources: dict[str, tuple[int, int]]) -> int:
        """``x`` reshaped to one dim per letter; run-time dims read from the operands they came from."""
        target = self.shape(letters)
        y = self.em.tmp(self.em.dtype_of(x), target, "einsum_r")
        if target.count(-1) <= 1:
            self.em.op("RESHAPE", [x, self.em.const(np.asarray(target, np.int32))], [y])
            return y
        pieces = []
        for c, d in zip(letters, target):
            if d >= 0:
                pieces.append(self.em.const(np.asarray([d], np.int32)))
                continue
            src, axis = sources[c]
            shape = self.em.tmp(T.INT32, [len(self.em.shape_of(src) or [])], "shape")
            self.em.op("SHAPE", [src], [shape], ("ShapeOptions", {"out_type": T.INT32}))
            piece = self.em.tmp(T.INT32, [1], "dim")
            self.em.op("STRIDED_SLICE", [shape, self.em.const(np.asarray([axis], np.int32)),
                                         self.em.const(np.asarray([axis + 1], np.int32)),
                                         self.em.const(np.asarray([1], np.int32))], [piece], ("StridedSliceOptions", {}))
            pieces.append(piece)
        dims = self.em.tmp(T.INT32, [len(letters)], "dims")
        self.em.op("CONCATENATION", pieces, [dims], ("ConcatenationOptions", {"axis": 0}))
        self.em.op("RESHAPE", [x, dims], [y])
        return y

    def expand(self, x: _Operand, axis: int, letter: str) -> _Operand:
        y = self.em.tmp(self.em.dtype_of(x.t), None, "einsum_e")
        self.em.op("EXPAND_DIMS", [x.t, self.em.const(np.asarray(axis, np.int32))], [y])
        letters = x.letters[:axis] + [letter] + x.letters[axis:]
        self.em.sub.tensors[y].shape = [1 if c.startswith("\1") else self.dims[c] for c in letters]
        return _Operand(y, letters)

    def pair(self, a: _Operand, b: _Operand, keep: set[str], sources) -> _Operand:
        a = self.sum_out(a, keep | set(b.letters))
        b = self.sum_out(b, keep | set(a.letters))
        batch = [c for c in a.letters if c in b.letters and c in keep]
        contracted = [c for c in a.letters if c in b.letters and c not in keep]
        left = [c for c in a.letters if c not in b.letters]
        right = [c for c in b.letters if c not in a.letters]
        if not contracted:  # broadcasting MUL over batch + left + right
            a = self.transpose(a, batch + left)
            for k, _ in enumerate(right):
                a = self.expand(a, len(a.letters), f"\1r{k}")
            b = self.transpose(b, batch + right)
            for k, _ in enumerate(left):
                b = self.expand(b, len(batch), f"\1l{k}")
            y = self.em.binary("MUL", a.t, b.t)
            self.em.sub.tensors[y].shape = self.shape(batch + left + right)
            return _Operand(y, batch + left + right)
        if self.em.dtype_of(a.t) != T.FLOAT32:
            self.refuse("a contraction of integers (BATCH_MATMUL is float here)")
        a = self.transpose(a, batch + left + contracted)
        b = self.transpose(b, batch + contracted + right)
        am = self.reshape(a, [[c] for c in batch] + [left, contracted])
        bm = self.reshape(b, [[c] for c in batch] + [contracted, right])
        rows = [int(np.prod(self.shape(left))) if all(d >= 0 for d in self.shape(left)) else -1]
        cols = [int(np.prod(self.shape(right))) if all(d >= 0 for d in self.shape(right)) else -1]
        y = self.em.tmp(T.FLOAT32, self.shape(batch) + rows + cols, "einsum_mm")
        self.em.op("BATCH_MATMUL", [am, bm], [y], ("BatchMatMulOptions", {"adj_x": False, "adj_y": False}))
        letters = batch + left + right
        if len(left) != 1 or len(right) != 1:
            y = self.reshape_from(y, letters, sources)
        return _Operand(y, letters)


@maps("Einsum")
def einsum(em: Emitter, node) -> None:
    equation = attrs(node)["equation"]
    equation = equation.decode() if isinstance(equation, bytes) else equation
    names = list(node.input)
    ins, out = parse(equation, [em.rank(n) for n in names])
    dims: dict[str, int] = {}
    sources: dict[str, tuple[int, int]] = {}
    ops = []
    for name, letters in zip(names, ins):
        t = em.t(name)
        for axis, (c, d) in enumerate(zip(letters, em.shape(name))):
            known = dims.get(c, d)
            if known >= 0 and d >= 0 and known != d:
                raise Unsupported(f"Einsum {equation!r}: letter {c!r} has sizes {known} and {d}")
            dims[c] = d if known < 0 else known
            if d < 0 and c not in sources:
                sources[c] = (t, axis)
        ops.append(_Operand(t, list(letters)))
    b = _Builder(em, equation, dims)
    ops = [b.diagonals(x) for x in ops]
    acc = ops[0]
    for k in range(1, len(ops)):
        later = set(out) | {c for x in ops[k + 1:] for c in x.letters}
        acc = b.pair(acc, ops[k], later, sources)
    acc = b.transpose(b.sum_out(acc, set(out)), out)
    if acc.t in (x.t for x in ops):  # the equation moves nothing: a copy under the output's name
        dtype = em.dtype_of(acc.t)
        em.op("CAST", [acc.t], [em.out()], ("CastOptions", {"in_data_type": dtype, "out_data_type": dtype}))
        return
    em.bind(node.output[0], acc.t)
