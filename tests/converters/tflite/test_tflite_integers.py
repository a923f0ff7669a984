"""Integer semantics of the TFLite target: single-op ONNX models over every integer type the op's
ONNX schema allows (int8, uint8, int16, int32, int64), converted with ``to_tflite`` and run in
LiteRT in a child process (a kernel that aborts fails its case, not pytest), compared exactly
with ONNX Runtime, or with onnx's ReferenceEvaluator where ONNX Runtime has no kernel for the type.

LiteRT runs int8/uint8/int16 through its quantized kernels, which need quantization parameters
pt2x does not write; ``converters/tflite/core/int_compute.py`` holds the rule (which builtins are exact
on them, which compute in int32 with casts at the edges). Values span each type's whole range,
so wrap-around on overflow is compared too.
"""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto as TP
from onnx import defs, helper
from onnx.reference import ReferenceEvaluator

from litert_child import run_in_child
from pt2x.converters import to_tflite
from pt2x.converters.tflite.core import int_compute
from pt2x.converters.tflite.converter import convert_prepared
from pt2x.converters.tflite.prepare import load_onnx, prepare
from pt2x.converters.tflite.writer import write
from pt2x.converters.errors import ConversionError, UnsupportedOpsError

OPSET = 18
INT_TYPES = {TP.INT8: np.int8, TP.UINT8: np.uint8, TP.INT16: np.int16, TP.INT32: np.int32, TP.INT64: np.int64}
_NAME = {TP.INT8: "int8", TP.UINT8: "uint8", TP.INT16: "int16", TP.INT32: "int32", TP.INT64: "int64"}

# operand kinds: "x"/"y"/"z" graph inputs of the case's type with values from the named range;
# ("c", values): a constant of the case's type; ("i64", values): an int64 constant;
# ("b", shape): a bool graph input
S = (3, 4)
CASES = [
    # op, attrs, operands, value range of the graph inputs
    ("Add", {}, ["x", "y"], "full"), ("Sub", {}, ["x", "y"], "full"), ("Mul", {}, ["x", "y"], "full"),
    ("Div", {}, ["x", "nz"], "full"), ("Mod", {}, ["x", "nz"], "full"), ("Mod", {"fmod": 1}, ["x", "nz"], "full"),
    ("Pow", {}, ["x", ("c", [[2], [3], [0]])], "small"), ("Pow", {}, ["x", ("f", [[2.0], [1.0], [3.0]])], "small"),
    # a fractional power of a negative base is NaN, whose integer cast C++ leaves undefined
    ("Pow", {}, ["x", ("f", [[2.0], [0.5], [1.7]])], "pos"), ("Pow", {}, ["x", ("fx", (3, 1))], "pos"),
    ("Pow", {}, ["nz", ("f", [[-1.0], [2.0], [-2.0]])], "small"),  # float32: exact below 2^24
    ("Max", {}, ["x", "y"], "full"), ("Min", {}, ["x", "y"], "full"), ("Sum", {}, ["x", "y", "x"], "full"),
    ("Abs", {}, ["x"], "full"), ("Neg", {}, ["x"], "full"), ("Sign", {}, ["x"], "full"), ("Relu", {}, ["x"], "full"),
    ("Clip", {}, ["x", ("c", -7), ("c", 100)], "full"), ("Clip", {}, ["x", ("c", 0), ("c", 6)], "small"),
    ("Clip", {}, ["x", "", ("c", 5)], "full"), ("PRelu", {}, ["x", ("c", [2])], "full"),
    ("BitwiseXor", {}, ["x", "y"], "full"), ("BitwiseNot", {}, ["x"], "full"),
    ("Equal", {}, ["x", "y"], "small"), ("Less", {}, ["x", "y"], "full"), ("Greater", {}, ["x", "y"], "full"),
    ("LessOrEqual", {}, ["x", "y"], "small"), ("GreaterOrEqual", {}, ["x", "y"], "small"),
    ("Where", {}, [("b", S), "x", "y"], "full"), ("Identity", {}, ["x"], "full"),
    ("Cast", {"to": TP.INT32}, ["x"], "full"), ("Cast", {"to": TP.FLOAT}, ["x"], "full"),
    ("Cast", {"to": TP.INT8}, ["x"], "full"), ("Cast", {"to": TP.UINT8}, ["x"], "full"),
    ("Cast", {"to": TP.INT16}, ["x"], "full"),
    ("Reshape", {}, ["x", ("i64", [2, 6])], "full"), ("Transpose", {"perm": [1, 0]}, ["x"], "full"),
    ("Concat", {"axis": 1}, ["x", "y"], "full"), ("Gather", {"axis": 1}, ["x", ("i64", [3, -1, 0])], "full"),
    ("GatherElements", {"axis": 1}, ["x", ("i64", [[0, 3], [1, 1], [2, -4]])], "full"),
    ("GatherND", {}, ["x", ("i64", [[0, 1], [2, 3]])], "full"),
    ("ScatterND", {}, ["x", ("i64", [[1], [0]]), ("c", [[1, 2, 3, 4], [5, 6, 7, 8]])], "full"),
    ("Slice", {}, ["x", ("i64", [0, 1]), ("i64", [2, 4])], "full"),
    ("Squeeze", {}, ["x1", ("i64", [0])], "full"), ("Unsqueeze", {}, ["x", ("i64", [1])], "full"),
    ("Expand", {}, ["x", ("i64", [2, 3, 4])], "full"), ("Tile", {}, ["x", ("i64", [2, 1])], "full"),
    ("Pad", {}, ["x", ("i64", [1, 0, 0, 2]), ("c", 5)], "full"), ("Pad", {"mode": "reflect"}, ["x", ("i64", [1, 0, 0, 2])], "full"),
    ("Split", {"axis": 1}, ["x", ("i64", [1, 3])], "full"), ("Split", {"axis": 1, "num_outputs": 2}, ["x"], "full"),
    ("Pad", {}, ["x", ("i64", [0, 1, 2, 0])], "full"), ("Flatten", {"axis": 1}, ["x4"], "full"),
    ("DepthToSpace", {"blocksize": 2}, ["x4"], "full"), ("SpaceToDepth", {"blocksize": 2}, ["x4"], "full"),
    ("Trilu", {}, ["x"], "full"), ("Shape", {}, ["x"], "full"), ("Size", {}, ["x"], "full"),
    ("ReduceMax", {"keepdims": 0}, ["x", ("i64", [1])], "full"), ("ReduceMin", {}, ["x", ("i64", [0])], "full"),
    ("ReduceSum", {"keepdims": 0}, ["x", ("i64", [1])], "full"), ("ReduceProd", {}, ["x", ("i64", [1])], "small"),
    ("ReduceMean", {}, ["x", ("i64", [1])], "small"),
    ("ArgMax", {"axis": 1}, ["x"], "small"), ("ArgMin", {"axis": 0, "keepdims": 0}, ["x"], "small"),
    ("TopK", {"axis": -1}, ["u", ("i64", [2])], "full"), ("CumSum", {}, ["x", ("i64", 1)], "full"),
    ("MaxPool", {"kernel_shape": [2, 2]}, ["x4"], "full"),
    ("Resize", {"mode": "nearest", "coordinate_transformation_mode": "asymmetric", "nearest_mode": "floor"},
     ["x4", "", ("f", [1, 1, 2, 2])], "full"),
    ("ScatterND", {"reduction": "add"}, ["x", ("i64", [[1], [0]]), ("c", [[1, 2, 3, 4], [5, 6, 7, 8]])], "full"),
    ("Range", {}, ["s", ("c", 20), ("c", 3)], "small"),
    ("MatMul", {}, ["x", ("c", [[1, -2], [3, 0], [0, 1], [-1, 2]])], "small"),
    ("Einsum", {"equation": "ij,ij->i"}, ["x", "y"], "small"),
    ("OneHot", {}, ["ix", ("i64", 3), ("c", [-5, 7])], "full"),
    ("ReverseSequence", {"batch_axis": 0, "time_axis": 1}, ["x", ("i64", [4, 2, 1])], "full"),
]
_SHAPES = {"x": S, "y": S, "nz": S, "u": S, "x1": (1, 4), "x4": (1, 4, 4, 4), "s": (), "ix": (5,)}


def _allowed(op: str, elem: int) -> bool:
    """Whether the op's ONNX schema (at the opset pt2x maps) takes ``elem`` for its first input."""
    schema = defs.get_schema(op, OPSET)
    first = schema.inputs[0].type_str
    want = f"tensor({_NAME[elem]})"
    allowed = next((c.allowed_type_strs for c in schema.type_constraints if c.type_param_str == first), [first])
    return want in allowed


def _values(kind: str, value_range: str, np_t, shape, rng) -> np.ndarray:
    """``value_range``: "full", "small" or "pos"; ``kind``: the operand ("nz": no zeros, "ix":
    indices, "u": distinct values), else the range itself."""
    info = np.iinfo(np_t)
    # int32 and int64 (computed in int32, see docs/tflite.md) within 16 bits: sums and products fit
    lo, hi = max(info.min, -(2**15)), min(info.max, 2**15)
    if value_range == "small":
        lo, hi = max(lo, -4), 5
    if value_range == "pos":
        lo, hi = 0, 9
    x = rng.integers(lo, hi, shape, dtype=np.int64, endpoint=True)
    if kind == "full":  # the type's edges, where wrap-around shows
        x.flat[:4] = [lo, hi, -1 if lo < 0 else 1, 0]
    if kind == "ix":  # indices: within [-depth, depth)
        x = rng.integers(-3 if info.min < 0 else 0, 3, shape)
    if kind == "nz":
        x = np.where(x == 0, 3, x)
        x[0, 0] = -1 if info.min < 0 else 2
    if kind == "u":  # distinct: TopK's order among ties is not part of the comparison
        x = rng.choice(np.arange(lo, lo + 1000), x.size, replace=False).reshape(shape)
    return x.astype(np_t)


def _case(op, attrs, operands, value_range, elem, rng):
    np_t = INT_TYPES[elem]
    inputs, feeds, inits, names = [], [], [], []
    for i, spec in enumerate(operands):
        name = f"in{i}"
        if spec == "":
            names.append("")
            continue
        names.append(name)
        if isinstance(spec, str):
            shape = _SHAPES[spec]
            kind = spec if spec in ("nz", "u", "ix") else value_range
            inputs.append(helper.make_tensor_value_info(name, elem, list(shape)))
            feeds.append(_values(kind, value_range, np_t, shape, rng))
        elif spec[0] == "b":
            inputs.append(helper.make_tensor_value_info(name, TP.BOOL, list(spec[1])))
            feeds.append(rng.integers(0, 2, spec[1]).astype(bool))
        elif spec[0] == "fx":  # a float input: exponents, integral or not
            inputs.append(helper.make_tensor_value_info(name, TP.FLOAT, list(spec[1])))
            feeds.append(np.array([2.0, 0.5, 2.7], np.float32).reshape(spec[1]))
        else:
            dt = {"c": np_t, "i64": np.int64, "f": np.float32}[spec[0]]
            inits.append(onnx.numpy_helper.from_array(np.array(spec[1]).astype(dt), name))
    node = helper.make_node(op, names, [f"out{k}" for k in range(_n_outputs(op))], **attrs)
    outs = [helper.make_tensor_value_info(o, TP.UNDEFINED, None) for o in node.output]
    g = helper.make_graph([node], op, inputs, outs, inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", OPSET)], ir_version=10)
    m = onnx.shape_inference.infer_shapes(m, strict_mode=True)
    return m, feeds


def _n_outputs(op: str) -> int:
    return {"TopK": 2, "Split": 2}.get(op, 1)


def _reference(m: onnx.ModelProto, feeds) -> list[np.ndarray]:
    names = [i.name for i in m.graph.input]
    try:
        sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    except Exception:  # ONNX Runtime has no CPU kernel for this type
        with np.errstate(over="ignore"):  # its OneHot computes on - off in the narrow type
            return ReferenceEvaluator(m).run(None, dict(zip(names, feeds)))
    return sess.run(None, dict(zip(names, feeds)))


def _all_cases():
    rng = np.random.default_rng(0)
    out = []
    for i, (op, attrs, operands, value_range) in enumerate(CASES):
        for elem in INT_TYPES:
            if not _allowed(op, elem):
                continue
            m, feeds = _case(op, attrs, operands, value_range, elem, rng)
            label = f"{op} #{i}{attrs if attrs else ''} {_NAME[elem]}"
            out.append((label, m, feeds))
    return out


def _outcomes():
    """{label: 'match', 'refused: ...' or what went wrong}, and the builtins the converted cases use."""
    converted, outcomes, builtins = [], {}, set()
    for label, m, feeds in _all_cases():
        try:
            want = _reference(m, feeds)
        except Exception as e:  # neither runtime takes the case: nothing to hold pt2x to
            outcomes[label] = f"no reference: {type(e).__name__}"
            continue
        try:
            program = convert_prepared(prepare(load_onnx(m)))  # to_tflite's phases, the program kept
        except UnsupportedOpsError as e:
            outcomes[label] = f"refused: {str(e).splitlines()[-1].strip()[:160]}"
            continue
        except ConversionError as e:  # a mapper failing instead of refusing: a bug
            outcomes[label] = f"conversion error: {str(e)[:200]}"
            continue
        builtins.update(_builtin_types(program))
        converted.append((label, write(program), feeds, want))
    cases = [(data, feeds) for _, data, feeds, _ in converted]
    plain, xnnpack = run_in_child(cases), run_in_child(cases, xnnpack=True)
    for (label, _, _, want), got, got_x in zip(converted, plain, xnnpack):
        v, vx = _verdict(want, got), _verdict(want, got_x)
        outcomes[label] = v if v != "match" else vx if vx == "match" else f"with XNNPACK: {vx}"
    return outcomes, builtins


def _builtin_types(program) -> set[tuple[str, int | None]]:
    """(builtin, 8/16-bit type it reads or writes) for every operator; (builtin, None) as well."""
    out = set()
    for sub in program.subgraphs:
        for op in sub.ops:
            out.add((op.code, None))
            out.update((op.code, sub.tensors[i].dtype) for i in op.inputs + op.outputs
                       if i >= 0 and sub.tensors[i].dtype in int_compute.NARROW)
    return out


def _verdict(want, got) -> str:
    if isinstance(got, str):
        return got
    for w, g in zip(want, got):
        w = np.asarray(w)
        if g.shape != w.shape:
            return f"wrong: shape {g.shape} != {w.shape}"
        if g.dtype != w.dtype and not (w.dtype == np.int64 and g.dtype == np.int64):
            return f"wrong: dtype {g.dtype} != {w.dtype}"
        if not np.array_equal(g, w, equal_nan=g.dtype.kind == "f"):
            return f"wrong: {g.ravel()[:6]} != {w.ravel()[:6]}"
    return "match"


@pytest.fixture(scope="module")
def measured():
    return _outcomes()


@pytest.fixture(scope="module")
def outcomes(measured):
    return measured[0]


# ops whose integer forms must convert (not be refused) for every type their schema allows
MUST_CONVERT = {"Add", "Sub", "Mul", "Div", "Max", "Min", "Sum", "Abs", "Neg", "Relu", "Clip", "Equal", "Less",
                "Greater", "LessOrEqual", "GreaterOrEqual", "Where", "Identity", "Cast", "Reshape", "Transpose",
                "Concat", "Gather", "Slice", "Squeeze", "Unsqueeze", "Expand", "Tile", "Pad", "Split", "Flatten",
                "ReduceMax", "ReduceMin", "ReduceSum", "ArgMax", "ArgMin", "TopK", "CumSum", "Mod", "Sign"}


def test_every_integer_case_matches_or_is_refused(outcomes):
    bad = {k: v for k, v in outcomes.items() if not (v == "match" or v.startswith(("refused", "no reference")))}
    assert not bad, "\n".join(f"{k}: {v}" for k, v in sorted(bad.items()))


def test_integer_arithmetic_comparisons_and_data_movement_convert(outcomes):
    refused = {k: v for k, v in outcomes.items() if k.split(" ")[0] in MUST_CONVERT and v != "match"}
    assert not refused, "\n".join(f"{k}: {v}" for k, v in sorted(refused.items()))


def test_the_rule_holds_only_measured_entries(measured):
    """Every builtin and 8/16-bit type the rule calls exact was reached by a case above with that
    type, and every builtin it computes in int32 by some case (all of which match, or the first
    test fails): the table holds only measured entries."""
    reached = measured[1]
    exact = {(code, t) for code, types in int_compute.EXACT_NARROW.items() for t in types}
    wide = {(code, None) for code in int_compute.INT32_KERNEL}
    missing = (exact | wide) - reached
    assert not missing, f"entries of the rule no case reached: {sorted(missing, key=str)}"


def test_torch_small_int_program_matches_eager(tmp_path):
    """A .pt2 torch exports at test time: arithmetic (wrapping), floor division, remainder, relu,
    clamp, comparisons, max/min, abs and neg on int8, uint8, int16, int32 and int64, against eager."""
    import torch

    def ops(a, b):
        nz = torch.where(b == 0, torch.ones_like(b), b)
        signed = a.dtype != torch.uint8
        return (a + b, a - b, a * b, a // nz, a % nz, torch.relu(a) if signed else a, torch.clamp(a, 3, 100),
                a > b, a == b, torch.maximum(a, b), torch.minimum(a, b), a.abs() if signed else a, -a)

    class SmallInts(torch.nn.Module):
        def forward(self, a8, b8, au, bu, a16, b16, a32, b32, a64, b64):
            return ops(a8, b8) + ops(au, bu) + ops(a16, b16) + ops(a32, b32) + ops(a64, b64)

    g = torch.Generator().manual_seed(0)
    args = []
    for tt in (torch.int8, torch.uint8, torch.int16, torch.int32, torch.int64):
        # int64 is computed in int32 (docs/tflite.md): values whose results fit
        info = torch.iinfo(tt) if tt != torch.int64 else torch.iinfo(torch.int16)
        a, b = (torch.randint(info.min, info.max + 1, (3, 5), generator=g, dtype=torch.int64).to(tt) for _ in "ab")
        a[0, :3] = torch.tensor([info.min, info.max, 0]).to(tt)  # wrap-around at the type's edges
        # int8 -128 // -1 wraps to -128; int32's minimum // -1 is undefined (torch, ONNX Runtime and
        # LiteRT's FLOOR_MOD stop on SIGFPE), so not asked there
        b[0, :3] = torch.tensor([-1 if info.min < 0 and tt.itemsize < 4 else 2, info.max, 0]).to(tt)
        args += [a, b]
    path = str(tmp_path / "small_ints.pt2")
    torch.export.save(torch.export.export(SmallInts(), tuple(args)), path)
    case = [(to_tflite(path), [x.numpy() for x in args])]
    want = SmallInts()(*args)
    for got in run_in_child(case) + run_in_child(case, xnnpack=True):
        assert not isinstance(got, str), got
        assert len(got) == len(want)
        for i, (g_, w) in enumerate(zip(got, want)):
            assert g_.dtype == w.numpy().dtype and np.array_equal(g_, w.numpy()), (i, g_, w)


def test_an_aborting_model_fails_its_own_case_only():
    """The child-process harness itself: LiteRT's int8 ADD without quantization parameters (what
    pt2x wrote before the rule) aborts the process; that case reports the abort, the cases
    around it still run."""
    from pt2x.converters.tflite.core.model import Op, Program, Subgraph, Tensor
    from pt2x.converters.tflite.core.model import TensorType as T

    def add(dtype: int) -> bytes:
        sub = Subgraph("main", [Tensor("a", dtype, [4]), Tensor("b", dtype, [4]), Tensor("y", dtype, [4])],
                       [Op("ADD", [0, 1], [2], ("AddOptions", {"fused_activation_function": 0}))], [0, 1], [2])
        return write(Program([sub], signature_inputs=["a", "b"], signature_outputs=["y"]))

    x32, x8 = np.arange(4, dtype=np.int32), np.arange(4, dtype=np.int8)
    results = run_in_child([(add(T.INT32), [x32, x32]), (add(T.INT8), [x8, x8]), (add(T.INT32), [x32, x32])])
    assert results[1].startswith("abort: "), results[1]
    assert np.array_equal(results[0][0], 2 * x32) and np.array_equal(results[2][0], 2 * x32)
