"""Wrapper regions that mean nothing at inference, inlined: ``wrap_with_set_grad_enabled`` (a
``torch.no_grad()`` block, such as a rotary embedding's) and ``wrap_with_autocast`` (its body's
metadata already holds the dtypes autocast chose). The body's nodes are lowered into the program's
plan, in place of the wrapper, with its placeholders bound to the wrapper's operands.

While the body is lowered, ``ctx.view`` is an ``InlinedBody``: the body's nodes and values, the
program's symbols, and no weights or inputs of its own (every value it reads from outside is a
placeholder bound here). A body that writes one of its placeholders in place is refused: the
write would have to reach the operand outside.
"""

from __future__ import annotations

from ..aten import registry
from ..aten.args import TensorRef, bind
from ..aten.graph import GraphView, first_input
from ..aten.lower import lower_graph
from ..aten.registry import lowering
from ..errors import Unsupported


class InlinedBody(GraphView):
    """A subgraph lowered into its program's plan (see the module docstring)."""

    def __init__(self, graph, outer):
        super().__init__(graph, parent=outer, path=outer.path + ".<inlined body>")
        self.outer = outer
        self.weights: dict = {}
        self.user_inputs: list = []

    def symbol_sources(self) -> dict:
        return self.outer.symbol_sources()

    @property
    def ranges(self) -> dict:
        return self.outer.ranges


@lowering("pte", "higher_order.wrap_with_set_grad_enabled", "higher_order.wrap_with_autocast")
def inline_wrapper(ctx, node):
    args = [bind(node)[i] for i in range(len(node.inputs))]
    at = next((i for i, x in enumerate(args) if hasattr(x, "graph")), None)
    if at is None:
        raise Unsupported("a wrapper with no body")
    body = InlinedBody(args[at].graph, ctx.view)
    operands = args[at + 1:]
    if len(operands) != len(body.input_names) or not all(isinstance(x, TensorRef) for x in operands):
        raise Unsupported("a wrapper whose operands are not one tensor per body input")
    for n in body.nodes:
        if registry.is_inplace(n.target) and first_input(n) in body.input_names:
            raise Unsupported(f"a wrapper body that writes its input {first_input(n)!r} in place")
    outer_view, outer_env = ctx.view, dict(ctx.env)
    for placeholder, operand in zip(body.input_names, operands):
        key = ctx.names.fresh(placeholder)
        ctx.by_name[key] = ctx.tensor(operand)
        ctx.env[placeholder] = key
    ctx.view = body
    try:
        lower_graph(ctx)
        outs = [a.value.name if a.type == "as_tensor" else None for a in body.output_args]
        if None in outs or any(o not in ctx.env for o in outs):
            raise Unsupported("the wrapper's body was not converted (its report names the operator)")
        return [ctx.env[o] for o in outs]
    finally:
        ctx.view = outer_view
        ctx.env.clear()
        ctx.env.update(outer_env)
