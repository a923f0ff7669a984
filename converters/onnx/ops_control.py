"""Higher-order ops: ``cond`` -> If, ``while_loop`` -> Loop, ``map_impl`` -> Loop over dim 0.

Each body is a schema subgraph lowered by a child ``Ctx`` (through the shared driver,
``lower.lower_graph``) into an ONNX subgraph that reads outer values by name (ONNX
scoping), so weights stay single initializers.
"""

from __future__ import annotations

from onnx import helper

from ..aten.args import TensorRef, bind
from ..aten.dtypes import ST
from ..aten.graph import output_names
from ..aten.lower import lower_graph
from ..aten.registry import lowering
from ..errors import Unsupported
from .context import onnx_type


def _body(ctx, graph, inputs: list[tuple[str, str | None]], name: str):
    """Lower ``graph`` with its placeholders bound to ``inputs`` ((ONNX name, None)) or to
    fresh formal inputs ((None, kind)); returns (child ctx, formal names, output names)."""
    view = ctx.view.subgraph(graph)
    child = ctx.child(view)
    formals = []
    for ph, (actual, st) in zip(view.input_names, inputs):
        if actual is not None:
            child.env[ph] = actual
        else:
            f = child.names.fresh(ph)
            child.env[ph] = f
            formals.append((f, st, ph))
    lower_graph(child)
    outs = []
    for a in view.output_args:
        if a.type != "as_tensor":
            raise Unsupported(f"{name}: subgraph output {a.type}")
        outs.append(child.lookup(a.value.name))
    return child, formals, outs, view


def _graph_proto(child, name, formals, outs, out_types, extra_inputs=()):
    """An ONNX subgraph; outputs that are inputs/outer values get an Identity (ONNX needs
    each subgraph output produced inside it)."""
    nodes = list(child.nodes)
    made = {o for n in nodes for o in n.output}
    out_vis = []
    for o, (st, shape) in zip(outs, out_types):
        if o not in made or o in [x.name for x in out_vis]:
            new = child.names.fresh(o + "_out")
            nodes.append(helper.make_node("Identity", [o], [new], name=new))
            o = new
            made.add(o)
        out_vis.append(helper.make_tensor_value_info(o, onnx_type(st), shape))
    in_vis = list(extra_inputs) + [helper.make_tensor_value_info(f, onnx_type(st), None) for f, st, _ in formals]
    return helper.make_graph(nodes, name, in_vis, out_vis)


def _out_types(ctx, node):
    return [(ctx.view.tensor(n).dtype, None) for n in output_names(node)]


@lowering("onnx", "higher_order.cond")
def cond(ctx, node):
    a = bind(node, "pred", "true_fn", "false_fn", "operands")
    p = a[0]  # a bool tensor (any shape with one element), a SymBool, or a constant
    pred = ctx.t(p, ST.BOOL)
    if isinstance(p, TensorRef) and ctx.rank(p):
        pred = ctx.op("Reshape", pred, ctx.ints([]))  # If wants a scalar
    operands = [ctx.t(x) for x in a[3]]
    types = _out_types(ctx, node)
    branches = []
    for g in (a[1], a[2]):
        child, _, outs, _ = _body(ctx, g.graph, [(o, None) for o in operands], g.name)
        branches.append(_graph_proto(child, ctx.names.fresh(g.name), [], outs, types))
    r = ctx.op("If", pred, then_branch=branches[0], else_branch=branches[1], outputs=len(types))
    return r if isinstance(r, list) else [r]


@lowering("onnx", "higher_order.while_loop")
def while_loop(ctx, node):
    """Loop(M="", cond) with carried = carried_inputs; additional_inputs read by name.
    The cond graph runs once before the loop and again at the end of each body."""
    a = bind(node, "cond_fn", "body_fn", "carried_inputs", "additional_inputs")
    carried = [ctx.t(x) for x in a[2]]
    additional = [ctx.t(x) for x in (a[3] or [])]
    sts = [ctx.dtype(x) for x in a[2]]
    # initial condition, evaluated in the outer graph
    cchild, _, (c0,), _ = _body(ctx, a[0].graph, [(x, None) for x in carried + additional], a[0].name)
    ctx.nodes.extend(cchild.nodes)
    c0 = ctx.op("Reshape", c0, ctx.ints([]))
    # body: formals for carried values, then the condition on the new values
    bchild, formals, bouts, _ = _body(ctx, a[1].graph,
                                      [(None, st) for st in sts] + [(x, None) for x in additional], a[1].name)
    c2child, _, (c1,), _ = _body(bchild, a[0].graph, [(x, None) for x in bouts] + [(x, None) for x in additional],
                                 a[0].name)
    bchild.nodes.extend(c2child.nodes)
    c1 = bchild.op("Reshape", c1, bchild.ints([]))
    it = bchild.names.fresh("iter")
    cin = bchild.names.fresh("cond_in")
    extra = [helper.make_tensor_value_info(it, onnx_type(ST.LONG), []),
             helper.make_tensor_value_info(cin, onnx_type(ST.BOOL), [])]
    body = _graph_proto(bchild, ctx.names.fresh(a[1].name), formals, [c1] + bouts,
                        [(ST.BOOL, [])] + [(st, None) for st in sts], extra_inputs=extra)
    outs = ctx.op("Loop", None, c0, *carried, body=body, outputs=len(carried))
    return outs if isinstance(outs, list) else [outs]


@lowering("onnx", "higher_order.map_impl")
def map_impl(ctx, node):
    """map(f, xs, *args): Loop over xs's first dim, stacking each step's outputs (scan outputs)."""
    a = bind(node, "f", "xs", "pos_args")
    xs = [ctx.t(x) for x in a[1]]
    args = [ctx.t(x) for x in (a[2] or [])]
    n = ctx.op("Squeeze", ctx.shape(xs[0], 0, 1), ctx.ints([0]))
    it = ctx.names.fresh("i")
    cin = ctx.names.fresh("cond_in")
    view = ctx.view.subgraph(a[0].graph)
    child = ctx.child(view)
    phs = view.input_names
    for ph, x in zip(phs[: len(xs)], xs):
        child.env[ph] = child.op("Gather", x, it, axis=0)
    for ph, x in zip(phs[len(xs):], args):
        child.env[ph] = x
    lower_graph(child)
    outs = [child.lookup(o.value.name) for o in view.output_args]
    cout = child.names.fresh("cond_out")
    child.nodes.append(helper.make_node("Identity", [cin], [cout], name=cout))
    types = _out_types(ctx, node)
    extra = [helper.make_tensor_value_info(it, onnx_type(ST.LONG), []),
             helper.make_tensor_value_info(cin, onnx_type(ST.BOOL), [])]
    body = _graph_proto(child, ctx.names.fresh(a[0].name), [], [cout] + outs, [(ST.BOOL, [])] + types,
                        extra_inputs=extra)
    r = ctx.op("Loop", n, ctx.const(True, ST.BOOL), body=body, outputs=len(types))
    return r if isinstance(r, list) else [r]


@lowering("onnx", "higher_order.wrap_with_set_grad_enabled", "higher_order.wrap_with_autocast")
def inline_wrapper(ctx, node):
    """Grad mode and autocast regions mean nothing at inference: inline the body.
    (Autocast would change dtypes, but the body's metadata already carries them.)"""
    args = [bind(node)[i] for i in range(len(node.inputs))]
    gi = next(i for i, x in enumerate(args) if hasattr(x, "graph"))
    g = args[gi].graph
    operands = [ctx.t(x) for x in args[gi + 1:]]
    view = ctx.view.subgraph(g)
    child = ctx.child(view)
    for ph, x in zip(view.input_names, operands):
        child.env[ph] = x
    lower_graph(child)
    ctx.nodes.extend(child.nodes)
    return [child.lookup(o.value.name) for o in view.output_args]
