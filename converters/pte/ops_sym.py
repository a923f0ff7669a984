"""SymInt arithmetic on the pte target: ``operator.add``/``sub``/``mul`` of sizes (torch writes them
as ``_operator.*`` nodes, a view's size ``s77 * 16``) as the runtime's integer prim ops
(``executorch_prim::add.Scalar`` ..., ``symbols.PRIM_ARITHMETIC``), what exir emits for them.
Each result is also the run-time value of the expression it stands for, which later sizes read."""

from __future__ import annotations

from ..aten.args import bind
from ..aten.registry import lowering
from .symbols import PRIM_ARITHMETIC


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
