"""An ExecuTorch ``.pte`` program as Model Explorer graphs, read without torch or executorch.

``pte_graphs(src)`` reads the file with pt2x's checked reader (``converters/pte/reader.py``: every
table, vector and index bounds-checked; a malformed file is a ``Pt2FormatError`` naming the
field; the weights' segments are never read) and draws one graph per execution plan (its id is
the plan's name, ``forward``):

* a node per instruction, in chain order: a ``KernelCall`` labeled by its operator
  (``aten.convolution``, the overload in its attributes), a ``DelegateCall`` by its backend
  (``delegate XnnpackBackend``), a ``MoveCall``, ``JumpFalseCall`` or ``FreeCall`` by its kind; its
  id is ``i<k>`` (the instruction's position, chains one after the other);
* a node per plan input (``input<k>``) and per constant tensor an instruction reads
  (``value<k>``: dtype, sizes and size in bytes; the bytes are never read), and the ``output`` node;
* edges by value: a kernel's last argument is what it writes (exir and pt2x emit ExecuTorch's
  out-variant calls with the returned value last: the out tensor, or a list of them), its other
  tensor arguments are its operands; a delegate writes the planned tensors it passes that nothing
  wrote before; a view (a planned tensor no instruction writes) is read from whatever was last
  written at its memory offset; a tensor list passes each tensor;
* scalar arguments (ints, doubles, bools, int lists) are listed as the instruction's attributes.

``.pte`` files keep no module stack: the graph has no namespaces.
"""

from __future__ import annotations

from ..converters.pte.reader import read_pte
from ..schema import definitions as d
from ..schema.dtypes import row

__all__ = ["pte_graphs"]

def _dtype(v: dict) -> str:
    """A tensor's dtype as the .pt2 graphs name it: ExecuTorch's ScalarType names are those of
    torch's export schema (BYTE, FLOAT, BFLOAT16...), whose one table names them as torch does;
    the quantized types torch's schema lacks (QINT8) keep their own name, in lower case."""
    st = getattr(d.ScalarType, v["dtype"], None)
    return row(st).torch_name if st is not None and st != d.ScalarType.UNKNOWN else v["dtype"].lower()


def _kv(key: str, value) -> dict:
    return {"key": key, "value": str(value)}


def _node(node_id: str, label: str, attrs=(), edges=(), outputs=()) -> dict:
    return {"id": node_id, "label": label, "namespace": "", "subgraphIds": [], "attrs": list(attrs),
            "incomingEdges": list(edges), "outputsMetadata": list(outputs), "inputsMetadata": []}


def _tensor_text(v: dict) -> str:
    return f"{_dtype(v)}[{', '.join(str(s) for s in v['sizes'])}]"


def _value_meta(index: int, v: dict, at: int = 0) -> dict:
    attrs = [_kv("tensor_name", f"value{index}")]
    if v["kind"] == "Tensor":
        attrs += [_kv("tensor_shape", _tensor_text(v)), _kv("shape_dynamism", v["shape_dynamism"])]
    return {"id": str(at), "attrs": attrs}


def _scalar_text(values: list[dict], v: dict) -> str | None:
    """A non-tensor argument as text, or None for a tensor (an edge)."""
    kind = v["kind"]
    if kind in ("Int", "Double", "Bool", "String"):
        return str(v.get("value"))
    if kind == "IntList":
        return "[" + ", ".join(str(values[i].get("value")) for i in v.get("item_values", ())) + "]"
    if kind in ("DoubleList", "BoolList"):
        return f"{kind} of {v['items']}"
    if kind == "Null":
        return "None"
    return None


class _Holders:
    """Which node holds each value: the instruction that wrote it, an input or constant node, or
    (a view: a planned tensor no instruction wrote) what was last written at its memory offset."""

    def __init__(self, values: list[dict]):
        self.values = values
        self.by_value: dict[int, tuple[str, int]] = {}
        self.by_memory: dict[tuple, tuple[str, int]] = {}

    def write(self, index: int, node_id: str, at: int) -> None:
        self.by_value[index] = (node_id, at)
        memory = self.values[index].get("memory")
        if memory:
            self.by_memory[tuple(memory)] = (node_id, at)

    def read(self, index: int) -> tuple[str, int] | None:
        if index in self.by_value:
            return self.by_value[index]
        memory = self.values[index].get("memory")
        return self.by_memory.get(tuple(memory)) if memory else None


def _plan_graph(plan: dict) -> dict:
    values = plan["values"]
    holders = _Holders(values)
    nodes = []
    for k, v in enumerate(plan["inputs"]):
        node_id = f"input{k}"
        holders.write(v["index"], node_id, 0)
        attrs = [_kv("kind", "input"), _kv("value", v["index"])]
        if v["kind"] == "Tensor":
            attrs += [_kv("dtype", _dtype(v)), _kv("sizes", v["sizes"]), _kv("shape_dynamism", v["shape_dynamism"])]
        nodes.append(_node(node_id, f"input {k}", attrs, outputs=[_value_meta(v["index"], v)]))
    for k, ins in enumerate(plan["instruction_list"]):
        nodes += _instruction(k, ins, values, holders)
    out_edges = []
    for j, v in enumerate(plan["outputs"]):
        held = holders.read(v["index"])
        if held is not None:
            out_edges.append({"sourceNodeId": held[0], "sourceNodeOutputId": str(held[1]), "targetNodeInputId": str(j)})
    nodes.append(_node("output", "output", [_kv("values", [v["index"] for v in plan["outputs"]])], out_edges))
    attrs = {"plan": plan["name"] or "", "values": str(plan["value_count"]),
             "instructions": str(plan["instruction_count"]),
             "non_const_buffer_sizes": str(plan["non_const_buffer_sizes"])}
    return {"id": plan["name"] or "plan", "nodes": nodes, "groupNodeAttributes": {"": attrs}}


def _tensors(values: list[dict], index: int) -> list[int]:
    """The tensors an argument passes: itself, or a list's items."""
    v = values[index]
    items = v.get("item_values", ()) if v["kind"] in ("TensorList", "OptionalTensorList") else (index,)
    return [t for t in items if 0 <= t < len(values) and values[t]["kind"] == "Tensor"]


def _written(ins: dict, values: list[dict], holders: _Holders) -> set[int]:
    """The values instruction ``ins`` writes. A kernel's last argument is its returned value (the
    out tensors, a list for several: exir and pt2x emit out-variant calls so); a delegate writes the
    planned tensors it passes that nothing wrote before; a move writes its destination."""
    args = ins["args"]
    if ins["kind"] == "KernelCall" and args:
        return set(_tensors(values, args[-1]))
    if ins["kind"] == "MoveCall":
        return set(_tensors(values, args[1]))
    if ins["kind"] == "DelegateCall":
        return {t for a in args for t in _tensors(values, a) if holders.read(t) is None and not values[t]["constant"]}
    return set()


def _instruction(k: int, ins: dict, values: list[dict], holders: _Holders) -> list[dict]:
    """The node of instruction ``k`` (and of each constant it is the first to read)."""
    node_id, made = f"i{k}", []
    kind = ins["kind"]
    if kind == "KernelCall":
        label = ins["operator"].partition(".")[0].replace("::", ".")
        attrs = [_kv("operator", ins["operator"])]
    elif kind == "DelegateCall":
        label, attrs = f"delegate {ins['delegate']}", [_kv("delegate", ins["delegate"])]
    else:
        label, attrs = kind, ([_kv("destination", f"i{ins['destination']}")] if "destination" in ins else [])
    written = _written(ins, values, holders)
    edges, outputs = [], []
    for a, index in enumerate(ins["args"]):
        text = _scalar_text(values, values[index])
        if text is not None:
            attrs.append(_kv(f"arg{a}", text))
            continue
        for t in _tensors(values, index):
            if t in written:
                continue
            if holders.read(t) is None and values[t]["constant"]:
                made.append(_constant(t, values[t]))
                holders.write(t, made[-1]["id"], 0)
            held = holders.read(t)
            if held is not None:
                edges.append({"sourceNodeId": held[0], "sourceNodeOutputId": str(held[1]), "targetNodeInputId": str(a)})
    for t in sorted(written, key=lambda t: [x for a in ins["args"] for x in _tensors(values, a)].index(t)):
        holders.write(t, node_id, len(outputs))
        outputs.append(_value_meta(t, values[t], len(outputs)))
    return made + [_node(node_id, label, attrs, edges, outputs)]


def _constant(index: int, v: dict) -> dict:
    return _node(f"value{index}", "constant", [_kv("kind", "constant tensor"), _kv("dtype", _dtype(v)),
                                                _kv("sizes", v["sizes"]), _kv("size", f"{v['nbytes']} bytes")],
                 outputs=[_value_meta(index, v)])


def pte_graphs(src) -> list[dict]:
    """One graph per execution plan of the ``.pte`` at ``src`` (a path or its bytes)."""
    return [_plan_graph(plan) for plan in read_pte(src, detail=True)["execution_plans"]]
