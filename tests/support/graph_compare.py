"""Compare two torch ``ExportedProgram``s node by node (shared by the bridge test suites).

``compare_programs(a, b)`` returns a list of differences (empty when equal):
  * graphs, subgraphs included: node count, op, name, target, args/kwargs (nodes by
    name), ``val`` (tensor shape/stride with symbols by name, dtype, device,
    requires_grad; symbolic scalars by expression), ``unbacked_bindings``, and the
    metadata torch serializes (stack_trace, nn_module_stack, source_fn_stack, torch_fn,
    custom);
  * dialect and verifiers;
  * graph signature, range constraints (by symbol name), module call graph FQNs and
    signatures, state dict / constants (keys, kinds, shape, stride, dtype, values,
    requires_grad).
``assert_programs_equal(a, b)`` raises ``AssertionError`` listing the first differences.
``outputs_equal(x, y)`` is torch.equal over pytrees, NaN-aware, dtype-strict.
"""

from __future__ import annotations

import operator
from typing import Any

import torch
import torch.utils._pytree as pytree

META_KEYS = ("stack_trace", "nn_module_stack", "source_fn_stack", "torch_fn", "custom")


def _fn_name(fn) -> str:
    if isinstance(fn, str):
        return fn
    mod = getattr(fn, "__module__", "") or ""
    if mod.startswith("torch._ops"):
        mod = mod.replace("torch._ops", "torch.ops")
    return f"{mod}.{getattr(fn, '__name__', repr(fn))}"


def _val(v) -> Any:
    """A comparable description of a ``val`` entry."""
    if isinstance(v, torch.Tensor):
        return (
            "tensor",
            tuple(str(s) for s in v.shape),
            tuple(str(s) for s in v.stride()),
            str(v.storage_offset()),
            v.dtype,
            v.device.type,
            v.requires_grad,
        )
    if isinstance(v, (torch.SymInt, torch.SymFloat, torch.SymBool)):
        return (type(v).__name__, str(v.node.expr))
    if isinstance(v, (list, tuple)):
        return (type(v).__name__, tuple(_val(x) for x in v))
    if isinstance(v, dict):
        return ("dict", tuple((k, _val(x)) for k, x in v.items()))
    if hasattr(v, "class_fqn"):
        return ("custom_obj", v.name, v.class_fqn)
    return ("const", repr(v))


def _node_id(n: torch.fx.Node):
    # A subgraph's get_attr node is known by its target: the format stores the target
    # only (the node may have been named submod_3 for target submod_1).
    return ("attr", n.target) if n.op == "get_attr" else n.name


def _arg(a) -> Any:
    if isinstance(a, torch.fx.Node):
        return ("node", _node_id(a))
    if isinstance(a, (list, tuple)):
        return (type(a).__name__, tuple(_arg(x) for x in a))
    if isinstance(a, dict):
        return ("dict", tuple((k, _arg(x)) for k, x in a.items()))
    if isinstance(a, float) and a != a:
        return ("nan",)
    if isinstance(a, (torch.SymInt, torch.SymFloat, torch.SymBool)):
        return ("sym", str(a.node.expr))
    return (type(a).__name__, a if isinstance(a, (int, float, bool, str, type(None), torch.dtype, torch.device, torch.layout, torch.memory_format)) else _fn_name(a))


def _meta(node: torch.fx.Node) -> dict:
    m = node.meta
    out = {}
    for k in META_KEYS:
        v = m.get(k)
        if k == "nn_module_stack":
            v = {kk: (p, t if isinstance(t, str) else _fn_name(t)) for kk, (p, t) in (v or {}).items()} or None
        elif k == "source_fn_stack":
            v = [(n, _fn_name(f)) for n, f in v] if v else None
        elif k == "torch_fn":
            v = tuple(v) if v else None
        else:
            v = v or None
        out[k] = v
    return out


def _meta_is_serialized(node: torch.fx.Node) -> bool:
    """False for a getitem unpacking a multi-output node whose metadata differs from that
    node's: the format stores no getitem nodes, a loader gives them their producer's."""
    if node.target is operator.getitem and isinstance(node.args[0], torch.fx.Node):
        return _meta(node) == _meta(node.args[0])
    return True


def compare_graph_modules(a: torch.fx.GraphModule, b: torch.fx.GraphModule, where: str = "graph", *, meta: bool = True) -> list[str]:
    diffs: list[str] = []
    na, nb = list(a.graph.nodes), list(b.graph.nodes)
    if len(na) != len(nb):
        diffs.append(f"{where}: {len(na)} vs {len(nb)} nodes: {[n.name for n in na]} vs {[n.name for n in nb]}")
        return diffs
    for x, y in zip(na, nb):
        w = f"{where}.{x.name}"
        if (x.op, _node_id(x)) != (y.op, _node_id(y)):
            diffs.append(f"{w}: op/name {x.op}:{x.name} vs {y.op}:{y.name}")
            continue
        if x.target != y.target and _fn_name(x.target) != _fn_name(y.target):
            diffs.append(f"{w}: target {x.target} vs {y.target}")
        if _arg(x.args) != _arg(y.args):
            diffs.append(f"{w}: args {_arg(x.args)} vs {_arg(y.args)}")
        if _arg(dict(x.kwargs)) != _arg(dict(y.kwargs)):
            diffs.append(f"{w}: kwargs {dict(x.kwargs)} vs {dict(y.kwargs)}")
        # torch's writer drops the output node's val and its loader recomputes it; get_attr
        # nodes of subgraphs carry no val.
        skip_val = x.op == "get_attr" or (x.op == "output" and ("val" not in x.meta or "val" not in y.meta))
        if not skip_val and _val(x.meta.get("val")) != _val(y.meta.get("val")):
            diffs.append(f"{w}: val {_val(x.meta.get('val'))} vs {_val(y.meta.get('val'))}")
        # get_attr nodes of subgraphs get their higher-order op's metadata on load (torch too)
        ua = {str(k): str(v) for k, v in (x.meta.get("unbacked_bindings") or {}).items()}
        ub = {str(k): str(v) for k, v in (y.meta.get("unbacked_bindings") or {}).items()}
        if ua != ub:
            diffs.append(f"{w}: unbacked_bindings {ua} vs {ub}")
        if meta and x.op not in ("placeholder", "output", "get_attr") and _meta_is_serialized(x):
            ma, mb = _meta(x), _meta(y)
            for k in META_KEYS:
                if ma[k] != mb[k]:
                    diffs.append(f"{w}: meta[{k!r}] {ma[k]!r} vs {mb[k]!r}")
        if x.op == "get_attr":
            sa, sb = getattr(a, x.target, None), getattr(b, y.target, None)
            if isinstance(sa, torch.fx.GraphModule) or isinstance(sb, torch.fx.GraphModule):
                if not (isinstance(sa, torch.fx.GraphModule) and isinstance(sb, torch.fx.GraphModule)):
                    diffs.append(f"{w}: subgraph {type(sa).__name__} vs {type(sb).__name__}")
                else:
                    diffs += compare_graph_modules(sa, sb, f"{w}", meta=meta)
    return diffs


def _tensor_diff(x, y, w) -> list[str]:
    if not isinstance(x, torch.Tensor) or not isinstance(y, torch.Tensor):
        return [] if type(x) is type(y) else [f"{w}: {type(x).__name__} vs {type(y).__name__}"]
    out = []
    if isinstance(x, torch.nn.Parameter) != isinstance(y, torch.nn.Parameter):
        out.append(f"{w}: Parameter {isinstance(x, torch.nn.Parameter)} vs {isinstance(y, torch.nn.Parameter)}")
    if (x.shape, x.stride(), x.dtype, x.requires_grad) != (y.shape, y.stride(), y.dtype, y.requires_grad):
        out.append(f"{w}: {tuple(x.shape)}/{x.stride()}/{x.dtype}/rg={x.requires_grad} vs {tuple(y.shape)}/{y.stride()}/{y.dtype}/rg={y.requires_grad}")
    elif not tensors_equal(x.detach(), y.detach()):
        out.append(f"{w}: values differ")
    return out


def compare_programs(a, b, *, meta: bool = True) -> list[str]:
    diffs = compare_graph_modules(a.graph_module, b.graph_module, meta=meta)
    if a.dialect != b.dialect or [v.dialect for v in a.verifiers] != [v.dialect for v in b.verifiers]:
        diffs.append(f"dialect {a.dialect} {[v.dialect for v in a.verifiers]} vs {b.dialect} {[v.dialect for v in b.verifiers]}")
    if str(a.graph_signature) != str(b.graph_signature):
        diffs.append(f"signature:\n{a.graph_signature}\nvs\n{b.graph_signature}")
    ra = {str(k): (str(v.lower), str(v.upper)) for k, v in a.range_constraints.items()}
    rb = {str(k): (str(v.lower), str(v.upper)) for k, v in b.range_constraints.items()}
    if ra != rb:
        diffs.append(f"range_constraints {ra} vs {rb}")
    ma = [(e.fqn, str(e.signature) if e.signature else None) for e in a.module_call_graph]
    mb = [(e.fqn, str(e.signature) if e.signature else None) for e in b.module_call_graph]
    if ma != mb:
        diffs.append(f"module_call_graph {ma} vs {mb}")
    for label, sa, sb in (("state_dict", a.state_dict, b.state_dict), ("constants", a.constants, b.constants)):
        if set(sa) != set(sb):
            diffs.append(f"{label} keys {sorted(sa)} vs {sorted(sb)}")
            continue
        for k in sa:
            diffs += _tensor_diff(sa[k], sb[k], f"{label}[{k!r}]")
    return diffs


def assert_programs_equal(a, b, *, meta: bool = True, limit: int = 15) -> None:
    diffs = compare_programs(a, b, meta=meta)
    if diffs:
        raise AssertionError(f"{len(diffs)} differences:\n" + "\n".join(diffs[:limit]))


def tensors_equal(x: torch.Tensor, y: torch.Tensor) -> bool:
    if x.dtype != y.dtype or x.shape != y.shape:
        return False
    if x.dtype.is_floating_point or x.dtype.is_complex:
        xn, yn = torch.isnan(x), torch.isnan(y)
        if not torch.equal(xn, yn):
            return False
        return torch.equal(torch.where(xn, torch.zeros_like(x), x), torch.where(yn, torch.zeros_like(y), y))
    return torch.equal(x, y)


def outputs_equal(x, y) -> bool:
    """Bit-equal outputs (pytrees of tensors and Python values), NaN-aware."""
    fx, sx = pytree.tree_flatten(x)
    fy, sy = pytree.tree_flatten(y)
    if sx != sy or len(fx) != len(fy):
        return False
    for a, b in zip(fx, fy):
        if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
            if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and tensors_equal(a, b)):
                return False
        elif a != b and not (a != a and b != b):
            return False
    return True
