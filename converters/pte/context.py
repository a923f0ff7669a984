"""The PTE target's emission context: what the shared driver (``aten/lower.py``) needs of a
target (``Target``), and the few verbs every lowering uses.

``ctx.tensor(ref)`` is the plan's value of a program tensor (a weight becomes a constant on
first use); ``ctx.output(i)`` a new tensor shaped like the node's i-th output; ``ctx.scratch``
an internal one (a kernel's extra outputs); ``ctx.call(key, args, outs)`` one ``KernelCall``
of the portable kernel ``key`` (``add.out``), its arguments bound by schema name, left-out
ones taking the kernel schema's defaults; ``ctx.child(view)`` the context of a subgraph (a
``cond`` branch) emitting into the same plan. Tensors take the dtypes of ``dtypes.ET_SCALAR_TYPE``;
every call's tensors are checked against the dtypes its kernel takes (``dtypes.check_call``).
"""

from __future__ import annotations

import copy

import numpy as np

from ...schema import definitions as d
from ...serde.codec.symbolic import Integer, Symbol
from ..aten.args import SymRef, TensorRef
from ..aten.graph import ProgramView
from ..aten.lower import LoweringState, Names
from ..errors import ConversionError, Unsupported
from .dtypes import check_call, et_scalar_type, itemsize
from .kernels import NO_DEFAULT, kernel
from .program import Call, ListValue, Plan, ScalarValue, TensorValue
from .symbols import run_time_value, upper_bound

__all__ = ["Ctx"]


class Ctx:
    backend = "pte"

    def __init__(self, view: ProgramView, names: Names, state: LoweringState, bounds: dict[str, int]):
        self.view = view
        self.root = self
        self.env: dict[str, str] = {}
        self.names = names
        self.state = state
        self.bounds = bounds  # shape symbol -> its upper bound
        self.plan = Plan()
        self.by_name: dict[str, object] = {}
        self._marks: list[tuple[int, int]] = []
        self._weights: dict[str, TensorValue] = {}
        self._syms: dict[str, ScalarValue] = {}  # shape symbol (or expression's text) -> its Int at run time
        self._node: d.Node | None = None  # the node being lowered

    # ------------------------------------------------------------ the driver's protocol

    def begin_node(self, node: d.Node) -> int:
        self._node = node
        self._marks.append((len(self.plan.values), len(self.plan.calls)))
        return len(self._marks) - 1

    def end_node(self) -> None:
        pass

    def child(self, view) -> "Ctx":
        """The context of a subgraph of ``view`` (a ``cond`` branch) emitting into the same plan:
        names, weights and state are shared; its ``env`` is its own (the caller binds the
        subgraph's inputs), and so are the run-time shape symbols it finds (a branch may be
        skipped: a ``sym_size`` it computes holds nothing on the other path)."""
        c = copy.copy(self)
        c.view, c.env, c._marks, c._node = view, {}, [], None
        c._syms = dict(self._syms)
        return c

    def made_since(self, mark: int) -> set[str]:
        start = self._marks[mark][0]
        return {v.name for v in self.plan.values[start:] if v.name}

    def discard_since(self, mark: int) -> None:
        vstart, cstart = self._marks[mark]
        gone = set(map(id, self.plan.values[vstart:]))
        del self.plan.values[vstart:]
        del self.plan.calls[cstart:]
        kept = set(map(id, self.plan.calls))
        self.plan.quant_ops[:] = [q for q in self.plan.quant_ops if all(id(c) in kept for c in q.calls)]
        for table in (self.by_name, self._weights, self._syms):
            for k in [k for k, v in table.items() if id(v) in gone]:
                del table[k]

    def rename_since(self, _mark: int, old: str, new: str) -> None:
        """Names are unique across the plan (``Names``): the value is found by name alone."""
        v = self.by_name.pop(old)
        v.name = new
        self.by_name[new] = v

    # ------------------------------------------------------------ values

    def _add(self, v):
        self.plan.add(v)
        if v.name:
            self.by_name[v.name] = v
        return v

    def dims(self, shape, what: str) -> tuple[tuple, bool]:
        """Static sizes, or each symbolic dim's upper bound; and whether any dim is symbolic."""
        out, dynamic = [], False
        for s in shape:
            if isinstance(s, int):
                out.append(s)
            elif isinstance(s, Integer):
                out.append(s.value)
            elif isinstance(s, Symbol):
                out.append(self.bounds[s.name])
                dynamic = True
            else:
                out.append(upper_bound(s, self.bounds, what))
                dynamic = True
        return tuple(out), dynamic

    def new_tensor(self, base: str, dtype, shape, what: str) -> TensorValue:
        st = et_scalar_type(dtype, what)
        sizes, dynamic = self.dims(shape, what)
        return self._add(TensorValue(self.names.fresh(base), st, sizes, itemsize(dtype), dynamic))

    def output(self, node: d.Node, i: int = 0) -> TensorValue:
        """A new tensor shaped like ``node``'s i-th output, of its dtype."""
        names = _tensor_outputs(node)
        info = self.view.tensor(names[i])
        return self.new_tensor(names[i], info.dtype, info.shape, f"output {names[i]!r}")

    def node_dtype(self):
        """The dtype of the current node's first tensor output: an internal tensor's by default."""
        names = _tensor_outputs(self._node) if self._node is not None else []
        if not names:
            raise ConversionError("an internal tensor of a node with no tensor output needs a dtype",
                                  member=self.view.member)
        return self.view.tensor(names[0]).dtype

    def scratch(self, base: str, shape, dtype=None) -> TensorValue:
        """An internal tensor: of ``dtype``, by default the current node's output dtype."""
        return self.new_tensor(base, dtype or self.node_dtype(), shape, f"the internal tensor {base!r}")

    def scratch_sized(self, base: str, sizes: tuple, *, dynamic: bool, dtype=None) -> TensorValue:
        """An internal tensor of the given (upper-bound) sizes, of the current node's dtype by default."""
        dtype = dtype or self.node_dtype()
        st = et_scalar_type(dtype, f"the internal tensor {base!r}")
        return self._add(TensorValue(self.names.fresh(base), st, tuple(sizes), itemsize(dtype), dynamic))

    def view_of(self, base: TensorValue, node: d.Node) -> TensorValue:
        """A tensor sharing ``base``'s storage with the node's output shape (a static reshape).
        A dynamic one cannot be: no kernel would resize it when its base is resized."""
        out = self.output(node)
        if out.dynamic or base.dynamic:
            raise ConversionError(f"a view of dynamic shape ({node.name!r}) must be a kernel call", member=self.view.member)
        out.alias_of = base
        return out

    def declare_input(self, name: str) -> TensorValue:
        info = self.view.tensor(name)
        v = self.new_tensor(name, info.dtype, info.shape, f"input {name!r}")
        self.env[name] = v.name
        return v

    def tensor(self, ref) -> TensorValue:
        if not isinstance(ref, TensorRef):
            raise Unsupported(f"expected a tensor, got {ref!r}")
        name = ref.name
        if name in self.env:
            v = self.by_name[self.env[name]]
        elif name in self.root.view.weights:
            v = self._weights.get(name)
            if v is None:
                info = self.view.tensor(name)
                st = et_scalar_type(info.dtype, f"weight {name!r}")
                v = self._add(TensorValue("", st, tuple(info.shape), itemsize(info.dtype), weight=name))
                self._weights[name] = v
        else:
            raise ConversionError(f"value {name!r} has no converted producer", member=self.view.member)
        if not isinstance(v, TensorValue):
            raise Unsupported(f"{name!r} is not a tensor")
        return v

    def constant_view(self, weight: str, sizes: tuple) -> TensorValue:
        """The weight ``weight``'s bytes as a constant of other (static) sizes, the same count of
        elements: a second tensor reading the one buffer."""
        info = self.view.tensor(weight)
        if int(np.prod(sizes)) != int(np.prod(info.shape)):
            raise ConversionError(f"a view of {weight!r} as {sizes} changes its element count", member=self.view.member)
        st = et_scalar_type(info.dtype, f"weight {weight!r}")
        return self._add(TensorValue("", st, tuple(sizes), itemsize(info.dtype), weight=weight))

    def scalar(self, kind: str, value=None) -> ScalarValue:
        return self._add(ScalarValue(kind, value))

    def number(self, x) -> ScalarValue:
        if isinstance(x, SymRef):
            return self.sym(x)
        if isinstance(x, bool):
            return self.scalar("Bool", x)
        if isinstance(x, int):
            return self.scalar("Int", x)
        if isinstance(x, float):
            return self.scalar("Double", x)
        raise Unsupported(f"{x!r} is not a number")

    def sym(self, ref: SymRef) -> ScalarValue:
        """The Int holding a SymInt value of the program at run time."""
        v = self.by_name.get(self.env.get(ref.name, ""))
        if not isinstance(v, ScalarValue):
            raise Unsupported(f"the SymInt {ref.name!r} has no converted producer")
        return v

    def size_value(self, dim) -> ScalarValue:
        """An Int for one output dim: a literal, the run-time value of a whole shape symbol
        (``sym_size.int`` of the input that carries it, emitted once), or of an expression of
        symbols (``symbols.run_time_value``, emitted once)."""
        if isinstance(dim, (int, Integer)):
            return self.scalar("Int", int(dim))
        if not isinstance(dim, Symbol):  # an expression of symbols, computed once
            v = self._syms.get(str(dim))
            if v is None:
                v = self._syms[str(dim)] = run_time_value(self, dim)
            return v
        v = self._syms.get(dim.name)
        if v is None:
            source = self.root.view.symbol_sources().get(dim.name)
            if source is None:
                raise Unsupported(f"the shape symbol {dim.name} comes from no input dim")
            name, axis = source
            v = self.call("sym_size.int", {"self": self.root.tensor(TensorRef(name)), "dim": axis}, [])
            self._syms[dim.name] = v
        return v

    def holds_symbol(self, out: d.Argument, v: ScalarValue) -> None:
        """``v`` (a ``sym_size`` or SymInt arithmetic result) holds a shape symbol or an expression
        of them: later sizes read it."""
        if out.type == "as_sym_int" and out.value.type == "as_name":
            dim = self.view.sym_ints.get(out.value.value)
            if dim is None or isinstance(dim, (int, Integer)):
                return
            key = dim.name if isinstance(dim, Symbol) else str(dim)
            if key not in self._syms:
                self._syms[key] = v

    def int_list(self, items) -> ListValue:
        return self._add(ListValue("IntList", [self.number(x) if not isinstance(x, ScalarValue) else x
                                               for x in items]))

    # ------------------------------------------------------------ calls

    def _arg(self, a, x):
        t = a.type
        if x is None:
            if "Optional" not in t:
                raise Unsupported(f"argument {a.name} of kernel type {t} cannot be None")
            return self.scalar("Null")
        if isinstance(x, (TensorValue, ScalarValue, ListValue)):
            return x
        if "Optional[Tensor]]" in t or "Tensor?[]" in t:  # None items allowed
            items = [None if r is None else self.tensor(r) if isinstance(r, TensorRef) else r for r in x]
            return self._add(ListValue("OptionalTensorList", items))
        if "Tensor" in t and "List" in t:
            return self._add(ListValue("TensorList", [self.tensor(r) if isinstance(r, TensorRef) else r for r in x]))
        if "Tensor" in t:
            return self.tensor(x)
        if "List[int]" in t or "int[]" in t:
            return self.int_list(x if isinstance(x, (list, tuple)) else [x])
        if "List[float]" in t or "List[bool]" in t:  # stored inline (exir's DoubleList, BoolList)
            kind, cast = ("DoubleList", float) if "float" in t else ("BoolList", bool)
            if any(isinstance(v, SymRef) for v in x):
                raise Unsupported(f"argument {a.name}: a list of symbolic {kind[:-4].lower()}s")
            return self._add(ListValue(kind, [cast(v) for v in x]))
        if "str" in t:
            return self.scalar("String", str(x))
        if t.startswith("float") or "Optional[float]" in t:
            return self.scalar("Double", float(x))
        return self.number(x)

    def call(self, key: str, args: dict, outs: list, *, returns: str = "Int"):
        """One ``KernelCall`` of ``key`` with ``args`` by schema name (left-out ones take the
        kernel's defaults), writing ``outs``; returns what the call returns (its out tensor,
        or for a prim op its new scalar of kind ``returns``: an Int, or a comparison's Bool)."""
        k = kernel(key)
        unknown = set(args) - {a.name for a in k.inputs}
        if unknown:
            raise ConversionError(f"aten::{key} has no argument {sorted(unknown)[0]!r}")
        values, reads, typed = [], [], []
        for a in k.inputs:
            if a.name in args:
                x = args[a.name]
            elif a.default is not NO_DEFAULT and a.default != NO_DEFAULT:
                x = a.default
            else:
                raise ConversionError(f"aten::{key}: argument {a.name!r} has no value and no default")
            v = self._arg(a, x)
            values.append(v)
            if isinstance(v, TensorValue):
                reads.append(v)
                typed.append((a.name, v))
            elif isinstance(v, ListValue) and v.kind in ("TensorList", "OptionalTensorList"):
                reads.extend(t for t in v.items if t is not None)
                typed.extend((a.name, t) for t in v.items if t is not None)
        out_names = [o.name for o in k.outs] if len(k.outs) == len(outs) else [k.outs[0].name] * len(outs)
        typed.extend(zip(out_names, outs))
        check_call(key, _value_name, typed)
        if len(k.outs) == 1 and k.outs[0].type.startswith("List[Tensor]"):  # one list of outs
            values += [self._add(ListValue("TensorList", list(outs))), self._add(ListValue("TensorList", list(outs)))]
        elif len(outs) != len(k.outs):
            raise ConversionError(f"aten::{key} writes {len(k.outs)} tensors, {len(outs)} given")
        elif outs:
            ret = outs[0] if len(outs) == 1 else self._add(ListValue("TensorList", list(outs)))
            values += list(outs) + [ret]
        if outs:
            ret = values[-1]
        else:  # a prim op returning an int
            ret = self._add(ScalarValue(returns, False if returns == "Bool" else 0, self.names.fresh("sym")))
            values.append(ret)
        self.plan.calls.append(Call((k.name, k.overload), values, reads, list(outs)))
        return ret

    def call_inplace(self, key: str, target: TensorValue, args: dict) -> TensorValue:
        """One ``KernelCall`` of the in-place kernel ``key`` (``copy_``) writing ``target``: as exir
        emits it, ``target`` (the schema's mutated ``self``), the other arguments in schema order
        (left-out ones taking their defaults), then ``target`` again as the returned value."""
        k = kernel(key)
        if len(k.outs) != 1 or k.outs[0].name != "self":
            raise ConversionError(f"aten::{key} is not an in-place kernel of self")
        values, reads = [target], []
        for a in k.inputs:
            x = args[a.name] if a.name in args else a.default
            if x is NO_DEFAULT or x == NO_DEFAULT:
                raise ConversionError(f"aten::{key}: argument {a.name!r} has no value and no default")
            v = self._arg(a, x)
            values.append(v)
            if isinstance(v, TensorValue):
                reads.append(v)
        check_call(key, _value_name, [("self", target)] + [(a.name, v) for a, v in zip(k.inputs, values[1:])
                                                              if isinstance(v, TensorValue)])
        self.plan.calls.append(Call((k.name, k.overload), values + [target], reads + [target], [target]))
        return target


def _tensor_outputs(node: d.Node) -> list[str]:
    return [a.value.name for a in node.outputs if a.type == "as_tensor"] or \
           [t.name for a in node.outputs if a.type == "as_tensors" for t in a.value]


def _value_name(t: TensorValue) -> str:
    return t.name or t.weight or "a constant"
