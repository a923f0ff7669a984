"""Mutations of ONNX models, for ``fuzz/fuzz.py --onnx`` (the TFLite target's ONNX input).

A case is one of the base models (``base_models``: pt2x's own ``to_onnx`` output of committed
fixtures at two opsets, and small graphs built here with ``onnx.helper`` the way exporters write
them: convolutions, dynamic reshapes, ``If``/``Loop`` bodies, constant-shape ops) with one to
three mutations from ``random.Random(f"onnx:{seed}:{index}")`` alone, so
``make_case(seed, index, fixtures)`` gives the same bytes every time (``--replay``).

Mutations edit the ``ModelProto`` (attributes deleted, retyped, out of range; dims negative,
zero, huge; initializers whose bytes do not match their dims or type; missing inputs, cycles,
duplicate names, unknown ops and domains, odd opset imports; broken subgraph bodies; external
data at locations inside, beside (a symlink) and outside the model's folder; constants that ask
for huge tensors; graphs with very many nodes or deeply nested bodies; hostile work for the
folding of constants: pools with huge windows, GridSample over large grids, ConstantOfShape
chains worth gigabytes; external data lying about its size: dims past the file, lengths past the
file or the dims, offsets past the end) or, last, its bytes (truncated, flipped, framed, garbage).

A case runs in a folder ``case_folder`` lays out: the model is ``model/model.onnx`` next to
``model/weights.bin`` (real external data), ``model/link.bin`` (a symlink to ``outside.bin``
one level up) and ``outside.bin``. ``outside_locations`` names the locations a model reads
from outside its folder: converting such a model must be refused.
"""

from __future__ import annotations

import os
import random
from dataclasses import dataclass, field
from typing import Callable

import numpy as np
import onnx
from onnx import AttributeProto, TensorProto, helper, numpy_helper

__all__ = ["OnnxCase", "make_case", "base_models", "case_folder", "outside_locations", "parse", "MODEL_NAME"]

MODEL_NAME = "model.onnx"
_WEIGHTS = "weights.bin"
_WEIGHT_BYTES = 1 << 16
_MAX_STACK = 3
_BASE_FIXTURES = "torch-2.13.0"  # pt2x's ONNX of these fixtures are bases
_HUGE = (1 << 31, 1 << 40, (1 << 63) - 1, 10**6)
_ODD_INTS = (-1, 0, -(1 << 40), 1 << 31, 1 << 40, 10**6, 7)


@dataclass
class OnnxCase:
    """A generated case: the model's bytes, the base it came from, the mutations applied."""

    data: bytes
    fixture: str
    steps: list[str] = field(default_factory=list)


# ---------------------------------------------------------------------------- the folder


def case_folder(scratch: str) -> str:
    """``scratch/onnx-<pid>/model``, laid out once per process (see the module docstring)."""
    top = os.path.join(scratch, f"onnx-{os.getpid()}")
    folder = os.path.join(top, "model")
    if not os.path.isdir(folder):
        os.makedirs(folder)
        with open(os.path.join(folder, _WEIGHTS), "wb") as f:
            f.write(np.ones(_WEIGHT_BYTES // 4, np.float32).tobytes())
        with open(os.path.join(top, "outside.bin"), "wb") as f:
            f.write(np.full(_WEIGHT_BYTES // 4, 2.0, np.float32).tobytes())
        os.symlink(os.path.join("..", "outside.bin"), os.path.join(folder, "link.bin"))
    return folder


_LOCATIONS = (_WEIGHTS, _WEIGHTS, "link.bin", "../outside.bin", "sub/../../outside.bin", "/etc/hostname",
              "/dev/zero", "", ".", "missing.bin", "weights.bin\x00.txt", "./weights.bin")


def outside_locations(data: bytes, folder: str) -> list[str]:
    """External-data locations of the model in ``data`` that resolve outside ``folder``."""
    m = onnx.ModelProto()
    try:
        m.ParseFromString(data)
    except Exception:  # noqa: BLE001 - not parseable: it reads nothing
        return []
    root = os.path.realpath(folder)
    out = []
    for g in _graphs(m.graph):
        for t in g.initializer:
            if t.data_location != TensorProto.EXTERNAL:
                continue
            loc = next((e.value for e in t.external_data if e.key == "location"), "")
            if not loc or not isinstance(loc, str) or "\x00" in loc:  # not a file name: nothing is read
                continue
            path = os.path.realpath(os.path.join(root, loc))
            if os.path.commonpath([root, path]) != root:
                out.append(loc)
    return out


# ---------------------------------------------------------------------------- base models


def _vi(name, elem, shape):
    return helper.make_tensor_value_info(name, elem, shape)


def _cnn() -> onnx.ModelProto:
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.standard_normal((4, 3, 3, 3)).astype(np.float32), "w")
    b = numpy_helper.from_array(np.zeros(4, np.float32), "b")
    fw = numpy_helper.from_array(rng.standard_normal((4, 2)).astype(np.float32), "fw")
    nodes = [
        helper.make_node("Conv", ["x", "w", "b"], ["c"], name="conv", pads=[1, 1, 1, 1], strides=[1, 1]),
        helper.make_node("Relu", ["c"], ["r"], name="relu"),
        helper.make_node("MaxPool", ["r"], ["p"], name="pool", kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("GlobalAveragePool", ["p"], ["g"], name="gap"),
        helper.make_node("Flatten", ["g"], ["f"], name="flatten", axis=1),
        helper.make_node("Gemm", ["f", "fw"], ["y"], name="fc", transB=0),
        helper.make_node("Softmax", ["y"], ["z"], name="softmax", axis=-1),
    ]
    g = helper.make_graph(nodes, "cnn", [_vi("x", TensorProto.FLOAT, ["N", 3, 8, 8])],
                          [_vi("z", TensorProto.FLOAT, ["N", 2])], [w, b, fw])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])


def _dynamic_reshape() -> onnx.ModelProto:
    wt = numpy_helper.from_array(np.arange(16, dtype=np.float32).reshape(4, 4), "wt")
    nodes = [
        helper.make_node("MatMul", ["x", "wt"], ["m"], name="matmul"),
        helper.make_node("Shape", ["m"], ["s"], name="shape"),
        helper.make_node("Constant", [], ["i0"], name="c0", value=numpy_helper.from_array(np.array([0], np.int64))),
        helper.make_node("Gather", ["s", "i0"], ["n"], name="gather", axis=0),
        helper.make_node("Constant", [], ["rest"], name="c1", value=numpy_helper.from_array(np.array([2, 2], np.int64))),
        helper.make_node("Concat", ["n", "rest"], ["shp"], name="concat", axis=0),
        helper.make_node("Reshape", ["m", "shp"], ["r"], name="reshape"),
        helper.make_node("Transpose", ["r"], ["t"], name="transpose", perm=[0, 2, 1]),
        helper.make_node("ReduceSum", ["t"], ["y"], name="reduce", keepdims=0),
    ]
    g = helper.make_graph(nodes, "dyn", [_vi("x", TensorProto.FLOAT, ["B", 4])], [_vi("y", TensorProto.FLOAT, None)],
                          [wt])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def _control_flow() -> onnx.ModelProto:
    one = numpy_helper.from_array(np.array(1.0, np.float32), "one")
    then_g = helper.make_graph([helper.make_node("Add", ["x", "one"], ["t_out"], name="then_add")], "then", [],
                               [_vi("t_out", TensorProto.FLOAT, [2, 3])])
    else_g = helper.make_graph([helper.make_node("Neg", ["x"], ["e_out"], name="else_neg")], "else", [],
                               [_vi("e_out", TensorProto.FLOAT, [2, 3])])
    body = helper.make_graph(
        [helper.make_node("Identity", ["cond_in"], ["cond_out"], name="body_cond"),
         helper.make_node("Mul", ["acc_in", "x"], ["acc_out"], name="body_mul")],
        "body", [_vi("i", TensorProto.INT64, []), _vi("cond_in", TensorProto.BOOL, []),
                 _vi("acc_in", TensorProto.FLOAT, [2, 3])],
        [_vi("cond_out", TensorProto.BOOL, []), _vi("acc_out", TensorProto.FLOAT, [2, 3])])
    trip = numpy_helper.from_array(np.array(3, np.int64), "trip")
    cond = numpy_helper.from_array(np.array(True), "cond")
    nodes = [
        helper.make_node("ReduceSum", ["x"], ["s"], name="sum", keepdims=0),
        helper.make_node("Greater", ["s", "one"], ["p"], name="greater"),
        helper.make_node("If", ["p"], ["y"], name="if", then_branch=then_g, else_branch=else_g),
        helper.make_node("Loop", ["trip", "cond", "y"], ["z"], name="loop", body=body),
    ]
    g = helper.make_graph(nodes, "cf", [_vi("x", TensorProto.FLOAT, [2, 3])], [_vi("z", TensorProto.FLOAT, [2, 3])],
                          [one, trip, cond])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])


def _constant_shapes() -> onnx.ModelProto:
    inits = [numpy_helper.from_array(np.array([2, 3], np.int64), "shape"),
             numpy_helper.from_array(np.array([1, 2], np.int64), "reps"),
             numpy_helper.from_array(np.array([0, 1, 0, 1], np.int64), "pads"),
             numpy_helper.from_array(np.array([1, 0], np.int64), "idx")]
    nodes = [
        helper.make_node("ConstantOfShape", ["shape"], ["k"], name="cos",
                         value=numpy_helper.from_array(np.array([0.5], np.float32))),
        helper.make_node("Tile", ["k", "reps"], ["tk"], name="tile"),
        helper.make_node("Expand", ["x", "shape"], ["ex"], name="expand"),
        helper.make_node("Tile", ["ex", "reps"], ["tx"], name="tile_x"),
        helper.make_node("Add", ["tx", "tk"], ["a"], name="add"),
        helper.make_node("Pad", ["a", "pads"], ["pd"], name="pad", mode="constant"),
        helper.make_node("Gather", ["pd", "idx"], ["y"], name="gather", axis=0),
        helper.make_node("Cast", ["y"], ["yc"], name="cast", to=TensorProto.FLOAT16),
        helper.make_node("Cast", ["yc"], ["z"], name="cast_back", to=TensorProto.FLOAT),
    ]
    g = helper.make_graph(nodes, "consts", [_vi("x", TensorProto.FLOAT, [1, 3])], [_vi("z", TensorProto.FLOAT, None)],
                          inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])


def _external_weights() -> onnx.ModelProto:
    """A MatMul whose weight is read from ``weights.bin`` beside the model (as torch.onnx writes)."""
    w = TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[4, 8], data_location=TensorProto.EXTERNAL)
    for k, v in (("location", _WEIGHTS), ("offset", "0"), ("length", str(4 * 8 * 4))):
        w.external_data.add(key=k, value=v)
    nodes = [helper.make_node("MatMul", ["x", "w"], ["y"], name="matmul"),
             helper.make_node("Tanh", ["y"], ["z"], name="tanh")]
    g = helper.make_graph(nodes, "ext", [_vi("x", TensorProto.FLOAT, ["B", 4])], [_vi("z", TensorProto.FLOAT, ["B", 8])],
                          [w])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])


_BUILT: tuple[tuple[str, Callable[[], onnx.ModelProto]], ...] = (
    ("built:cnn", _cnn), ("built:dynamic_reshape", _dynamic_reshape), ("built:control_flow", _control_flow),
    ("built:constant_shapes", _constant_shapes), ("built:external_weights", _external_weights),
)
_BASES: dict[tuple, list[tuple[str, bytes]]] = {}


def base_models(fixtures: list[str]) -> list[tuple[str, bytes]]:
    """(name, serialized ModelProto) of every base: the built graphs, then ``to_onnx`` of the
    ``torch-2.13.0`` fixtures at the default opset and at 18 (those it converts). Memoised."""
    key = tuple(fixtures)
    if key not in _BASES:
        out = [(name, build().SerializeToString()) for name, build in _BUILT]
        from pt2x.converters import to_onnx
        from pt2x.serde.errors import Pt2Error

        for f in fixtures:
            if f"{os.sep}{_BASE_FIXTURES}{os.sep}" not in f:
                continue
            for opset in (None, 18):
                try:
                    m = to_onnx(f) if opset is None else to_onnx(f, opset=opset)
                except Pt2Error:
                    continue
                out.append((f"{os.path.basename(f)}@{opset or 'default'}", m.SerializeToString()))
        _BASES[key] = out
    return _BASES[key]


# ---------------------------------------------------------------------------- walking a model


def _graphs(g: onnx.GraphProto):
    yield g
    for n in g.node:
        for a in n.attribute:
            if a.type == AttributeProto.GRAPH and a.HasField("g"):
                yield from _graphs(a.g)
            for sg in a.graphs:
                yield from _graphs(sg)


def _nodes(m: onnx.ModelProto) -> list[onnx.NodeProto]:
    return [n for g in _graphs(m.graph) for n in g.node]


def _values(m: onnx.ModelProto) -> list[onnx.ValueInfoProto]:
    return [v for g in _graphs(m.graph) for v in (*g.input, *g.output, *g.value_info)]


def _inits(m: onnx.ModelProto) -> list[tuple[onnx.GraphProto, TensorProto]]:
    return [(g, t) for g in _graphs(m.graph) for t in g.initializer]


def _array(t: TensorProto) -> np.ndarray | None:
    """The tensor's values, or None where an earlier mutation made them unreadable."""
    try:
        return numpy_helper.to_array(t).copy()
    except Exception:  # noqa: BLE001 - a mutated tensor: numpy/onnx errors of every kind
        return None


def _node_label(n) -> str:
    return f"{n.name or '?'} ({n.op_type})"


# ---------------------------------------------------------------------------- model mutations


def _attr_delete(rng, m):
    cands = [n for n in _nodes(m) if n.attribute]
    if not cands:
        return None
    n = rng.choice(cands)
    a = n.attribute[rng.randrange(len(n.attribute))]
    name = a.name
    n.attribute.remove(a)
    return f"attribute {name!r} of {_node_label(n)} deleted"


_ATTR_TYPES = [t for t in AttributeProto.AttributeType.values() if t]


def _attr_retype(rng, m):
    cands = [n for n in _nodes(m) if n.attribute]
    if not cands:
        return None
    n = rng.choice(cands)
    a = rng.choice(list(n.attribute))
    t = rng.choice(_ATTR_TYPES)
    old = a.type
    a.type = t
    if rng.random() < 0.5:  # the field the new type names, with a value of that type
        if t == AttributeProto.INT:
            a.i = rng.choice(_ODD_INTS)
        elif t == AttributeProto.FLOAT:
            a.f = rng.choice([float("nan"), float("inf"), -1.0, 1e30])
        elif t == AttributeProto.STRING:
            a.s = rng.choice([b"", b"\xff\xfe", b"NCHW", b"x" * 1000])
        elif t == AttributeProto.INTS:
            a.ints[:] = [rng.choice(_ODD_INTS) for _ in range(rng.randrange(0, 6))]
        elif t == AttributeProto.FLOATS:
            a.floats[:] = [float("nan")] * rng.randrange(0, 4)
        elif t == AttributeProto.TENSOR:
            a.t.CopyFrom(TensorProto(name="t", data_type=TensorProto.FLOAT, dims=[rng.choice([0, 3, 1 << 20])]))
    return f"attribute {a.name!r} of {_node_label(n)} retyped {old} -> {t}"


def _attr_value(rng, m):
    cands = [(n, a) for n in _nodes(m) for a in n.attribute
             if a.type in (AttributeProto.INT, AttributeProto.INTS, AttributeProto.FLOAT, AttributeProto.STRING)]
    if not cands:
        return None
    n, a = rng.choice(cands)
    if a.type == AttributeProto.INT:
        a.i = rng.choice(_ODD_INTS + (a.i + 1, a.i - 1, 2, 3))
        v = a.i
    elif a.type == AttributeProto.INTS:
        k = rng.choice([0, 1, len(a.ints), len(a.ints) + 1, len(a.ints) * 2 + 1, 9])
        a.ints[:] = [rng.choice(_ODD_INTS + (0, 1, 2, 3)) for _ in range(k)]
        v = list(a.ints)
    elif a.type == AttributeProto.FLOAT:
        a.f = rng.choice([float("nan"), float("-inf"), 0.0, -1e30])
        v = a.f
    else:
        a.s = rng.choice([b"", b"nonsense", b"\xc3", b"CRD", b"DCR", b"reflect", b"edge", b"wrap", b"cubic"])
        v = a.s
    return f"attribute {a.name!r} of {_node_label(n)} set to {v!r}"[:200]


_ATTR_NAMES = ("axis", "axes", "perm", "keepdims", "to", "group", "pads", "strides", "dilations", "kernel_shape",
               "transA", "transB", "mode", "value", "batch_dims", "ceil_mode", "auto_pad", "blocksize", "alpha")


def _attr_add(rng, m):
    nodes = _nodes(m)
    if not nodes:
        return None
    n = rng.choice(nodes)
    name = rng.choice(_ATTR_NAMES + ("unknown_attr",))
    v = rng.choice([rng.choice(_ODD_INTS), [rng.choice(_ODD_INTS) for _ in range(rng.randrange(0, 5))], "SAME_UPPER",
                    "NOTSET", 1.5])
    n.attribute.append(helper.make_attribute(name, v, attr_type=AttributeProto.INTS if v == [] else None))
    return f"attribute {name}={v!r} added to {_node_label(n)}"[:200]


def _dims(rng, m):
    vals = [v for v in _values(m) if v.type.HasField("tensor_type")]
    if not vals:
        return None
    v = rng.choice(vals)
    tt = v.type.tensor_type
    what = rng.choice(["dim", "dim", "drop-shape", "add-dim", "param", "elem"])
    if what == "dim" and tt.HasField("shape") and tt.shape.dim:
        d = tt.shape.dim[rng.randrange(len(tt.shape.dim))]
        d.dim_value = rng.choice((-1, 0, -(1 << 40)) + _HUGE)
        return f"a dim of {v.name!r} set to {d.dim_value}"
    if what == "drop-shape":
        tt.ClearField("shape")
        return f"shape of {v.name!r} removed"
    if what == "add-dim":
        for _ in range(rng.choice([1, 2, 8])):
            tt.shape.dim.add().dim_value = rng.choice([1, 0, 3, 1 << 20])
        return f"dims added to {v.name!r} (rank {len(tt.shape.dim)})"
    if what == "param" and tt.HasField("shape") and tt.shape.dim:
        d = tt.shape.dim[rng.randrange(len(tt.shape.dim))]
        d.dim_param = rng.choice(["", "N", "s0*2", "?", "\u00e9"])
        return f"a dim of {v.name!r} made symbolic {d.dim_param!r}"
    tt.elem_type = rng.choice([0, TensorProto.STRING, TensorProto.BFLOAT16, TensorProto.COMPLEX64,
                               TensorProto.FLOAT8E4M3FN, TensorProto.UINT64, TensorProto.INT4, 99])
    return f"elem type of {v.name!r} set to {tt.elem_type}"


def _tensor_bytes(rng, m):
    inits = [(g, t) for g, t in _inits(m) if t.data_location != TensorProto.EXTERNAL]
    if not inits:
        return None
    _, t = rng.choice(inits)
    arr = _array(t) if rng.random() < 0.9 else None
    if arr is not None and not t.raw_data:  # typed fields -> raw bytes, so byte edits apply
        t.CopyFrom(numpy_helper.from_array(arr, t.name))
    what = rng.choice(["truncate", "extend", "empty", "dtype", "typed-too", "typed-count", "dims"])
    if what == "truncate":
        t.raw_data = t.raw_data[: rng.randrange(len(t.raw_data) + 1)]
    elif what == "extend":
        t.raw_data = t.raw_data + b"\x01" * rng.choice([1, 3, 8, 4096])
    elif what == "empty":
        t.ClearField("raw_data")
    elif what == "dtype":
        t.data_type = rng.choice([0, TensorProto.STRING, TensorProto.BOOL, TensorProto.INT4, TensorProto.FLOAT8E5M2,
                                  TensorProto.COMPLEX128, TensorProto.BFLOAT16, TensorProto.UINT8, 99])
    elif what == "typed-too":
        t.float_data.extend([1.0, 2.0])
    elif what == "typed-count":
        t.ClearField("raw_data")
        t.int64_data.extend(range(rng.choice([0, 1, 5])))
    else:
        i = rng.randrange(len(t.dims) + 1)
        val = rng.choice((-1, 0, 1 << 20) + _HUGE)
        if i < len(t.dims):
            t.dims[i] = val
        else:
            t.dims.append(val)
    return f"initializer {t.name!r}: {what}"


def _tensor_values(rng, m):
    """Integer constants (shapes, repeats, pads, indices, axes) set to sizes that ask for huge tensors."""
    cands = [t for _, t in _inits(m) if t.data_type in (TensorProto.INT64, TensorProto.INT32)
             and t.data_location != TensorProto.EXTERNAL]
    for n in _nodes(m):
        if n.op_type == "Constant":
            cands += [a.t for a in n.attribute if a.type == AttributeProto.TENSOR
                      and a.t.data_type in (TensorProto.INT64, TensorProto.INT32)]
    if not cands:
        return None
    t = rng.choice(cands)
    arr = _array(t)
    if arr is None or arr.size == 0:
        return None
    flat = arr.reshape(-1)
    i = rng.randrange(flat.size)
    val = rng.choice([-1, -2, 0, 1 << 16, 1 << 20, 1 << 31, (1 << 62), -(1 << 62)])
    flat[i] = np.array(val).astype(arr.dtype)
    t.CopyFrom(numpy_helper.from_array(arr, t.name))
    return f"value {i} of constant {t.name!r} set to {int(flat[i])}"


def _missing_input(rng, m):
    g = m.graph
    what = rng.choice(["node-input", "node-input", "graph-input", "initializer", "graph-output"])
    nodes = [n for n in _nodes(m) if n.input]
    if what == "node-input" and nodes:
        n = rng.choice(nodes)
        i = rng.randrange(len(n.input))
        n.input[i] = rng.choice(["", "does_not_exist", n.input[i] + "_"])
        return f"input {i} of {_node_label(n)} renamed {n.input[i]!r}"
    if what == "graph-input" and g.input:
        v = g.input[rng.randrange(len(g.input))]
        name = v.name
        g.input.remove(v)
        return f"graph input {name!r} removed"
    if what == "initializer" and g.initializer:
        t = g.initializer[rng.randrange(len(g.initializer))]
        name = t.name
        g.initializer.remove(t)
        return f"initializer {name!r} removed"
    if g.output:
        o = g.output[rng.randrange(len(g.output))]
        o.name = rng.choice(["", "nowhere", "x"])
        return f"a graph output renamed {o.name!r}"
    return None


def _cycle(rng, m):
    g = m.graph
    if len(g.node) < 1:
        return None
    i = rng.randrange(len(g.node))
    j = rng.randrange(i, len(g.node))
    a, b = g.node[i], g.node[j]
    if not a.input or not b.output:
        return None
    k = rng.randrange(len(a.input))
    a.input[k] = b.output[0]
    return f"input {k} of {_node_label(a)} reads {_node_label(b)}'s output (a cycle)"


def _duplicate(rng, m):
    g = m.graph
    what = rng.choice(["node", "output-name", "initializer", "graph-input", "node-name"])
    if what == "node" and g.node:
        n = g.node[rng.randrange(len(g.node))]
        g.node.insert(rng.randrange(len(g.node) + 1), n)
        return f"{_node_label(n)} duplicated"
    if what == "output-name" and len(g.node) >= 2:
        a, b = rng.sample(list(g.node), 2)
        if a.output and b.output:
            a.output[0] = b.output[0]
            return f"{_node_label(a)} writes {b.output[0]!r} too"
    if what == "initializer" and g.initializer:
        t = TensorProto()
        t.CopyFrom(g.initializer[rng.randrange(len(g.initializer))])
        t.dims.append(2)
        t.raw_data = t.raw_data * 2 if t.raw_data else t.raw_data
        g.initializer.append(t)
        return f"initializer {t.name!r} twice, with different shapes"
    if what == "graph-input" and g.input:
        v = g.input[rng.randrange(len(g.input))]
        g.input.append(v)
        return f"graph input {v.name!r} twice"
    nodes = _nodes(m)
    if nodes and g.initializer:
        n = rng.choice(nodes)
        if n.output:
            n.output[0] = g.initializer[0].name
            return f"{_node_label(n)} writes initializer {g.initializer[0].name!r}"
    return None


_OP_TYPES = ("Conv", "Relu", "MatMul", "Reshape", "Transpose", "Gather", "Concat", "Slice", "Add", "Softmax", "Split",
             "LSTM", "If", "Loop", "Scan", "Resize", "Einsum", "TopK", "NonMaxSuppression", "Unique", "Attention",
             "FooBar", "", "conv", "relu ", "Constant", "ConstantOfShape", "Range", "CumSum", "GRU", "Where", "Pad")
_DOMAINS = ("com.microsoft", "ai.onnx.ml", "custom", "ai.onnx", "", "pkg.onnxscript.torch_lib")


def _unknown_op(rng, m):
    nodes = _nodes(m)
    if not nodes:
        return None
    n = rng.choice(nodes)
    if rng.random() < 0.7:
        old, n.op_type = n.op_type, rng.choice(_OP_TYPES)
        return f"{n.name or '?'}: op {old} -> {n.op_type!r}"
    n.domain = rng.choice(_DOMAINS)
    return f"{_node_label(n)} in domain {n.domain!r}"


def _opset(rng, m):
    what = rng.choice(["clear", "version", "duplicate", "custom", "ir"])
    if what == "clear":
        del m.opset_import[:]
    elif what == "version" and m.opset_import:
        m.opset_import[0].version = rng.choice([0, 1, 6, 11, 13, 25, 99, -5, 1 << 40])
    elif what == "duplicate":
        m.opset_import.add(domain="", version=rng.choice([7, 18, 23]))
    elif what == "custom":
        m.opset_import.add(domain=rng.choice(_DOMAINS), version=rng.choice([0, 1, 99]))
    else:
        m.ir_version = rng.choice([0, 1, 3, 99, -1])
    return f"opset imports: {what} -> {[(o.domain, o.version) for o in m.opset_import]} ir {m.ir_version}"[:200]


def _subgraph(rng, m):
    cands = [(n, a) for n in _nodes(m) for a in n.attribute if a.type == AttributeProto.GRAPH]
    if not cands:
        return None
    n, a = rng.choice(cands)
    body = a.g
    what = rng.choice(["drop-node", "drop-output", "rename-output", "drop-input", "add-input", "clear", "drop-attr"])
    if what == "drop-node" and body.node:
        body.node.remove(body.node[rng.randrange(len(body.node))])
    elif what == "drop-output" and body.output:
        body.output.remove(body.output[rng.randrange(len(body.output))])
    elif what == "rename-output" and body.output:
        body.output[rng.randrange(len(body.output))].name = rng.choice(["x", "", "nowhere"])
    elif what == "drop-input" and body.input:
        body.input.remove(body.input[rng.randrange(len(body.input))])
    elif what == "add-input":
        body.input.append(_vi("extra", TensorProto.FLOAT, [2]))
    elif what == "clear":
        del body.node[:]
    else:
        n.attribute.remove(a)
    return f"subgraph {a.name!r} of {_node_label(n)}: {what}"


def _external(rng, m):
    inits = _inits(m)
    if not inits:
        return None
    _, t = rng.choice(inits)
    loc = rng.choice(_LOCATIONS)
    t.ClearField("raw_data")
    for f in ("float_data", "int32_data", "int64_data", "double_data"):
        t.ClearField(f)
    t.data_location = TensorProto.EXTERNAL
    del t.external_data[:]
    t.external_data.add(key="location", value=loc)
    size = int(np.prod(t.dims, dtype=np.int64)) * 4 if all(d >= 0 for d in t.dims) else 4
    if rng.random() < 0.7:
        t.external_data.add(key="offset", value=str(rng.choice([0, 0, 4, 1 << 40, -4])))
        t.external_data.add(key="length", value=str(rng.choice([size, size, 0, 1 << 40, -1, 3])))
    return f"initializer {t.name!r} external at {loc!r}"


def _many_nodes(rng, m):
    g = m.graph
    if not g.output:
        return None
    n = rng.choice([1000, 5000, 300_000])  # the last is over converters/limits.py MAX_ONNX_NODES
    out = g.output[0]
    prev = out.name
    op = rng.choice(["Identity", "Relu", "Neg"])
    for i in range(n):
        g.node.append(helper.make_node(op, [prev], [f"chain{i}"], name=f"chain{i}"))
        prev = f"chain{i}"
    out.name = prev
    return f"{n} {op} nodes appended after the output"


def _deep_nesting(rng, m):
    depth = rng.choice([10, 20, 30])  # 30 levels are 90 messages deep: under protobuf's limit of 100
    inner = helper.make_graph([helper.make_node("Identity", ["x"], ["o0"], name="leaf")], "leaf", [],
                              [_vi("o0", TensorProto.FLOAT, None)])
    leaf = inner
    for i in range(1, depth):
        node = helper.make_node("If", ["cond_deep"], [f"o{i}"], name=f"if{i}", then_branch=inner, else_branch=leaf)
        inner = helper.make_graph([node], f"g{i}", [], [_vi(f"o{i}", TensorProto.FLOAT, None)])
    g = m.graph
    g.initializer.append(numpy_helper.from_array(np.array(True), "cond_deep"))
    g.node.append(helper.make_node("If", ["cond_deep"], ["deep_out"], name="if_top", then_branch=inner,
                                   else_branch=leaf))
    g.output.append(_vi("deep_out", TensorProto.FLOAT, None))
    return f"If nested {depth} deep"


def _node_io(rng, m):
    nodes = _nodes(m)
    if not nodes:
        return None
    n = rng.choice(nodes)
    what = rng.choice(["extra-input", "drop-input", "drop-output", "extra-output", "empty-output"])
    if what == "extra-input":
        n.input.append(rng.choice([n.input[0] if n.input else "", "", "x"]))
    elif what == "drop-input" and n.input:
        del n.input[-1]
    elif what == "drop-output" and n.output:
        del n.output[-1]
    elif what == "extra-output":
        n.output.append(f"{n.name}_extra")
    elif n.output:
        n.output[0] = ""
    return f"{_node_label(n)}: {what}"


def _const_tensor(g: onnx.GraphProto, name: str, shape: list[int], value: float = 1.0) -> str:
    """``name``: a float tensor of ``shape`` made by ConstantOfShape from a constant shape (folded)."""
    g.initializer.append(numpy_helper.from_array(np.array(shape, np.int64), f"{name}_shape"))
    g.node.append(helper.make_node("ConstantOfShape", [f"{name}_shape"], [name], name=name,
                                   value=numpy_helper.from_array(np.array([value], np.float32))))
    return name


def _fold_work(rng, m):
    """A hostile node fed only by constants, which folding would evaluate: a pool with a huge
    window, a GridSample over a large grid, or a chain of ConstantOfShape that together ask for
    gigabytes (the work and byte budgets of the TFLite target's folding must stop each)."""
    g = m.graph
    what = rng.choice(["maxpool", "gridsample", "constant-chain", "tile"])
    if what == "maxpool":
        n, k = rng.choice([(2000, 1000), (600, 3)])
        x = _const_tensor(g, "fw_x", [1, 1, n, n])
        g.node.append(helper.make_node("MaxPool", [x], ["fw_out"], name="fw_pool", kernel_shape=[k, k]))
    elif what == "gridsample":
        n = rng.choice([512, 1024])
        x = _const_tensor(g, "fw_x", [1, 4, n, n])
        grid = _const_tensor(g, "fw_grid", [1, n, n, 2], 0.25)
        g.node.append(helper.make_node("GridSample", [x, grid], ["fw_out"], name="fw_grid_sample", mode="bicubic"))
    elif what == "constant-chain":
        count = rng.choice([6, 16])
        outs = [_const_tensor(g, f"fw_c{i}", [4, 1024, 1024]) for i in range(count)]
        g.node.append(helper.make_node("Sum", outs, ["fw_out"], name="fw_sum"))
    else:
        x = _const_tensor(g, "fw_x", [64, 64])
        g.initializer.append(numpy_helper.from_array(np.array([4096, 4096], np.int64), "fw_reps"))
        g.node.append(helper.make_node("Tile", [x, "fw_reps"], ["fw_out"], name="fw_tile"))
    g.output.append(_vi("fw_out", TensorProto.FLOAT, None))
    return f"{what} over folded constants as an extra output"


def _external_lie(rng, m):
    """An initializer whose external data lies about its size: dims far past the file, a length
    past the file or past the dims, an offset past the end (size and dims are checked before any
    byte is read)."""
    inits = _inits(m)
    if not inits:
        return None
    _, t = rng.choice(inits)
    for f in ("raw_data", "float_data", "int32_data", "int64_data", "double_data"):
        t.ClearField(f)
    lie = rng.choice(["dims", "length", "offset", "length-vs-dims"])
    dims, offset, length = [4, 8], 0, 4 * 8 * 4
    if lie == "dims":
        dims, length = [1 << 20, 1 << 20], None
    elif lie == "length":
        length = 3 << 30
    elif lie == "offset":
        offset = _WEIGHT_BYTES - 4
    else:
        dims = [2, 2]
    t.data_type = TensorProto.FLOAT
    del t.dims[:]
    t.dims.extend(dims)
    t.data_location = TensorProto.EXTERNAL
    del t.external_data[:]
    t.external_data.add(key="location", value=_WEIGHTS)
    t.external_data.add(key="offset", value=str(offset))
    if length is not None:
        t.external_data.add(key="length", value=str(length))
    return f"initializer {t.name!r}: external data lying about its size ({lie})"


_MODEL_OPS = [
    ("attr-delete", 8, _attr_delete),
    ("attr-retype", 8, _attr_retype),
    ("attr-value", 12, _attr_value),
    ("attr-add", 5, _attr_add),
    ("dims", 10, _dims),
    ("tensor-bytes", 10, _tensor_bytes),
    ("tensor-values", 10, _tensor_values),
    ("missing-input", 6, _missing_input),
    ("cycle", 4, _cycle),
    ("duplicate", 5, _duplicate),
    ("unknown-op", 8, _unknown_op),
    ("opset", 5, _opset),
    ("subgraph", 6, _subgraph),
    ("external", 6, _external),
    ("many-nodes", 1, _many_nodes),
    ("deep-nesting", 1, _deep_nesting),
    ("node-io", 5, _node_io),
    ("fold-work", 1, _fold_work),
    ("external-lie", 2, _external_lie),
]


# ---------------------------------------------------------------------------- byte mutations


def _bytes_truncate(rng, data: bytes) -> tuple[bytes, str]:
    k = rng.randrange(len(data) + 1)
    return data[:k], f"bytes truncated to {k} of {len(data)}"


def _bytes_flip(rng, data: bytes) -> tuple[bytes, str]:
    b = bytearray(data)
    n = rng.choice([1, 2, 8, 64])
    for _ in range(n):
        b[rng.randrange(len(b))] ^= 1 << rng.randrange(8)
    return bytes(b), f"{n} bit(s) flipped"


def _bytes_frame(rng, data: bytes) -> tuple[bytes, str]:
    junk = rng.choice([b"\x00" * 16, b"PK\x03\x04", b"\xff" * 7, b"\x0a\xff\xff\xff\xff\x0f"])
    return (junk + data, "junk prepended") if rng.random() < 0.5 else (data + junk, "junk appended")


def _bytes_garbage(rng, data: bytes) -> tuple[bytes, str]:
    n = rng.choice([0, 1, 16, 4096])
    return rng.randbytes(n), f"{n} random bytes instead"


def _bytes_length(rng, data: bytes) -> tuple[bytes, str]:
    """A length-delimited field claiming more bytes than there are (varint 2**31 - 1)."""
    i = rng.randrange(len(data) + 1)
    return data[:i] + b"\x3a\xff\xff\xff\xff\x07" + data[i:], f"a length of 2**31-1 spliced at {i}"


_BYTE_OPS = [("truncate", 3, _bytes_truncate), ("flip", 4, _bytes_flip), ("frame", 1, _bytes_frame),
             ("garbage", 1, _bytes_garbage), ("length", 1, _bytes_length)]


# ---------------------------------------------------------------------------- cases


def _pick(rng, table):
    total = sum(w for _, w, _ in table)
    x = rng.uniform(0, total)
    for name, w, fn in table:
        x -= w
        if x <= 0:
            return name, fn
    return table[-1][0], table[-1][2]


def make_case(seed: int, index: int, fixtures: list[str]) -> OnnxCase:
    """Case ``index`` of ``seed``: a base model with one to ``_MAX_STACK`` mutations."""
    rng = random.Random(f"onnx:{seed}:{index}")
    bases = base_models(fixtures)
    name, data = bases[rng.randrange(len(bases))]
    m = onnx.ModelProto()
    m.ParseFromString(data)
    steps: list[str] = []
    for _ in range(rng.choice([1, 1, 1, 2, 2, 3][: 2 * _MAX_STACK])):
        if rng.random() < 0.12:
            break  # the byte mutations below
        op_name, op = _pick(rng, _MODEL_OPS)
        desc = op(rng, m)
        if desc:
            steps.append(f"{op_name}: {desc}")
    data = m.SerializeToString()
    if not steps or rng.random() < 0.12:
        op_name, op = _pick(rng, _BYTE_OPS)
        data, desc = op(rng, data) if data else (data, "empty")
        steps.append(f"bytes {op_name}: {desc}")
    return OnnxCase(data, name, steps)


def parse(data: bytes) -> onnx.ModelProto | None:
    """``data`` as a ``ModelProto``, or None where protobuf cannot parse it (a user's problem, not pt2x's)."""
    m = onnx.ModelProto()
    try:
        m.ParseFromString(data)
    except Exception:  # noqa: BLE001 - DecodeError and friends
        return None
    return m
