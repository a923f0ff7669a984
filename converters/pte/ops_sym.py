"""SymInt arithmetic and comparisons on the pte target, as the runtime's ``executorch_prim`` ops
(exir's mapping, ``exir/passes/executorch_prim_ops_registry.py``):

* ``operator.add``/``sub``/``mul`` of sizes (torch writes them as ``_operator.*`` nodes, a view's
  size ``s77 * 16``): ``executorch_prim::add.Scalar`` ... (``symbols.PRIM_ARITHMETIC``). Each
  result is also the run-time value of the expression it stands for, which later sizes read.
* ``_operator.gt`` and its kin (how torch spells ``x.shape[0] > 4``): ``executorch_prim::gt.Scalar``
  and so on, which write a Bool ``EValue``: the SymBool a ``cond`` on a dynamic dim jumps on
  (``control_flow.py``).
"""

from __future__ import annotations

from ..aten.args import SymRef, bind
from ..aten.registry import lowering
from ..errors import Unsupported
from .symbols import PRIM_ARITHMETIC

_COMPARISONS = ("eq", "gt", "lt", "ge", "le")  # the executorch_prim comparisons 1.5.1 registers


def _arithmetic(op: str):
    def lower(ctx, node):
        a = bind(node)
        v = ctx.call(PRIM_ARITHMETIC[op], {"a": ctx.number(a.a), "b": ctx.number(a.b)}, [])
        ctx.holds_symbol(node.outputs[0], v)
        return v.name

    lower.__name__ = op
    return lower


for _op in PRIM_ARITHMETIC:
    lowering("pte", f"_operator.{_op}")(_arithmetic(_op))


def _operand(ctx, x):
    """A SymInt (its run-time Int) or an int literal; anything else is refused."""
    if isinstance(x, SymRef) and x.kind == "int":
        return ctx.sym(x)
    if isinstance(x, int) and not isinstance(x, bool):
        return ctx.number(x)
    raise Unsupported(f"a comparison of {x!r}: the pte target compares SymInts and ints only")


def _comparison(op: str):
    def lower(ctx, node):
        a = bind(node, "a", "b")
        args = {"a": _operand(ctx, a[0]), "b": _operand(ctx, a[1])}
        return ctx.call(f"executorch_prim::{op}.Scalar", args, [], returns="Bool").name

    lower.__name__ = f"sym_{op}"
    return lower


for _op in _COMPARISONS:
    lowering("pte", f"_operator.{_op}")(_comparison(_op))
