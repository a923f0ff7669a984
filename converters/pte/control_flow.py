"""Control flow: ``torch.cond`` laid out in the one chain as exir's emitter lays it out
(``exir/emit/_emitter.py``, ``_emit_cond``); ``while_loop`` refused, as exir 1.5.1 refuses it.

A cond of n outputs becomes::

        JumpFalse(pred -> F)          pred: a one-element bool tensor, or a SymBool's Bool
        <true branch>   Move(t_i -> out_i), i < n
        JumpFalse(Bool(False) -> E)   always taken
    F:  <false branch>  Move(f_i -> out_i), i < n
    E:  ...

Each branch is its subgraph lowered by a child context (``Ctx.child``) into the same plan, its
placeholders bound to the cond's operands (weights used in a branch are operands: constants
shared by both). The runtime's ``JumpFalseCall`` goes on when its value is a true Bool, or a bool
tensor every element of which is true (so an empty one too); a predicate tensor is refused
unless it has one element, which makes that torch's ``bool(pred)``.

**Memory.** A ``MoveCall`` makes the output's ``EValue`` the branch value's: the same
``TensorImpl``, so its sizes (a dynamic output) and its data. Jumps go forward only, so every
run is a subsequence of the chain's order, and lifetimes over that order (``memory_plan``) are
conservative on every path. An output's true and false values never both hold data in one run,
so they are planned as one storage, and the output itself is planned there too: its bytes are
whichever branch ran, and a static view of the output (which keeps the address planned for the
output and never sees the Move) reads the right ones. That storage lives from its first write
in the true branch to the output's last use. (exir gives the output a storage of its own that
no kernel writes, so its 1.5.1 computes ``cond(...).reshape(...)`` from that storage.)

A branch output that is not a fresh tensor of its branch (an operand, a weight, or a tensor an
earlier output of the branch already is) is copied in the branch (``clone.out``) first: its
storage cannot be shared with the other branch's value. torch 2.13 refuses to export such
branches ("aliasing"); the guard is for programs that have them anyway.
"""

from __future__ import annotations

import math

from ...schema import definitions as d
from ..aten.args import SymRef, TensorRef, bind
from ..aten.lower import lower_graph, output_slots
from ..aten.registry import lowering
from ..errors import NotConverted, Unsupported
from .dtypes import ET_SCALAR_TYPE
from .program import JumpFalse, Move, TensorValue

__all__ = ["cond", "while_loop"]

_BOOL = ET_SCALAR_TYPE[d.ScalarType.BOOL]


@lowering("pte", "higher_order.cond")
def cond(ctx, node):
    a = bind(node, "pred", "true_fn", "false_fn", "operands")
    pred = _predicate(ctx, a[0])
    operands = [_operand(ctx, x) for x in a[3]]
    outs = [ctx.output(node, i) for i in range(_output_count(node))]
    calls = ctx.plan.calls
    to_false = JumpFalse(pred)
    calls.append(to_false)
    true_values = _branch(ctx, a[1], operands, outs)
    to_end = JumpFalse(ctx.scalar("Bool", False))
    calls.append(to_end)
    to_false.destination = len(calls)
    false_values = _branch(ctx, a[2], operands, outs)
    to_end.destination = len(calls)
    for out, t, f in zip(outs, true_values, false_values):
        _share_storage(t, f)
        out.alias_of = t.storage()
    return [o.name for o in outs]


@lowering("pte", "higher_order.while_loop")
def while_loop(ctx, node):
    raise Unsupported("ExecuTorch 1.5.1's exir does not emit while_loop (its emitter lays out cond, map "
                      "and scan only: 'Unsupported control flow operator: while_loop'), so there is no "
                      "program layout of it to follow; the pte target refuses it")


def _output_count(node: d.Node) -> int:
    if any(a.type not in ("as_tensor", "as_tensors") for a in node.outputs):
        raise Unsupported("a cond with an output that is not a tensor: the pte target moves tensors only")
    return len(output_slots(node))


def _predicate(ctx, p):
    """The value the first ``JumpFalseCall`` reads: a one-element bool tensor or a Bool."""
    if isinstance(p, TensorRef):
        t = ctx.tensor(p)
        if t.scalar_type != _BOOL:
            raise Unsupported(f"a cond predicate of ExecuTorch scalar type {t.scalar_type}: the runtime jumps on "
                              "bool tensors only")
        if t.dynamic or math.prod(t.sizes) != 1:
            raise Unsupported(f"a cond predicate of shape {list(t.sizes)}{' (dynamic)' if t.dynamic else ''}: "
                              "one element is torch's bool(pred); the runtime would take all of them")
        return t
    if isinstance(p, SymRef) and p.kind == "bool":
        v = ctx.sym(p)
        if v.kind != "Bool":
            raise Unsupported(f"the cond predicate {p.name!r} is no Bool")
        return v
    raise Unsupported(f"a cond predicate {p!r}: the pte target takes a bool tensor or a SymBool")


def _operand(ctx, x):
    if isinstance(x, TensorRef):
        return ctx.tensor(x)
    if isinstance(x, SymRef) and x.kind == "int":
        return ctx.sym(x)
    raise Unsupported(f"a cond operand {x!r}: the pte target passes tensors and SymInts to a branch")


def _branch(ctx, graph_arg, operands: list, outs: list) -> list:
    """Lower one branch into the plan, then move each of its outputs into the cond's; returns
    the branch's output values."""
    view = ctx.view.subgraph(graph_arg.graph)
    if len(view.input_names) != len(operands) or len(view.output_args) != len(outs):
        raise Unsupported(f"branch {graph_arg.name!r} takes {len(view.input_names)} inputs and returns "
                          f"{len(view.output_args)} values; the cond passes {len(operands)} and has {len(outs)}")
    child = ctx.child(view)
    for placeholder, v in zip(view.input_names, operands):
        key = v.name or v.weight  # a weight's value is known by its placeholder's name
        child.env[placeholder] = key
        child.by_name.setdefault(key, v)
    start = len(ctx.plan.values)
    lower_graph(child)
    made = {id(v) for v in ctx.plan.values[start:]}
    values, storages = [], set()
    for arg, out in zip(view.output_args, outs):
        v = _branch_output(ctx, child, arg, graph_arg.name)
        s = v.storage()
        if id(s) not in made or id(s) in storages or s.weight is not None:
            v = _copy(child, v, arg.value.name)
        storages.add(id(v.storage()))
        ctx.plan.calls.append(Move(v, out))
        values.append(v)
    return values


def _branch_output(ctx, child, arg, branch: str) -> TensorValue:
    if arg.type != "as_tensor":
        raise Unsupported(f"branch {branch!r} returns a {arg.type[3:]}: the pte target moves tensors only")
    name = arg.value.name
    if name in ctx.state.poisoned:
        raise NotConverted(f"{name!r} of branch {branch!r} was not converted")
    v = child.tensor(TensorRef(name))
    if not isinstance(v, TensorValue):
        raise Unsupported(f"{name!r} of branch {branch!r} is no tensor")
    return v


def _copy(child, v: TensorValue, name: str) -> TensorValue:
    """``v`` copied into a fresh tensor of the branch (an operand, a weight or a repeated output)."""
    info = child.view.tensor(name)
    out = child.new_tensor(f"{name}_copy", info.dtype, info.shape, f"the copy of branch output {name!r}")
    return child.call("clone.out", {"self": v}, [out])


def _share_storage(a: TensorValue, b: TensorValue) -> None:
    """Plan ``a`` and ``b`` (values of different branches: never both written in one run) in one
    storage, the larger of their two."""
    sa, sb = a.storage(), b.storage()
    if sa is sb:
        return
    small, big = (sa, sb) if sa.nbytes <= sb.nbytes else (sb, sa)
    small.alias_of = big

