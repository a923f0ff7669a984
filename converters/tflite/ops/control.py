"""Control flow: ONNX ``If`` -> TFLite IF, ``Loop`` -> WHILE, each body its own subgraph.

A body reads outer values by name; TFLite subgraphs see only their inputs, so every outer
value a body reads (its free variables, nested bodies included) is passed in explicitly, in
one order shared by both branches (IF) or carried through the loop unchanged (WHILE). Outer
constants are materialised inside the body instead. Loop's scan outputs are accumulated
with CONCATENATION along a new first axis (their element shape must be static).
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import helper

from ...errors import Unsupported
from ...onnx.graph_tools import free_vars
from ..core.builtins import default_options
from ..core.emit import Emitter, attrs, compute_type
from ..core.mappers import maps
from ..core.model import NUMPY_OF, Subgraph, Tensor
from ..core.model import TensorType as T

_I32_MAX = np.iinfo(np.int32).max


def _captures(em: Emitter, graphs) -> list[str]:
    """Free variables of ``graphs`` that are values (not constants) of the enclosing scope."""
    names: list[str] = []
    for g in graphs:
        for n in free_vars(g):
            if n not in names and em.const_value(n) is None:
                names.append(n)
    return names


def _body(em: Emitter, g: onnx.GraphProto, name: str, inputs: list[tuple[str, int]]) -> tuple[Emitter, int]:
    """A new subgraph for ``g`` whose inputs are ``(ONNX name, tensor of em to copy the type of)``;
    its nodes are mapped (a node TFLite cannot take makes the whole control-flow node refused)."""
    sub = Subgraph(name)
    child = Emitter(g, sub, parent=em)
    for onnx_name, like in inputs:
        t = em.sub.tensors[like]
        idx = sub.add(Tensor(f"{name}/{onnx_name}", t.dtype, t.shape))
        sub.inputs.append(idx)
        child.bind(onnx_name, idx)
    problems: list[str] = []
    child.map_nodes(lambda node, e: problems.append(f"{node.op_type} ({node.name}): {e.reason}"))
    if problems:
        raise Unsupported(f"its body {name!r} holds ops TFLite cannot take: " + "; ".join(problems[:3]))
    em.subgraphs.append(sub)
    return child, len(em.subgraphs) - 1


@maps("If")
def if_(em: Emitter, node) -> None:
    a = attrs(node)
    then_g, else_g = a["then_branch"], a["else_branch"]
    captured = _captures(em, [then_g, else_g])
    inputs = [(n, em.t(n)) for n in captured]
    outs = [em.out(i) for i in range(len(node.output))]
    index = {}
    for key, g in (("then", then_g), ("else", else_g)):
        child, index[key] = _body(em, g, f"{node.name or node.output[0]}/{key}", inputs)
        used = set(child.sub.inputs)
        for o, parent_out in zip(g.output, outs):
            idx = child.output(o.name, em.dtype_of(parent_out), used)
            child.sub.outputs.append(idx)
    cond = em.t(node.input[0])
    em.op("IF", [cond] + [i for _, i in inputs], outs,
          ("IfOptions", {"then_subgraph_index": index["then"], "else_subgraph_index": index["else"]}))


@maps("Loop")
def loop(em: Emitter, node) -> None:
    """WHILE over [i, max trip count, cond, loop-carried values..., scan accumulators..., captured...]."""
    body = attrs(node)["body"]
    n_carried = len(node.input) - 2
    n_scan = len(body.output) - 1 - n_carried
    ins = list(node.input)
    i0 = em.const(np.array(0, np.int32))
    if ins[0]:
        m = em.tmp(T.INT32, [], "trip_count")
        em.op("RESHAPE", [em.cast(em.t(ins[0]), T.INT32), em.const(np.zeros(0, np.int32))], [m])
    else:
        m = em.const(np.array(_I32_MAX, np.int32))
    c0 = em.t(ins[1]) if ins[1] else em.const(np.array(True))
    c0r = em.tmp(T.BOOL, [], "cond")
    em.op("RESHAPE", [c0, em.const(np.zeros(0, np.int32))], [c0r])
    carried = [em.t(n) for n in ins[2:]]
    accs = [_empty_accumulator(em, body.output[1 + n_carried + k]) for k in range(n_scan)]
    captured = _captures(em, [body])
    state = [i0, m, c0r] + carried + accs + [em.t(n) for n in captured]
    names = ["__iter", "__trip_count", "__cond"] + [f"__v{k}" for k in range(n_carried)] + \
        [f"__scan{k}" for k in range(n_scan)] + captured
    label = node.name or node.output[0]
    cond_index = _loop_cond(em, state, label)
    body_index = _loop_body(em, body, state, names, n_carried, n_scan, captured, label)
    outs = [em.tmp(em.dtype_of(s), em.shape_of(s), "while") for s in state]
    for k in range(n_carried):
        outs[3 + k] = em.out(k)
    for k in range(n_scan):
        outs[3 + n_carried + k] = em.out(n_carried + k)
    em.op("WHILE", state, outs, ("WhileOptions", {"cond_subgraph_index": cond_index, "body_subgraph_index": body_index}))


def _empty_accumulator(em: Emitter, out_vi) -> int:
    elem = out_vi.type.tensor_type
    shape = [d.dim_value if d.HasField("dim_value") else -1 for d in elem.shape.dim] if elem.HasField("shape") else None
    if shape is None or any(d < 0 for d in shape):
        raise Unsupported("Loop scan output whose element shape is not static")
    dtype = compute_type(elem.elem_type, "a Loop scan output")
    acc = em.tmp(dtype, [0] + shape, "scan")
    zero = np.zeros((), NUMPY_OF[dtype])  # FILL's value has the accumulator's own type
    em.op("FILL", [em.const(np.asarray([0] + shape, np.int32)), em.const(zero)], [acc])
    em.sub.tensors[acc].shape = [-1] + shape
    return acc


def _loop_cond(em: Emitter, state: list[int], label: str) -> int:
    sub = Subgraph(f"{label}/cond")
    ins = [sub.add(Tensor(f"{label}/cond/in{k}", em.dtype_of(s), em.shape_of(s))) for k, s in enumerate(state)]
    sub.inputs = ins
    below = sub.add(Tensor(f"{label}/cond/below", T.BOOL, []))
    sub.append_op(_op("LESS", [ins[0], ins[1]], [below]))
    out = sub.add(Tensor(f"{label}/cond/go", T.BOOL, []))
    sub.append_op(_op("LOGICAL_AND", [below, ins[2]], [out]))
    sub.outputs = [out]
    em.subgraphs.append(sub)
    return len(em.subgraphs) - 1


def _op(code, inputs, outputs, options=None):
    from ..core.model import Op

    return Op(code, inputs, outputs, options or default_options(code))


def _loop_body(em: Emitter, body, state, names, n_carried, n_scan, captured, label) -> int:
    onnx_in = [i.name for i in body.input]  # iter, cond_in, v...
    bind = [(onnx_in[0], state[0]), ("__trip_count", state[1]), (onnx_in[1], state[2])]
    bind += [(onnx_in[2 + k], state[3 + k]) for k in range(n_carried)]
    bind += [(names[3 + n_carried + k], state[3 + n_carried + k]) for k in range(n_scan)]
    bind += [(n, state[3 + n_carried + n_scan + k]) for k, n in enumerate(captured)]
    child, index = _body(em, body, f"{label}/body", bind)
    sub, used = child.sub, set(child.sub.inputs)
    it = sub.inputs[0]
    nxt = sub.add(Tensor(f"{label}/body/next_iter", T.INT32, []))
    sub.append_op(_op("ADD", [it, child.const(np.array(1, np.int32))], [nxt]))
    cond_out = child.output(body.output[0].name, T.BOOL, used)
    cond_s = sub.add(Tensor(f"{label}/body/cond", T.BOOL, []))
    sub.append_op(_op("RESHAPE", [cond_out, child.const(np.zeros(0, np.int32))], [cond_s]))
    outs = [nxt, _copy(sub, sub.inputs[1]), cond_s]
    outs += [child.output(body.output[1 + k].name, em.dtype_of(state[3 + k]), used) for k in range(n_carried)]
    for k in range(n_scan):
        y = child.t(body.output[1 + n_carried + k].name)
        row = sub.add(Tensor(f"{label}/body/row{k}", sub.tensors[y].dtype, None))
        sub.append_op(_op("EXPAND_DIMS", [y, child.const(np.array(0, np.int32))], [row]))
        acc = sub.add(Tensor(f"{label}/body/scan{k}", sub.tensors[y].dtype, None))
        sub.append_op(_op("CONCATENATION", [sub.inputs[3 + n_carried + k], row], [acc],
                          ("ConcatenationOptions", {"axis": 0, "fused_activation_function": 0})))
        outs.append(acc)
    outs += [_copy(sub, sub.inputs[3 + n_carried + n_scan + k]) for k in range(len(captured))]
    sub.outputs = outs
    return index


def _copy(sub: Subgraph, idx: int) -> int:
    t = sub.tensors[idx]
    out = sub.add(Tensor(t.name + "/copy", t.dtype, t.shape))
    sub.append_op(_op("CAST", [idx], [out], ("CastOptions", {"in_data_type": t.dtype, "out_data_type": t.dtype})))
    return out


@maps("Constant")
def constant(em: Emitter, node) -> None:
    """A Constant left inside a body (folding runs on the main graph)."""
    from onnx import numpy_helper

    a = node.attribute[0]
    if a.name != "value":
        raise Unsupported(f"Constant with {a.name}")
    arr = numpy_helper.to_array(helper.get_attribute_value(a))
    em.consts[node.output[0]] = arr
