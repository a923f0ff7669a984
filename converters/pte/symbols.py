"""Expressions of shape symbols on the pte target (a tensor dim ``16*s77``, a view's size
``s77 + 1``): planned at their upper bound, computed at run time by the runtime's integer prim ops.

* ``upper_bound(expr, bounds)``: ExecuTorch plans a dynamic tensor at its largest size. Only an
  expression that grows with every symbol (symbols and integers under sums, and products whose
  integer factors are not negative) is taken: its value with each symbol at its upper bound is
  then the largest it reaches. Anything else (a difference of symbols, a floor division, a max)
  is refused, never planned too small.
* ``run_time_value(ctx, expr)``: the Int holding the expression's value when the program runs:
  a symbol's ``sym_size.int`` (``ctx.size_value``), folded left through
  ``executorch_prim::add.Scalar`` and ``mul.Scalar`` (exact integer arithmetic, as exir emits for
  ``operator.add``/``operator.mul`` of SymInts).
"""

from __future__ import annotations

from ...serde.codec.symbolic import Add, Expr, Integer, Mul, Symbol, to_infix
from ..errors import Unsupported

__all__ = ["PRIM_ARITHMETIC", "upper_bound", "run_time_value"]

PRIM_ARITHMETIC = {"add": "executorch_prim::add.Scalar", "sub": "executorch_prim::sub.Scalar",
                   "mul": "executorch_prim::mul.Scalar"}
"""Python's integer operator -> the runtime's prim op computing it on Ints."""


def _grows(e: Expr) -> bool:
    """Whether ``e`` never decreases when a (positive) symbol grows."""
    if isinstance(e, (Integer, Symbol)):
        return True
    if isinstance(e, Add):
        return all(_grows(c) for c in e.children())
    if isinstance(e, Mul):
        return all(_grows(c) and not (isinstance(c, Integer) and c.value < 0) for c in e.children())
    return False


def upper_bound(expr: Expr, bounds: dict[str, int], what: str) -> int:
    """The largest value of ``expr`` with each symbol at most its bound (``bounds``)."""
    if not _grows(expr):
        raise Unsupported(f"{what} has a dim {to_infix(expr)} whose largest value is not planned (only sums and "
                          "products of shape symbols with non-negative factors are)")
    return int(expr.evaluate(bounds))


def run_time_value(ctx, expr: Expr):
    """The Int value of ``expr`` at run time (see the module docstring)."""
    if isinstance(expr, Integer):
        return ctx.scalar("Int", expr.value)
    if isinstance(expr, Symbol):
        return ctx.size_value(expr)
    if isinstance(expr, (Add, Mul)) and _grows(expr):
        op = PRIM_ARITHMETIC["add" if isinstance(expr, Add) else "mul"]
        first, *rest = expr.children()
        acc = run_time_value(ctx, first)
        for term in rest:
            acc = ctx.call(op, {"a": acc, "b": run_time_value(ctx, term)}, [])
        return acc
    raise Unsupported(f"the dim {to_infix(expr)} is not computed at run time (only sums and products of shape "
                      "symbols are)")
